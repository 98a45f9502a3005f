//! Finding a GPU runtime at run time, without linking one: HIP (`libamdhip64.so`, then the
//! `.so.7`, `.6`, `.5` of ROCm releases, under `$ROCM_PATH/lib`, `/opt/rocm/lib` and the
//! loader's path) for AMD GPUs, the CUDA driver (`libcuda.so.1`, the loader's path) for
//! NVIDIA's. A binary built here starts anywhere; a `gpu` program on a machine without either
//! is refused naming every library looked for.

use crate::RunError;
use mxc_dialects::program::{CodeFormat, CodeObject};
use std::path::PathBuf;

/// A GPU runtime library that was found and opened.
pub struct GpuRuntime {
    pub vendor: Vendor,
    pub path: String,
    _library: libloading::Library,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    Amd,
    Nvidia,
}

impl Vendor {
    /// The code format its GPUs run.
    pub fn format(self) -> CodeFormat {
        match self {
            Vendor::Amd => CodeFormat::Hsaco,
            Vendor::Nvidia => CodeFormat::Ptx,
        }
    }
}

/// Every library looked for, in order, with the vendor it serves.
fn candidates() -> Vec<(Vendor, String)> {
    let hip = [
        "libamdhip64.so",
        "libamdhip64.so.7",
        "libamdhip64.so.6",
        "libamdhip64.so.5",
    ];
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let folders: Vec<PathBuf> = [var("ROCM_PATH").map(|d| d.join("lib")), Some("/opt/rocm/lib".into())]
        .into_iter()
        .flatten()
        .collect();
    let mut out = Vec::new();
    for name in hip {
        out.extend(
            folders
                .iter()
                .map(|f| (Vendor::Amd, f.join(name).display().to_string())),
        );
        out.push((Vendor::Amd, name.to_string()));
    }
    out.push((Vendor::Nvidia, "libcuda.so.1".to_string()));
    out
}

impl GpuRuntime {
    /// The first runtime library that opens, or an error naming every one looked for.
    pub fn find() -> Result<GpuRuntime, RunError> {
        let candidates = candidates();
        for (vendor, path) in &candidates {
            // SAFETY: opening a GPU vendor's runtime runs its initialisers, as linking it would.
            if let Ok(library) = unsafe { libloading::Library::new(path) } {
                return Ok(GpuRuntime {
                    vendor: *vendor,
                    path: path.clone(),
                    _library: library,
                });
            }
        }
        let names: Vec<&str> = candidates.iter().map(|(_, p)| p.as_str()).collect();
        Err(RunError::NoGpu(format!(
            "no GPU runtime was found: looked for HIP and the CUDA driver as {}",
            names.join(", ")
        )))
    }

    /// The code object of `objects` this runtime's GPUs run.
    pub fn code_for<'a>(&self, objects: &'a [CodeObject]) -> Option<&'a CodeObject> {
        objects.iter().find(|o| o.format == self.vendor.format())
    }
}

/// The runtime found here and the code of `objects` it runs, or why there is none.
pub fn open_for(objects: &[CodeObject]) -> Result<(GpuRuntime, &CodeObject), RunError> {
    let runtime = GpuRuntime::find()?;
    match runtime.code_for(objects) {
        Some(code) => Ok((runtime, code)),
        None => {
            let archs: Vec<&str> = objects.iter().map(|o| o.arch.name()).collect();
            Err(RunError::NoGpu(format!(
                "{} was found, but the program holds code only for {} (compile it with --gpu-arch for this GPU)",
                runtime.path,
                archs.join(", ")
            )))
        }
    }
}
