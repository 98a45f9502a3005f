//! Folded weights are deferred (`constant.rs`): the e-graph holds how each large folded value
//! is computed, not its bytes, so forms that extraction does not pick are never computed, and
//! the picked ones are computed when the file is written.

use super::*;
use crate::analysis::Kind;
use crate::lang::{AttrValue, ConstValue};
use crate::{optimize, OptimizeOptions};
use egg::EGraph;

/// `w[i][j] = i * cols + j`, as a tensor.
fn counting(rows: usize, cols: usize) -> Tensor {
    let values: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    Tensor::from_f32s(vec![rows, cols], &values)
}

fn transposed(w: &Tensor) -> Tensor {
    let perm = Attrs::new().with("perm", Attr::Ints(vec![1, 0]));
    eval::eval(OpKind::Transpose, &[w], &perm).unwrap().unwrap().remove(0)
}

#[test]
fn a_large_folded_weight_leaves_the_rewrite_uncomputed_and_computes_to_the_evaluators_value() {
    let w = counting(64, 128);
    let mut g = Graph::new("weights");
    let x = g.add_input("x", f32s(&[2, 128]));
    let wv = g.constant(w.clone());
    let perm = Attrs::new().with("perm", Attr::Ints(vec![1, 0]));
    let wt = op(&mut g, OpKind::Transpose, &[wv], perm);
    let y = op(&mut g, OpKind::MatMul, &[x, wt], Attrs::new());
    g.add_output("y", y);
    let out = optimize(&g, &[], &OptimizeOptions::default()).unwrap().graph;
    let folded = out.constant_value(out.ops[1].operands[1]).unwrap();
    assert!(folded.is_deferred(), "nothing computed the folded weight");
    assert_eq!(folded.num_bytes(), 64 * 128 * 4);
    // computed for the asker alone (the file writer), and not kept
    let computed = folded.materialized();
    assert!(folded.is_deferred());
    assert_eq!(computed.bytes(), transposed(&w).bytes());
    // `bytes` computes and keeps them
    assert_eq!(folded.bytes(), computed.bytes());
    assert!(!folded.is_deferred());
}

#[test]
fn small_folded_values_are_computed_at_once() {
    let mut g = Graph::new("small");
    let w = g.constant(counting(4, 8));
    let perm = Attrs::new().with("perm", Attr::Ints(vec![1, 0]));
    let wt = op(&mut g, OpKind::Transpose, &[w], perm);
    g.add_output("w", wt);
    let out = optimize(&g, &[], &OptimizeOptions::default()).unwrap().graph;
    let folded = out.constant_value(out.outputs[0].value).unwrap();
    // rules read small constants (shapes, scales): they are never deferred
    assert!(!folded.is_deferred());
    assert_eq!(folded.bytes(), transposed(&counting(4, 8)).bytes());
}

/// Adds `transpose(w, [1, 0])` for the constant `w` to `egraph`.
fn add_transpose(egraph: &mut EGraph<Mx, MxAnalysis>, w: &Tensor) -> Id {
    let c = egraph.add(Mx::Const(ConstValue::new(w.clone())));
    let perm = egraph.add(Mx::Attr(AttrValue::Ints(vec![1, 0])));
    egraph.add(Mx::Op(OpKind::Transpose, vec![perm, c]))
}

#[test]
fn the_same_fold_of_the_same_weight_is_one_class_and_a_deferred_value_merges_with_its_own() {
    let w = counting(64, 128);
    let mut egraph = EGraph::new(MxAnalysis::default());
    let a = add_transpose(&mut egraph, &w);
    // the same weight, bytes copied: compared by content, so the same fold
    let copy = Tensor::from_bytes(w.ty.clone(), w.bytes().to_vec()).unwrap();
    let b = add_transpose(&mut egraph, &copy);
    egraph.rebuild();
    assert_eq!(egraph.find(a), egraph.find(b));
    let deferred = egraph[a].data.constant.clone().expect("folded");
    assert!(deferred.tensor.is_deferred());
    assert!(matches!(egraph[a].data.kind, Kind::Value(_)));

    // the same value computed another way: a sound merge (the check computes the deferred one)
    let same = egraph.add(Mx::Const(ConstValue::new(transposed(&w))));
    egraph.union(a, same);
    egraph.rebuild();
    assert!(egraph.analysis.conflicts.is_empty(), "{:?}", egraph.analysis.conflicts);
    assert!(deferred.tensor.is_deferred(), "the comparison kept no bytes");

    // another value of the same type: an unsound merge, reported
    let mut shifted = transposed(&w).to_f64_vec();
    shifted[5] += 1.0;
    let different = egraph.add(Mx::Const(ConstValue::new(Tensor::from_f64s(
        DType::F32,
        vec![128, 64],
        &shifted,
    ))));
    egraph.union(a, different);
    egraph.rebuild();
    assert_eq!(egraph.analysis.conflicts.len(), 1, "{:?}", egraph.analysis.conflicts);
}
