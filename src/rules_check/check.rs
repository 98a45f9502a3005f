//! Checking one rule: draw instances of its left side, let the engine apply the rule alone to
//! each, and run every instance the rule changed against its rewritten graph on `ref` with
//! several seeded inputs. The first disagreement is the counterexample.

use super::generate::{self, Gen};
use super::instance::{self, Hints, Instance, LeafKind};
use super::{oracle, symbolic};
use anyhow::{bail, Context, Result};
use mxc_dialects::{Graph, Tensor};
use mxc_rewrite::rules::ast::Pat;
use mxc_rewrite::rules::Rule;
use mxc_rewrite::RewriteError;
use std::collections::{HashMap, HashSet};

/// Instances drawn per rule at most (many do not type-check or are drawn twice).
const DRAWS_OF_INSTANCES: usize = 600;
/// Instances the rule changed that are collected, and how many of them are run: the most
/// varied (`most_varied`), since most instances a rule fires on are alike (identity
/// permutations, scalars) and a wrong rule often shows only on the others.
const FIRED_POOL: usize = 40;
const FIRED_RUN: usize = 10;
/// Input draws run per instance.
pub const INPUT_DRAWS: usize = 4;
/// Instances the rule fired on (and that agreed) whose symbolic forms are checked too.
const SYMBOLIC_RUN: usize = 3;

/// What checking a rule found.
pub enum Verdict {
    /// The rule changed `fired` instances and each gave the same outputs on every draw;
    /// `symbolic` of their symbolic forms (`symbolic.rs`) too, at every size tried.
    Sound {
        fired: usize,
        symbolic: usize,
    },
    /// No instance of the `tried` distinct, well-typed ones was changed by the rule.
    NeverFired {
        tried: usize,
    },
    Unsound(Box<Counterexample>),
}

/// An instance on which the rule changes what the graph computes.
pub struct Counterexample {
    pub instance: Instance,
    /// The graph the engine rewrote the instance to (none when the engine itself found the
    /// two sides cannot be equal).
    pub rewritten: Option<Graph>,
    /// The inputs, by variable name, and the outputs of both sides.
    pub inputs: Vec<(String, Tensor)>,
    pub outputs: Option<(Tensor, Tensor)>,
    pub why: String,
}

/// Instances the `ref` target could not compile, besides the verdict.
pub struct Checked {
    pub verdict: Verdict,
    pub uncompilable: usize,
}

pub fn check_rule(rule: &Rule) -> Result<Checked> {
    let Pat::Op(lhs) = &rule.def.lhs else {
        bail!("rule `{}`: the left side is not an op", rule.name());
    };
    let hints = Hints::of(rule);
    let mut g = Gen::new(Gen::seed_of(rule.name()));
    let mut seen = HashSet::new();
    let mut fired_on = Vec::new();
    let mut tried = 0;
    for _ in 0..DRAWS_OF_INSTANCES {
        if fired_on.len() == FIRED_POOL {
            break;
        }
        let Some(inst) = instance::sample(lhs, &hints, &mut g) else {
            continue;
        };
        if !seen.insert(instance::key(&inst)) {
            continue;
        }
        tried += 1;
        match oracle::rewrite_alone(rule, &inst.graph) {
            Ok(Some(rewritten)) => fired_on.push((inst, rewritten)),
            Ok(None) => {}
            Err(RewriteError::Unsound(conflicts)) => {
                let why = format!(
                    "the engine merged values that cannot be equal: {}",
                    conflicts.join("; ")
                );
                let cex = Counterexample {
                    instance: inst,
                    rewritten: None,
                    inputs: Vec::new(),
                    outputs: None,
                    why,
                };
                return Ok(unsound(cex, 0));
            }
            Err(e) => {
                return Err(e).with_context(|| format!("rule `{}` on {}", rule.name(), inst.describe()));
            }
        }
    }
    let (mut fired, mut uncompilable) = (0, 0);
    let mut agreed = Vec::new();
    for (inst, rewritten) in most_varied(fired_on) {
        match compare(&inst, &rewritten, &mut g)? {
            Compared::Same => {
                fired += 1;
                agreed.push(inst);
            }
            Compared::Uncompilable => uncompilable += 1,
            Compared::Differ(d) => return Ok(unsound(d.counterexample(inst, rewritten), uncompilable)),
        }
    }
    let mut symbolic = 0;
    for inst in agreed.iter().take(SYMBOLIC_RUN) {
        match symbolic::check(rule, inst, &mut g)? {
            symbolic::Outcome::Skipped => {}
            symbolic::Outcome::Same => symbolic += 1,
            symbolic::Outcome::Differs(cex) => return Ok(unsound(*cex, uncompilable)),
        }
    }
    let verdict = if fired > 0 {
        Verdict::Sound { fired, symbolic }
    } else {
        Verdict::NeverFired { tried }
    };
    Ok(Checked { verdict, uncompilable })
}

fn unsound(cex: Counterexample, uncompilable: usize) -> Checked {
    Checked {
        verdict: Verdict::Unsound(Box::new(cex)),
        uncompilable,
    }
}

pub enum Compared {
    Same,
    Uncompilable,
    Differ(Box<Difference>),
}

/// Inputs on which an instance and its rewritten graph give different outputs.
pub struct Difference {
    inputs: Vec<(String, Tensor)>,
    left: Tensor,
    right: Tensor,
    pub why: String,
}

impl Difference {
    pub fn counterexample(self, instance: Instance, rewritten: Graph) -> Counterexample {
        Counterexample {
            instance,
            rewritten: Some(rewritten),
            inputs: self.inputs,
            outputs: Some((self.left, self.right)),
            why: self.why,
        }
    }
}

/// Runs the instance and its rewritten graph on the same seeded inputs, `INPUT_DRAWS` times.
pub fn compare(inst: &Instance, rewritten: &Graph, g: &mut Gen) -> Result<Compared> {
    let (Some(left), Some(right)) = (oracle::compile_ref(&inst.graph), oracle::compile_ref(rewritten)) else {
        return Ok(Compared::Uncompilable);
    };
    for draw in 0..INPUT_DRAWS {
        let inputs: Vec<(String, Tensor)> = inst
            .leaves
            .iter()
            .filter_map(|leaf| match leaf.kind {
                LeafKind::Input(domain) => Some((leaf.name.clone(), generate::data(g, &leaf.ty, domain, draw))),
                LeafKind::Constant(_) => None,
            })
            .collect();
        let by_input: HashMap<String, Tensor> = inputs
            .iter()
            .map(|(name, t)| (Instance::input_name(name), t.clone()))
            .collect();
        let (a, b) = (oracle::run(&left, &by_input)?, oracle::run(&right, &by_input)?);
        if let Some(why) = oracle::difference(&a, &b) {
            return Ok(Compared::Differ(Box::new(Difference {
                inputs,
                left: a,
                right: b,
                why,
            })));
        }
    }
    Ok(Compared::Same)
}

/// Up to `FIRED_RUN` of `fired`: first one per distinct `Instance::variety` (attribute values
/// and element types), the ones with the most input elements first (more axes and values for
/// a wrong rule to show on), then the others in the order drawn.
fn most_varied(fired: Vec<(Instance, Graph)>) -> Vec<(Instance, Graph)> {
    let mut kinds = HashSet::new();
    let (mut first, rest): (Vec<_>, Vec<_>) = fired.into_iter().partition(|(inst, _)| kinds.insert(inst.variety()));
    first.sort_by_key(|(inst, _)| std::cmp::Reverse(inst.leaves.iter().map(|l| l.ty.num_elements()).sum::<usize>()));
    first.extend(rest);
    first.truncate(FIRED_RUN);
    first
}
