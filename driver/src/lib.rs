//! The compiler as a library: the pipeline glue that the `mxc` command line, the Python
//! module and the C API are thin layers over. A model is imported (`mxc-onnx`), compiled for
//! a target (`mxc-codegen`: rewrite, lower, codegen) into what an `.mxr` file holds
//! (`compile`), written whole or not at all (`files`), loaded and run (`mxc-kernels`), with
//! the inputs a caller leaves out made up (`fill`); a file's programs kept loaded to run again
//! and again on inputs of any shape they take (`Runner`); a target verified against `ref`
//! (`verify`) and a rewrite explained (`explain`).

pub mod calibration;
pub mod compile;
mod error;
pub mod explain;
pub mod files;
pub mod fill;
pub mod ports;
mod runner;
pub mod shapes;
pub mod verify;

pub use compile::{compile_graph, Observer, Request, Silent};
pub use error::{Context, Error, Result};
pub use files::{compile_model, default_options, load_compiled, read_mxr, trust_policy, write_atomically, write_mxr};
pub use runner::Runner;
