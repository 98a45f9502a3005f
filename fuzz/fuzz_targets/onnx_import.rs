//! Fuzz target: bytes as a serialized ONNX `ModelProto`, through the importer that `mxc read`
//! and `mxc compile` use (decoding, op parsers, constant folding, shape inference) up to the
//! mx graph. Without a model folder, external data is refused, so nothing is read from disk.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mxc_onnx::{import_bytes, ImportOptions};

fuzz_target!(|data: &[u8]| {
    let _ = import_bytes(data, None, &ImportOptions::default());
});
