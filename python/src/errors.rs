//! `mxc.Error`, the exception every failure of the library raises, carrying the message the
//! `mxc` command line prints for the same failure.

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::PyErr;

create_exception!(
    mxc,
    Error,
    PyRuntimeError,
    "A model, program or value mxc refuses, or a failure compiling or running: the message the mxc command line prints."
);

/// `e` raised as `mxc.Error`.
pub fn raise(e: impl std::fmt::Display) -> PyErr {
    Error::new_err(e.to_string())
}

/// `mxc.Error` with `message`.
pub fn refuse(message: impl Into<String>) -> PyErr {
    Error::new_err(message.into())
}
