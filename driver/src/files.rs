//! Programs to and from files and memory: a model compiled now and loaded, an `.mxr` read
//! under a trust policy, and one written whole or not at all.

use crate::error::{Context, Error, Result};
use mxc_codegen::{CodeKind, CompileOptions, Compiled, OptLevel, Target};
use mxc_kernels::device::Gpu;
use mxc_kernels::mxr::{self, Contents};
use mxc_kernels::{Executable, SecretKey, TrustPolicy};
use mxc_onnx::{import_file, ImportOptions};
use std::path::{Path, PathBuf};

/// The options a compile takes when the caller says nothing: the target's built-in rewrites
/// and fusion at `-O2`, library calls where the target makes them, the GPUs' default
/// architectures, and the kernel cache in its usual place (`mxc_codegen::cache::default_dir`).
pub fn default_options() -> CompileOptions {
    CompileOptions {
        rules: Vec::new(),
        fusion: true,
        library_calls: true,
        cache: mxc_codegen::cache::default_dir(),
        stage: None,
        opt: OptLevel::O2,
        gpu_archs: mxc_dialects::program::GpuArch::defaults(),
        emulate_gpu_blocks: false,
        precision: Default::default(),
    }
}

/// The ONNX model `model` compiled now for `target` with the inputs `opts` says, and loaded.
pub fn compile_model(
    model: &Path,
    target: Target,
    opts: &ImportOptions,
    options: &CompileOptions,
) -> Result<Executable> {
    let graph = import_file(model, opts)?;
    let compiled =
        mxc_codegen::compile(&graph, target, options).context(|| format!("compiling {}", model.display()))?;
    load_compiled(compiled)
}

/// A program compiled now, loaded to run (a `gpu` program on this machine's first GPU).
pub fn load_compiled(compiled: Compiled) -> Result<Executable> {
    Ok(match compiled.target.spec().code {
        CodeKind::GpuCode => {
            let memory = compiled.program.memory_plan();
            Executable::load_gpu(compiled.program, memory, &compiled.code_objects, Gpu::find()?)?
        }
        CodeKind::SharedObject => Executable::load(compiled.program, &compiled.library)?,
    })
}

/// What the `.mxr` file `path` holds, if it is intact, trusted by `trust` and (when given)
/// for `target`.
pub fn read_mxr(path: &Path, target: Option<Target>, trust: &TrustPolicy) -> Result<Contents> {
    Ok(mxr::read_contents(path, target.map(Target::name), trust)?)
}

/// Writes `contents` to `path` as an `.mxr` file, signed with `key` when given; whole or not at
/// all (`write_atomically`).
pub fn write_mxr(path: &Path, contents: &Contents, key: Option<&SecretKey>) -> Result<()> {
    write_atomically(path, |w| mxr::write_contents(contents, key, w))
}

/// The trust policy for `.mxr` files: signed by one of the public keys in `keys`, else by one
/// of those `$MXC_TRUSTED_KEYS` lists (separated by `:`); with neither, any intact file.
pub fn trust_policy(keys: &[PathBuf]) -> Result<TrustPolicy> {
    let from_env: Vec<PathBuf> = match std::env::var_os("MXC_TRUSTED_KEYS") {
        Some(list) if keys.is_empty() => std::env::split_paths(&list)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        _ => Vec::new(),
    };
    let keys = if keys.is_empty() { &from_env } else { keys };
    Ok(TrustPolicy::from_files(keys)?)
}

/// Writes what `write` writes to a temporary file beside `path`, then renames it, so that a
/// failed write never leaves a half-written file behind (the temporary file is removed).
pub fn write_atomically(path: &Path, write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let written = std::fs::File::create(&tmp).and_then(|f| {
        use std::io::Write;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
        write(&mut out)?;
        out.flush()
    });
    let io = |path: &Path, source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&tmp, e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(path, e)
    })
}
