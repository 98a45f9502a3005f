//! Evaluation of `reduce_sum`, `reduce_mean` and `reduce_max`: each result element starts from
//! 0 (the lowest value of the type for `reduce_max`, -inf for floats) and accumulates its
//! inputs in increasing index order in the compute type: f32 for f16, bf16 and f32, f64 for
//! f64, the integer type itself (wrapping) for integers. A mean divides the sum by the count
//! in the compute type (truncating for integers, and 0 for an integer mean of nothing); the
//! result is then rounded to the element type.

use super::elementwise::{float_max, round_to};
use super::index::map_positions;
use crate::{strides_of, DType, OpKind, Tensor, TensorType};

pub fn reduce(kind: OpKind, x: &Tensor, axes: &[i64], out: &TensorType) -> Tensor {
    let dtype = x.dtype();
    let max = kind == OpKind::ReduceMax;
    let reduced = |d: usize| axes.contains(&(d as i64));
    // The result index of every input element: its coordinates with the reduced axes dropped.
    let kept: Vec<usize> = (0..x.shape().len()).filter(|&d| !reduced(d)).collect();
    let kept_shape: Vec<usize> = kept.iter().map(|&d| x.shape()[d]).collect();
    let kept_strides = strides_of(&kept_shape);
    let target = map_positions(x.shape(), |c| {
        kept.iter().zip(&kept_strides).map(|(&d, s)| c[d] * s).sum::<usize>()
    });
    let count: usize = (0..x.shape().len())
        .filter(|&d| reduced(d))
        .map(|d| x.shape()[d])
        .product();
    let n = out.num_elements();

    if dtype.is_float() {
        let compute = if dtype == DType::F64 { DType::F64 } else { DType::F32 };
        let mut acc = vec![if max { f64::NEG_INFINITY } else { 0.0 }; n];
        for (i, &o) in target.iter().enumerate() {
            let v = x.get_f64(i);
            acc[o] = if max {
                float_max(acc[o], v, true)
            } else {
                round_to(compute, acc[o] + v)
            };
        }
        if kind == OpKind::ReduceMean {
            acc.iter_mut().for_each(|a| *a = round_to(compute, *a / count as f64));
        }
        return Tensor::from_f64s(dtype, out.shape.clone(), &acc);
    }

    let unsigned = dtype.is_unsigned_int();
    let lowest = if unsigned {
        0
    } else {
        i64::MIN >> (64 - 8 * dtype.size())
    };
    let wrap = |v: i64| Tensor::from_i64s(dtype, vec![], &[v]).get_i64(0);
    let greater = |a: i64, b: i64| if unsigned { (a as u64) > (b as u64) } else { a > b };
    let mut acc = vec![if max { lowest } else { 0 }; n];
    for (i, &o) in target.iter().enumerate() {
        let (a, v) = (acc[o], x.get_i64(i));
        acc[o] = match max {
            true if greater(v, a) => v,
            true => a,
            false => wrap(a.wrapping_add(v)),
        };
    }
    if kind == OpKind::ReduceMean {
        acc.iter_mut().for_each(|a| {
            *a = match count {
                0 => 0,
                _ if unsigned => ((*a as u64) / count as u64) as i64,
                _ => *a / count as i64,
            }
        });
    }
    Tensor::from_i64s(dtype, out.shape.clone(), &acc)
}

#[cfg(test)]
mod tests {
    use crate::eval::eval;
    use crate::{Attr, Attrs, DType, OpKind, Tensor};

    fn run(kind: OpKind, x: &Tensor, axes: &[i64], keepdims: bool) -> Result<Tensor, String> {
        let attrs = Attrs::new()
            .with("axes", Attr::Ints(axes.to_vec()))
            .with("keepdims", Attr::Int(keepdims as i64));
        eval(kind, &[x], &attrs).expect("evaluable").map(|mut v| v.remove(0))
    }

    fn t(dtype: DType, shape: &[usize], v: &[f64]) -> Tensor {
        Tensor::from_f64s(dtype, shape.to_vec(), v)
    }

    #[test]
    fn reduce_sum_over_axes() {
        let x = t(DType::I64, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(
            run(OpKind::ReduceSum, &x, &[1], false),
            Ok(t(DType::I64, &[2], &[6.0, 15.0]))
        );
        assert_eq!(
            run(OpKind::ReduceSum, &x, &[0], true),
            Ok(t(DType::I64, &[1, 3], &[5.0, 7.0, 9.0]))
        );
        assert_eq!(
            run(OpKind::ReduceSum, &x, &[0, 1], false),
            Ok(t(DType::I64, &[], &[21.0]))
        );
        assert_eq!(run(OpKind::ReduceSum, &x, &[], true), Ok(x.clone()));
    }

    #[test]
    fn reduce_sum_accumulates_in_the_compute_type() {
        // 2^24 + 1 + 1 in f32: each step rounds back to 2^24.
        let x = t(DType::F32, &[3], &[16777216.0, 1.0, 1.0]);
        assert_eq!(
            run(OpKind::ReduceSum, &x, &[0], false),
            Ok(t(DType::F32, &[], &[16777216.0]))
        );
        // f16 sums in f32: 2048 + 1 + 1 is 2050 (in f16 steps it would stay 2048).
        let h = t(DType::F16, &[3], &[2048.0, 1.0, 1.0]);
        assert_eq!(
            run(OpKind::ReduceSum, &h, &[0], false),
            Ok(t(DType::F16, &[], &[2050.0]))
        );
        // the sum starts from +0
        let z = t(DType::F32, &[1], &[-0.0]);
        let s = run(OpKind::ReduceSum, &z, &[0], false).map(|t| t.get_f64(0).is_sign_positive());
        assert_eq!(s, Ok(true));
        let empty = t(DType::F32, &[0, 2], &[]);
        assert_eq!(
            run(OpKind::ReduceSum, &empty, &[0], false),
            Ok(t(DType::F32, &[2], &[0.0, 0.0]))
        );
    }

    #[test]
    fn reduce_mean_divides_by_the_count() {
        let x = t(DType::F32, &[2, 2], &[1.0, 2.0, 3.0, 5.0]);
        assert_eq!(
            run(OpKind::ReduceMean, &x, &[1], true),
            Ok(t(DType::F32, &[2, 1], &[1.5, 4.0]))
        );
        let i = t(DType::I32, &[3], &[1.0, 2.0, 2.0]);
        assert_eq!(run(OpKind::ReduceMean, &i, &[0], false), Ok(t(DType::I32, &[], &[1.0])));
    }

    #[test]
    fn reduce_max_takes_the_largest() {
        let x = t(DType::F32, &[2, 2], &[1.0, -2.0, f64::NAN, 5.0]);
        let y = run(OpKind::ReduceMax, &x, &[1], false).expect("evaluates").to_f64_vec();
        assert_eq!(y[0], 1.0);
        assert!(y[1].is_nan());
        let u = Tensor::from_i64s(DType::U8, vec![2], &[200, 7]);
        assert_eq!(
            run(OpKind::ReduceMax, &u, &[0], false),
            Ok(Tensor::from_i64s(DType::U8, vec![], &[200]))
        );
        let lowest = |dtype| run(OpKind::ReduceMax, &t(dtype, &[0], &[]), &[0], false).map(|t| t.get_f64(0));
        assert_eq!(lowest(DType::F32), Ok(f64::NEG_INFINITY));
        assert_eq!(lowest(DType::I16), Ok(-32768.0));
        assert_eq!(lowest(DType::U8), Ok(0.0));
        let i = Tensor::from_i64s(DType::I32, vec![0], &[]);
        assert_eq!(
            run(OpKind::ReduceMean, &i, &[0], false),
            Ok(Tensor::from_i64s(DType::I32, vec![], &[0]))
        );
    }
}
