//! Type rules of element-wise ops: numpy-style broadcasting, arithmetic, comparisons,
//! select, clip, gelu and the unary math functions.

use super::same_dtype;
use crate::{Attrs, DType, TensorType};

/// The numpy broadcast of two shapes, or an error naming both.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        };
    }
    Ok(out)
}

pub fn arithmetic(ops: &[TensorType]) -> Result<TensorType, String> {
    same_dtype(&ops[0], &ops[1], "operands")?;
    if ops[0].dtype == DType::Bool {
        return Err("arithmetic on bool tensors".into());
    }
    Ok(TensorType::new(
        ops[0].dtype,
        broadcast_shapes(&ops[0].shape, &ops[1].shape)?,
    ))
}

/// The bit operations (`bit_and`, `bit_or`, `bit_xor`, and the shifts, which move the bits
/// of the first operand by the second, logically for unsigned types and arithmetically for
/// signed ones) take two integer operands of one type.
pub fn bitwise(ops: &[TensorType]) -> Result<TensorType, String> {
    same_dtype(&ops[0], &ops[1], "operands")?;
    if !ops[0].dtype.is_int() {
        return Err(format!("operands must be integers, got {}", ops[0].dtype));
    }
    Ok(TensorType::new(
        ops[0].dtype,
        broadcast_shapes(&ops[0].shape, &ops[1].shape)?,
    ))
}

/// `pow` lets the exponent have its own numeric type; the result has the base's.
pub fn pow(ops: &[TensorType]) -> Result<TensorType, String> {
    if ops[0].dtype == DType::Bool || ops[1].dtype == DType::Bool {
        return Err("pow of bool tensors".into());
    }
    Ok(TensorType::new(
        ops[0].dtype,
        broadcast_shapes(&ops[0].shape, &ops[1].shape)?,
    ))
}

pub fn compare(ops: &[TensorType]) -> Result<TensorType, String> {
    same_dtype(&ops[0], &ops[1], "operands")?;
    Ok(TensorType::new(
        DType::Bool,
        broadcast_shapes(&ops[0].shape, &ops[1].shape)?,
    ))
}

pub fn select(ops: &[TensorType]) -> Result<TensorType, String> {
    if ops[0].dtype != DType::Bool {
        return Err(format!("condition must be bool, got {}", ops[0].dtype));
    }
    same_dtype(&ops[1], &ops[2], "branches")?;
    let shape = broadcast_shapes(&broadcast_shapes(&ops[0].shape, &ops[1].shape)?, &ops[2].shape)?;
    Ok(TensorType::new(ops[1].dtype, shape))
}

pub fn logical_not(t: &TensorType) -> Result<TensorType, String> {
    if t.dtype != DType::Bool {
        return Err(format!("operand must be bool, got {}", t.dtype));
    }
    Ok(t.clone())
}

pub fn float_unary(t: &TensorType) -> Result<TensorType, String> {
    if !t.dtype.is_float() {
        return Err(format!("operand must be a float tensor, got {}", t.dtype));
    }
    Ok(t.clone())
}

/// `gelu`: a float operand; `approximate` is "none" (the exact, erf form) or "tanh".
pub fn gelu(x: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    match attrs.str("approximate")? {
        "none" | "tanh" => float_unary(x),
        other => Err(format!("approximate must be \"none\" or \"tanh\", got {other:?}")),
    }
}

pub fn numeric_unary(t: &TensorType) -> Result<TensorType, String> {
    if t.dtype == DType::Bool {
        return Err("operand must be numeric, got bool".into());
    }
    Ok(t.clone())
}

/// `dequantize_linear(x, scale, zero_point)`: `(x - zero_point) * scale` (ONNX
/// `DequantizeLinear`), `x` and the zero point integers of one type, the scale a float whose
/// type the result has; the scale and the zero point broadcast to `x`'s shape (a single value,
/// or one per entry of an axis) without growing it. Computed in f32 (f64 for an f64 scale) and
/// rounded once to the result's type.
pub fn dequantize_linear(ops: &[TensorType]) -> Result<TensorType, String> {
    let (x, scale, zero) = (&ops[0], &ops[1], &ops[2]);
    if !x.dtype.is_int() || x.dtype.size() > 4 {
        return Err(format!("x must be an integer of at most 32 bits, got {}", x.dtype));
    }
    same_dtype(x, zero, "x and the zero point")?;
    if !scale.dtype.is_float() {
        return Err(format!("the scale must be a float, got {}", scale.dtype));
    }
    for (p, name) in [(scale, "scale"), (zero, "zero point")] {
        if broadcast_shapes(&x.shape, &p.shape)? != x.shape {
            return Err(format!(
                "the {name} of shape {:?} does not broadcast to x's shape {:?}",
                p.shape, x.shape
            ));
        }
    }
    Ok(x.with_dtype(scale.dtype))
}

/// `clip(x, lo, hi)`: the bounds are scalars of x's element type.
pub fn clip(ops: &[TensorType]) -> Result<TensorType, String> {
    for (bound, name) in ops[1..].iter().zip(["lower bound", "upper bound"]) {
        same_dtype(&ops[0], bound, name)?;
        if bound.num_elements() != 1 {
            return Err(format!("{name} must be a single value, got shape {:?}", bound.shape));
        }
    }
    numeric_unary(&ops[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast_shapes(&[2, 1, 3], &[4, 1]).unwrap(), vec![2, 4, 3]);
        assert_eq!(broadcast_shapes(&[], &[5]).unwrap(), vec![5]);
        assert!(broadcast_shapes(&[2, 3], &[4, 3]).is_err());
    }

    #[test]
    fn dequantize_linear_takes_integers_a_float_scale_and_a_zero_point_that_broadcast_to_them() {
        let t = |d: DType, s: &[usize]| TensorType::new(d, s.to_vec());
        let x = t(DType::U8, &[4, 3]);
        let y = dequantize_linear(&[x.clone(), t(DType::F16, &[3]), t(DType::U8, &[])]).unwrap();
        assert_eq!(y, t(DType::F16, &[4, 3]));
        let err = dequantize_linear(&[x.clone(), t(DType::F32, &[2, 4, 3]), t(DType::U8, &[])]).unwrap_err();
        assert!(err.contains("does not broadcast to x's shape"), "{err}");
        let err = dequantize_linear(&[x.clone(), t(DType::F32, &[]), t(DType::I8, &[])]).unwrap_err();
        assert!(err.contains("x and the zero point"), "{err}");
        let err = dequantize_linear(&[t(DType::I64, &[4, 3]), t(DType::F32, &[]), t(DType::I64, &[])]).unwrap_err();
        assert!(err.contains("at most 32 bits"), "{err}");
    }

    #[test]
    fn gelu_takes_a_float_and_one_of_two_approximations() {
        let x = TensorType::new(DType::F32, vec![2, 3]);
        let with = |a: &str| Attrs::new().with("approximate", crate::Attr::Str(a.into()));
        assert_eq!(gelu(&x, &with("none")).unwrap(), x);
        assert_eq!(gelu(&x, &with("tanh")).unwrap(), x);
        assert_eq!(
            gelu(&x, &with("fast")).unwrap_err(),
            "approximate must be \"none\" or \"tanh\", got \"fast\""
        );
        let missing = gelu(&x, &Attrs::new()).unwrap_err();
        assert!(missing.contains("missing attribute `approximate`"), "{missing}");
        assert!(gelu(&TensorType::new(DType::I32, vec![2]), &with("none")).is_err());
    }
}
