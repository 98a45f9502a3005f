//! Ops of the `ai.onnx.ml` domain built from mx ops: `Binarizer` (1 above the threshold, 0
//! elsewhere) and `ArrayFeatureExtractor` (a `gather` along the last axis).

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use mxc_dialects::{Attr, Attrs, OpKind, ValueId};

const DOMAIN: &str = "ai.onnx.ml";

pub fn register(r: &mut Registry) {
    r.add(DOMAIN, "Binarizer", 1, LATEST, binarizer);
    r.add(DOMAIN, "ArrayFeatureExtractor", 1, LATEST, array_feature_extractor);
}

fn binarizer(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let dtype = ctx.ty(x).dtype;
    if dtype == mxc_dialects::DType::Bool {
        return Err("X must be numeric, got bool".into());
    }
    let threshold = ctx.node.float("threshold", 0.0)? as f64;
    let threshold = ctx.scalar(dtype, threshold);
    let above = ctx.op(OpKind::Greater, &[x, threshold])?;
    Ok(vec![ctx.cast(above, dtype)?])
}

/// The entries of `X`'s last axis at the positions `Y` lists: `[..., len(Y)]` (a rank-1 `X`
/// gives `[1, len(Y)]`, as the operator defines).
fn array_feature_extractor(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, positions) = (ctx.input(0)?, ctx.input(1)?);
    let shape = ctx.ty(x).shape.clone();
    let Some(&width) = shape.last() else {
        return Err("X must have at least one dim".into());
    };
    let count = ctx.ty(positions).num_elements();
    let flat = super::shape::reshape(ctx, positions, &[count])?;
    let extent = ctx.scalar(ctx.ty(flat).dtype, width as f64);
    let flat = ctx.wrap_negative(flat, extent)?;
    let picked = ctx.build1(
        OpKind::Gather,
        vec![x, flat],
        Attrs::new().with("axis", Attr::Int(shape.len() as i64 - 1)),
    )?;
    if shape.len() == 1 {
        return Ok(vec![super::shape::reshape(ctx, picked, &[1, count])?]);
    }
    Ok(vec![picked])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::Tensor;

    #[test]
    fn binarizer_marks_what_is_above_the_threshold() {
        let mut n = node("Binarizer", &["x"], &["y"], vec![]);
        n.domain = Some(super::DOMAIN.into());
        let g = ModelBuilder::new(17)
            .domain(super::DOMAIN, 1)
            .input("x", DataType::Float, &[3])
            .node(n)
            .output("y")
            .import()
            .unwrap();
        let y = run(&g, &[Tensor::from_f32s(vec![3], &[-1.0, 0.0, 2.0])]).unwrap();
        assert_eq!(y[0].to_f64_vec(), [0.0, 0.0, 1.0]);
    }
}
