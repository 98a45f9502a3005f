//! Which rewrites each target runs: `ref` none (it is the oracle: every op by its plain
//! definition), `cpu` the built-in rule files and the user's rules under the cpu cost model.

use crate::{CodegenError, Target};
use mxc_dialects::Graph;
use mxc_rewrite::rules::{builtin_rules, rewrites, Rule, BUILTIN_FILES};
use mxc_rewrite::{optimize, LinearCost, OptimizeOptions, Stats};
use std::borrow::Cow;
use std::sync::Arc;

/// The graph `target` lowers for `graph` with the user's rules, and what the rewrite engine
/// did to get it (`None` when the target rewrites nothing).
pub fn apply<'g>(
    graph: &'g Graph,
    target: Target,
    user: &[Rule],
) -> Result<(Cow<'g, Graph>, Option<Stats>), CodegenError> {
    match target {
        Target::Ref if user.is_empty() => Ok((Cow::Borrowed(graph), None)),
        Target::Ref => Err(CodegenError::RulesOnRef),
        Target::Cpu => {
            let mut rules = Vec::new();
            for (name, _, _) in BUILTIN_FILES {
                rules.extend(builtin_rules(name).expect("listed built-in rule file")?);
            }
            rules.extend(user.iter().cloned());
            let opts = OptimizeOptions {
                cost_model: Arc::new(LinearCost::cpu()),
                ..OptimizeOptions::default()
            };
            let optimized = optimize(graph, &rewrites(&rules), &opts)?;
            Ok((Cow::Owned(optimized.graph), Some(optimized.stats)))
        }
    }
}
