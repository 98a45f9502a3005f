//! Fuzz target, structure-aware: the fuzzer's bytes choose an ONNX model (`model_from` in
//! `onnx_graph/model.rs`): one to three nodes of ops the importer has parsers for, at an
//! opset their parsers cover, wired to graph inputs and initializers, with attributes and
//! shapes drawn from the values that break size arithmetic (zero, one, 2^31, 2^32, 10^9,
//! i64::MAX, negatives, NaN, infinities). The model is encoded and imported as `mxc read`
//! imports one, under a limit of 1 GiB per tensor: an allocation past libFuzzer's
//! `-malloc_limit_mb` (2 GiB in `scripts/fuzz.sh`) means a size was used unchecked.
//! The model is imported a second time over symbolic sizes, as `mxc read` imports a model with
//! dynamic dimensions (`symbolic_inputs`): each `dim_param` a symbol, and each fixed size of
//! 2 or more a symbol around it where the fuzzer says so.
//! With `MXC_FUZZ_SAVE_MODEL=file.onnx`, the model is also written there (to replay a
//! finding with `mxc read`, or keep it in `fuzz/regressions/onnx_import/`).
#![no_main]

#[path = "onnx_graph/model.rs"]
mod model;

use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use mxc_dialects::dim::{Dim, Symbol};
use mxc_onnx::proto::{self, tensor_shape_proto::dimension};
use mxc_onnx::{import_bytes, ImportOptions};
use prost::Message;
use std::collections::HashMap;

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
    let symbolic = ImportOptions {
        symbolic_shapes: symbolic_inputs(&model, data.first().copied().unwrap_or(0)),
        ..options
    };
    if !symbolic.symbolic_shapes.is_empty() {
        let _ = import_bytes(&bytes, None, &symbolic);
    }
});

/// The graph inputs (not initializers) with declared shapes, their dimensions as symbols: a
/// `dim_param` as `n[1..64]{4}`, a fixed size `v` of 2 or more as `d<v>[1..2v]{v}` (so its
/// cost point is the fixed model's size, and equal sizes are one symbol) where the bit of
/// `pick` for its input and axis is set, any other as it is. Inputs with nothing symbolic are
/// left out.
fn symbolic_inputs(model: &proto::ModelProto, pick: u8) -> HashMap<String, Vec<Dim>> {
    let Some(graph) = &model.graph else {
        return HashMap::new();
    };
    let initializers: Vec<&str> = graph.initializer.iter().map(|t| t.name()).collect();
    let mut out = HashMap::new();
    for (k, vi) in graph.input.iter().enumerate() {
        let Some(proto::type_proto::Value::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
            continue;
        };
        let Some(shape) = &t.shape else { continue };
        if initializers.contains(&vi.name()) {
            continue;
        }
        let dims: Option<Vec<Dim>> = shape
            .dim
            .iter()
            .enumerate()
            .map(|(i, d)| match &d.value {
                Some(dimension::Value::DimParam(_)) => Some(symbol("n", 64, 4)),
                Some(dimension::Value::DimValue(v)) if *v >= 2 && *v <= 1 << 20 && pick >> ((k + i) % 8) & 1 == 1 => {
                    Some(symbol(&format!("d{v}"), 2 * *v as u64, *v as u64))
                }
                Some(dimension::Value::DimValue(v)) => u64::try_from(*v).ok().map(Dim::constant),
                None => None,
            })
            .collect();
        if let Some(dims) = dims.filter(|d| d.iter().any(|d| d.as_constant().is_none())) {
            out.insert(vi.name().to_string(), dims);
        }
    }
    out
}

fn symbol(name: &str, max: u64, optimal: u64) -> Dim {
    Dim::symbol(Symbol::new(name, vec![(1, max)], vec![optimal]).expect("a valid symbol"))
}
