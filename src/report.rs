//! Showing results: a one-line summary per output of a run, or `.npy` files in a folder; a
//! one-line summary of a compilation.

use anyhow::{Context, Result};
use mxc_dialects::{Graph, OpKind, Tensor};
use mxc_rewrite::cost::{graph_cost, ChannelsLast, FlopCost};
use mxc_rewrite::LinearCost;
use std::path::Path;

pub fn write_outputs(dir: &Path, outputs: &[(String, Tensor)]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, value) in outputs {
        mxc_kernels::npy::write(&dir.join(mxc_kernels::npy::file_name_for(name)), value)?;
    }
    Ok(())
}

pub fn print_summary(outputs: &[(String, Tensor)]) {
    for (name, value) in outputs {
        let shown = value.len().min(8);
        let first: Vec<String> = (0..shown)
            .map(|i| {
                if value.dtype().is_float() {
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
}

/// `OUT: N kernels for TARGET (M ops imported), X MB moved (Y imported); rewriting: ...` on
/// stderr.
pub fn print_compile_summary(out: &Path, imported: &Graph, compiled: &mxc_codegen::Compiled) {
    let ops = imported.ops.iter().filter(|op| op.kind != OpKind::Constant).count();
    let bytes = LinearCost {
        launch: 0.0,
        per_byte: 1.0,
        per_weight_byte: 1.0,
        per_flop: FlopCost::flat(0.0),
        channels_last: ChannelsLast::neutral(),
    };
    let mb = |g: &Graph| graph_cost(g, &bytes) / 1e6;
    let mut line = format!(
        "{}: {} kernels for {} ({ops} ops imported), {:.2} MB moved ({:.2} MB imported)",
        out.display(),
        compiled.program.steps.len(),
        compiled.target,
        mb(&compiled.graph),
        mb(imported)
    );
    let cache = &compiled.cache;
    if cache.enabled {
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
