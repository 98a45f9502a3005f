//! `Compress` (opsets 9, 11, 28): the slices of the input along `axis` (of the input
//! flattened when there is none) where the 1-D bool `condition` is true, as `numpy.compress`
//! takes them. Only the condition must be known at import; the slices are gathered. A
//! condition shorter than the axis leaves the slices past its end out; one longer may only
//! be false there. Negative axes are valid from opset 11.

use super::super::super::ctx::Ctx;
use super::super::axes;
use super::{known_input, nonzero_positions, take};
use mxc_dialects::{DType, ValueId};

pub(super) fn compress(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let condition = known_input(ctx, 1, "condition")?;
    if condition.dtype() != DType::Bool || condition.shape().len() != 1 {
        return Err(format!("condition must be a 1-D bool tensor, got {}", condition.ty));
    }
    let ty = ctx.ty(x).clone();
    let axis = compress_axis(ctx, ty.rank())?;
    let extent = axis.map_or(ty.num_elements(), |a| ty.shape[a]);
    let picks = nonzero_positions(&condition);
    if let Some(&beyond) = picks.iter().find(|&&p| p >= extent) {
        return Err(format!(
            "condition is true at #{beyond}, past the {extent} slices of the input along the axis"
        ));
    }
    Ok(vec![take(ctx, x, axis, &picks)?])
}

/// The `axis` attribute for an input of rank `rank`, made non-negative (`None`: flatten).
fn compress_axis(ctx: &Ctx, rank: usize) -> Result<Option<usize>, String> {
    match ctx.node.opt_int("axis")? {
        None => Ok(None),
        Some(a) if a < 0 && ctx.opset < 11 => Err(format!(
            "attribute `axis` is {a}: negative axes are valid from opset 11, the model imports {}",
            ctx.opset
        )),
        Some(a) => axes::axis(a, rank)
            .map(Some)
            .map_err(|e| format!("attribute `axis`: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::super::proto::tensor_proto::DataType;
    use super::super::super::super::proto::AttributeProto;
    use super::super::super::super::testutil::*;
    use super::super::testing::outputs;

    /// Compress of a 3x2 input (1 2 / 3 4 / 5 6) by `condition`.
    fn compress(opset: i64, condition: &[bool], attrs: Vec<AttributeProto>) -> ModelBuilder {
        ModelBuilder::new(opset)
            .init(f32_tensor("x", &[3, 2], &[1., 2., 3., 4., 5., 6.]))
            .init(bool_tensor("c", &[condition.len() as i64], condition))
            .node(node("Compress", &["x", "c"], &["y"], attrs))
            .output("y")
    }

    #[test]
    fn selects_slices_along_the_axis() {
        // the spec's examples: rows 1 and 2 along axis 0, column 1 along axis 1 (given as -1)
        let y = &outputs(compress(11, &[false, true, true], vec![int_attr("axis", 0)]))[0];
        assert_eq!(y.shape(), [2, 2]);
        assert_eq!(y.to_f64_vec(), [3., 4., 5., 6.]);
        let y = &outputs(compress(11, &[false, true], vec![int_attr("axis", -1)]))[0];
        assert_eq!(y.shape(), [3, 1]);
        assert_eq!(y.to_f64_vec(), [2., 4., 6.]);
    }

    #[test]
    fn without_an_axis_the_input_is_flattened() {
        // a condition shorter than the input: the rest is not selected
        let y = &outputs(compress(9, &[false, true, false, false, true], vec![]))[0];
        assert_eq!(y.shape(), [2]);
        assert_eq!(y.to_f64_vec(), [2., 5.]);
        // longer, false past the end
        let y = &outputs(compress(9, &[true, false, false, false, false, false, false], vec![]))[0];
        assert_eq!(y.to_f64_vec(), [1.]);
    }

    #[test]
    fn a_run_time_input_is_gathered_by_a_known_condition() {
        let text = ModelBuilder::new(11)
            .input("x", DataType::Float, &[3, 2])
            .init(bool_tensor("c", &[2], &[true, false]))
            .node(node("Compress", &["x", "c"], &["y"], vec![int_attr("axis", 1)]))
            .output("y")
            .text();
        assert!(text.contains("mx.gather %arg0"), "{text}");
        assert!(text.contains("tensor<3x1xf32>"), "{text}");
    }

    #[test]
    fn bad_conditions_and_axes_are_refused() {
        let e = compress(11, &[true, false, false, true], vec![int_attr("axis", 0)]).error();
        assert!(e.contains("condition is true at #3, past the 3 slices"), "{e}");
        let e = compress(9, &[true], vec![int_attr("axis", -1)]).error();
        assert!(
            e.contains("attribute `axis` is -1: negative axes are valid from opset 11"),
            "{e}"
        );
        let e = compress(11, &[true], vec![int_attr("axis", 2)]).error();
        assert!(e.contains("attribute `axis`: axis 2 is out of range for rank 2"), "{e}");
        let e = ModelBuilder::new(11)
            .init(f32_tensor("x", &[3], &[1., 2., 3.]))
            .input("c", DataType::Bool, &[3])
            .node(node("Compress", &["x", "c"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(
            e.contains("Compress's output shape depends on the values of input \"condition\", known only at run time: not supported"),
            "{e}"
        );
    }
}
