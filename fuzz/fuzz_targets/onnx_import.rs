//! Fuzz target: bytes as a serialized ONNX `ModelProto`, through the importer that `mxc read`
//! and `mxc compile` use (decoding, op parsers, constant folding, shape inference) up to the
//! mx graph. Without a model folder, external data is refused, so nothing is read from disk.
//!
//! This target links MLIR statically (through mxc-lowering), and one of MLIR's archives
//! (libMLIRMlirOptMain.a) defines a `main` that the linker may take instead of libFuzzer's:
//! the binary then runs `mlir-opt` on the fuzzer's arguments. So the target defines `main`
//! itself and hands over to libFuzzer's driver.
#![no_main]

use std::os::raw::{c_char, c_int};

use libfuzzer_sys::fuzz_target;
use mxc_lowering::onnx::{import_bytes, ImportOptions};

fuzz_target!(|data: &[u8]| {
    let _ = import_bytes(data, None, &ImportOptions::default());
});

extern "C" {
    fn LLVMFuzzerRunDriver(
        argc: *mut c_int,
        argv: *mut *mut *mut c_char,
        one_input: extern "C" fn(*const u8, usize) -> c_int,
    ) -> c_int;
}

/// libFuzzer's callback: libfuzzer-sys's wrapper (panics become crashes) around the target.
extern "C" fn one_input(data: *const u8, size: usize) -> c_int {
    // SAFETY: libFuzzer passes a valid buffer of `size` bytes.
    unsafe { libfuzzer_sys::test_input_wrap(data, size) }
}

#[no_mangle]
pub extern "C" fn main(mut argc: c_int, mut argv: *mut *mut c_char) -> c_int {
    // SAFETY: argc and argv are the process's, as libFuzzer's own `main` would pass them.
    unsafe { LLVMFuzzerRunDriver(&mut argc, &mut argv, one_input) }
}
