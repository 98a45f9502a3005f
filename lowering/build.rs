//! Compiles the vendored `proto/onnx.proto` into Rust types with `protox` (a pure-Rust
//! protobuf compiler, so no `protoc` is needed) and `prost-build`.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let proto = "proto/onnx.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
