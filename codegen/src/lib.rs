//! Targets and native code generation: an `mx` graph is rewritten as the target says
//! (`rewrites.rs`), lowered to loops (MLIR), translated to LLVM IR, optimised and compiled
//! for the host with inkwell, and linked into a shared object that the runtime loads; next to
//! it, the execution plan. Kernel objects are kept in a persistent cache (`cache.rs`) when
//! the options name one.

pub mod cache;
mod calibrate;
mod gpu;
mod host;
mod link;
mod llvm;
mod objects;
mod plan;
mod rewrites;
mod target;
mod workers;

pub use calibrate::calibrate;
pub use gpu::nvidia_folder;
pub use host::{code_cpu, vector_isa, CodeCpu};
pub use objects::CacheStats;
pub use rewrites::apply as rewrite_for;
pub use rewrites::apply_to_regions as rewrite_regions;
pub use rewrites::{cost_model, plan as rewrite_plan};
pub use target::{CodeKind, CostKind, Target, TargetSpec};

use mxc_dialects::program::{CodeObject, GpuArch, Program};
use mxc_dialects::Graph;

/// What to compile with besides the target's own choices.
#[derive(Clone)]
pub struct CompileOptions {
    /// User rules, applied after the target's built-in rules (not on `ref`, the oracle).
    pub rules: Vec<mxc_rewrite::rules::Rule>,
    /// Let extraction fuse ops into kernels (on targets that fuse: `cpu`); off, every op is
    /// its own kernel, which is what the fused program is measured against.
    pub fusion: bool,
    /// Let extraction make products and convolutions library calls (on targets that make
    /// them: `gpu`); off, every kernel is generated.
    pub library_calls: bool,
    /// The root of the persistent kernel cache (`cache::default_dir()` is where `mxc` keeps
    /// it), or `None` to compile every kernel. Off by default, so that a library user or a
    /// test writes nothing outside its own folders unless it asks to.
    pub cache: Option<std::path::PathBuf>,
    /// Told each stage as it starts: the rewrite engine's, then `lowering` and `codegen`.
    pub stage: Option<mxc_rewrite::StageHook>,
    /// How hard the `cpu` target works (`ref` is always the oracle).
    pub opt: OptLevel,
    /// The GPUs the `gpu` target compiles for (`GpuArch::defaults()` unless told).
    pub gpu_archs: Vec<GpuArch>,
    /// For `ref` only: build the kernels the gpu target runs a block of threads per iteration
    /// (a row, a tile of a product) as the host form of that GPU algorithm, with the gpu
    /// target's ranges (`loops::gpu::emulate_blocks_on_host`), so that the GPU's algorithm
    /// runs, and is tested, on the CPU.
    pub emulate_gpu_blocks: bool,
    /// How the program's precision is changed before anything else (`--fp16`, `--bf16`,
    /// `--half-as-f32`, `--autocast-fp8`): on every target, so that `ref` computes what the
    /// others do.
    pub precision: mxc_rewrite::precision::Precision,
}

/// Optimisation levels of the `cpu` target (`-O0`, `-O1`, `-O2`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OptLevel {
    /// No built-in rewrites (a user's rules still apply), no fusion, LLVM without optimisation:
    /// the fastest compile.
    O0,
    /// The built-in rewrites, no fusion, LLVM's O1.
    O1,
    /// The built-in rewrites, fusion, LLVM's O3 for this CPU.
    #[default]
    O2,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            rules: Vec::new(),
            fusion: true,
            library_calls: true,
            cache: None,
            stage: None,
            opt: OptLevel::O2,
            gpu_archs: GpuArch::defaults(),
            emulate_gpu_blocks: false,
            precision: Default::default(),
        }
    }
}

/// A compiled program: its plan and a shared object exporting one entry per step (for the
/// `gpu` target, an empty one and the kernels' code for each GPU).
pub struct Compiled {
    pub target: Target,
    pub program: Program,
    pub library: Vec<u8>,
    pub code_objects: Vec<CodeObject>,
    /// The graph the kernels were lowered from (after the target's rewrites).
    pub graph: Graph,
    /// What the rewrite engine did (`None` on `ref`).
    pub rewrite_stats: Option<mxc_rewrite::Stats>,
    /// Kernel objects taken from the persistent cache and compiled.
    pub cache: CacheStats,
    /// How its precision was changed (`Precision::describe`; empty for none).
    pub precision: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    #[error(transparent)]
    Loops(#[from] mxc_lowering::loops::LoopError),
    #[error("LLVM: {0}")]
    Llvm(String),
    #[error("linking the kernels: {0}")]
    Link(String),
    #[error("rewriting: {0}")]
    Rewrite(#[from] mxc_rewrite::RewriteError),
    #[error(transparent)]
    Rules(#[from] mxc_rewrite::rules::RuleError),
    #[error("the ref target is the unrewritten oracle; user rules apply to cpu")]
    RulesOnRef,
    #[error("calibrating for int8: {0}")]
    Calibration(String),
    #[error("changing the precision ({what}): {error}")]
    Precision { what: String, error: mxc_dialects::IrError },
    /// GPU code cannot be made here (a file it needs is missing, no architecture asked for).
    #[error("gpu: {0}")]
    Gpu(String),
}

/// Compiles a verified graph for `target`.
pub fn compile(graph: &Graph, target: Target, options: &CompileOptions) -> Result<Compiled, CodegenError> {
    let interface = graph.interface.clone();
    let changed = with_precision(graph, &options.precision)?;
    let graph = changed.as_ref().unwrap_or(graph);
    let (rewritten, rewrite_stats) = rewrites::apply(graph, target, options)?;
    let graph = &rewritten;
    if target.spec().code == CodeKind::GpuCode && !graph.symbols().is_empty() {
        return Err(CodegenError::Gpu(
            "the gpu target's kernels do not take sizes at run time yet: give every symbolic dimension a size (--shape)"
                .into(),
        ));
    }
    mxc_rewrite::StageHook::start(options.stage.as_ref(), "lowering");
    let mut loops = mxc_lowering::loops::lower_graph(graph, vector_isa(target, options.opt))?;
    let emulate = options.emulate_gpu_blocks && target == Target::Ref;
    if target.spec().code == CodeKind::GpuCode || emulate {
        mxc_lowering::loops::gpu::shape_blocks(graph, &mut loops);
    }
    if emulate {
        mxc_lowering::loops::gpu::emulate_blocks_on_host(&mut loops);
    }
    mxc_rewrite::StageHook::start(options.stage.as_ref(), "codegen");
    let ((library, cache), code_objects, symbol): (_, _, fn(&str) -> String) = match target.spec().code {
        CodeKind::GpuCode => (
            (Vec::new(), CacheStats::default()),
            gpu::code_objects(&loops, &options.gpu_archs)?,
            mxc_lowering::loops::gpu::launcher_name,
        ),
        _ => (
            objects::library(&loops.kernels, target, options.opt, options.cache.as_deref())?,
            Vec::new(),
            plan::llvm_entry_name,
        ),
    };
    Ok(Compiled {
        target,
        program: Program {
            interface,
            ..plan::plan(graph, &loops.kernels, symbol)
        },
        library,
        code_objects,
        graph: rewritten.into_owned(),
        rewrite_stats,
        cache,
        precision: options.precision.describe(),
    })
}

/// `graph` in the precision `precision` asks for (`None`: unchanged).
pub fn with_precision(
    graph: &Graph,
    precision: &mxc_rewrite::precision::Precision,
) -> Result<Option<Graph>, CodegenError> {
    if precision.is_default() {
        return Ok(None);
    }
    if let Some(int8) = &precision.int8 {
        calibrated(graph, int8)?;
    }
    precision
        .apply(graph)
        .map(Some)
        .map_err(|error| CodegenError::Precision {
            what: precision.describe(),
            error,
        })
}

/// `int8`'s samples run on `graph` (on the cpu target) and the ranges kept, unless they are
/// there already.
fn calibrated(graph: &Graph, int8: &mxc_rewrite::precision::Int8) -> Result<(), CodegenError> {
    use mxc_rewrite::precision::Calibration;
    let Calibration::Samples { samples, calibrated } = &int8.calibration else {
        return Ok(());
    };
    if int8.calibration.ranges_for(graph).is_some() {
        return Ok(());
    }
    let found = calibrate(graph, &int8.ops, samples, Target::Cpu)?;
    *calibrated.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::sync::Arc::new(found));
    Ok(())
}
