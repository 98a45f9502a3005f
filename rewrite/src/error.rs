//! The errors of the rewrite engine: a graph it cannot take in, a rule set that merged values
//! that cannot be equal, and an extraction that did not give back a valid graph.

use mxc_dialects::IrError;

/// Why `optimize` (or a conversion step) failed.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    /// The graph given to the engine does not verify.
    #[error("the input graph is invalid: {0}")]
    InvalidInput(IrError),
    /// An op the e-graph cannot represent (e.g. a tensor-valued attribute on an op other than
    /// `mx.constant`).
    #[error("{op}: {message}")]
    Unsupported { op: String, message: String },
    /// The rules merged e-classes of different types or different constant values: some rule
    /// is unsound (or holds only under a condition it does not state).
    #[error("a rewrite merged values that cannot be equal: {}", .0.join("; "))]
    Unsound(Vec<String>),
    /// Extraction found no acyclic, well-typed choice for an output (an engine bug).
    #[error("extraction failed: {0}")]
    Extraction(String),
    /// The extracted graph does not verify (an engine bug).
    #[error("the extracted graph is invalid: {0}")]
    InvalidOutput(IrError),
}
