//! `mxc`, the command line: read, compile and run ONNX models.

mod explain;
mod inputs;
mod json;
mod opt;
mod perf;
mod progress;
mod report;
mod rules_check;
mod show;
mod timings;
mod verify;

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};
use mxc_codegen::{CompileOptions, OptLevel, Target};
use mxc_dialects::{dim, Tensor};
use mxc_kernels::chunked::Runnable;
use mxc_kernels::mxr::{self, Contents};
use mxc_kernels::{Parallelism, SecretKey, TrustPolicy};
use mxc_onnx::{import_file, ImportOptions};
use mxc_rewrite::precision::{int8_kinds, op_kinds, Calibration, Int8, Quantize};
use mxc_rewrite::rules::load_rules;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "mxc",
    version,
    about = "An ONNX graph compiler: ONNX -> mx -> loops (MLIR) -> LLVM -> native kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a model as mx IR, as imported or as a target rewrites it.  Example: mxc read model.onnx --target cpu
    Read {
        model: PathBuf,
        /// Print the graph the target lowers (after its rewrites) instead of the imported one
        #[arg(long)]
        target: Option<Target>,
        /// text: mx IR; mlir: the loop level (MLIR that mlir-opt-22 reads); json; dot (Graphviz)
        #[arg(long, value_enum, default_value = "text")]
        format: show::Format,
        #[command(flatten)]
        shapes: Shapes,
        #[command(flatten)]
        rules: RuleFiles,
    },
    /// Rewrite a program in mx IR text as a target does, to try rules without a model (docs/rules.md).  Example: mxc opt tests/rules/fold-conv-batch-norm.mx --target cpu
    Opt {
        /// A graph in the mx IR's textual form (what `mxc read` prints); `-` reads standard input
        file: PathBuf,
        /// The target whose rewrites to run (ref rewrites nothing)
        #[arg(long, default_value = "cpu")]
        target: Target,
        /// text: mx IR; mlir: the loop level (MLIR that mlir-opt-22 reads); json; dot (Graphviz)
        #[arg(long, value_enum, default_value = "text")]
        format: show::Format,
        #[command(flatten)]
        rules: RuleFiles,
    },
    /// Run a model (.onnx, compiled now) or a compiled program (.mxr).  Example: mxc run model.onnx --input x=x.npy -o out/
    Run {
        #[command(flatten)]
        program: ProgramArgs,
        /// Write each output to DIR/<name>.npy instead of printing a summary
        #[arg(short = 'o', value_name = "DIR")]
        out: Option<PathBuf>,
        /// Also write the value of each of the program's inputs (given or generated) to
        /// DIR/<name>.npy, as `mxc-runner --inputs DIR` reads them
        #[arg(long, value_name = "DIR")]
        save_inputs: Option<PathBuf>,
    },
    /// Compile a model to a file.  Example: mxc compile model.onnx -o model.mxr
    Compile {
        model: PathBuf,
        #[arg(short = 'o', value_name = "OUT.mxr")]
        out: PathBuf,
        #[arg(long, default_value = "cpu")]
        target: Target,
        /// No progress line (it is only shown on a terminal)
        #[arg(short, long)]
        quiet: bool,
        #[command(flatten)]
        shapes: Shapes,
        #[command(flatten)]
        rules: RuleFiles,
        /// Sign the file with this secret key (made by `mxc keygen`; docs/security.md)
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
        /// Print the time and peak memory of each phase (import, rewriting, lowering, codegen,
        /// writing) when done
        #[arg(long)]
        timings: bool,
    },
    /// Make a key pair for signing compiled files: PREFIX.key (secret) and PREFIX.pub.  Example: mxc keygen release
    Keygen { prefix: PathBuf },
    /// Explain the target's rewrite, kernel by kernel (docs/explain.md).  Example: mxc explain model.onnx --dot model.dot
    Explain {
        model: PathBuf,
        #[arg(long, default_value = "cpu")]
        target: Target,
        #[command(flatten)]
        shapes: Shapes,
        #[command(flatten)]
        rules: RuleFiles,
        /// Also write the program as a Graphviz dot graph, one cluster per kernel
        #[arg(long, value_name = "FILE")]
        dot: Option<PathBuf>,
    },
    /// Compare a target's outputs with ref's on the same inputs; find the op that breaks them.  Example: mxc verify model.onnx --rules my.rules --bisect
    Verify(verify::Args),
    /// Time a model or compiled file: end-to-end median and spread, and each kernel.  Example: mxc perf model.mxr -n 50 --threads 2
    Perf {
        #[command(flatten)]
        program: ProgramArgs,
        /// Timed runs (after one warm-up run)
        #[arg(short = 'n', default_value_t = 20)]
        iterations: usize,
    },
    /// Inputs and outputs of a model or compiled file, with their types.  Example: mxc params model.mxr
    Params {
        model: PathBuf,
        #[command(flatten)]
        shapes: Shapes,
        #[command(flatten)]
        trust: Trust,
    },
    /// Work with rule files.  Example: mxc rules check my.rules
    Rules {
        #[command(subcommand)]
        command: RulesCommand,
    },
}

#[derive(Subcommand)]
enum RulesCommand {
    /// Type-check rule files and test each rule's soundness on generated instances (exit 1 if one is unsound)
    Check {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// What the rewrite engine does besides the target's built-in rules.
#[derive(clap::Args)]
struct RuleFiles {
    /// A rule file (see docs/rules.md), applied after the target's built-in rules; repeatable
    #[arg(long = "rules", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Do not fuse ops into kernels: every op its own kernel (to compare with the fused program)
    #[arg(long)]
    no_fusion: bool,
    /// Do not make products and convolutions library calls (gpu target: hipBLASLt, cuBLASLt,
    /// MIOpen): every kernel generated
    #[arg(long)]
    no_library_calls: bool,
    /// Compile every kernel afresh, neither reading nor writing the kernel cache
    /// ($MXC_CACHE_DIR, else $XDG_CACHE_HOME/mxc or ~/.cache/mxc)
    #[arg(long)]
    no_cache: bool,
    /// Optimisation level of the cpu target: 0 the user's rules alone, no fusion, LLVM -O0
    /// (fastest compile); 1 the built-in rewrites without fusion, LLVM -O1; 2 everything
    #[arg(short = 'O', value_name = "LEVEL", default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=2))]
    opt: u8,
    /// The GPUs the gpu target compiles for, comma-separated: AMD chips (gfx90a) and NVIDIA
    /// architectures (sm_90)
    #[arg(long, value_name = "ARCHS", value_delimiter = ',', default_values_t = mxc_dialects::program::GpuArch::defaults())]
    gpu_arch: Vec<mxc_dialects::program::GpuArch>,
    #[command(flatten)]
    precision: PrecisionArgs,
}

/// How the program's precision is changed before it is compiled (docs/quantisation.md).
#[derive(clap::Args)]
struct PrecisionArgs {
    /// Compute every op in f16 (each rounds its result; sums still run in f32); the
    /// program's inputs and outputs keep their types (MIGraphX's --fp16, quantize_fp16)
    #[arg(long, conflicts_with_all = ["bf16", "bf16_ops"])]
    fp16: bool,
    /// Compute only these ops in f16, comma-separated: mx's names (`mxc read` prints them)
    /// or MIGraphX's `dot`, `convolution`, `all` (MIGraphX's ins_names); implies --fp16
    #[arg(long, value_name = "OPS", value_delimiter = ',', conflicts_with_all = ["bf16", "bf16_ops"])]
    fp16_ops: Vec<String>,
    /// Compute every op in bf16, as --fp16 does in f16 (MIGraphX's --bf16, quantize_bf16)
    #[arg(long)]
    bf16: bool,
    /// Compute only these ops in bf16 (names as for --fp16-ops); implies --bf16
    #[arg(long, value_name = "OPS", value_delimiter = ',')]
    bf16_ops: Vec<String>,
    /// Compute f16 and bf16 values in f32, half precision kept only in the weights and the
    /// program's inputs and outputs (what onnxruntime's CPU provider does); without it each
    /// op's result is rounded to its type, as ONNX defines
    #[arg(long)]
    half_as_f32: bool,
    /// Take and give f32 where the program's inputs and outputs are 8-bit floats, converting at
    /// the boundary (MIGraphX's autocast_fp8)
    #[arg(long)]
    autocast_fp8: bool,
    /// Quantise convolutions and products to int8 (u8 activations per tensor, s8 weights per
    /// output channel) from ranges calibrated on --calibration's samples (MIGraphX's --int8,
    /// quantize_int8)
    #[arg(long, requires = "calibration", conflicts_with_all = ["fp16", "fp16_ops", "bf16", "bf16_ops"])]
    int8: bool,
    /// Quantise only these ops to int8, comma-separated: conv, matmul, gemm, or MIGraphX's
    /// `convolution`, `dot`; implies --int8
    #[arg(long, value_name = "OPS", value_delimiter = ',', requires = "calibration",
          conflicts_with_all = ["fp16", "fp16_ops", "bf16", "bf16_ops"])]
    int8_ops: Vec<String>,
    /// The samples --int8 calibrates on: one folder per sample, each with <input>.npy for the
    /// model's inputs (the layout `mxc run --save-inputs DIR` writes)
    #[arg(long, value_name = "DIR")]
    calibration: Option<PathBuf>,
}

impl PrecisionArgs {
    fn precision(&self) -> Result<mxc_rewrite::precision::Precision> {
        let quantize = |to, given: bool, names: &[String]| -> Result<Option<Quantize>> {
            if !given && names.is_empty() {
                return Ok(None);
            }
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let ops = match names.is_empty() {
                true => None,
                false => op_kinds(&names).map_err(|e| anyhow::anyhow!("--{}-ops: {e}", precision_flag(to)))?,
            };
            Ok(Some(Quantize { to, ops }))
        };
        let half = quantize(mxc_dialects::DType::F16, self.fp16, &self.fp16_ops)?;
        let bf16 = quantize(mxc_dialects::DType::BF16, self.bf16, &self.bf16_ops)?;
        Ok(mxc_rewrite::precision::Precision {
            quantize: half.or(bf16),
            half_as_f32: self.half_as_f32,
            autocast_fp8: self.autocast_fp8,
            int8: self.int8()?,
        })
    }

    /// What --int8, --int8-ops and --calibration ask for.
    fn int8(&self) -> Result<Option<Int8>> {
        if !self.int8 && self.int8_ops.is_empty() {
            if let Some(dir) = &self.calibration {
                anyhow::bail!(
                    "--calibration {}: calibration is for --int8 (or --int8-ops)",
                    dir.display()
                );
            }
            return Ok(None);
        }
        let names: Vec<&str> = self.int8_ops.iter().map(String::as_str).collect();
        let ops = match names.is_empty() {
            true => None,
            false => int8_kinds(&names).map_err(|e| anyhow::anyhow!("--int8-ops: {e}"))?,
        };
        let dir = self
            .calibration
            .as_ref()
            .expect("clap requires --calibration with --int8");
        let samples = mxc_driver::calibration::read_samples(dir)?;
        Ok(Some(Int8 {
            ops,
            calibration: Calibration::samples(samples),
        }))
    }
}

/// `fp16` or `bf16`, as the flags spell them.
fn precision_flag(to: mxc_dialects::DType) -> &'static str {
    match to {
        mxc_dialects::DType::BF16 => "bf16",
        _ => "fp16",
    }
}

impl RuleFiles {
    fn compile_options(&self) -> Result<CompileOptions> {
        let mut rules = Vec::new();
        for f in &self.files {
            rules.extend(load_rules(f)?);
        }
        Ok(CompileOptions {
            rules,
            fusion: !self.no_fusion,
            library_calls: !self.no_library_calls,
            cache: if self.no_cache {
                None
            } else {
                mxc_codegen::cache::default_dir()
            },
            stage: None,
            opt: match self.opt {
                0 => OptLevel::O0,
                1 => OptLevel::O1,
                _ => OptLevel::O2,
            },
            gpu_archs: self.gpu_arch.clone(),
            emulate_gpu_blocks: false,
            precision: self.precision.precision()?,
        })
    }
}

/// A program to run: a model compiled now or an `.mxr` file, and its inputs.
#[derive(clap::Args)]
struct ProgramArgs {
    model: PathBuf,
    /// The target to compile an .onnx model for (default cpu); for an .mxr, the target it must be for
    #[arg(long)]
    target: Option<Target>,
    /// NAME=FILE, FILE a .npy or an ONNX TensorProto .pb (SequenceProto, OptionalProto for a
    /// sequence or optional input); inputs not given get seeded random values
    #[arg(long = "input", value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// The seed of the random values of inputs not given
    #[arg(long, default_value_t = inputs::DEFAULT_SEED, conflicts_with_all = ["fill0", "fill1"])]
    seed: u64,
    /// Fill inputs not given with zeros
    #[arg(long, conflicts_with = "fill1")]
    fill0: bool,
    /// Fill inputs not given with ones
    #[arg(long)]
    fill1: bool,
    /// Threads that run the kernels (default: every core); results do not depend on it
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    threads: Option<u64>,
    /// The least estimated work (operations) worth a thread of its own in one kernel call;
    /// 0 splits every kernel that can be split
    #[arg(long, value_name = "OPS", default_value_t = mxc_kernels::DEFAULT_MIN_WORK)]
    split_work: u64,
    #[command(flatten)]
    shapes: Shapes,
    #[command(flatten)]
    rules: RuleFiles,
    #[command(flatten)]
    trust: Trust,
}

/// The trust policy for `.mxr` files (docs/security.md).
#[derive(clap::Args)]
struct Trust {
    /// Run only .mxr files signed by one of these public keys (repeatable; else the files in
    /// $MXC_TRUSTED_KEYS, separated by `:`); without any, any intact file runs
    #[arg(long = "trust", value_name = "KEYFILE")]
    keys: Vec<PathBuf>,
}

impl Trust {
    /// The policy for reading `model`: the keys' files are read only for an `.mxr` (a model
    /// compiled now runs no code from a file, so no policy applies to it).
    fn policy_for(&self, model: &Path) -> Result<TrustPolicy> {
        match is_mxr(model) {
            true => self.policy(),
            false => Ok(TrustPolicy::AnyIntact),
        }
    }

    fn policy(&self) -> Result<TrustPolicy> {
        Ok(mxc_driver::trust_policy(&self.keys)?)
    }
}

impl ProgramArgs {
    /// The program, loaded or compiled, and a value for each of its inputs; for a file of
    /// programs by size, the sizes it runs.
    fn load(&self) -> Result<(Runnable, HashMap<String, Tensor>, Option<dim::Sizes>)> {
        let (mut loaded, given, sizes, shapes) = if is_mxr(&self.model) {
            let contents = mxr::read_contents(&self.model, self.target.map(Target::name), &self.trust.policy()?)?;
            let interface = match &contents {
                Contents::One(m) => m.program.interface.clone(),
                Contents::BySize(s) => s.variants[0].mxr.program.interface.clone(),
            };
            let given = inputs::load(&self.inputs, &mut inputs::interface_kinds(&interface))?;
            inputs::check_structures(&given, &interface)?;
            // a file of programs by size runs the sizes of the values given, else of --shape
            let shapes = inputs::fixed_shapes(&inputs::parse_shapes(&self.shapes.shapes)?.0, "run")?;
            let shape_of = |name: &str| {
                let given = given.tensors.get(name).map(|t| t.shape().to_vec());
                given.or_else(|| shapes.get(name).cloned())
            };
            let (runnable, sizes) = Runnable::load(contents, &shape_of)?;
            (runnable, given, sizes, shapes)
        } else {
            let given = inputs::load(&self.inputs, &mut inputs::model_kinds(&self.model))?;
            let opts = inputs::specialize(self.shapes.import_options("run")?, &given.tensors, &given.structures)?;
            let opts = inputs::with_model_dims(&self.model, opts)?;
            let target = self.target.unwrap_or(Target::Cpu);
            let exe = mxc_driver::compile_model(&self.model, target, &opts, &self.rules.compile_options()?)?;
            (Runnable::One(Box::new(exe)), given, None, HashMap::new())
        };
        loaded.set_parallelism(Parallelism {
            threads: self.threads.map_or(Parallelism::all_cores().threads, |n| n as usize),
            min_work: self.split_work,
        })?;
        let fill = match (self.fill0, self.fill1) {
            (true, _) => inputs::Fill::Constant(0.0),
            (_, true) => inputs::Fill::Constant(1.0),
            _ => inputs::Fill::Seeded(self.seed),
        };
        // a batch in parts takes the whole batch's shapes; a program for every size, --shape's
        let mut fill_shapes = loaded.input_shapes();
        for (name, shape) in shapes {
            fill_shapes.entry(name).or_insert(shape);
        }
        let values = inputs::complete_with(loaded.executable().program(), &fill_shapes, given.tensors, fill)?;
        Ok((loaded, values, sizes))
    }
}

/// Shapes for inputs whose dimensions the model leaves open.
#[derive(clap::Args)]
struct Shapes {
    /// NAME=DIMS, e.g. input=1x3x224x224: the shape of an input with dynamic dimensions; for a
    /// sequence input its elements' shapes, s=[2x3,4x3] ([] when empty); o=none: an empty optional
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    shapes: Vec<String>,
}

impl Shapes {
    /// Import options for `mxc read`: fixed shapes as every command takes them, or, where a
    /// shape given is symbolic or none is given for a model with dynamic dimensions, every
    /// tensor input of the model with its symbolic dimensions (the model's `dim_param`s shared
    /// between inputs, each in `[1..4096]` unless given), imported as symbolic types.
    fn read_options(&self, model: &Path) -> Result<ImportOptions> {
        let (shapes, structures) = inputs::parse_shapes(&self.shapes)?;
        let given_symbolic = !shapes.values().flatten().all(|d| d.as_constant().is_some());
        let dynamic_model = || {
            shapes.is_empty()
                && structures.is_empty()
                && mxc_onnx::model_input_dims(model, &shapes).is_ok_and(|dims| !dims.is_fixed())
        };
        if !given_symbolic && !dynamic_model() {
            return Ok(inputs::with_model_dims(model, self.import_options("read")?)?);
        }
        let dims = mxc_onnx::model_input_dims(model, &shapes)?;
        Ok(mxc_driver::shapes::symbolic_import(&dims, structures))
    }

    /// Import options with the shapes given, which must be fixed for `command`.
    /// The fixed shapes given, for `command` (`with_model_dims` completes them for a model).
    fn import_options(&self, command: &str) -> Result<ImportOptions> {
        let (shapes, structures) = inputs::parse_shapes(&self.shapes)?;
        Ok(ImportOptions {
            input_shapes: inputs::fixed_shapes(&shapes, command)?,
            structures,
            ..ImportOptions::default()
        })
    }
}

fn main() -> ExitCode {
    mxc_kernels::end_quietly_on_closed_pipe();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Read {
            model,
            target,
            format,
            shapes,
            rules,
        } => {
            let options = shapes.read_options(&model)?;
            let by_default = shapes.shapes.is_empty() && !options.symbolic_shapes.is_empty();
            let graph = import_file(&model, &options).map_err(|e| match by_default {
                true => anyhow::anyhow!(
                    "{e}\n(the model's dynamic dimensions were imported as symbols in [1..{}]; give the inputs' \
                     shapes with --shape, fixed or as narrower symbols)",
                    mxc_dialects::dim::DEFAULT_MAX
                ),
                false => e.into(),
            })?;
            let options = rules.compile_options()?;
            let graph = mxc_codegen::with_precision(&graph, &options.precision)?.unwrap_or(graph);
            let shown = match target {
                Some(target) => mxc_codegen::rewrite_for(&graph, target, &options)?.0,
                None if options.rules.is_empty() => std::borrow::Cow::Borrowed(&graph),
                None => bail!("--rules needs --target: rules rewrite the graph a target lowers"),
            };
            print!("{}", show::render(&shown, format, target.unwrap_or(Target::Ref))?);
            Ok(())
        }
        Command::Opt {
            file,
            target,
            format,
            rules,
        } => {
            print!("{}", opt::run(&file, target, &rules.compile_options()?, format)?);
            Ok(())
        }
        Command::Perf { program, iterations } => {
            let (loaded, values, sizes) = program.load()?;
            if let (Some(sizes), Runnable::One(_)) = (&sizes, &loaded) {
                println!("the program for {}", dim::show_sizes(sizes));
            }
            print!("{}", perf::report_loaded(&loaded, &values, iterations)?);
            Ok(())
        }
        Command::Params { model, shapes, trust } => {
            print!(
                "{}",
                show::params(&model, &shapes.import_options("params")?, &trust.policy_for(&model)?)?
            );
            Ok(())
        }
        Command::Keygen { prefix } => {
            let key = SecretKey::generate()?;
            let (secret, public) = (prefix.with_extension("key"), prefix.with_extension("pub"));
            key.write(&secret)?;
            key.public().write(&public)?;
            println!(
                "secret key {} (keep it private), public key {} ({})",
                secret.display(),
                public.display(),
                key.public().fingerprint()
            );
            Ok(())
        }
        Command::Run {
            program,
            out,
            save_inputs,
        } => {
            let (exe, values, _) = program.load()?;
            if let Some(dir) = save_inputs {
                report::write_inputs(&dir, exe.executable().program(), &values)?;
            }
            let outputs = report::model_values(exe.run(&values)?, &exe.executable().program().interface)?;
            match out {
                Some(dir) => report::write_outputs(&dir, &outputs),
                None => {
                    report::print_summary(&outputs);
                    Ok(())
                }
            }
        }
        Command::Compile {
            model,
            out,
            target,
            quiet,
            shapes,
            rules,
            sign,
            timings,
        } => {
            let key = sign.as_deref().map(SecretKey::read).transpose()?;
            let (shapes, structures) = inputs::parse_shapes(&shapes.shapes)?;
            let timings = timings.then(|| std::sync::Arc::new(timings::Timings::new()));
            let contents = mxc_driver::compile::compile(mxc_driver::Request {
                model: &model,
                label: out.display().to_string(),
                target,
                shapes,
                structures,
                options: rules.compile_options()?,
                observer: &report::CompileLines::new(quiet, timings.clone()),
            })?;
            if let Some(t) = &timings {
                t.mark("write");
            }
            mxc_driver::write_mxr(&out, &contents, key.as_ref())?;
            if let Some(t) = &timings {
                t.print();
            }
            Ok(())
        }
        Command::Explain {
            model,
            target,
            shapes,
            rules,
            dot,
        } => {
            let options = rules.compile_options()?;
            explain::run(
                &model,
                target,
                &inputs::with_model_dims(&model, shapes.import_options("explain")?)?,
                &options,
                dot.as_deref(),
            )
        }
        Command::Verify(args) => verify::run(&args),
        Command::Rules {
            command: RulesCommand::Check { files },
        } => match rules_check::run(&files)? {
            0 => Ok(()),
            n => bail!("{n} of the rules checked {} unsound", if n == 1 { "is" } else { "are" }),
        },
    }
}

/// Whether `path` names a compiled file (by its extension, as every command decides).
fn is_mxr(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "mxr")
}
