//! Calibration samples from a folder (`--calibration DIR`): one folder per sample, each with
//! `<input>.npy` for the program's inputs, the layout `mxc run --save-inputs` writes. The
//! samples are keyed by the files' stems, which `mxc_codegen::calibrate` matches to the inputs
//! (a name with characters a file name cannot hold is written with `_` for them).

use crate::error::{invalid, Error, Result};
use mxc_dialects::Tensor;
use std::collections::HashMap;
use std::path::Path;

/// The samples in `dir`, in the order of their folders' names.
pub fn read_samples(dir: &Path) -> Result<Vec<HashMap<String, Tensor>>> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| Error::Io { path, source }
    };
    let mut folders = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        if path.is_dir() {
            folders.push(path);
        }
    }
    folders.sort();
    if folders.is_empty() {
        return Err(invalid(format!(
            "calibration folder {} holds no sample folders (one folder per sample, each with <input>.npy, as `mxc run --save-inputs` writes)",
            dir.display()
        )));
    }
    let mut samples = Vec::with_capacity(folders.len());
    for folder in folders {
        let mut sample = HashMap::new();
        for entry in std::fs::read_dir(&folder).map_err(io(&folder))? {
            let path = entry.map_err(io(&folder))?.path();
            if path.extension().is_some_and(|e| e == "npy") {
                let stem = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                sample.insert(stem, mxc_kernels::npy::read(&path)?);
            }
        }
        if sample.is_empty() {
            return Err(invalid(format!(
                "calibration sample {} holds no .npy files",
                folder.display()
            )));
        }
        samples.push(sample);
    }
    Ok(samples)
}
