//! `--reduce`: the shortest prefix of the imported program that fails. A prefix is the first k
//! ops (constants not counted) with the values live at the cut as outputs: the results of its
//! last op and every value it defines that a later op or the graph's outputs use. Assuming a
//! divergence, once there, reaches a value live at every later cut (it is not masked by what
//! follows), failure is monotone in k and a binary search finds the shortest failing prefix.

use anyhow::{Context, Result};
use mxc_dialects::{Graph, OpKind, ValueId};
use mxc_driver::verify::{describe_op, Session};
use std::path::Path;

/// Prints the shortest failing prefix's k and last op; writes its graph as IR text to `out`.
pub fn run(s: &mut Session, out: Option<&Path>) -> Result<()> {
    let g = &s.graph;
    let ops: Vec<usize> = (0..g.ops.len())
        .filter(|i| g.ops[*i].kind != OpKind::Constant)
        .collect();
    if ops.is_empty() {
        println!("reduce: the graph has no ops besides constants");
        return Ok(());
    }
    // The last op using each value (usize::MAX for graph outputs).
    let mut last_use = vec![0usize; g.num_values()];
    for (i, op) in g.ops.iter().enumerate() {
        for v in &op.operands {
            last_use[v.index()] = i;
        }
    }
    for p in &g.outputs {
        last_use[p.value.index()] = usize::MAX;
    }
    let mut fails = |j: usize| -> Result<bool> {
        let live = live_at(&s.graph, ops[j], &last_use);
        Ok(s.observe(&live)?.values().any(|d| !d.ok))
    };
    let (mut lo, mut hi) = (0, ops.len() - 1);
    if !fails(hi)? {
        println!("reduce: no prefix fails: the whole program agrees when the values live at its end are outputs");
        return Ok(());
    }
    while lo < hi {
        let mid = (lo + hi) / 2;
        if fails(mid)? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let g = &s.graph;
    let text = mxc_dialects::text::print(g);
    println!(
        "shortest failing prefix: k = {} of {} ops (constants not counted), ending at {}",
        lo + 1,
        ops.len(),
        describe_op(g, &text, ops[lo])
    );
    if let Some(path) = out {
        let prefix = prefix_graph(s, ops[lo], &last_use);
        std::fs::write(path, mxc_dialects::text::print(&prefix))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("reduce: wrote the prefix to {}", path.display());
    }
    Ok(())
}

/// The ops up to `cut` with the values live there as outputs.
fn prefix_graph(s: &Session, cut: usize, last_use: &[usize]) -> Graph {
    s.outputting(&live_at(&s.graph, cut, last_use))
}

/// The results of op `cut` and of the ops before it (constants left out) used after it.
fn live_at(g: &Graph, cut: usize, last_use: &[usize]) -> Vec<ValueId> {
    g.ops[..=cut]
        .iter()
        .enumerate()
        .filter(|(_, op)| op.kind != OpKind::Constant)
        .flat_map(|(i, op)| op.results.iter().map(move |r| (i, *r)))
        .filter(|(i, r)| *i == cut || last_use[r.index()] > cut)
        .map(|(_, r)| r)
        .collect()
}
