//! Errors of rule files: where (file, line, column) and what went wrong.

use std::fmt;

/// A position in a rule file (1-based line and column).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// A rule file that cannot be read, does not parse, or holds a rule that does not type-check.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// The file cannot be read (the I/O error is part of the message, not a separate cause,
    /// so that it is shown once).
    #[error("{file}: {error}")]
    Io { file: String, error: std::io::Error },
    #[error("{file}:{line}:{column}: {message}")]
    Invalid {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// Brackets, `!`, calls or `&&`/`||` chains nested deeper than
    /// [`MAX_NESTING`](super::MAX_NESTING): refused before anything walks the rule, so that no
    /// input can exhaust the stack. The position is where the level past the limit starts.
    #[error("{file}: nesting deeper than {limit} at line {line}, column {column}")]
    TooDeep {
        file: String,
        line: usize,
        column: usize,
        limit: usize,
    },
}

impl RuleError {
    pub(crate) fn at(file: &str, pos: Pos, message: impl Into<String>) -> RuleError {
        RuleError::Invalid {
            file: file.to_string(),
            line: pos.line,
            column: pos.column,
            message: message.into(),
        }
    }

    /// The position of an `Invalid` or `TooDeep` error (`None` for I/O errors).
    pub fn pos(&self) -> Option<Pos> {
        match self {
            RuleError::Invalid { line, column, .. } | RuleError::TooDeep { line, column, .. } => Some(Pos {
                line: *line,
                column: *column,
            }),
            RuleError::Io { .. } => None,
        }
    }
}

/// An error found before the file name is attached (parser and checker work on text).
#[derive(Debug)]
pub(crate) struct Located {
    pub pos: Pos,
    pub message: String,
    /// `Some(limit)` when the text nests deeper than `limit` (a [`RuleError::TooDeep`]).
    pub too_deep: Option<usize>,
}

impl Located {
    pub fn new(pos: Pos, message: impl Into<String>) -> Located {
        Located {
            pos,
            message: message.into(),
            too_deep: None,
        }
    }

    /// Nesting deeper than `limit`, starting at `pos`.
    pub fn too_deep(pos: Pos, limit: usize) -> Located {
        Located {
            pos,
            message: format!("nesting deeper than {limit}"),
            too_deep: Some(limit),
        }
    }

    pub fn in_file(self, file: &str) -> RuleError {
        match self.too_deep {
            Some(limit) => RuleError::TooDeep {
                file: file.to_string(),
                line: self.pos.line,
                column: self.pos.column,
                limit,
            },
            None => RuleError::at(file, self.pos, self.message),
        }
    }
}
