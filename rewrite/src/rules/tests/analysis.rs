//! A minimal e-class analysis for the tests: types from `mx::infer`, constants from
//! `Mx::Const` leaves only (no folding). The real analysis lives in `crate::analysis`.

use crate::lang::{ConstValue, Mx};
use crate::rules::facts::{attr_of, ClassFacts};
use egg::{Analysis, DidMerge, EGraph, Id};
use mxc_dialects::{mx, Attrs, TensorType};

/// Types of the graph inputs, by number.
#[derive(Default)]
pub struct TestAnalysis {
    pub inputs: Vec<TensorType>,
}

#[derive(Clone, Debug, Default)]
pub struct Facts {
    ty: Option<TensorType>,
    constant: Option<ConstValue>,
}

impl ClassFacts for Facts {
    fn ty(&self) -> Option<&TensorType> {
        self.ty.as_ref()
    }

    fn constant(&self) -> Option<&ConstValue> {
        self.constant.as_ref()
    }
}

/// The result types of an op node.
fn op_types(egraph: &EGraph<Mx, TestAnalysis>, enode: &Mx) -> Option<Vec<TensorType>> {
    let (kind, attr_ids, operand_ids) = enode.split_op()?;
    let mut attrs = Attrs::new();
    for (name, &id) in kind.attr_names().iter().zip(attr_ids) {
        attrs.set(name, attr_of(egraph, id)?.to_attr());
    }
    let types = operand_ids
        .iter()
        .map(|&id| egraph[id].data.ty.clone())
        .collect::<Option<Vec<_>>>()?;
    mx::infer(kind, &types, &attrs).ok()
}

/// The type of a single-result op node (`None` for a multi-result op, whose results are
/// typed by their `Mx::Result` nodes).
fn op_type(egraph: &EGraph<Mx, TestAnalysis>, enode: &Mx) -> Option<TensorType> {
    let types = op_types(egraph, enode)?;
    (types.len() == 1).then(|| types.into_iter().next().expect("one result"))
}

/// The type of result `n` of the op in class `tuple`.
fn result_type(egraph: &EGraph<Mx, TestAnalysis>, n: u32, tuple: Id) -> Option<TensorType> {
    egraph[tuple]
        .nodes
        .iter()
        .find_map(|node| op_types(egraph, node)?.into_iter().nth(n as usize))
}

impl Analysis<Mx> for TestAnalysis {
    type Data = Facts;

    fn make(egraph: &mut EGraph<Mx, Self>, enode: &Mx, _id: Id) -> Facts {
        match enode {
            Mx::Input(n) => Facts {
                ty: egraph.analysis.inputs.get(*n as usize).cloned(),
                constant: None,
            },
            Mx::Const(c) => Facts {
                ty: Some(c.tensor.ty.clone()),
                constant: Some(c.clone()),
            },
            Mx::Op(..) => Facts {
                ty: op_type(egraph, enode),
                constant: None,
            },
            Mx::Kernel(..) | Mx::Call(..) => unreachable!("rule tests add no fused kernels or calls"),
            Mx::Result(n, [tuple]) => Facts {
                ty: result_type(egraph, *n, *tuple),
                constant: None,
            },
            Mx::Attr(_) => Facts::default(),
        }
    }

    fn merge(&mut self, a: &mut Facts, b: Facts) -> DidMerge {
        assert!(
            a.ty.is_none() || b.ty.is_none() || a.ty == b.ty,
            "a rule merged values of types {:?} and {:?}",
            a.ty,
            b.ty
        );
        let grow_a = (a.ty.is_none() && b.ty.is_some()) || (a.constant.is_none() && b.constant.is_some());
        let grow_b = (b.ty.is_none() && a.ty.is_some()) || (b.constant.is_none() && a.constant.is_some());
        if a.ty.is_none() {
            a.ty = b.ty;
        }
        if a.constant.is_none() {
            a.constant = b.constant;
        }
        DidMerge(grow_a, grow_b)
    }
}
