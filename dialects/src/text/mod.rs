//! The textual form of the mx IR. It prints every graph in a form that parses back to a graph
//! that prints identically:
//!
//! ```text
//! graph "main" (%arg0: tensor<1x4xf32> "x") {
//!   %0 = mx.constant {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<1x4xf32>} : tensor<1x4xf32>
//!   %1 = mx.add %arg0, %0 : tensor<1x4xf32>
//!   return "y" = %1
//! }
//! ```
//!
//! Constants of more than `INLINE_LIMIT` elements are printed as `dense_resource<rN>` with
//! their bytes in hex in a `resources { ... }` section after the graph.

pub(crate) mod lexer;
mod parse;
mod print;

pub use parse::parse;
pub use print::{print, value_name};

/// How deeply graphs may nest in the text: the top graph is one level, and each `mx.fused`
/// op's body one more. The parser recurses once per level, so text nested deeper is refused
/// with [`IrError::TooDeep`](crate::IrError::TooDeep) before it can exhaust the stack. (The
/// verifier allows no body inside a body; this limit keeps the parser from recursing into
/// text it will refuse anyway.) Nothing else in the grammar nests: types, attribute lists
/// and dictionaries are read in loops.
pub const MAX_NESTING: usize = 256;

/// Tensors with more elements than this are printed in the resources section.
pub const INLINE_LIMIT: usize = 16;
