//! `mxc-runner`: runs a compiled `.mxr` file where it is to be deployed, with only the runtime
//! (`mxc_kernels`): no LLVM, no MLIR, no model. A `gpu` file runs on this machine's GPU
//! through HIP or the CUDA driver, found at run time, its library calls through the libraries
//! found then (or as their generated kernels: a line says which, and why); a `ref` or `cpu`
//! file on its CPU. It reads inputs from `.npy` files, writes the outputs as `.npy`, can check
//! them against expected `.npy` files, and times repeated runs (`scripts/gpu-check.sh` drives
//! it). A file of programs by size runs the program compiled for its inputs' shapes.

mod args;

use args::Args;
use mxc_dialects::dim::show_sizes;
use mxc_dialects::program::Program;
use mxc_kernels::chunked::Runnable;
use mxc_kernels::compare::{compare, Tolerance};
use mxc_kernels::mxr::{self, Contents};
use mxc_kernels::{npy, Parallelism, RunError, TrustPolicy};
use std::collections::HashMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    mxc_kernels::end_quietly_on_closed_pipe();
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {}: {e}", args.file.display());
            ExitCode::FAILURE
        }
    }
}

/// Runs the file as `args` ask; whether every output checked is close enough.
fn run(args: &Args) -> Result<bool, RunError> {
    let policy = TrustPolicy::from_files(&args.trusted_keys)?;
    let (mut program, inputs) = match mxr::read_contents(&args.file, None, &policy)? {
        one @ Contents::One(_) => {
            let (program, _) = Runnable::load(one, &|_| None)?;
            let inputs = read_inputs(program.executable().program(), args)?;
            (program, inputs)
        }
        Contents::BySize(sized) => {
            // every program takes the same inputs; their shapes pick the program
            let inputs = read_inputs(&sized.variants[0].mxr.program, args)?;
            let shape_of = |name: &str| inputs.get(name).map(|t| t.shape().to_vec());
            let (program, sizes) = Runnable::load(Contents::BySize(sized), &shape_of)?;
            match &program {
                Runnable::Parts(run) => println!("sizes: {}", run.describe()),
                Runnable::One(_) => println!("sizes: {}", show_sizes(&sizes.unwrap_or_default())),
            }
            (program, inputs)
        }
    };
    if let Some(threads) = args.threads {
        program.set_parallelism(Parallelism {
            threads,
            ..Parallelism::serial()
        })?;
    }
    let exe = program.executable();
    match exe.device() {
        Some((gpu, arch)) => println!("device: {} ({arch} code, through {})", gpu.name, gpu.library),
        None => println!("device: this CPU ({} threads)", exe.parallelism().threads),
    }
    for route in exe.call_routes() {
        println!("{route}");
    }
    let mut times = Vec::with_capacity(args.repeat);
    let mut outputs = Vec::new();
    for _ in 0..args.repeat.max(1) {
        let start = Instant::now();
        outputs = program.run(&inputs)?;
        times.push(start.elapsed());
    }
    if args.repeat > 1 {
        println!(
            "time: median {:.3} ms of {} runs (first {:.3} ms)",
            ms(median(&times)),
            times.len(),
            ms(times[0])
        );
    }
    let mut all_close = true;
    for (name, value) in &outputs {
        let file_name = npy::file_name_for(name);
        if let Some(dir) = &args.output_dir {
            npy::write(&dir.join(&file_name), value)?;
        }
        match &args.check {
            Some(dir) => {
                let expected = npy::read(&dir.join(&file_name))?;
                let tolerance = Tolerance {
                    rtol: args.rtol,
                    atol: args.atol,
                    of_largest: 0.0,
                    rms: None,
                };
                let diff = compare(value, &expected, &tolerance);
                all_close &= diff.ok;
                println!("output {name}: {} {}", value.ty, diff.describe());
            }
            None => println!("output {name}: {}", value.ty),
        }
    }
    Ok(all_close)
}

/// A value for each of the program's inputs: from `args.inputs` (`name → .npy`), else from
/// `args.inputs_dir`'s file of its name.
fn read_inputs(program: &Program, args: &Args) -> Result<HashMap<String, mxc_dialects::Tensor>, RunError> {
    let mut values = HashMap::new();
    for input in &program.inputs {
        let given = args
            .inputs
            .iter()
            .find(|(name, _)| name == &input.name)
            .map(|(_, p)| p.clone());
        let path = given.or_else(|| {
            let dir = args.inputs_dir.as_ref()?;
            Some(dir.join(npy::file_name_for(&input.name)))
        });
        let Some(path) = path else {
            return Err(RunError::Input {
                name: input.name.clone(),
                message: format!(
                    "no value given (expected {}; give it with --input {}=FILE.npy)",
                    program.buffers[input.buffer].ty, input.name
                ),
            });
        };
        let value = npy::read(&path).map_err(|e| RunError::Input {
            name: input.name.clone(),
            message: e.to_string(),
        })?;
        values.insert(input.name.clone(), value);
    }
    if let Some((name, _)) = args.inputs.iter().find(|(name, _)| !values.contains_key(name)) {
        let known: Vec<&str> = program.inputs.iter().map(|b| b.name.as_str()).collect();
        return Err(RunError::Input {
            name: name.clone(),
            message: format!("the program has no such input (its inputs: {})", known.join(", ")),
        });
    }
    Ok(values)
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
