//! Which rewrites each target runs, as its `TargetSpec` says: `ref` none (it is the oracle:
//! every op by its plain definition), `cpu` the built-in rule files and the user's rules under
//! the cpu cost model, then fusion (`-O1`: no fusion; `-O0`: the user's rules alone); `gpu` the
//! rule files that hold on any machine and the user's under the gpu cost model, then fusion.

use crate::{CodegenError, CompileOptions, CostKind, OptLevel, Target};
use mxc_dialects::Graph;
use mxc_rewrite::rules::{builtin_rules, rewrites, Rule};
use mxc_rewrite::{optimize, CostModel, LinearCost, MxRewrite, OptimizeOptions, Stats};
use std::borrow::Cow;
use std::sync::Arc;

/// The graph `target` lowers for `graph` with the user's rules, and what the rewrite engine
/// did to get it (`None` when the target rewrites nothing).
pub fn apply<'g>(
    graph: &'g Graph,
    target: Target,
    options: &CompileOptions,
) -> Result<(Cow<'g, Graph>, Option<Stats>), CodegenError> {
    match plan(target, options)? {
        None => Ok((Cow::Borrowed(graph), None)),
        Some((rules, opts)) => {
            let rules = rewrites(&rules);
            let with_regions = regions_rewritten(graph, &rules, &opts)?;
            let optimized = optimize(with_regions.as_ref().unwrap_or(graph), &rules, &opts)?;
            Ok((Cow::Owned(optimized.graph), Some(optimized.stats)))
        }
    }
}

/// `graph` with the regions of its ops rewritten as `target` rewrites (what `apply` does
/// before it rewrites the graph itself), or `None` when it has no regions or the target
/// rewrites nothing.
pub fn apply_to_regions(
    graph: &Graph,
    target: Target,
    options: &CompileOptions,
) -> Result<Option<Graph>, CodegenError> {
    match plan(target, options)? {
        None => Ok(None),
        Some((rules, opts)) => regions_rewritten(graph, &rewrites(&rules), &opts),
    }
}

/// `graph` with each region rewritten on its own, the regions inside it first (the stages
/// are announced for the graph alone).
fn regions_rewritten(
    graph: &Graph,
    rules: &[MxRewrite],
    opts: &OptimizeOptions,
) -> Result<Option<Graph>, CodegenError> {
    let quiet = OptimizeOptions {
        stage: None,
        ..opts.clone()
    };
    graph.map_regions(&mut |region| {
        let with_regions = regions_rewritten(region, rules, &quiet)?;
        Ok(optimize(with_regions.as_ref().unwrap_or(region), rules, &quiet)?.graph)
    })
}

/// The rules (built-in, then the user's) and options `target` rewrites with, or `None` when it
/// rewrites nothing (`ref`, which refuses user rules; `cpu` at `-O0` without user rules).
pub fn plan(target: Target, options: &CompileOptions) -> Result<Option<(Vec<Rule>, OptimizeOptions)>, CodegenError> {
    let spec = target.spec();
    let user = &options.rules;
    let Some(files) = spec.rule_files else {
        return match user.is_empty() {
            true => Ok(None),
            false => Err(CodegenError::RulesOnRef),
        };
    };
    let level = if spec.opt_levels { options.opt } else { OptLevel::O2 };
    if level == OptLevel::O0 && user.is_empty() {
        return Ok(None);
    }
    let mut rules = Vec::new();
    if level != OptLevel::O0 {
        for name in files {
            rules.extend(builtin_rules(name).expect("a built-in rule file")?);
        }
    }
    rules.extend(user.iter().cloned());
    let opts = OptimizeOptions {
        cost_model: cost_model(target),
        fuse: spec.fuses && options.fusion && level == OptLevel::O2,
        library_calls: spec.library_calls && options.library_calls,
        stage: options.stage.clone(),
        ..OptimizeOptions::default()
    };
    Ok(Some((rules, opts)))
}

/// The cost model `target`'s kernels are estimated with (`cpu`: for the vectors of the
/// machine it compiles for).
pub fn cost_model(target: Target) -> Arc<dyn CostModel> {
    match target.spec().cost {
        CostKind::Reference => Arc::new(LinearCost::reference()),
        CostKind::Gpu => Arc::new(LinearCost::gpu()),
        CostKind::Cpu => {
            let isa = crate::host::vector_isa(target, OptLevel::O2);
            let mut cost = LinearCost::cpu_with_lanes(isa.map_or(1, |isa| isa.lanes));
            if isa.is_some_and(|isa| isa.amx_bf16) {
                cost = cost.with_amx_bf16();
            }
            if isa.is_some_and(|isa| isa.vnni) {
                cost = cost.with_vnni();
            }
            if isa.is_some_and(|isa| isa.amx_int8) {
                cost = cost.with_amx_int8();
            }
            Arc::new(cost)
        }
    }
}
