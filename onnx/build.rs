//! Compiles the vendored `proto/onnx.proto` (and `proto/onnx-data.proto`, the values of
//! sequences and optionals) into Rust types with `protox` (a pure-Rust
//! protobuf compiler, so no `protoc` is needed) and `prost-build`.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let protos = ["proto/onnx.proto", "proto/onnx-data.proto"];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = protox::compile(protos, ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
