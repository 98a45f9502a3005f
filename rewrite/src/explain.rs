//! Why the rewritten program looks the way it does, kernel by kernel (for `mxc explain`).
//!
//! `explain` runs the same saturation and extraction as `optimize`, with egg's explanations
//! recorded (only here: they cost memory and time). For each kernel of the extracted program
//! it reports the imported form of its value, the cheapest alternative the extractor rejected
//! for the same value, and the rules along egg's proof that the imported form equals the chosen
//! one (`fusion` for a fused kernel). A fused kernel also gets the same note for each op of
//! its body.
//!
//! The proof is kept to the kernel itself: the chosen form's operands are written as the
//! imported terms wherever the value was imported, so rules applied to other kernels do not
//! show up here; values that only the rules created are written out as chosen, and reported as
//! created for this kernel.

use crate::analysis::infer_node;
use crate::convert::MxEGraph;
use crate::extract::{dag_cost, greedy_dag, NodeCosts, Selection};
use crate::fuse::FUSION;
use crate::lang::{AttrValue, Mx};
use crate::library::LIBRARY;
use crate::runner::{rewrite, OptimizeOptions, Stats};
use crate::{MxAnalysis, RewriteError};
use egg::{Id, Language, Rewrite, TreeExplanation, TreeTerm};
use mxc_dialects::mx::call::Callee;
use mxc_dialects::{Graph, OpKind, TensorType};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// What egg records as the reason of a union the e-class analysis made (a folded constant).
pub const FOLDING: &str = "constant folding";

/// The rewritten program and a note per kernel.
#[derive(Clone, Debug)]
pub struct Explained {
    pub graph: Graph,
    pub stats: Stats,
    /// One per kernel of `graph`, in program order.
    pub kernels: Vec<KernelNote>,
}

/// Why one kernel is what it is.
#[derive(Clone, Debug)]
pub struct KernelNote {
    /// Its op, an index into `Explained::graph.ops` (an `mx.fused` op for a fused kernel).
    pub op: usize,
    /// Where its value comes from.
    pub value: ValueNote,
    /// The cheapest other form of the same value, if the value has one that can be built.
    pub rejected: Option<Alternative>,
    /// For a fused kernel, a note per op of its body (by index into the body's ops; constants
    /// left out).
    pub body: Vec<(usize, ValueNote)>,
    /// The algorithm of each convolution or matrix product the kernel computes, and the best
    /// of the other algorithms for it.
    pub algorithms: Vec<AlgorithmNote>,
    /// Where a library function computes the kernel: the call and the generated kernel.
    pub library: Option<LibraryNote>,
}

/// A library call and the generated kernel of the same body, each with its cost as a kernel;
/// the program runs the call when `called`, else the generated kernel.
#[derive(Clone, Debug)]
pub struct LibraryNote {
    pub callee: Callee,
    pub called: bool,
    pub call_cost: f64,
    /// The generated kernel's form and cost.
    pub generated: (String, f64),
}

/// How a convolution or a matrix product is computed, and what the best other way would have
/// cost.
#[derive(Clone, Debug)]
pub struct AlgorithmNote {
    pub chosen: &'static str,
    /// Its cost as kernels (the product and a bias it adds).
    pub cost: Option<f64>,
    /// The best other algorithm: its name, its form and its cost as kernels.
    pub rejected: Option<(&'static str, String, f64)>,
}

/// Where one value comes from.
#[derive(Clone, Debug)]
pub struct ValueNote {
    pub origin: Origin,
    /// The rules along the proof from the imported form to the chosen one, in proof order
    /// (`FOLDING` for the analysis' constant folding, `fusion` for a fused kernel); empty when
    /// nothing was rewritten.
    pub rules: Vec<String>,
    /// Other imported ops that computed the same value, which this one replaces, each with the
    /// rules that proved them equal to its imported form (e.g. `neg` of a `neg`).
    pub replaces: Vec<(OpKind, Vec<String>)>,
}

/// Where a kernel's value comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    /// The model computed it with this op.
    Imported(OpKind),
    /// Rules created it when rewriting kernel `by` (an index into `kernels`).
    Created { by: Option<usize> },
}

/// A form of a value that extraction did not pick.
#[derive(Clone, Debug)]
pub struct Alternative {
    /// The op and what its operands are, e.g. `max_pool(relu: tensor<1x4x8x8xf32>)`.
    pub form: String,
    /// Its own cost as one kernel.
    pub cost: f64,
    /// The whole program's cost had it been picked (`None` if that choice cannot be built).
    pub program_cost: Option<f64>,
}

/// Rewrites `graph` as `optimize` does and explains each kernel of the result.
pub fn explain(
    graph: &Graph,
    rules: &[Rewrite<Mx, MxAnalysis>],
    opts: &OptimizeOptions,
) -> Result<Explained, RewriteError> {
    let mut done = rewrite(graph, rules, opts, true)?;
    let mut names: HashSet<String> = rules.iter().map(|r| r.name.to_string()).collect();
    names.insert(FUSION.to_string());
    names.insert(LIBRARY.to_string());
    let egraph = &mut done.runner.egraph;
    let costs = NodeCosts::new(egraph, opts.cost_model.as_ref());
    let greedy = greedy_dag(egraph, &done.roots, &costs);
    let selection = done.extraction.selection.clone().or(&greedy);
    let mut imported: HashMap<Id, Id> = HashMap::new();
    let mut also: HashMap<Id, Vec<Id>> = HashMap::new();
    for (node, id) in done.converted.original.iter().zip(&done.converted.ids) {
        if matches!(node, Mx::Op(..) | Mx::Result(..)) {
            let class = egraph.find(*id);
            match imported.get(&class) {
                Some(_) => also.entry(class).or_default().push(*id),
                None => _ = imported.insert(class, *id),
            }
        }
    }
    let mut notes = Notes {
        egraph,
        selection: &selection,
        imported: &imported,
        also: &also,
        names: &names,
        created_by: HashMap::new(),
    };
    let mut kernels = Vec::new();
    for (i, op) in done.graph.ops.iter().enumerate() {
        if op.kind == OpKind::Constant {
            continue;
        }
        let class = done.classes[i];
        let node = selection
            .node(notes.egraph, class)
            .expect("a built class has a choice")
            .clone();
        let k = kernels.len();
        let (value, body) = match &node {
            // a fused kernel: its value as the op it grew from computes it, then fused; its
            // body's ops (the root last) each as computed
            Mx::Kernel(body, _) | Mx::Call(_, body, _) if !body.members.is_empty() => {
                let members = &body.members;
                let (root_class, root_node) = members.last().expect("not empty").clone();
                let root = notes.value(root_class, root_node, k);
                let mut value = root.clone();
                if matches!(node, Mx::Kernel(..)) || members.len() > 1 {
                    value.rules.push(FUSION.to_string());
                }
                if matches!(node, Mx::Call(..)) {
                    value.rules.push(LIBRARY.to_string());
                }
                let mut ops = Vec::new();
                for (j, (c, n)) in members.iter().enumerate().filter(|(_, (_, n))| !n.is_leaf()) {
                    let note = match j + 1 == members.len() {
                        true => root.clone(),
                        false => notes.value(*c, n.clone(), k),
                    };
                    ops.push((j, note));
                }
                (value, ops)
            }
            _ => (notes.value(class, node.clone(), k), Vec::new()),
        };
        let rejected = rejected(notes.egraph, &selection, &done.roots, &costs, class);
        let members: Vec<(Id, Mx)> = match &node {
            Mx::Kernel(body, _) | Mx::Call(_, body, _) if !body.members.is_empty() => body.members.to_vec(),
            _ => vec![(class, node.clone())],
        };
        // a call's algorithm is the library's (`library` says which)
        let algorithms = match &node {
            Mx::Call(..) => Vec::new(),
            _ => members
                .iter()
                .filter_map(|(c, n)| algorithm_note(notes.egraph, &selection, &costs, *c, n))
                .collect(),
        };
        let library = library_note(notes.egraph, &selection, &costs, class, &node);
        kernels.push(KernelNote {
            op: i,
            value,
            rejected,
            body,
            algorithms,
            library,
        });
    }
    let created_by = notes.created_by;
    for (note, &class) in kernels.iter_mut().zip(kernel_classes(&done.graph, &done.classes)) {
        if let Origin::Created { by } = &mut note.value.origin {
            *by = created_by.get(&class).copied();
        }
    }
    Ok(Explained {
        graph: done.graph,
        stats: done.stats,
        kernels,
    })
}

/// What the notes of one explanation share.
struct Notes<'a> {
    egraph: &'a mut MxEGraph,
    selection: &'a Selection,
    /// The imported term of each class a model op computed, and the other imported terms of
    /// the same class.
    imported: &'a HashMap<Id, Id>,
    also: &'a HashMap<Id, Vec<Id>>,
    names: &'a HashSet<String>,
    /// Classes the rules created, with the kernel whose proof created them first.
    created_by: HashMap<Id, usize>,
}

impl Notes<'_> {
    /// The note of `class`, computed as `node`, in kernel number `kernel`.
    fn value(&mut self, class: Id, node: Mx, kernel: usize) -> ValueNote {
        let class = self.egraph.find(class);
        let (origin, rules) = match self.imported.get(&class) {
            Some(&from) => {
                let mut created = Vec::new();
                let chosen = chosen_term(
                    self.egraph,
                    self.selection,
                    self.imported,
                    node,
                    Some(from),
                    &mut created,
                );
                created
                    .iter()
                    .for_each(|c| _ = self.created_by.entry(*c).or_insert(kernel));
                let rules = rules_between(self.egraph, from, chosen, self.names);
                (Origin::Imported(imported_kind(self.egraph, from)), rules)
            }
            // created by a kernel's proof before this one (or by this kernel's own, for the ops
            // of its body); the kernels' own are resolved when all proofs are done
            None => (
                Origin::Created {
                    by: self.created_by.get(&class).copied(),
                },
                Vec::new(),
            ),
        };
        let replaces = match (self.imported.get(&class), self.also.get(&class)) {
            (Some(&from), Some(others)) => others
                .iter()
                .map(|&o| {
                    (
                        imported_kind(self.egraph, o),
                        rules_between(self.egraph, from, o, self.names),
                    )
                })
                .collect(),
            _ => Vec::new(),
        };
        ValueNote {
            origin,
            rules,
            replaces,
        }
    }
}

fn kernel_classes<'a>(g: &'a Graph, classes: &'a [Id]) -> impl Iterator<Item = &'a Id> {
    g.ops
        .iter()
        .zip(classes)
        .filter(|(op, _)| op.kind != OpKind::Constant)
        .map(|(_, c)| c)
}

fn imported_kind(egraph: &MxEGraph, id: Id) -> OpKind {
    match egraph.id_to_node(id) {
        Mx::Op(kind, _) => *kind,
        Mx::Result(_, [tuple]) => imported_kind(egraph, *tuple),
        _ => unreachable!("only ops and results are recorded as imported"),
    }
}

/// Adds the chosen form `node` of a class to the e-graph as a term of its own and returns its
/// id: the node over its operands' imported terms where they were imported (for the root, the
/// very operands of its imported node `from`), over leaves as they are, and over chosen forms
/// where rules created the operand (those classes are pushed on `created`).
fn chosen_term(
    egraph: &mut MxEGraph,
    selection: &Selection,
    imported: &HashMap<Id, Id>,
    node: Mx,
    from: Option<Id>,
    created: &mut Vec<Id>,
) -> Id {
    let from_children: Vec<Id> = from.map_or_else(Vec::new, |f| egraph.id_to_node(f).children().to_vec());
    let mut children = Vec::new();
    for &c in node.children() {
        let c = egraph.find(c);
        let own = from_children.iter().find(|u| egraph.find(**u) == c).copied();
        let term = match (own.or_else(|| imported.get(&c).copied()), selection.node(egraph, c)) {
            (Some(u), _) => u,
            (None, Some(leaf)) if leaf.is_leaf() => egraph.add_uncanonical(leaf.clone()),
            (None, Some(chosen)) => {
                created.push(c);
                chosen_term(egraph, selection, imported, chosen.clone(), None, created)
            }
            // every class with a buildable node has a choice; the class itself stands for it
            (None, None) => c,
        };
        children.push(term);
    }
    let mut next = children.into_iter();
    let node = node.map_children(|_| next.next().expect("one term per child"));
    egraph.add_uncanonical(node)
}

/// The rules along egg's proof that the terms `a` and `b` are equal.
fn rules_between(egraph: &mut MxEGraph, a: Id, b: Id, names: &HashSet<String>) -> Vec<String> {
    let proof = egraph.explain_id_equivalence(a, b);
    let mut rules = Vec::new();
    proof_rules(&proof.explanation_trees, names, &mut rules, &mut HashSet::new());
    rules
}

/// The rule names along a proof, each once, in order; unions without a rule name are the
/// analysis folding constants. egg's proof trees share subproofs, so each term is walked once
/// (`seen`): walked as a tree, EfficientNet-B0's proofs took minutes.
fn proof_rules(
    proof: &TreeExplanation<Mx>,
    names: &HashSet<String>,
    out: &mut Vec<String>,
    seen: &mut HashSet<*const TreeTerm<Mx>>,
) {
    for term in proof {
        if !seen.insert(Rc::as_ptr(term)) {
            continue;
        }
        for rule in term.forward_rule.iter().chain(&term.backward_rule) {
            let name = rule.to_string();
            let name = if names.contains(&name) {
                name
            } else {
                FOLDING.to_string()
            };
            if !out.contains(&name) {
                out.push(name);
            }
        }
        for child in &term.child_proofs {
            proof_rules(child, names, out, seen);
        }
    }
}

/// The rejected node of `class` whose choice would have cost the whole program least (ties and
/// unbuildable choices broken by the node's own cost).
fn rejected(
    egraph: &MxEGraph,
    selection: &Selection,
    roots: &[Id],
    costs: &NodeCosts,
    class: Id,
) -> Option<Alternative> {
    let chosen = selection.index(egraph, class);
    let mut best: Option<(f64, f64, usize)> = None;
    for (i, _) in egraph[class].nodes.iter().enumerate() {
        let cost = costs.get(egraph, class, i);
        if Some(i) == chosen || !cost.is_finite() {
            continue;
        }
        let program = dag_cost(egraph, &selection.with_choice(egraph, class, i), roots, costs).unwrap_or(f64::INFINITY);
        if best.is_none_or(|(p, c, _)| (program, cost) < (p, c)) {
            best = Some((program, cost, i));
        }
    }
    let (program, cost, i) = best?;
    Some(Alternative {
        form: form(egraph, selection, &egraph[class].nodes[i]),
        cost,
        program_cost: program.is_finite().then_some(program),
    })
}

/// The algorithm `node` computes a convolution or a matrix product with (a bias added to one
/// counts as it), or `None` for other nodes.
fn algorithm(egraph: &MxEGraph, selection: &Selection, node: &Mx) -> Option<&'static str> {
    use OpKind::*;
    let (kind, attrs, operands) = node.split_op()?;
    let attr_int = |name: &str| {
        let at = kind.attr_names().iter().position(|n| *n == name)?;
        match &egraph[attrs[at]].nodes[0] {
            Mx::Attr(AttrValue::Int(v)) => Some(*v),
            _ => None,
        }
    };
    Some(match kind {
        Conv | ConvNhwc | ConvTranspose => "direct loops",
        ConvNhwcPacked if attr_int("group").unwrap_or(1) > 1 => "depthwise, vectors across channels",
        ConvNhwcPacked => "implicit GEMM on packed weights",
        WinogradOutput => "Winograd F(4x4, 3x3)",
        MatMulPacked => "tiled product on packed weights",
        MatMulIntegerPacked => "u8 x i8 product summed in i32 on packed weights",
        ConvNhwcIntegerPacked => "implicit GEMM, u8 x i8 summed in i32 on packed weights",
        ConvNhwcIntegerDepthwise => "depthwise, u8 x i8 summed exactly (VNNI: four kernel rows a vpdpbusd)",
        Gemm if attr_int("trans_b").unwrap_or(0) != 0 => "direct loops",
        MatMul | Gemm => "tiled product, B where it lies",
        Attention => "fused attention, tiled over keys",
        // a bias added to a product or convolution
        Add => {
            let computed = operands.iter().find_map(|c| selection.node(egraph, *c))?;
            return algorithm(egraph, selection, computed);
        }
        _ => return None,
    })
}

/// The algorithm note of `class`, computed as `chosen`, when it holds a convolution or matrix
/// product in its direct form (every such value has one) and `chosen` computes one, or when
/// `chosen` is a fused attention: the best other algorithm by its own cost as a kernel (an
/// attention's other form is the chain of kernels it replaces, which has none).
fn algorithm_note(
    egraph: &MxEGraph,
    selection: &Selection,
    costs: &NodeCosts,
    class: Id,
    chosen: &Mx,
) -> Option<AlgorithmNote> {
    use OpKind::*;
    let class = egraph.find(class);
    let nodes = &egraph[class].nodes;
    let direct = |n: &Mx| matches!(n, Mx::Op(Conv | ConvNhwc | MatMul | Gemm, _));
    if !nodes.iter().any(direct) && !matches!(chosen, Mx::Op(Attention, _)) {
        return None;
    }
    let chosen_algorithm = algorithm(egraph, selection, chosen)?;
    let cost_of = |i: usize| chain_cost(egraph, selection, costs, class, i);
    let own = nodes.iter().position(|n| n == chosen).map(cost_of);
    let mut best: Option<(f64, &'static str, usize)> = None;
    for (i, node) in nodes.iter().enumerate() {
        let Some(other) = algorithm(egraph, selection, node).filter(|a| *a != chosen_algorithm) else {
            continue;
        };
        let cost = cost_of(i);
        if cost.is_finite() && best.is_none_or(|(c, _, _)| cost < c) {
            best = Some((cost, other, i));
        }
    }
    Some(AlgorithmNote {
        chosen: chosen_algorithm,
        cost: own,
        rejected: best.map(|(c, name, i)| (name, form(egraph, selection, &nodes[i]), c)),
    })
}

/// The library note of `class`, computed as `chosen`: a call and the generated kernel it was
/// made from (the fused kernel with the same body, or the op it computes alone), whichever of
/// the two was chosen.
fn library_note(
    egraph: &MxEGraph,
    selection: &Selection,
    costs: &NodeCosts,
    class: Id,
    chosen: &Mx,
) -> Option<LibraryNote> {
    let class = egraph.find(class);
    let nodes = &egraph[class].nodes;
    // whether `generated` is the kernel call `call` was made from
    let made_from = |call: &Mx, generated: &Mx| match (call, generated) {
        (Mx::Call(_, body, operands), Mx::Kernel(kernel, kernel_operands)) => {
            body == kernel && operands == kernel_operands
        }
        (Mx::Call(_, body, _), Mx::Op(..)) => match &body.members[..] {
            [(c, n)] => egraph.find(*c) == class && n == generated,
            _ => false,
        },
        _ => false,
    };
    let cost_of = |n: &Mx| nodes.iter().position(|m| m == n).map(|i| costs.get(egraph, class, i));
    let (call, generated) = match chosen {
        Mx::Call(..) => (chosen, nodes.iter().find(|n| made_from(chosen, n))?),
        _ => (nodes.iter().find(|n| made_from(n, chosen))?, chosen),
    };
    let Mx::Call(callee, _, _) = call else {
        unreachable!("a call")
    };
    let form = match generated {
        Mx::Op(..) => form(egraph, selection, generated),
        _ => generated.to_string(),
    };
    Some(LibraryNote {
        callee: *callee,
        called: matches!(chosen, Mx::Call(..)),
        call_cost: cost_of(call)?,
        generated: (form, cost_of(generated)?),
    })
}

/// The cost of node `i` of `class` with the kernels of the same algorithm it reads: a bias
/// added reads the product, Winograd's output transform the batched product, which reads the
/// input transform. An operand class outside the selection counts its cheapest node.
fn chain_cost(egraph: &MxEGraph, selection: &Selection, costs: &NodeCosts, class: Id, i: usize) -> f64 {
    use OpKind::*;
    let node = &egraph[class].nodes[i];
    let mut cost = costs.get(egraph, class, i);
    let Some((kind, _, operands)) = node.split_op() else {
        return cost;
    };
    if !matches!(kind, Add | WinogradOutput | MatMulPacked) {
        return cost;
    }
    for &c in operands {
        let c = egraph.find(c);
        let pick = selection.index(egraph, c).or_else(|| {
            (0..egraph[c].nodes.len()).min_by(|&a, &b| costs.get(egraph, c, a).total_cmp(&costs.get(egraph, c, b)))
        });
        let Some(j) = pick else { continue };
        let part_of_chain = matches!(
            &egraph[c].nodes[j],
            Mx::Op(WinogradOutput | MatMulPacked | WinogradInput | ConvNhwcPacked, _)
        );
        if part_of_chain {
            cost += chain_cost(egraph, selection, costs, c, j);
        }
    }
    cost
}

/// `op(kind: type, ...)`: a node with what its operands are (attribute leaves left out).
fn form(egraph: &MxEGraph, selection: &Selection, node: &Mx) -> String {
    let Some((kind, _, operands)) = node.split_op() else {
        return node.to_string();
    };
    let types: Vec<TensorType> = infer_node(egraph, node).map(|(_, ts, _)| ts).unwrap_or_default();
    let operands: Vec<String> = operands
        .iter()
        .enumerate()
        .map(|(n, c)| {
            let what = match selection.node(egraph, *c) {
                Some(Mx::Const(_)) => "const".to_string(),
                Some(m) => m.to_string(),
                None => "?".to_string(),
            };
            match types.get(n) {
                Some(t) => format!("{what}: {t}"),
                None => what,
            }
        })
        .collect();
    format!("{}({})", kind.name(), operands.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{f32s, neg_neg, op};
    use mxc_dialects::Attrs;

    /// `relu(x)` returned as `neg(neg(relu(x)))`: the relu kernel replaces the outer neg.
    #[test]
    fn a_kernel_names_the_rule_that_removed_the_ops_it_replaces() {
        let mut g = Graph::new("g");
        let x = g.add_input("x", f32s(&[4]));
        let r = op(&mut g, OpKind::Relu, &[x], Attrs::new());
        let n = op(&mut g, OpKind::Neg, &[r], Attrs::new());
        let n = op(&mut g, OpKind::Neg, &[n], Attrs::new());
        g.add_output("y", n);
        let e = explain(&g, &[neg_neg()], &OptimizeOptions::default()).unwrap();
        assert_eq!(e.kernels.len(), 1);
        let k = &e.kernels[0];
        assert_eq!(k.value.origin, Origin::Imported(OpKind::Relu));
        assert!(k.value.rules.is_empty(), "{k:?}");
        assert_eq!(k.value.replaces, [(OpKind::Neg, vec!["neg-neg".to_string()])]);
        assert!(k.rejected.is_some(), "{k:?}");
    }
}
