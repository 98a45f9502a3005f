//! Showing results: a one-line summary per output tensor of a run, or files in a folder (a
//! tensor as `.npy`, a sequence or optional as the ONNX `.pb` message that holds it); a
//! one-line summary of a compilation.

use crate::timings::Timings;
use anyhow::{bail, Context, Result};
use mxc_dialects::interface::Interface;
use mxc_dialects::program::Program;
use mxc_dialects::{Graph, OpKind, Tensor};
use mxc_onnx::data::{encode_value, DataValue};
use mxc_rewrite::cost::{graph_cost, ChannelsLast, FlopCost, LibraryCost};
use mxc_rewrite::LinearCost;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// A run's outputs as the model's values: the output tensors regrouped into the sequences and
/// optionals the interface says they carry.
pub fn model_values(outputs: Vec<(String, Tensor)>, interface: &Interface) -> Result<Vec<(String, DataValue)>> {
    if interface.outputs.is_empty() {
        return Ok(outputs.into_iter().map(|(n, t)| (n, DataValue::Tensor(t))).collect());
    }
    let mut by_port: std::collections::HashMap<String, Tensor> = outputs.into_iter().collect();
    interface
        .outputs
        .iter()
        .map(|v| {
            let mut tensors = v
                .structure
                .ports(&v.name)
                .into_iter()
                .filter_map(|p| by_port.remove(&p));
            match DataValue::from_ports(&v.structure, &mut tensors) {
                Some(value) => Ok((v.name.clone(), value)),
                None => bail!(
                    "output `{}`: the program gives too few tensors for {}",
                    v.name,
                    v.structure
                ),
            }
        })
        .collect()
}

/// Writes each output to `dir`: a tensor to `<name>.npy`, a sequence or optional to
/// `<name>.pb` (an ONNX `SequenceProto` or `OptionalProto`).
pub fn write_outputs(dir: &Path, outputs: &[(String, DataValue)]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, value) in outputs {
        let npy = dir.join(mxc_kernels::npy::file_name_for(name));
        match value {
            DataValue::Tensor(t) => mxc_kernels::npy::write(&npy, t)?,
            other => {
                let pb = npy.with_extension("pb");
                std::fs::write(&pb, encode_value(name, other)).with_context(|| format!("writing {}", pb.display()))?
            }
        }
    }
    Ok(())
}

/// Writes the value of each of `program`'s inputs to `dir/<name>.npy`.
pub fn write_inputs(dir: &Path, program: &Program, values: &HashMap<String, Tensor>) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for input in &program.inputs {
        if let Some(value) = values.get(&input.name) {
            mxc_kernels::npy::write(&dir.join(mxc_kernels::npy::file_name_for(&input.name)), value)?;
        }
    }
    Ok(())
}

pub fn print_summary(outputs: &[(String, DataValue)]) {
    for (name, value) in outputs {
        match value {
            DataValue::Tensor(t) => print_tensor(name, t),
            other => {
                println!("{name}: {}", other.structure());
                for (port, t) in other.ports(name) {
                    print_tensor(&format!("  {port}"), &t);
                }
            }
        }
    }
}

fn print_tensor(name: &str, value: &Tensor) {
    let shown = value.len().min(8);
    let strings = value.strings();
    let first: Vec<String> = (0..shown)
        .map(|i| {
            if let Some(strings) = &strings {
                format!("{:?}", strings[i])
            } else if value.dtype().is_float() {
                format!("{:.6}", value.get_f64(i))
            } else {
                value.get_i64(i).to_string()
            }
        })
        .collect();
    let more = if value.len() > shown { ", ..." } else { "" };
    println!(
        "{name}: {:?} {} [{}{more}]",
        value.shape(),
        value.dtype(),
        first.join(", ")
    );
}

/// `OUT: N kernels for TARGET (M ops imported), X MB moved (Y imported); rewriting: ...` on
/// stderr.
pub fn print_compile_summary(label: &str, imported: &Graph, compiled: &mxc_codegen::Compiled) {
    let ops = imported.ops.iter().filter(|op| op.kind != OpKind::Constant).count();
    let bytes = LinearCost {
        launch: 0.0,
        per_byte: 1.0,
        per_weight_byte: 1.0,
        per_flop: FlopCost::flat(0.0),
        channels_last: ChannelsLast::neutral(),
        library: Some(LibraryCost {
            call: 0.0,
            matmul: 0.0,
            conv: 0.0,
        }),
    };
    // `+ 0.0` makes the -0.0 of a graph without ops print as 0.00
    let mb = |g: &Graph| graph_cost(g, &bytes) / 1e6 + 0.0;
    let mut line = format!(
        "{label}: {} kernels for {} ({ops} ops imported), {:.2} MB moved ({:.2} MB imported)",
        compiled.program.steps.len(),
        compiled.target,
        mb(&compiled.graph),
        mb(imported)
    );
    let cache = &compiled.cache;
    if !compiled.code_objects.is_empty() {
        // GPU code is compiled whole, one object per architecture, and not cached
        let archs: Vec<String> = compiled.code_objects.iter().map(|o| o.arch.to_string()).collect();
        line += &format!(", code for {}", archs.join(", "));
    } else if cache.enabled {
        line += &format!(", kernel cache: {} hits, {} compiled", cache.hits, cache.misses);
    } else {
        line += &format!(", kernel cache: off, {} compiled", cache.misses);
    }
    if let Some(s) = &compiled.rewrite_stats {
        line += &format!(
            "; rewriting: {} iterations ({:?}), {} e-nodes, cost {:.0} -> {:.0}",
            s.iterations, s.stop_reason, s.enodes, s.cost_before, s.cost_after
        );
    }
    eprintln!("{line}");
}

/// A byte count for people: `4.30 MB`, `116.9 KB`.
pub fn size_text(bytes: f64) -> String {
    match bytes >= 1e6 {
        true => format!("{:.2} MB", bytes / 1e6),
        false => format!("{:.1} KB", bytes / 1e3),
    }
}

/// A warning on stderr for each GPU kernel that spills registers (it runs, slower).
pub fn warn_gpu_spills(compiled: &mxc_codegen::Compiled) {
    for o in &compiled.code_objects {
        if let Ok(Some(summary)) = mxc_kernels::gpu::check(o, &compiled.program) {
            for spill in summary.spills {
                eprintln!("warning: {}: {spill} spilled to scratch memory", o.arch);
            }
            for spill in summary.sgpr_spills {
                eprintln!("warning: {}: {spill} spilled (into vector registers' lanes)", o.arch);
            }
        }
    }
}

/// What `mxc compile` shows on stderr as it goes: the progress line on a terminal (unless
/// `-q`), a summary line for each program compiled, spill warnings and the file's notes; with
/// `--timings`, the phases' times are taken as the stages go.
pub struct CompileLines {
    progress: crate::progress::Progress,
    timings: Option<Arc<Timings>>,
}

impl CompileLines {
    pub fn new(quiet: bool, timings: Option<Arc<Timings>>) -> CompileLines {
        CompileLines {
            progress: crate::progress::Progress::new(quiet),
            timings,
        }
    }
}

impl mxc_driver::Observer for CompileLines {
    fn stages(&self) -> Option<mxc_rewrite::StageHook> {
        let (progress, timings) = (self.progress.hook(), self.timings.clone());
        if progress.is_none() && timings.is_none() {
            return None;
        }
        Some(mxc_rewrite::StageHook(Arc::new(move |stage| {
            mxc_rewrite::StageHook::start(progress.as_ref(), stage);
            if let Some(t) = &timings {
                t.mark(stage);
            }
        })))
    }

    fn ended(&self) {
        self.progress.finish();
    }

    fn compiled(&self, label: &str, imported: &Graph, compiled: &mxc_codegen::Compiled) {
        print_compile_summary(label, imported, compiled);
        warn_gpu_spills(compiled);
    }

    fn note(&self, text: &str) {
        eprintln!("{text}");
    }
}
