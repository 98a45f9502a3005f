//! The `gpu` target's code: the loop level's kernels in a `gpu.module` (one thread per
//! iteration of each kernel's parallel loop) compiled for every GPU asked for, with the files
//! that takes found here: ROCm's device libraries and ld.lld for AMD chips, libdevice for
//! NVIDIA. What is missing is named with every place it was looked for.

use crate::CodegenError;
use mxc_dialects::program::{CodeObject, GpuArch};
use mxc_lowering::loops::{gpu::gpu_module, GpuToolkit, LoopModule, MlirToLlvm};
use std::path::{Path, PathBuf};

/// Compiles `loops`' kernels for each of `archs`.
pub fn code_objects(loops: &LoopModule, archs: &[GpuArch]) -> Result<Vec<CodeObject>, CodegenError> {
    if archs.is_empty() {
        return Err(CodegenError::Gpu("no GPU architecture to compile for".into()));
    }
    let found = Found::search();
    let amd = archs.iter().any(|a| matches!(a, GpuArch::Amd(_)));
    let nvidia = archs.iter().find(|a| matches!(a, GpuArch::Nvidia(_)));
    if amd {
        found.rocm_device_libs.require(
            "ROCm's device libraries (ocml.bc, ockl.bc)",
            "install Debian's rocm-device-libs (scripts/setup.sh does) or set MXC_ROCM_DEVICE_LIBS to their folder",
        )?;
        found.lld.require("ld.lld", "install lld-22 or set MXC_LLD")?;
    }
    if let Some(arch) = nvidia {
        found.libdevice.require(
            &format!("NVIDIA's libdevice.10.bc (for {arch})"),
            "scripts/setup.sh puts it in ~/.cache/mxc/nvidia from the nvidia-cuda-nvcc-cu12 wheel, or set MXC_LIBDEVICE",
        )?;
    }
    let toolkit = GpuToolkit {
        rocm_device_libs: found.rocm_device_libs.path,
        lld: found.lld.path,
        libdevice: found.libdevice.path,
    };
    Ok(MlirToLlvm::new().gpu_binaries(&gpu_module(loops)?, archs, &toolkit)?)
}

/// Where `scripts/setup.sh` puts NVIDIA's libdevice and ptxas: `nvidia/` in the user's mxc
/// cache (`$XDG_CACHE_HOME/mxc`, else `~/.cache/mxc`; not the kernel cache's
/// `$MXC_CACHE_DIR`, which tests point elsewhere).
pub fn nvidia_folder() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let cache = var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))?;
    Some(cache.join("mxc").join("nvidia"))
}

/// A file looked for in a list of places: the first place that has it.
struct Search {
    path: Option<PathBuf>,
    places: Vec<PathBuf>,
}

impl Search {
    /// The first of `places` for which `has` holds.
    fn first(places: Vec<PathBuf>, has: impl Fn(&Path) -> bool) -> Search {
        Search {
            path: places.iter().find(|p| has(p)).cloned(),
            places,
        }
    }

    fn require(&self, what: &str, how: &str) -> Result<(), CodegenError> {
        if self.path.is_some() {
            return Ok(());
        }
        let places: Vec<String> = self.places.iter().map(|p| p.display().to_string()).collect();
        Err(CodegenError::Gpu(format!(
            "{what} not found; looked in {}: {how}",
            places.join(", ")
        )))
    }
}

/// Where each file the toolkit needs is.
struct Found {
    rocm_device_libs: Search,
    lld: Search,
    libdevice: Search,
}

impl Found {
    fn search() -> Found {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let under = |name: &str, rel: &str| var(name).map(|d| d.join(rel));
        let libs: Vec<PathBuf> = [
            var("MXC_ROCM_DEVICE_LIBS"),
            under("ROCM_PATH", "amdgcn/bitcode"),
            Some("/opt/rocm/amdgcn/bitcode".into()),
            Some("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode".into()),
            Some("/usr/lib/amdgcn/bitcode".into()),
        ]
        .into_iter()
        .flatten()
        .collect();
        let lld: Vec<PathBuf> = [
            var("MXC_LLD"),
            Some("/usr/lib/llvm-22/bin/ld.lld".into()),
            under("ROCM_PATH", "llvm/bin/ld.lld"),
            Some("/opt/rocm/llvm/bin/ld.lld".into()),
        ]
        .into_iter()
        .flatten()
        .collect();
        let libdevice: Vec<PathBuf> = [
            var("MXC_LIBDEVICE"),
            nvidia_folder().map(|d| d.join("libdevice.10.bc")),
            under("CUDA_HOME", "nvvm/libdevice/libdevice.10.bc"),
            Some("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc".into()),
            Some("/usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc".into()),
        ]
        .into_iter()
        .flatten()
        .collect();
        Found {
            rocm_device_libs: Search::first(libs, |d| d.join("ocml.bc").is_file() && d.join("ockl.bc").is_file()),
            lld: Search::first(lld, Path::is_file),
            libdevice: Search::first(libdevice, Path::is_file),
        }
    }
}
