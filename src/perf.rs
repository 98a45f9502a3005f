//! `mxc perf`: runs a compiled program repeatedly and reports the end-to-end median and
//! spread, the memory it holds, and a table of its kernels (median time, share of the kernels'
//! total, the rate of its arithmetic, the threads a call runs on (on a GPU, the blocks it is
//! launched on), the ops each fuses, read from
//! its symbol), slowest first. A kernel in a loop's body is timed over all its calls in a run;
//! its rate is not shown (how many times the body runs is the run's to decide).

use crate::report::size_text;
use mxc_dialects::program::{launch_shape, Step};
use mxc_dialects::Tensor;
use mxc_kernels::chunked::Runnable;
use mxc_kernels::{Executable, RunError};
use std::collections::HashMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// The report of `loaded`: `report`'s for one program; for a batch run in parts, the runs'
/// median and spread and which parts ran.
pub fn report_loaded(
    loaded: &Runnable,
    inputs: &HashMap<String, Tensor>,
    iterations: usize,
) -> Result<String, RunError> {
    let run = match loaded {
        Runnable::One(exe) => return report(exe, inputs, iterations),
        Runnable::Parts(run) => run,
    };
    run.run(inputs)?;
    let mut totals = Vec::with_capacity(iterations);
    for _ in 0..iterations.max(1) {
        let start = Instant::now();
        run.run(inputs)?;
        totals.push(start.elapsed());
    }
    totals.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (low, high) = (totals[totals.len() / 10], totals[(totals.len() * 9) / 10]);
    let threads = loaded.executable().parallelism().threads;
    let memory = run.memory_use();
    Ok(format!(
        "{} runs on {threads} thread{}: median {:.3} ms (10% {:.3} ms, 90% {:.3} ms)\n\
         ran {} (no program is compiled for this size; each part's kernels: mxc perf at its size)\n\
         memory: weights {} of the programs run, temporaries {} (the largest part's: one part runs at a time)\n",
        totals.len(),
        if threads == 1 { "" } else { "s" },
        ms(median(&mut totals)),
        ms(low),
        ms(high),
        run.describe(),
        size_text(memory.weights as f64),
        size_text(memory.arena as f64),
    ))
}

/// Runs `exe` `iterations` times (after one warm-up run) and formats the report.
pub fn report(exe: &Executable, inputs: &HashMap<String, Tensor>, iterations: usize) -> Result<String, RunError> {
    exe.run_timed(inputs)?;
    let mut totals = Vec::with_capacity(iterations);
    let mut per_step: Vec<Vec<Duration>> = vec![Vec::with_capacity(iterations); exe.program().steps.len()];
    for _ in 0..iterations.max(1) {
        let start = Instant::now();
        let (_, steps) = exe.run_timed(inputs)?;
        totals.push(start.elapsed());
        for (times, t) in per_step.iter_mut().zip(steps) {
            times.push(t);
        }
    }
    totals.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (low, high) = (totals[totals.len() / 10], totals[(totals.len() * 9) / 10]);
    let mut out = String::new();
    let parallelism = exe.parallelism();
    let (place, copied_to, column) = match exe.device() {
        Some((gpu, arch)) => (format!("{} ({arch} code)", gpu.name), "uploaded to the GPU", "blocks"),
        None => (
            format!(
                "{} thread{}",
                parallelism.threads,
                if parallelism.threads == 1 { "" } else { "s" }
            ),
            "copied to align them",
            "threads",
        ),
    };
    writeln!(
        out,
        "{} runs on {place}: median {:.3} ms (10% {:.3} ms, 90% {:.3} ms)",
        totals.len(),
        ms(median(&mut totals)),
        ms(low),
        ms(high)
    )
    .unwrap();
    let memory = exe.memory_use();
    let copied = match memory.weights_copied {
        0 => "read in place".to_string(),
        n => format!("{} of them {copied_to}", size_text(n as f64)),
    };
    writeln!(
        out,
        "memory: weights {} ({copied}), temporaries {}",
        size_text(memory.weights as f64),
        size_text(memory.arena as f64)
    )
    .unwrap();
    for route in exe.call_routes() {
        writeln!(out, "library calls: {route}").unwrap();
    }
    let as_run = exe.program_as_run();
    let in_loops = as_run.steps_in_loops();
    let mut kernels: Vec<(Duration, &Step, bool)> = per_step
        .iter_mut()
        .zip(&as_run.steps)
        .zip(in_loops)
        .map(|((times, step), in_loop)| (median(times), step, in_loop))
        .collect();
    let total: Duration = kernels.iter().map(|(t, ..)| *t).sum();
    kernels.sort_by_key(|(t, ..)| std::cmp::Reverse(*t));
    writeln!(out, "kernels: {} ({:.3} ms in all, medians)", kernels.len(), ms(total)).unwrap();
    writeln!(
        out,
        "{:>10}  {:>6}  {:>8}  {:>7}  kernel (its ops)",
        "ms", "share", "GFLOP/s", column
    )
    .unwrap();
    for (t, step, in_loop) in kernels {
        let share = 100.0 * t.as_secs_f64() / total.as_secs_f64().max(1e-12);
        let parts = match exe.device() {
            Some(_) => launch_shape(step.range, step.splittable, step.per_block).0,
            None => parallelism.parts(step),
        };
        let rate = match in_loop {
            true => "-".to_string(),
            false => format!("{:.1}", step.flops as f64 / t.as_secs_f64().max(1e-12) / 1e9),
        };
        writeln!(
            out,
            "{:>10.4}  {share:>5.1}%  {rate:>8}  {parts:>7}  {}",
            ms(t),
            ops_of(&step.symbol)
        )
        .unwrap();
    }
    Ok(out)
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// `k12 (conv_nhwc, add, relu)` from the symbol `k12_conv_nhwc_add_relu_entry`: the kernel's
/// number (in a region, `r1_k2`) and the ops its name lists (op names contain `_`, so the split
/// is by the known names).
fn ops_of(symbol: &str) -> String {
    let name = symbol
        .strip_suffix("_entry")
        .or_else(|| symbol.strip_suffix("_kernel"))
        .unwrap_or(symbol);
    let region = name.split_once("_k").filter(|(r, _)| {
        r.strip_prefix('r')
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
    });
    let (prefix, name) = match region {
        Some((r, kernel)) => (format!("{r}_k"), kernel),
        None => (String::new(), name),
    };
    let Some((number, mut rest)) = name.split_once('_') else {
        return format!("{prefix}{name}");
    };
    let number = format!("{prefix}{number}");
    let mut ops = Vec::new();
    while !rest.is_empty() {
        let next = mxc_dialects::OpKind::ALL
            .iter()
            .map(|k| k.name())
            .chain(["etc"])
            .filter(|n| rest == *n || rest.starts_with(&format!("{n}_")))
            .max_by_key(|n| n.len());
        match next {
            Some(op) => {
                ops.push(op);
                rest = rest[op.len()..].trim_start_matches('_');
            }
            None => {
                ops.push(rest);
                break;
            }
        }
    }
    format!("{number} ({})", ops.join(", "))
}

#[cfg(test)]
mod tests {
    use super::ops_of;

    #[test]
    fn a_symbol_names_its_kernel_and_ops() {
        assert_eq!(ops_of("k12_conv_nhwc_add_relu_entry"), "k12 (conv_nhwc, add, relu)");
        assert_eq!(ops_of("k3_reduce_mean_entry"), "k3 (reduce_mean)");
        assert_eq!(ops_of("r2_k4_matmul_add_entry"), "r2_k4 (matmul, add)");
        assert_eq!(
            ops_of("k9_matmul_add_gelu_cast_etc_entry"),
            "k9 (matmul, add, gelu, cast, etc)"
        );
    }
}
