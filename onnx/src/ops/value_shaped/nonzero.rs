//! `NonZero` (opsets 9, 13): the coordinates of the input's nonzero elements, `[rank, count]`
//! int64 in row-major order (NaN counts as nonzero; a scalar gives `[0, count]`).

use super::super::super::ctx::Ctx;
use super::{known_input, nonzero_positions};
use mxc_dialects::{DType, Tensor, ValueId};

pub(super) fn non_zero(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = known_input(ctx, 0, "X")?;
    let found = nonzero_positions(&x);
    let coordinates = coordinates(x.shape(), &found);
    let shape = vec![x.shape().len(), found.len()];
    Ok(vec![ctx.constant(Tensor::from_i64s(DType::I64, shape, &coordinates))])
}

/// The coordinates of the flat positions `found` in a tensor of `shape`, as a row-major
/// `[rank, found.len()]` array: row `d` holds the coordinates along dimension `d`.
fn coordinates(shape: &[usize], found: &[usize]) -> Vec<i64> {
    let mut out = vec![0; shape.len() * found.len()];
    for (k, &flat) in found.iter().enumerate() {
        let mut rest = flat;
        for (d, &extent) in shape.iter().enumerate().rev() {
            out[d * found.len() + k] = (rest % extent) as i64;
            rest /= extent;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::super::super::proto::tensor_proto::DataType;
    use super::super::super::super::testutil::*;
    use super::super::testing::outputs;

    fn nonzero_of(x: super::super::super::super::proto::TensorProto, opset: i64) -> ModelBuilder {
        ModelBuilder::new(opset)
            .init(x)
            .node(node("NonZero", &["x"], &["y"], vec![]))
            .output("y")
    }

    #[test]
    fn lists_coordinates_row_by_row() {
        // the spec's example: [[1, 0], [1, 1]] has nonzeros at (0,0), (1,0), (1,1)
        let y = &outputs(nonzero_of(bool_tensor("x", &[2, 2], &[true, false, true, true]), 13))[0];
        assert_eq!(y.shape(), [2, 3]);
        assert_eq!(y.to_i64_vec(), [0, 1, 1, 0, 0, 1]);
        let x = f32_tensor("x", &[3], &[0.0, f32::NAN, -2.0]);
        let y = &outputs(nonzero_of(x, 9))[0];
        assert_eq!(y.shape(), [1, 2]);
        assert_eq!(y.to_i64_vec(), [1, 2]);
    }

    #[test]
    fn a_scalar_gives_no_rows() {
        let y = &outputs(nonzero_of(i64_tensor("x", &[], &[5]), 13))[0];
        assert_eq!(y.shape(), [0, 1]);
    }

    #[test]
    fn a_run_time_input_is_refused() {
        let e = ModelBuilder::new(13)
            .input("x", DataType::Float, &[4])
            .node(node("NonZero", &["x"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(
            e.contains(
                "NonZero's output shape depends on the values of input \"X\", known only at run time: \
                 not supported without dynamic shapes"
            ),
            "{e}"
        );
    }
}
