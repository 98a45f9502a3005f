//! Evaluation of the element-wise ops: broadcasting arithmetic, comparisons, `where`, `not`
//! the bit operations, and the unary functions (`neg`, `abs`, `sqrt`, `reciprocal`, `floor`,
//! `ceil` exactly rounded; the trigonometric ones from f64, rounded once).

use super::index::broadcast_offsets;
use crate::narrow::{decode_float, encode_float};
use crate::tensor::{f16_to_f32, f32_to_bf16, f32_to_f16};
use crate::{DType, OpKind, Tensor, TensorType};

/// `v` rounded to the nearest value of the float type `dtype` (to nearest even).
pub fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16_to_f32(f32_to_f16(v as f32)) as f64,
        DType::BF16 => f32::from_bits((f32_to_bf16(v as f32) as u32) << 16) as f64,
        d if d.is_narrow_float() => decode_float(d, encode_float(d, v as f32)) as f64,
        _ => v,
    }
}

/// IEEE 754-2019 `maximum`/`minimum`: NaN if either is NaN, and -0 < +0.
pub fn float_max(a: f64, b: f64, max: bool) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    let a_first = if a == b {
        a.is_sign_negative() != max
    } else {
        (a > b) == max
    };
    if a_first {
        a
    } else {
        b
    }
}

fn float_op(kind: OpKind, a: f64, b: f64) -> f64 {
    match kind {
        OpKind::Add => a + b,
        OpKind::Sub => a - b,
        OpKind::Mul => a * b,
        OpKind::Div => a / b,
        OpKind::Max => float_max(a, b, true),
        _ => float_max(a, b, false),
    }
}

fn signed_op(kind: OpKind, a: i64, b: i64) -> i64 {
    match kind {
        OpKind::Add => a.wrapping_add(b),
        OpKind::Sub => a.wrapping_sub(b),
        OpKind::Mul => a.wrapping_mul(b),
        OpKind::Div if b == 0 => 0,
        OpKind::Div => a.wrapping_div(b),
        OpKind::Max => a.max(b),
        OpKind::BitAnd => a & b,
        OpKind::BitOr => a | b,
        OpKind::BitXor => a ^ b,
        // bits shifted past the type's width are dropped when the result is stored
        OpKind::ShiftLeft if (0..64).contains(&b) => a << b,
        OpKind::ShiftLeft => 0,
        OpKind::ShiftRight => a >> b.clamp(0, 63),
        _ => a.min(b),
    }
}

fn unsigned_op(kind: OpKind, a: u64, b: u64) -> u64 {
    match kind {
        OpKind::Add => a.wrapping_add(b),
        OpKind::Sub => a.wrapping_sub(b),
        OpKind::Mul => a.wrapping_mul(b),
        OpKind::Div if b == 0 => 0,
        OpKind::Div => a / b,
        OpKind::Max => a.max(b),
        OpKind::BitAnd => a & b,
        OpKind::BitOr => a | b,
        OpKind::BitXor => a ^ b,
        OpKind::ShiftLeft if b < 64 => a << b,
        OpKind::ShiftRight if b < 64 => a >> b,
        OpKind::ShiftLeft | OpKind::ShiftRight => 0,
        _ => a.min(b),
    }
}

/// `add`, `sub`, `mul`, `div`, `max`, `min` and the bit operations.
pub fn arithmetic(kind: OpKind, a: &Tensor, b: &Tensor, out: &TensorType) -> Tensor {
    let pairs = broadcast_offsets(a.shape(), &out.shape)
        .into_iter()
        .zip(broadcast_offsets(b.shape(), &out.shape));
    let shape = out.shape.clone();
    if out.dtype.is_float() {
        let v: Vec<f64> = pairs.map(|(i, j)| float_op(kind, a.get_f64(i), b.get_f64(j))).collect();
        Tensor::from_f64s(out.dtype, shape, &v)
    } else if out.dtype.is_unsigned_int() {
        let v: Vec<i64> = pairs
            .map(|(i, j)| unsigned_op(kind, a.get_i64(i) as u64, b.get_i64(j) as u64) as i64)
            .collect();
        Tensor::from_i64s(out.dtype, shape, &v)
    } else {
        let v: Vec<i64> = pairs
            .map(|(i, j)| signed_op(kind, a.get_i64(i), b.get_i64(j)))
            .collect();
        Tensor::from_i64s(out.dtype, shape, &v)
    }
}

/// `dequantize_linear`: `(x - zero) * scale` in f32 (f64 for an f64 scale), each step rounded
/// as the kernels round it, then rounded to the result's type.
pub fn dequantize_linear(x: &Tensor, scale: &Tensor, zero: &Tensor, out: &TensorType) -> Tensor {
    let wide = match scale.dtype() {
        DType::F64 => DType::F64,
        _ => DType::F32,
    };
    let in_wide = TensorType::new(wide, out.shape.clone());
    let centred = arithmetic(OpKind::Sub, &x.cast(wide), &zero.cast(wide), &in_wide);
    arithmetic(OpKind::Mul, &centred, &scale.cast(wide), &in_wide).cast(out.dtype)
}

/// `equal`, `less` and `greater` (false whenever a float operand is NaN).
pub fn compare(kind: OpKind, a: &Tensor, b: &Tensor, out: &TensorType) -> Tensor {
    let pairs = broadcast_offsets(a.shape(), &out.shape)
        .into_iter()
        .zip(broadcast_offsets(b.shape(), &out.shape));
    let ordering = |i: usize, j: usize| {
        if a.dtype().is_float() {
            a.get_f64(i).partial_cmp(&b.get_f64(j))
        } else if a.dtype().is_unsigned_int() {
            Some((a.get_i64(i) as u64).cmp(&(b.get_i64(j) as u64)))
        } else {
            Some(a.get_i64(i).cmp(&b.get_i64(j)))
        }
    };
    let want = match kind {
        OpKind::Equal => std::cmp::Ordering::Equal,
        OpKind::Less => std::cmp::Ordering::Less,
        _ => std::cmp::Ordering::Greater,
    };
    let v: Vec<i64> = pairs.map(|(i, j)| (ordering(i, j) == Some(want)) as i64).collect();
    Tensor::from_i64s(DType::Bool, out.shape.clone(), &v)
}

/// `where(cond, x, y)`: x where cond is true, else y, all three broadcast.
pub fn select(cond: &Tensor, x: &Tensor, y: &Tensor, out: &TensorType) -> Tensor {
    let size = out.dtype.size();
    let c = broadcast_offsets(cond.shape(), &out.shape);
    let xs = broadcast_offsets(x.shape(), &out.shape);
    let ys = broadcast_offsets(y.shape(), &out.shape);
    let mut data = Vec::with_capacity(out.num_bytes());
    for k in 0..c.len() {
        let (src, o) = if cond.bytes()[c[k]] != 0 {
            (x, xs[k])
        } else {
            (y, ys[k])
        };
        data.extend_from_slice(&src.bytes()[o * size..(o + 1) * size]);
    }
    Tensor::from_bytes(out.clone(), data).expect("one element per position of the result")
}

/// The unary ops; the type rules have already checked the element type fits the op.
pub fn unary(kind: OpKind, x: &Tensor) -> Tensor {
    let (dtype, shape) = (x.dtype(), x.shape().to_vec());
    if dtype.is_float() {
        let f = |v: f64| match kind {
            OpKind::Neg => -v,
            OpKind::Abs => v.abs(),
            // NaN stays NaN, as in the kernels
            OpKind::Relu if v < 0.0 => 0.0,
            OpKind::Relu => v,
            OpKind::Sqrt => v.sqrt(),
            OpKind::Reciprocal => 1.0 / v,
            OpKind::Floor => v.floor(),
            OpKind::Round => v.round_ties_even(),
            OpKind::Sin => v.sin(),
            OpKind::Cos => v.cos(),
            OpKind::Tan => v.tan(),
            OpKind::Asin => v.asin(),
            OpKind::Acos => v.acos(),
            OpKind::Atan => v.atan(),
            _ => v.ceil(),
        };
        Tensor::from_f64s(dtype, shape, &x.to_f64_vec().into_iter().map(f).collect::<Vec<_>>())
    } else {
        let f = |v: i64| match kind {
            OpKind::Not => (v == 0) as i64,
            OpKind::Neg => v.wrapping_neg(),
            OpKind::Relu => v.max(0),
            _ if dtype.is_unsigned_int() => v,
            _ => v.wrapping_abs(),
        };
        Tensor::from_i64s(dtype, shape, &x.to_i64_vec().into_iter().map(f).collect::<Vec<_>>())
    }
}

#[cfg(test)]
mod tests {
    use crate::eval::eval;
    use crate::{Attrs, DType, OpKind, Tensor};

    fn t(dtype: DType, shape: &[usize], v: &[f64]) -> Tensor {
        Tensor::from_f64s(dtype, shape.to_vec(), v)
    }

    fn run(kind: OpKind, ops: &[&Tensor]) -> Tensor {
        eval(kind, ops, &Attrs::new())
            .expect("evaluable")
            .expect("evaluates")
            .remove(0)
    }

    #[test]
    fn integer_arithmetic_broadcasts_and_wraps() {
        let a = t(DType::I64, &[2, 1], &[6.0, -7.0]);
        let b = t(DType::I64, &[3], &[1.0, 2.0, 4.0]);
        assert_eq!(
            run(OpKind::Add, &[&a, &b]),
            t(DType::I64, &[2, 3], &[7.0, 8.0, 10.0, -6.0, -5.0, -3.0])
        );
        assert_eq!(
            run(OpKind::Sub, &[&a, &b]),
            t(DType::I64, &[2, 3], &[5.0, 4.0, 2.0, -8.0, -9.0, -11.0])
        );
        assert_eq!(
            run(OpKind::Mul, &[&a, &b]),
            t(DType::I64, &[2, 3], &[6.0, 12.0, 24.0, -7.0, -14.0, -28.0])
        );
        assert_eq!(
            run(OpKind::Div, &[&a, &b]),
            t(DType::I64, &[2, 3], &[6.0, 3.0, 1.0, -7.0, -3.0, -1.0])
        );
        let big = t(DType::I32, &[], &[2147483647.0]);
        assert_eq!(
            run(OpKind::Add, &[&big, &t(DType::I32, &[], &[1.0])]),
            t(DType::I32, &[], &[-2147483648.0])
        );
        let u = t(DType::U8, &[], &[1.0]);
        assert_eq!(
            run(OpKind::Sub, &[&u, &t(DType::U8, &[], &[2.0])]),
            t(DType::U8, &[], &[255.0])
        );
    }

    #[test]
    fn integer_division_by_zero_gives_zero_and_min_by_minus_one_wraps() {
        let a = t(DType::I32, &[2], &[1.0, -2147483648.0]);
        let b = t(DType::I32, &[2], &[0.0, -1.0]);
        assert_eq!(run(OpKind::Div, &[&a, &b]), t(DType::I32, &[2], &[0.0, -2147483648.0]));
        let u = t(DType::U8, &[1], &[7.0]);
        assert_eq!(
            run(OpKind::Div, &[&u, &t(DType::U8, &[1], &[0.0])]),
            t(DType::U8, &[1], &[0.0])
        );
    }

    #[test]
    fn float_arithmetic_rounds_to_the_element_type() {
        let a = t(DType::F32, &[2], &[1.0, 0.1]);
        let b = t(DType::F32, &[2], &[3.0, 0.2]);
        let y = run(OpKind::Div, &[&a, &b]);
        assert_eq!(y, Tensor::from_f32s(vec![2], &[1.0f32 / 3.0, 0.1f32 / 0.2]));
        let y = run(OpKind::Add, &[&a, &b]);
        assert_eq!(y, Tensor::from_f32s(vec![2], &[4.0, 0.1f32 + 0.2f32]));
    }

    #[test]
    fn max_and_min_propagate_nan() {
        let a = t(DType::F32, &[3], &[1.0, f64::NAN, -0.0]);
        let b = t(DType::F32, &[3], &[2.0, 0.0, 0.0]);
        let max = run(OpKind::Max, &[&a, &b]).to_f64_vec();
        assert_eq!(max[0], 2.0);
        assert!(max[1].is_nan());
        assert!(max[2] == 0.0 && max[2].is_sign_positive());
        let min = run(OpKind::Min, &[&a, &b]).to_f64_vec();
        assert_eq!(min[0], 1.0);
        assert!(min[2] == 0.0 && min[2].is_sign_negative());
        let i = run(
            OpKind::Max,
            &[&t(DType::I64, &[2], &[-1.0, 5.0]), &t(DType::I64, &[], &[0.0])],
        );
        assert_eq!(i, t(DType::I64, &[2], &[0.0, 5.0]));
    }

    #[test]
    fn comparisons_give_bools() {
        let a = t(DType::F32, &[3], &[1.0, 2.0, f64::NAN]);
        let b = t(DType::F32, &[], &[2.0]);
        assert_eq!(run(OpKind::Equal, &[&a, &b]), t(DType::Bool, &[3], &[0.0, 1.0, 0.0]));
        assert_eq!(run(OpKind::Less, &[&a, &b]), t(DType::Bool, &[3], &[1.0, 0.0, 0.0]));
        assert_eq!(run(OpKind::Greater, &[&a, &b]), t(DType::Bool, &[3], &[0.0, 0.0, 0.0]));
        let u = t(DType::U64, &[], &[0.0]);
        let max = Tensor::from_i64s(DType::U64, vec![], &[-1]);
        assert_eq!(run(OpKind::Less, &[&u, &max]), t(DType::Bool, &[], &[1.0]));
    }

    #[test]
    fn where_selects_with_broadcasting() {
        let c = t(DType::Bool, &[2, 1], &[1.0, 0.0]);
        let x = t(DType::I64, &[2], &[1.0, 2.0]);
        let y = t(DType::I64, &[], &[9.0]);
        assert_eq!(
            run(OpKind::Where, &[&c, &x, &y]),
            t(DType::I64, &[2, 2], &[1.0, 2.0, 9.0, 9.0])
        );
    }

    #[test]
    fn unary_ops() {
        let b = t(DType::Bool, &[2], &[1.0, 0.0]);
        assert_eq!(run(OpKind::Not, &[&b]), t(DType::Bool, &[2], &[0.0, 1.0]));
        let i = t(DType::I32, &[3], &[-3.0, 0.0, 4.0]);
        assert_eq!(run(OpKind::Neg, &[&i]), t(DType::I32, &[3], &[3.0, 0.0, -4.0]));
        assert_eq!(run(OpKind::Abs, &[&i]), t(DType::I32, &[3], &[3.0, 0.0, 4.0]));
        let f = t(DType::F32, &[3], &[-1.5, 2.0, 0.25]);
        assert_eq!(run(OpKind::Floor, &[&f]), t(DType::F32, &[3], &[-2.0, 2.0, 0.0]));
        assert_eq!(run(OpKind::Ceil, &[&f]), t(DType::F32, &[3], &[-1.0, 2.0, 1.0]));
        assert_eq!(
            run(OpKind::Reciprocal, &[&f]),
            t(DType::F32, &[3], &[-1.0 / 1.5, 0.5, 4.0])
        );
        assert_eq!(
            run(OpKind::Sqrt, &[&t(DType::F32, &[1], &[2.0])]),
            Tensor::from_f32s(vec![1], &[2.0f32.sqrt()])
        );
        assert_eq!(run(OpKind::Neg, &[&f]), t(DType::F32, &[3], &[1.5, -2.0, -0.25]));
        assert_eq!(run(OpKind::Abs, &[&f]), t(DType::F32, &[3], &[1.5, 2.0, 0.25]));
        assert_eq!(run(OpKind::Relu, &[&f]), t(DType::F32, &[3], &[0.0, 2.0, 0.25]));
        assert_eq!(run(OpKind::Relu, &[&i]), t(DType::I32, &[3], &[0.0, 0.0, 4.0]));
    }

    #[test]
    fn transcendental_ops_are_not_evaluated() {
        let f = t(DType::F32, &[1], &[1.0]);
        assert!(eval(OpKind::Exp, &[&f], &Attrs::new()).is_none());
    }
}
