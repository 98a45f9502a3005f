//! The targets, as data. A `TargetSpec` says what differs between targets and nothing else:
//! the rule files it rewrites with, whether it fuses, makes library calls and heeds the
//! optimisation level, its
//! cost model, the CPU its host code is for, and what its code is (a shared object for the
//! host, or code objects for GPUs). The rest of codegen reads the spec; a new target is a new
//! row here and, where its code is new, a new way to make it.

use std::fmt;
use std::str::FromStr;

/// Where compiled code runs and how it is made (`spec()` says how).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The oracle: every op by its plain definition, scalar code for a generic x86-64.
    Ref,
    /// The host CPU at -O3, after the rewrite engine (built-in and user rules, cpu cost model).
    Cpu,
    /// GPUs: the target-independent rules and fusion, each kernel a GPU kernel compiled for
    /// the architectures `CompileOptions::gpu_archs` names (`gpu.rs`).
    Gpu,
}

/// Which cost model extraction prices a target's kernels with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostKind {
    /// `LinearCost::reference()`: a flat price per FLOP and byte.
    Reference,
    /// `LinearCost::cpu_with_lanes`, for the vector unit of the CPU compiled for.
    Cpu,
    /// `LinearCost::gpu()`.
    Gpu,
}

/// What a target's compiled code is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeKind {
    /// A shared object of host kernels, one entry per step.
    SharedObject,
    /// An AMDGPU code object or PTX per GPU architecture, no host kernels.
    GpuCode,
}

/// Everything that differs between targets.
#[derive(Debug)]
pub struct TargetSpec {
    pub target: Target,
    pub name: &'static str,
    /// The built-in rule files it rewrites with, in order; `None` for a target that rewrites
    /// nothing and refuses user rules (the oracle).
    pub rule_files: Option<&'static [&'static str]>,
    /// Whether `-O0`/`-O1` change what it does (else it compiles as at `-O2`).
    pub opt_levels: bool,
    pub fuses: bool,
    /// Whether products and convolutions may be library calls (`mx.call`) where its cost
    /// model prices them cheaper than generated kernels.
    pub library_calls: bool,
    pub cost: CostKind,
    /// Whether its host code is for this machine's CPU (its features and vector unit) rather
    /// than a generic x86-64 with scalar kernels.
    pub this_cpu: bool,
    pub code: CodeKind,
}

/// Every built-in rule file, in the order the `cpu` target applies them.
const ALL_RULE_FILES: &[&str] = &[
    "algebra",
    "precision",
    "integer",
    "fold",
    "fusion",
    "layout",
    "packing",
    "attention",
    "winograd",
];

/// The rule files that hold on any machine: not the cpu's layouts, packed weights and
/// Winograd, which exist for its vector kernels.
const PORTABLE_RULE_FILES: &[&str] = &["algebra", "precision", "fold", "fusion", "attention"];

const SPECS: [TargetSpec; 3] = [
    TargetSpec {
        target: Target::Ref,
        name: "ref",
        rule_files: None,
        opt_levels: false,
        fuses: false,
        library_calls: false,
        cost: CostKind::Reference,
        this_cpu: false,
        code: CodeKind::SharedObject,
    },
    TargetSpec {
        target: Target::Cpu,
        name: "cpu",
        rule_files: Some(ALL_RULE_FILES),
        opt_levels: true,
        fuses: true,
        library_calls: false,
        cost: CostKind::Cpu,
        this_cpu: true,
        code: CodeKind::SharedObject,
    },
    TargetSpec {
        target: Target::Gpu,
        name: "gpu",
        rule_files: Some(PORTABLE_RULE_FILES),
        opt_levels: false,
        fuses: true,
        library_calls: true,
        cost: CostKind::Gpu,
        this_cpu: false,
        code: CodeKind::GpuCode,
    },
];

impl Target {
    pub const ALL: [Target; 3] = [Target::Ref, Target::Cpu, Target::Gpu];

    pub fn spec(self) -> &'static TargetSpec {
        let spec = &SPECS[self as usize];
        debug_assert_eq!(spec.target, self);
        spec
    }

    pub fn name(self) -> &'static str {
        self.spec().name
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
        let names: Vec<&str> = SPECS.iter().map(|t| t.name).collect();
        SPECS
            .iter()
            .find(|t| t.name == s)
            .map(|t| t.target)
            .ok_or_else(|| format!("unknown target `{s}` (known: {})", names.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mxc_rewrite::rules::BUILTIN_FILES;

    #[test]
    fn each_target_has_its_row_and_names_only_rule_files_that_exist() {
        for t in Target::ALL {
            assert_eq!(t.spec().target, t);
            assert_eq!(t.name().parse::<Target>(), Ok(t));
            for file in t.spec().rule_files.unwrap_or_default() {
                assert!(BUILTIN_FILES.iter().any(|(name, _, _)| name == file), "{t}: {file}");
            }
        }
        // the cpu target applies every built-in file
        assert_eq!(Target::Cpu.spec().rule_files.map(<[_]>::len), Some(BUILTIN_FILES.len()));
        assert_eq!(
            "tpu".parse::<Target>().unwrap_err(),
            "unknown target `tpu` (known: ref, cpu, gpu)"
        );
    }
}
