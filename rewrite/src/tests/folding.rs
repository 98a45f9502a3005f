//! Constant folding by the analysis alone (no rules): shape arithmetic becomes literals,
//! weights are transposed and scaled at compile time whatever their size, and large results
//! that grow their operands (broadcasts, concatenations) are left to run time.

use super::*;
use crate::{optimize, OptimizeOptions};
use mxc_dialects::text::print;

#[test]
fn a_shape_chain_folds_to_a_literal() {
    // What exporters emit: Shape(x) -> Gather(0) -> Concat([.., -1]) -> Cast, feeding a reshape.
    let mut g = Graph::new("shape");
    let x = g.add_input("x", f32s(&[2, 3]));
    let shape = g.constant(i64s(vec![2], &[2, 3]));
    let zero = g.constant(i64s(vec![1], &[0]));
    let batch = op(&mut g, OpKind::Gather, &[shape, zero], int("axis", 0));
    let minus_one = g.constant(i64s(vec![1], &[-1]));
    let target = op(&mut g, OpKind::Concat, &[batch, minus_one], int("axis", 0));
    let target = op(
        &mut g,
        OpKind::Cast,
        &[target],
        Attrs::new().with("to", Attr::DType(DType::I32)),
    );
    let y = op(&mut g, OpKind::Relu, &[x], Attrs::new());
    g.add_output("shape", target);
    g.add_output("y", y);
    let out = optimize(&g, &[], &OptimizeOptions::default()).unwrap();

    let mut want = Graph::new("shape");
    let x = want.add_input("x", f32s(&[2, 3]));
    let literal = want.constant(Tensor::from_i64s(DType::I32, vec![2], &[2, -1]));
    let y = op(&mut want, OpKind::Relu, &[x], Attrs::new());
    want.add_output("shape", literal);
    want.add_output("y", y);
    assert_eq!(print(&out.graph), print(&want));
}

#[test]
fn weights_are_transposed_at_compile_time() {
    let values: Vec<f32> = (0..64 * 128).map(|i| i as f32).collect();
    let mut g = Graph::new("weights");
    let x = g.add_input("x", f32s(&[2, 128]));
    let w = g.constant(Tensor::from_f32s(vec![64, 128], &values));
    let wt = op(
        &mut g,
        OpKind::Transpose,
        &[w],
        Attrs::new().with("perm", Attr::Ints(vec![1, 0])),
    );
    let y = op(&mut g, OpKind::MatMul, &[x, wt], Attrs::new());
    g.add_output("y", y);
    let out = optimize(&g, &[], &OptimizeOptions::default()).unwrap().graph;
    let kinds: Vec<OpKind> = out.ops.iter().map(|o| o.kind).collect();
    assert_eq!(kinds, [OpKind::Constant, OpKind::MatMul], "{}", print(&out));
    let folded = out.constant_value(out.ops[1].operands[1]).unwrap();
    assert_eq!(folded.shape(), &[128, 64]);
    assert_eq!(folded.get_f64(1), 128.0, "element [0][1] of the transpose is w[1][0]");
}

/// A weight of `rows` x `cols` elements, `w[i][j] = i * cols + j`.
fn weight(g: &mut Graph, rows: usize, cols: usize) -> ValueId {
    let values: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    g.constant(Tensor::from_f32s(vec![rows, cols], &values))
}

#[test]
fn big_element_wise_arithmetic_on_weights_is_folded() {
    // Per-channel scaling of a 64 x 128 weight (8192 elements, over the fold limit) by a
    // factor computed from small vectors: sqrt, add, div of [64, 1], then mul and sub.
    let mut g = Graph::new("scale");
    let w = weight(&mut g, 64, 128);
    let var = g.constant(Tensor::from_f32s(vec![64, 1], &[4.0; 64]));
    let std = op(&mut g, OpKind::Sqrt, &[var], Attrs::new());
    let k = op(&mut g, OpKind::Div, &[var, std], Attrs::new());
    let scaled = op(&mut g, OpKind::Mul, &[w, k], Attrs::new());
    let shifted = op(&mut g, OpKind::Sub, &[scaled, w], Attrs::new());
    g.add_output("w", shifted);
    let out = optimize(&g, &[], &OptimizeOptions::default()).unwrap().graph;
    let kinds: Vec<OpKind> = out.ops.iter().map(|o| o.kind).collect();
    assert_eq!(kinds, [OpKind::Constant], "{}", print(&out));
    let folded = out.constant_value(out.outputs[0].value).unwrap();
    assert_eq!(folded.shape(), &[64, 128]);
    // w * (4 / sqrt(4)) - w = w
    assert_eq!(folded.get_f64(130), 130.0);
    assert_eq!(interpret(&out, &[]), interpret(&g, &[]));
}

#[test]
fn big_results_that_grow_their_operands_are_not_folded() {
    // [64, 1] + [1, 128] broadcasts to 8192 elements from 192: computed at run time.
    let mut g = Graph::new("grow");
    let col = weight(&mut g, 64, 1);
    let row = weight(&mut g, 1, 128);
    let sum = op(&mut g, OpKind::Add, &[col, row], Attrs::new());
    g.add_output("sum", sum);
    let out = optimize(&g, &[], &OptimizeOptions::default()).unwrap().graph;
    assert_eq!(print(&out), print(&g));
}

#[test]
fn the_fold_limit_is_configurable() {
    let mut g = Graph::new("small");
    let a = g.constant(Tensor::from_f32s(vec![4], &[1.0, 2.0, 3.0, 4.0]));
    let b = op(
        &mut g,
        OpKind::Expand,
        &[a],
        Attrs::new().with("shape", Attr::Ints(vec![2, 4])),
    );
    g.add_output("b", b);
    let folded = optimize(&g, &[], &OptimizeOptions::default()).unwrap().graph;
    assert_eq!(folded.ops.len(), 1);
    let opts = OptimizeOptions {
        fold_limit: 2,
        ..OptimizeOptions::default()
    };
    let kept = optimize(&g, &[], &opts).unwrap().graph;
    assert_eq!(print(&kept), print(&g));
}

#[test]
fn a_concatenation_of_constants_is_folded_at_any_size() {
    // weights padded with zeros (`integer.rules`' kernel rows): no larger than its operands
    // together, so folded past the limit
    let mut g = Graph::new("padded");
    let w = weight(&mut g, 64, 100);
    let zeros = weight(&mut g, 64, 3);
    let padded = op(&mut g, OpKind::Concat, &[w, zeros], int("axis", 1));
    g.add_output("padded", padded);
    let out = optimize(&g, &[], &OptimizeOptions::default()).unwrap().graph;
    assert_eq!(out.ops.len(), 1, "{}", print(&out));
    assert_eq!(interpret(&out, &[]), interpret(&g, &[]));
}
