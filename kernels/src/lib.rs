//! The mxc runtime: loads a compiled program's kernels (a shared object) and runs its plan:
//! allocates buffers, binds inputs, calls the kernels in order, returns the outputs. It links
//! neither LLVM nor MLIR. Also reads and writes `.npy` tensors and `.mxr` files.

pub mod amx;
mod buffer;
pub mod chunked;
pub mod compare;
mod control;
pub mod device;
mod executable;
pub mod gpu;
mod gpu_calls;
mod gpu_code;
mod host_code;
mod host_step;
mod library;
pub mod mxr;
pub mod npy;
pub mod signing;
mod sized_runs;
mod strings;
mod threads;

pub use executable::{Executable, MemoryUse, Outputs};
pub use gpu_calls::CallRoute;
pub use signing::{PublicKey, SecretKey, TrustPolicy};
pub use threads::{Parallelism, DEFAULT_MIN_WORK};

/// Makes a closed standard output end the process quietly, as it ends a C program
/// (`mxc read model.onnx | head`), rather than make the next `print!` panic: the Rust runtime
/// ignores SIGPIPE, this restores its default. For the command-line programs' `main`.
pub fn end_quietly_on_closed_pipe() {
    // SAFETY: setting a signal's disposition to its default installs no handler and touches no
    // memory; it is called at the start of `main`, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Errors of loading and running programs.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("loading the kernels: {0}")]
    Load(String),
    /// Input shapes that no program of the file is compiled for, or outside a symbol's range.
    #[error("{0}")]
    Size(String),
    #[error("input `{name}`: {message}")]
    Input { name: String, message: String },
    #[error("{0}")]
    Io(String),
    #[error("key: {0}")]
    Key(String),
    #[error("{what}: cannot allocate {bytes} bytes")]
    Memory { what: String, bytes: usize },
    /// A run that cannot go on (a loop ran more or fewer iterations than it was compiled for).
    #[error("{0}")]
    Run(String),
    /// A program for GPUs where none can run it.
    #[error("{0}")]
    NoGpu(String),
}
