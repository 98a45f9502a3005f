//! Rules built by hand with egg patterns: the cheaper form is extracted, values stay shared,
//! explosive rules are stopped by the limits, unsound rules are reported, and the result is
//! never costlier than the input and computes the same outputs.

use super::*;
use crate::{optimize, OptimizeOptions, RewriteError};
use mxc_dialects::text::print;

#[test]
fn double_negation_is_removed_and_shared_values_stay_shared() {
    let mut g = Graph::new("negneg");
    let x = g.add_input("x", f32s(&[4]));
    let a = op(&mut g, OpKind::Neg, &[x], Attrs::new());
    let b = op(&mut g, OpKind::Neg, &[a], Attrs::new());
    let c = op(&mut g, OpKind::Add, &[b, a], Attrs::new());
    g.add_output("b", b);
    g.add_output("c", c);
    let out = optimize(&g, &[neg_neg()], &OptimizeOptions::default()).unwrap();

    let mut want = Graph::new("negneg");
    let x = want.add_input("x", f32s(&[4]));
    let a = op(&mut want, OpKind::Neg, &[x], Attrs::new());
    let c = op(&mut want, OpKind::Add, &[x, a], Attrs::new());
    want.add_output("b", x);
    want.add_output("c", c);
    assert_eq!(print(&out.graph), print(&want));
    assert!(out.stats.greedy_won);
    assert!(matches!(out.stats.stop_reason, egg::StopReason::Saturated));
}

#[test]
fn explosive_rules_are_bounded_and_cost_nothing() {
    let g = max_chain(10);
    let opts = OptimizeOptions {
        node_limit: 2_000,
        node_growth: 1,
        ..OptimizeOptions::default()
    };
    let out = optimize(&g, &max_ac(), &opts).unwrap();
    assert!(
        matches!(out.stats.stop_reason, egg::StopReason::NodeLimit(_)),
        "{:?}",
        out.stats
    );
    assert_eq!(out.stats.cost_after, out.stats.cost_before);
    let inputs: Vec<Tensor> = (0..10)
        .map(|i| Tensor::from_f32s(vec![4], &[i as f32, -1.0, 0.5, 9.0 - i as f32]))
        .collect();
    assert_eq!(interpret(&out.graph, &inputs), interpret(&g, &inputs));
}

#[test]
fn a_useless_rule_saturates_and_changes_nothing() {
    let mut g = Graph::new("useless");
    let x = g.add_input("x", f32s(&[4]));
    let a = op(&mut g, OpKind::Abs, &[x], Attrs::new());
    g.add_output("a", a);
    let out = optimize(&g, &[neg_intro()], &OptimizeOptions::default()).unwrap();
    assert_eq!(print(&out.graph), print(&g));
    assert!(matches!(out.stats.stop_reason, egg::StopReason::Saturated));
}

#[test]
fn a_rule_merging_different_types_is_reported_as_unsound() {
    // `(transpose ?x) => ?x` drops the transpose whatever its permutation.
    let lhs = pattern(vec![
        Err("perm"),
        Err("x"),
        Ok(Mx::Op(OpKind::Transpose, vec![id(0), id(1)])),
    ]);
    let drop = Rewrite::new("drop-transpose", lhs, pattern(vec![Err("x")])).unwrap();
    let mut g = Graph::new("t");
    let x = g.add_input("x", f32s(&[2, 3]));
    let t = op(
        &mut g,
        OpKind::Transpose,
        &[x],
        Attrs::new().with("perm", Attr::Ints(vec![1, 0])),
    );
    g.add_output("t", t);
    match optimize(&g, &[drop], &OptimizeOptions::default()) {
        Err(RewriteError::Unsound(why)) => assert!(why[0].contains("tensor<3x2xf32>"), "{why:?}"),
        other => panic!("expected an unsoundness error, got {other:?}"),
    }
}

/// A small deterministic generator (xorshift) of graphs of negations, sums, products and
/// absolute values over two inputs, each op reading earlier values (so values are shared).
fn random_graph(seed: u64, ops: usize) -> Graph {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move |n: usize| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % n as u64) as usize
    };
    let mut g = Graph::new("random");
    let mut values = vec![g.add_input("a", f32s(&[3])), g.add_input("b", f32s(&[3]))];
    for _ in 0..ops {
        let kind = [OpKind::Neg, OpKind::Neg, OpKind::Add, OpKind::Mul, OpKind::Abs][next(5)];
        let arity = kind.arity().0;
        let operands: Vec<ValueId> = (0..arity)
            .map(|_| values[values.len() - 1 - next(values.len().min(4))])
            .collect();
        values.push(op(&mut g, kind, &operands, Attrs::new()));
    }
    g.add_output("last", values[values.len() - 1]);
    g.add_output("middle", values[values.len() / 2]);
    g
}

#[test]
fn optimised_random_graphs_compute_the_same_and_never_cost_more() {
    let inputs = [
        Tensor::from_f32s(vec![3], &[1.5, -2.0, 0.25]),
        Tensor::from_f32s(vec![3], &[-0.5, 3.0, 2.0]),
    ];
    let opts = OptimizeOptions {
        iter_limit: 6,
        ..OptimizeOptions::default()
    };
    for seed in 0..40 {
        let g = random_graph(seed, 12);
        let out = optimize(&g, &[neg_neg(), neg_intro()], &opts).unwrap();
        // costs are sums of floats, added in another order after extraction
        assert!(
            out.stats.cost_after <= out.stats.cost_before * (1.0 + 1e-12),
            "seed {seed}: {} > {}",
            out.stats.cost_after,
            out.stats.cost_before
        );
        assert_eq!(interpret(&out.graph, &inputs), interpret(&g, &inputs), "seed {seed}");
    }
}
