//! The extractor on hand-built e-graphs: a value used twice is paid for once, so a form that
//! shares a costly value beats one that is cheaper only when that value is counted twice.

use super::*;
use crate::convert::MxEGraph;
use crate::cost::{CostModel, OpSite};
use crate::extract::{dag_cost, extract, Fallback, NodeCosts};

/// Costs by kind only: `exp` is dear, `sqrt` dearer, everything else costs 1.
#[derive(Debug)]
struct ByKind {
    sqrt: f64,
}

impl CostModel for ByKind {
    fn op_cost(&self, op: &OpSite) -> f64 {
        match op.kind {
            OpKind::Exp => 100.0,
            OpKind::Sqrt => self.sqrt,
            _ => 1.0,
        }
    }
}

/// `add(neg(exp x), abs(exp x))` and `sqrt x` in one class: 103 as a DAG, 203 as a tree.
fn shared_or_not() -> (MxEGraph, Id, Vec<Mx>) {
    let mut eg = MxEGraph::new(MxAnalysis::new(vec![f32s(&[4])], 4096));
    let nodes = vec![
        Mx::Input(0),
        Mx::Op(OpKind::Exp, vec![id(0)]),
        Mx::Op(OpKind::Neg, vec![id(1)]),
        Mx::Op(OpKind::Abs, vec![id(1)]),
        Mx::Op(OpKind::Add, vec![id(2), id(3)]),
    ];
    let ids: Vec<Id> = nodes.iter().map(|n| eg.add(n.clone())).collect();
    let sqrt = eg.add(Mx::Op(OpKind::Sqrt, vec![ids[0]]));
    eg.union(ids[4], sqrt);
    eg.rebuild();
    (eg, ids[4], nodes)
}

#[test]
fn a_shared_value_is_counted_once() {
    let (eg, root, original) = shared_or_not();
    let model = ByKind { sqrt: 150.0 };
    let best = extract(
        &eg,
        &[root],
        &[Fallback {
            nodes: &original,
            refine: false,
        }],
        &model,
    )
    .unwrap();
    assert_eq!(best.cost, 103.0);
    assert!(matches!(best.selection.node(&eg, root), Some(Mx::Op(OpKind::Add, _))));
    let costs = NodeCosts::new(&eg, &model);
    assert_eq!(dag_cost(&eg, &best.selection, &[root], &costs), Ok(103.0));
}

#[test]
fn the_cheaper_alternative_wins_when_sharing_does_not_pay() {
    let (eg, root, _) = shared_or_not();
    let best = extract(&eg, &[root], &[], &ByKind { sqrt: 90.0 }).unwrap();
    assert_eq!(best.cost, 90.0);
    assert!(matches!(best.selection.node(&eg, root), Some(Mx::Op(OpKind::Sqrt, _))));
    assert!(best.greedy);
}

#[test]
fn ill_typed_nodes_are_never_extracted() {
    let mut eg = MxEGraph::new(MxAnalysis::new(vec![f32s(&[4]), f32s(&[3])], 4096));
    let (x, y) = (eg.add(Mx::Input(0)), eg.add(Mx::Input(1)));
    let good = eg.add(Mx::Op(OpKind::Exp, vec![x]));
    let bad = eg.add(Mx::Op(OpKind::Add, vec![x, y]));
    assert!(matches!(eg[bad].data.kind, crate::analysis::Kind::Invalid(_)));
    eg.union(good, bad);
    eg.rebuild();
    assert!(eg.analysis.conflicts.is_empty(), "an invalid node yields to the type");
    let best = extract(&eg, &[good], &[], &ByKind { sqrt: 1.0 }).unwrap();
    assert!(matches!(best.selection.node(&eg, good), Some(Mx::Op(OpKind::Exp, _))));
}
