//! Matrix products: `Gemm` (C optional from opset 11; before opset 7 its `broadcast`
//! attribute is implied by numpy broadcasting) and `MatMul`.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use mxc_dialects::{Attr, Attrs, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("Gemm", gemm);
    r.add_all("MatMul", matmul);
}

fn gemm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let mut operands = vec![ctx.input(0)?, ctx.input(1)?];
    operands.extend(ctx.opt_input(2));
    if ctx.opset < 7 {
        legacy_bias_broadcast(ctx)?;
    }
    let n = &ctx.node;
    let attrs = Attrs::new()
        .with("alpha", Attr::Float(n.float("alpha", 1.0)? as f64))
        .with("beta", Attr::Float(n.float("beta", 1.0)? as f64))
        .with("trans_a", Attr::Int((n.int("transA", 0)? != 0) as i64))
        .with("trans_b", Attr::Int((n.int("transB", 0)? != 0) as i64));
    Ok(vec![ctx.build1(OpKind::Gemm, operands, attrs)?])
}

/// Before opset 7 a bias `C` broadcasts only when `broadcast = 1`; else it has the result's
/// shape [M, N] (mx broadcasts it in every case, so only a wrong shape needs an error).
fn legacy_bias_broadcast(ctx: &Ctx) -> Result<(), String> {
    let broadcast = ctx.node.int("broadcast", 0)? != 0;
    let Some(c) = ctx.opt_input(2) else {
        return Ok(());
    };
    let (a, b) = (&ctx.ty(ctx.input(0)?).shape, &ctx.ty(ctx.input(1)?).shape);
    let (trans_a, trans_b) = (ctx.node.int("transA", 0)? != 0, ctx.node.int("transB", 0)? != 0);
    let rows = if trans_a { a.last() } else { a.first() };
    let cols = if trans_b { b.first() } else { b.last() };
    let full = [rows.copied().unwrap_or(0), cols.copied().unwrap_or(0)];
    let shape = &ctx.ty(c).shape;
    if !broadcast && shape[..] != full {
        return Err(format!(
            "C of shape {shape:?} with broadcast = 0 must have the result's shape {full:?}"
        ));
    }
    Ok(())
}

fn matmul(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    Ok(vec![ctx.build1(OpKind::MatMul, vec![a, b], Attrs::new())?])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    #[test]
    fn gemm_attributes_are_renamed() {
        let text = ModelBuilder::new(13)
            .input("a", DataType::Float, &[3, 2])
            .input("b", DataType::Float, &[4, 3])
            .node(node(
                "Gemm",
                &["a", "b"],
                &["y"],
                vec![int_attr("transA", 1), int_attr("transB", 1)],
            ))
            .output("y")
            .text();
        assert!(
            text.contains("mx.gemm %arg0, %arg1 {alpha = 1.0, beta = 1.0, trans_a = 1, trans_b = 1} : tensor<2x4xf32>"),
            "{text}"
        );
    }
}
