//! Library-call alternatives, on a target whose cost model prices them (`gpu`). After fusion
//! has offered its kernels, every matrix product or convolution in the e-graph, alone or as
//! the anchor of a fused kernel, that a library function computes exactly (`mx::call::recognise`)
//! gets an `mx.call` of that function in its e-class, with the same body and operands. The
//! second extraction then weighs the call against the generated kernel computing the same
//! value, and against fused kernels a call cannot be (an epilogue the library lacks), under
//! the target's cost model; `mxc explain` shows the loser.

use crate::analysis::{node_attrs, Kind};
use crate::convert::MxEGraph;
use crate::lang::{GraphValue, Mx};
use egg::Id;
use mxc_dialects::mx::call::{recognise, Callee};
use mxc_dialects::{Graph, OpKind};
use std::sync::Arc;

/// What egg records as the reason a call joined its value's e-class.
pub const LIBRARY: &str = "library call";

/// Adds a call for every product or convolution a library computes; returns how many it
/// added. The e-graph is rebuilt.
pub fn add_calls(egraph: &mut MxEGraph) -> usize {
    let mut calls: Vec<(Id, Mx)> = Vec::new();
    for class in egraph.classes() {
        for node in &class.nodes {
            let offered = match node {
                Mx::Kernel(body, operands) => {
                    call_for(&body.graph).map(|callee| Mx::Call(callee, body.clone(), operands.clone()))
                }
                Mx::Op(OpKind::MatMul | OpKind::Gemm | OpKind::Conv, _) => one_op_body(egraph, class.id, node)
                    .and_then(|(body, operands)| {
                        let callee = call_for(&body)?;
                        let members = vec![(class.id, node.clone())];
                        Some(Mx::Call(callee, GraphValue::new(Arc::new(body), members), operands))
                    }),
                _ => None,
            };
            calls.extend(offered.map(|call| (class.id, call)));
        }
    }
    for (class, call) in &calls {
        let id = egraph.add(call.clone());
        egraph.union_trusted(*class, id, LIBRARY);
    }
    egraph.rebuild();
    calls.len()
}

/// The library function that computes `body`, if one does.
fn call_for(body: &Graph) -> Option<Callee> {
    Callee::ALL.into_iter().find(|c| recognise(*c, body).is_ok())
}

/// The body of a kernel computing op `node` of class `class` alone, and its operands.
fn one_op_body(egraph: &MxEGraph, class: Id, node: &Mx) -> Option<(Graph, Vec<Id>)> {
    let (kind, leaves, operands) = node.split_op()?;
    let attrs = node_attrs(egraph, kind, leaves).ok()?;
    let mut body = Graph::new("kernel");
    let mut inputs = Vec::new();
    for (n, c) in operands.iter().enumerate() {
        let Kind::Value(ty) = &egraph[*c].data.kind else {
            return None;
        };
        inputs.push(body.add_input(&format!("in{n}"), ty.clone()));
    }
    let v = body.build1(kind, inputs, attrs).ok()?;
    let Kind::Value(ty) = &egraph[class].data.kind else {
        return None;
    };
    (body.ty(v) == ty).then_some(())?;
    body.add_output("out0", v);
    Some((body, operands.to_vec()))
}
