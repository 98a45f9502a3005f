//! ONNX import: a `ModelProto` becomes an mx `Graph`.
//!
//! The model is decoded with the generated protobuf types (`proto`), initializers and
//! `Constant` nodes become `mx.constant`s, and every node is handed to the parser registered
//! for its (domain, op type, opset) (`registry`, `ops/`). Parsers normalise ONNX attributes to
//! the explicit form the mx ops take, and ops on small constants are folded as they are built,
//! so the shape arithmetic exporters emit collapses to literals.

mod ctx;
pub mod data;
mod error;
mod external;
mod importer;
mod input_dims;
mod interface;
mod model;
mod node;
mod ops;
pub mod proto;
mod registry;
mod shape_values;
mod size_limits;
mod tensor;
#[cfg(test)]
mod testutil;
mod value;

pub use error::ImportError;
pub use input_dims::{model_input_dims, model_input_types};
pub use model::{import_bytes, import_file, model_input_kinds, read_tensor_file, ImportOptions};
pub use registry::{OpSupport, NEWEST_OPSET};
pub use size_limits::{narrowed, SizeLimit};

/// Every op the importer has a parser for, sorted by domain and op type.
pub fn supported_ops() -> Vec<OpSupport> {
    registry::Registry::standard().ops()
}
