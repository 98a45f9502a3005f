//! Loading the kernels' shared object and resolving its entry points. The object's ELF header
//! and the tables it points to are checked against its size before the dynamic loader sees it,
//! and it is loaded from an anonymous in-memory file (Linux `memfd_create`), so nothing is left
//! on disk even when the process dies; elsewhere from a temporary file removed once loaded.

use crate::RunError;

/// The signature of every kernel entry: an array of buffer pointers, then the part `lo..hi`
/// of the kernel's parallel loop to run.
pub type KernelFn = unsafe extern "C" fn(*const *mut u8, i64, i64);

/// A loaded shared object.
pub struct Library {
    // declared first, so it is unloaded before `_file` closes
    lib: libloading::Library,
    /// The in-memory file it was loaded from, open while it is loaded: the loader knows an
    /// object by its path, `/proc/self/fd/N`, and a closed N reused for another object's file
    /// would make it hand back this one.
    _file: std::fs::File,
}

impl Library {
    pub fn from_bytes(bytes: &[u8]) -> Result<Library, RunError> {
        check_elf(bytes).map_err(|m| RunError::Load(format!("the kernels' shared object: {m}")))?;
        let (lib, file) = load(bytes)?;
        Ok(Library { lib, _file: file })
    }

    pub fn kernel(&self, symbol: &str) -> Result<KernelFn, RunError> {
        // SAFETY: every exported `*_entry` symbol has the KernelFn signature (codegen makes them).
        let f = unsafe { self.lib.get::<KernelFn>(symbol.as_bytes()) }
            .map_err(|e| RunError::Load(format!("kernel `{symbol}`: {e}")))?;
        Ok(*f)
    }
}

/// Loads the object from an anonymous file in memory; returns it and the file.
#[cfg(target_os = "linux")]
fn load(bytes: &[u8]) -> Result<(libloading::Library, std::fs::File), RunError> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    let err = |m: String| RunError::Load(format!("the kernels' shared object: {m}"));
    // SAFETY: the name is a NUL-terminated string; the call only creates a file descriptor.
    let fd = unsafe { libc::memfd_create(c"mxc-kernels".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(err(format!("memfd_create: {}", std::io::Error::last_os_error())));
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes)
        .map_err(|e| err(format!("writing it to memory: {e}")))?;
    let path = format!("/proc/self/fd/{fd}");
    // SAFETY: the object's header was checked; loading runs its initialisers, which is why a
    // `.mxr` is trusted like a shared library (docs/security.md).
    let lib = unsafe { libloading::Library::new(&path) }.map_err(|e| err(e.to_string()))?;
    Ok((lib, file))
}

/// Loads the object from a temporary file, removed as soon as it is mapped; returns it and the
/// (unlinked, still open) file.
#[cfg(not(target_os = "linux"))]
fn load(bytes: &[u8]) -> Result<(libloading::Library, std::fs::File), RunError> {
    use std::io::Write;
    let err = |m: String| RunError::Load(format!("the kernels' shared object: {m}"));
    let mut file = tempfile::Builder::new()
        .prefix("mxc-kernels-")
        .suffix(".so")
        .tempfile()
        .map_err(|e| err(format!("temporary file: {e}")))?;
    file.write_all(bytes).map_err(|e| err(format!("temporary file: {e}")))?;
    // SAFETY: as for the Linux loader above.
    let lib = unsafe { libloading::Library::new(file.path()) }.map_err(|e| err(e.to_string()))?;
    let file = file.reopen().map_err(|e| err(format!("temporary file: {e}")))?;
    Ok((lib, file))
}

/// ELF constants this check reads (the System V ABI's values).
pub(crate) const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
pub(crate) const CLASS_64: u8 = 2;
pub(crate) const LITTLE_ENDIAN: u8 = 1;
pub(crate) const SHARED_OBJECT: u16 = 3;
const HEADER_BYTES: usize = 64;
const PROGRAM_HEADER_BYTES: usize = 56;
const SECTION_HEADER_BYTES: usize = 64;

/// The machine this runtime's kernels are compiled for (`e_machine`).
#[cfg(target_arch = "x86_64")]
const MACHINE: u16 = 62;
#[cfg(target_arch = "aarch64")]
const MACHINE: u16 = 183;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const MACHINE: u16 = 0;

/// Checks that `bytes` are a 64-bit little-endian ELF shared object for this machine whose
/// program and section header tables, and every segment's bytes, lie inside it.
pub fn check_elf(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < HEADER_BYTES || &bytes[..4] != ELF_MAGIC {
        return Err("not an ELF file".into());
    }
    if bytes[4] != CLASS_64 || bytes[5] != LITTLE_ENDIAN {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    if u16_at(16) != SHARED_OBJECT {
        return Err(format!("ELF type {}, not a shared object", u16_at(16)));
    }
    if u16_at(18) != MACHINE {
        return Err(format!("made for ELF machine {}, not this one ({MACHINE})", u16_at(18)));
    }
    let table = |offset: u64, entry: u16, count: u16, want: usize, what: &str| -> Result<u64, String> {
        if count > 0 && entry as usize != want {
            return Err(format!("{what} entries of {entry} bytes, not {want}"));
        }
        let end = offset.checked_add(entry as u64 * count as u64);
        match end.is_some_and(|end| end <= bytes.len() as u64) {
            true => Ok(offset),
            false => Err(format!("the {what} table runs past the end of the file")),
        }
    };
    let programs = table(
        u64_at(32),
        u16_at(54),
        u16_at(56),
        PROGRAM_HEADER_BYTES,
        "program header",
    )?;
    table(
        u64_at(40),
        u16_at(58),
        u16_at(60),
        SECTION_HEADER_BYTES,
        "section header",
    )?;
    for i in 0..u16_at(56) as u64 {
        let at = (programs + i * PROGRAM_HEADER_BYTES as u64) as usize;
        let (offset, size) = (u64_at(at + 8), u64_at(at + 32));
        if offset.checked_add(size).is_none_or(|end| end > bytes.len() as u64) {
            return Err(format!("segment {i} runs past the end of the file"));
        }
    }
    Ok(())
}

/// The header of a shared object for this machine with no tables: the least `check_elf` passes.
#[cfg(test)]
pub(crate) fn header() -> Vec<u8> {
    let mut h = vec![0u8; HEADER_BYTES];
    h[..4].copy_from_slice(ELF_MAGIC);
    h[4] = CLASS_64;
    h[5] = LITTLE_ENDIAN;
    h[16..18].copy_from_slice(&SHARED_OBJECT.to_le_bytes());
    h[18..20].copy_from_slice(&MACHINE.to_le_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_that_lie_about_the_file_are_refused() {
        assert_eq!(check_elf(&header()), Ok(()));
        assert_eq!(check_elf(b"#!/bin/sh\n").unwrap_err(), "not an ELF file");
        let mut executable = header();
        executable[16] = 2;
        assert!(check_elf(&executable).unwrap_err().contains("not a shared object"));
        // one program header past the end
        let mut past = header();
        past[32..40].copy_from_slice(&64u64.to_le_bytes());
        past[54..56].copy_from_slice(&(PROGRAM_HEADER_BYTES as u16).to_le_bytes());
        past[56..58].copy_from_slice(&1u16.to_le_bytes());
        assert!(check_elf(&past).unwrap_err().contains("program header table runs past"));
        // a segment claiming 2^62 bytes
        past.resize(64 + PROGRAM_HEADER_BYTES, 0);
        past[64 + 32..64 + 40].copy_from_slice(&(1u64 << 62).to_le_bytes());
        assert!(check_elf(&past).unwrap_err().contains("segment 0 runs past"));
        let mut huge_offset = header();
        huge_offset[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        huge_offset[58..60].copy_from_slice(&(SECTION_HEADER_BYTES as u16).to_le_bytes());
        huge_offset[60..62].copy_from_slice(&1u16.to_le_bytes());
        assert!(check_elf(&huge_offset).unwrap_err().contains("section header table"));
    }
}
