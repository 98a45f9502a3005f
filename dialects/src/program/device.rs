//! Code for GPUs in a program: which GPU it is for (`GpuArch`) and the code of every kernel
//! for it (`CodeObject`: an AMDGPU code object or PTX), made by `mxc_lowering::loops` and
//! stored in the `.mxr`.

use std::fmt;
use std::str::FromStr;

/// Threads in a block of a kernel launch (one dimension) where each runs one iteration of the
/// kernel's parallel loop.
pub const THREADS_PER_BLOCK: u64 = 256;

/// The threads in each block of a kernel's launches: `THREADS_PER_BLOCK` when the iterations
/// of its parallel loop may run apart (a splittable kernel: one iteration per thread), else
/// one, which runs the whole range.
pub fn threads_per_block(splittable: bool) -> u64 {
    match splittable {
        true => THREADS_PER_BLOCK,
        false => 1,
    }
}

/// How a kernel call of parallel range `range` is launched: `(blocks, threads per block)`,
/// `ceil(range / 256)` blocks of 256 threads for a splittable kernel, a block of 256 per
/// iteration for one whose blocks compute an iteration each (`per_block`), else one thread.
pub fn launch_shape(range: u64, splittable: bool, per_block: bool) -> (u64, u64) {
    match (splittable, per_block) {
        (true, true) => (range, THREADS_PER_BLOCK),
        (true, false) => (range.div_ceil(THREADS_PER_BLOCK), THREADS_PER_BLOCK),
        (false, _) => (1, 1),
    }
}

/// A GPU to compile for: an AMD chip (`gfx90a`) or an NVIDIA architecture (`sm_90`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GpuArch {
    Amd(String),
    Nvidia(String),
}

/// What `--gpu-arch` is when not given: AMD's CDNA2 and CDNA3 data-centre chips and RDNA3,
/// and NVIDIA's Hopper.
pub const DEFAULT_GPU_ARCHS: [&str; 4] = ["gfx90a", "gfx942", "gfx1100", "sm_90"];

impl GpuArch {
    pub fn name(&self) -> &str {
        match self {
            GpuArch::Amd(n) | GpuArch::Nvidia(n) => n,
        }
    }

    pub fn defaults() -> Vec<GpuArch> {
        DEFAULT_GPU_ARCHS
            .iter()
            .map(|a| a.parse().expect("a valid arch"))
            .collect()
    }
}

impl fmt::Display for GpuArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GpuArch {
    type Err = String;
    fn from_str(s: &str) -> Result<GpuArch, String> {
        let digits = |t: &str, hex: bool| {
            !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()))
        };
        if let Some(rest) = s.strip_prefix("gfx").filter(|r| digits(r, true)) {
            return Ok(GpuArch::Amd(format!("gfx{}", rest.to_ascii_lowercase())));
        }
        if let Some(rest) = s.strip_prefix("sm_").filter(|r| digits(r.trim_end_matches('a'), false)) {
            return Ok(GpuArch::Nvidia(format!("sm_{rest}")));
        }
        Err(format!(
            "unknown GPU architecture `{s}` (an AMD chip such as gfx90a, or an NVIDIA architecture such as sm_90)"
        ))
    }
}

/// The form of a code object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeFormat {
    /// An HSA code object: an AMDGPU ELF shared object.
    Hsaco,
    /// PTX text, compiled by the CUDA driver at load.
    Ptx,
}

/// The code of every kernel for one GPU architecture.
#[derive(Clone, Debug, PartialEq)]
pub struct CodeObject {
    pub arch: GpuArch,
    pub format: CodeFormat,
    pub bytes: Vec<u8>,
}
