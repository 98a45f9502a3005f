//! Showing run results: a one-line summary per output, or `.npy` files in a folder.

use anyhow::{Context, Result};
use mxc_dialects::Tensor;
use std::path::Path;

/// `name` with every character other than ASCII letters, digits, `.`, `_` and `-` made `_`.
pub fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub fn write_outputs(dir: &Path, outputs: &[(String, Tensor)]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, value) in outputs {
        mxc_kernels::npy::write(&dir.join(format!("{}.npy", file_stem(name))), value)?;
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

#[cfg(test)]
mod tests {
    use super::file_stem;

    #[test]
    fn output_names_become_safe_file_names() {
        assert_eq!(
            file_stem("save_infer_model/scale_0.tmp_1"),
            "save_infer_model_scale_0.tmp_1"
        );
        assert_eq!(file_stem("a:b c-d"), "a_b_c-d");
    }
}
