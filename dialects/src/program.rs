//! A compiled program's execution plan: the buffers it uses and the kernel calls that run it,
//! in order. Codegen produces it next to the kernels' native code; the runtime executes it.

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
    /// Operations the call executes (an estimate): what decides whether splitting pays.
    pub work: u64,
    /// The arithmetic the kernel does, in floating-point (or integer) operations: what `mxc
    /// perf` divides by the time.
    pub flops: u64,
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
    pub steps: Vec<Step>,
    pub inputs: Vec<Binding>,
    pub outputs: Vec<Binding>,
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

impl Program {
    /// A memory plan: each temp placed, in the order the steps first write them, at the lowest
    /// aligned offset where it overlaps no placed buffer whose lifetime overlaps its own.
    pub fn memory_plan(&self) -> MemoryPlan {
        let n = self.buffers.len();
        let (mut first, mut last) = (vec![usize::MAX; n], vec![0; n]);
        for (s, step) in self.steps.iter().enumerate() {
            for &b in &step.args {
                first[b] = first[b].min(s);
                last[b] = last[b].max(s);
            }
        }
        for o in &self.outputs {
            last[o.buffer] = usize::MAX;
        }
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
            work: 16,
            flops: 0,
        };
        let p = Program {
            buffers,
            steps: vec![step(vec![0, 1]), step(vec![1, 2]), step(vec![2, 3])],
            inputs: vec![Binding {
                name: "x".into(),
                buffer: 0,
            }],
            outputs: vec![Binding {
                name: "y".into(),
                buffer: 3,
            }],
        };
        let plan = p.memory_plan();
        assert_eq!(plan.offsets, [None, Some(0), Some(64), Some(0)]);
        assert_eq!(plan.size, 128);
    }
}
