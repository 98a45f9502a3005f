//! Lowering from `mx` to loops: `loops` lowers `mx` graphs to loop nests in MLIR
//! (scf/memref/arith/math) and on to LLVM IR. (ONNX import is its own crate, `mxc-onnx`, so
//! that importing a model links no MLIR.)

pub mod loops;
