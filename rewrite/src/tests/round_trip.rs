//! Graph -> e-graph -> extraction -> graph, with no rules, gives back the same graph: results
//! of multi-result ops, values used twice, constants, unused inputs, outputs that are inputs.

use super::*;
use crate::{optimize, OptimizeOptions};
use mxc_dialects::text::print;

fn layer_norm_graph() -> Graph {
    let mut g = Graph::new("ln");
    let x = g.add_input("x", f32s(&[2, 4]));
    g.add_input("unused", f32s(&[3]));
    let scale = g.constant(Tensor::from_f32s(vec![4], &[1.0, 2.0, 3.0, 4.0]));
    let bias = g.constant(Tensor::from_f32s(vec![4], &[0.5; 4]));
    let attrs = int("axis", 1).with("epsilon", Attr::Float(1e-5));
    let ln = g.build(OpKind::LayerNorm, vec![x, scale, bias], attrs).unwrap();
    let sq = op(&mut g, OpKind::Mul, &[ln[0], ln[0]], Attrs::new());
    let e = op(&mut g, OpKind::Exp, &[sq], Attrs::new());
    g.add_output("out", e);
    g.add_output("mean", ln[1]);
    g.add_output("y", ln[0]);
    g.add_output("x", x);
    g
}

#[test]
fn a_graph_comes_back_unchanged_without_rules() {
    let g = layer_norm_graph();
    let out = optimize(&g, &[], &OptimizeOptions::default()).unwrap();
    assert_eq!(print(&out.graph), print(&g));
    // the same kernels, their costs summed in another order
    let (after, before) = (out.stats.cost_after, out.stats.cost_before);
    assert!((after - before).abs() <= 1e-9 * before, "{after} != {before}");
}

#[test]
fn identical_ops_are_computed_once() {
    let mut g = Graph::new("cse");
    let x = g.add_input("x", f32s(&[8]));
    let a = op(&mut g, OpKind::Exp, &[x], Attrs::new());
    let b = op(&mut g, OpKind::Exp, &[x], Attrs::new());
    let c = op(&mut g, OpKind::Add, &[a, b], Attrs::new());
    g.add_output("c", c);
    let out = optimize(&g, &[], &OptimizeOptions::default()).unwrap();
    let mut want = Graph::new("cse");
    let x = want.add_input("x", f32s(&[8]));
    let a = op(&mut want, OpKind::Exp, &[x], Attrs::new());
    let c = op(&mut want, OpKind::Add, &[a, a], Attrs::new());
    want.add_output("c", c);
    assert_eq!(print(&out.graph), print(&want));
    assert!(out.stats.cost_after < out.stats.cost_before);
}

#[test]
fn an_invalid_graph_is_refused() {
    let mut g = Graph::new("bad");
    let x = g.add_input("x", f32s(&[2]));
    g.push_op(OpKind::Neg, vec![x], Attrs::new(), vec![f32s(&[3])]);
    assert!(matches!(
        optimize(&g, &[], &OptimizeOptions::default()),
        Err(crate::RewriteError::InvalidInput(_))
    ));
}
