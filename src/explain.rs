//! `mxc explain`: the target's rewrite of a model, kernel by kernel, with why each kernel is
//! what it is (its cost, the alternative rejected, the rules that led to it), as text on
//! stdout and, with `--dot`, as a Graphviz graph with one cluster per kernel.

use anyhow::{Context, Result};
use mxc_codegen::Target;
use mxc_dialects::{Def, Graph, OpKind};
use mxc_lowering::onnx::{import_file, ImportOptions};
use mxc_rewrite::cost::{bytes_moved, flops, with_site};
use mxc_rewrite::explain::{explain, Explained, KernelNote, Origin};
use mxc_rewrite::rules::{rewrites, Rule};
use mxc_rewrite::CostModel;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// Explains `model` for `target` on stdout; writes the dot graph to `dot` if given.
pub fn run(model: &Path, target: Target, import: &ImportOptions, user: &[Rule], dot: Option<&Path>) -> Result<()> {
    let imported = import_file(model, import)?.prune();
    let cost = mxc_codegen::cost_model(target);
    let explained = match mxc_codegen::rewrite_plan(target, user)? {
        Some((rules, opts)) => Some(
            explain(&imported, &rewrites(&rules), &opts).with_context(|| format!("explaining {}", model.display()))?,
        ),
        None => None,
    };
    let view = View::new(&imported, explained, cost.as_ref(), target);
    print!("{}", view.text());
    if let Some(path) = dot {
        std::fs::write(path, view.dot()).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// A program and its kernels, with notes when the target rewrote it.
struct View<'a> {
    imported: &'a Graph,
    graph: Graph,
    kernels: Vec<Vec<usize>>,
    notes: Option<(Vec<KernelNote>, mxc_rewrite::Stats)>,
    model: &'a dyn CostModel,
    target: Target,
    names: Vec<String>,
}

impl<'a> View<'a> {
    fn new(imported: &'a Graph, explained: Option<Explained>, model: &'a dyn CostModel, target: Target) -> View<'a> {
        let (graph, kernels, notes) = match explained {
            Some(e) => (
                e.graph,
                e.kernels.iter().map(|k| k.ops.clone()).collect(),
                Some((e.kernels, e.stats)),
            ),
            None => {
                let kernels = kernel_ops(imported).map(|i| vec![i]).collect();
                (imported.clone(), kernels, None)
            }
        };
        let names = value_names(&graph);
        View {
            imported,
            graph,
            kernels,
            notes,
            model,
            target,
            names,
        }
    }

    fn text(&self) -> String {
        let mut out = String::new();
        self.header(&mut out);
        for (k, ops) in self.kernels.iter().enumerate() {
            writeln!(out).unwrap();
            for &i in ops {
                writeln!(out, "kernel {k}: {}", self.op_line(i)).unwrap();
            }
            let (cost, bytes, work) = ops.iter().fold((0.0, 0.0, 0.0), |(c, b, f), &i| {
                with_site(&self.graph, &self.graph.ops[i], |s| {
                    (c + self.model.op_cost(s), b + bytes_moved(s), f + flops(s))
                })
            });
            writeln!(out, "  cost      {cost:.0} ({}, {:.0} flops)", mb(bytes), work).unwrap();
            if let Some((notes, stats)) = &self.notes {
                note(&mut out, notes, k, stats.cost_after);
            }
        }
        out
    }

    fn header(&self, out: &mut String) {
        let after = &self.graph;
        let name = &self.imported.name;
        let (k0, k1) = (kernel_ops(self.imported).count(), kernel_ops(after).count());
        let (b0, b1) = (graph_bytes(self.imported), graph_bytes(after));
        let (c0, c1) = (self.graph_cost(self.imported), self.graph_cost(after));
        let Some((notes, stats)) = &self.notes else {
            writeln!(
                out,
                "{name} for {}: {k0} kernels, {} moved, cost {c0:.0}",
                self.target,
                mb(b0)
            )
            .unwrap();
            writeln!(
                out,
                "{} rewrites nothing (it is the oracle): each op is its own kernel, as imported",
                self.target
            )
            .unwrap();
            return;
        };
        writeln!(out, "{name} for {}", self.target).unwrap();
        writeln!(out, "  kernels   {k0} -> {k1}").unwrap();
        writeln!(out, "  moved     {} -> {}", mb(b0), mb(b1)).unwrap();
        writeln!(out, "  cost      {c0:.0} -> {c1:.0}").unwrap();
        let (before, after) = (kind_counts(self.imported), kind_counts(after));
        let mut removed = Vec::new();
        let mut added = Vec::new();
        for kind in before.keys().chain(after.keys()) {
            let (n0, n1) = (
                before.get(kind).copied().unwrap_or(0),
                after.get(kind).copied().unwrap_or(0),
            );
            let line = format!("{} {kind}", n0.abs_diff(n1));
            match n0.cmp(&n1) {
                std::cmp::Ordering::Greater if !removed.contains(&line) => removed.push(line),
                std::cmp::Ordering::Less if !added.contains(&line) => added.push(line),
                _ => {}
            }
        }
        for (label, list) in [("removed", removed), ("added", added)] {
            if !list.is_empty() {
                writeln!(out, "  {label:<9} {}", list.join(", ")).unwrap();
            }
        }
        for line in rewritten(after_kinds(&self.graph, notes), notes) {
            writeln!(out, "  rewritten {line}").unwrap();
        }
        writeln!(
            out,
            "  rewriting {} iterations ({:?}), {} e-nodes in {} e-classes",
            stats.iterations, stats.stop_reason, stats.enodes, stats.eclasses
        )
        .unwrap();
    }

    /// `%3 = conv %arg0: tensor<..>, %1: tensor<..> : tensor<..>`.
    fn op_line(&self, i: usize) -> String {
        let op = &self.graph.ops[i];
        let g = &self.graph;
        let operands: Vec<String> = op
            .operands
            .iter()
            .map(|v| format!("{}: {}", self.names[v.index()], g.ty(*v)))
            .collect();
        let results: Vec<String> = op.results.iter().map(|v| self.names[v.index()].clone()).collect();
        let types: Vec<String> = op.results.iter().map(|v| g.ty(*v).to_string()).collect();
        format!(
            "{} = {} {} : {}",
            results.join(", "),
            op.kind,
            operands.join(", "),
            types.join(", ")
        )
    }

    fn graph_cost(&self, g: &Graph) -> f64 {
        mxc_rewrite::cost::graph_cost(g, self.model)
    }

    /// The program as a Graphviz graph: inputs and outputs as ellipses, one cluster per kernel
    /// holding a box per op (op and cost), an edge per value an op reads (constants left out).
    fn dot(&self) -> String {
        let g = &self.graph;
        let mut out = format!("digraph {:?} {{\n  node [shape=box, fontname=\"monospace\"];\n", g.name);
        for (n, p) in g.inputs.iter().enumerate() {
            writeln!(
                out,
                "  in{n} [shape=ellipse, label={:?}];",
                format!("{}\n{}", p.name, g.ty(p.value))
            )
            .unwrap();
        }
        for (k, ops) in self.kernels.iter().enumerate() {
            writeln!(out, "  subgraph cluster_k{k} {{\n    label=\"kernel {k}\";").unwrap();
            for &i in ops {
                let cost = with_site(g, &g.ops[i], |s| self.model.op_cost(s));
                writeln!(out, "    op{i} [label=\"{}\\ncost {cost:.0}\"];", g.ops[i].kind.name()).unwrap();
            }
            out.push_str("  }\n");
        }
        let source = |v: mxc_dialects::ValueId| match g.def(v) {
            Def::Input(n) => Some(format!("in{n}")),
            Def::Op { op, .. } if g.ops[op].kind == OpKind::Constant => None,
            Def::Op { op, .. } => Some(format!("op{op}")),
        };
        for (i, op) in g.ops.iter().enumerate() {
            for v in &op.operands {
                if let Some(from) = source(*v) {
                    writeln!(out, "  {from} -> op{i} [label=\"{}\"];", g.ty(*v)).unwrap();
                }
            }
        }
        for (n, p) in g.outputs.iter().enumerate() {
            writeln!(out, "  out{n} [shape=ellipse, label={:?}];", p.name).unwrap();
            if let Some(from) = source(p.value) {
                writeln!(out, "  {from} -> out{n};").unwrap();
            }
        }
        out.push_str("}\n");
        out
    }
}

/// The `from` and `rejected` lines of kernel `k`; `chosen` is the extracted program's cost.
fn note(out: &mut String, notes: &[KernelNote], k: usize, chosen: f64) {
    let note = &notes[k];
    let rules = match note.rules.is_empty() {
        true => "as imported".to_string(),
        false => format!("by {}", note.rules.join(", ")),
    };
    match note.origin {
        Origin::Imported(kind) => writeln!(out, "  from      {}, {rules}", kind.name()).unwrap(),
        Origin::Created { by: Some(b) } => {
            let rules = notes[b].rules.join(", ");
            writeln!(out, "  from      created by {rules} when rewriting kernel {b}").unwrap()
        }
        Origin::Created { by: None } => writeln!(out, "  from      created by the rules").unwrap(),
    }
    for (kind, rules) in &note.replaces {
        writeln!(out, "  replaces  {}, by {}", kind.name(), rules.join(", ")).unwrap();
    }
    match &note.rejected {
        None => writeln!(out, "  rejected  none (the value has one form)").unwrap(),
        Some(alt) => {
            let program = match alt.program_cost {
                Some(p) => format!(", program cost {p:.0} ({:+.0})", p - chosen),
                None => String::new(),
            };
            writeln!(out, "  rejected  {}: cost {:.0}{program}", alt.form, alt.cost).unwrap()
        }
    }
}

/// The indices of `g`'s ops that are kernels (all but constants).
fn kernel_ops(g: &Graph) -> impl Iterator<Item = usize> + '_ {
    (0..g.ops.len()).filter(|&i| g.ops[i].kind != OpKind::Constant)
}

fn kind_counts(g: &Graph) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for i in kernel_ops(g) {
        *counts.entry(g.ops[i].kind.name().to_string()).or_insert(0) += 1;
    }
    counts
}

/// The op kind of each kernel (its last op).
fn after_kinds(g: &Graph, notes: &[KernelNote]) -> Vec<OpKind> {
    notes
        .iter()
        .map(|n| g.ops[*n.ops.last().expect("a kernel has ops")].kind)
        .collect()
}

/// `21 batch_norm -> conv by conv-batch-norm, constant folding`: the kernels the rules
/// changed, grouped by imported kind, chosen kind and rules, in program order.
fn rewritten(kinds: Vec<OpKind>, notes: &[KernelNote]) -> Vec<String> {
    let mut groups: Vec<(String, usize)> = Vec::new();
    for (note, kind) in notes.iter().zip(&kinds) {
        let line = match &note.origin {
            Origin::Imported(from) if !note.rules.is_empty() => {
                format!("{} -> {} by {}", from.name(), kind.name(), note.rules.join(", "))
            }
            Origin::Created { by: Some(k) } => format!("{} created by {}", kind.name(), notes[*k].rules.join(", ")),
            Origin::Created { by: None } => format!("{} created by the rules", kind.name()),
            Origin::Imported(_) => String::new(),
        };
        let replaced = note
            .replaces
            .iter()
            .map(|(from, rules)| format!("{} -> {} by {}", from.name(), kind.name(), rules.join(", ")));
        for line in std::iter::once(line).filter(|l| !l.is_empty()).chain(replaced) {
            match groups.iter_mut().find(|(l, _)| *l == line) {
                Some((_, n)) => *n += 1,
                None => groups.push((line, 1)),
            }
        }
    }
    groups.into_iter().map(|(line, n)| format!("{n} {line}")).collect()
}

/// Names as the text form prints them: `%argN` for inputs, `%N` for op results in order.
fn value_names(g: &Graph) -> Vec<String> {
    let mut names = vec![String::new(); g.num_values()];
    for (n, p) in g.inputs.iter().enumerate() {
        names[p.value.index()] = format!("%arg{n}");
    }
    for (n, v) in g.ops.iter().flat_map(|op| &op.results).enumerate() {
        names[v.index()] = format!("%{n}");
    }
    names
}

fn graph_bytes(g: &Graph) -> f64 {
    kernel_ops(g).map(|i| with_site(g, &g.ops[i], bytes_moved)).sum()
}

fn mb(bytes: f64) -> String {
    match bytes >= 1e6 {
        true => format!("{:.2} MB", bytes / 1e6),
        false => format!("{:.1} KB", bytes / 1e3),
    }
}
