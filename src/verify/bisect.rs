//! `--bisect`: the first op of the imported graph whose result diverges while its operands
//! agree, found by walking back from a failing output through diverging operands.
//!
//! First one copy of the graph outputs every op result (imported values stay values however
//! the target rewrites around them). Making values outputs changes what the rewrite may
//! choose, though, and a wrong rewrite may then not be chosen at all; when the failing output
//! agrees in that copy, the walk goes one op at a time instead, each step compiling a copy
//! that outputs only the current op's operands (closer to the original program).

use anyhow::Result;
use mxc_dialects::{Def, Graph, OpKind, ValueId};
use mxc_driver::verify::{describe_op, Session};
use mxc_kernels::compare::Diff;
use std::collections::HashMap;

/// Prints the first divergent op on the way back from `failing` (an output value of the
/// imported graph, with `diff` its difference), or why there is none.
pub fn run(s: &mut Session, failing: ValueId, diff: Diff) -> Result<()> {
    if let Def::Input(i) = s.graph.def(failing) {
        println!("bisect: the failing output is graph input {i}, no op computes it");
        return Ok(());
    }
    let values: Vec<ValueId> = s
        .graph
        .ops
        .iter()
        .filter(|op| op.kind != OpKind::Constant)
        .flat_map(|op| op.results.iter().copied())
        .collect();
    let all = s.observe(&values)?;
    let count = all.values().filter(|d| !d.ok).count();
    println!(
        "bisect: {count} of {} imported values diverge when all are outputs",
        values.len()
    );
    let (op, result) = if all.get(&failing).is_some_and(|d| !d.ok) {
        walk(&s.graph, failing, &all)
    } else {
        println!("bisect: the failing output agrees then; walking back one op at a time");
        step_by_step(s, failing, diff)?
    };
    let g = &s.graph;
    let text = mxc_dialects::text::print(g);
    println!("first divergent op: {}", describe_op(g, &text, op));
    println!("  its result: {}", result.describe());
    Ok(())
}

/// The op reached from `v` through operands that diverge in `diffs`, and its result's diff.
fn walk(g: &Graph, mut v: ValueId, diffs: &HashMap<ValueId, Diff>) -> (usize, Diff) {
    let diverges = |u: &ValueId| diffs.get(u).is_some_and(|d| !d.ok);
    loop {
        let op = producer(g, v);
        match g.ops[op].operands.iter().find(|u| diverges(u)) {
            Some(u) => v = *u,
            None => return (op, diffs[&v].clone()),
        }
    }
}

/// The walk with one compiled copy per op: it outputs the op's operands that ops compute.
fn step_by_step(s: &mut Session, mut v: ValueId, mut diff: Diff) -> Result<(usize, Diff)> {
    loop {
        let op = producer(&s.graph, v);
        let mut operands: Vec<ValueId> = Vec::new();
        for u in &s.graph.ops[op].operands {
            let computed = matches!(s.graph.def(*u), Def::Op { op, .. } if s.graph.ops[op].kind != OpKind::Constant);
            if computed && !operands.contains(u) {
                operands.push(*u);
            }
        }
        if operands.is_empty() {
            return Ok((op, diff));
        }
        let diffs = s.observe(&operands)?;
        match operands.iter().find(|u| !diffs[u].ok) {
            Some(u) => (v, diff) = (*u, diffs[u].clone()),
            None => return Ok((op, diff)),
        }
    }
}

fn producer(g: &Graph, v: ValueId) -> usize {
    match g.def(v) {
        Def::Op { op, .. } => op,
        Def::Input(_) => unreachable!("graph inputs agree: they are the same on both targets"),
    }
}
