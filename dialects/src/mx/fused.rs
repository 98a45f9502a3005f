//! `mx.fused`: one kernel made of several ops. Its body is a graph whose inputs are the op's
//! operands and whose one output is its result. The body is what one loop nest can compute:
//!
//! - element-wise ops (`OpKind::is_elementwise`), evaluated at each result index, each operand
//!   read where numpy broadcasting maps that index;
//! - at most one anchor (`OpKind::is_fusion_anchor`: conv, gemm, matmul, pooling, softmax,
//!   reductions) whose operands are body inputs and whose result has the kernel's shape; the
//!   element-wise ops after it run on each of its results before the store (an epilogue);
//! - constants of one element (scalars, which become literals in the code; other data is an
//!   operand).
//!
//! Every body op must reach the output, and bodies do not nest.

use crate::{verify, Def, Graph, OpKind, TensorType};

/// The result types of an `mx.fused` op with `body` applied to operands of types `operands`.
pub fn infer(body: Option<&Graph>, operands: &[TensorType]) -> Result<Vec<TensorType>, String> {
    let body = body.ok_or("has no body")?;
    verify(body).map_err(|e| format!("body: {e}"))?;
    if operands.len() != body.inputs.len() {
        return Err(format!(
            "has {} operands but its body takes {}",
            operands.len(),
            body.inputs.len()
        ));
    }
    for (i, (t, p)) in operands.iter().zip(&body.inputs).enumerate() {
        if t != body.ty(p.value) {
            return Err(format!("operand {i} is {t} but the body takes {}", body.ty(p.value)));
        }
    }
    check_body(body)?;
    Ok(body.outputs.iter().map(|p| body.ty(p.value).clone()).collect())
}

/// The index of the body's anchor op, if it has one.
pub fn anchor(body: &Graph) -> Option<usize> {
    body.ops.iter().position(|op| op.kind.is_fusion_anchor())
}

/// Checks that `body` (a verified graph) is one loop nest's worth of work (module comment).
pub fn check_body(body: &Graph) -> Result<(), String> {
    let [out] = body.outputs.as_slice() else {
        return Err(format!("body has {} outputs, not one", body.outputs.len()));
    };
    if body.prune().ops.len() != body.ops.len() {
        return Err("body has ops that do not reach its output".into());
    }
    let out_ty = body.ty(out.value);
    let mut anchors = 0;
    for op in &body.ops {
        let at = |m: String| Err(format!("body op {}: {m}", op.kind));
        match op.kind {
            OpKind::Constant => {
                if body.ty(op.results[0]).num_elements() != 1 {
                    return at("only one-element constants are inlined; other data is an operand".into());
                }
            }
            k if k.is_elementwise() => {}
            k if k.is_fusion_anchor() => {
                anchors += 1;
                if anchors > 1 {
                    return at("a body holds at most one anchor".into());
                }
                if op.operands.iter().any(|v| !matches!(body.def(*v), Def::Input(_))) {
                    return at("an anchor's operands must be body inputs".into());
                }
                let ty = body.ty(op.results[0]);
                if ty.shape != out_ty.shape {
                    return at(format!(
                        "the anchor's result {ty} does not have the kernel's shape {out_ty}"
                    ));
                }
            }
            _ => return at("cannot be fused".into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Attrs, DType};

    fn t(shape: &[usize]) -> TensorType {
        TensorType::new(DType::F32, shape.to_vec())
    }

    #[test]
    fn an_epilogue_after_a_matmul_is_a_body() {
        let mut b = Graph::new("k");
        let (x, w, bias) = (
            b.add_input("x", t(&[2, 3])),
            b.add_input("w", t(&[3, 4])),
            b.add_input("b", t(&[4])),
        );
        let y = b.build1(OpKind::MatMul, vec![x, w], Attrs::new()).unwrap();
        let z = b.build1(OpKind::Add, vec![y, bias], Attrs::new()).unwrap();
        let r = b.build1(OpKind::Relu, vec![z], Attrs::new()).unwrap();
        b.add_output("y", r);
        assert_eq!(
            infer(Some(&b), &[t(&[2, 3]), t(&[3, 4]), t(&[4])]).unwrap(),
            vec![t(&[2, 4])]
        );
        assert_eq!(anchor(&b), Some(0));
        let err = infer(Some(&b), &[t(&[2, 3]), t(&[3, 4])]).unwrap_err();
        assert!(err.contains("3 operands") || err.contains("2 operands"), "{err}");
    }

    #[test]
    fn a_fused_op_prints_its_body_and_parses_back() {
        let mut b = Graph::new("k");
        let (x, w) = (b.add_input("in0", t(&[2, 3])), b.add_input("in1", t(&[3, 4])));
        let y = b.build1(OpKind::MatMul, vec![x, w], Attrs::new()).unwrap();
        let half = b.constant(crate::Tensor::from_f64s(DType::F32, vec![], &[0.5]));
        let z = b.build1(OpKind::Mul, vec![y, half], Attrs::new()).unwrap();
        b.add_output("out0", z);
        let mut g = Graph::new("main");
        let (x, w) = (g.add_input("x", t(&[2, 3])), g.add_input("w", t(&[3, 4])));
        let y = g.build_fused(std::sync::Arc::new(b), vec![x, w]).unwrap();
        let z = g.build1(OpKind::Relu, vec![y], Attrs::new()).unwrap();
        g.add_output("y", z);
        let text = crate::text::print(&g);
        assert!(
            text.contains("mx.fused %arg0, %arg1 : tensor<2x4xf32> graph \"k\""),
            "{text}"
        );
        assert!(text.contains("\n    %0 = mx.matmul"), "{text}");
        let back = crate::text::parse(&text).unwrap();
        assert_eq!(back, g);
        assert_eq!(crate::text::print(&back), text);
    }

    #[test]
    fn a_body_of_the_wrong_type_is_a_parse_error_naming_it() {
        let text = "graph \"main\" (%arg0: tensor<2xf32> \"x\") {\n  %0 = mx.fused %arg0 : tensor<2xf32> graph \"k\" (%arg0: tensor<3xf32> \"in0\") {\n    %0 = mx.exp %arg0 : tensor<3xf32>\n    return \"out0\" = %0\n  }\n  return \"y\" = %0\n}\n";
        let err = crate::text::parse(text).unwrap_err().to_string();
        assert!(
            err.contains("mx.fused") && err.contains("operand 0 is tensor<2xf32>"),
            "{err}"
        );
    }

    #[test]
    fn two_anchors_or_a_computed_anchor_operand_are_refused() {
        let mut b = Graph::new("k");
        let x = b.add_input("x", t(&[2, 2]));
        let y = b.build1(OpKind::MatMul, vec![x, x], Attrs::new()).unwrap();
        let z = b.build1(OpKind::MatMul, vec![y, x], Attrs::new()).unwrap();
        b.add_output("y", z);
        let err = check_body(&b).unwrap_err();
        assert!(err.contains("at most one anchor"), "{err}");

        let mut b = Graph::new("k");
        let x = b.add_input("x", t(&[2, 2]));
        let y = b.build1(OpKind::Exp, vec![x], Attrs::new()).unwrap();
        let z = b.build1(OpKind::MatMul, vec![y, x], Attrs::new()).unwrap();
        b.add_output("y", z);
        let err = check_body(&b).unwrap_err();
        assert!(err.contains("must be body inputs"), "{err}");
    }
}
