//! `mxc verify`: compile a model for a target and for `ref` (the unrewritten oracle), run both
//! on the same inputs and compare every output; when they differ, optionally find the op that
//! breaks them (`--bisect`) or the shortest failing prefix of the program (`--reduce`).

mod bisect;
mod reduce;

use crate::inputs;
use anyhow::{bail, Result};
use mxc_codegen::Target;
use mxc_driver::verify::Session;
use mxc_kernels::compare::Tolerance;
use mxc_onnx::import_file;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    model: PathBuf,
    /// The target checked against ref
    #[arg(long, default_value = "cpu")]
    target: Target,
    /// Relative tolerance: |target - ref| <= atol + rtol * |ref| elementwise
    #[arg(long, default_value_t = 1e-4)]
    rtol: f64,
    /// Absolute tolerance (see --rtol)
    #[arg(long, default_value_t = 1e-5)]
    atol: f64,
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
    let tolerance = Tolerance {
        rtol: args.rtol,
        atol: args.atol,
        rms: args.rms_tol,
    };
    for (flag, t) in [
        ("--rtol", Some(args.rtol)),
        ("--atol", Some(args.atol)),
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
