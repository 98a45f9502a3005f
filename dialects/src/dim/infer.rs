//! Shape inference over symbolic dimensions: the result dimensions of the ops whose sizes are
//! arithmetic on their operands' (numpy broadcasting and matrix products, sliding windows,
//! reshapes, concatenation, slices), each proving what the op requires of its operands or
//! refusing, naming the dimensions and why. Two dimensions are the same size when their
//! canonical expressions are equal (`Dim::same_size`); nothing weaker is assumed.

use super::poly::Poly;
use super::{Dim, DimError};

impl Dim {
    /// Whether the two are the same size at every value of their symbols (equal expressions).
    pub fn same_size(&self, other: &Dim) -> bool {
        self.expr == other.expr
    }

    /// `self / other` where `other` divides every term of `self` (`b * s * 768 / (12 * b * s)`
    /// is 64), else `None`.
    fn exact_div(&self, other: &Dim) -> Option<Dim> {
        let expr = self.expr.exact_div(&other.expr)?;
        Some(Dim { expr, ..self.clone() }.pruned())
    }

    /// `max(self - other, 0)`.
    fn clamped_difference(&self, other: &Dim) -> Result<Dim, DimError> {
        let d = self.combine(other, |a, b| a.add(&b.scale(-1)?))?;
        match d.bounds().0 >= 0 {
            true => Ok(d),
            false => d.maximum(&Dim::constant(0)),
        }
    }
}

fn refuse(message: String) -> DimError {
    DimError::Unproven(message)
}

fn show(dims: &[Dim]) -> String {
    let dims: Vec<String> = dims.iter().map(Dim::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// The numpy broadcast of two shapes: aligned from the last dimension, each pair the same size
/// or one of them 1.
pub fn broadcast(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, DimError> {
    let rank = a.len().max(b.len());
    let at = |s: &[Dim], i: usize| match (i + s.len()).checked_sub(rank) {
        Some(j) => s[j].clone(),
        None => Dim::constant(1),
    };
    (0..rank)
        .map(|i| {
            let (x, y) = (at(a, i), at(b, i));
            match (x.as_constant(), y.as_constant()) {
                _ if x.same_size(&y) => Ok(x),
                (Some(1), _) => Ok(y),
                (_, Some(1)) => Ok(x),
                _ => Err(refuse(format!(
                    "{} and {} do not broadcast: {x} and {y} are not the same size, and neither is 1",
                    show(a),
                    show(b)
                ))),
            }
        })
        .collect()
}

/// The result of a matrix product of operands of at least two dimensions: their batch
/// dimensions broadcast, then `a`'s rows and `b`'s columns; `a`'s columns must be `b`'s rows.
pub fn matmul(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, DimError> {
    let (ra, rb) = (a.len(), b.len());
    if ra < 2 || rb < 2 {
        return Err(refuse(format!(
            "a product of {} and {} needs matrices",
            show(a),
            show(b)
        )));
    }
    if !a[ra - 1].same_size(&b[rb - 2]) {
        return Err(refuse(format!(
            "{} times {}: {} columns and {} rows are not the same size",
            show(a),
            show(b),
            a[ra - 1],
            b[rb - 2]
        )));
    }
    let mut out = broadcast(&a[..ra - 2], &b[..rb - 2])?;
    out.extend([a[ra - 2].clone(), b[rb - 1].clone()]);
    Ok(out)
}

/// A sliding window along one dimension (convolution, pooling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub kernel: u64,
    pub stride: u64,
    pub dilation: u64,
    pub pad_begin: u64,
    pub pad_end: u64,
    /// Pooling's `ceil_mode`: a last window that starts inside the input counts.
    pub ceil: bool,
}

/// The positions of window `w` along an input dimension `input`:
/// `(input + pads - span) / stride + 1`, the division rounded down (up with `ceil`), where the
/// span `dilation * (kernel - 1) + 1` must fit in the padded input; with `ceil`, a last window
/// that would start in the end padding is dropped, as ONNX says (at most
/// `(input + pad_begin - 1) / stride + 1` positions).
pub fn window(input: &Dim, w: &Window) -> Result<Dim, DimError> {
    let span = w.dilation * (w.kernel.max(1) - 1) + 1;
    let padded = input.add(&Dim::constant(w.pad_begin + w.pad_end))?;
    padded.require_at_least(span as i64, &format!("the padded input of a window spanning {span}"))?;
    let room = padded.sub(&Dim::constant(span))?;
    let stride = w.stride.max(1);
    let one = Dim::constant(1);
    if !w.ceil {
        return room.floor_div(stride)?.add(&one);
    }
    let positions = room.add(&Dim::constant(stride - 1))?.floor_div(stride)?.add(&one)?;
    let starts_inside = input
        .add(&Dim::constant(w.pad_begin))?
        .sub(&one)?
        .floor_div(stride)?
        .add(&one)?;
    positions.minimum(&starts_inside)
}

/// ONNX Reshape: each target entry a size, `0` (with `allowzero` off) the input's dimension
/// there, `-1` what is left of the input's elements; the element counts must be provably equal
/// and a `-1` must divide exactly.
pub fn reshape(input: &[Dim], target: &[i64], allowzero: bool) -> Result<Vec<Dim>, DimError> {
    let entries: Vec<Target> = target
        .iter()
        .map(|&t| match t {
            t if t >= 0 => Target::Size(Dim::constant(t as u64)),
            t => Target::Negative(t),
        })
        .collect();
    reshape_to(input, &entries, allowzero)
}

/// An entry of a Reshape target: a size (fixed or symbolic, from a shape computed over the
/// symbols), or a negative number (`-1`: inferred; any other is refused).
#[derive(Clone, Debug)]
pub enum Target {
    Size(Dim),
    Negative(i64),
}

/// ONNX Reshape to entries that may be symbolic: a fixed `0` (with `allowzero` off) copies the
/// input's dimension there, `-1` takes what is left, as `reshape` says.
pub fn reshape_to(input: &[Dim], target: &[Target], allowzero: bool) -> Result<Vec<Dim>, DimError> {
    let shown: Vec<String> = target
        .iter()
        .map(|t| match t {
            Target::Size(d) => d.to_string(),
            Target::Negative(n) => n.to_string(),
        })
        .collect();
    let fail = |why: String| refuse(format!("reshape {} to [{}]: {why}", show(input), shown.join(", ")));
    let total = product(input)?;
    let mut out: Vec<Option<Dim>> = Vec::with_capacity(target.len());
    for (i, t) in target.iter().enumerate() {
        out.push(match t {
            Target::Negative(-1) => None,
            Target::Size(d) if d.as_constant() == Some(0) && !allowzero => Some(
                input
                    .get(i)
                    .cloned()
                    .ok_or_else(|| fail(format!("entry {i} copies a dimension the input does not have")))?,
            ),
            Target::Size(d) => Some(d.clone()),
            Target::Negative(t) => return Err(fail(format!("entry {i} is {t}"))),
        });
    }
    if out.iter().filter(|d| d.is_none()).count() > 1 {
        return Err(fail("more than one -1".into()));
    }
    let known: Vec<Dim> = out.iter().flatten().cloned().collect();
    let known = product(&known)?;
    let inferred = match known.as_constant() {
        _ if out.iter().all(Option::is_some) => None,
        Some(0) => return Err(fail("a -1 beside a 0 size is undetermined".into())),
        Some(c) => {
            total.require_divisible(c).map_err(|e| fail(e.to_string()))?;
            Some(total.floor_div(c)?)
        }
        None => Some(
            total
                .exact_div(&known)
                .ok_or_else(|| fail(format!("{known} does not divide {total} at every size in range")))?,
        ),
    };
    let out: Vec<Dim> = out
        .into_iter()
        .map(|d| {
            d.or_else(|| inferred.clone())
                .ok_or_else(|| fail("nothing to infer the -1 from".into()))
        })
        .collect::<Result<_, _>>()?;
    if !product(&out)?.same_size(&total) {
        return Err(fail(format!("{} elements cannot become {}", total, product(&out)?)));
    }
    Ok(out)
}

/// The product of dimensions (1 for none).
fn product(dims: &[Dim]) -> Result<Dim, DimError> {
    dims.iter().try_fold(Dim::constant(1), |acc, d| acc.mul(d))
}

/// Concatenation along `axis`: the sum of the inputs' sizes there, every other dimension the
/// same size in all of them.
pub fn concat(inputs: &[Vec<Dim>], axis: usize) -> Result<Vec<Dim>, DimError> {
    let Some(first) = inputs.first() else {
        return Err(refuse("a concatenation of nothing".into()));
    };
    if axis >= first.len() {
        return Err(refuse(format!("axis {axis} of {}", show(first))));
    }
    let mut out = first.clone();
    for other in &inputs[1..] {
        let agrees = other.len() == first.len() && (0..first.len()).all(|d| d == axis || other[d].same_size(&first[d]));
        if !agrees {
            return Err(refuse(format!(
                "{} and {} differ other than along axis {axis}",
                show(first),
                show(other)
            )));
        }
        out[axis] = out[axis].add(&other[axis])?;
    }
    Ok(out)
}

/// ONNX Slice of one dimension with a positive `step`: `start` and `end` counted from the end
/// when negative, both clamped to `[0, dim]`, then `ceil((end - start) / step)` elements, none
/// when the end is not after the start.
pub fn slice(dim: &Dim, start: i64, end: i64, step: i64) -> Result<Dim, DimError> {
    if step <= 0 {
        return Err(refuse(format!(
            "a slice of {dim} with step {step}: only positive steps are supported"
        )));
    }
    let zero = Dim::constant(0);
    let place = |at: i64| -> Result<Dim, DimError> {
        match at >= 0 {
            true => dim.minimum(&Dim::constant(at as u64)),
            false => dim.clamped_difference(&Dim::constant(at.unsigned_abs())),
        }
    };
    let (first, last) = (place(start)?, place(end)?);
    let length = last.clamped_difference(&first)?;
    let step = step as u64;
    let count = length.add(&Dim::constant(step - 1))?.floor_div(step)?;
    count.maximum(&zero)
}

impl Poly {
    /// `self / other` for a one-term `other` that divides every term of `self` (its atoms
    /// among the term's, its coefficient dividing the term's), else `None`.
    pub fn exact_div(&self, other: &Poly) -> Option<Poly> {
        let mut terms = other.terms();
        let (divisor, k) = terms.next()?;
        if terms.next().is_some() {
            return None;
        }
        self.terms().try_fold(Poly::default(), |acc, (monomial, c)| {
            if c % k != 0 {
                return None;
            }
            let mut rest = monomial.to_vec();
            for atom in divisor {
                let at = rest.iter().position(|a| a == atom)?;
                rest.remove(at);
            }
            acc.add(&Poly::term(rest, c / k))
        })
    }
}
