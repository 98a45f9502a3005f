//! Verifying a target against the oracle: a graph, or a copy of it that outputs other values,
//! run on the target and on `ref` with the same inputs, and what they compute compared value
//! by value (`mxc verify`, whose `--bisect` and `--reduce` walk the graph with it).

use crate::error::{Context, Result};
use crate::fill;
use mxc_codegen::{CompileOptions, Target};
use mxc_dialects::{DType, Graph, Tensor, ValueId};
use mxc_kernels::compare::{compare, Diff, Tolerance};
use mxc_kernels::Executable;
use std::collections::HashMap;

/// At most this many bytes of observed values per compiled copy of the graph.
const BATCH_BYTES: usize = 256 << 20;

/// The narrowest floating-point type `graph` computes in once `options`' precision is applied:
/// `BF16` or `F16` where some value is one (bf16 first, the coarser), else `None`. The default
/// tolerances of `mxc verify` follow it (docs/verify.md).
pub fn half_precision(graph: &Graph, options: &CompileOptions) -> Result<Option<DType>> {
    let changed = mxc_codegen::with_precision(graph, &options.precision)?;
    let g = changed.as_ref().unwrap_or(graph);
    let types: Vec<DType> = g
        .ops
        .iter()
        .flat_map(|op| &op.results)
        .map(|&v| g.ty(v).dtype)
        .collect();
    Ok([DType::BF16, DType::F16].into_iter().find(|d| types.contains(d)))
}

/// The imported graph, the target and its options, the inputs both targets run on.
pub struct Session {
    pub graph: Graph,
    pub target: Target,
    pub options: CompileOptions,
    pub tolerance: Tolerance,
    inputs: HashMap<String, Tensor>,
    seed: u64,
}

impl Session {
    /// `given` inputs are used as they are; the others get seeded random values (`seed`, as
    /// `mxc run` makes them) once the first program tells their types.
    pub fn new(
        graph: Graph,
        target: Target,
        options: CompileOptions,
        tolerance: Tolerance,
        given: HashMap<String, Tensor>,
        seed: u64,
    ) -> Session {
        Session {
            graph,
            target,
            options,
            tolerance,
            inputs: given,
            seed,
        }
    }

    /// Runs `graph` (with the imported graph's inputs) on the target and on ref; per output,
    /// its name and how the target's value differs from ref's.
    pub fn run(&mut self, graph: &Graph, what: &str) -> Result<Vec<(String, Diff)>> {
        let exe = |target: Target, options: &CompileOptions| -> Result<Executable> {
            let compiled =
                mxc_codegen::compile(graph, target, options).context(|| format!("compiling {what} for {target}"))?;
            crate::load_compiled(compiled)
        };
        // ref computes the same precision (`--fp16`, `--bf16`): the comparison is of the
        // target's kernels, not of what rounding to half precision does to the model
        let reference = CompileOptions {
            precision: self.options.precision.clone(),
            ..CompileOptions::default()
        };
        let oracle = exe(Target::Ref, &reference)?;
        let tested = exe(self.target, &self.options)?;
        self.inputs = fill::complete_seeded(oracle.program(), std::mem::take(&mut self.inputs), self.seed)?;
        let expected = oracle.run(&self.inputs).context(|| format!("running {what} on ref"))?;
        let actual = tested
            .run(&self.inputs)
            .context(|| format!("running {what} on {}", self.target))?;
        Ok(actual
            .iter()
            .zip(&expected)
            .map(|((name, a), (_, b))| (name.clone(), compare(a, b, &self.tolerance)))
            .collect())
    }

    /// How each of `values` (of the imported graph) differs when a copy of the graph outputs
    /// them, in batches of at most `BATCH_BYTES`.
    pub fn observe(&mut self, values: &[ValueId]) -> Result<HashMap<ValueId, Diff>> {
        let mut out = HashMap::new();
        let mut rest = values;
        while !rest.is_empty() {
            let mut bytes = 0;
            let n = rest
                .iter()
                .take_while(|v| {
                    bytes += self.graph.ty(**v).num_bytes();
                    bytes <= BATCH_BYTES
                })
                .count()
                .max(1);
            let (batch, next) = rest.split_at(n);
            let copy = self.outputting(batch);
            let diffs = self.run(&copy, &format!("the graph outputting {} of its values", batch.len()))?;
            out.extend(batch.iter().copied().zip(diffs.into_iter().map(|(_, d)| d)));
            rest = next;
        }
        Ok(out)
    }

    /// A copy of the imported graph whose outputs are `values` (named as the IR text names
    /// them), without the ops they do not need.
    pub fn outputting(&self, values: &[ValueId]) -> Graph {
        let mut copy = self.graph.clone();
        copy.outputs.clear();
        for v in values {
            copy.add_output(&value_name(&self.graph, *v), *v);
        }
        copy.prune()
    }
}

/// A value's name in the IR text of `g` (`%argN` for inputs, `%N` for op results).
pub use mxc_dialects::text::value_name;

/// Op `op` of `g` as its line of the IR text, followed by its operands' types:
/// `%12 = mx.tanh %11 : tensor<1x8xf32> (operands: %11: tensor<1x8xf32>)`.
pub fn describe_op(g: &Graph, text: &str, op: usize) -> String {
    let o = &g.ops[op];
    let names: Vec<String> = o.results.iter().map(|r| value_name(g, *r)).collect();
    let prefix = format!("  {} = ", names.join(", "));
    // The text has the graph's header line, then one line per op (imported graphs have no
    // fused bodies, which would take more lines).
    let line = text
        .lines()
        .nth(op + 1)
        .filter(|l| l.starts_with(&prefix))
        .map(|l| l.trim().to_string())
        .unwrap_or_else(|| {
            let types: Vec<String> = o.results.iter().map(|r| g.ty(*r).to_string()).collect();
            let args: Vec<String> = o.operands.iter().map(|v| value_name(g, *v)).collect();
            format!(
                "{} = {} {} : {}",
                names.join(", "),
                o.kind,
                args.join(", "),
                types.join(", ")
            )
        });
    let operands: Vec<String> = o
        .operands
        .iter()
        .map(|v| format!("{}: {}", value_name(g, *v), g.ty(*v)))
        .collect();
    format!("{line} (operands: {})", operands.join(", "))
}
