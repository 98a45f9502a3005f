//! The mx IR: tensor types, constant tensors, attributes, the graph of SSA values and ops,
//! the `mx` dialect's type rules and verifier, and the textual form (print and parse back);
//! symbolic dimensions (`dim`), which types may carry, and a symbolic graph at given sizes
//! (`specialise`).

mod attr;
pub mod dim;
mod dtype;
pub mod eval;
mod graph;
pub mod interface;
pub mod items;
pub mod memory;
pub mod mx;
pub mod narrow;
mod op;
pub mod program;
pub mod specialise;
pub mod tensor;
pub mod text;
mod ty;
mod verify;

pub use attr::{Attr, Attrs};
pub use dtype::DType;
pub use graph::{Def, Graph, Op, Port, ValueId};
pub use op::{OpKind, Trait};
pub use tensor::{SharedBytes, Tensor};
pub use ty::{dim_text, max_tensor_bytes, strides_of, SizeError, TensorType, LIMIT_VAR};
pub use verify::verify;

/// Errors of IR construction, verification and parsing.
#[derive(Debug, thiserror::Error)]
pub enum IrError {
    #[error("{op}: {message}")]
    Op { op: String, message: String },
    #[error("invalid graph: {0}")]
    Graph(String),
    #[error("line {line}, column {column}: {message}")]
    Parse {
        line: usize,
        column: usize,
        message: String,
    },
    /// Text nested deeper than [`text::MAX_NESTING`], refused before it is parsed further.
    #[error("nesting deeper than {limit} at line {line}, column {column}")]
    TooDeep { line: usize, column: usize, limit: usize },
}
