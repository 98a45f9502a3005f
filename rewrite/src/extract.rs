//! Extraction: choosing one e-node per e-class so that the outputs' values cost least in
//! total, where a value used twice is computed (and paid for) once.
//!
//! The algorithm is a greedy DAG extractor (after extraction-gym's "faster greedy DAG"): the
//! cost of choosing a node is its own cost plus the cost of the *set* of classes beneath it,
//! so a class reached along two paths is counted once. Classes are improved to a fixpoint from
//! the leaves up. To keep the sets small, only classes that can be reached along two paths
//! (used by two e-nodes, or by an output and an e-node) are kept in the sets; a class with a
//! single user is folded into that user's own cost, which is exact because every path to it
//! passes through that one user.
//!
//! A set that grows past `SHARED_CAP` classes is folded into the class's own cost and emptied,
//! which keeps the work linear in the e-graph's size on long chains of shared values (a
//! residual network shares every block's input: measured 5.4 s for 10,000 ops without the
//! cap, see `tests/limits.rs`); sharing across such a fold may then be counted twice.
//!
//! Limits: each class still picks its node greedily, for its own cost alone, so sharing that
//! only pays off across two different classes' choices can be missed (an ILP would find it).
//! Guarantee: the input graph (with folded constants) is also a selection; `extract` compares
//! both by their exact DAG cost and returns the cheaper, so the result is never worse than the
//! input under the cost model.

use crate::analysis::{infer_node, kernel_types, operand_types, Kind};
use crate::convert::MxEGraph;
use crate::cost::{CostModel, KernelSite, OpSite};
use crate::lang::Mx;
use crate::refine::refine;
use crate::RewriteError;
use egg::{Id, Language};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::rc::Rc;

/// Every op costs at least this much, so that no cycle of ops is free.
const MIN_OP_COST: f64 = 1e-6;

/// A set of shared classes larger than this is folded into the private cost (see the module
/// comment): it keeps extraction linear on long chains of shared values (residual networks).
const SHARED_CAP: usize = 256;

/// One chosen node per e-class (an index into the class's nodes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    choice: HashMap<Id, usize>,
}

impl Selection {
    /// The node chosen for the class of `id`.
    pub fn node<'a>(&self, egraph: &'a MxEGraph, id: Id) -> Option<&'a Mx> {
        let id = egraph.find(id);
        self.choice.get(&id).and_then(|&i| egraph[id].nodes.get(i))
    }

    /// The index, among its class's nodes, of the node chosen for the class of `id`.
    pub fn index(&self, egraph: &MxEGraph, id: Id) -> Option<usize> {
        self.choice.get(&egraph.find(id)).copied()
    }

    /// This selection with the class of `id` choosing its node `index` instead.
    pub fn with_choice(&self, egraph: &MxEGraph, id: Id, index: usize) -> Selection {
        let mut choice = self.choice.clone();
        choice.insert(egraph.find(id), index);
        Selection { choice }
    }

    /// The selection choosing node `index` of each class in `choice` (canonical ids).
    pub(crate) fn from_choices(choice: HashMap<Id, usize>) -> Selection {
        Selection { choice }
    }

    /// This selection, completed with `other`'s choices for the classes it leaves open.
    pub fn or(mut self, other: &Selection) -> Selection {
        for (class, index) in &other.choice {
            self.choice.entry(*class).or_insert(*index);
        }
        self
    }
}

/// The cost of every node of every class, aligned with the class's nodes; infinite for a node
/// that must not be chosen (it does not type-check, or its types are not its class's).
pub struct NodeCosts(HashMap<Id, Vec<f64>>);

impl NodeCosts {
    pub fn new(egraph: &MxEGraph, model: &dyn CostModel) -> NodeCosts {
        let costs = egraph
            .classes()
            .map(|c| {
                (
                    c.id,
                    c.nodes
                        .iter()
                        .map(|n| node_cost(egraph, &c.data.kind, n, model))
                        .collect(),
                )
            })
            .collect();
        NodeCosts(costs)
    }

    pub fn get(&self, egraph: &MxEGraph, class: Id, node: usize) -> f64 {
        self.0
            .get(&egraph.find(class))
            .and_then(|cs| cs.get(node))
            .copied()
            .unwrap_or(f64::INFINITY)
    }
}

fn node_cost(egraph: &MxEGraph, class: &Kind, node: &Mx, model: &dyn CostModel) -> f64 {
    match node {
        Mx::Input(_) | Mx::Const(_) | Mx::Attr(_) => 0.0,
        Mx::Result(n, [tuple]) => match (&egraph[*tuple].data.kind, class) {
            (Kind::Tuple(ts), Kind::Value(ty)) if ts.get(*n as usize) == Some(ty) => 0.0,
            _ => f64::INFINITY,
        },
        Mx::Kernel(..) | Mx::Call(..) => {
            let (callee, body, operands) = node.kernel().expect("a kernel or a call");
            match (kernel_types(egraph, &body.graph, operands), class) {
                (Ok(results), Kind::Value(ty)) if results.len() == 1 && results[0] == *ty => {
                    let operands = operand_types(egraph, operands).expect("kernel_types read them");
                    let site = KernelSite {
                        body: &body.graph,
                        operands: &operands,
                        results: &results,
                        callee,
                    };
                    model.kernel_cost(&site).max(MIN_OP_COST)
                }
                _ => f64::INFINITY,
            }
        }
        Mx::Op(kind, _) => match infer_node(egraph, node) {
            Ok((attrs, operands, results)) => {
                let fits = match class {
                    Kind::Value(ty) => results.len() == 1 && results[0] == *ty,
                    Kind::Tuple(ts) => results == *ts,
                    _ => false,
                };
                if !fits {
                    return f64::INFINITY;
                }
                let site = OpSite {
                    kind: *kind,
                    attrs: &attrs,
                    operands: &operands,
                    results: &results,
                };
                model.op_cost(&site).max(MIN_OP_COST)
            }
            Err(_) => f64::INFINITY,
        },
    }
}

/// The exact cost of what `selection` computes for `roots`: each reached class's chosen node
/// once. An error if a reached class has no (finite) choice or the choices form a cycle.
pub fn dag_cost(egraph: &MxEGraph, selection: &Selection, roots: &[Id], costs: &NodeCosts) -> Result<f64, String> {
    let mut total = 0.0;
    let mut done: HashSet<Id> = HashSet::new();
    let mut on_path: HashSet<Id> = HashSet::new();
    let mut stack: Vec<(Id, bool)> = roots.iter().map(|r| (egraph.find(*r), false)).collect();
    while let Some((id, finish)) = stack.pop() {
        if finish {
            on_path.remove(&id);
            done.insert(id);
            continue;
        }
        if done.contains(&id) {
            continue;
        }
        if !on_path.insert(id) {
            return Err(format!("the selection has a cycle through class {id}"));
        }
        let index = selection
            .index(egraph, id)
            .ok_or_else(|| format!("class {id} has no choice"))?;
        let cost = costs.get(egraph, id, index);
        if !cost.is_finite() {
            return Err(format!("class {id}: the chosen node cannot be built"));
        }
        total += cost;
        stack.push((id, true));
        stack.extend(
            egraph[id].nodes[index]
                .children()
                .iter()
                .map(|c| (egraph.find(*c), false)),
        );
    }
    Ok(total)
}

/// The input graph as a selection: in each class, the first of the graph's own nodes (in
/// execution order, so the choices are acyclic), or the `Const` leaf if the class was folded.
pub fn original_selection(egraph: &MxEGraph, original: &[Mx]) -> Selection {
    let mut choice = HashMap::new();
    for node in original {
        let Some(class) = egraph.lookup(node.clone()) else {
            continue;
        };
        let class = egraph.find(class);
        if choice.contains_key(&class) {
            continue;
        }
        let nodes = &egraph[class].nodes;
        let canonical = node.clone().map_children(|c| egraph.find(c));
        let at = nodes
            .iter()
            .position(|n| matches!(n, Mx::Const(_)))
            .or_else(|| nodes.iter().position(|n| *n == canonical));
        if let Some(at) = at {
            choice.insert(class, at);
        }
    }
    Selection { choice }
}

/// The best choice found so far for one class.
struct Best {
    node: usize,
    /// This class's own node plus the classes only it reaches.
    private: f64,
    /// Shared classes beneath it, each with its `private` cost (ordered, so that sums over it
    /// are added in the same order in every run and ties break the same way).
    shared: Rc<BTreeMap<usize, f64>>,
    shared_sum: f64,
    total: f64,
}

/// One e-node, flattened: its class, its index in the class, its distinct child classes.
struct Node {
    class: usize,
    index: usize,
    children: Vec<usize>,
    cost: f64,
}

/// The greedy DAG extractor described in the module comment.
pub fn greedy_dag(egraph: &MxEGraph, roots: &[Id], costs: &NodeCosts) -> Selection {
    let classes: Vec<Id> = egraph.classes().map(|c| c.id).collect();
    let position: HashMap<Id, usize> = classes.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut nodes = Vec::new();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); classes.len()];
    for (ci, id) in classes.iter().enumerate() {
        for (index, n) in egraph[*id].nodes.iter().enumerate() {
            let mut children: Vec<usize> = n.children().iter().map(|c| position[&egraph.find(*c)]).collect();
            children.sort_unstable();
            children.dedup();
            for &k in &children {
                users[k].push(nodes.len());
            }
            let cost = costs.get(egraph, *id, index);
            nodes.push(Node {
                class: ci,
                index,
                children,
                cost,
            });
        }
    }
    let mut uses: Vec<usize> = users.iter().map(Vec::len).collect();
    for r in roots {
        uses[position[&egraph.find(*r)]] += 1;
    }
    let shared: Vec<bool> = uses.iter().map(|&u| u >= 2).collect();

    let mut best: Vec<Option<Best>> = (0..classes.len()).map(|_| None).collect();
    let mut queue: VecDeque<usize> = (0..nodes.len()).filter(|&n| nodes[n].children.is_empty()).collect();
    let mut queued = vec![false; nodes.len()];
    queue.iter().for_each(|&n| queued[n] = true);
    let mut budget = 64 * nodes.len() + 1024;
    while let Some(n) = queue.pop_front() {
        queued[n] = false;
        budget = budget.saturating_sub(1);
        if budget == 0 {
            break;
        }
        let node = &nodes[n];
        let Some(candidate) = evaluate(node, &best, &shared) else {
            continue;
        };
        if best[node.class].as_ref().is_some_and(|b| b.total <= candidate.total) {
            continue;
        }
        best[node.class] = Some(candidate);
        for &user in &users[node.class] {
            if !queued[user] {
                queued[user] = true;
                queue.push_back(user);
            }
        }
    }
    let choice = best
        .iter()
        .enumerate()
        .filter_map(|(ci, b)| b.as_ref().map(|b| (classes[ci], b.node)))
        .collect();
    Selection { choice }
}

/// The cost of choosing `node`, if all its children have a choice and it closes no cycle.
fn evaluate(node: &Node, best: &[Option<Best>], shared: &[bool]) -> Option<Best> {
    if !node.cost.is_finite() || node.children.contains(&node.class) {
        return None;
    }
    let mut private = node.cost;
    let mut entries: Vec<(usize, f64)> = Vec::new();
    let mut below: Vec<&Best> = Vec::new();
    for &k in &node.children {
        let b = best[k].as_ref()?;
        if b.total == 0.0 {
            continue;
        }
        if shared[k] {
            entries.push((k, b.private));
        } else {
            private += b.private;
        }
        if !b.shared.is_empty() {
            below.push(b);
        }
    }
    let (map, sum) = if let ([only], true) = (below.as_slice(), entries.is_empty()) {
        (only.shared.clone(), only.shared_sum)
    } else {
        below.sort_by_key(|b| std::cmp::Reverse(b.shared.len()));
        let mut map: BTreeMap<usize, f64> = below.first().map(|b| (*b.shared).clone()).unwrap_or_default();
        for b in below.iter().skip(1) {
            for (k, v) in b.shared.iter() {
                map.entry(*k).or_insert(*v);
            }
        }
        for (k, v) in entries {
            map.entry(k).or_insert(v);
        }
        let sum = map.values().sum();
        (Rc::new(map), sum)
    };
    if map.contains_key(&node.class) {
        return None;
    }
    let (map, sum, private) = if map.len() > SHARED_CAP {
        (Rc::default(), 0.0, private + sum)
    } else {
        (map, sum, private)
    };
    Some(Best {
        node: node.index,
        private,
        shared_sum: sum,
        total: private + sum,
        shared: map,
    })
}

/// The chosen selection and its DAG cost.
#[derive(Clone, Debug)]
pub struct Extraction {
    pub selection: Selection,
    pub cost: f64,
    /// True when the greedy extractor's choice won; false when the input graph's did.
    pub greedy: bool,
}

/// A program extraction must do at least as well as, given as its nodes in execution order.
pub struct Fallback<'a> {
    pub nodes: &'a [Mx],
    /// Also try it with fused kernels switched in where they lower its cost (`refine.rs`).
    pub refine: bool,
}

/// The cheapest of the greedy DAG selection and `fallbacks` (the input graph's own program,
/// and the one before fusion added kernels), so the result is never worse than any of them.
pub fn extract(
    egraph: &MxEGraph,
    roots: &[Id],
    fallbacks: &[Fallback],
    model: &dyn CostModel,
) -> Result<Extraction, RewriteError> {
    let costs = NodeCosts::new(egraph, model);
    let mut candidates = vec![(greedy_dag(egraph, roots, &costs), true)];
    for f in fallbacks {
        let selection = original_selection(egraph, f.nodes);
        if f.refine {
            candidates.push((refine(egraph, &selection, roots, &costs), false));
        }
        candidates.push((selection, false));
    }
    let mut best: Option<Extraction> = None;
    let mut why = Vec::new();
    for (selection, is_greedy) in candidates {
        match dag_cost(egraph, &selection, roots, &costs) {
            Ok(cost) if best.as_ref().is_none_or(|b| cost < b.cost) => {
                best = Some(Extraction {
                    selection,
                    cost,
                    greedy: is_greedy,
                })
            }
            Ok(_) => {}
            Err(e) => why.push(e),
        }
    }
    best.ok_or_else(|| RewriteError::Extraction(why.join("; ")))
}

/// The classes `selection` reaches from `roots`, each after those its node uses, with the
/// chosen node.
pub fn selected_nodes(egraph: &MxEGraph, selection: &Selection, roots: &[Id]) -> Vec<(Id, Mx)> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut stack: Vec<(Id, bool)> = roots.iter().map(|r| (egraph.find(*r), false)).collect();
    while let Some((id, finished)) = stack.pop() {
        let Some(node) = selection.node(egraph, id) else {
            continue;
        };
        if finished {
            out.push((id, node.clone()));
        } else if seen.insert(id) {
            stack.push((id, true));
            stack.extend(node.children().iter().map(|c| (egraph.find(*c), false)));
        }
    }
    out
}
