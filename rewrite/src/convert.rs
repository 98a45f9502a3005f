//! Between `mx` graphs and e-graphs: a `Graph` goes in as e-nodes (one class per value, an
//! `Mx::Result` per result of a multi-result op), and a selection of one node per class comes
//! back out as a verified `Graph` with the same inputs and output names, holding only the
//! values the outputs need, in a valid execution order.

use crate::analysis::MxAnalysis;
use crate::extract::Selection;
use crate::lang::{AttrValue, ConstValue, GraphValue, Mx};
use crate::RewriteError;
use egg::{EGraph, Id, Language};
use mxc_dialects::mx::call::Callee;
use mxc_dialects::{verify, Attr, Graph, OpKind, TensorType, ValueId};
use std::collections::{HashMap, HashSet};

/// The e-graph of `mx` values.
pub type MxEGraph = EGraph<Mx, MxAnalysis>;

/// What a graph looks like from outside: its name, inputs and outputs (names and types).
#[derive(Clone, Debug, PartialEq)]
pub struct Signature {
    pub name: String,
    pub inputs: Vec<(String, TensorType)>,
    pub outputs: Vec<(String, TensorType)>,
}

/// A graph in an e-graph.
pub struct Converted {
    pub egraph: MxEGraph,
    /// The class of each output, in output order (canonicalise with `find` after rewriting).
    pub roots: Vec<Id>,
    pub signature: Signature,
    /// The e-nodes of the graph's ops in execution order, as first added: the input graph as a
    /// selection (`extract::original_selection`).
    pub original: Vec<Mx>,
    /// The id each node of `original` got when added (with explanations enabled, the id whose
    /// `id_to_expr` is the imported term).
    pub ids: Vec<Id>,
}

/// Adds `g` (which must verify) to a fresh e-graph with `analysis` (its `inputs` are set here).
pub fn to_egraph(g: &Graph, analysis: MxAnalysis) -> Result<Converted, RewriteError> {
    to_egraph_with(g, analysis, false)
}

/// `to_egraph`, with egg's explanations enabled when `explanations` is set: each op is then
/// added with the ids its operands were added with, so `id_to_expr` gives the imported term.
pub fn to_egraph_with(g: &Graph, mut analysis: MxAnalysis, explanations: bool) -> Result<Converted, RewriteError> {
    verify(g).map_err(RewriteError::InvalidInput)?;
    analysis.inputs = g.inputs.iter().map(|p| g.ty(p.value).clone()).collect();
    let mut egraph = MxEGraph::new(analysis);
    if explanations {
        egraph = egraph.with_explanations_enabled();
    }
    let mut class: Vec<Option<Id>> = vec![None; g.num_values()];
    let mut original = Vec::new();
    let mut ids = Vec::new();
    let mut add = |egraph: &mut MxEGraph, node: Mx| {
        original.push(node.clone());
        let id = egraph.add_uncanonical(node);
        ids.push(id);
        match explanations {
            true => id,
            false => egraph.find(id),
        }
    };
    for (i, p) in g.inputs.iter().enumerate() {
        class[p.value.index()] = Some(add(&mut egraph, Mx::Input(i as u32)));
    }
    for op in &g.ops {
        let unsupported = |message: String| RewriteError::Unsupported {
            op: op.kind.to_string(),
            message,
        };
        if op.kind == OpKind::Constant {
            let value = op.attrs.tensor("value").map_err(unsupported)?;
            class[op.results[0].index()] = Some(add(&mut egraph, Mx::Const(ConstValue::new(value.clone()))));
            continue;
        }
        let operands = op
            .operands
            .iter()
            .map(|v| class[v.index()].expect("verified: defined before use"));
        if let Some(body) = &op.body {
            let body = GraphValue::new(body.clone(), Vec::new());
            let node = match op.attrs.str("callee").ok().and_then(Callee::from_name) {
                Some(callee) => Mx::Call(callee, body, operands.collect()),
                None => Mx::Kernel(body, operands.collect()),
            };
            class[op.results[0].index()] = Some(add(&mut egraph, node));
            continue;
        }
        let mut children = Vec::new();
        for name in op.kind.attr_names() {
            let attr = op.attrs.get(name).and_then(AttrValue::from_attr);
            let attr = attr.ok_or_else(|| unsupported(format!("attribute `{name}` cannot be an e-graph leaf")))?;
            children.push(add(&mut egraph, Mx::Attr(attr)));
        }
        children.extend(operands);
        let id = add(&mut egraph, Mx::Op(op.kind, children));
        if op.results.len() == 1 {
            class[op.results[0].index()] = Some(id);
        } else {
            for (n, r) in op.results.iter().enumerate() {
                class[r.index()] = Some(add(&mut egraph, Mx::Result(n as u32, [id])));
            }
        }
    }
    egraph.rebuild();
    let roots = g
        .outputs
        .iter()
        .map(|p| class[p.value.index()].expect("verified"))
        .collect();
    let signature = Signature {
        name: g.name.clone(),
        inputs: g
            .inputs
            .iter()
            .map(|p| (p.name.clone(), g.ty(p.value).clone()))
            .collect(),
        outputs: g
            .outputs
            .iter()
            .map(|p| (p.name.clone(), g.ty(p.value).clone()))
            .collect(),
    };
    Ok(Converted {
        egraph,
        roots,
        signature,
        original,
        ids,
    })
}

/// What a class became in the graph being built.
enum Built {
    Attr(Attr),
    Values(Vec<ValueId>),
}

/// Builds the graph that `selection` picks for `roots` (one per output of `sig`), verified.
pub fn to_graph(
    egraph: &MxEGraph,
    selection: &Selection,
    roots: &[Id],
    sig: &Signature,
) -> Result<Graph, RewriteError> {
    Ok(to_graph_traced(egraph, selection, roots, sig)?.0)
}

/// `to_graph`, also returning the canonical class each op of the graph was built from
/// (aligned with `graph.ops`).
pub fn to_graph_traced(
    egraph: &MxEGraph,
    selection: &Selection,
    roots: &[Id],
    sig: &Signature,
) -> Result<(Graph, Vec<Id>), RewriteError> {
    let fail = |m: String| RewriteError::Extraction(m);
    let mut g = Graph::new(&sig.name);
    let inputs: Vec<ValueId> = sig
        .inputs
        .iter()
        .map(|(name, ty)| g.add_input(name, ty.clone()))
        .collect();
    let mut built: HashMap<Id, Built> = HashMap::new();
    let mut classes: Vec<Id> = Vec::new();
    // Depth-first, operands in order; classes expanded but not finished are the current path.
    let mut on_path: HashSet<Id> = HashSet::new();
    let mut stack: Vec<(Id, bool)> = roots.iter().rev().map(|r| (egraph.find(*r), false)).collect();
    while let Some((id, finish)) = stack.pop() {
        let node = selection
            .node(egraph, id)
            .ok_or_else(|| fail(format!("class {id} has no choice")))?;
        if !finish {
            if built.contains_key(&id) {
                continue;
            }
            if !on_path.insert(id) {
                return Err(fail(format!("the selection has a cycle through class {id}")));
            }
            stack.push((id, true));
            stack.extend(node.children().iter().rev().map(|c| (egraph.find(*c), false)));
            continue;
        }
        on_path.remove(&id);
        let values = |c: &Id| match built.get(&egraph.find(*c)) {
            Some(Built::Values(vs)) => Ok(vs.clone()),
            _ => Err(fail(format!("class {c} is not a value"))),
        };
        let result = match node {
            Mx::Input(n) => Built::Values(vec![inputs[*n as usize]]),
            Mx::Const(c) => Built::Values(vec![g.constant((*c.tensor).clone())]),
            Mx::Attr(a) => Built::Attr(a.to_attr()),
            Mx::Result(n, [tuple]) => {
                let vs = values(tuple)?;
                Built::Values(vec![*vs
                    .get(*n as usize)
                    .ok_or_else(|| fail(format!("no result {n}")))?])
            }
            Mx::Kernel(..) | Mx::Call(..) => {
                let (callee, body, operands) = node.kernel().expect("a kernel or a call");
                let mut args = Vec::new();
                for c in operands {
                    match values(c)?.as_slice() {
                        [v] => args.push(*v),
                        _ => return Err(fail("a fused kernel's operand is a multi-result op".into())),
                    }
                }
                let v = match callee {
                    Some(callee) => g.build_call(callee, body.graph.clone(), args),
                    None => g.build_fused(body.graph.clone(), args),
                };
                Built::Values(vec![v.map_err(RewriteError::InvalidOutput)?])
            }
            Mx::Op(..) => {
                let (kind, leaves, operands) = node.split_op().expect("an op");
                let mut attrs = mxc_dialects::Attrs::new();
                for (name, leaf) in kind.attr_names().iter().zip(leaves) {
                    match built.get(&egraph.find(*leaf)) {
                        Some(Built::Attr(a)) => attrs.set(name, a.clone()),
                        _ => return Err(fail(format!("{kind}: attribute `{name}` is not an attribute leaf"))),
                    }
                }
                let mut args = Vec::new();
                for c in operands {
                    match values(c)?.as_slice() {
                        [v] => args.push(*v),
                        _ => return Err(fail(format!("{kind}: an operand is a multi-result op"))),
                    }
                }
                Built::Values(g.build(kind, args, attrs).map_err(RewriteError::InvalidOutput)?)
            }
        };
        classes.resize(g.ops.len(), id);
        built.insert(id, result);
    }
    for ((name, ty), root) in sig.outputs.iter().zip(roots) {
        match built.get(&egraph.find(*root)) {
            Some(Built::Values(vs)) if vs.len() == 1 && g.ty(vs[0]) == ty => g.add_output(name, vs[0]),
            _ => return Err(fail(format!("output `{name}` is not a value of type {ty}"))),
        }
    }
    verify(&g).map_err(RewriteError::InvalidOutput)?;
    Ok((g, classes))
}
