//! Showing run results: a one-line summary per output, or `.npy` files in a folder.

use anyhow::{Context, Result};
use mxc_dialects::Tensor;
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
