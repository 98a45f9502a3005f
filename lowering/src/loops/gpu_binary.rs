//! GPU code from a `gpu.module` (`gpu.rs`): for each AMD chip an HSA code object (an ELF
//! shared object, code object version 5) through ROCDL, with the ROCm device libraries (ocml
//! for `math`, ockl) linked in and ld.lld; for each NVIDIA architecture PTX through NVVM,
//! with libdevice linked in, which the CUDA driver compiles when it loads it. Math is
//! converted to ROCDL calls before the rest of the module, or the AMDGPU back end meets
//! intrinsics it cannot select (`math.tanh`). The module is lowered to the LLVM dialect and
//! serialised in two pipelines, so that the loop annotations (`llvm.rs`) reach LLVM.

use super::{LoopError, MlirToLlvm};
use melior::ir::attribute::{ArrayAttribute, AttributeLike};
use melior::ir::operation::OperationLike;
use melior::ir::{BlockLike, Module};
use mxc_dialects::program::{CodeFormat, CodeObject, GpuArch};
use std::path::{Path, PathBuf};

/// Where the files GPU code generation needs are (found by `mxc_codegen::gpu`).
#[derive(Clone, Debug, Default)]
pub struct GpuToolkit {
    /// A folder holding ROCm's device libraries `ocml.bc` and `ockl.bc`.
    pub rocm_device_libs: Option<PathBuf>,
    /// The ld.lld that links AMDGPU code objects.
    pub lld: Option<PathBuf>,
    /// NVIDIA's `libdevice.10.bc`.
    pub libdevice: Option<PathBuf>,
}

impl MlirToLlvm {
    /// Compiles a `gpu.module` (`gpu::gpu_module`) for each of `archs`.
    pub fn gpu_binaries(
        &self,
        mlir: &str,
        archs: &[GpuArch],
        toolkit: &GpuToolkit,
    ) -> Result<Vec<CodeObject>, LoopError> {
        let amd: Vec<&str> = archs
            .iter()
            .filter_map(|a| match a {
                GpuArch::Amd(chip) => Some(chip.as_str()),
                GpuArch::Nvidia(_) => None,
            })
            .collect();
        let mut objects = Vec::new();
        if !amd.is_empty() {
            let folder = RocmFolder::new(toolkit)?;
            let attach: Vec<String> = amd
                .iter()
                .map(|chip| format!("rocdl-attach-target{{chip={chip} abi=500 O=3}}"))
                .collect();
            let lowering = format!(
                "builtin.module({},convert-math-to-rocdl,gpu.module(convert-scf-to-cf,\
                 expand-strided-metadata,convert-gpu-to-rocdl{{runtime=HIP use-bare-ptr-memref-call-conv=1}},\
                 reconcile-unrealized-casts))",
                attach.join(",")
            );
            let binary = format!(
                "builtin.module(gpu-module-to-binary{{format=bin toolkit={}}})",
                folder.path.display()
            );
            let stages = [lowering.as_str(), &binary];
            let bins = self.run_pipeline(mlir, &stages, "compiling for AMD GPUs", binaries)?;
            objects.extend(amd.iter().zip(bins).map(|(chip, bytes)| CodeObject {
                arch: GpuArch::Amd(chip.to_string()),
                format: CodeFormat::Hsaco,
                bytes,
            }));
        }
        for arch in archs {
            let GpuArch::Nvidia(sm) = arch else { continue };
            let libdevice = toolkit.libdevice.as_deref().ok_or_else(|| {
                LoopError::GpuToolkit(format!("{sm}: NVIDIA's libdevice.10.bc was not found, and without it PTX calls math functions no one defines"))
            })?;
            let lowering = format!(
                "builtin.module(nvvm-attach-target{{chip={sm} O=3 l={}}},gpu.module(\
                 convert-scf-to-cf,expand-strided-metadata,convert-gpu-to-nvvm{{use-bare-ptr-memref-call-conv=1}},\
                 reconcile-unrealized-casts))",
                libdevice.display()
            );
            let stages = [lowering.as_str(), "builtin.module(gpu-module-to-binary{format=isa})"];
            let mut bins = self.run_pipeline(mlir, &stages, "compiling for NVIDIA GPUs", binaries)?;
            let bytes = bins.pop().filter(|_| bins.is_empty()).ok_or_else(|| LoopError::Mlir {
                stage: "compiling for NVIDIA GPUs",
                message: "not one PTX object".into(),
            })?;
            objects.push(CodeObject {
                arch: arch.clone(),
                format: CodeFormat::Ptx,
                bytes,
            });
        }
        Ok(objects)
    }
}

/// The objects of the `gpu.binary` ops of a compiled module, in the order of its targets.
fn binaries(module: &Module, fail: &dyn Fn(&'static str, &str) -> LoopError) -> Result<Vec<Vec<u8>>, LoopError> {
    let mut out = Vec::new();
    let mut op = module.body().first_operation();
    while let Some(o) = op {
        if o.name().as_string_ref().as_str() == Ok("gpu.binary") {
            let objects = o
                .attribute("objects")
                .ok()
                .and_then(|a| ArrayAttribute::try_from(a).ok())
                .ok_or_else(|| fail("reading the GPU binaries", "a gpu.binary without objects"))?;
            for i in 0..objects.len() {
                let object = objects
                    .element(i)
                    .map_err(|e| fail("reading the GPU binaries", &e.to_string()))?;
                // SAFETY: the attribute is alive with the module; the C API checks nothing, so
                // its kind is checked first, and the bytes are copied before the module goes.
                let bytes = unsafe {
                    let raw = object.to_raw();
                    if !mlir_sys::mlirAttributeIsAGPUObjectAttr(raw) {
                        return Err(fail("reading the GPU binaries", "an object that is not a #gpu.object"));
                    }
                    let s = mlir_sys::mlirGPUObjectAttrGetObject(raw);
                    std::slice::from_raw_parts(s.data.cast::<u8>(), s.length).to_vec()
                };
                out.push(bytes);
            }
        }
        op = o.next_in_block();
    }
    Ok(out)
}

/// A folder laid out as MLIR's ROCDL serialiser wants a ROCm install (`amdgcn/bitcode/` with
/// the device libraries, `llvm/bin/ld.lld`): links to where they are, removed when dropped.
struct RocmFolder {
    path: PathBuf,
}

impl RocmFolder {
    fn new(toolkit: &GpuToolkit) -> Result<RocmFolder, LoopError> {
        let missing = |what: &str| LoopError::GpuToolkit(format!("AMD GPUs: {what} was not found"));
        let libs = toolkit
            .rocm_device_libs
            .as_deref()
            .ok_or_else(|| missing("ROCm's device libraries (ocml.bc, ockl.bc)"))?;
        let lld = toolkit.lld.as_deref().ok_or_else(|| missing("ld.lld"))?;
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("mxc-rocm-{}-{n}", std::process::id()));
        RocmFolder::at(path, libs, lld)
    }

    /// The folder at `path`; one already there is a dead process's (the name holds the
    /// process id), left when it was killed, and is replaced.
    fn at(path: PathBuf, libs: &Path, lld: &Path) -> Result<RocmFolder, LoopError> {
        let folder = RocmFolder { path };
        let io = |e: std::io::Error| LoopError::GpuToolkit(format!("{}: {e}", folder.path.display()));
        if folder.path.exists() {
            std::fs::remove_dir_all(&folder.path).map_err(io)?;
        }
        std::fs::create_dir_all(folder.path.join("amdgcn")).map_err(io)?;
        std::fs::create_dir_all(folder.path.join("llvm/bin")).map_err(io)?;
        link(libs, &folder.path.join("amdgcn/bitcode")).map_err(io)?;
        link(lld, &folder.path.join("llvm/bin/ld.lld")).map_err(io)?;
        Ok(folder)
    }
}

fn link(original: &Path, at: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(std::fs::canonicalize(original)?, at)
}

impl Drop for RocmFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_left_by_a_killed_process_is_replaced() {
        let base = std::env::temp_dir().join(format!("mxc-toolkit-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let lld = base.join("ld.lld");
        std::fs::write(&lld, "").unwrap();
        let path = base.join("rocm");
        let stale = RocmFolder::at(path.clone(), &base, &lld).unwrap();
        // killed before it could clean up
        std::mem::forget(stale);
        let folder = RocmFolder::at(path.clone(), &base, &lld).unwrap();
        assert!(folder.path.join("llvm/bin/ld.lld").exists());
        drop(folder);
        assert!(!path.exists(), "removed when dropped");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
