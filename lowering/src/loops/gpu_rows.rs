//! GPU-shaped kernels for work along rows: softmax over the last axis, layer norm over the
//! trailing dimensions and the sums, means and maxima over trailing axes, in f32, on the gpu
//! target. One thread per row (the loop level's form) leaves most of a GPU idle and walks a
//! row alone; here a block of 256 threads takes each row: every thread folds the elements
//! `t, t + 256, ...` of the row, the 256 partial results meet in a tree in shared memory
//! (eight halvings), and the threads then write their elements with the row's totals.
//!
//! A kernel is written once, as *phases* that communicate only through shared memory and the
//! buffers, and rendered two ways: for the GPU, a `gpu.func` run by a block per row with a
//! barrier between phases and the shared arrays in workgroup memory; and for the host, a
//! `func.func` with the loop level's arguments whose phases each loop over the 256 thread
//! numbers, the shared arrays on the stack. The host form runs the GPU form's algorithm (same
//! order of operations, same tree) on the CPU, which is how it is tested against `ref`.

use super::gpu::{launcher_name, BlockKernel, Mode};
use super::KernelSpec;
use mxc_dialects::program::THREADS_PER_BLOCK;
use mxc_dialects::{DType, Graph, Op, OpKind};
use std::fmt::Write;

/// Rows this short keep the loop level's one thread per row.
const MIN_ROW: usize = 32;

/// What a row kernel computes for each row.
#[derive(Clone, Copy, Debug, PartialEq)]
enum RowOp {
    Softmax,
    LayerNorm { epsilon: f64, bias: bool },
    Reduce(OpKind),
}

/// A kernel that runs a block per row: what it computes, over how many rows of how many
/// elements.
#[derive(Clone, Debug, PartialEq)]
pub struct RowKernel {
    op: RowOp,
    pub rows: usize,
    len: usize,
}

impl RowKernel {
    /// The row kernel computing `op` of `g`, if it is one (f32, rows of at least `MIN_ROW`
    /// elements, parameters of layer norm as long as a row).
    pub fn of(g: &Graph, op: &Op) -> Option<RowKernel> {
        if op.body.is_some() {
            return None;
        }
        let all = op.operands.iter().chain(&op.results);
        if all.clone().any(|v| g.ty(*v).dtype != DType::F32) {
            return None;
        }
        let x = &g.ty(op.operands[0]).shape;
        let split = |axis: usize| {
            let (outer, inner) = x.split_at(axis.min(x.len()));
            (outer.iter().product::<usize>(), inner.iter().product::<usize>())
        };
        let (op_kind, axis) = match op.kind {
            OpKind::Softmax => (RowOp::Softmax, op.attrs.int("axis").ok()? as usize),
            OpKind::LayerNorm => {
                let axis = op.attrs.int("axis").ok()? as usize;
                let (_, len) = split(axis);
                let whole = |v: &mxc_dialects::ValueId| g.ty(*v).num_elements() == len;
                if !op.operands[1..].iter().all(whole) || op.results.len() != 3 {
                    return None;
                }
                let epsilon = op.attrs.float("epsilon").ok()?;
                let bias = op.operands.len() == 3;
                (RowOp::LayerNorm { epsilon, bias }, axis)
            }
            OpKind::ReduceSum | OpKind::ReduceMean | OpKind::ReduceMax => {
                let axes = op.attrs.dims("axes").ok()?;
                let first = *axes.first()?;
                (axes == (first..x.len()).collect::<Vec<_>>()).then_some(())?;
                (RowOp::Reduce(op.kind), first)
            }
            _ => return None,
        };
        if op.kind == OpKind::Softmax && axis + 1 != x.len() {
            return None;
        }
        let (rows, len) = split(axis);
        (len >= MIN_ROW && rows > 0).then_some(RowKernel { op: op_kind, rows, len })
    }

    /// Kernel `k` as this row kernel, in both renderings.
    pub fn kernel(&self, k: &KernelSpec) -> BlockKernel {
        BlockKernel {
            range: self.rows as u64,
            gpu: self.gpu_func(k, &launcher_name(&k.symbol)),
            host: self.host_func(k),
        }
    }

    /// The GPU kernel `name` for `k`: a block of 256 threads per row `gpu_lo + block`.
    fn gpu_func(&self, k: &KernelSpec, name: &str) -> String {
        let mut w = self.writer(k, Mode::Gpu);
        let body = self.phases(&mut w, k);
        let shared: Vec<String> = (0..w.shared)
            .map(|i| format!("%sh{i}: memref<{THREADS_PER_BLOCK}xf32, 3>"))
            .collect();
        format!(
            "gpu.func @{name}({}%gpu_lo: index, %gpu_hi: index) workgroup({}) kernel \
             attributes {{known_block_size = array<i32: {THREADS_PER_BLOCK}, 1, 1>}} {{\n{}\
             \x20 %t = gpu.thread_id x\n\
             \x20 %block = gpu.block_id x\n\
             \x20 %row = arith.addi %gpu_lo, %block : index\n\
             \x20 %in_range = arith.cmpi ult, %row, %gpu_hi : index\n\
             \x20 scf.if %in_range {{\n{body}  }}\n  gpu.return\n}}\n",
            params(k),
            shared.join(", "),
            self.prologue(k),
        )
    }

    /// The same algorithm as a host function of the loop level's signature (`k`'s
    /// arguments, then the rows `lo..hi`), each phase a loop over the thread numbers.
    fn host_func(&self, k: &KernelSpec) -> String {
        let mut w = self.writer(k, Mode::Host);
        let body = self.phases(&mut w, k);
        let mut stack = String::new();
        for i in 0..w.shared {
            writeln!(stack, "  %sh{i} = memref.alloca() : memref<{THREADS_PER_BLOCK}xf32>").unwrap();
        }
        format!(
            "func.func @{}({}%lo: index, %hi: index) {{\n{}{stack}\
             \x20 scf.for %row = %lo to %hi step %c1 {{\n{body}  }}\n  return\n}}\n",
            k.symbol,
            params(k),
            self.prologue(k),
        )
    }

    /// Constants and the buffers viewed as rows (`%v<i>`: `rows x len`, or one value per row
    /// for layer norm's statistics and a reduction's result; `len` for its parameters).
    fn prologue(&self, k: &KernelSpec) -> String {
        let len = self.len;
        let mut out = format!(
            "  %c0 = arith.constant 0 : index\n  %c1 = arith.constant 1 : index\n\
             \x20 %threads = arith.constant {THREADS_PER_BLOCK} : index\n\
             \x20 %len = arith.constant {len} : index\n\
             \x20 %len_f = arith.constant {} : f32\n",
            hex(len as f64)
        );
        for (i, (memref, sizes)) in k.memrefs.iter().zip(self.views(k)).enumerate() {
            let strides = match sizes[..] {
                [_, len] => format!("{len}, 1"),
                _ => "1".to_string(),
            };
            let sizes: Vec<String> = sizes.iter().map(usize::to_string).collect();
            writeln!(
                out,
                "  %v{i} = memref.reinterpret_cast %a{i} to offset: [0], sizes: [{}], strides: [{strides}] : {memref} to {}",
                sizes.join(", "),
                view_type(&sizes)
            )
            .unwrap();
        }
        out
    }

    /// The shape each buffer is viewed as: `rows x len` for the input and softmax's and layer
    /// norm's result, `len` for layer norm's parameters, one value per row for its statistics
    /// and a reduction's result.
    fn views(&self, k: &KernelSpec) -> Vec<Vec<usize>> {
        let (rows, len) = (self.rows, self.len);
        let ins = k.memrefs.len() - self.results();
        (0..k.memrefs.len())
            .map(|i| match self.op {
                _ if i == 0 => vec![rows, len],
                RowOp::Softmax => vec![rows, len],
                RowOp::LayerNorm { .. } if i < ins => vec![len],
                RowOp::LayerNorm { .. } if i == ins => vec![rows, len],
                _ => vec![rows],
            })
            .collect()
    }

    /// A writer of the phases of `k` in `mode`.
    fn writer(&self, k: &KernelSpec, mode: Mode) -> Writer {
        let views = self
            .views(k)
            .iter()
            .map(|s| view_type(&s.iter().map(usize::to_string).collect::<Vec<_>>()))
            .collect();
        Writer::new(mode, views)
    }

    /// How many results the op has.
    fn results(&self) -> usize {
        match self.op {
            RowOp::LayerNorm { .. } => 3,
            _ => 1,
        }
    }

    /// The phases of the row `%row` by thread `%t`, rendered for `w`'s mode.
    fn phases(&self, w: &mut Writer, k: &KernelSpec) -> String {
        let out = k.memrefs.len() - self.results();
        let x = |w: &mut Writer, j: &str| w.load(0, &format!("%row, {j}"));
        match self.op {
            RowOp::Softmax => {
                let max = w.fold("maximumf", NEG_INF, &|_| vec![], &|w, j, _| x(w, j));
                w.tree(max, "maximumf");
                let sum = w.fold("addf", 0.0, &|w| vec![w.total(max)], &|w, j, m| {
                    let v = x(w, j);
                    let d = w.op("subf", &v, &m[0]);
                    w.unary("math.exp", &d)
                });
                w.tree(sum, "addf");
                let totals = |w: &mut Writer| vec![w.total(max), w.total(sum)];
                w.each(&totals, &|w, j, totals| {
                    let v = x(w, j);
                    let d = w.op("subf", &v, &totals[0]);
                    let e = w.unary("math.exp", &d);
                    let y = w.op("divf", &e, &totals[1]);
                    w.store(&y, out, &format!("%row, {j}"));
                });
            }
            RowOp::LayerNorm { epsilon, bias } => {
                let sum = w.fold("addf", 0.0, &|_| vec![], &|w, j, _| x(w, j));
                w.tree(sum, "addf");
                let mean = |w: &mut Writer| {
                    let s = w.total(sum);
                    w.op("divf", &s, "%len_f")
                };
                let squares = w.fold("addf", 0.0, &|w| vec![mean(w)], &|w, j, m| {
                    let v = x(w, j);
                    let d = w.op("subf", &v, &m[0]);
                    w.op("mulf", &d, &d)
                });
                w.tree(squares, "addf");
                let inv_std = |w: &mut Writer| {
                    let q = w.total(squares);
                    let var = w.op("divf", &q, "%len_f");
                    let eps = w.constant(epsilon);
                    let var_eps = w.op("addf", &var, &eps);
                    let std = w.unary("math.sqrt", &var_eps);
                    let one = w.constant(1.0);
                    w.op("divf", &one, &std)
                };
                let statistics = |w: &mut Writer| vec![mean(w), inv_std(w)];
                w.each(&statistics, &|w, j, statistics| {
                    let v = x(w, j);
                    let d = w.op("subf", &v, &statistics[0]);
                    let normalised = w.op("mulf", &d, &statistics[1]);
                    let s = w.load(1, j);
                    let mut y = w.op("mulf", &normalised, &s);
                    if bias {
                        let b = w.load(2, j);
                        y = w.op("addf", &y, &b);
                    }
                    w.store(&y, out, &format!("%row, {j}"));
                });
                w.first_thread(&|w| {
                    let (m, inv) = (mean(w), inv_std(w));
                    w.store(&m, out + 1, "%row");
                    w.store(&inv, out + 2, "%row");
                });
            }
            RowOp::Reduce(kind) => {
                let (op, init) = match kind {
                    OpKind::ReduceMax => ("maximumf", NEG_INF),
                    _ => ("addf", 0.0),
                };
                let partial = w.fold(op, init, &|_| vec![], &|w, j, _| x(w, j));
                w.tree(partial, op);
                w.first_thread(&|w| {
                    let mut r = w.total(partial);
                    if kind == OpKind::ReduceMean {
                        r = w.op("divf", &r, "%len_f");
                    }
                    w.store(&r, out, "%row");
                });
            }
        }
        std::mem::take(&mut w.out)
    }
}

const NEG_INF: f64 = f64::NEG_INFINITY;

/// The kernel's buffer parameters, named `%a<i>`, each followed by a comma.
fn params(k: &KernelSpec) -> String {
    k.memrefs
        .iter()
        .enumerate()
        .map(|(i, m)| format!("%a{i}: {m}, "))
        .collect()
}

/// The memref type of a view of `sizes`.
fn view_type(sizes: &[String]) -> String {
    format!("memref<{}xf32>", sizes.join("x"))
}

/// An f32 constant in MLIR's exact hexadecimal form.
fn hex(v: f64) -> String {
    format!("0x{:08X}", (v as f32).to_bits())
}

/// Writes phases: in `Gpu` mode one after the other with a barrier between them, in `Host`
/// mode each in a loop over the thread numbers `%t`. Every name it makes is new.
struct Writer {
    mode: Mode,
    /// The type of each buffer's view.
    views: Vec<String>,
    out: String,
    /// The text of the phase being written.
    phase: String,
    next: usize,
    /// Shared arrays made so far (`%sh<i>`).
    shared: usize,
}

/// Writes, once per phase before its loop over the row, the values every element needs (the
/// row's totals), and names them.
type Invariants<'a> = dyn Fn(&mut Writer) -> Vec<String> + 'a;

/// Writes the work on element `j` of the row, given the invariants' names.
type Element<'a, R> = dyn Fn(&mut Writer, &str, &[String]) -> R + 'a;

/// A shared array of one value per thread, whose element 0 holds the total after `tree`.
#[derive(Clone, Copy)]
struct Shared(usize);

impl Writer {
    fn new(mode: Mode, views: Vec<String>) -> Writer {
        Writer {
            mode,
            views,
            out: String::new(),
            phase: String::new(),
            next: 0,
            shared: 0,
        }
    }

    fn fresh(&mut self) -> String {
        self.next += 1;
        format!("%x{}", self.next)
    }

    fn line(&mut self, text: &str) {
        writeln!(self.phase, "      {text}").unwrap();
    }

    fn shared_ty(&self) -> String {
        match self.mode {
            Mode::Gpu => format!("memref<{THREADS_PER_BLOCK}xf32, 3>"),
            Mode::Host => format!("memref<{THREADS_PER_BLOCK}xf32>"),
        }
    }

    /// Closes the phase written: a barrier after it on the GPU, a loop over the threads around
    /// it on the host.
    fn end_phase(&mut self) {
        let phase = std::mem::take(&mut self.phase);
        match self.mode {
            Mode::Gpu => writeln!(self.out, "{phase}      gpu.barrier").unwrap(),
            Mode::Host => write!(
                self.out,
                "    scf.for %t = %c0 to %threads step %c1 {{\n{phase}    }}\n"
            )
            .unwrap(),
        }
    }

    fn constant(&mut self, v: f64) -> String {
        let name = self.fresh();
        self.line(&format!("{name} = arith.constant {} : f32", hex(v)));
        name
    }

    fn op(&mut self, op: &str, a: &str, b: &str) -> String {
        let name = self.fresh();
        self.line(&format!("{name} = arith.{op} {a}, {b} : f32"));
        name
    }

    fn unary(&mut self, op: &str, a: &str) -> String {
        let name = self.fresh();
        self.line(&format!("{name} = {op} {a} : f32"));
        name
    }

    /// Element `at` of buffer `i`'s view (`%v<i>`).
    fn load(&mut self, i: usize, at: &str) -> String {
        let name = self.fresh();
        self.line(&format!("{name} = memref.load %v{i}[{at}] : {}", self.views[i]));
        name
    }

    fn store(&mut self, v: &str, i: usize, at: &str) {
        self.line(&format!("memref.store {v}, %v{i}[{at}] : {}", self.views[i]));
    }

    /// A phase: each thread folds its elements `%t, %t + 256, ...` with `op` from `init`
    /// (`element` writes the value of element `j` from the values `invariants` wrote before the
    /// loop) and stores its part in a new shared array.
    fn fold(&mut self, op: &str, init: f64, invariants: &Invariants, element: &Element<String>) -> Shared {
        let shared = Shared(self.shared);
        self.shared += 1;
        let (j, acc, result) = (self.fresh(), self.fresh(), self.fresh());
        let start = self.constant(init);
        let values = invariants(self);
        self.line(&format!(
            "{result} = scf.for {j} = %t to %len step %threads iter_args({acc} = {start}) -> (f32) {{"
        ));
        let v = element(self, &j, &values);
        let next = self.op(op, &acc, &v);
        self.line(&format!("scf.yield {next} : f32\n      }}"));
        let ty = self.shared_ty();
        self.line(&format!("memref.store {result}, %sh{}[%t] : {ty}", shared.0));
        self.end_phase();
        shared
    }

    /// The phases halving `shared` with `op` until element 0 holds the total of all 256.
    fn tree(&mut self, shared: Shared, op: &str) {
        let ty = self.shared_ty();
        let sh = format!("%sh{}", shared.0);
        let mut half = THREADS_PER_BLOCK / 2;
        while half > 0 {
            let (h, active, other) = (self.fresh(), self.fresh(), self.fresh());
            self.line(&format!("{h} = arith.constant {half} : index"));
            self.line(&format!("{active} = arith.cmpi ult, %t, {h} : index"));
            self.line(&format!("scf.if {active} {{"));
            self.line(&format!("{other} = arith.addi %t, {h} : index"));
            let (a, b) = (self.fresh(), self.fresh());
            self.line(&format!("{a} = memref.load {sh}[%t] : {ty}"));
            self.line(&format!("{b} = memref.load {sh}[{other}] : {ty}"));
            let r = self.op(op, &a, &b);
            self.line(&format!("memref.store {r}, {sh}[%t] : {ty}\n      }}"));
            self.end_phase();
            half /= 2;
        }
    }

    /// The total a tree left in `shared`, read in the phase being written.
    fn total(&mut self, shared: Shared) -> String {
        let name = self.fresh();
        let ty = self.shared_ty();
        self.line(&format!("{name} = memref.load %sh{}[%c0] : {ty}", shared.0));
        name
    }

    /// A phase in which each thread writes its elements `%t, %t + 256, ...` (`element`, from
    /// the values `invariants` wrote before the loop).
    fn each(&mut self, invariants: &Invariants, element: &Element<()>) {
        let j = self.fresh();
        let values = invariants(self);
        self.line(&format!("scf.for {j} = %t to %len step %threads {{"));
        element(self, &j, &values);
        self.line("}");
        self.end_phase();
    }

    /// A phase only thread 0 runs.
    fn first_thread(&mut self, body: &dyn Fn(&mut Writer)) {
        let first = self.fresh();
        self.line(&format!("{first} = arith.cmpi eq, %t, %c0 : index"));
        self.line(&format!("scf.if {first} {{"));
        body(self);
        self.line("}");
        self.end_phase();
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, ints, one_op, t};
    use super::*;
    use mxc_dialects::Attr;

    fn row_kernel(kind: OpKind, inputs: &[mxc_dialects::TensorType], a: mxc_dialects::Attrs) -> Option<RowKernel> {
        let g = one_op(kind, inputs, a);
        RowKernel::of(&g, &g.ops[0])
    }

    #[test]
    fn only_rows_along_the_trailing_dimensions_long_enough_and_in_f32_take_a_block_each() {
        let f = |shape: &[usize]| t(DType::F32, shape);
        let axis = |a: i64| attrs(&[("axis", Attr::Int(a))]);
        let softmax = row_kernel(OpKind::Softmax, &[f(&[2, 3, 64])], axis(2)).unwrap();
        assert_eq!((softmax.rows, softmax.len), (6, 64));
        // not the last axis, too short a row, another element type
        assert!(row_kernel(OpKind::Softmax, &[f(&[2, 64, 3])], axis(1)).is_none());
        assert!(row_kernel(OpKind::Softmax, &[f(&[64, 31])], axis(1)).is_none());
        assert!(row_kernel(OpKind::Softmax, &[t(DType::F64, &[2, 64])], axis(1)).is_none());
        let norm = |scale: &[usize]| {
            let a = attrs(&[("axis", Attr::Int(1)), ("epsilon", Attr::Float(1e-5))]);
            row_kernel(OpKind::LayerNorm, &[f(&[4, 8, 16]), f(scale)], a)
        };
        assert_eq!(norm(&[8, 16]).map(|k| (k.rows, k.len)), Some((4, 128)));
        // a scale broadcast along the row is left to the loop level
        assert!(norm(&[16]).is_none());
        let sum = |axes: &[i64]| {
            let a = attrs(&[("axes", ints(axes)), ("keepdims", Attr::Int(1))]);
            row_kernel(OpKind::ReduceSum, &[f(&[4, 8, 16])], a)
        };
        assert_eq!(sum(&[1, 2]).map(|k| (k.rows, k.len)), Some((4, 128)));
        assert!(sum(&[0, 1]).is_none(), "leading axes are not rows");
    }
}
