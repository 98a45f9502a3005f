//! Fuzz target, structure-aware: the fuzzer's bytes choose an ONNX model (`model_from` in
//! `onnx_graph/model.rs`): one to three nodes of ops the importer has parsers for, at an
//! opset their parsers cover, wired to graph inputs and initializers, with attributes and
//! shapes drawn from the values that break size arithmetic (zero, one, 2^31, 2^32, 10^9,
//! i64::MAX, negatives, NaN, infinities). The model is encoded and imported as `mxc read`
//! imports one, under a limit of 1 GiB per tensor: an allocation past libFuzzer's
//! `-malloc_limit_mb` (2 GiB in `scripts/fuzz.sh`) means a size was used unchecked.
//! With `MXC_FUZZ_SAVE_MODEL=file.onnx`, the model is also written there (to replay a
//! finding with `mxc read`, or keep it in `fuzz/regressions/onnx_import/`).
#![no_main]

#[path = "onnx_graph/model.rs"]
mod model;

use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use mxc_onnx::{import_bytes, ImportOptions};
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Ok(model) = model::model_from(&mut Unstructured::new(data)) else {
        return;
    };
    let options = ImportOptions {
        max_tensor_bytes: Some(1 << 30),
        ..Default::default()
    };
    let bytes = model.encode_to_vec();
    if let Some(path) = std::env::var_os("MXC_FUZZ_SAVE_MODEL") {
        std::fs::write(path, &bytes).expect("writing MXC_FUZZ_SAVE_MODEL");
    }
    let _ = import_bytes(&bytes, None, &options);
});
