//! Shapes computed over symbolic sizes at import. `Shape` of a value of symbolic dimensions
//! gives a small integer tensor whose elements are dimensions (`SizeValues`); the ops of
//! shape arithmetic exporters write (`Gather` of a shape, `Slice`, `Squeeze`, `Unsqueeze`,
//! `Concat` with constants, `Cast`, and `+ - * /` of sizes) compute on those elements, and the
//! ops that take a shape (`Reshape`'s target, `Slice`'s bounds) read them. In the graph such a
//! tensor is a constant of its sizes at the cost point (a placeholder no kernel reads: every
//! node that reads it computes its shapes here, or is refused), so the importer keeps the
//! elements beside it (`Importer::sizes`).

use super::node::NodeView;
use mxc_dialects::dim::infer::Target;
use mxc_dialects::dim::Dim;
use mxc_dialects::{DType, Tensor};

/// An integer tensor of rank 0 or 1 whose elements are sizes (fixed or symbolic) or negative
/// numbers (a Reshape target's `-1`).
#[derive(Clone, Debug)]
pub struct SizeValues {
    pub dtype: DType,
    /// Rank 0 (one element) or rank 1.
    pub scalar: bool,
    pub elements: Vec<Target>,
}

/// The ops computed here when an operand is a `SizeValues`.
pub const SHAPE_ARITHMETIC: &[&str] = &[
    "Add",
    "Cast",
    "Concat",
    "Div",
    "Equal",
    "Gather",
    "Identity",
    "Mul",
    "Reshape",
    "Slice",
    "Squeeze",
    "Sub",
    "Unsqueeze",
    "Where",
];

/// An operand of shape arithmetic: sizes, or a constant tensor the node reads.
pub enum Operand {
    Sizes(SizeValues),
    Constant(Tensor),
}

impl SizeValues {
    /// The sizes of `dims` as a rank-1 i64 tensor (what `Shape` gives).
    pub fn of_dims(dims: &[Dim]) -> SizeValues {
        SizeValues {
            dtype: DType::I64,
            scalar: false,
            elements: dims.iter().cloned().map(Target::Size).collect(),
        }
    }

    /// Whether some element is symbolic (else it is an ordinary constant).
    pub fn is_symbolic(&self) -> bool {
        self.elements
            .iter()
            .any(|e| matches!(e, Target::Size(d) if d.as_constant().is_none()))
    }

    /// The tensor of its values at the cost point: the placeholder in the graph.
    pub fn at_cost_point(&self) -> Tensor {
        let values: Vec<i64> = self
            .elements
            .iter()
            .map(|e| match e {
                Target::Size(d) => i64::try_from(d.at_cost_point()).unwrap_or(i64::MAX),
                Target::Negative(n) => *n,
            })
            .collect();
        let shape = if self.scalar { vec![] } else { vec![values.len()] };
        Tensor::from_i64s(self.dtype, shape, &values)
    }

    /// The elements as sizes, refusing a negative one (for `what`).
    pub fn sizes(&self, what: &str) -> Result<Vec<Dim>, String> {
        self.elements
            .iter()
            .map(|e| match e {
                Target::Size(d) => Ok(d.clone()),
                Target::Negative(n) => Err(format!("{what} of a shape holding {n} is not supported")),
            })
            .collect()
    }
}

impl Operand {
    /// The operand as sizes (a constant's integers as fixed sizes or negative numbers).
    fn values(&self) -> Result<SizeValues, String> {
        match self {
            Operand::Sizes(s) => Ok(s.clone()),
            Operand::Constant(t) if (t.dtype().is_int() || t.dtype() == DType::Bool) && t.shape().len() <= 1 => {
                Ok(SizeValues {
                    dtype: t.dtype(),
                    scalar: t.shape().is_empty(),
                    elements: t
                        .to_i64_vec()
                        .into_iter()
                        .map(|n| match n >= 0 {
                            true => Target::Size(Dim::constant(n as u64)),
                            false => Target::Negative(n),
                        })
                        .collect(),
                })
            }
            Operand::Constant(t) => Err(format!(
                "shape arithmetic with a constant of {}: only integer scalars and vectors are supported",
                t.ty
            )),
        }
    }

    fn ints(&self, what: &str) -> Result<Vec<i64>, String> {
        match self {
            Operand::Constant(t) if t.dtype().is_int() => Ok(t.to_i64_vec()),
            _ => Err(format!("{what} must be constant integers")),
        }
    }
}

/// `op` (one of `SHAPE_ARITHMETIC`) of `node` over `operands` (absent inputs `None`).
pub fn evaluate(op: &str, node: &NodeView, opset: i64, operands: &[Option<Operand>]) -> Result<SizeValues, String> {
    let operand = |i: usize| {
        operands
            .get(i)
            .and_then(Option::as_ref)
            .ok_or(format!("input {i} is missing"))
    };
    let x = operand(0)?.values()?;
    match op {
        "Identity" => Ok(x),
        "Cast" => {
            let to = node.int("to", 0)?;
            match super::tensor::dtype_of(to as i32) {
                Some(d) if d.is_int() => Ok(SizeValues { dtype: d, ..x }),
                _ => Err(format!(
                    "a cast of sizes to type {to}: only integer types are supported"
                )),
            }
        }
        "Concat" => {
            let mut elements = Vec::new();
            for (i, o) in operands.iter().enumerate() {
                let v = o.as_ref().ok_or(format!("input {i} is missing"))?.values()?;
                if v.scalar {
                    return Err("a concatenation of scalars".into());
                }
                elements.extend(v.elements);
            }
            node.int("axis", 0)?;
            Ok(SizeValues {
                scalar: false,
                elements,
                ..x
            })
        }
        "Gather" => {
            let indices = operand(1)?;
            let (picked, scalar) = match indices {
                Operand::Constant(t) => (t.to_i64_vec(), t.shape().is_empty()),
                Operand::Sizes(_) => return Err("gathering sizes at computed indices is not supported".into()),
            };
            if node.int("axis", 0)? != 0 || x.scalar {
                return Err("a gather of sizes along another axis than 0 of a vector".into());
            }
            let n = x.elements.len() as i64;
            let elements = picked
                .into_iter()
                .map(|i| {
                    let j = if i < 0 { i + n } else { i };
                    x.elements
                        .get(j as usize)
                        .cloned()
                        .filter(|_| j >= 0)
                        .ok_or(format!("index {i} of {n} sizes"))
                })
                .collect::<Result<_, _>>()?;
            Ok(SizeValues { scalar, elements, ..x })
        }
        "Slice" => {
            let (starts, ends, axes, steps) = match opset < 10 {
                true => (
                    node.opt_ints("starts")?.ok_or("missing attribute `starts`")?,
                    node.opt_ints("ends")?.ok_or("missing attribute `ends`")?,
                    node.opt_ints("axes")?,
                    None,
                ),
                false => (
                    operand(1)?.ints("starts")?,
                    operand(2)?.ints("ends")?,
                    operands
                        .get(3)
                        .and_then(Option::as_ref)
                        .map(|o| o.ints("axes"))
                        .transpose()?,
                    operands
                        .get(4)
                        .and_then(Option::as_ref)
                        .map(|o| o.ints("steps"))
                        .transpose()?,
                ),
            };
            let one_axis = axes.as_ref().is_none_or(|a| a == &[0] || a == &[-1]) && starts.len() == 1;
            let step = steps.as_ref().map_or(Some(1), |s| s.first().copied()).unwrap_or(1);
            if !one_axis || ends.len() != 1 || step != 1 || x.scalar {
                return Err("a slice of sizes other than one range of a vector with step 1".into());
            }
            let n = x.elements.len() as i64;
            let at = |i: i64| (if i < 0 { i.saturating_add(n) } else { i }).clamp(0, n) as usize;
            let (start, end) = (at(starts[0]), at(ends[0]));
            let elements = x.elements[start..end.max(start)].to_vec();
            Ok(SizeValues { elements, ..x })
        }
        "Squeeze" | "Unsqueeze" => {
            let axes = match opset < 13 {
                true => node.opt_ints("axes")?,
                false => operands
                    .get(1)
                    .and_then(Option::as_ref)
                    .map(|o| o.ints("axes"))
                    .transpose()?,
            };
            let first_axis = axes.as_ref().is_none_or(|a| a == &[0] || a == &[-1]);
            match (op, x.scalar, x.elements.len(), first_axis) {
                ("Squeeze", false, 1, true) => Ok(SizeValues { scalar: true, ..x }),
                ("Unsqueeze", true, _, true) if axes.is_some() => Ok(SizeValues { scalar: false, ..x }),
                _ => Err(format!("{op} of sizes other than between a scalar and a vector of one")),
            }
        }
        "Reshape" => {
            let target = operand(1)?.ints("a reshape's target")?;
            // a 0 in a target of one element copies it: the same as its length
            let allow_zero = node.int("allowzero", 0)? != 0;
            let n = x.elements.len() as i64;
            let target: Vec<i64> = target
                .iter()
                .map(|&m| if m == 0 && !allow_zero { n } else { m })
                .collect();
            match target.as_slice() {
                [] if n == 1 => Ok(SizeValues { scalar: true, ..x }),
                [m] if *m == n || *m == -1 => Ok(SizeValues { scalar: false, ..x }),
                _ => Err(format!("a reshape of {n} sizes to {target:?}")),
            }
        }
        "Equal" => equal(&x, &operand(1)?.values()?),
        "Where" => {
            let cond = operand(0)?.values()?;
            let (a, b) = (operand(1)?.values()?, operand(2)?.values()?);
            let n = [cond.elements.len(), a.elements.len(), b.elements.len()]
                .into_iter()
                .max()
                .unwrap_or(0);
            let at = |v: &SizeValues, i: usize| v.elements[i.min(v.elements.len() - 1)].clone();
            let elements = (0..n)
                .map(|i| match at(&cond, i) {
                    Target::Size(c) => match c.as_constant() {
                        Some(0) => Ok(at(&b, i)),
                        Some(_) => Ok(at(&a, i)),
                        None => Err("a select of sizes on a symbolic condition".to_string()),
                    },
                    Target::Negative(_) => Ok(at(&a, i)),
                })
                .collect::<Result<_, _>>()?;
            Ok(SizeValues {
                dtype: a.dtype,
                scalar: cond.scalar && a.scalar && b.scalar,
                elements,
            })
        }
        _ => arithmetic(op, &x, &operand(1)?.values()?),
    }
}

/// `a == b` element by element, a one-element operand broadcast: decided at import, where the
/// sizes are equal expressions, or a symbolic size's range leaves out the other's value; a
/// bool vector of fixed values.
fn equal(a: &SizeValues, b: &SizeValues) -> Result<SizeValues, String> {
    let n = a.elements.len().max(b.elements.len());
    let at = |v: &SizeValues, i: usize| v.elements[i.min(v.elements.len() - 1)].clone();
    let elements = (0..n)
        .map(|i| {
            let same = match (at(a, i), at(b, i)) {
                (Target::Negative(x), Target::Negative(y)) => x == y,
                (Target::Negative(_), _) | (_, Target::Negative(_)) => false,
                (Target::Size(x), Target::Size(y)) if x == y => true,
                (Target::Size(x), Target::Size(y)) => {
                    let ((x_lo, x_hi), (y_lo, y_hi)) = (x.bounds(), y.bounds());
                    match x_hi < y_lo || y_hi < x_lo {
                        true => false,
                        false => return Err(format!("whether {x} equals {y} depends on the sizes")),
                    }
                }
            };
            Ok(Target::Size(Dim::constant(same as u64)))
        })
        .collect::<Result<_, _>>()?;
    Ok(SizeValues {
        dtype: DType::Bool,
        scalar: a.scalar && b.scalar,
        elements,
    })
}

/// `a op b` element by element (`Add`, `Sub`, `Mul`, `Div`), a one-element operand broadcast.
fn arithmetic(op: &str, a: &SizeValues, b: &SizeValues) -> Result<SizeValues, String> {
    let (xs, ys) = (a.sizes(op)?, b.sizes(op)?);
    let n = xs.len().max(ys.len());
    if !(xs.len() == n || xs.len() == 1) || !(ys.len() == n || ys.len() == 1) {
        return Err(format!("{op} of {} and {} sizes", xs.len(), ys.len()));
    }
    let elements = (0..n)
        .map(|i| {
            let (x, y) = (&xs[i.min(xs.len() - 1)], &ys[i.min(ys.len() - 1)]);
            let r = match op {
                "Add" => x.add(y),
                "Sub" => x.sub(y),
                "Mul" => x.mul(y),
                _ => match y.as_constant() {
                    Some(k) => x.floor_div(k),
                    None => return Err(format!("a division of sizes by the symbolic {y}")),
                },
            };
            r.map(Target::Size).map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    Ok(SizeValues {
        dtype: a.dtype,
        scalar: a.scalar && b.scalar,
        elements,
    })
}
