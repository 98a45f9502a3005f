//! The ONNX protobuf messages (`ModelProto`, `GraphProto`, `NodeProto`, `TensorProto`, ...),
//! generated at build time from the vendored `proto/onnx.proto` (package `onnx`).

#![allow(clippy::all, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
