//! Why each kernel of a program is what it is: the target's rewrite of a graph explained
//! (`mxc_rewrite::explain`), and the facts of each kernel as data (its ops, cost, bytes and
//! arithmetic, where it comes from, the form rejected, the algorithm and library call chosen),
//! which `mxc explain` prints and the Python module's `explain` returns.

use crate::error::{Context, Result};
use mxc_codegen::{CompileOptions, Target};
use mxc_dialects::{Graph, Op, OpKind};
use mxc_rewrite::cost::{bytes_moved, flops, kernel_cost, kernel_flops, with_site};
use mxc_rewrite::explain::{explain as explain_rewrite, KernelNote, Origin, ValueNote};
use mxc_rewrite::fuse::FUSION;
use mxc_rewrite::rules::rewrites;
use mxc_rewrite::{CostModel, Stats};

/// A graph as imported and as the target rewrote it, with a note per kernel when it did.
pub struct Explanation {
    pub imported: Graph,
    pub graph: Graph,
    /// One per kernel (`kernel_ops(&graph)`, in order), when the target rewrote the program.
    pub notes: Option<(Vec<KernelNote>, Stats)>,
    pub target: Target,
    pub model: std::sync::Arc<dyn CostModel>,
}

/// Rewrites `imported` as `target` does (regions first, as a compile does) and explains it;
/// `what` names the graph in an error.
pub fn explain(imported: &Graph, target: Target, options: &CompileOptions, what: &str) -> Result<Explanation> {
    let imported = mxc_codegen::with_precision(imported, &options.precision)?.unwrap_or_else(|| imported.clone());
    let imported = imported.prune();
    let imported = mxc_codegen::rewrite_regions(&imported, target, options)?.unwrap_or(imported);
    let explained = match mxc_codegen::rewrite_plan(target, options)? {
        Some((rules, opts)) => {
            Some(explain_rewrite(&imported, &rewrites(&rules), &opts).context(|| format!("explaining {what}"))?)
        }
        None => None,
    };
    let (graph, notes) = match explained {
        Some(e) => (e.graph, Some((e.kernels, e.stats))),
        None => (imported.clone(), None),
    };
    Ok(Explanation {
        imported,
        graph,
        notes,
        target,
        model: mxc_codegen::cost_model(target),
    })
}

/// The program before and after rewriting.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub kernels: (usize, usize),
    pub bytes: (f64, f64),
    pub cost: (f64, f64),
    /// Iterations, why saturation stopped, e-nodes and e-classes; `None` for a target that
    /// rewrites nothing.
    pub rewriting: Option<(usize, String, usize, usize)>,
}

/// One kernel's facts.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelFacts {
    /// The op as mx text: `%5 = mx.relu %4: tensor<..> : tensor<..>`.
    pub op: String,
    /// The ops it computes (a fused kernel's body's, else its own).
    pub ops: Vec<String>,
    /// An op on strings, run by the runtime rather than a kernel.
    pub on_host: bool,
    pub cost: f64,
    pub bytes: f64,
    pub flops: f64,
    /// Where its value comes from (`relu, as imported`), when the target rewrote the program.
    pub origin: Option<String>,
    /// The rules along the proof from the imported form.
    pub rules: Vec<String>,
    /// Other imported ops it replaces, each with its proof.
    pub replaces: Vec<(String, String)>,
    /// The cheapest other form: its text, its cost and the program's cost had it been picked.
    pub rejected: Option<(String, f64, Option<f64>)>,
    /// How each product or convolution is computed.
    pub algorithms: Vec<AlgorithmFacts>,
    /// A library call: the callee, its libraries, whether it is made, its cost, and the
    /// generated kernel's form and cost.
    pub library: Option<LibraryFacts>,
}

/// A product's or convolution's algorithm, its cost, and the best other: its name, form and
/// cost.
#[derive(Clone, Debug, PartialEq)]
pub struct AlgorithmFacts {
    pub chosen: String,
    pub cost: Option<f64>,
    pub rejected: Option<(String, String, f64)>,
}

/// A kernel a library function can compute.
#[derive(Clone, Debug, PartialEq)]
pub struct LibraryFacts {
    pub callee: String,
    pub libraries: String,
    pub called: bool,
    pub call_cost: f64,
    pub generated: (String, f64),
}

impl Explanation {
    pub fn summary(&self) -> Summary {
        let (before, after) = (&self.imported, &self.graph);
        Summary {
            kernels: (kernel_ops(before).count(), kernel_ops(after).count()),
            bytes: (graph_bytes(before), graph_bytes(after)),
            cost: (self.graph_cost(before), self.graph_cost(after)),
            rewriting: (self.notes.as_ref())
                .map(|(_, s)| (s.iterations, format!("{:?}", s.stop_reason), s.enodes, s.eclasses)),
        }
    }

    pub fn graph_cost(&self, g: &Graph) -> f64 {
        mxc_rewrite::cost::graph_cost(g, self.model.as_ref())
    }

    /// Kernel `i` of the graph's ops: its cost under the target's model and the bytes it moves.
    pub fn cost_of(&self, g: &Graph, op: &Op) -> (f64, f64) {
        with_site(g, op, |s| {
            (kernel_cost(self.model.as_ref(), s, op.body.as_deref()), bytes_moved(s))
        })
    }

    /// Every kernel's facts, in program order.
    pub fn kernels(&self) -> Vec<KernelFacts> {
        let g = &self.graph;
        let names = value_names(g);
        let notes = self.notes.as_ref().map(|(n, _)| &n[..]).unwrap_or(&[]);
        kernel_ops(g)
            .enumerate()
            .map(|(k, i)| {
                let op = &g.ops[i];
                let (cost, bytes) = self.cost_of(g, op);
                let ops = match &op.body {
                    Some(body) => kernel_ops(body).map(|j| body.ops[j].kind.name().to_string()).collect(),
                    None => vec![op.kind.name().to_string()],
                };
                let note = notes.get(k);
                KernelFacts {
                    op: op_line(g, &names, i),
                    ops,
                    on_host: mxc_lowering::loops::runs_on_host(g, op),
                    cost,
                    bytes,
                    flops: op_flops(g, op),
                    origin: note.map(|n| origin(&n.value, notes)),
                    rules: note.map(|n| n.value.rules.clone()).unwrap_or_default(),
                    replaces: (note.iter().flat_map(|n| &n.value.replaces))
                        .map(|(kind, rules)| (kind.name().to_string(), proof(rules)))
                        .collect(),
                    rejected: note
                        .and_then(|n| n.rejected.as_ref())
                        .map(|a| (a.form.clone(), a.cost, a.program_cost)),
                    algorithms: (note.iter().flat_map(|n| &n.algorithms))
                        .map(|a| AlgorithmFacts {
                            chosen: a.chosen.to_string(),
                            cost: a.cost,
                            rejected: a.rejected.as_ref().map(|(n, f, c)| (n.to_string(), f.clone(), *c)),
                        })
                        .collect(),
                    library: note.and_then(|n| n.library.as_ref()).map(|l| LibraryFacts {
                        callee: l.callee.to_string(),
                        libraries: l.callee.libraries().to_string(),
                        called: l.called,
                        call_cost: l.call_cost,
                        generated: l.generated.clone(),
                    }),
                }
            })
            .collect()
    }
}

/// `%3 = conv %arg0: tensor<..>, %1: tensor<..> : tensor<..>` for op `i` of `g`, its values
/// named by `names`.
pub fn op_line(g: &Graph, names: &[String], i: usize) -> String {
    let op = &g.ops[i];
    let operands: Vec<String> = op
        .operands
        .iter()
        .map(|v| format!("{}: {}", names[v.index()], g.ty(*v)))
        .collect();
    let results: Vec<String> = op.results.iter().map(|v| names[v.index()].clone()).collect();
    let types: Vec<String> = op.results.iter().map(|v| g.ty(*v).to_string()).collect();
    format!(
        "{} = {} {} : {}",
        results.join(", "),
        op.kind,
        operands.join(", "),
        types.join(", ")
    )
}

/// The arithmetic of a kernel's op (a fused op's is its body's).
pub fn op_flops(g: &Graph, op: &Op) -> f64 {
    match &op.body {
        Some(body) => kernel_flops(body),
        None => with_site(g, op, flops),
    }
}

/// How another imported op was proven the same value: `by RULES`, or, with no rule, that it is
/// the same op on the same operands (the e-graph keeps one of each).
pub fn proof(rules: &[String]) -> String {
    match rules.is_empty() {
        true => "as the same op on the same operands".to_string(),
        false => format!("by {}", rules.join(", ")),
    }
}

/// `from relu, as imported`, `from batch_norm, by conv-batch-norm` or `created by ...`.
pub fn origin(note: &ValueNote, notes: &[KernelNote]) -> String {
    let rules = match note.rules.is_empty() {
        true => "as imported".to_string(),
        false => format!("by {}", note.rules.join(", ")),
    };
    match note.origin {
        Origin::Imported(kind) => format!("from {}, {rules}", kind.name()),
        Origin::Created { by: Some(b) } if b < notes.len() => {
            let rules: Vec<&str> = notes[b]
                .value
                .rules
                .iter()
                .map(String::as_str)
                .filter(|r| *r != FUSION)
                .collect();
            let rules = rules.join(", ");
            format!("created by {rules} when rewriting kernel {b}")
        }
        Origin::Created { .. } => "created by the rules".to_string(),
    }
}

/// The indices of `g`'s ops that are kernels (all but constants).
pub fn kernel_ops(g: &Graph) -> impl Iterator<Item = usize> + '_ {
    (0..g.ops.len()).filter(|&i| g.ops[i].kind != OpKind::Constant)
}

/// Names as the text form prints them: `%argN` for inputs, `%N` for op results in order.
pub fn value_names(g: &Graph) -> Vec<String> {
    (0..g.num_values())
        .map(|v| mxc_dialects::text::value_name(g, mxc_dialects::ValueId(v as u32)))
        .collect()
}

fn graph_bytes(g: &Graph) -> f64 {
    kernel_ops(g).map(|i| with_site(g, &g.ops[i], bytes_moved)).sum()
}
