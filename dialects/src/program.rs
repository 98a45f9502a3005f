//! A compiled program's execution plan: the buffers it uses and the kernel calls that run it,
//! in order. Codegen produces it next to the kernels' native code; the runtime executes it.

use crate::{Tensor, TensorType};

/// What a buffer holds before the program runs.
#[derive(Clone, Debug, PartialEq)]
pub enum BufferKind {
    /// Bound to graph input number `n` at run time.
    Input(usize),
    /// Weights and other compile-time data.
    Constant(Tensor),
    /// Written by a kernel before it is read.
    Temp,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub ty: TensorType,
    pub kind: BufferKind,
}

/// One kernel call: the exported symbol and the buffers it takes (operands, then results).
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub symbol: String,
    pub args: Vec<usize>,
}

/// A named graph input or output and its buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    pub name: String,
    pub buffer: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub buffers: Vec<Buffer>,
    pub steps: Vec<Step>,
    pub inputs: Vec<Binding>,
    pub outputs: Vec<Binding>,
}
