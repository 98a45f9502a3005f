//! Fuzz target: bytes as an `.mxr` file of either kind (one program, or programs by size),
//! through `mxr::decode_any` (header, metadata, signature, plan validation, the shared object's
//! ELF header, each program of a file of programs by size and its shared weights) up to the
//! point before a shared object would be loaded; nothing here maps or `dlopen`s a library.
//!
//! A fuzzing build of `mxr.rs` skips the SHA-256 digest check (the fuzzer cannot forge it), so
//! mutations reach everything behind it. Each input is also decoded with its length field made
//! right, which the fuzzer would otherwise rarely hit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mxc_kernels::{mxr, TrustPolicy};

/// Where the format's u64 length field lies.
const LENGTH: std::ops::Range<usize> = 8..16;

fuzz_target!(|data: &[u8]| {
    let _ = mxr::decode_any(data, "fuzz.mxr", None, &TrustPolicy::AnyIntact);
    if data.len() >= LENGTH.end {
        let mut sized = data.to_vec();
        sized[LENGTH].copy_from_slice(&(data.len() as u64).to_le_bytes());
        let _ = mxr::decode_any(&sized, "fuzz.mxr", None, &TrustPolicy::AnyIntact);
    }
});
