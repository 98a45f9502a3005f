//! Fusion alternatives. After saturation, every value of the extracted program that an
//! element-wise op computes gets fused kernels (`Mx::Kernel`) in its e-class, and extraction,
//! under the target's cost model, decides which kernels the program runs: a kernel is chosen
//! when its one launch and the bytes it no longer moves outweigh what it recomputes.
//!
//! A kernel grows from its root op through the values it consumes (`mx::fused` says what a
//! body may hold):
//! - an element-wise producer is inlined when nothing outside the kernel needs its value;
//! - an anchor (conv, matmul, gemm, pooling, softmax, reduction) is inlined the same way when
//!   its result has the root's shape, and then its operands stay operands (an epilogue);
//! - one-element constants become literals in the body.
//!
//! Each root gets two alternatives: the kernel that inlines only such private values, and the
//! one that also recomputes element-wise values other kernels need or that are broadcast to
//! a larger shape (it duplicates their work, and extraction sees that cost). The values a
//! kernel inlines keep their own nodes, so extraction can still compute them once, apart.
//!
//! And a kernel that joins two anchors' results (a residual block's add of two convolutions)
//! can hold one anchor only; the other's epilogue would otherwise stay inside the joining
//! kernel, which then reads that anchor's widest value (its f32 or i32 sums). So the private
//! kernel also gets, for each one-byte value in it (a quantised tensor, a mask), the
//! alternative that reads that value instead of computing it: the other anchor's kernel
//! writes it, a quarter of the bytes.

use crate::analysis::{node_attrs, Kind};
use crate::convert::MxEGraph;
use crate::extract::{selected_nodes, Selection};
use crate::lang::{ConstValue, GraphValue, Mx};
use egg::{Id, Language};
use mxc_dialects::{mx, Graph, OpKind, Tensor, TensorType, ValueId};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

/// A kernel holds at most this many ops (bodies stay quick to compile and to cost).
pub const MAX_BODY_OPS: usize = 24;
/// A kernel takes at most this many operands.
pub const MAX_OPERANDS: usize = 12;

/// What egg records as the reason a kernel joined its value's e-class.
pub const FUSION: &str = "fusion";

/// The program a selection picks: each reached class's chosen node and the classes using it.
struct Picked<'a> {
    egraph: &'a MxEGraph,
    /// Reached classes, each after the classes it uses.
    order: Vec<Id>,
    node: HashMap<Id, &'a Mx>,
    users: HashMap<Id, HashSet<Id>>,
    outputs: HashSet<Id>,
}

impl<'a> Picked<'a> {
    fn new(egraph: &'a MxEGraph, selection: &Selection, roots: &[Id]) -> Picked<'a> {
        let mut p = Picked {
            egraph,
            order: Vec::new(),
            node: HashMap::new(),
            users: HashMap::new(),
            outputs: roots.iter().map(|r| egraph.find(*r)).collect(),
        };
        for (id, _) in selected_nodes(egraph, selection, roots) {
            let node = selection.node(egraph, id).expect("selected");
            for c in values_used(node) {
                p.users.entry(egraph.find(c)).or_default().insert(id);
            }
            p.node.insert(id, node);
            p.order.push(id);
        }
        p
    }

    fn ty(&self, id: Id) -> Option<&'a TensorType> {
        match &self.egraph[id].data.kind {
            Kind::Value(t) => Some(t),
            _ => None,
        }
    }

    /// The op kind of the class's chosen node, if it is a single-result op.
    fn op(&self, id: Id) -> Option<OpKind> {
        match self.node.get(&id) {
            Some(Mx::Op(kind, _)) if self.ty(id).is_some() => Some(*kind),
            _ => None,
        }
    }

    /// The one-element constant a class holds, if it does.
    fn scalar(&self, id: Id) -> Option<&'a Tensor> {
        let c = self.egraph[id].data.constant.as_ref()?;
        (c.tensor.len() == 1).then_some(&*c.tensor)
    }
}

/// The value classes a node reads (an op's operands, not its attribute leaves).
fn values_used(node: &Mx) -> Vec<Id> {
    match node.split_op() {
        Some((_, _, operands)) => operands.to_vec(),
        None => node.children().to_vec(),
    }
}

/// Adds the fused kernels of every value `selection` computes for `roots` to its e-class;
/// returns how many it added. The e-graph is rebuilt.
pub fn add_kernels(egraph: &mut MxEGraph, selection: &Selection, roots: &[Id]) -> usize {
    let kernels: Vec<(Id, Mx)> = {
        let picked = Picked::new(egraph, selection, roots);
        let mut kernels = Vec::new();
        let mut offer = |root: Id, kernel: Option<Mx>| {
            if let Some(k) = kernel {
                if !kernels.iter().any(|(r, n)| *r == root && *n == k) {
                    kernels.push((root, k));
                }
            }
        };
        for &root in &picked.order {
            let private = grow(&picked, root, false, &HashSet::new());
            for cut in narrow_values(&picked, root, private.as_ref()) {
                offer(root, grow(&picked, root, false, &HashSet::from([cut])));
            }
            offer(root, private);
            offer(root, grow(&picked, root, true, &HashSet::new()));
            for alternative in other_forms(egraph, selection, &picked, root) {
                let other = Picked::new(egraph, &selection.with_choice(egraph, root, alternative), roots);
                let brought: Vec<Id> = other
                    .order
                    .iter()
                    .copied()
                    .filter(|c| !picked.node.contains_key(c))
                    .collect();
                if !brought
                    .iter()
                    .any(|&c| other.op(c).is_some_and(|k| k.is_fusion_anchor()))
                {
                    continue;
                }
                // kernels rooted at the new form, at what it brings, and at the element-wise
                // ops using it (whose kernels may take its epilogue in: a requantisation's
                // division, rounding, clamps and cast)
                for class in brought.into_iter().chain([root]).chain(elementwise_users(&other, root)) {
                    offer(class, grow(&other, class, false, &HashSet::new()));
                }
            }
        }
        kernels
    };
    for (root, node) in &kernels {
        let id = egraph.add(node.clone());
        egraph.union_trusted(*root, id, FUSION);
    }
    egraph.rebuild();
    kernels.len()
}

/// The forms of a value that the program did not pick and that read values it does not
/// compute, as indices of the class's nodes: element-wise ops (a quantised convolution as its
/// integer sums scaled and the bias added; a requantisation's rounding of those sums scaled
/// once) and transposes (the layout rules' way to a value). Extraction before fusion prices
/// such a form's epilogue as separate kernels, each moving the whole tensor, so it loses to
/// an anchor that needs none (an f32 convolution with its bias inside) even where, fused, it
/// is the faster kernel; the ones that bring another anchor into the program get their own
/// fused kernels.
fn other_forms(egraph: &MxEGraph, selection: &Selection, picked: &Picked, root: Id) -> Vec<usize> {
    let fusable = |k: OpKind| k.is_fusion_anchor() || k.is_elementwise() || k == OpKind::Transpose;
    if !picked.op(root).is_some_and(fusable) {
        return Vec::new();
    }
    let chosen = selection.index(egraph, root);
    egraph[root]
        .nodes
        .iter()
        .enumerate()
        .filter(|&(i, n)| {
            Some(i) != chosen
                && matches!(n, Mx::Op(k, _) if k.is_elementwise() || *k == OpKind::Transpose)
                && values_used(n)
                    .iter()
                    .any(|c| !picked.node.contains_key(&egraph.find(*c)))
        })
        .map(|(i, _)| i)
        .collect()
}

/// The classes of element-wise ops that use `root`, and those using them, as far as one
/// kernel's body reaches.
fn elementwise_users(p: &Picked, root: Id) -> Vec<Id> {
    let mut found: Vec<Id> = Vec::new();
    let mut queue: VecDeque<Id> = VecDeque::from([root]);
    while let Some(id) = queue.pop_front() {
        for &user in p.users.get(&id).into_iter().flatten() {
            if found.len() < MAX_BODY_OPS && !found.contains(&user) && p.op(user).is_some_and(|k| k.is_elementwise()) {
                found.push(user);
                queue.push_back(user);
            }
        }
    }
    found
}

/// Whether the op of class `id` reads or gives strings: it runs on the host, in no kernel.
fn on_strings(p: &Picked, id: Id) -> bool {
    let string = |c: Id| p.ty(c).is_some_and(|t| t.dtype == mxc_dialects::DType::Str);
    string(id) || p.node.get(&id).is_some_and(|n| values_used(n).into_iter().any(string))
}

/// At most this many one-byte values of a kernel are offered as cuts (`narrow_values`).
const MAX_CUTS: usize = 4;

/// The one-byte element-wise values (other than `root`) that `kernel`, rooted at `root`, computes
/// from an anchor it does not hold: where a kernel that reads them instead can take another
/// anchor (see the module comment).
fn narrow_values(p: &Picked, root: Id, kernel: Option<&Mx>) -> Vec<Id> {
    let Some(Mx::Kernel(body, operands)) = kernel else {
        return Vec::new();
    };
    let holds_anchor = body
        .members
        .iter()
        .any(|(_, n)| matches!(n, Mx::Op(k, _) if k.is_fusion_anchor()));
    let reads_anchor = operands
        .iter()
        .any(|&o| p.op(o).is_some_and(|k| k.is_fusion_anchor()) || reads_sums(p, o));
    if !reads_anchor && holds_anchor {
        return Vec::new();
    }
    body.members
        .iter()
        .map(|(id, _)| *id)
        .filter(|&id| id != root && p.op(id).is_some_and(|k| k.is_elementwise()))
        .filter(|&id| p.ty(id).is_some_and(|t| t.dtype.size() == 1))
        .take(MAX_CUTS)
        .collect()
}

/// Whether class `id` is an element-wise op on an anchor's result (the cast of a convolution's
/// i32 sums): what a kernel reads when it could not hold that anchor.
fn reads_sums(p: &Picked, id: Id) -> bool {
    p.op(id).is_some_and(|k| k.is_elementwise())
        && values_used(p.node[&id])
            .into_iter()
            .any(|c| p.op(c).is_some_and(|k| k.is_fusion_anchor()))
}

/// The kernel rooted at `root` (see the module comment), `None` if it would hold one op; the
/// classes in `cut` stay its operands.
fn grow(p: &Picked, root: Id, duplicate: bool, cut: &HashSet<Id>) -> Option<Mx> {
    p.op(root).filter(|k| k.is_elementwise())?;
    if on_strings(p, root) {
        return None;
    }
    let root_ty = p.ty(root)?;
    let mut inside: HashSet<Id> = HashSet::from([root]);
    let mut has_anchor = false;
    let inlinable = |d: Id, inside: &HashSet<Id>, has_anchor: bool| {
        let Some(kind) = p.op(d) else { return false };
        if on_strings(p, d) || cut.contains(&d) {
            return false;
        }
        let private = !p.outputs.contains(&d) && p.users.get(&d).is_some_and(|u| u.is_subset(inside));
        let same_shape = p.ty(d).is_some_and(|t| t.same_shape(root_ty));
        if kind.is_elementwise() {
            duplicate || (private && same_shape)
        } else {
            kind.is_fusion_anchor() && !has_anchor && private && same_shape
        }
    };
    let mut queue: VecDeque<Id> = values_used(p.node[&root]).into_iter().collect();
    let mut waiting: Vec<Id> = Vec::new();
    loop {
        while let Some(d) = queue.pop_front() {
            if inside.contains(&d) || inside.len() >= MAX_BODY_OPS {
                continue;
            }
            if !inlinable(d, &inside, has_anchor) {
                // a value shared with ops not yet inside may become private as the kernel grows
                waiting.push(d);
                continue;
            }
            inside.insert(d);
            if p.op(d).is_some_and(|k| k.is_fusion_anchor()) {
                has_anchor = true;
            } else {
                queue.extend(values_used(p.node[&d]));
            }
        }
        waiting.retain(|d| !inside.contains(d));
        let (ready, rest): (Vec<Id>, Vec<Id>) = waiting.drain(..).partition(|d| inlinable(*d, &inside, has_anchor));
        if ready.is_empty() || inside.len() >= MAX_BODY_OPS {
            break;
        }
        queue.extend(ready);
        waiting = rest;
    }
    if inside.len() < 2 {
        return None;
    }
    let (body, operands, members) = build_body(p, root, &inside).ok()?;
    (operands.len() <= MAX_OPERANDS && mx::fused::check_body(&body).is_ok())
        .then(|| Mx::Kernel(GraphValue::new(Arc::new(body), members), operands))
}

/// A body, its kernel's operands and where each body op came from (`GraphValue::members`).
type Built = (Graph, Vec<Id>, Vec<(Id, Mx)>);

/// The body computing `root` from the classes `inside`, and the kernel's operands.
fn build_body(p: &Picked, root: Id, inside: &HashSet<Id>) -> Result<Built, String> {
    // the classes inside, each after those it uses
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![(root, false)];
    while let Some((id, finished)) = stack.pop() {
        if finished {
            order.push(id);
        } else if seen.insert(id) {
            stack.push((id, true));
            let used = values_used(p.node[&id]);
            stack.extend(used.into_iter().filter(|c| inside.contains(c)).map(|c| (c, false)));
        }
    }
    let mut body = Graph::new("kernel");
    let mut operands: Vec<Id> = Vec::new();
    let mut inputs: HashMap<Id, ValueId> = HashMap::new();
    let mut constants: HashMap<Id, ValueId> = HashMap::new();
    let mut values: HashMap<Id, ValueId> = HashMap::new();
    let mut members = Vec::new();
    for id in order {
        let node = p.node[&id];
        let (kind, leaves, used) = node.split_op().ok_or("not an op")?;
        let attrs = node_attrs(p.egraph, kind, leaves)?;
        let mut args = Vec::new();
        for c in used {
            let v = if let Some(v) = values.get(c) {
                *v
            } else if let (Some(t), false) = (p.scalar(*c), kind.is_fusion_anchor()) {
                *constants.entry(*c).or_insert_with(|| {
                    members.push((*c, Mx::Const(ConstValue::new(t.clone()))));
                    body.constant(t.clone())
                })
            } else if let Some(v) = inputs.get(c) {
                *v
            } else {
                let ty = p.ty(*c).ok_or("an operand is not a tensor")?;
                let v = body.add_input(&format!("in{}", operands.len()), ty.clone());
                operands.push(*c);
                inputs.insert(*c, v);
                v
            };
            args.push(v);
        }
        let v = body.build1(kind, args, attrs).map_err(|e| e.to_string())?;
        values.insert(id, v);
        members.push((id, node.clone()));
    }
    body.add_output("out0", values[&root]);
    Ok((body, operands, members))
}
