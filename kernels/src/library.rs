//! Loading the kernels' shared object and resolving its entry points.

use crate::RunError;
use std::io::Write;

/// The signature of every kernel entry: an array of buffer pointers, then the part `lo..hi`
/// of the kernel's parallel loop to run.
pub type KernelFn = unsafe extern "C" fn(*const *mut u8, i64, i64);

/// A loaded shared object. The file it was loaded from is deleted once mapped.
pub struct Library {
    lib: libloading::Library,
}

impl Library {
    pub fn from_bytes(bytes: &[u8]) -> Result<Library, RunError> {
        let mut file = tempfile::Builder::new()
            .prefix("mxc-kernels-")
            .suffix(".so")
            .tempfile()
            .map_err(|e| RunError::Load(format!("temporary file: {e}")))?;
        file.write_all(bytes)
            .map_err(|e| RunError::Load(format!("temporary file: {e}")))?;
        // SAFETY: the object was produced by mxc's codegen; its initialisers are LLVM's only.
        let lib = unsafe { libloading::Library::new(file.path()) }.map_err(|e| RunError::Load(e.to_string()))?;
        Ok(Library { lib })
    }

    pub fn kernel(&self, symbol: &str) -> Result<KernelFn, RunError> {
        // SAFETY: every exported `*_entry` symbol has the KernelFn signature (codegen makes them).
        let f = unsafe { self.lib.get::<KernelFn>(symbol.as_bytes()) }
            .map_err(|e| RunError::Load(format!("kernel `{symbol}`: {e}")))?;
        Ok(*f)
    }
}
