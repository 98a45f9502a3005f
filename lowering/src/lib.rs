//! Lowerings between levels: `onnx` imports an ONNX model into the `mx` dialect; `loops`
//! lowers `mx` graphs to loop nests in MLIR (scf/memref/arith/math) and on to LLVM IR.

pub mod loops;
pub mod onnx;
