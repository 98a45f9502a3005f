//! `mxc explain`: the target's rewrite of a model, kernel by kernel, with why each kernel is
//! what it is (its cost, the alternative rejected, the rules that led to it, and for a fused
//! kernel the same for each op it holds), as text on stdout and, with `--dot`, as a Graphviz
//! graph with one cluster per kernel.

use crate::report::size_text;
use anyhow::{Context, Result};
use mxc_codegen::{CompileOptions, Target};
use mxc_dialects::{Def, Graph, Op, OpKind};
use mxc_driver::explain::{explain, kernel_ops, op_flops, op_line, origin, proof, value_names, Explanation};
use mxc_onnx::{import_file, ImportOptions};
use mxc_rewrite::cost::{kernel_cost, with_site};
use mxc_rewrite::explain::{KernelNote, Origin, ValueNote};
use mxc_rewrite::CostModel;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// Explains `model` for `target` on stdout; writes the dot graph to `dot` if given.
pub fn run(
    model: &Path,
    target: Target,
    import: &ImportOptions,
    options: &CompileOptions,
    dot: Option<&Path>,
) -> Result<()> {
    let imported = import_file(model, import)?;
    let explained = explain(&imported, target, options, &model.display().to_string())?;
    let view = View {
        precision: options.precision.describe(),
        ..View::new(&explained)
    };
    print!("{}", view.text());
    if let Some(path) = dot {
        std::fs::write(path, view.dot()).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `graph` as a Graphviz drawing (as `--dot` draws it), each kernel's cost under `target`'s
/// cost model.
pub fn dot(graph: &Graph, target: Target) -> String {
    let unexplained = Explanation {
        imported: graph.clone(),
        graph: graph.clone(),
        notes: None,
        target,
        model: mxc_codegen::cost_model(target),
    };
    View::new(&unexplained).dot()
}

/// A program and its kernels, with notes when the target rewrote it.
struct View<'a> {
    explanation: &'a Explanation,
    imported: &'a Graph,
    graph: &'a Graph,
    /// One per kernel (`kernel_ops(&graph)`, in order), when the target rewrote the program.
    notes: Option<&'a (Vec<KernelNote>, mxc_rewrite::Stats)>,
    model: &'a dyn CostModel,
    target: Target,
    names: Vec<String>,
    /// The precision the program was changed to (`--fp16`, ...), empty for none.
    precision: String,
}

impl<'a> View<'a> {
    fn new(e: &'a Explanation) -> View<'a> {
        View {
            explanation: e,
            imported: &e.imported,
            graph: &e.graph,
            notes: e.notes.as_ref(),
            model: e.model.as_ref(),
            target: e.target,
            names: value_names(&e.graph),
            precision: String::new(),
        }
    }

    fn text(&self) -> String {
        let mut out = String::new();
        self.header(&mut out);
        for (k, i) in kernel_ops(self.graph).enumerate() {
            writeln!(out).unwrap();
            let op = &self.graph.ops[i];
            // an op on strings is no kernel: the runtime evaluates it (a host step of the plan)
            let host = match mxc_lowering::loops::runs_on_host(self.graph, op) {
                true => " (on the host: strings)",
                false => "",
            };
            writeln!(out, "kernel {k}{host}: {}", op_line(self.graph, &self.names, i)).unwrap();
            if op.kind.is_control() {
                regions(&mut out, op, self.model, "  ");
            }
            if let Some(body) = &op.body {
                let kernels = self.notes.as_ref().map(|(notes, _)| &notes[..]).unwrap_or(&[]);
                let notes = kernels.get(k).map(|n| &n.body[..]).unwrap_or(&[]);
                let label = if op.kind == OpKind::Call { "computes" } else { "fuses" };
                fuses(&mut out, label, body, notes, kernels);
            }
            let (cost, bytes) = self.explanation.cost_of(self.graph, op);
            writeln!(
                out,
                "  cost      {cost:.0} ({}, {:.0} flops)",
                size_text(bytes),
                op_flops(self.graph, op)
            )
            .unwrap();
            if let Some((notes, stats)) = &self.notes {
                note(&mut out, notes, k, stats.cost_after);
            }
        }
        out
    }

    fn header(&self, out: &mut String) {
        let after = self.graph;
        let name = &self.imported.name;
        let summary = self.explanation.summary();
        let ((k0, k1), (b0, b1), (c0, c1)) = (summary.kernels, summary.bytes, summary.cost);
        let target = match self.precision.as_str() {
            "" => self.target.to_string(),
            precision => format!("{}, in {precision}", self.target),
        };
        let Some((notes, stats)) = &self.notes else {
            writeln!(
                out,
                "{name} for {target}: {k0} kernels, {} moved, cost {c0:.0}",
                size_text(b0)
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
        writeln!(out, "{name} for {target}").unwrap();
        writeln!(out, "  kernels   {k0} -> {k1}").unwrap();
        writeln!(out, "  moved     {} -> {}", size_text(b0), size_text(b1)).unwrap();
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
        let g = &self.graph;
        let fused: Vec<usize> = kernel_ops(g)
            .filter_map(|i| g.ops[i].body.as_ref().map(|b| kernel_ops(b).count()))
            .collect();
        if !fused.is_empty() {
            let ops: usize = fused.iter().sum();
            let largest = fused.iter().max().copied().unwrap_or(0);
            writeln!(
                out,
                "  fused     {} kernels hold {ops} ops (at most {largest} in one)",
                fused.len()
            )
            .unwrap();
        }
        for line in rewritten(self.graph, notes) {
            writeln!(out, "  rewritten {line}").unwrap();
        }
        writeln!(
            out,
            "  rewriting {} iterations ({:?}), {} e-nodes in {} e-classes",
            stats.iterations, stats.stop_reason, stats.enodes, stats.eclasses
        )
        .unwrap();
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
        for (k, i) in kernel_ops(g).enumerate() {
            let op = &g.ops[i];
            let cost = with_site(g, op, |s| kernel_cost(self.model, s, op.body.as_deref()));
            writeln!(
                out,
                "  subgraph cluster_k{k} {{\n    label=\"kernel {k}: cost {cost:.0}\";"
            )
            .unwrap();
            match &op.body {
                None => writeln!(out, "    op{i} [label=\"{}\"];", op.kind.name()).unwrap(),
                Some(body) => {
                    for j in kernel_ops(body) {
                        writeln!(out, "    op{i}_{j} [label=\"{}\"];", body.ops[j].kind.name()).unwrap();
                    }
                    for j in kernel_ops(body) {
                        for v in &body.ops[j].operands {
                            if let Def::Op { op: from, .. } = body.def(*v) {
                                if body.ops[from].kind != OpKind::Constant {
                                    writeln!(out, "    op{i}_{from} -> op{i}_{j};").unwrap();
                                }
                            }
                        }
                    }
                }
            }
            out.push_str("  }\n");
        }
        // the dot node that computes a kernel's result
        let result_node = |op: usize| match &g.ops[op].body {
            None => format!("op{op}"),
            Some(body) => match body.def(body.outputs[0].value) {
                Def::Op { op: j, .. } => format!("op{op}_{j}"),
                Def::Input(_) => format!("op{op}"),
            },
        };
        let source = |v: mxc_dialects::ValueId| match g.def(v) {
            Def::Input(n) => Some(format!("in{n}")),
            Def::Op { op, .. } if g.ops[op].kind == OpKind::Constant => None,
            Def::Op { op, .. } => Some(result_node(op)),
        };
        for i in kernel_ops(g) {
            let op = &g.ops[i];
            for (n, v) in op.operands.iter().enumerate() {
                let Some(from) = source(*v) else { continue };
                for to in readers(i, op, n) {
                    writeln!(out, "  {from} -> {to} [label=\"{}\"];", g.ty(*v)).unwrap();
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

/// The regions of control op `op`, each with its kernels (a fused kernel's ops, a nested
/// control op's regions) and their costs, indented by `indent`.
fn regions(out: &mut String, op: &Op, model: &dyn CostModel, indent: &str) {
    writeln!(
        out,
        "{indent}runs on the host, each region's kernels as the target made them:"
    )
    .unwrap();
    for (name, g) in op.attrs.regions() {
        let names = value_names(g);
        writeln!(
            out,
            "{indent}region {name} (graph {:?}): {} kernels, cost {:.0}",
            g.name,
            kernel_ops(g).count(),
            mxc_rewrite::cost::graph_cost(g, model)
        )
        .unwrap();
        for (k, i) in kernel_ops(g).enumerate() {
            let op = &g.ops[i];
            let cost = with_site(g, op, |s| kernel_cost(model, s, op.body.as_deref()));
            writeln!(out, "{indent}  kernel {k}: {}  (cost {cost:.0})", op_line(g, &names, i)).unwrap();
            if let Some(body) = &op.body {
                let ops: Vec<&str> = kernel_ops(body).map(|j| body.ops[j].kind.name()).collect();
                writeln!(out, "{indent}    fuses {}", ops.join(", ")).unwrap();
            }
            if op.kind.is_control() {
                regions(out, op, model, &format!("{indent}    "));
            }
        }
    }
}

/// The dot nodes that read operand `n` of kernel op `i`: the op, or the body ops reading that
/// input of a fused kernel.
fn readers(i: usize, op: &Op, n: usize) -> Vec<String> {
    let Some(body) = &op.body else {
        return vec![format!("op{i}")];
    };
    let input = body.inputs[n].value;
    kernel_ops(body)
        .filter(|&j| body.ops[j].operands.contains(&input))
        .map(|j| format!("op{i}_{j}"))
        .collect()
}

/// A fused kernel's (or a call's) ops, one line each, the first labelled `label`, with where
/// each comes from when the notes say.
fn fuses(out: &mut String, label: &str, body: &Graph, notes: &[(usize, ValueNote)], kernels: &[KernelNote]) {
    let names = value_names(body);
    for (n, j) in kernel_ops(body).enumerate() {
        let label = if n == 0 { label } else { "" };
        let op = &body.ops[j];
        let name = format!("{} = {}", names[op.results[0].index()], op.kind.name());
        match notes.iter().find(|(k, _)| *k == j) {
            Some((_, note)) => writeln!(out, "  {label:<9} {name:<22} {}", origin(note, kernels)).unwrap(),
            None => writeln!(out, "  {label:<9} {name}").unwrap(),
        }
    }
}

/// The `from` and `rejected` lines of kernel `k`; `chosen` is the extracted program's cost.
fn note(out: &mut String, notes: &[KernelNote], k: usize, chosen: f64) {
    let note = &notes[k];
    let from = origin(&note.value, notes);
    let from = from.strip_prefix("from ").unwrap_or(&from);
    writeln!(out, "  from      {from}").unwrap();
    for (kind, rules) in &note.value.replaces {
        writeln!(out, "  replaces  {}, {}", kind.name(), proof(rules)).unwrap();
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
    for algorithm in &note.algorithms {
        let cost = algorithm.cost.map_or(String::new(), |c| format!(", cost {c:.0}"));
        writeln!(out, "  algorithm {}{cost}", algorithm.chosen).unwrap();
        if let Some((name, form, cost)) = &algorithm.rejected {
            writeln!(out, "            rejected {name}: {form}, cost {cost:.0}").unwrap();
        }
    }
    if let Some(library) = &note.library {
        let (callee, libraries) = (library.callee, library.callee.libraries());
        let (generated, generated_cost) = &library.generated;
        if library.called {
            let call = format!("call {callee} ({libraries}), cost {:.0}", library.call_cost);
            writeln!(out, "  library   {call}").unwrap();
            writeln!(
                out,
                "            rejected generated {generated}: cost {generated_cost:.0}"
            )
            .unwrap();
            writeln!(
                out,
                "            (the generated kernel runs where the library is absent)"
            )
            .unwrap();
        } else {
            let call = format!("call {callee} ({libraries}): cost {:.0}", library.call_cost);
            writeln!(out, "  library   rejected {call}").unwrap();
        }
    }
}

/// How many ops of each kind `g` computes, fused kernels' bodies counted op by op.
fn kind_counts(g: &Graph) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for i in kernel_ops(g) {
        match &g.ops[i].body {
            Some(body) => {
                for (kind, n) in kind_counts(body) {
                    *counts.entry(kind).or_insert(0) += n;
                }
            }
            None => *counts.entry(g.ops[i].kind.name().to_string()).or_insert(0) += 1,
        }
    }
    counts
}

/// Each value note with the kind of op it is about: each kernel's, then its body's ops'.
fn noted_ops<'a>(g: &'a Graph, notes: &'a [KernelNote]) -> Vec<(&'a ValueNote, OpKind)> {
    let mut out = Vec::new();
    for note in notes {
        let op = &g.ops[note.op];
        out.push((&note.value, op.kind));
        if let Some(body) = &op.body {
            out.extend(note.body.iter().map(|(j, n)| (n, body.ops[*j].kind)));
        }
    }
    out
}

/// `21 batch_norm -> conv by conv-batch-norm, constant folding`: the values the rules
/// changed, grouped by imported kind, chosen kind and rules, in program order.
fn rewritten(g: &Graph, notes: &[KernelNote]) -> Vec<String> {
    let mut groups: Vec<(String, usize)> = Vec::new();
    for (note, kind) in noted_ops(g, notes) {
        let line = match &note.origin {
            Origin::Imported(from) if !note.rules.is_empty() => {
                format!("{} -> {} by {}", from.name(), kind.name(), note.rules.join(", "))
            }
            Origin::Imported(_) => String::new(),
            Origin::Created { .. } => format!("{} {}", kind.name(), origin(note, notes)),
        };
        let replaced = note
            .replaces
            .iter()
            .map(|(from, rules)| format!("{} -> {} {}", from.name(), kind.name(), proof(rules)));
        for line in std::iter::once(line).filter(|l| !l.is_empty()).chain(replaced) {
            match groups.iter_mut().find(|(l, _)| *l == line) {
                Some((_, n)) => *n += 1,
                None => groups.push((line, 1)),
            }
        }
    }
    groups.into_iter().map(|(line, n)| format!("{n} {line}")).collect()
}
