//! The CPU a target's code is generated for: LLVM's name for it and the features the code may
//! use (`ref`: a generic x86-64 without extra features; `cpu`: this machine's), and the vector
//! unit the loop level writes `cpu` kernels for.

use crate::{OptLevel, Target};
use inkwell::targets::TargetMachine;
use mxc_lowering::loops::VectorIsa;

/// A CPU as LLVM names it, and its feature string (`+avx2,-avx512f,...`).
pub struct CodeCpu {
    pub name: String,
    pub features: String,
}

pub fn code_cpu(target: Target) -> CodeCpu {
    match target.spec().this_cpu {
        true => CodeCpu {
            name: TargetMachine::get_host_cpu_name().to_string(),
            features: TargetMachine::get_host_cpu_features().to_string(),
        },
        // gpu programs have no host code: the generic CPU stands for it
        false => CodeCpu {
            name: "x86-64".to_string(),
            features: String::new(),
        },
    }
}

/// The vector unit kernels are written for: none on `ref` (scalar code, the oracle), on `gpu`
/// (a thread per iteration) and at `-O0` (the fastest compile); the host's widest vectors on
/// `cpu`.
pub fn vector_isa(target: Target, opt: OptLevel) -> Option<VectorIsa> {
    let spec = target.spec();
    let scalar = !spec.this_cpu || (spec.opt_levels && opt == OptLevel::O0);
    (!scalar).then(|| VectorIsa::from_features(&code_cpu(target).features))
}
