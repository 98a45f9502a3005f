//! The functions rule expressions may call: facts about tensors (type, shape, constant
//! value), predicates, and the computations that produce new attribute values (permutation
//! composition and inverse, per-channel shapes, ...) or new constants (`scalar`). One table:
//! adding a function is adding a row.

use super::value::{Sort, TensorFacts, Value};
use mxc_dialects::dim::Dim;

/// A function callable from rule expressions.
pub struct Func {
    pub name: &'static str,
    pub params: &'static [Sort],
    pub result: Sort,
    /// One line for `docs/rules.md` and error messages.
    pub doc: &'static str,
    /// `None` when a fact is unknown or the arguments are out of the function's domain; the
    /// rule then does not fire.
    pub eval: fn(&[Value]) -> Option<Value>,
}

use Sort::*;

/// Every function, by name.
pub const FUNCS: &[Func] = &[
    Func {
        name: "dtype",
        params: &[Tensor],
        result: DType,
        doc: "element type of a tensor",
        eval: |a| Some(Value::DType(ty(&a[0])?.dtype)),
    },
    Func {
        name: "rank",
        params: &[Tensor],
        result: Int,
        doc: "number of dimensions",
        eval: |a| Some(Value::Int(ty(&a[0])?.rank() as i64)),
    },
    Func {
        name: "shape",
        params: &[Tensor],
        result: Ints,
        doc: "the dimensions",
        eval: |a| Some(Value::Ints(fixed(&a[0])?.shape.iter().map(|&d| d as i64).collect())),
    },
    Func {
        name: "type",
        params: &[Tensor],
        result: Type,
        doc: "element type and shape together",
        eval: |a| Some(Value::Type(ty(&a[0])?.clone())),
    },
    Func {
        name: "numel",
        params: &[Tensor],
        result: Int,
        doc: "number of elements",
        eval: |a| Some(Value::Int(fixed(&a[0])?.num_elements() as i64)),
    },
    Func {
        name: "const",
        params: &[Tensor],
        result: Bool,
        doc: "the value is a known constant",
        eval: |a| Some(Value::Bool(facts(&a[0])?.constant.is_some())),
    },
    Func {
        name: "splat",
        params: &[Tensor, Float],
        result: Bool,
        doc: "a constant whose every element equals the number",
        eval: splat,
    },
    Func {
        name: "is_float",
        params: &[DType],
        result: Bool,
        doc: "a floating-point element type",
        eval: |a| Some(Value::Bool(dtype(&a[0])?.is_float())),
    },
    Func {
        name: "is_int",
        params: &[DType],
        result: Bool,
        doc: "an integer element type",
        eval: |a| Some(Value::Bool(dtype(&a[0])?.is_int())),
    },
    Func {
        name: "is_unsigned",
        params: &[DType],
        result: Bool,
        doc: "an unsigned integer element type",
        eval: |a| Some(Value::Bool(dtype(&a[0])?.is_unsigned_int())),
    },
    Func {
        name: "is_half",
        params: &[DType],
        result: Bool,
        doc: "f16 or bf16 (computed on in f32, rounded once per op result)",
        eval: |a| Some(Value::Bool(dtype(&a[0])?.is_half())),
    },
    Func {
        name: "fits_exactly_in",
        params: &[DType, DType],
        result: Bool,
        doc: "every value of the first element type is one of the second (a cast there and back is the identity)",
        eval: |a| Some(Value::Bool(dtype(&a[0])?.fits_exactly_in(dtype(&a[1])?))),
    },
    Func {
        name: "bits",
        params: &[DType],
        result: Int,
        doc: "the bits of one element of the element type (`bits(dtype(?a)) == 8`: bytes)",
        eval: |a| Some(Value::Int(dtype(&a[0])?.bits() as i64)),
    },
    Func {
        name: "values_in",
        params: &[Tensor, DType],
        result: Bool,
        doc: "a constant whose every element is a value of the integer element type (i32 weights that are all i8 values)",
        eval: values_in,
    },
    Func {
        name: "finite_ratios",
        params: &[Tensor, Tensor],
        result: Bool,
        doc: "constants whose every element over the second's one element is finite in f32 (a division by a scale folded into a constant: no zero, infinity or overflow)",
        eval: finite_ratios,
    },
    Func {
        name: "divides",
        params: &[Int, Int],
        result: Bool,
        doc: "the first integer (positive) divides the second (`divides(2, dim(?x, 3))`: an even number of channels)",
        eval: |a| {
            let (d, n) = (int(&a[0])?, int(&a[1])?);
            (d > 0).then(|| Value::Bool(n % d == 0))
        },
    },
    Func {
        name: "len",
        params: &[Ints],
        result: Int,
        doc: "length of a list",
        eval: |a| Some(Value::Int(ints(&a[0])?.len() as i64)),
    },
    Func {
        name: "all",
        params: &[Ints, Int],
        result: Bool,
        doc: "every element of the list equals the integer",
        eval: all,
    },
    Func {
        name: "is_identity",
        params: &[Ints],
        result: Bool,
        doc: "the permutation leaves every axis in place",
        eval: is_identity,
    },
    Func {
        name: "compose",
        params: &[Ints, Ints],
        result: Ints,
        doc: "`perm` of transposing by the first, then by the second",
        eval: compose,
    },
    Func {
        name: "inverse",
        params: &[Ints],
        result: Ints,
        doc: "the permutation that undoes this one",
        eval: inverse,
    },
    Func {
        name: "channel_shape",
        params: &[Tensor, Int],
        result: Ints,
        doc: "the tensor's rank, 1 everywhere but the axis, which keeps its size (a per-channel `shape`)",
        eval: channel_shape,
    },
    Func {
        name: "shape_at_rank",
        params: &[Tensor, Int],
        result: Ints,
        doc: "the shape with 1s in front up to the rank: how broadcasting aligns it with a tensor of that rank",
        eval: shape_at_rank,
    },
    Func {
        name: "scalar",
        params: &[Float, DType],
        result: Tensor,
        doc: "a new rank-0 constant of the element type holding the number (an operand on the right side)",
        eval: scalar,
    },
    Func {
        name: "value",
        params: &[Tensor],
        result: Float,
        doc: "the number a constant of one element holds (an attribute from a constant, such as `epsilon`)",
        eval: value,
    },
    Func {
        name: "times",
        params: &[Float, Float],
        result: Float,
        doc: "the product of two numbers (scales folded into one attribute)",
        eval: |a| Some(Value::Float(a[0].as_f64()? * a[1].as_f64()?)),
    },
    Func {
        name: "ratio",
        params: &[Float, Float],
        result: Float,
        doc: "the first number over the second (a divisor made a scale); unknown for a divisor of 0",
        eval: |a| {
            let (x, y) = (a[0].as_f64()?, a[1].as_f64()?);
            (y != 0.0).then(|| Value::Float(x / y))
        },
    },
    Func {
        name: "last_axis",
        params: &[Tensor],
        result: Int,
        doc: "the last axis: the rank minus 1",
        eval: |a| Some(Value::Int(ty(&a[0])?.rank().checked_sub(1)? as i64)),
    },
    Func {
        name: "single",
        params: &[Ints],
        result: Int,
        doc: "the one element of a one-element list (the axis of `axes=[a]`)",
        eval: |a| match ints(&a[0])? {
            [x] => Some(Value::Int(*x)),
            _ => None,
        },
    },
    Func {
        name: "dim",
        params: &[Tensor, Int],
        result: Int,
        doc: "the size of one dimension (axis from 0)",
        eval: |a| {
            let axis = usize::try_from(int(&a[1])?).ok()?;
            Some(Value::Int(ty(&a[0])?.fixed_dim(axis)? as i64))
        },
    },
    Func {
        name: "matrix_shape",
        params: &[Tensor],
        result: Ints,
        doc: "`[d0, rest]`: the tensor as a matrix of its first dimension's rows (conv weights `[M, kh, kw, C]` as `[M, kh * kw * C]`)",
        eval: |a| {
            let t = fixed(&a[0])?;
            let rows = *t.shape.first()?;
            let cols = t.num_elements().checked_div(rows)?;
            Some(Value::Ints(vec![rows as i64, cols as i64]))
        },
    },
    Func {
        name: "kernel_row_bytes",
        params: &[Tensor],
        result: Int,
        doc: "`kw * C` of channels-last conv weights `[M, kh, kw, C]`: the depths of one kernel row",
        eval: |a| {
            let [_, _, kw, c] = weights_shape(&a[0])?;
            Some(Value::Int((kw * c) as i64))
        },
    },
    Func {
        name: "kernel_rows_shape",
        params: &[Tensor],
        result: Ints,
        doc: "`[M, kh, kw * C]`: channels-last conv weights `[M, kh, kw, C]` as kernel rows",
        eval: |a| {
            let [m, kh, kw, c] = weights_shape(&a[0])?;
            Some(Value::Ints(vec![m as i64, kh as i64, (kw * c) as i64]))
        },
    },
    Func {
        name: "kernel_rows_padding_shape",
        params: &[Tensor],
        result: Ints,
        doc: "`[M, kh, p]`: the zeros that pad each kernel row of `[M, kh, kw, C]` weights to a multiple of 4 depths; unknown when none are needed",
        eval: |a| {
            let [m, kh, kw, c] = weights_shape(&a[0])?;
            let padding = (kw * c).next_multiple_of(4) - kw * c;
            (padding > 0).then(|| Value::Ints(vec![m as i64, kh as i64, padding as i64]))
        },
    },
    Func {
        name: "kernel_rows_matrix_shape",
        params: &[Tensor],
        result: Ints,
        doc: "`[M, kh * P]`: `[M, kh, kw, C]` weights as a matrix of kernel rows, each padded to `P`, `kw * C` rounded up to a multiple of 4",
        eval: |a| {
            let [m, kh, kw, c] = weights_shape(&a[0])?;
            Some(Value::Ints(vec![m as i64, (kh * (kw * c).next_multiple_of(4)) as i64]))
        },
    },
    Func {
        name: "rows_shape",
        params: &[Tensor],
        result: Ints,
        doc: "`[rest, last]`: the tensor as a matrix of rows of its last dimension (an image `[N, H, W, C]` as its pixels, `[N * H * W, C]`)",
        eval: |a| {
            let t = fixed(&a[0])?;
            let cols = *t.shape.last()?;
            let rows = t.num_elements().checked_div(cols)?;
            Some(Value::Ints(vec![rows as i64, cols as i64]))
        },
    },
    Func {
        name: "row_shape",
        params: &[Tensor],
        result: Ints,
        doc: "`[1, numel]`: the tensor's values (in any shape) as one row, one per column of a matrix it scales",
        eval: |a| Some(Value::Ints(vec![1, fixed(&a[0])?.num_elements() as i64])),
    },
    Func {
        name: "channels_shape",
        params: &[Tensor, Int],
        result: Ints,
        doc: "`[numel, 1, ..., 1]` of the rank: a vector of one value per channel (in any shape) made to broadcast along axis 1 of a result of one more dimension (`[M, 1, 1]` for an NCHW image)",
        eval: |a| {
            let (t, rank) = (fixed(&a[0])?, int(&a[1])?);
            let mut shape = vec![1; usize::try_from(rank).ok().filter(|&r| r >= 1)?];
            shape[0] = t.num_elements() as i64;
            Some(Value::Ints(shape))
        },
    },
    Func {
        name: "window_hw",
        params: &[Tensor],
        result: Ints,
        doc: "`[kh, kw]` of channels-last conv weights `[M, kh, kw, C]`",
        eval: |a| match fixed(&a[0])?.shape[..] {
            [_, kh, kw, _] => Some(Value::Ints(vec![kh as i64, kw as i64])),
            _ => None,
        },
    },
    Func {
        name: "at",
        params: &[Ints, Int],
        result: Int,
        doc: "element `i` of a list (from 0): `at(?p, ?a)` is the axis a transpose by `?p` moves to axis `?a`",
        eval: |a| {
            let i = usize::try_from(int(&a[1])?).ok()?;
            Some(Value::Int(*ints(&a[0])?.get(i)?))
        },
    },
    Func {
        name: "conv_nhwc_shape",
        params: &[Tensor, Tensor, Ints],
        result: Ints,
        doc: "the result shape of a stride-1, dilation-1 `conv_nhwc` of the image with the weights and the pads \
              (sizes over the image's symbols where it has some)",
        eval: |a| {
            let (x, w) = (ty(&a[0])?, fixed(&a[1])?);
            let pads = ints(&a[2])?;
            let (&[m, kh, kw, _], &[pt, pl, pb, pr]) = (&w.shape[..], pads) else {
                return None;
            };
            let [n, h, wd, _] = <[Dim; 4]>::try_from(x.dims()).ok()?;
            // each side less the window's reach past one pixel: `h + pt + pb - (kh - 1)`
            let side = |size: &Dim, pads: i64, k: usize| -> Option<Dim> {
                let reach = pads.checked_sub(k as i64 - 1)?;
                let out = match reach >= 0 {
                    true => size.add(&Dim::constant(reach as u64)),
                    false => size.sub(&Dim::constant(reach.unsigned_abs())),
                };
                out.ok().filter(|d| d.bounds().0 > 0)
            };
            let shape = [n, side(&h, pt + pb, kh)?, side(&wd, pl + pr, kw)?, Dim::constant(m as u64)];
            match shape.iter().map(Dim::as_constant).collect::<Option<Vec<u64>>>() {
                Some(sizes) => Some(Value::Ints(sizes.iter().map(|&s| s as i64).collect())),
                None => Some(Value::Sizes(shape.to_vec())),
            }
        },
    },
    Func {
        name: "flip",
        params: &[Int],
        result: Int,
        doc: "0 <-> 1 (for `trans_a`/`trans_b` flags)",
        eval: flip,
    },
];

/// The function called `name`.
pub fn lookup(name: &str) -> Option<&'static Func> {
    FUNCS.iter().find(|f| f.name == name)
}

fn facts(v: &Value) -> Option<&TensorFacts> {
    match v {
        Value::Tensor(f) => Some(f),
        _ => None,
    }
}

fn ty(v: &Value) -> Option<&mxc_dialects::TensorType> {
    facts(v)?.ty.as_ref()
}

/// The type where its sizes are fixed: the functions that compute on sizes give nothing for
/// symbolic ones (their sizes at the cost point hold at one size only), so a rule that needs
/// them does not apply there.
fn fixed(v: &Value) -> Option<&mxc_dialects::TensorType> {
    ty(v).filter(|t| !t.is_symbolic())
}

fn dtype(v: &Value) -> Option<mxc_dialects::DType> {
    match v {
        Value::DType(d) => Some(*d),
        _ => None,
    }
}

fn ints(v: &Value) -> Option<&[i64]> {
    match v {
        Value::Ints(v) => Some(v),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(v) => Some(*v),
        _ => None,
    }
}

/// A permutation of `0..len` as indices, or `None`.
fn perm(v: &Value) -> Option<Vec<usize>> {
    let p = ints(v)?;
    let mut seen = vec![false; p.len()];
    p.iter()
        .map(|&i| {
            let i = usize::try_from(i).ok().filter(|&i| i < p.len() && !seen[i])?;
            seen[i] = true;
            Some(i)
        })
        .collect()
}

fn splat(a: &[Value]) -> Option<Value> {
    let c = &*facts(&a[0])?.constant.as_ref()?.tensor;
    let v = a[1].as_f64()?;
    Some(Value::Bool((0..c.len()).all(|i| c.get_f64(i) == v)))
}

fn values_in(a: &[Value]) -> Option<Value> {
    let c = facts(&a[0])?.constant.as_ref()?;
    let d = dtype(&a[1])?;
    if !d.is_int() || d.size() > 4 {
        return None;
    }
    let Some((least, greatest)) = c.range() else {
        // no integers (or none at all): only an empty integer tensor holds no other value
        return (c.tensor.dtype().is_int() && c.tensor.is_empty()).then_some(Value::Bool(true));
    };
    let bits = d.bits() as u32;
    let (lo, hi) = match d.is_signed_int() {
        true => (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1),
        false => (0, (1i64 << bits) - 1),
    };
    Some(Value::Bool(lo <= least && greatest <= hi))
}

/// The shape of a tensor of rank 4 (conv weights).
fn weights_shape(v: &Value) -> Option<[usize; 4]> {
    fixed(v)?.shape.as_slice().try_into().ok()
}

fn finite_ratios(a: &[Value]) -> Option<Value> {
    let c = &*facts(&a[0])?.constant.as_ref()?.tensor;
    let y = &*facts(&a[1])?.constant.as_ref()?.tensor;
    if y.len() != 1 {
        return None;
    }
    let y = y.get_f64(0) as f32;
    Some(Value::Bool((0..c.len()).all(|i| (c.get_f64(i) as f32 / y).is_finite())))
}

fn all(a: &[Value]) -> Option<Value> {
    let v = int(&a[1])?;
    Some(Value::Bool(ints(&a[0])?.iter().all(|&x| x == v)))
}

fn is_identity(a: &[Value]) -> Option<Value> {
    let p = perm(&a[0])?;
    Some(Value::Bool(p.iter().enumerate().all(|(i, &x)| i == x)))
}

/// `transpose(transpose(x, p), q) = transpose(x, r)` with `r[i] = p[q[i]]`.
fn compose(a: &[Value]) -> Option<Value> {
    let (p, q) = (perm(&a[0])?, perm(&a[1])?);
    (p.len() == q.len()).then(|| Value::Ints(q.iter().map(|&i| p[i] as i64).collect()))
}

fn inverse(a: &[Value]) -> Option<Value> {
    let p = perm(&a[0])?;
    let mut inv = vec![0; p.len()];
    for (i, &x) in p.iter().enumerate() {
        inv[x] = i as i64;
    }
    Some(Value::Ints(inv))
}

fn flip(a: &[Value]) -> Option<Value> {
    match int(&a[0])? {
        0 => Some(Value::Int(1)),
        1 => Some(Value::Int(0)),
        _ => None,
    }
}

/// `[1, .., shape[axis], .., 1]`: a vector of `shape[axis]` values reshaped to broadcast along
/// `axis` of the tensor.
fn channel_shape(a: &[Value]) -> Option<Value> {
    let shape = &fixed(&a[0])?.shape;
    let axis = usize::try_from(int(&a[1])?).ok().filter(|&i| i < shape.len())?;
    let dims = (0..shape.len()).map(|i| if i == axis { shape[i] as i64 } else { 1 });
    Some(Value::Ints(dims.collect()))
}

/// `[1, .., 1, shape...]` of length `rank` (not below the tensor's own rank).
fn shape_at_rank(a: &[Value]) -> Option<Value> {
    let shape = &fixed(&a[0])?.shape;
    let ones = usize::try_from(int(&a[1])?).ok()?.checked_sub(shape.len())?;
    let dims = std::iter::repeat_n(1, ones).chain(shape.iter().map(|&d| d as i64));
    Some(Value::Ints(dims.collect()))
}

fn value(a: &[Value]) -> Option<Value> {
    let c = &*facts(&a[0])?.constant.as_ref()?.tensor;
    (c.len() == 1).then(|| Value::Float(c.get_f64(0)))
}

fn scalar(a: &[Value]) -> Option<Value> {
    let t = mxc_dialects::Tensor::from_f64s(dtype(&a[1])?, Vec::new(), &[a[0].as_f64()?]);
    Some(Value::Tensor(TensorFacts {
        ty: Some(t.ty.clone()),
        constant: Some(crate::lang::ConstValue::new(t)),
    }))
}
