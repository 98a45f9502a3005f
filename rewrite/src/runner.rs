//! `optimize`: a graph into the e-graph, the rules run to saturation or a limit under egg's
//! `BackoffScheduler` (which bans rules that match explosively), the cheapest graph extracted;
//! with fusion on, fused kernels are then added to the extracted values' e-classes
//! (`fuse.rs`) and the cheapest graph extracted again from the same e-graph.

use crate::analysis::{MxAnalysis, DEFAULT_FOLD_LIMIT};
use crate::convert::{to_egraph_with, to_graph_traced, Converted, MxEGraph};
use crate::cost::{graph_cost, CostModel, LinearCost};
use crate::extract::{extract, selected_nodes, Extraction, Fallback};
use crate::fuse::add_kernels;
use crate::lang::Mx;
use crate::library::add_calls;
use crate::RewriteError;
use egg::{BackoffScheduler, Id, Rewrite, Runner, StopReason};
use mxc_dialects::{Graph, OpKind};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Told the name of each stage as it starts (`saturation`, `extraction`, `fusion`), so that a
/// caller can show where a long compile is.
#[derive(Clone)]
pub struct StageHook(pub Arc<dyn Fn(&'static str) + Send + Sync>);

impl StageHook {
    pub fn start(hook: Option<&StageHook>, stage: &'static str) {
        if let Some(h) = hook {
            (h.0)(stage);
        }
    }
}

impl std::fmt::Debug for StageHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StageHook")
    }
}

/// Limits and choices of one `optimize` call.
#[derive(Clone, Debug)]
pub struct OptimizeOptions {
    /// Rule-application rounds at most.
    pub iter_limit: usize,
    /// E-nodes at most: the larger of this and `node_growth` times the input's e-nodes, so that
    /// the bound grows with the model.
    pub node_limit: usize,
    pub node_growth: usize,
    /// Wall-clock time for saturation (checked between rule applications).
    pub time_limit: Duration,
    /// `BackoffScheduler`: matches a rule may make in one round before it is banned, and for
    /// how many rounds (both double with each ban). The limit is the larger of `match_limit`
    /// and `match_growth` times the input's e-nodes: a rule that moves a transpose or a
    /// quantisation past one op matches once per such op, as many times as the model has
    /// them, and banning it for that (a quantised EfficientNet has 240 quantisations) leaves
    /// the layout half-moved, with transposes between every pair of kernels.
    pub match_limit: usize,
    pub match_growth: usize,
    pub ban_length: usize,
    /// Fold ops on constants whose result has at most this many elements.
    pub fold_limit: usize,
    /// The target's cost model, for extraction.
    pub cost_model: Arc<dyn CostModel>,
    /// Offer fused kernels to extraction (`fuse.rs`).
    pub fuse: bool,
    /// Offer library calls to extraction (`library.rs`), for a cost model that prices them.
    pub library_calls: bool,
    /// Told each stage as it starts.
    pub stage: Option<StageHook>,
}

impl Default for OptimizeOptions {
    fn default() -> Self {
        OptimizeOptions {
            iter_limit: 30,
            node_limit: 10_000,
            node_growth: 10,
            time_limit: Duration::from_secs(10),
            match_limit: 1_000,
            match_growth: 4,
            ban_length: 5,
            fold_limit: DEFAULT_FOLD_LIMIT,
            cost_model: Arc::new(LinearCost::cpu()),
            fuse: false,
            library_calls: false,
            stage: None,
        }
    }
}

/// What saturation and extraction did.
#[derive(Clone, Debug)]
pub struct Stats {
    pub enodes: usize,
    pub eclasses: usize,
    pub iterations: usize,
    pub stop_reason: StopReason,
    /// Total DAG cost of the input graph and of the result, under `cost_model`.
    pub cost_before: f64,
    pub cost_after: f64,
    /// False when the input graph's own choice (or, with fusion, the unfused extraction) was
    /// cheaper than the greedy extractor's.
    pub greedy_won: bool,
    /// Fused kernels and library calls offered to extraction.
    pub kernels_offered: usize,
    pub saturation_time: Duration,
    pub extraction_time: Duration,
}

/// The optimised graph and how it was found.
#[derive(Clone, Debug)]
pub struct Optimized {
    pub graph: Graph,
    pub stats: Stats,
}

/// Rewrites `graph` with `rules` (constant folding happens in any case) and extracts the
/// cheapest equivalent graph: same inputs, same output names and types, never costlier.
pub fn optimize(
    graph: &Graph,
    rules: &[Rewrite<Mx, MxAnalysis>],
    opts: &OptimizeOptions,
) -> Result<Optimized, RewriteError> {
    let done = rewrite(graph, rules, opts, false)?;
    Ok(Optimized {
        graph: done.graph,
        stats: done.stats,
    })
}

/// Everything one rewrite left behind, for `optimize` and for `explain`.
pub(crate) struct Rewritten {
    pub runner: Runner<Mx, MxAnalysis, ()>,
    pub converted: Converted,
    pub roots: Vec<Id>,
    pub extraction: Extraction,
    pub graph: Graph,
    /// The class each op of `graph` was built from.
    pub classes: Vec<Id>,
    pub stats: Stats,
}

/// Saturation and extraction, with egg's explanations recorded when `explanations` is set.
pub(crate) fn rewrite(
    graph: &Graph,
    rules: &[Rewrite<Mx, MxAnalysis>],
    opts: &OptimizeOptions,
    explanations: bool,
) -> Result<Rewritten, RewriteError> {
    let start = Instant::now();
    let analysis = MxAnalysis::new(Vec::new(), opts.fold_limit);
    let mut converted = to_egraph_with(graph, analysis, explanations)?;
    let egraph = std::mem::take(&mut converted.egraph);
    StageHook::start(opts.stage.as_ref(), "saturation");
    let mut runner = saturate(egraph, rules, opts)?;
    StageHook::start(opts.stage.as_ref(), "extraction");
    let saturation_time = start.elapsed();
    let model = opts.cost_model.as_ref();
    let canonical = |egraph: &MxEGraph| -> Vec<Id> { converted.roots.iter().map(|r| egraph.find(*r)).collect() };
    let mut roots = canonical(&runner.egraph);
    let imported = Fallback {
        nodes: &converted.original,
        refine: false,
    };
    let mut extraction = extract(&runner.egraph, &roots, &[imported], model)?;
    let mut kernels_offered = 0;
    if opts.fuse || opts.library_calls {
        let unfused: Vec<Mx> = selected_nodes(&runner.egraph, &extraction.selection, &roots)
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        StageHook::start(opts.stage.as_ref(), "fusion");
        if opts.fuse {
            kernels_offered = add_kernels(&mut runner.egraph, &extraction.selection, &roots);
        }
        if opts.library_calls {
            kernels_offered += add_calls(&mut runner.egraph);
        }
        roots = canonical(&runner.egraph);
        let fallbacks = [
            Fallback {
                nodes: &converted.original,
                refine: false,
            },
            Fallback {
                nodes: &unfused,
                refine: true,
            },
        ];
        extraction = extract(&runner.egraph, &roots, &fallbacks, model)?;
    }
    let egraph = &runner.egraph;
    let (result, classes) = to_graph_traced(egraph, &extraction.selection, &roots, &converted.signature)?;
    let stats = Stats {
        enodes: egraph.total_number_of_nodes(),
        eclasses: egraph.number_of_classes(),
        iterations: runner.iterations.len(),
        stop_reason: runner.stop_reason.clone().unwrap_or(StopReason::Saturated),
        cost_before: graph_cost(graph, opts.cost_model.as_ref()),
        cost_after: extraction.cost,
        greedy_won: extraction.greedy,
        kernels_offered,
        saturation_time,
        extraction_time: start.elapsed() - saturation_time,
    };
    Ok(Rewritten {
        runner,
        converted,
        roots,
        extraction,
        graph: result,
        classes,
        stats,
    })
}

/// Runs `rules` on `egraph` under the limits of `opts` (the node and match limits grow with
/// the e-graph given); an error if a rewrite merged values that cannot be equal.
pub(crate) fn saturate(
    egraph: MxEGraph,
    rules: &[Rewrite<Mx, MxAnalysis>],
    opts: &OptimizeOptions,
) -> Result<Runner<Mx, MxAnalysis, ()>, RewriteError> {
    let size = egraph.total_size();
    let node_limit = opts.node_limit.max(opts.node_growth.saturating_mul(size));
    let match_limit = opts.match_limit.max(opts.match_growth.saturating_mul(size));
    let scheduler = BackoffScheduler::default()
        .with_initial_match_limit(match_limit)
        .with_ban_length(opts.ban_length);
    let runner = Runner::<Mx, MxAnalysis, ()>::new(MxAnalysis::default())
        .with_egraph(egraph)
        .with_iter_limit(opts.iter_limit)
        .with_node_limit(node_limit)
        .with_time_limit(opts.time_limit)
        .with_scheduler(scheduler)
        .with_hook(|r| {
            merge_transposed_operands(&mut r.egraph);
            match r.egraph.analysis.conflicts.is_empty() {
                true => Ok(()),
                false => Err("a rewrite merged values that cannot be equal".to_string()),
            }
        })
        .run(rules);
    let conflicts = &runner.egraph.analysis.conflicts;
    if !conflicts.is_empty() {
        return Err(RewriteError::Unsound(conflicts.clone()));
    }
    Ok(runner)
}

/// A transpose is a bijection, so two transposes by one permutation that are equal have equal
/// operands: merges their classes (no rule can say it; egg only concludes forwards). The
/// layout rules reach a value's channels-last forms through its channels-first class (each
/// form transposed back), and a value with two forms there (a quantised convolution's f32
/// kernel and its integer sums scaled) would otherwise keep two channels-last worlds that
/// extraction and fusion never compare.
fn merge_transposed_operands(egraph: &mut MxEGraph) {
    let mut pairs = Vec::new();
    for class in egraph.classes() {
        let mut by_perm: Vec<(Id, Id)> = Vec::new();
        for node in &class.nodes {
            let Some((OpKind::Transpose, attrs, operands)) = node.split_op() else {
                continue;
            };
            let (perm, operand) = (egraph.find(attrs[0]), egraph.find(operands[0]));
            match by_perm.iter().find(|(p, _)| *p == perm) {
                Some(&(_, first)) if first != operand => pairs.push((first, operand)),
                Some(_) => {}
                None => by_perm.push((perm, operand)),
            }
        }
    }
    if pairs.is_empty() {
        return;
    }
    for (a, b) in pairs {
        egraph.union_trusted(a, b, "a transpose is a bijection");
    }
    egraph.rebuild();
}
