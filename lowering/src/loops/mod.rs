//! `mx` → loop level: every op of a graph (but `mx.constant`) becomes one kernel, a
//! `func.func` whose arguments are static-shaped memrefs (the op's operands, then its
//! results) and the range `%lo..%hi` of its parallel loop to run (`Parallel`), and whose
//! body is the plain scalar definition of the op as `scf.for` nests over
//! `memref.load`/`store`, `arith` and `math`. This is the `ref` oracle and the start of the
//! `cpu` target. `llvm.rs` takes the MLIR text on to LLVM IR.
//!
//! The text is written by a small emitter (`emit.rs`: names, loops, index arithmetic;
//! `scalar.rs`: typed arithmetic; `buffer.rs`: memrefs, loads and stores; `half.rs`: f16 and
//! bf16 conversions), with one file per op family (`window.rs` serves conv and pool).

mod amx;
mod approx;
mod attention;
mod buffer;
mod conv;
mod conv_tiled;
mod elementwise;
mod emit;
mod fused;
mod generic;
pub mod gpu;
mod gpu_binary;
mod gpu_gemm;
mod gpu_rows;
mod half;
mod integer;
mod integer_conv;
mod integer_conv_rows;
mod integer_depthwise;
mod layout;
mod llvm;
mod lookup;
mod matmul;
mod narrow;
mod norm;
mod pool;
mod reduce;
mod rows;
mod saturate;
mod scalar;
mod sizes;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
mod tile;
mod vector;
mod window;
mod winograd;

pub use emit::Parallel;
pub use generic::covers_kind as size_generic_kind;
pub use gpu_binary::GpuToolkit;
pub use llvm::{to_llvm_ir, MlirToLlvm, PIPELINE};
use sizes::SizeArgs;
pub use vector::VectorIsa;

use buffer::Buf;
use emit::Emitter;
use mxc_dialects::{Attrs, Graph, Op, OpKind, ValueId};

/// The loop-level form of a graph: one MLIR module holding a kernel per op.
#[derive(Clone, Debug)]
pub struct LoopModule {
    /// The MLIR module (`func`, `scf`, `memref`, `arith`, `math`) as text.
    pub mlir: String,
    /// The kernels in the graph's op order (one per `mx.fused` op as for any other).
    pub kernels: Vec<KernelSpec>,
}

/// One kernel: which op it computes and which values its arguments are.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelSpec {
    /// The function's name, `k<op index>_<op name>` (e.g. `k12_conv`; in a region,
    /// `r<region>_k<op index>_<op name>`).
    pub symbol: String,
    /// The graph the op is in: its number in `Graph::with_regions` (0: the graph lowered).
    pub region: usize,
    /// Index of the op in that graph's `ops`.
    pub op: usize,
    /// The op's operands, then its results: one memref (one pointer in LLVM IR) each. Two
    /// `index` arguments follow them: the part of the parallel loop to run.
    pub args: Vec<ValueId>,
    /// How calls to the kernel may be split across threads.
    pub parallel: Parallel,
    /// The kernel's `func.func` as it appears in `LoopModule::mlir`.
    pub func: String,
    /// The memref type of each argument in `args` (the function's parameters before the range).
    pub memrefs: Vec<String>,
    /// On the gpu target, the kernel that computes it with a block of threads per iteration
    /// (a row, a tile of a product), if one does (`gpu::shape_blocks`).
    pub blocks: Option<gpu::BlockKernel>,
    /// Whether it takes the values of the graph's symbols (after its buffers, before the
    /// range: `sizes.rs`), its buffers' types being symbolic.
    pub takes_sizes: bool,
    /// The trip count of its parallel loop as an expression, where only the run knows it
    /// (`parallel.range` is its value at the cost point).
    pub range_dim: Option<mxc_dialects::dim::Dim>,
}

/// Errors of lowering to loops and of the way to LLVM IR.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    #[error("the graph is not valid: {0}")]
    Invalid(#[from] mxc_dialects::IrError),
    #[error("op #{index} ({op}): {message}")]
    Op { index: usize, op: String, message: String },
    #[error("MLIR {stage}: {message}")]
    Mlir { stage: &'static str, message: String },
    /// An op over symbolic sizes whose kernel cannot take them at run time yet.
    #[error("op #{index} ({op}): {message}")]
    NotSizeGeneric { index: usize, op: String, message: String },
    /// A file GPU code generation needs is missing (what it is and where it was looked for).
    #[error("{0}")]
    GpuToolkit(String),
}

/// Whether `op` reads or gives strings: the plan runs it on the host with the evaluator.
pub fn runs_on_host(g: &Graph, op: &mxc_dialects::Op) -> bool {
    let string = |v: &mxc_dialects::ValueId| g.ty(*v).dtype == mxc_dialects::DType::Str;
    op.kind.has(mxc_dialects::Trait::Host) || op.operands.iter().chain(&op.results).any(string)
}

/// Lowers every op of a (valid) graph and of its regions, except constants, control ops and
/// ops on strings (host steps, `runs_on_host`), to a kernel: scalar code (the `ref` oracle)
/// without a vector unit, else code for `isa` (vectorised, register-tiled).
pub fn lower_graph(g: &Graph, isa: Option<VectorIsa>) -> Result<LoopModule, LoopError> {
    mxc_dialects::verify(g)?;
    let sizes = SizeArgs::new(g.symbols().keys().map(String::as_str));
    let mut mlir = String::from("module {\n");
    let mut kernels = Vec::new();
    for (region, graph) in g.with_regions().into_iter().enumerate() {
        // a region's kernels are named for it: `r2_k0_add`
        let prefix = match region {
            0 => String::new(),
            n => format!("r{n}_"),
        };
        for (index, op) in graph.ops.iter().enumerate() {
            if op.kind == OpKind::Constant || op.kind.is_control() || runs_on_host(graph, op) {
                continue;
            }
            let symbol = format!("{prefix}k{index}_{}", kernel_name(op));
            let op_name = match region {
                0 => op.kind.to_string(),
                n => format!("{} in region {n}", op.kind),
            };
            if let Some(message) = not_size_generic(graph, op) {
                return Err(LoopError::NotSizeGeneric {
                    index,
                    op: op_name,
                    message,
                });
            }
            let lowered = lower_op(graph, op, &symbol, isa, &sizes).map_err(|message| LoopError::Op {
                index,
                op: op_name,
                message,
            })?;
            mlir.push_str(&lowered.func);
            kernels.push(KernelSpec {
                symbol,
                region,
                op: index,
                args: op.operands.iter().chain(&op.results).copied().collect(),
                parallel: lowered.parallel,
                func: lowered.func,
                memrefs: lowered.memrefs,
                blocks: None,
                takes_sizes: lowered.takes_sizes,
                range_dim: lowered.range_dim,
            });
        }
    }
    mlir.push_str("}\n");
    Ok(LoopModule { mlir, kernels })
}

/// One op's kernel function and what its caller must know of it.
struct Lowered {
    func: String,
    parallel: Parallel,
    /// The type of each buffer parameter.
    memrefs: Vec<String>,
    takes_sizes: bool,
    range_dim: Option<mxc_dialects::dim::Dim>,
}

/// The kernel function of one op; `sizes` places the graph's symbols in the sizes argument a
/// kernel over symbolic types takes.
fn lower_op(g: &Graph, op: &Op, symbol: &str, isa: Option<VectorIsa>, sizes: &SizeArgs) -> Result<Lowered, String> {
    let symbolic = op.operands.iter().chain(&op.results).find(|v| g.ty(**v).is_symbolic());
    let mut e = Emitter::with_isa(isa);
    let (ins, outs, params) = match symbolic {
        None => {
            let (ins, outs) = kernel_buffers(g, op);
            let params = ins.iter().chain(&outs).map(|b| (b.name.clone(), b.memref())).collect();
            (ins, outs, params)
        }
        Some(_) => generic::kernel_buffers(&mut e, g, op, sizes),
    };
    let memrefs: Vec<String> = params.iter().map(|(_, memref)| memref.clone()).collect();
    let sizes_param = symbolic.map(|_| format!("{}: {}", sizes::SIZES_PARAM, sizes.memref()));
    let args: Vec<String> = params
        .iter()
        .map(|(name, memref)| format!("{name}: {memref}"))
        .chain(sizes_param)
        .chain(["%lo: index".to_string(), "%hi: index".to_string()])
        .collect();
    match &op.body {
        Some(body) => fused::lower(&mut e, body, &ins, &outs[0])?,
        None => lower_body(&mut e, op.kind, &op.attrs, &ins, &outs)?,
    }
    let parallel = e.parallel();
    let range_dim = e.parallel_dim().cloned();
    Ok(Lowered {
        func: e.finish(&format!("func.func @{symbol}({})", args.join(", "))),
        parallel,
        memrefs,
        takes_sizes: symbolic.is_some(),
        range_dim,
    })
}

/// Why the kernel of `op` (over symbolic types) cannot take its sizes at run time, if it cannot.
fn not_size_generic(g: &Graph, op: &Op) -> Option<String> {
    let v = op
        .operands
        .iter()
        .chain(&op.results)
        .find(|v| g.ty(**v).is_symbolic())?;
    (!generic::covers(g, op)).then(|| {
        format!(
            "{} has symbolic dimensions: a {} kernel that takes sizes at run time is not built yet \
             (docs/shapes.md says which are)",
            g.ty(*v),
            op.kind
        )
    })
}

/// The kernel parameters of `op`'s operands (`%in<i>`) and results (`%out<i>`).
fn kernel_buffers(g: &Graph, op: &Op) -> (Vec<Buf>, Vec<Buf>) {
    let buf = |name: String, v: &ValueId| {
        let ty = g.ty(*v);
        Buf::new(&name, ty.dtype, &ty.shape)
    };
    let named = |prefix: &str, values: &[ValueId]| -> Vec<Buf> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| buf(format!("%{prefix}{i}"), v))
            .collect()
    };
    (named("in", &op.operands), named("out", &op.results))
}

/// What a kernel's symbol calls it: the op's name, or a fused kernel's ops in order (the first
/// four: `conv_add_relu`).
fn kernel_name(op: &Op) -> String {
    let Some(body) = &op.body else {
        return op.kind.name().to_string();
    };
    let names: Vec<&str> = body
        .ops
        .iter()
        .filter(|o| o.kind != OpKind::Constant)
        .map(|o| o.kind.name())
        .collect();
    match names.len() {
        0 => "fused".to_string(),
        n if n > 4 => format!("{}_etc", names[..4].join("_")),
        _ => names.join("_"),
    }
}

/// Writes the body of the kernel of an op of kind `kind` to `e`.
fn lower_body(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    use OpKind::*;
    match kind {
        Constant => Err("constants have no kernel".into()),
        elementwise::elementwise_kinds!() => elementwise::lower(e, kind, attrs, ins, outs),
        Conv | ConvTranspose | ConvNhwc | ConvNhwcPacked => conv::lower(e, kind, attrs, ins, outs),
        MaxPool | AveragePool | MaxPoolNhwc | AveragePoolNhwc | GlobalAveragePool => {
            pool::lower(e, kind, attrs, ins, outs)
        }
        Gemm | MatMul | MatMulPacked => matmul::lower(e, kind, attrs, ins, outs),
        MatMulIntegerPacked => {
            integer::matmul_integer_packed(e, ins, &outs[0]);
            Ok(())
        }
        ConvNhwcIntegerPacked => integer_conv::conv_nhwc_integer_packed(e, attrs, ins, &outs[0]),
        ConvNhwcIntegerDepthwise => integer_depthwise::conv_nhwc_integer_depthwise(e, attrs, ins, &outs[0]),
        Softmax | BatchNorm | LayerNorm => norm::lower(e, kind, attrs, ins, outs),
        Reshape | BitCast | Transpose | Concat | Slice | Gather | Scatter | Expand | Pack => {
            layout::lower(e, kind, attrs, ins, outs)
        }
        ReduceMean | ReduceSum | ReduceMax => reduce::lower(e, kind, attrs, ins, outs),
        WinogradInput | WinogradWeights | WinogradOutput => winograd::lower(e, kind, attrs, ins, outs),
        Attention => attention::lower(e, attrs, ins, outs),
        Fused | Call => Err("a fused op or a call is lowered from its body".into()),
        If | Loop => Err("a control op runs on the host; its regions' ops are the kernels".into()),
        StringConcat | StringCase | RegexFullMatch => Err("an op on strings runs on the host".into()),
    }
}
