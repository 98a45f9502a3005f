//! GPU code in a program: the checks that each code object (an AMDGPU ELF or PTX) holds the
//! kernels its plan launches, made where the code is compiled and again where it is loaded.

mod hsaco;
mod msgpack;
mod ptx;

pub use hsaco::HsacoSummary;

use mxc_dialects::program::{CodeFormat, CodeObject, GpuArch, Program};

/// A kernel a plan launches: its name and how many buffers it takes (`lo` and `hi` follow).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelExpect {
    pub name: String,
    pub buffers: usize,
}

/// The kernels `program` launches.
pub fn launched(program: &Program) -> Vec<KernelExpect> {
    program
        .kernels
        .iter()
        .map(|k| KernelExpect {
            name: k.symbol.clone(),
            buffers: k.arg_bytes.len(),
        })
        .collect()
}

/// Checks `object` against the kernels `program` launches; what an AMDGPU object holds.
pub fn check(object: &CodeObject, program: &Program) -> Result<Option<HsacoSummary>, String> {
    let expected = launched(program);
    let at = |e: String| format!("the code for {}: {e}", object.arch);
    match (&object.arch, object.format) {
        (GpuArch::Amd(chip), CodeFormat::Hsaco) => hsaco::check(&object.bytes, chip, &expected).map(Some).map_err(at),
        (GpuArch::Nvidia(sm), CodeFormat::Ptx) => ptx::check(&object.bytes, sm, &expected).map(|()| None).map_err(at),
        (arch, format) => Err(format!("{format:?} code for {arch}, which does not run it")),
    }
}
