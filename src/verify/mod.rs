//! `mxc verify`: compile a model for a target and for `ref` (the unrewritten oracle), run both
//! on the same inputs and compare every output; when they differ, optionally find the op that
//! breaks them (`--bisect`) or the shortest failing prefix of the program (`--reduce`).

mod bisect;
mod reduce;

use crate::inputs;
use anyhow::{bail, Result};
use mxc_codegen::Target;
use mxc_dialects::DType;
use mxc_driver::verify::{self, Session};
use mxc_kernels::compare::Tolerance;
use mxc_onnx::import_file;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    model: PathBuf,
    /// The target checked against ref
    #[arg(long, default_value = "cpu")]
    target: Target,
    /// Relative tolerance: |target - ref| <= atol + rtol * |ref| + scale-tol * max|ref|
    /// elementwise (default 1e-4; for a program computing in f16 2e-2, in bf16 8e-2)
    #[arg(long)]
    rtol: Option<f64>,
    /// Absolute tolerance (see --rtol; default 1e-5)
    #[arg(long)]
    atol: Option<f64>,
    /// Tolerance relative to the output's largest magnitude (see --rtol; default 0; for a
    /// program computing in f16 2e-2, in bf16 8e-2)
    #[arg(long, value_name = "T")]
    scale_tol: Option<f64>,
    /// Also require rms(target - ref) / rms(ref) <= T per output
    #[arg(long, value_name = "T")]
    rms_tol: Option<f64>,
    /// When outputs differ, name the first op whose result diverges while its operands agree
    #[arg(long, conflicts_with = "reduce")]
    bisect: bool,
    /// When outputs differ, find the shortest prefix of the program that fails
    #[arg(long)]
    reduce: bool,
    /// With --reduce: write the shortest failing prefix as IR text to FILE
    #[arg(short = 'o', value_name = "FILE", requires = "reduce")]
    out: Option<PathBuf>,
    /// NAME=FILE, FILE a .npy or an ONNX TensorProto .pb; inputs not given get seeded random values
    #[arg(long = "input", value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// The seed of the random inputs (default: the one `mxc run` uses)
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    shapes: crate::Shapes,
    #[command(flatten)]
    rules: crate::RuleFiles,
}

/// Prints one line per output; an error (exit status 1) when one differs.
pub fn run(args: &Args) -> Result<()> {
    for (flag, t) in [
        ("--rtol", args.rtol),
        ("--atol", args.atol),
        ("--scale-tol", args.scale_tol),
        ("--rms-tol", args.rms_tol),
    ] {
        if t.is_some_and(|t| t.is_nan() || t < 0.0) {
            bail!("{flag} must be a number >= 0");
        }
    }
    let given = inputs::load(&args.inputs, &mut inputs::model_kinds(&args.model))?;
    let graph = import_file(
        &args.model,
        &inputs::with_model_dims(
            &args.model,
            inputs::specialize(args.shapes.import_options("verify")?, &given.tensors, &given.structures)?,
        )?,
    )?;
    let given = given.tensors;
    let seed = args.seed.unwrap_or(inputs::DEFAULT_SEED);
    let options = args.rules.compile_options()?;
    let tolerance = tolerance(args, verify::half_precision(&graph, &options)?);
    let mut s = Session::new(graph, args.target, options, tolerance, given, seed);
    let whole = s.graph.clone();
    let diffs = s.run(&whole, &args.model.display().to_string())?;
    for (name, d) in &diffs {
        println!("{name}: {}", d.describe());
    }
    let failing: Vec<usize> = (0..diffs.len()).filter(|i| !diffs[*i].1.ok).collect();
    let Some(&first) = failing.first() else {
        println!("all {} outputs of {} agree with ref", diffs.len(), args.target);
        return Ok(());
    };
    if args.bisect {
        let value = s.graph.outputs[first].value;
        bisect::run(&mut s, value, diffs[first].1.clone())?;
    }
    if args.reduce {
        reduce::run(&mut s, args.out.as_deref())?;
    }
    bail!(
        "{} of {} outputs of {} differ from ref (first: `{}`)",
        failing.len(),
        diffs.len(),
        args.target,
        diffs[first].0
    )
}

/// The tolerance `args` give, each one not given the default for a program that computes in
/// `half` (a half-precision type) or in f32. Rounding at every op of a half-precision program
/// makes the target and ref part by whole units of the type's last place wherever their sums'
/// orders differ, and a deep network carries those apart in proportion to its values' scale:
/// ResNet-50 with `--fp16` measured 0.0066 of its outputs' largest magnitude apart on cpu and
/// ref, with `--bf16` 0.026. The defaults are about 20 units of f16's last place (2e-2) and 10
/// of bf16's (8e-2), elementwise and of the largest magnitude (docs/verify.md).
fn tolerance(args: &Args, half: Option<DType>) -> Tolerance {
    let (rtol, atol, scale) = match half {
        Some(DType::F16) => (2e-2, 1e-5, 2e-2),
        Some(_) => (8e-2, 1e-5, 8e-2),
        None => (1e-4, 1e-5, 0.0),
    };
    Tolerance {
        rtol: args.rtol.unwrap_or(rtol),
        atol: args.atol.unwrap_or(atol),
        of_largest: args.scale_tol.unwrap_or(scale),
        rms: args.rms_tol,
    }
}
