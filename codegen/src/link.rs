//! Linking a relocatable object into a shared object the runtime can `dlopen`.

use crate::CodegenError;
use std::process::Command;

/// Links `object` (position-independent) with the system C compiler driver, against libm.
pub fn shared_object(object: &[u8]) -> Result<Vec<u8>, CodegenError> {
    let dir = tempfile::tempdir().map_err(|e| CodegenError::Link(format!("temporary folder: {e}")))?;
    let obj = dir.path().join("kernels.o");
    let so = dir.path().join("kernels.so");
    std::fs::write(&obj, object).map_err(|e| CodegenError::Link(format!("{}: {e}", obj.display())))?;
    let linker = std::env::var("MXC_LINKER").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&linker)
        .args(["-shared", "-o"])
        .arg(&so)
        .arg(&obj)
        .arg("-lm")
        .output()
        .map_err(|e| CodegenError::Link(format!("cannot run `{linker}`: {e}")))?;
    if !out.status.success() {
        return Err(CodegenError::Link(format!(
            "`{linker}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    std::fs::read(&so).map_err(|e| CodegenError::Link(format!("{}: {e}", so.display())))
}
