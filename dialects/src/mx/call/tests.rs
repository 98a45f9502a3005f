//! What each callee computes and refuses, the parameters `recognise` reads off a body, their
//! file form, and `mx.call` in the text form and the verifier.

use super::*;
use crate::{Attr, Attrs, DType, Graph, OpKind, TensorType};
use std::sync::Arc;

fn t(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

/// A body `anchor(in0, in1[, in2])` followed by `epilogue` ops, each reading the previous
/// result (an `add` also reads the next input).
fn body(anchor: OpKind, attrs: Attrs, inputs: &[&[usize]], epilogue: &[(OpKind, Attrs)]) -> Graph {
    let mut g = Graph::new("kernel");
    let ins: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, s)| g.add_input(&format!("in{i}"), t(s)))
        .collect();
    let anchor_operands = if anchor == OpKind::MatMul { 2 } else { ins.len().min(3) };
    let mut used = anchor_operands.min(ins.len());
    if epilogue.iter().any(|(k, _)| *k == OpKind::Add) && anchor != OpKind::MatMul {
        used = ins.len() - 1;
    }
    let mut v = g.build1(anchor, ins[..used].to_vec(), attrs).unwrap();
    for (kind, attrs) in epilogue {
        let operands = match kind {
            OpKind::Add => vec![v, ins[used]],
            _ => vec![v],
        };
        v = g.build1(*kind, operands, attrs.clone()).unwrap();
    }
    g.add_output("out0", v);
    g
}

fn gemm_attrs(trans_b: i64, alpha: f64, beta: f64) -> Attrs {
    Attrs::new()
        .with("alpha", Attr::Float(alpha))
        .with("beta", Attr::Float(beta))
        .with("trans_a", Attr::Int(0))
        .with("trans_b", Attr::Int(trans_b))
}

fn gelu(form: &str) -> (OpKind, Attrs) {
    (OpKind::Gelu, Attrs::new().with("approximate", Attr::Str(form.into())))
}

fn matmul_call(g: &Graph) -> MatmulCall {
    match recognise(Callee::BlasLtMatmul, g) {
        Ok(LibraryCall::Matmul(c)) => c,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_batched_product_with_a_bias_and_relu_is_one_blaslt_call_with_a_shared_b() {
    let add = (OpKind::Add, Attrs::new());
    let relu = (OpKind::Relu, Attrs::new());
    let g = body(
        OpKind::MatMul,
        Attrs::new(),
        &[&[2, 3, 5, 7], &[7, 4], &[4]],
        &[add, relu],
    );
    let c = matmul_call(&g);
    assert_eq!((c.batch, c.m, c.n, c.k), (6, 5, 4, 7));
    assert_eq!((c.stride_a, c.stride_b), (35, 0));
    assert_eq!((c.a, c.b, c.bias, c.activation), (0, 1, Some(2), Activation::Relu));
    assert_eq!((c.trans_a, c.trans_b, c.alpha), (false, false, 1.0));
    let call = LibraryCall::Matmul(c);
    // A, B and the bias as they lie, the result 6 x 5 x 4
    assert_eq!(
        call.operand_bytes(),
        (vec![(0, 6 * 35 * 4), (1, 28 * 4), (2, 16)], 6 * 20 * 4)
    );
}

#[test]
fn a_gemm_with_b_transposed_alpha_and_a_row_of_c_is_a_blaslt_call_with_relu() {
    let relu = (OpKind::Relu, Attrs::new());
    let g = body(
        OpKind::Gemm,
        gemm_attrs(1, 0.5, 1.0),
        &[&[8, 16], &[32, 16], &[1, 32]],
        &[relu],
    );
    let c = matmul_call(&g);
    assert_eq!((c.batch, c.m, c.n, c.k), (1, 8, 32, 16));
    assert_eq!((c.trans_a, c.trans_b, c.alpha), (false, true, 0.5));
    assert_eq!((c.bias, c.activation), (Some(2), Activation::Relu));
}

#[test]
fn what_the_libraries_do_not_compute_exactly_stays_a_generated_kernel() {
    let refused = |g: &Graph, callee: Callee, why: &str| {
        let err = recognise(callee, g).unwrap_err();
        assert!(err.contains(why), "{err}");
    };
    // GELU in either form: the libraries do not say which their epilogue computes
    for form in ["none", "tanh"] {
        let g = body(OpKind::MatMul, Attrs::new(), &[&[4, 8], &[8, 4]], &[gelu(form)]);
        refused(&g, Callee::BlasLtMatmul, "applies mx.gelu, not relu");
    }
    // a batch of A broadcast against B's partly: [2, 1] x [1, 3]
    let g = body(OpKind::MatMul, Attrs::new(), &[&[2, 1, 4, 8], &[1, 3, 8, 4]], &[]);
    refused(&g, Callee::BlasLtMatmul, "partly");
    // C added with beta 2, and C a whole matrix
    let g = body(OpKind::Gemm, gemm_attrs(0, 1.0, 2.0), &[&[4, 8], &[8, 4], &[4]], &[]);
    refused(&g, Callee::BlasLtMatmul, "beta 2");
    let g = body(OpKind::Gemm, gemm_attrs(0, 1.0, 1.0), &[&[4, 8], &[8, 4], &[4, 4]], &[]);
    refused(&g, Callee::BlasLtMatmul, "row vector");
    // a vector operand
    let g = body(OpKind::MatMul, Attrs::new(), &[&[8], &[8, 4]], &[]);
    refused(&g, Callee::BlasLtMatmul, "vector");
    // a convolution is not a product, nor a product a convolution
    let conv = conv_body(&[1, 1, 1, 1]);
    refused(&conv, Callee::BlasLtMatmul, "not mx.conv");
    let g = body(OpKind::MatMul, Attrs::new(), &[&[4, 8], &[8, 4]], &[]);
    refused(&g, Callee::MiopenConvForward, "one 2-D convolution");
    // pads that differ between the sides
    refused(
        &conv_body(&[1, 1, 2, 1]),
        Callee::MiopenConvForward,
        "differ between the two sides",
    );
}

fn conv_body(pads: &[i64]) -> Graph {
    let attrs = Attrs::new()
        .with("dilations", Attr::Ints(vec![1, 1]))
        .with("group", Attr::Int(2))
        .with("pads", Attr::Ints(pads.to_vec()))
        .with("strides", Attr::Ints(vec![2, 1]));
    body(OpKind::Conv, attrs, &[&[1, 4, 9, 8], &[6, 2, 3, 3], &[6]], &[])
}

#[test]
fn a_grouped_strided_convolution_with_a_bias_is_one_miopen_call() {
    let g = conv_body(&[1, 1, 1, 1]);
    let Ok(LibraryCall::Conv(c)) = recognise(Callee::MiopenConvForward, &g) else {
        panic!("{:?}", recognise(Callee::MiopenConvForward, &g))
    };
    assert_eq!((c.batch, c.channels, c.height, c.width), (1, 4, 9, 8));
    assert_eq!((c.out_channels, c.kernel, c.group), (6, [3, 3], 2));
    assert_eq!(
        (c.pads, c.strides, c.dilations, c.out),
        ([1, 1], [2, 1], [1, 1], [5, 8])
    );
    assert_eq!((c.input, c.weights, c.bias), (0, 1, Some(2)));
}

#[test]
fn parameters_read_back_from_their_file_form_and_inconsistent_ones_are_refused() {
    let add = (OpKind::Add, Attrs::new());
    let calls = [
        recognise(
            Callee::BlasLtMatmul,
            &body(OpKind::MatMul, Attrs::new(), &[&[3, 5, 7], &[3, 7, 4], &[4]], &[add]),
        ),
        recognise(Callee::MiopenConvForward, &conv_body(&[0, 1, 0, 1])),
    ];
    for call in calls {
        let call = call.unwrap();
        assert_eq!(LibraryCall::decode(call.callee(), &call.encode()).unwrap(), call);
        // one more row of A (a matrix of the batch no longer where the stride says), one more
        // channel (no longer a multiple of the groups)
        let mut v = call.encode();
        v[1] += 1;
        let err = LibraryCall::decode(call.callee(), &v).unwrap_err();
        assert!(err.contains("inconsistent sizes"), "{err}");
        let err = LibraryCall::decode(call.callee(), &v[1..]).unwrap_err();
        assert!(err.contains("parameters"), "{err}");
    }
}

#[test]
fn a_call_prints_parses_back_and_is_verified_against_its_callee() {
    let relu = (OpKind::Relu, Attrs::new());
    let kernel = Arc::new(body(OpKind::MatMul, Attrs::new(), &[&[4, 8], &[8, 4]], &[relu]));
    let mut g = Graph::new("main");
    let (a, b) = (g.add_input("a", t(&[4, 8])), g.add_input("b", t(&[8, 4])));
    let y = g.build_call(Callee::BlasLtMatmul, kernel.clone(), vec![a, b]).unwrap();
    g.add_output("y", y);
    let text = crate::text::print(&g);
    assert!(
        text.contains("mx.call %arg0, %arg1 {callee = \"blaslt.matmul\"} : tensor<4x4xf32> graph"),
        "{text}"
    );
    assert_eq!(crate::text::parse(&text).unwrap(), g);
    // a callee that does not compute the body, and one that does not exist
    let conv = text.replace("blaslt.matmul", "miopen.conv_forward");
    let err = crate::text::parse(&conv).unwrap_err().to_string();
    assert!(
        err.contains("miopen.conv_forward cannot compute this body: it computes one 2-D convolution"),
        "{err}"
    );
    let err = crate::text::parse(&text.replace("blaslt.matmul", "cublas.gemm"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("callee `cublas.gemm` is not one of blaslt.matmul, miopen.conv_forward"),
        "{err}"
    );
    let err = g
        .clone()
        .build_call(Callee::MiopenConvForward, kernel, vec![a, b])
        .unwrap_err()
        .to_string();
    assert!(err.contains("mx.call"), "{err}");
}
