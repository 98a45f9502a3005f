//! The loop level for GPUs: a graph's kernels, lowered as for `ref` (scalar bodies, no vector
//! unit), as `gpu.func` kernels of one `gpu.module`. Each keeps its body and its arguments
//! (the buffers, then the range `lo..hi` of its parallel loop, now the range of the launch).
//! A splittable kernel runs one iteration of the parallel loop per thread: iteration `lo +
//! block * 256 + thread`, when it is below `hi` (a thread past it runs an empty range, so that
//! the body's stack buffers stay static allocations at the kernel's entry); one that is not
//! (its loop is not all it does) runs whole in one thread (`launch_shape` in
//! `mxc_dialects::program` says how each is launched). A stack buffer is allocated in the
//! GPU's private memory (address space 5 on AMD GPUs, where the back end takes no other) and
//! cast to the generic space its uses name, which LLVM infers back. Work along rows (softmax,
//! layer norm, reductions over trailing axes) runs a block per row instead (`gpu_rows.rs`),
//! and matrix products a block per 64x64 tile of the result (`gpu_gemm.rs`), both chosen by
//! `shape_blocks`. `gpu_binary.rs` compiles the module.

use super::gpu_gemm::tiled_gemm;
use super::gpu_rows::RowKernel;
use super::{KernelSpec, LoopError, LoopModule};

use mxc_dialects::program::threads_per_block;
use mxc_dialects::Graph;

/// The name of the GPU kernel of kernel `symbol`.
pub fn launcher_name(symbol: &str) -> String {
    format!("{symbol}_kernel")
}

/// A kernel whose blocks of threads each compute one iteration of its parallel loop together
/// (a row kernel, `gpu_rows.rs`; a tiled GEMM, `gpu_gemm.rs`), in its two renderings.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockKernel {
    /// The parallel loop's iterations: one block each.
    pub range: u64,
    /// The `gpu.func`.
    pub gpu: String,
    /// The same algorithm as a host function of the loop level's signature, each phase a loop
    /// over the thread numbers (for testing it against `ref`).
    pub host: String,
}

/// How a block kernel is rendered: for the GPU, or its algorithm for the host.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Mode {
    Gpu,
    Host,
}

/// Makes each kernel of `module` (lowered from `g`) that a row kernel or the tiled GEMM
/// computes one: a block per row or tile, its parallel range the rows or tiles.
pub fn shape_blocks(g: &Graph, module: &mut LoopModule) {
    let graphs = g.with_regions();
    for k in &mut module.kernels {
        let op = &graphs[k.region].ops[k.op];
        let block = match RowKernel::of(graphs[k.region], op) {
            Some(rows) => Some(rows.kernel(k)),
            None => tiled_gemm(graphs[k.region], op, k),
        };
        if let Some(block) = block {
            k.parallel.range = block.range;
            k.parallel.splittable = true;
            k.parallel.per_block = true;
            k.blocks = Some(block);
        }
    }
}

/// `module` with each block kernel's function replaced by its host form, which runs the GPU
/// algorithm on the CPU (for testing it against `ref`).
pub fn emulate_blocks_on_host(module: &mut LoopModule) {
    for k in &mut module.kernels {
        if let Some(block) = &k.blocks {
            k.func = block.host.clone();
        }
    }
}

/// `module`'s kernels as the `gpu.func`s of a `gpu.module @kernels`.
pub fn gpu_module(module: &LoopModule) -> Result<String, LoopError> {
    let mut out = String::from("module attributes {gpu.container_module} {\ngpu.module @kernels {\n");
    for k in &module.kernels {
        out.push_str(&gpu_kernel(k)?);
    }
    out.push_str("}\n}\n");
    Ok(out)
}

/// Kernel `k`'s function (`Emitter::finish`'s form: the signature, its body, a `return`) as a
/// `gpu.func` whose prologue computes the thread's `%lo..%hi`.
fn gpu_kernel(k: &KernelSpec) -> Result<String, LoopError> {
    if let Some(block) = &k.blocks {
        return Ok(block.gpu.clone());
    }
    let malformed = || LoopError::Mlir {
        stage: "writing GPU kernels",
        message: format!("kernel `{}` is not in the form the emitter writes", k.symbol),
    };
    let head = format!("func.func @{}(", k.symbol);
    let (signature, rest) = k.func.split_once(" {\n").ok_or_else(malformed)?;
    let params = signature
        .strip_prefix(&head)
        .and_then(|p| p.strip_suffix("%lo: index, %hi: index)"))
        .ok_or_else(malformed)?;
    let body = private_stack_buffers(rest.strip_suffix("  return\n}\n").ok_or_else(malformed)?);
    let threads = threads_per_block(k.parallel.splittable);
    // a kernel run whole by one thread takes its range as it is
    let (range, prologue) = match k.parallel.splittable {
        false => ("%lo: index, %hi: index", String::new()),
        true => (
            "%gpu_lo: index, %gpu_hi: index",
            format!(
                "  %gpu_block = gpu.block_id x\n\
                \x20 %gpu_thread = gpu.thread_id x\n\
                \x20 %gpu_width = arith.constant {threads} : index\n\
                \x20 %gpu_first = arith.muli %gpu_block, %gpu_width : index\n\
                \x20 %gpu_offset = arith.addi %gpu_first, %gpu_thread : index\n\
                \x20 %gpu_i = arith.addi %gpu_lo, %gpu_offset : index\n\
                \x20 %gpu_one = arith.constant 1 : index\n\
                \x20 %gpu_after = arith.addi %gpu_i, %gpu_one : index\n\
                \x20 %lo = arith.minui %gpu_i, %gpu_hi : index\n\
                \x20 %hi = arith.minui %gpu_after, %gpu_hi : index\n"
            ),
        ),
    };
    Ok(format!(
        "gpu.func @{}({params}{range}) kernel \
         attributes {{known_block_size = array<i32: {threads}, 1, 1>}} {{\n{prologue}{body}  gpu.return\n}}\n",
        launcher_name(&k.symbol)
    ))
}

/// The private address space of AMD GPUs (NVIDIA's local memory is 5 too).
const PRIVATE_SPACE: u32 = 5;

/// `body` with each `memref.alloca` made in private memory and cast to the generic space.
fn private_stack_buffers(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    for line in body.lines() {
        let alloca = line
            .split_once(" = memref.alloca() : ")
            .filter(|(_, ty)| ty.starts_with("memref<") && ty.ends_with('>'));
        match alloca {
            Some((name, ty)) => {
                let private = format!("{}, {PRIVATE_SPACE}>", &ty[..ty.len() - 1]);
                let name = name.trim_start();
                let indent = &line[..line.len() - line.trim_start().len()];
                out.push_str(&format!(
                    "{indent}{name}_private = memref.alloca() : {private}\n\
                     {indent}{name} = memref.memory_space_cast {name}_private : {private} to {ty}\n"
                ));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::{one_op, t};
    use super::super::{lower_graph, MlirToLlvm};
    use super::*;
    use mxc_dialects::{Attrs, DType, OpKind};

    #[test]
    fn each_kernel_is_a_gpu_func_with_its_thread_range_and_private_stack_buffers() {
        let g = one_op(
            OpKind::Softmax,
            &[t(DType::F32, &[4, 300])],
            Attrs::new().with("axis", mxc_dialects::Attr::Int(1)),
        );
        let loops = lower_graph(&g, None).unwrap();
        let text = gpu_module(&loops).unwrap();
        assert!(
            text.contains("gpu.func @k0_softmax_kernel(%in0: memref<4x300xf32>, %out0: memref<4x300xf32>, %gpu_lo: index, %gpu_hi: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>}"),
            "{text}"
        );
        assert!(text.contains("%lo = arith.minui %gpu_i, %gpu_hi : index"), "{text}");
        assert!(text.ends_with("  gpu.return\n}\n}\n}\n"), "{text}");
        // a kernel that cannot be split runs whole, in one thread, its range as given
        let mut whole = loops.kernels[0].clone();
        whole.parallel.splittable = false;
        let func = gpu_kernel(&whole).unwrap();
        assert!(
            func.starts_with("gpu.func @k0_softmax_kernel(%in0: memref<4x300xf32>, %out0: memref<4x300xf32>, %lo: index, %hi: index) kernel attributes {known_block_size = array<i32: 1, 1, 1>} {\n"),
            "{func}"
        );
        assert!(!func.contains("gpu.thread_id"), "{func}");
        // the module parses and verifies
        MlirToLlvm::new()
            .run_pipeline(&text, &["builtin.module()"], "verifying", |_, _| Ok(()))
            .unwrap();
        let body = private_stack_buffers("  %s0 = memref.alloca() : memref<16xf32>\n  %x = arith.constant 0 : index\n");
        assert_eq!(
            body,
            "  %s0_private = memref.alloca() : memref<16xf32, 5>\n  %s0 = memref.memory_space_cast %s0_private : memref<16xf32, 5> to memref<16xf32>\n  %x = arith.constant 0 : index\n"
        );
    }
}
