//! Normalisation: `BatchNormalization` in its inference form and `LayerNormalization` with
//! its three outputs (Y, mean, inverse standard deviation).

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::axes;
use mxc_dialects::{Attr, Attrs, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("BatchNormalization", batch_norm);
    r.add_all("LayerNormalization", layer_norm);
}

fn batch_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    if ctx.node.int("training_mode", 0)? != 0 || (1..5).any(|k| ctx.wants_output(k)) {
        return Err("training mode (running statistics outputs) is not supported".into());
    }
    // `momentum` updates the running statistics (training mode, refused above); `is_test`
    // (before opset 7) is ignored, as inference runtimes do
    ctx.node.without_effect(&["momentum", "is_test"]);
    if ctx.node.int("spatial", 1)? == 0 {
        return Err("spatial = 0 (per-element statistics) is not supported".into());
    }
    let operands = (0..5).map(|i| ctx.input(i)).collect::<Result<Vec<_>, _>>()?;
    let epsilon = ctx.node.float("epsilon", 1e-5)? as f64;
    Ok(vec![ctx.build1(
        OpKind::BatchNorm,
        operands,
        Attrs::new().with("epsilon", Attr::Float(epsilon)),
    )?])
}

fn layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let stash = ctx.node.int("stash_type", 1)?;
    if stash != 1 {
        return Err(format!("stash_type {stash} is not supported (only 1, float)"));
    }
    let x = ctx.input(0)?;
    let axis = axes::axis(ctx.node.int("axis", -1)?, ctx.ty(x).rank())?;
    let mut operands = vec![x, ctx.input(1)?];
    operands.extend(ctx.opt_input(2));
    let attrs = Attrs::new()
        .with("axis", Attr::Int(axis as i64))
        .with("epsilon", Attr::Float(ctx.node.float("epsilon", 1e-5)? as f64));
    ctx.build(OpKind::LayerNorm, operands, attrs)
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    #[test]
    fn layer_norm_has_three_results() {
        let text = ModelBuilder::new(17)
            .input("x", DataType::Float, &[2, 3])
            .input("s", DataType::Float, &[3])
            .node(node("LayerNormalization", &["x", "s"], &["y", "mean", "inv"], vec![]))
            .output("y")
            .output("inv")
            .text();
        assert!(
            text.contains("%0, %1, %2 = mx.layer_norm %arg0, %arg1 {axis = 1, epsilon = "),
            "{text}"
        );
        assert!(text.contains("return \"y\" = %0, \"inv\" = %2"), "{text}");
    }

    #[test]
    fn batch_norm_training_is_refused() {
        let m = ModelBuilder::new(15)
            .input("x", DataType::Float, &[1, 2, 2])
            .input("p", DataType::Float, &[2])
            .node(node(
                "BatchNormalization",
                &["x", "p", "p", "p", "p"],
                &["y"],
                vec![int_attr("training_mode", 1)],
            ))
            .output("y");
        assert_eq!(
            m.error(),
            "node #0 (output \"y\") (BatchNormalization): training mode (running statistics outputs) is not supported"
        );
    }
}
