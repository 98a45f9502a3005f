//! `Det`: the determinant of each matrix in the last two dims, by Gaussian elimination with
//! partial pivoting unrolled over the matrix size (at most `DET_LIMIT`). Each step takes the
//! first row whose entry in the first column has the largest magnitude as the pivot row,
//! moves it to the top (negating the pivot when it moves), subtracts its multiples from the
//! rows below, and goes on with the matrix below and right of the pivot; the determinant is
//! the product of the pivots. Half-precision floats are computed in f32.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::argmax::first_marked;
use super::axes::ints;
use super::build::float_compute_type;
use super::layout::{slice_value, DimSlice};
use super::shape::reshape;
use mxc_dialects::{Attrs, DType, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("Det", det);
}

/// The largest matrix `Det` is built for: each elimination step is some thirty ops.
const DET_LIMIT: usize = 16;

fn det(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    let rank = ty.rank();
    if rank < 2 || ty.shape[rank - 1] != ty.shape[rank - 2] {
        return Err(format!("X must be [*, M, M], got shape {:?}", ty.shape));
    }
    if !ty.dtype.is_float() {
        return Err(format!("Det of {} is not supported", ty.dtype));
    }
    let m = ty.shape[rank - 1];
    if m > DET_LIMIT {
        return Err(format!(
            "Det of {m}x{m} matrices is not supported (at most {DET_LIMIT}x{DET_LIMIT}: the elimination is unrolled)"
        ));
    }
    let batch = &ty.shape[..rank - 2];
    if m == 0 {
        // the empty product
        let one = ctx.scalar(ty.dtype, 1.0);
        let attrs = Attrs::new().with("shape", ints(batch));
        return Ok(vec![ctx.build1(OpKind::Expand, vec![one], attrs)?]);
    }
    let mut a = ctx.cast(x, float_compute_type(ty.dtype))?;
    let mut pivots = Vec::with_capacity(m);
    for n in (2..=m).rev() {
        let (pivot, rest) = eliminate(ctx, a, n)?;
        pivots.push(pivot);
        a = rest;
    }
    // the 1x1 matrix left is the last pivot
    let mut det = a;
    for pivot in pivots {
        det = ctx.op(OpKind::Mul, &[det, pivot])?;
    }
    let det = reshape(ctx, det, batch)?;
    Ok(vec![ctx.cast(det, ty.dtype)?])
}

/// One elimination step on `a` (`[*, n, n]`, n at least 2): the pivot, negated when its row
/// is not the top one (`[*, 1, 1]`), and the `[*, n-1, n-1]` matrix left to eliminate.
fn eliminate(ctx: &mut Ctx, a: ValueId, n: usize) -> Result<(ValueId, ValueId), String> {
    let ty = ctx.ty(a).clone();
    let (rank, dtype) = (ty.rank(), ty.dtype);
    let (rows, cols) = (rank - 2, rank - 1);
    let column = range(ctx, a, cols, 0, 1)?;
    let magnitude = ctx.op(OpKind::Abs, &[column])?;
    let largest = ctx.reduce(OpKind::ReduceMax, magnitude, &[rows], true)?;
    // a column holding NaN marks every row, so the top row is kept and the NaN goes on
    let below = ctx.op(OpKind::Less, &[magnitude, largest])?;
    let marked = ctx.op(OpKind::Not, &[below])?;
    let ramp = ctx.ramp(n, rows, rank, DType::I64)?;
    let choice = first_marked(ctx, marked, ramp, n, rows)?;
    let chosen = ctx.op(OpKind::Equal, &[ramp, choice])?;

    let zero = ctx.scalar(dtype, 0.0);
    let only_chosen = ctx.op(OpKind::Where, &[chosen, a, zero])?;
    let pivot_row = ctx.reduce(OpKind::ReduceSum, only_chosen, &[rows], true)?;
    // the top row takes the pivot row's place; the rows other than the pivot row follow it
    let top = range(ctx, a, rows, 0, 1)?;
    let swapped = ctx.op(OpKind::Where, &[chosen, top, a])?;
    let others = range(ctx, swapped, rows, 1, n)?;

    let pivot = range(ctx, pivot_row, cols, 0, 1)?;
    // a zero pivot (a zero column: the determinant is 0) divides by 1 instead
    let singular = ctx.op(OpKind::Equal, &[pivot, zero])?;
    let one = ctx.scalar(dtype, 1.0);
    let divisor = ctx.op(OpKind::Where, &[singular, one, pivot])?;
    let leading = range(ctx, others, cols, 0, 1)?;
    let factor = ctx.op(OpKind::Div, &[leading, divisor])?;
    let pivot_rest = range(ctx, pivot_row, cols, 1, n)?;
    let update = ctx.op(OpKind::Mul, &[factor, pivot_rest])?;
    let others_rest = range(ctx, others, cols, 1, n)?;
    let rest = ctx.op(OpKind::Sub, &[others_rest, update])?;

    let first = ctx.scalar(DType::I64, 0.0);
    let kept = ctx.op(OpKind::Equal, &[choice, first])?;
    let negated = ctx.op(OpKind::Neg, &[pivot])?;
    let signed = ctx.op(OpKind::Where, &[kept, pivot, negated])?;
    Ok((signed, rest))
}

/// `v[.., start..end, ..]` along `axis`.
fn range(ctx: &mut Ctx, v: ValueId, axis: usize, start: usize, end: usize) -> Result<ValueId, String> {
    let bounds = DimSlice {
        start: start as i64,
        end: end as i64,
        step: 1,
    };
    slice_value(ctx, v, &[(axis, bounds)])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::{DType, Tensor};

    fn det(shape: &[usize], values: &[f64]) -> Vec<f64> {
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let g = ModelBuilder::new(22)
            .input("x", DataType::Double, &dims)
            .node(node("Det", &["x"], &["y"], vec![]))
            .output("y")
            .import()
            .unwrap();
        let x = Tensor::from_f64s(DType::F64, shape.to_vec(), values);
        run(&g, &[x]).unwrap()[0].to_f64_vec()
    }

    #[test]
    fn pivots_swap_rows_and_flip_the_sign() {
        // a zero top-left entry needs a swap; the largest entry of the column is the pivot
        assert_eq!(det(&[2, 2], &[0., 1., 1., 0.]), [-1.]);
        let d = det(&[3, 3], &[0., 2., 1., 1., 1., 1., 4., 3., 2.]);
        assert!((d[0] - 3.0).abs() < 1e-12, "{d:?}");
        let d = det(
            &[4, 4],
            &[2., 1., 0., 3., 1., -1., 2., 0., 0., 5., 1., 1., 3., 0., 2., 4.],
        );
        assert!((d[0] - -23.0).abs() < 1e-12, "{d:?}");
    }

    #[test]
    fn batches_and_singular_matrices() {
        let d = det(&[3, 1, 2, 2], &[1., 2., 3., 4., 1., 2., 2., 4., 0., 0., 0., 0.]);
        assert_eq!(d, [-2., 0., 0.]);
        assert_eq!(det(&[2, 1, 1], &[5., -3.]), [5., -3.]);
        assert_eq!(det(&[2, 0, 0], &[]), [1., 1.]);
    }

    #[test]
    fn half_floats_are_computed_in_f32() {
        let text = ModelBuilder::new(22)
            .input("x", DataType::Float16, &[3, 3])
            .node(node("Det", &["x"], &["y"], vec![]))
            .output("y")
            .text();
        assert!(
            text.contains("{to = f32}") && text.contains("{to = f16} : tensor<f16>"),
            "{text}"
        );
    }

    #[test]
    fn large_and_integer_matrices_are_refused() {
        let err = ModelBuilder::new(22)
            .input("x", DataType::Float, &[17, 17])
            .node(node("Det", &["x"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(err.contains("Det of 17x17 matrices is not supported"), "{err}");
        let err = ModelBuilder::new(22)
            .input("x", DataType::Int32, &[2, 2])
            .node(node("Det", &["x"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(err.contains("Det of i32 is not supported"), "{err}");
    }
}
