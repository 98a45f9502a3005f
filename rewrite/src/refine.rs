//! Local search over fusion choices, from the unfused program.
//!
//! The greedy extractor picks each class's node for that class's own cost, so it misses
//! choices that only pay off together. The case that matters for fusion: a value two kernels
//! read. Each consumer, on its own, is cheaper recomputing the value (its kernel then needs no
//! stored copy), but if both do so while arithmetic is dear, the value is computed twice to
//! save one store; the cheap program keeps the value in its own kernel and fuses each
//! consumer without it. `refine` starts from the unfused program and switches one class at a
//! time to another of its options (its unfused node or one of its fused kernels) whenever the
//! whole program's cost goes down, until no switch helps.
//!
//! Every option's children are classes the unfused program computes before the class itself
//! (a kernel's operands are values its ops read), so no switch can close a cycle. Each switch
//! is priced incrementally: the program is kept as reference counts of the classes it reaches,
//! and a switch adds the classes the new node reaches that were not reached and drops those
//! only the old node reached.

use crate::convert::MxEGraph;
use crate::extract::{NodeCosts, Selection};
use crate::lang::Mx;
use egg::{Id, Language};
use std::collections::HashMap;

/// Passes over all classes at most (each pass tries every option of every reached class).
const MAX_PASSES: usize = 4;

/// A program as a choice per class, with the reference counts of the classes it reaches.
struct Program<'a> {
    egraph: &'a MxEGraph,
    costs: &'a NodeCosts,
    choice: HashMap<Id, usize>,
    refs: HashMap<Id, usize>,
}

impl Program<'_> {
    fn children(&self, class: Id, node: usize) -> Vec<Id> {
        self.egraph[class].nodes[node]
            .children()
            .iter()
            .map(|c| self.egraph.find(*c))
            .collect()
    }

    fn cost(&self, class: Id, node: usize) -> f64 {
        self.costs.get(self.egraph, class, node)
    }

    /// One more use of `class`; returns the cost of what became reached.
    fn reach(&mut self, class: Id) -> f64 {
        let refs = self.refs.entry(class).or_insert(0);
        *refs += 1;
        if *refs > 1 {
            return 0.0;
        }
        let node = self.choice[&class];
        let mut added = self.cost(class, node);
        for c in self.children(class, node) {
            added += self.reach(c);
        }
        added
    }

    /// One use of `class` fewer; returns the cost of what is no longer reached.
    fn release(&mut self, class: Id) -> f64 {
        let refs = self.refs.get_mut(&class).expect("a reached class");
        *refs -= 1;
        if *refs > 0 {
            return 0.0;
        }
        let node = self.choice[&class];
        let mut dropped = self.cost(class, node);
        for c in self.children(class, node) {
            dropped += self.release(c);
        }
        dropped
    }

    /// Switches reached class `class` to node `node`; returns the change of the program's cost.
    fn switch(&mut self, class: Id, node: usize) -> f64 {
        let old = self.choice[&class];
        let mut delta = self.cost(class, node) - self.cost(class, old);
        self.choice.insert(class, node);
        for c in self.children(class, node) {
            delta += self.reach(c);
        }
        for c in self.children(class, old) {
            delta -= self.release(c);
        }
        delta
    }
}

/// `unfused` improved by switching classes to their fused kernels (or back) while that lowers
/// the program's cost; `unfused` must choose a node for every class it reaches.
pub fn refine(egraph: &MxEGraph, unfused: &Selection, roots: &[Id], costs: &NodeCosts) -> Selection {
    let roots: Vec<Id> = roots.iter().map(|r| egraph.find(*r)).collect();
    let mut p = Program {
        egraph,
        costs,
        choice: HashMap::new(),
        refs: HashMap::new(),
    };
    // every class the unfused program reaches, with its node there and its kernels
    let mut options: Vec<(Id, Vec<usize>)> = Vec::new();
    let mut stack = roots.clone();
    while let Some(class) = stack.pop() {
        if p.choice.contains_key(&class) {
            continue;
        }
        let Some(node) = unfused.index(egraph, class) else {
            continue;
        };
        p.choice.insert(class, node);
        let kernels = egraph[class]
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| matches!(n, Mx::Kernel(..) | Mx::Call(..)) && costs.get(egraph, class, *i).is_finite())
            .map(|(i, _)| i);
        options.push((class, std::iter::once(node).chain(kernels).collect()));
        stack.extend(p.children(class, node));
    }
    // a kernel's operands are values the unfused program reaches (see the module comment)
    for (class, nodes) in options.iter_mut() {
        nodes.retain(|&n| p.children(*class, n).iter().all(|c| p.choice.contains_key(c)));
    }
    for r in &roots {
        p.reach(*r);
    }
    for _ in 0..MAX_PASSES {
        let mut improved = false;
        for (class, nodes) in &options {
            if p.refs.get(class).copied().unwrap_or(0) == 0 {
                continue;
            }
            for &node in nodes {
                let current = p.choice[class];
                if node == current {
                    continue;
                }
                if p.switch(*class, node) < -1e-9 {
                    improved = true;
                } else {
                    p.switch(*class, current);
                }
            }
        }
        if !improved {
            break;
        }
    }
    Selection::from_choices(p.choice)
}
