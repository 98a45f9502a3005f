//! A compiled program's execution plan: the buffers it uses and the kernel calls that run it,
//! in order. Codegen produces it next to the kernels' native code; the runtime executes it,
//! after `Program::validate` has checked every fact it relies on against every other (a plan
//! read from a file may disagree with its kernels).

mod control;
mod device;
mod host;
mod sized;

pub use control::{straight, Block, IfStep, Item, LoopStep, MAX_DEPTH};
pub use device::{
    launch_shape, threads_per_block, CodeFormat, CodeObject, GpuArch, DEFAULT_GPU_ARCHS, THREADS_PER_BLOCK,
};
pub use host::HostStep;
pub use sized::{symbols_in_order, KernelSizes};

use crate::mx::call::LibraryCall;
use crate::{Tensor, TensorType};

/// What a buffer holds before the program runs.
#[derive(Clone, Debug, PartialEq)]
pub enum BufferKind {
    /// Bound to graph input number `n` at run time.
    Input(usize),
    /// Weights and other compile-time data.
    Constant(Tensor),
    /// Written by a kernel before it is read.
    Temp,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub ty: TensorType,
    pub kind: BufferKind,
}

/// One kernel call: the exported symbol, the buffers it takes (operands, then results) and
/// the range of its parallel loop. The entry is called as `symbol(args, lo, hi)`; calls on
/// consecutive parts of `0..range` compute the whole result when `splittable`, else one call
/// with `0..range` does.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub symbol: String,
    pub args: Vec<usize>,
    pub range: u64,
    pub splittable: bool,
    /// On a GPU, a block computes each iteration (`launch_shape`); only with `splittable`.
    pub per_block: bool,
    /// Operations the call executes (an estimate): what decides whether splitting pays.
    pub work: u64,
    /// The arithmetic the kernel does, in floating-point (or integer) operations: what `mxc
    /// perf` divides by the time.
    pub flops: u64,
    /// The library call that computes the step where its library is present (`mx.call`); the
    /// kernel computes the same where it is not.
    pub call: Option<LibraryCall>,
}

/// What a kernel was compiled for, recorded apart from the steps that call it: the byte size of
/// each buffer it takes (operands, then results), how many of them (the last) it writes, and
/// the range of its parallel loop. A step that disagrees with its kernel is refused at load.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelSignature {
    pub symbol: String,
    pub arg_bytes: Vec<u64>,
    pub results: usize,
    pub range: u64,
    /// Of a kernel over symbolic types (a size-generic one, `sized.rs`): its range and
    /// argument sizes as expressions.
    pub sizes: Option<KernelSizes>,
}

/// Whether `call` takes the step's buffers (`args`, `results` of them results, their sizes
/// `bytes`): a library trusts the sizes it is given, so each must be the buffer's.
fn check_call(call: &LibraryCall, args: &[usize], bytes: &[usize], results: usize) -> Result<(), String> {
    let (operands, result) = call.operand_bytes();
    let what = call.callee();
    if results != 1 || args.len() < 2 {
        return Err(format!("{what} gives one result from its operands"));
    }
    let n = args.len() - 1;
    let sized = |i: usize, b: usize, want: u64| match bytes[b] as u64 == want {
        true => Ok(()),
        false => Err(format!(
            "{what} takes {want} bytes as argument {i}, buffer {b} has {}",
            bytes[b]
        )),
    };
    for (i, want) in operands {
        let b = *args[..n]
            .get(i)
            .ok_or_else(|| format!("{what} names operand {i} of {n}"))?;
        sized(i, b, want)?;
    }
    sized(n, args[n], result)?;
    Ok(())
}

/// A named graph input or output and its buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    pub name: String,
    pub buffer: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub buffers: Vec<Buffer>,
    /// Every kernel the steps call, once each.
    pub kernels: Vec<KernelSignature>,
    /// Every kernel call, each made by one `Item::Call` of `main` (in a region's block, as
    /// often as the region runs).
    pub steps: Vec<Step>,
    /// What runs, in order: calls, and control steps running regions (`control.rs`).
    pub main: Vec<Item>,
    pub inputs: Vec<Binding>,
    pub outputs: Vec<Binding>,
    /// The model's sequence and optional values carried by the bindings (empty when every
    /// input and output is a tensor).
    pub interface: crate::interface::Interface,
    /// The symbols its types use, by name (empty for a program of fixed sizes): a run binds
    /// them from its inputs (`sized.rs`).
    pub symbols: Vec<crate::dim::Symbol>,
}

/// Where each temporary buffer lives in one arena, allocated once per run: buffers whose
/// lifetimes (from the first step that names them to the last, or to the end for outputs)
/// overlap never share bytes; others may.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryPlan {
    /// The arena offset of each buffer that is a `Temp` (64-byte aligned), `None` for others.
    pub offsets: Vec<Option<usize>>,
    /// The arena's size in bytes.
    pub size: usize,
}

/// The alignment of every buffer in the arena (and of weights in `.mxr` files).
pub const ALIGN: usize = 64;

fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Why a plan cannot run: the fact that disagrees with another.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid plan: {0}")]
pub struct PlanError(pub String);

impl Program {
    /// Checks every fact the runtime relies on when it runs this plan with `memory`: buffer
    /// sizes (checked arithmetic), each temporary inside the arena and aligned, every input
    /// buffer bound exactly once and every binding to a buffer of its kind, each step's kernel
    /// recorded, its argument count, each argument's size and its parallel range those the
    /// kernel was compiled for, results written only to temporaries, and the items that run
    /// the steps (`control.rs`). A program over symbolic sizes is checked at its symbols'
    /// largest sizes, where `memory` places it (`sized.rs`).
    pub fn validate(&self, memory: &MemoryPlan) -> Result<(), PlanError> {
        match self.is_sized() {
            true => {
                self.validate_sizes()?;
                self.at_sizes(&self.largest_sizes())?.validate_fixed(memory)
            }
            false => self.validate_fixed(memory),
        }
    }

    /// `validate` for the buffer types as they are.
    pub(crate) fn validate_fixed(&self, memory: &MemoryPlan) -> Result<(), PlanError> {
        let bad = |m: String| Err(PlanError(m));
        let n = self.buffers.len();
        if memory.offsets.len() != n {
            return bad(format!(
                "the memory plan places {} buffers of {n}",
                memory.offsets.len()
            ));
        }
        let mut bytes = Vec::with_capacity(n);
        for (i, b) in self.buffers.iter().enumerate() {
            let Some(size) = b.ty.checked_num_bytes() else {
                return bad(format!("buffer {i} ({}) has more bytes than the address space", b.ty));
            };
            bytes.push(size);
            match (&b.kind, memory.offsets[i]) {
                (BufferKind::Temp, Some(at)) => {
                    let fits = at.checked_add(size).is_some_and(|end| end <= memory.size);
                    if !fits || !at.is_multiple_of(ALIGN) {
                        return bad(format!(
                            "buffer {i} ({size} bytes at {at}) does not lie aligned inside the arena of {} bytes",
                            memory.size
                        ));
                    }
                }
                (BufferKind::Temp, None) => return bad(format!("temporary buffer {i} has no place in the arena")),
                (_, Some(_)) => return bad(format!("buffer {i} is not a temporary but has a place in the arena")),
                (BufferKind::Constant(t), None) if t.ty != b.ty => {
                    return bad(format!("weight {i} holds {}, its buffer is {}", t.ty, b.ty))
                }
                (BufferKind::Input(k), None) => {
                    let bound = self.inputs.get(*k).is_some_and(|binding| binding.buffer == i);
                    if !bound {
                        return bad(format!("buffer {i} is input {k}, which is not bound to it"));
                    }
                }
                (BufferKind::Constant(_), None) => {}
            }
        }
        for (k, binding) in self.inputs.iter().enumerate() {
            if self.buffers.get(binding.buffer).map(|b| &b.kind) != Some(&BufferKind::Input(k)) {
                return bad(format!(
                    "input `{}` is bound to buffer {}, not an input buffer",
                    binding.name, binding.buffer
                ));
            }
        }
        for binding in &self.outputs {
            if binding.buffer >= n {
                return bad(format!(
                    "output `{}` names buffer {} of {n}",
                    binding.name, binding.buffer
                ));
            }
        }
        for (list, what) in [(&self.inputs, "input"), (&self.outputs, "output")] {
            let mut names: Vec<&str> = list.iter().map(|b| b.name.as_str()).collect();
            names.sort_unstable();
            if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
                return bad(format!("two {what}s are named `{}`", w[0]));
            }
        }
        let mut symbols: Vec<&str> = self.kernels.iter().map(|k| k.symbol.as_str()).collect();
        symbols.sort_unstable();
        if let Some(w) = symbols.windows(2).find(|w| w[0] == w[1]) {
            return bad(format!("kernel `{}` is recorded twice", w[0]));
        }
        for (s, step) in self.steps.iter().enumerate() {
            let Some(kernel) = self.kernels.iter().find(|k| k.symbol == step.symbol) else {
                return bad(format!("step {s} calls `{}`, which no kernel is", step.symbol));
            };
            let at = |m: String| PlanError(format!("step {s} (`{}`): {m}", step.symbol));
            if step.args.len() != kernel.arg_bytes.len() || kernel.results > kernel.arg_bytes.len() {
                return Err(at(format!(
                    "{} arguments, the kernel takes {} ({} results)",
                    step.args.len(),
                    kernel.arg_bytes.len(),
                    kernel.results
                )));
            }
            if step.per_block && !step.splittable {
                return Err(at("a block per iteration, but not split".into()));
            }
            if step.range != kernel.range {
                return Err(at(format!(
                    "range {}, the kernel's loop has {}",
                    step.range, kernel.range
                )));
            }
            let first_result = step.args.len() - kernel.results;
            for (j, (&b, &want)) in step.args.iter().zip(&kernel.arg_bytes).enumerate() {
                let Some(&have) = bytes.get(b) else {
                    return Err(at(format!("argument {j} names buffer {b} of {n}")));
                };
                if have as u64 != want {
                    return Err(at(format!(
                        "argument {j} is buffer {b} of {have} bytes, the kernel takes {want}"
                    )));
                }
                if j >= first_result && self.buffers[b].kind != BufferKind::Temp {
                    return Err(at(format!(
                        "result {} is buffer {b}, which is not a temporary",
                        j - first_result
                    )));
                }
            }
            if let Some(call) = &step.call {
                check_call(call, &step.args, &bytes, kernel.results).map_err(at)?;
            }
        }
        fn names(bindings: &[Binding]) -> Vec<&str> {
            bindings.iter().map(|b| b.name.as_str()).collect()
        }
        self.interface
            .check(&names(&self.inputs), &names(&self.outputs))
            .map_err(PlanError)?;
        self.validate_items()
    }

    /// A memory plan: each temp placed, in the order the items first use them, at the lowest
    /// aligned offset where it overlaps no placed buffer whose lifetime overlaps its own. A
    /// program over symbolic sizes is placed at its symbols' largest sizes (a run places it
    /// at its own: `sized.rs`).
    pub fn memory_plan(&self) -> MemoryPlan {
        match self.is_sized() {
            // a plan that does not evaluate there is refused by `validate`
            true => match self.at_sizes(&self.largest_sizes()) {
                Ok(p) => p.fixed_memory_plan(),
                Err(_) => self.fixed_memory_plan(),
            },
            false => self.fixed_memory_plan(),
        }
    }

    fn fixed_memory_plan(&self) -> MemoryPlan {
        let n = self.buffers.len();
        let (first, last) = self.lifetimes();
        let mut temps: Vec<usize> = (0..n)
            .filter(|&b| self.buffers[b].kind == BufferKind::Temp && first[b] != usize::MAX)
            .collect();
        temps.sort_by_key(|&b| (first[b], b));
        let mut offsets = vec![None; n];
        // placed buffers: (offset, end, last use); the ones dead before `first[b]` are skipped
        let mut placed: Vec<(usize, usize, usize)> = Vec::new();
        let mut size = 0;
        for b in temps {
            let len = align_up(self.buffers[b].ty.num_bytes().max(1));
            placed.retain(|&(_, _, until)| until >= first[b]);
            placed.sort_unstable();
            let mut at = 0;
            for &(start, end, _) in &placed {
                if at + len <= start {
                    break;
                }
                at = at.max(end);
            }
            placed.push((at, at + len, last[b]));
            offsets[b] = Some(at);
            size = size.max(at + len);
        }
        MemoryPlan { offsets, size }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn temp(n: usize) -> Buffer {
        Buffer {
            ty: TensorType::new(DType::F32, vec![n]),
            kind: BufferKind::Temp,
        }
    }

    #[test]
    fn dead_buffers_are_reused_and_live_ones_never_overlap() {
        // a chain x -> t1 -> t2 -> t3 -> y (t3 the output): t1 is dead once t2 is written
        let buffers = vec![
            Buffer {
                ty: TensorType::new(DType::F32, vec![16]),
                kind: BufferKind::Input(0),
            },
            temp(16),
            temp(16),
            temp(16),
        ];
        let step = |args: Vec<usize>| Step {
            symbol: "k".into(),
            args,
            range: 16,
            splittable: true,
            per_block: false,
            work: 16,
            flops: 0,
            call: None,
        };
        let p = Program {
            buffers,
            kernels: Vec::new(),
            steps: vec![step(vec![0, 1]), step(vec![1, 2]), step(vec![2, 3])],
            main: straight(3),
            inputs: vec![Binding {
                name: "x".into(),
                buffer: 0,
            }],
            outputs: vec![Binding {
                name: "y".into(),
                buffer: 3,
            }],
            interface: Default::default(),
            symbols: Vec::new(),
        };
        let plan = p.memory_plan();
        assert_eq!(plan.offsets, [None, Some(0), Some(64), Some(0)]);
        assert_eq!(plan.size, 128);
    }

    #[test]
    fn a_library_call_must_take_its_buffers_sizes() {
        use crate::mx::call::{Activation, MatmulCall};
        // y (4x4) = a (4x8) x b (8x4)
        let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape);
        let input = |n: usize, shape| Buffer {
            ty: ty(shape),
            kind: BufferKind::Input(n),
        };
        let call = MatmulCall {
            batch: 1,
            m: 4,
            n: 4,
            k: 8,
            trans_a: false,
            trans_b: false,
            stride_a: 0,
            stride_b: 0,
            alpha: 1.0,
            a: 0,
            b: 1,
            bias: None,
            activation: Activation::None,
        };
        let program = |call: MatmulCall| Program {
            buffers: vec![input(0, vec![4, 8]), input(1, vec![8, 4]), temp(16)],
            kernels: vec![KernelSignature {
                symbol: "k".into(),
                arg_bytes: vec![128, 128, 64],
                results: 1,
                range: 4,
                sizes: None,
            }],
            steps: vec![Step {
                symbol: "k".into(),
                args: vec![0, 1, 2],
                range: 4,
                splittable: true,
                per_block: false,
                work: 4,
                flops: 256,
                call: Some(LibraryCall::Matmul(call)),
            }],
            main: straight(1),
            inputs: ["a", "b"]
                .iter()
                .enumerate()
                .map(|(buffer, name)| Binding {
                    name: name.to_string(),
                    buffer,
                })
                .collect(),
            outputs: vec![Binding {
                name: "y".into(),
                buffer: 2,
            }],
            interface: Default::default(),
            symbols: Vec::new(),
        };
        let p = program(call.clone());
        p.validate(&p.memory_plan()).unwrap();
        // a deeper product than the buffers hold, and a bias the step does not pass
        let deeper = program(MatmulCall { k: 16, ..call.clone() });
        let err = deeper.validate(&deeper.memory_plan()).unwrap_err().0;
        assert!(
            err.contains("blaslt.matmul takes 256 bytes as argument 0, buffer 0 has 128"),
            "{err}"
        );
        let biased = program(MatmulCall { bias: Some(2), ..call });
        let err = biased.validate(&biased.memory_plan()).unwrap_err().0;
        assert!(err.contains("blaslt.matmul names operand 2 of 2"), "{err}");
    }
}
