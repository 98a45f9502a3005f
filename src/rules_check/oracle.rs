//! The two halves of checking one instance: the rule applied alone by the rewrite engine
//! (`optimize`, under a cost model that prefers any op over the instance's own, so that the
//! right side is extracted whenever the rule applied), then the instance and its rewritten
//! graph run on the `ref` target (the oracle) with the same inputs and compared.

use anyhow::{Context, Result};
use mxc_codegen::{CompileOptions, Target};
use mxc_dialects::{Attrs, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::Executable;
use mxc_rewrite::cost::{CostModel, OpSite};
use mxc_rewrite::rules::{rewrites, Rule};
use mxc_rewrite::{optimize, MxAnalysis, OptimizeOptions, RewriteError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Float outputs agree when |left - right| <= ATOL + RTOL * max(|left|, the largest |left| of
/// the tensor): rounding is relative to the values a result was computed from, and a rule
/// that folds constants (`batch_norm` into `conv`) rounds differently where the output
/// cancels to small values. NaN matches NaN.
const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

/// One op of the instance, as the cost model sees it.
#[derive(Debug)]
struct Site {
    kind: OpKind,
    attrs: Attrs,
    operands: Vec<TensorType>,
    results: Vec<TensorType>,
}

/// Costs 1 per op, and 1000 per op identical (kind, attributes, types) to one of the
/// instance's: the extracted graph is the rewritten one whenever the rule replaced anything.
#[derive(Debug)]
struct PreferNew(Vec<Site>);

impl PreferNew {
    fn of(graph: &Graph) -> PreferNew {
        let types = |vs: &[mxc_dialects::ValueId]| vs.iter().map(|v| graph.ty(*v).clone()).collect();
        PreferNew(
            graph
                .ops
                .iter()
                .filter(|op| op.kind != OpKind::Constant)
                .map(|op| Site {
                    kind: op.kind,
                    attrs: op.attrs.clone(),
                    operands: types(&op.operands),
                    results: types(&op.results),
                })
                .collect(),
        )
    }
}

impl CostModel for PreferNew {
    fn op_cost(&self, op: &OpSite) -> f64 {
        let old = self
            .0
            .iter()
            .any(|s| s.kind == op.kind && s.attrs == *op.attrs && s.operands == op.operands && s.results == op.results);
        if old {
            1000.0
        } else {
            1.0
        }
    }
}

/// The graph the engine makes of `graph` with `rule` alone, or `None` if the rule changed
/// nothing (compared with what the engine makes of it without rules: it folds constants).
pub fn rewrite_alone(rule: &Rule, graph: &Graph) -> Result<Option<Graph>, RewriteError> {
    let opts = OptimizeOptions {
        iter_limit: 6,
        time_limit: Duration::from_secs(2),
        cost_model: Arc::new(PreferNew::of(graph)),
        ..OptimizeOptions::default()
    };
    let plain = optimize(graph, &[], &opts)?.graph;
    let rewritten = optimize(graph, &rewrites::<MxAnalysis>(std::slice::from_ref(rule)), &opts)?.graph;
    let changed = mxc_dialects::text::print(&plain) != mxc_dialects::text::print(&rewritten);
    Ok(changed.then_some(rewritten))
}

/// `graph` compiled for the `ref` target, or `None` if the target cannot compile it (an op
/// or element type it does not support).
pub fn compile_ref(graph: &Graph) -> Option<Executable> {
    let compiled = mxc_codegen::compile(graph, Target::Ref, &CompileOptions::default()).ok()?;
    Executable::load(compiled.program, &compiled.library).ok()
}

/// The output `out` of `exe` on `inputs`.
pub fn run(exe: &Executable, inputs: &HashMap<String, Tensor>) -> Result<Tensor> {
    let outputs = exe.run(inputs).context("running on the ref target")?;
    outputs
        .into_iter()
        .find(|(name, _)| name == "out")
        .map(|(_, t)| t)
        .context("the program has no output `out`")
}

/// Where `right` differs from `left`, or `None` when they agree (exactly for integers and
/// bools, within RTOL and ATOL of the tensor's scale for floats, NaN matching NaN).
pub fn difference(left: &Tensor, right: &Tensor) -> Option<String> {
    if left.ty != right.ty {
        return Some(format!("the types differ: {} (left) and {} (right)", left.ty, right.ty));
    }
    let float = left.dtype().is_float();
    let scale = (0..left.len())
        .map(|i| left.get_f64(i).abs())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    (0..left.len()).find_map(|i| {
        let (a, b) = (left.get_f64(i), right.get_f64(i));
        let same = if float {
            a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= ATOL + RTOL * a.abs().max(scale)
        } else {
            left.get_i64(i) == right.get_i64(i)
        };
        (!same).then(|| format!("element {i}: {a} (left) and {b} (right)"))
    })
}
