//! The execution plan of a graph: one buffer per value, one step per kernel.

use mxc_dialects::program::{Binding, Buffer, BufferKind, KernelSignature, Program, Step};
use mxc_dialects::{Def, Graph};
use mxc_lowering::loops::KernelSpec;

pub fn plan(g: &Graph, kernels: &[KernelSpec]) -> Program {
    let buffers = (0..g.num_values())
        .map(|i| {
            let v = mxc_dialects::ValueId(i as u32);
            let kind = match (g.def(v), g.constant_value(v)) {
                (Def::Input(n), _) => BufferKind::Input(n),
                (_, Some(t)) => BufferKind::Constant(t.clone()),
                _ => BufferKind::Temp,
            };
            Buffer {
                ty: g.ty(v).clone(),
                kind,
            }
        })
        .collect();
    // what each kernel is compiled for, recorded apart from its step for the loader to check
    let signatures = kernels
        .iter()
        .map(|k| KernelSignature {
            symbol: llvm_entry_name(&k.symbol),
            arg_bytes: k.args.iter().map(|&v| g.ty(v).num_bytes() as u64).collect(),
            results: g.ops[k.op].results.len(),
            range: k.parallel.range,
        })
        .collect();
    let steps = kernels
        .iter()
        .map(|k| Step {
            symbol: llvm_entry_name(&k.symbol),
            args: k.args.iter().map(|v| v.index()).collect(),
            range: k.parallel.range,
            splittable: k.parallel.splittable,
            work: k.parallel.work,
            flops: kernel_flops(g, k.op) as u64,
        })
        .collect();
    let bind = |p: &mxc_dialects::Port| Binding {
        name: p.name.clone(),
        buffer: p.value.index(),
    };
    Program {
        buffers,
        kernels: signatures,
        steps,
        inputs: g.inputs.iter().map(bind).collect(),
        outputs: g.outputs.iter().map(bind).collect(),
    }
}

/// The arithmetic of the kernel computing op `op` of `g` (a fused op's: its body's).
fn kernel_flops(g: &Graph, op: usize) -> f64 {
    let op = &g.ops[op];
    match &op.body {
        Some(body) => mxc_rewrite::cost::kernel_flops(body),
        None => mxc_rewrite::cost::with_site(g, op, mxc_rewrite::cost::flops),
    }
}

/// The exported symbol that calls kernel `symbol` with an array of buffer pointers.
pub fn llvm_entry_name(symbol: &str) -> String {
    format!("{symbol}_entry")
}
