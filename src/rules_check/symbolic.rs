//! Rules over symbolic sizes. An instance the rule fired on is made symbolic: one of its
//! inputs' sizes `D` becomes the symbol `n[1..2D]{D}` wherever the inputs have it (its cost
//! point is `D`, so the rule's conditions see the numbers they saw), and the instance is kept
//! if it type-checks over every size in range. The rule is applied alone to it again; where it
//! fires, the rewritten graph must give the same symbolic output type, and the two graphs,
//! specialised at other sizes in range (`specialise::at_sizes`), must compute the same there.
//! A rule that needs fixed sizes (its condition reads one) does not fire on the symbolic form;
//! that is no fault, and the report says how many symbolic instances it fired on.

use super::check::{compare, Compared, Counterexample};
use super::instance::{Instance, LeafKind};
use super::{generate::Gen, oracle};
use anyhow::{Context, Result};
use mxc_dialects::dim::{Dim, Symbol};
use mxc_dialects::specialise::at_sizes;
use mxc_dialects::{Graph, OpKind, TensorType, ValueId};
use mxc_rewrite::rules::Rule;
use mxc_rewrite::RewriteError;
use std::collections::BTreeMap;

/// The symbol's name in every symbolic instance.
const SYMBOL: &str = "n";

/// What checking one instance over a symbolic size found.
pub enum Outcome {
    /// No size of the instance's inputs could be made symbolic (every choice left an op that
    /// does not type-check at every size), or the rule did not fire on the symbolic form.
    Skipped,
    /// The rule fired, kept the output type and computed the same at every size tried.
    Same,
    Differs(Box<Counterexample>),
}

/// Checks `rule` on the symbolic form of `inst` (an instance it fired on).
pub fn check(rule: &Rule, inst: &Instance, g: &mut Gen) -> Result<Outcome> {
    let Some((symbolic, size)) = made_symbolic(inst) else {
        return Ok(Outcome::Skipped);
    };
    let rewritten = match oracle::rewrite_alone(rule, &symbolic.graph) {
        Ok(Some(rewritten)) => rewritten,
        Ok(None) => return Ok(Outcome::Skipped),
        Err(RewriteError::Unsound(conflicts)) => {
            let why = format!(
                "over a symbolic size the engine merged values that cannot be equal: {}",
                conflicts.join("; ")
            );
            return Ok(differs(symbolic, None, why));
        }
        Err(e) => {
            return Err(e).with_context(|| format!("rule `{}` on {}", rule.name(), symbolic.describe()));
        }
    };
    let (before, after) = (output_type(&symbolic.graph), output_type(&rewritten));
    if before != after {
        let why =
            format!("over a symbolic size the rewrite makes the output {after}, where the left side gives {before}");
        return Ok(differs(symbolic, Some(rewritten), why));
    }
    let indices = inst
        .leaves
        .iter()
        .any(|l| matches!(l.kind, LeafKind::Input(super::generate::Domain::Indices(_))));
    // gather indices are drawn for the instance's own size: never fewer elements than it had
    let sizes = match indices {
        true => vec![size + 1, 2 * size],
        false => vec![1, size + 1, 2 * size],
    };
    for n in sizes {
        let at = BTreeMap::from([(SYMBOL.to_string(), n)]);
        let (left, right) = (at_sizes(&symbolic.graph, &at)?, at_sizes(&rewritten, &at)?);
        let left = specialised(&symbolic, left);
        match compare(&left, &right, g)? {
            Compared::Same | Compared::Uncompilable => {}
            Compared::Differ(mut d) => {
                d.why = format!("the rule fires over a symbolic size n, and at n = {n}: {}", d.why);
                let cex = d.counterexample(left, right);
                return Ok(Outcome::Differs(Box::new(cex)));
            }
        }
    }
    Ok(Outcome::Same)
}

fn differs(instance: Instance, rewritten: Option<Graph>, why: String) -> Outcome {
    Outcome::Differs(Box::new(Counterexample {
        instance,
        rewritten,
        inputs: Vec::new(),
        outputs: None,
        why,
    }))
}

/// The type of the instance's one output, `out`.
fn output_type(g: &Graph) -> String {
    g.outputs
        .first()
        .map_or("nothing".into(), |p| g.ty(p.value).to_string())
}

/// The instance with its inputs' types as `graph` (a specialisation of it) has them.
fn specialised(inst: &Instance, graph: Graph) -> Instance {
    let mut leaves = inst.leaves.clone();
    for leaf in &mut leaves {
        let name = Instance::input_name(&leaf.name);
        if let Some(p) = graph.inputs.iter().find(|p| p.name == name) {
            leaf.ty = graph.ty(p.value).clone();
        }
    }
    Instance {
        graph,
        leaves,
        attrs: inst.attrs.clone(),
    }
}

/// The instance with one of its inputs' sizes (at least 2, the first that keeps every op
/// well-typed at every size) made the symbol `n[1..2D]{D}`, and that size `D`.
fn made_symbolic(inst: &Instance) -> Option<(Instance, u64)> {
    let mut sizes: Vec<usize> = Vec::new();
    for p in &inst.graph.inputs {
        for &d in &inst.graph.ty(p.value).shape {
            if d >= 2 && !sizes.contains(&d) {
                sizes.push(d);
            }
        }
    }
    sizes.into_iter().find_map(|d| {
        let symbol = Symbol::new(SYMBOL, vec![(1, 2 * d as u64)], vec![d as u64]).ok()?;
        let graph = with_symbol(&inst.graph, d, &Dim::symbol(symbol))?;
        Some((specialised(inst, graph), d as u64))
    })
}

/// `g` with every input dimension of size `d` the dimension `symbol`, its ops' types inferred
/// again; `None` when an op does not type-check at every size or no result is symbolic.
fn with_symbol(g: &Graph, d: usize, symbol: &Dim) -> Option<Graph> {
    let mut out = Graph::new(&g.name);
    let mut map: Vec<Option<ValueId>> = vec![None; g.num_values()];
    for p in &g.inputs {
        let t = g.ty(p.value);
        let dims = t
            .shape
            .iter()
            .map(|&n| {
                if n == d {
                    symbol.clone()
                } else {
                    Dim::constant(n as u64)
                }
            })
            .collect();
        map[p.value.index()] = Some(out.add_input(&p.name, TensorType::of_dims(t.dtype, dims)));
    }
    for op in &g.ops {
        if op.body.is_some() {
            return None;
        }
        let operands: Vec<ValueId> = op.operands.iter().map(|v| map[v.index()]).collect::<Option<_>>()?;
        let results = match op.kind {
            OpKind::Constant => vec![out.constant(g.constant_value(op.results[0])?.clone())],
            kind => out.build(kind, operands, op.attrs.clone()).ok()?,
        };
        for (old, new) in op.results.iter().zip(results) {
            map[old.index()] = Some(new);
        }
    }
    for p in &g.outputs {
        out.add_output(&p.name, map[p.value.index()]?);
    }
    let symbolic = out.outputs.iter().any(|p| out.ty(p.value).is_symbolic());
    symbolic.then_some(out)
}
