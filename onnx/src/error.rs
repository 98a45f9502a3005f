//! The errors of ONNX import, each carrying what a one-line message needs: the file, the
//! node, the tensor or the input it is about.

use std::path::PathBuf;

/// Why a model (or a tensor file) could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{}: file not found", path.display())]
    NotFound { path: PathBuf },
    #[error("{}: cannot read: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{what}: not a valid ONNX protobuf: {source}")]
    Decode { what: String, source: prost::DecodeError },
    #[error("invalid model: {0}")]
    Model(String),
    #[error("node {node} ({op}, domain \"{domain}\", opset {opset}): no parser for this op")]
    UnsupportedOp {
        node: String,
        op: String,
        domain: String,
        opset: i64,
    },
    #[error(
        "the model imports opset {opset} of the default domain; mxc's parsers know the operators \
         up to opset {newest} (onnx 1.23): a newer version may change what an operator means"
    )]
    NewerOpset { opset: i64, newest: i64 },
    #[error("node {node} ({op}, domain \"{domain}\"): the model imports no opset for this domain")]
    NoOpset { node: String, op: String, domain: String },
    #[error("node {node} ({op}): {message}")]
    Node { node: String, op: String, message: String },
    #[error("input \"{input}\": {message}")]
    Input { input: String, message: String },
    #[error("tensor \"{tensor}\": {message}")]
    Tensor { tensor: String, message: String },
    #[error("tensor \"{tensor}\": external data \"{location}\": {message}")]
    ExternalData {
        tensor: String,
        location: String,
        message: String,
    },
    #[error("value \"{value}\": {message}")]
    Value { value: String, message: String },
    #[error(transparent)]
    Limit(#[from] mxc_dialects::SizeError),
    /// An import over symbolic sizes that failed where the model limits a symbol's size
    /// (`size_limits.rs`): the error, and the limits, for a caller to narrow the symbols to.
    #[error("{error} ({})", limited(.limits))]
    Limited {
        error: Box<ImportError>,
        limits: Vec<crate::SizeLimit>,
    },
}

/// What a failed import over symbolic sizes says of the model's limits.
fn limited(limits: &[crate::SizeLimit]) -> String {
    let said: Vec<String> = limits.iter().map(|l| l.to_string()).collect();
    format!(
        "the model limits its sizes: {}; give ranges within them",
        said.join(", ")
    )
}

/// How a node is named in messages: its name in quotes, or (for a node without a name) its
/// position and first output.
pub fn node_label(index: usize, name: &str, outputs: &[String]) -> String {
    if !name.is_empty() {
        format!("\"{name}\"")
    } else {
        match outputs.first() {
            Some(out) => format!("#{index} (output \"{out}\")"),
            None => format!("#{index}"),
        }
    }
}
