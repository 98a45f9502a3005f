//! The gpu target's generated tiled GEMM: matrix products (`matmul`, its batch dimensions
//! broadcast; `gemm`) and 2-D convolutions as implicit GEMMs (per image and group, the
//! output channels times the output positions, over the input channels times the window, the
//! input's elements read where each window lies, zeros in the padding) in f32, alone, as the
//! anchor of a fused kernel or as the body of a library call (the kernel that runs where the
//! library is absent). The loop level's form gives each thread whole rows of the result (a
//! convolution's whole output planes); here a block of 256 threads computes a 64x64
//! tile of it, each thread a 4x4 grid of results (rows `ty + 16i`, columns `tx + 16j` of the
//! tile, `t = 16 ty + tx`), stepping along the depth in slices of 16: the block copies the
//! 64x16 slice of A and the 16x64 slice of B into shared memory (four elements of each per
//! thread, consecutive threads reading consecutive addresses; past the edges, zeros), waits,
//! and each thread adds the slice's products into its 16 sums, read from shared memory. The
//! sums then go through what follows the product (gemm's `alpha`, `beta` and C, a
//! convolution's bias, a fused kernel's element-wise ops) to the result.
//!
//! Like a row kernel (`gpu_rows.rs`), it is written once as phases that communicate through
//! shared memory and is rendered two ways: for the GPU, a `gpu.func` run by a block per tile,
//! a barrier after each phase that fills or reads the slices, the slices in workgroup memory
//! and a thread's sums in private memory (constant indices: the back end keeps them in
//! registers); for the host, a `func.func` of the loop level's signature whose phases each
//! loop over the 256 thread numbers, the sums a row per thread of a stack array. The host form
//! runs the GPU algorithm on the CPU, which is how it is tested against `ref`.

use super::buffer::Buf;
use super::emit::{fixed, Emitter, Ty, V};
use super::gpu::{launcher_name, BlockKernel, Mode};
use super::matmul::GemmScale;
use super::window::{spans, Window};
use super::{fused, KernelSpec};
use mxc_dialects::program::THREADS_PER_BLOCK;
use mxc_dialects::{Attrs, DType, Graph, Op, OpKind};

/// The rows and columns of the result a block computes.
const TILE: usize = 64;
/// The depth of the slices of A and B in shared memory.
const SLICE: usize = 16;
/// The rows (and columns) of the result each thread computes.
const PER_THREAD: usize = 4;
/// Threads along each side of the tile.
const SIDE: usize = TILE / PER_THREAD;
/// The sums each thread holds.
const SUMS: usize = PER_THREAD * PER_THREAD;
/// The slice loop's attributes: LLVM is not to unroll it. Unrolled (which it does to a loop of
/// two or three slices), the back end schedules the slices' work together and runs out of
/// registers: a 1x1 convolution 40 deep took 404 vector registers on gfx90a, and on gfx1100
/// its 256 and 168 spilled to scratch; kept a loop, 130 and 94.
const NOT_UNROLLED: &str =
    " {llvm.loop_annotation = #llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>}";
/// Products with fewer result rows or columns than this keep the loop level's form, whose
/// thread per result element (or row) already fills the GPU for them.
const MIN_SIDE: usize = 16;

/// How the product reads its operands and finishes its sums.
enum Form<'a> {
    /// `matmul`: A and B with their batch dimensions broadcast to the result's.
    MatMul,
    /// `gemm`: 2-D, either operand transposed, then `alpha`, `beta` and C.
    Gemm {
        trans_a: bool,
        trans_b: bool,
        scale: GemmScale<'a>,
    },
    /// A 2-D `conv` (`x[N, C, H, W]`, `w[M, C/G, kh, kw]`), batched over the images and the
    /// groups: A is a group's weights as `M/G x (C/G * kh * kw)`, B the window's input
    /// elements at each output position, `(C/G * kh * kw) x (Ho * Wo)`.
    Conv(Conv<'a>),
}

/// What an implicit GEMM needs to know of its convolution.
struct Conv<'a> {
    window: Window,
    /// The kernel window's height and width.
    kernel: [usize; 2],
    /// The input's height and width.
    input: [usize; 2],
    /// The output's width.
    out_width: usize,
    bias: Option<&'a Buf>,
}

/// A product the tiled GEMM computes: the result's `batch` matrices of `m x n`, each the
/// product of `m x depth` and `depth x n` matrices.
struct Product<'a> {
    a: &'a Buf,
    b: &'a Buf,
    /// The product's result: the kernel's result, or the anchor's with the epilogue after it.
    out: &'a Buf,
    form: Form<'a>,
    batch: Vec<usize>,
    m: usize,
    n: usize,
    depth: usize,
}

/// The tiled GEMM of kernel `k` (op `op` of `g`), rendered for the GPU and for the host,
/// if it computes one: a product, or a fused kernel or call anchored on one.
pub fn tiled_gemm(g: &Graph, op: &Op, k: &KernelSpec) -> Option<BlockKernel> {
    let (ins, outs) = super::kernel_buffers(g, op);
    let [out] = outs.as_slice() else { return None };
    let (kind, attrs, anchor_ins, anchor_out) = match &op.body {
        Some(body) => {
            let (anchor, anchor_ins, anchor_out) = fused::anchored(body, &ins, out).ok()??;
            (anchor.kind, anchor.attrs.clone(), anchor_ins, anchor_out)
        }
        None => (op.kind, op.attrs.clone(), ins.clone(), out.clone()),
    };
    let product = Product::of(kind, &attrs, &anchor_ins, &anchor_out)?;
    let params: Vec<String> = ins
        .iter()
        .chain(&outs)
        .map(|b| format!("{}: {}", b.name, b.memref()))
        .collect();
    let params = params.join(", ");
    Some(BlockKernel {
        range: product.tiles() as u64,
        gpu: product.render(Mode::Gpu, &format!("gpu.func @{}", launcher_name(&k.symbol)), &params),
        host: product.render(Mode::Host, &format!("func.func @{}", k.symbol), &params),
    })
}

impl<'a> Product<'a> {
    /// The product an op of `kind` with `attrs` computes from `ins` into `out`, if the tiled
    /// GEMM computes it: f32 operands and result, both operands matrices (or batches of them),
    /// at least `MIN_SIDE` result rows and columns.
    fn of(kind: OpKind, attrs: &Attrs, ins: &'a [Buf], out: &'a Buf) -> Option<Product<'a>> {
        let (a, b) = (ins.first()?, ins.get(1)?);
        if [a, b, out].iter().any(|x| x.dtype != DType::F32 || x.is_empty()) {
            return None;
        }
        let (ra, rb) = (a.rank(), b.rank());
        let product = match kind {
            OpKind::MatMul if ra >= 2 && rb >= 2 => Product {
                a,
                b,
                out,
                form: Form::MatMul,
                batch: out.shape[..out.rank() - 2].to_vec(),
                m: a.shape[ra - 2],
                n: b.shape[rb - 1],
                depth: a.shape[ra - 1],
            },
            OpKind::Gemm => {
                let trans_a = attrs.int("trans_a").ok()? != 0;
                let trans_b = attrs.int("trans_b").ok()? != 0;
                Product {
                    a,
                    b,
                    out,
                    form: Form::Gemm {
                        trans_a,
                        trans_b,
                        scale: GemmScale::of(attrs, ins).ok()?,
                    },
                    batch: Vec::new(),
                    m: out.shape[0],
                    n: out.shape[1],
                    depth: a.shape[usize::from(!trans_a)],
                }
            }
            OpKind::Conv => Product::conv(attrs, ins, out)?,
            _ => return None,
        };
        (product.m >= MIN_SIDE && product.n >= MIN_SIDE).then_some(product)
    }

    /// A 2-D convolution as an implicit GEMM.
    fn conv(attrs: &Attrs, ins: &'a [Buf], out: &'a Buf) -> Option<Product<'a>> {
        let (x, w) = (&ins[0], &ins[1]);
        let [n, _, h, wd] = <[usize; 4]>::try_from(x.shape.as_slice()).ok()?;
        let [m, per_group, kh, kw] = <[usize; 4]>::try_from(w.shape.as_slice()).ok()?;
        let [_, _, _, out_width] = <[usize; 4]>::try_from(out.shape.as_slice()).ok()?;
        let groups = usize::try_from(attrs.int("group").ok()?)
            .ok()
            .filter(|&g| g > 0 && m % g == 0)?;
        let positions = out.shape[2] * out_width;
        Some(Product {
            a: w,
            b: x,
            out,
            form: Form::Conv(Conv {
                window: Window::from_attrs(attrs).ok()?,
                kernel: [kh, kw],
                input: [h, wd],
                out_width,
                bias: ins.get(2),
            }),
            batch: vec![n, groups],
            m: m / groups,
            n: positions,
            depth: per_group * kh * kw,
        })
    }

    /// Tiles along the result's rows and columns.
    fn grid(&self) -> (usize, usize) {
        (self.m.div_ceil(TILE), self.n.div_ceil(TILE))
    }

    /// The tiles of the whole result, one block each.
    fn tiles(&self) -> usize {
        let (rows, cols) = self.grid();
        self.batch.iter().product::<usize>() * rows * cols
    }

    /// The index of A's element `(row, k)` of batch `batch`.
    fn a_at(&self, e: &mut Emitter, batch: &[V], row: &V, k: &V) -> Vec<V> {
        match &self.form {
            Form::MatMul => {
                let mut i = e.bcast_index(&self.a.shape[..self.a.rank() - 2], batch);
                i.extend([row.clone(), k.clone()]);
                i
            }
            Form::Gemm { trans_a: true, .. } => vec![k.clone(), row.clone()],
            Form::Gemm { .. } => vec![row.clone(), k.clone()],
            // the group's weights: `[g * M/G + row, c, ky, kx]` for `k = (c * kh + ky) * kw + kx`
            Form::Conv(conv) => {
                let [kh, kw] = conv.kernel;
                let channel = e.lin(&[(&batch[1], self.m as i64), (row, 1)], 0);
                let c = e.div_idx(k, (kh * kw) as i64);
                let (ky, kx) = conv.window_offsets(e, k);
                vec![channel, c, ky, kx]
            }
        }
    }

    /// The index of B's element `(k, col)` of batch `batch`, and the conditions under which it
    /// is read (else it is zero: a convolution's padding).
    fn b_at(&self, e: &mut Emitter, batch: &[V], k: &V, col: &V) -> (Vec<V>, Vec<V>) {
        match &self.form {
            Form::MatMul => {
                let mut i = e.bcast_index(&self.b.shape[..self.b.rank() - 2], batch);
                i.extend([k.clone(), col.clone()]);
                (i, Vec::new())
            }
            Form::Gemm { trans_b: true, .. } => (vec![col.clone(), k.clone()], Vec::new()),
            Form::Gemm { .. } => (vec![k.clone(), col.clone()], Vec::new()),
            // the input under window offset `(ky, kx)` of channel `c` at output position `col`
            Form::Conv(conv) => {
                let [kh, kw] = conv.kernel;
                let c = e.div_idx(k, (kh * kw) as i64);
                let channel = e.lin(&[(&batch[1], (self.depth / (kh * kw)) as i64), (&c, 1)], 0);
                let (ky, kx) = conv.window_offsets(e, k);
                let out = [
                    e.div_idx(col, conv.out_width as i64),
                    e.rem_idx(col, conv.out_width as i64),
                ];
                let at = conv.window.positions(e, &out, &[ky, kx]);
                let bounds = spans(&fixed(&conv.input));
                let out_size = [self.n / conv.out_width, conv.out_width];
                let inside = conv.window.inside(e, &at, &bounds, &fixed(&out_size), &conv.kernel);
                (vec![batch[0].clone(), channel, at[0].clone(), at[1].clone()], inside)
            }
        }
    }

    /// The index of the result's element `(row, col)` of batch `batch`.
    fn out_at(&self, e: &mut Emitter, batch: &[V], row: &V, col: &V) -> Vec<V> {
        match &self.form {
            Form::Conv(conv) => {
                let channel = e.lin(&[(&batch[1], self.m as i64), (row, 1)], 0);
                let (y, x) = (
                    e.div_idx(col, conv.out_width as i64),
                    e.rem_idx(col, conv.out_width as i64),
                );
                vec![batch[0].clone(), channel, y, x]
            }
            _ => {
                let mut at = batch.to_vec();
                at.extend([row.clone(), col.clone()]);
                at
            }
        }
    }

    /// The result at `at` whose sum is `sum`: scaled and with C added (`gemm`), with the bias
    /// added (a convolution), as it is (`matmul`).
    fn finish_sum(&self, e: &mut Emitter, at: &[V], sum: V) -> V {
        match &self.form {
            Form::MatMul | Form::Conv(Conv { bias: None, .. }) => sum,
            Form::Gemm { scale, .. } => scale.apply(e, Ty::F32, at, sum),
            Form::Conv(Conv { bias: Some(bias), .. }) => {
                let b = e.read(bias, &at[1..2]);
                e.add(&sum, &b)
            }
        }
    }

    /// The function `head` (`gpu.func @name` or `func.func @name`) with the buffer
    /// parameters `params`, in `mode`.
    fn render(&self, mode: Mode, head: &str, params: &str) -> String {
        let mut e = Emitter::new();
        let w = Writer { mode };
        let signature = match mode {
            Mode::Gpu => {
                e.line("%t = gpu.thread_id x");
                e.line("%block = gpu.block_id x");
                e.line(&format!("%sums = memref.alloca() : {}", w.sums_ty()));
                let tile = e.op("tile", Ty::Index, "arith.addi %gpu_lo, %block : index");
                let in_range = e.op("p", Ty::I1, &format!("arith.cmpi ult, {tile}, %gpu_hi : index"));
                e.if_then(&in_range, |e| self.tile(e, &w, &tile));
                format!(
                    "{head}({params}, %gpu_lo: index, %gpu_hi: index) workgroup(%sa: {}, %sb: {}) kernel \
                     attributes {{known_block_size = array<i32: {THREADS_PER_BLOCK}, 1, 1>}}",
                    w.slice_ty(Slice::A),
                    w.slice_ty(Slice::B)
                )
            }
            Mode::Host => {
                for (name, ty) in [
                    ("%sa", w.slice_ty(Slice::A)),
                    ("%sb", w.slice_ty(Slice::B)),
                    ("%sums", w.sums_ty()),
                ] {
                    e.line(&format!("{name} = memref.alloca() : {ty}"));
                }
                let (lo, hi) = (V::scalar("%lo", Ty::Index), V::scalar("%hi", Ty::Index));
                e.for_between(&lo, &hi, self.tiles() as u64, &[], |e, tile, _| {
                    self.tile(e, &w, tile);
                    Vec::new()
                });
                format!("{head}({params}, %lo: index, %hi: index)")
            }
        };
        let text = e.finish(&signature);
        match mode {
            Mode::Gpu => text.replace("\n  return\n}\n", "\n  gpu.return\n}\n"),
            Mode::Host => text,
        }
    }

    /// The work of the block computing tile `tile`.
    fn tile(&self, e: &mut Emitter, w: &Writer, tile: &V) {
        let (rows, cols) = self.grid();
        let matrix = e.div_idx(tile, (rows * cols) as i64);
        let within = e.rem_idx(tile, (rows * cols) as i64);
        let (tile_row, tile_col) = (e.div_idx(&within, cols as i64), e.rem_idx(&within, cols as i64));
        let row0 = e.lin(&[(&tile_row, TILE as i64)], 0);
        let col0 = e.lin(&[(&tile_col, TILE as i64)], 0);
        // the result matrix's index along each batch dimension
        let mut batch = Vec::with_capacity(self.batch.len());
        let mut stride = self.batch.iter().product::<usize>();
        for &d in &self.batch {
            stride /= d;
            let q = e.div_idx(&matrix, stride as i64);
            batch.push(e.rem_idx(&q, d as i64));
        }
        let zero = e.float(Ty::F32, 0.0);
        w.phase(e, false, |e, t| {
            for s in 0..SUMS {
                w.store_sum(e, t, s, &zero);
            }
        });
        let slices = e.begin_for(0, self.depth.div_ceil(SLICE) as i64, 1, &[]);
        let k0 = e.lin(&[(&slices.iv, SLICE as i64)], 0);
        w.phase(e, true, |e, t| self.load_slices(e, w, t, &batch, [&row0, &col0, &k0]));
        w.phase(e, true, |e, t| accumulate(e, w, t));
        e.end_for_with(slices, &[], NOT_UNROLLED);
        w.phase(e, false, |e, t| self.finish(e, w, t, &batch, &row0, &col0));
    }

    /// Thread `t`'s share of copying the slices from depth `k0` on of A's rows from `row0` and
    /// B's columns from `col0` into shared memory: zeros past the matrices' edges.
    fn load_slices(&self, e: &mut Emitter, w: &Writer, t: &V, batch: &[V], [row0, col0, k0]: [&V; 3]) {
        let zero = e.float(Ty::F32, 0.0);
        for r in 0..TILE * SLICE / THREADS_PER_BLOCK as usize {
            let element = e.lin(&[(t, 1)], (r * THREADS_PER_BLOCK as usize) as i64);
            // A's slice, row by row: consecutive threads read along a row
            let (row, k) = (e.div_idx(&element, SLICE as i64), e.rem_idx(&element, SLICE as i64));
            let (m, depth) = (e.lin(&[(row0, 1), (&row, 1)], 0), e.lin(&[(k0, 1), (&k, 1)], 0));
            let inside = [
                self.below(e, &m, self.m, TILE),
                self.below(e, &depth, self.depth, SLICE),
            ];
            let v = e.when(
                &inside.into_iter().flatten().collect::<Vec<_>>(),
                std::slice::from_ref(&zero),
                |e| {
                    let at = self.a_at(e, batch, &m, &depth);
                    vec![e.read(self.a, &at)]
                },
            );
            w.store_shared(e, Slice::A, [&row, &k], &v[0]);
            // B's slice, row by row: consecutive threads read along a row
            let (k, col) = (e.div_idx(&element, TILE as i64), e.rem_idx(&element, TILE as i64));
            let (depth, n) = (e.lin(&[(k0, 1), (&k, 1)], 0), e.lin(&[(col0, 1), (&col, 1)], 0));
            let inside = [
                self.below(e, &depth, self.depth, SLICE),
                self.below(e, &n, self.n, TILE),
            ];
            let (at, padding) = self.b_at(e, batch, &depth, &n);
            let inside: Vec<V> = inside.into_iter().flatten().chain(padding).collect();
            let v = e.when(&inside, std::slice::from_ref(&zero), |e| vec![e.read(self.b, &at)]);
            w.store_shared(e, Slice::B, [&k, &col], &v[0]);
        }
    }

    /// Thread `t` writes its results: each sum, finished (gemm's scaling, the epilogue), to
    /// the result where it is inside it.
    fn finish(&self, e: &mut Emitter, w: &Writer, t: &V, batch: &[V], row0: &V, col0: &V) {
        let (rows, cols) = thread_grid(e, t, row0, col0);
        for (i, row) in rows.iter().enumerate() {
            for (j, col) in cols.iter().enumerate() {
                let inside = [self.below(e, row, self.m, TILE), self.below(e, col, self.n, TILE)];
                let inside: Vec<V> = inside.into_iter().flatten().collect();
                let store = |e: &mut Emitter| {
                    let sum = w.load_sum(e, t, i * PER_THREAD + j);
                    let at = self.out_at(e, batch, row, col);
                    let r = self.finish_sum(e, &at, sum);
                    e.write(self.out, &at, &r);
                };
                match inside.is_empty() {
                    true => store(e),
                    false => {
                        let cond = e.all(&inside);
                        e.if_then(&cond, store);
                    }
                }
            }
        }
    }

    /// `at < extent`, unless tiles of `step` along a dimension of `extent` never cross it.
    fn below(&self, e: &mut Emitter, at: &V, extent: usize, step: usize) -> Option<V> {
        (!extent.is_multiple_of(step)).then(|| {
            let bound = e.idx(extent as i64);
            e.cmp_idx("slt", at, &bound)
        })
    }
}

impl Conv<'_> {
    /// The window offsets `(ky, kx)` of depth index `k = (c * kh + ky) * kw + kx`.
    fn window_offsets(&self, e: &mut Emitter, k: &V) -> (V, V) {
        let [kh, kw] = self.kernel;
        let row = e.div_idx(k, kw as i64);
        (e.rem_idx(&row, kh as i64), e.rem_idx(k, kw as i64))
    }
}

/// Thread `t`'s rows (`row0 + ty + 16i`) and columns (`col0 + tx + 16j`) of the tile.
fn thread_grid(e: &mut Emitter, t: &V, row0: &V, col0: &V) -> (Vec<V>, Vec<V>) {
    let (ty, tx) = (e.div_idx(t, SIDE as i64), e.rem_idx(t, SIDE as i64));
    let rows = (0..PER_THREAD)
        .map(|i| e.lin(&[(row0, 1), (&ty, 1)], (i * SIDE) as i64))
        .collect();
    let cols = (0..PER_THREAD)
        .map(|j| e.lin(&[(col0, 1), (&tx, 1)], (j * SIDE) as i64))
        .collect();
    (rows, cols)
}

/// Thread `t` adds the products of the slices in shared memory into its sums.
fn accumulate(e: &mut Emitter, w: &Writer, t: &V) {
    let zero = e.idx(0);
    let (rows, cols) = thread_grid(e, t, &zero, &zero);
    let sums: Vec<V> = (0..SUMS).map(|s| w.load_sum(e, t, s)).collect();
    let sums = e.nest_acc(&[SLICE], &sums, |e, k, sums| {
        let a: Vec<V> = rows.iter().map(|r| w.load_shared(e, Slice::A, [r, &k[0]])).collect();
        let b: Vec<V> = cols.iter().map(|c| w.load_shared(e, Slice::B, [&k[0], c])).collect();
        (0..SUMS)
            .map(|s| {
                let (x, y) = (&a[s / PER_THREAD], &b[s % PER_THREAD]);
                e.op("s", Ty::F32, &format!("math.fma {x}, {y}, {} : f32", sums[s]))
            })
            .collect()
    });
    for (s, sum) in sums.iter().enumerate() {
        w.store_sum(e, t, s, sum);
    }
}

/// A slice in shared memory: of A (`TILE x SLICE`) or of B (`SLICE x TILE`).
#[derive(Clone, Copy)]
enum Slice {
    A,
    B,
}

impl Slice {
    fn name(self) -> &'static str {
        match self {
            Slice::A => "%sa",
            Slice::B => "%sb",
        }
    }

    fn dims(self) -> (usize, usize) {
        match self {
            Slice::A => (TILE, SLICE),
            Slice::B => (SLICE, TILE),
        }
    }
}

/// Writes the phases in one mode, and the shared and per-thread arrays' accesses in it.
struct Writer {
    mode: Mode,
}

impl Writer {
    /// A phase: `body` for thread `t`; on the GPU followed by a barrier when `barrier`, on the
    /// host run for each thread number in turn.
    fn phase(&self, e: &mut Emitter, barrier: bool, body: impl FnOnce(&mut Emitter, &V)) {
        match self.mode {
            Mode::Gpu => {
                body(e, &V::scalar("%t", Ty::Index));
                if barrier {
                    e.line("gpu.barrier");
                }
            }
            Mode::Host => {
                let (first, threads) = (e.idx(0), e.idx(THREADS_PER_BLOCK as i64));
                e.for_between(&first, &threads, THREADS_PER_BLOCK, &[], |e, t, _| {
                    body(e, t);
                    Vec::new()
                });
            }
        }
    }

    /// The type of a slice's shared array.
    fn slice_ty(&self, slice: Slice) -> String {
        let (rows, cols) = slice.dims();
        match self.mode {
            Mode::Gpu => format!("memref<{rows}x{cols}xf32, 3>"),
            Mode::Host => format!("memref<{rows}x{cols}xf32>"),
        }
    }

    fn load_shared(&self, e: &mut Emitter, slice: Slice, [i, j]: [&V; 2]) -> V {
        let ty = self.slice_ty(slice);
        e.op("x", Ty::F32, &format!("memref.load {}[{i}, {j}] : {ty}", slice.name()))
    }

    fn store_shared(&self, e: &mut Emitter, slice: Slice, [i, j]: [&V; 2], v: &V) {
        let ty = self.slice_ty(slice);
        e.store_line(&format!("memref.store {v}, {}[{i}, {j}] : {ty}", slice.name()));
    }

    /// The type of the threads' sums: a thread's own in private memory on the GPU, a row per
    /// thread on the host.
    fn sums_ty(&self) -> String {
        match self.mode {
            Mode::Gpu => format!("memref<{SUMS}xf32, 5>"),
            Mode::Host => format!("memref<{THREADS_PER_BLOCK}x{SUMS}xf32>"),
        }
    }

    /// The index of thread `t`'s sum `s`.
    fn sum_at(&self, e: &mut Emitter, t: &V, s: usize) -> String {
        let s = e.idx(s as i64);
        match self.mode {
            Mode::Gpu => format!("{s}"),
            Mode::Host => format!("{t}, {s}"),
        }
    }

    fn load_sum(&self, e: &mut Emitter, t: &V, s: usize) -> V {
        let at = self.sum_at(e, t, s);
        e.op("x", Ty::F32, &format!("memref.load %sums[{at}] : {}", self.sums_ty()))
    }

    fn store_sum(&self, e: &mut Emitter, t: &V, s: usize, v: &V) {
        let at = self.sum_at(e, t, s);
        e.store_line(&format!("memref.store {v}, %sums[{at}] : {}", self.sums_ty()));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, ints, one_op, t};
    use super::super::{gpu, lower_graph, MlirToLlvm};
    use mxc_dialects::{Attr, Attrs, DType, OpKind, TensorType};

    /// The block kernel of a one-op graph's kernel on the gpu target, if it has one.
    fn block(kind: OpKind, inputs: &[TensorType], a: Attrs) -> Option<gpu::BlockKernel> {
        let g = one_op(kind, inputs, a);
        let mut loops = lower_graph(&g, None).unwrap();
        gpu::shape_blocks(&g, &mut loops);
        loops.kernels.remove(0).blocks
    }

    #[test]
    fn f32_products_with_enough_rows_and_columns_take_a_block_per_tile() {
        let f = |shape: &[usize]| t(DType::F32, shape);
        let matmul = |a: &[usize], b: &[usize]| block(OpKind::MatMul, &[f(a), f(b)], Attrs::new());
        // 2 x ceil(100 / 64) x ceil(130 / 64) tiles
        assert_eq!(matmul(&[2, 100, 33], &[33, 130]).map(|b| b.range), Some(12));
        assert_eq!(matmul(&[16, 8], &[8, 16]).map(|b| b.range), Some(1));
        // a vector operand, too few rows or columns, another element type
        assert!(matmul(&[33], &[33, 130]).is_none());
        assert!(matmul(&[15, 64], &[64, 64]).is_none());
        assert!(matmul(&[64, 64], &[64, 15]).is_none());
        let f64 = t(DType::F64, &[64, 64]);
        let f64s = block(OpKind::MatMul, &[f64.clone(), f64], Attrs::new());
        assert!(f64s.is_none());
        let gemm = attrs(&[
            ("alpha", Attr::Float(1.0)),
            ("beta", Attr::Float(1.0)),
            ("trans_a", Attr::Int(1)),
            ("trans_b", Attr::Int(0)),
        ]);
        let gemm = block(OpKind::Gemm, &[f(&[40, 200]), f(&[40, 70]), f(&[70])], gemm);
        assert_eq!(gemm.map(|b| b.range), Some(8));
        // a convolution: per image and group, its output channels by its 20x20 positions
        let conv = |w: &[usize], group: i64| {
            let a = attrs(&[
                ("strides", ints(&[1, 1])),
                ("pads", ints(&[1, 1, 1, 1])),
                ("dilations", ints(&[1, 1])),
                ("group", Attr::Int(group)),
            ]);
            block(OpKind::Conv, &[f(&[2, 32, 20, 20]), f(w)], a)
        };
        assert_eq!(conv(&[32, 32, 3, 3], 1).map(|b| b.range), Some(2 * 7));
        assert_eq!(conv(&[64, 16, 3, 3], 2).map(|b| b.range), Some(2 * 2 * 7));
        // depthwise: one output channel a group
        assert!(conv(&[32, 1, 3, 3], 32).is_none());
    }

    #[test]
    fn the_gpu_form_stages_slices_in_workgroup_memory_between_barriers_and_both_forms_verify() {
        let f = |shape: &[usize]| t(DType::F32, shape);
        let k = block(OpKind::MatMul, &[f(&[100, 40]), f(&[40, 90])], Attrs::new()).unwrap();
        assert!(
            k.gpu.starts_with(
                "gpu.func @k0_matmul_kernel(%in0: memref<100x40xf32>, %in1: memref<40x90xf32>, \
                 %out0: memref<100x90xf32>, %gpu_lo: index, %gpu_hi: index) \
                 workgroup(%sa: memref<64x16xf32, 3>, %sb: memref<16x64xf32, 3>) kernel"
            ),
            "{}",
            k.gpu
        );
        // per slice: the copy, a barrier, 16 multiply-adds a step, a barrier
        assert_eq!(k.gpu.matches("gpu.barrier").count(), 2, "{}", k.gpu);
        assert_eq!(k.gpu.matches("math.fma").count(), 16, "{}", k.gpu);
        assert!(k.gpu.contains("memref.alloca() : memref<16xf32, 5>"), "{}", k.gpu);
        // the host form loops over the thread numbers in each of its four phases
        assert!(k.host.starts_with("func.func @k0_matmul("), "{}", k.host);
        assert_eq!(k.host.matches("to %c256 step %c1").count(), 4, "{}", k.host);
        assert!(!k.host.contains("gpu."), "{}", k.host);
        let gpu = format!(
            "module attributes {{gpu.container_module}} {{\ngpu.module @kernels {{\n{}}}\n}}\n",
            k.gpu
        );
        for text in [gpu, format!("module {{\n{}}}\n", k.host)] {
            MlirToLlvm::new()
                .run_pipeline(&text, &["builtin.module()"], "verifying", |_, _| Ok(()))
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
        }
    }
}
