//! Fuzz target: bytes as an `.mxr` file, through `mxr::decode` (header, integrity check,
//! metadata, plan) up to the point before its shared object would be loaded; nothing here
//! maps or `dlopen`s a library.
//!
//! The fuzzer cannot forge a checksum, so each input is also decoded "resealed": its length
//! field and FNV-1a trailer rewritten to match, so mutations reach the metadata and plan
//! parsing behind the check. Once `decode` skips the integrity check itself under
//! `cfg(fuzzing)`, the resealed pass is redundant (and harmless) and can go.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mxc_kernels::mxr;

/// Magic, version and length: the fixed head of the format.
const HEAD: usize = 16;

fuzz_target!(|data: &[u8]| {
    let _ = mxr::decode(data, "fuzz.mxr", None);
    if data.len() >= HEAD + 8 {
        let _ = mxr::decode(&reseal(data), "fuzz.mxr", None);
    }
});

/// `data` with its total length (bytes 8..16) and trailing FNV-1a checksum made right.
fn reseal(data: &[u8]) -> Vec<u8> {
    let mut bytes = data.to_vec();
    let len = bytes.len();
    bytes[8..16].copy_from_slice(&(len as u64).to_le_bytes());
    let sum = bytes[..len - 8].iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    bytes[len - 8..].copy_from_slice(&sum.to_le_bytes());
    bytes
}
