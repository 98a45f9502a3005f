//! Compiles the vendored `proto/onnx.proto` (and `proto/onnx-data.proto`, the values of
//! sequences and optionals) into Rust types with `protox` (a pure-Rust
//! protobuf compiler, so no `protoc` is needed) and `prost-build`. `TensorProto.raw_data` is
//! `bytes::Bytes`, so that decoding a mapped file shares the weights instead of copying them.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let protos = ["proto/onnx.proto", "proto/onnx-data.proto"];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = protox::compile(protos, ["proto"])?;
    // a tensor's raw bytes decode as slices of the (memory-mapped) model file, not copies
    prost_build::Config::new()
        .bytes([".onnx.TensorProto.raw_data"])
        .compile_fds(descriptors)?;
    Ok(())
}
