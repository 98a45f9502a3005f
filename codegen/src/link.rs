//! Linking relocatable objects into a shared object the runtime can `dlopen`. The objects'
//! entries have content-addressed names (see `cache.rs`); a linker script defines the program's
//! own entry names as aliases of them. Inputs get fixed names in a fresh folder and are passed
//! in a fixed order, so the same objects and aliases give the same bytes.

use crate::CodegenError;
use std::fmt::Write as _;
use std::process::Command;

/// Links `objects` (position-independent) with the system C compiler driver, against libm,
/// defining each `(name, target)` of `aliases` as another name of the symbol `target`.
pub fn shared_object(objects: &[Vec<u8>], aliases: &[(String, String)]) -> Result<Vec<u8>, CodegenError> {
    let fail = |e: std::io::Error| CodegenError::Link(format!("temporary folder: {e}"));
    let dir = tempfile::tempdir().map_err(fail)?;
    let mut inputs = Vec::with_capacity(objects.len() + 1);
    for (i, object) in objects.iter().enumerate() {
        let name = format!("{i}.o");
        std::fs::write(dir.path().join(&name), object).map_err(fail)?;
        inputs.push(name);
    }
    let mut script = String::new();
    for (name, target) in aliases {
        let _ = writeln!(script, "{name} = {target};");
    }
    std::fs::write(dir.path().join("aliases.ld"), script).map_err(fail)?;
    inputs.push("aliases.ld".to_string());
    let linker = std::env::var("MXC_LINKER").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&linker)
        .current_dir(dir.path())
        .args(["-shared", "-o", "kernels.so"])
        .args(&inputs)
        .arg("-lm")
        .output()
        .map_err(|e| CodegenError::Link(format!("cannot run `{linker}`: {e}")))?;
    if !out.status.success() {
        return Err(CodegenError::Link(format!(
            "`{linker}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    std::fs::read(dir.path().join("kernels.so")).map_err(fail)
}
