//! The CPU a target's code is generated for: LLVM's name for it and the features the code may
//! use (`ref`: a generic x86-64 without extra features; `cpu`: this machine's).

use crate::Target;
use inkwell::targets::TargetMachine;

/// A CPU as LLVM names it, and its feature string (`+avx2,-avx512f,...`).
pub struct CodeCpu {
    pub name: String,
    pub features: String,
}

pub fn code_cpu(target: Target) -> CodeCpu {
    match target {
        Target::Ref => CodeCpu {
            name: "x86-64".to_string(),
            features: String::new(),
        },
        Target::Cpu => CodeCpu {
            name: TargetMachine::get_host_cpu_name().to_string(),
            features: TargetMachine::get_host_cpu_features().to_string(),
        },
    }
}
