//! The driver's errors: each crate's own, what a caller gave that does not fit, and the
//! context (a file, a size) an error happened in.

use mxc_codegen::CodegenError;
use mxc_dialects::dim::DimError;
use mxc_kernels::RunError;
use mxc_onnx::ImportError;

/// Anything the pipeline can refuse or fail at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Import(#[from] ImportError),
    #[error(transparent)]
    Codegen(#[from] CodegenError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Dim(#[from] DimError),
    #[error(transparent)]
    Rules(#[from] mxc_rewrite::rules::RuleError),
    #[error(transparent)]
    Rewrite(#[from] mxc_rewrite::RewriteError),
    #[error(transparent)]
    Size(#[from] mxc_dialects::SizeError),
    /// What the caller gave does not fit (a shape, an input, an option), said in full.
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// `error`, which happened while doing `context` (compiling a file, at some sizes). Its
    /// message holds `error`'s, so it is not also its `source()` (a chain printed in full, as
    /// `{:#}` does, would say it twice).
    #[error("{context}: {error}")]
    Context { context: String, error: Box<Error> },
}

/// A shorthand for the driver's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// `self`, said to have happened while doing `context`.
    pub fn context(self, context: impl Into<String>) -> Error {
        Error::Context {
            context: context.into(),
            error: Box::new(self),
        }
    }
}

/// Attaches a context to the error of a result.
pub trait Context<T> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| e.into().context(context()))
    }
}

/// An `Error::Invalid` from a message.
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::Invalid(message.into())
}
