//! Finding vendor libraries at run time, shared by the GPU runtimes (`mod.rs`) and the libraries
//! a GPU program calls (BLASLt, MIOpen: `blaslt.rs`, `miopen.rs`): the file a variable names,
//! else each name under each of the vendor's folders, then the name alone, which the loader
//! looks for on its own path; and the device memory a call may use as scratch.

use super::DevicePtr;
use std::path::PathBuf;

/// Device memory a library call may use as scratch; runs are serialised on one stream, so the
/// steps of a program share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Workspace {
    pub at: DevicePtr,
    pub bytes: usize,
}

/// A non-empty environment variable, as a path.
pub(crate) fn var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// ROCm's library folders: `$ROCM_PATH/lib`, `/opt/rocm/lib`.
pub(crate) fn rocm_folders() -> Vec<PathBuf> {
    [var("ROCM_PATH").map(|d| d.join("lib")), Some("/opt/rocm/lib".into())]
        .into_iter()
        .flatten()
        .collect()
}

/// The CUDA toolkit's library folders: `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`.
pub(crate) fn cuda_folders() -> Vec<PathBuf> {
    [
        var("CUDA_HOME").map(|d| d.join("lib64")),
        Some("/usr/local/cuda/lib64".into()),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Where to look for a library of one of `names`, in order: each name under each of `folders`,
/// then alone (the loader's own path).
pub(crate) fn places(folders: &[PathBuf], names: &[&str]) -> Vec<String> {
    let mut places = Vec::new();
    for name in names {
        places.extend(folders.iter().map(|f| f.join(name).display().to_string()));
        places.push(name.to_string());
    }
    places
}

/// Opens `what` (a library's name for messages): the file `$variable` names when it is set,
/// else the first of each of `names` under each of `folders` and then alone that opens. Returns
/// the library and its path as opened, or why none opened, naming every place looked.
pub(crate) fn open(
    what: &str,
    variable: &str,
    folders: &[PathBuf],
    names: &[&str],
) -> Result<(libloading::Library, String), String> {
    if let Some(path) = var(variable) {
        let path = path.display().to_string();
        // SAFETY: opening a vendor library runs its initialisers, as linking it would.
        return match unsafe { libloading::Library::new(&path) } {
            Ok(library) => Ok((library, path)),
            Err(e) => Err(format!(
                "no {what}: ${variable} names {path}, which does not open ({e})"
            )),
        };
    }
    let places = places(folders, names);
    for path in &places {
        // SAFETY: as above.
        if let Ok(library) = unsafe { libloading::Library::new(path) } {
            return Ok((library, path.clone()));
        }
    }
    Err(format!("no {what}: looked for {}", places.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_not_found_is_named_at_every_place_looked() {
        let folders = [PathBuf::from("/nonexistent/a"), PathBuf::from("/nonexistent/b")];
        let err = open(
            "libfoo",
            "MXC_TEST_VARIABLE_NEVER_SET",
            &folders,
            &["libfoo.so.2", "libfoo.so"],
        )
        .expect_err("nothing to open");
        assert_eq!(
            err,
            "no libfoo: looked for /nonexistent/a/libfoo.so.2, /nonexistent/b/libfoo.so.2, libfoo.so.2, \
             /nonexistent/a/libfoo.so, /nonexistent/b/libfoo.so, libfoo.so"
        );
    }
}
