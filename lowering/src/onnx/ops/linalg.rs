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
    let n = &ctx.node;
    let attrs = Attrs::new()
        .with("alpha", Attr::Float(n.float("alpha", 1.0)? as f64))
        .with("beta", Attr::Float(n.float("beta", 1.0)? as f64))
        .with("trans_a", Attr::Int((n.int("transA", 0)? != 0) as i64))
        .with("trans_b", Attr::Int((n.int("transB", 0)? != 0) as i64));
    Ok(vec![ctx.build1(OpKind::Gemm, operands, attrs)?])
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
