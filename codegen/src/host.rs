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
        true => {
            let features = usable_features(&TargetMachine::get_host_cpu_features().to_string());
            CodeCpu {
                name: TargetMachine::get_host_cpu_name().to_string(),
                features: without(&features, &std::env::var(FEATURES_OFF).unwrap_or_default()),
            }
        }
        // gpu programs have no host code: the generic CPU stands for it
        false => CodeCpu {
            name: "x86-64".to_string(),
            features: String::new(),
        },
    }
}

/// The environment variable naming host features (LLVM's names, comma-separated: `avx512vnni,
/// avxvnni`) the `cpu` target's code must not use, as if the machine lacked them: how the exact
/// fallbacks of a machine without them are run and tested on one that has them.
pub const FEATURES_OFF: &str = "MXC_CPU_FEATURES_OFF";

/// `features` with each of the comma-separated `off` turned off.
fn without(features: &str, off: &str) -> String {
    let off: Vec<&str> = off.split(',').map(str::trim).filter(|f| !f.is_empty()).collect();
    let turn = |f: &str| match f.strip_prefix('+') {
        Some(name) if off.contains(&name) => format!("-{name}"),
        _ => f.to_string(),
    };
    features.split(',').map(turn).collect::<Vec<_>>().join(",")
}

/// The host's features as LLVM lists them, less the AMX ones where this process may not use
/// the tiles (Linux asks a process to request them, and older kernels or a seccomp filter
/// refuse: `mxc_kernels::amx`): code for tiles it cannot use would fault.
fn usable_features(features: &str) -> String {
    if mxc_kernels::amx::tiles_usable() {
        return features.to_string();
    }
    without_amx(features)
}

/// `features` with every AMX feature turned off.
fn without_amx(features: &str) -> String {
    let off = |f: &str| match f.strip_prefix("+amx-") {
        Some(name) => format!("-amx-{name}"),
        None => f.to_string(),
    };
    features.split(',').map(off).collect::<Vec<_>>().join(",")
}

/// The vector unit kernels are written for: none on `ref` (scalar code, the oracle), on `gpu`
/// (a thread per iteration) and at `-O0` (the fastest compile); the host's widest vectors on
/// `cpu`.
pub fn vector_isa(target: Target, opt: OptLevel) -> Option<VectorIsa> {
    let spec = target.spec();
    let scalar = !spec.this_cpu || (spec.opt_levels && opt == OptLevel::O0);
    (!scalar).then(|| VectorIsa::from_features(&code_cpu(target).features))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amx_features_are_turned_off_and_the_others_kept() {
        let features = "+avx512f,+amx-tile,-avx512fp16,+amx-bf16,+amx-int8";
        assert_eq!(
            without_amx(features),
            "+avx512f,-amx-tile,-avx512fp16,-amx-bf16,-amx-int8"
        );
        assert!(!VectorIsa::from_features(&without_amx(features)).amx_bf16);
        assert!(VectorIsa::from_features(features).amx_bf16);
    }

    #[test]
    fn features_named_off_are_turned_off() {
        let features = "+avx512f,+avx512vnni,+avx512vl,+avxvnni";
        assert!(VectorIsa::from_features(features).vnni);
        let off = without(features, "avx512vnni, avxvnni");
        assert_eq!(off, "+avx512f,-avx512vnni,+avx512vl,-avxvnni");
        assert!(!VectorIsa::from_features(&off).vnni);
        assert_eq!(without(features, ""), features);
    }
}
