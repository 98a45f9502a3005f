//! Targets and native code generation: an `mx` graph is lowered to loops (MLIR), translated
//! to LLVM IR, optimised and compiled for the host with inkwell, and linked into a shared
//! object that the runtime loads; next to it, the execution plan.

mod link;
mod llvm;
mod plan;

use mxc_dialects::{program::Program, Graph};
use std::fmt;
use std::str::FromStr;

/// Where compiled code runs and how it is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The oracle: every op by its plain definition, scalar code for a generic x86-64.
    Ref,
    /// The host CPU at -O3 (the same lowering as `ref` for now).
    Cpu,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Ref => "ref",
            Target::Cpu => "cpu",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ref" => Ok(Target::Ref),
            "cpu" => Ok(Target::Cpu),
            other => Err(format!("unknown target `{other}` (known: ref, cpu)")),
        }
    }
}

/// A compiled program: its plan and a shared object exporting one entry per step.
pub struct Compiled {
    pub target: Target,
    pub program: Program,
    pub library: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    #[error(transparent)]
    Loops(#[from] mxc_lowering::loops::LoopError),
    #[error("LLVM: {0}")]
    Llvm(String),
    #[error("linking the kernels: {0}")]
    Link(String),
}

/// Compiles a verified graph for `target`.
pub fn compile(graph: &Graph, target: Target) -> Result<Compiled, CodegenError> {
    let loops = mxc_lowering::loops::lower_graph(graph)?;
    let ir = mxc_lowering::loops::to_llvm_ir(&loops.mlir)?;
    let symbols: Vec<(&str, usize)> = loops
        .kernels
        .iter()
        .map(|k| (k.symbol.as_str(), k.args.len()))
        .collect();
    let object = llvm::compile_object(&ir, &symbols, target)?;
    let library = link::shared_object(&object)?;
    Ok(Compiled {
        target,
        program: plan::plan(graph, &loops.kernels),
        library,
    })
}
