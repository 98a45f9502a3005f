//! bf16 and u8 x i8 matrix products and bf16 convolutions on AMX tiles (Intel's Advanced
//! Matrix Extensions): `matmul_packed` of a bf16 `a [..., M, K]` and `conv_nhwc_packed` of one
//! group of a bf16 image, by bf16 panels that hold pairs of depths side by side
//! (`mx::depth_pairing`), summed in f32; and `matmul_integer_packed` of a u8 `a` by i8 panels
//! that hold groups of four depths, summed exactly in i32 (`tdpbusd`: 16 x 16 x 64 multiply-adds
//! per product step, a step 64 depths, B's tile 16 rows of 16 columns x 4 depths; `Kind`).
//!
//! A tile is 16 rows of 64 bytes. Each product step multiplies an A tile (16 rows x 32
//! depths of bf16) by a B tile (16 rows of 16 columns x 2 depths: a panel's 32 depths, read
//! straight from the packed weights) into a 16 x 16 tile of f32 sums (`tdpbf16ps`: 16 x 16 x 32
//! multiply-adds). A block of the result is up to 2 x 2 such tiles (32 rows, 2 panels), so each
//! A and B tile loaded feeds two products; the sums stay in tile registers over the whole depth
//! (a last step of fewer than 32 depths where the depth is not a multiple of 32; it must be
//! even, so that a row of A holds whole pairs), then go to a scratch of 32 x 32 f32 that the
//! epilogue reads in vectors and finishes as the other kernels do (bias, activation, residual,
//! the rounding to the result's type), the columns past the last panel's masked.
//!
//! Where A's rows come from:
//! - a **matrix** (`matmul_packed`, and a pointwise convolution without stride or padding,
//!   whose rows are the image's pixels): an A tile is 16 rows read in place, `K` apart;
//! - a **window** (any other convolution): the result's rows are the output pixels (all
//!   images' in a row), the depth runs over the window's taps, then the channels (the packed
//!   weights' order, `kh, kw, c`). Per row block each row's first input pixel is found once;
//!   per tap, the input row each result row reads (or none, in the padding), whose channels
//!   are copied (zeros for none: a masked load) into a strip of the block's rows on the stack,
//!   which every column block's A tiles are then loaded from. Where the strip would be too
//!   large for the stack, each block copies its rows per step into a scratch tile instead.
//!
//! Every tile has one shape, 16 rows of 64 bytes: the rows past a last block's and the depths
//! past a last step's are zeros (copied through the scratch tiles), because LLVM configures the
//! tile registers' shapes once per kernel and tiles of several shapes can need more than the 8
//! registers there are.
//!
//! The last row block (fewer than 32 rows: which rows to copy and to store) and the last
//! column block (one panel, or a partial one) are code of their own. LLVM configures the tiles
//! (`ldtilecfg`) at the kernel's entry; the runtime asks Linux for the tiles' state before the
//! first kernel runs (`mxc_kernels::amx`).

use super::buffer::Buf;
use super::emit::{Emitter, TileElem, Ty, V};
use super::vector::VectorIsa;
use super::window::Window;
use mxc_dialects::DType;

/// Rows of a tile.
const ROWS: usize = 16;
/// f32 or i32 columns in a row of a sum tile, and columns of a panel.
const COLUMNS: usize = 16;

/// What a product multiplies: bf16 pairs summed in f32, or u8 x i8 groups of four summed in
/// i32. A row of an A tile is 64 bytes either way: `depth` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Bf16,
    Bytes,
}

impl Kind {
    /// Depths in a row of an A tile (64 bytes), and so in a step of the depth loop.
    fn depth(self) -> usize {
        match self {
            Kind::Bf16 => 32,
            Kind::Bytes => 64,
        }
    }

    /// Depths side by side in a 32-bit lane of B's panels (`mx::depth_pairing`).
    fn group(self) -> usize {
        match self {
            Kind::Bf16 => 2,
            Kind::Bytes => 4,
        }
    }

    fn operands(self) -> (TileElem, DType) {
        match self {
            Kind::Bf16 => (TileElem::BF16, DType::BF16),
            Kind::Bytes => (TileElem::I8, DType::U8),
        }
    }

    fn sums(self) -> (TileElem, DType) {
        match self {
            Kind::Bf16 => (TileElem::F32, DType::F32),
            Kind::Bytes => (TileElem::I32, DType::I32),
        }
    }

    /// `c + a x b` on tiles: `tdpbf16ps`, or `tdpbusd` (A's bytes unsigned, B's signed).
    fn multiply_add(self, a: &V, b: &V, c: &V) -> String {
        let types = format!("{}, {}, {}", a.ty.mlir(), b.ty.mlir(), c.ty.mlir());
        match self {
            Kind::Bf16 => format!("amx.tile_mulf {a}, {b}, {c} : {types}"),
            Kind::Bytes => format!("amx.tile_muli {a} zext, {b}, {c} : {types}"),
        }
    }
}

/// What is done to a vector of sums before it is stored at an output index (a bias added).
pub type Finish<'a> = &'a dyn Fn(&mut Emitter, &[V], V) -> V;

/// Whether the machine and the packed weights `bp` allow AMX tiles for bf16 `a` (rows of
/// depth `depth`) into `out`.
fn tiles_fit(isa: VectorIsa, a: &Buf, bp: &Buf, out: &Buf, depth: usize) -> bool {
    isa.amx_bf16
        && isa.lanes == COLUMNS
        && a.dtype == DType::BF16
        && bp.dtype == DType::BF16
        && bp.shape[bp.rank() - 1] == 2 * COLUMNS
        && depth.is_multiple_of(2)
        && !a.is_empty()
        && out.holds_float_vectors()
}

/// Whether the product of the u8 matrix `a` by the i8 panels `bp` (`matmul_integer_packed`)
/// into `out` runs on AMX tiles on `isa`.
pub fn integer_usable(isa: VectorIsa, a: &Buf, bp: &Buf, out: &Buf) -> bool {
    isa.amx_int8
        && isa.lanes == COLUMNS
        && a.dtype == DType::U8
        && bp.dtype == DType::I8
        && bp.shape[bp.rank() - 1] == 4 * COLUMNS
        && !a.is_empty()
        && out.holds_vectors()
}

/// Whether the product of `a` by the packed `bp` into `out` runs on AMX tiles on `isa`.
pub fn usable(isa: VectorIsa, a: &Buf, bp: &Buf, out: &Buf) -> bool {
    tiles_fit(isa, a, bp, out, a.shape[a.rank() - 1])
}

/// Whether a convolution of one group of the channels-last image `x` by the packed `wp` into
/// `out` runs on AMX tiles on `isa`.
pub fn conv_usable(isa: VectorIsa, group: usize, x: &Buf, wp: &Buf, out: &Buf) -> bool {
    group == 1 && x.rank() == 4 && tiles_fit(isa, x, wp, out, x.shape[3])
}

/// The product's sizes and buffers.
struct Product<'a> {
    batch: &'a [usize],
    m: usize,
    k: usize,
    rows: Rows<'a>,
    kind: Kind,
    /// The panels as `[b_batch * P * ceil(K / group), group * 16]`.
    b: Buf,
    /// Rows of one panel: `ceil(K / group)`.
    panel_rows: usize,
    /// Whether B has `a`'s batch dimensions (one matrix per batch index) or none.
    batched_b: bool,
    panels: usize,
    out: &'a Buf,
    /// `[OH, OW]` where the result's rows are a convolution's output pixels (`out` is
    /// `[N, OH, OW, M]`), else `None` (`out` is `[batch.., M, N]`).
    pixels: Option<[usize; 2]>,
    finish: Finish<'a>,
    /// The block's sums, `[32, 32]` f32 or i32, on the calling thread's stack.
    sums: Buf,
    /// A tiles copied before they are loaded (a window's rows, a last step's short rows
    /// padded with zeros): `[32, depth]`.
    staged_a: Buf,
    /// A last step's B tile padded with zero groups: `[16, group * 16]`.
    staged_b: Buf,
}

/// Where the rows of A come from.
enum Rows<'a> {
    /// `a` as `[batch * M, K]`, read in place.
    Matrix(Buf),
    /// A convolution's, gathered from its image.
    Window(Box<Gather<'a>>),
}

/// A convolution's A rows, gathered from the image per window tap.
struct Gather<'a> {
    /// The image as `[N * H * W, C]`.
    x: Buf,
    /// `[H, W, C]` of the image.
    image: [usize; 3],
    /// `[OH, OW]` of the result.
    out_hw: [usize; 2],
    kernel: [usize; 2],
    window: &'a Window,
    /// Per row of the block: its first input pixel's row in `x` (at tap 0, 0; outside the
    /// image where the window starts in the padding), and that pixel's row and column.
    first: [Scratch; 3],
    /// Per row of the block at the current tap: the row of `x` it reads, or -1 for zeros.
    source: Scratch,
    /// The block's rows of A, gathered once per row block for every column block: `[32,
    /// taps * padded]` bf16, tap `t`'s channels from column `t * padded` on, zeros after them
    /// (`None` where that would take more than `STRIP_BYTES` of stack: then each block gathers
    /// its rows per step again).
    strip: Option<Buf>,
    /// The channels rounded up to a whole step (32).
    padded: usize,
}

/// The most stack a window's strip of gathered rows may take (worker threads have 2 MiB).
const STRIP_BYTES: usize = 512 << 10;

/// A `memref<32xindex>` on the stack, one value per row of a block.
struct Scratch(String);

impl Scratch {
    fn new(e: &mut Emitter, hint: &str) -> Scratch {
        let name = e.fresh(hint);
        e.line(&format!("{name} = memref.alloca() : memref<{}xindex>", 2 * ROWS));
        Scratch(name)
    }

    fn load(&self, e: &mut Emitter, row: &V) -> V {
        e.op(
            "i",
            Ty::Index,
            &format!("memref.load {}[{row}] : memref<{}xindex>", self.0, 2 * ROWS),
        )
    }

    fn store(&self, e: &mut Emitter, row: &V, v: &V) {
        e.store_line(&format!(
            "memref.store {v}, {}[{row}] : memref<{}xindex>",
            self.0,
            2 * ROWS
        ));
    }
}

/// Writes `out = a x unpack(bp)` (`matmul_packed`) on AMX tiles (`usable` said it may).
pub fn emit(e: &mut Emitter, a: &Buf, bp: &Buf, out: &Buf) {
    emit_product(e, Kind::Bf16, a, bp, out, &|_, _, v| v);
}

/// Writes the i32 sums `a x unpack(bp)` of a u8 `a` and i8 panels, finished by `finish`
/// (`matmul_integer_packed`'s zero-point correction) on AMX tiles (`integer_usable` said it
/// may).
pub fn emit_integer(e: &mut Emitter, a: &Buf, bp: &Buf, out: &Buf, finish: Finish) {
    emit_product(e, Kind::Bytes, a, bp, out, finish);
}

fn emit_product(e: &mut Emitter, kind: Kind, a: &Buf, bp: &Buf, out: &Buf, finish: Finish) {
    let rank = a.rank();
    let (m, k) = (a.shape[rank - 2], a.shape[rank - 1]);
    let a_rows = a.len() / k;
    let rows = Rows::Matrix(e.view(a, &[a_rows, k]));
    Product::new(e, kind, &out.shape[..rank - 2], m, k, rows, bp, out, None, finish).emit(e);
}

/// Writes the convolution `out = conv_nhwc_packed(x, wp) (+ bias by `finish`)` of one group
/// on AMX tiles (`conv_usable` said it may).
pub fn emit_conv(e: &mut Emitter, window: &Window, kernel: &[usize], x: &Buf, wp: &Buf, out: &Buf, finish: Finish) {
    let [n, h, w, c] = x.shape[..] else {
        unreachable!("a channels-last image has 4 dimensions")
    };
    let [oh, ow] = [out.shape[1], out.shape[2]];
    let pixels = n * oh * ow;
    let plain = kernel == [1, 1] && window.pads.iter().all(|&p| p == 0) && window.strides == [1, 1];
    let rows = match plain {
        // a pointwise convolution is the product of the image's pixels by the weights
        true => Rows::Matrix(e.view(x, &[n * h * w, c])),
        false => Rows::Window(Box::new(Gather {
            strip: {
                let width = kernel[0] * kernel[1] * c.next_multiple_of(Kind::Bf16.depth());
                (2 * ROWS * width * 2 <= STRIP_BYTES).then(|| {
                    let strip = Buf::new(&e.fresh("strip"), DType::BF16, &[2 * ROWS, width]);
                    e.line(&format!("{} = memref.alloca() : {}", strip.name, strip.memref()));
                    strip
                })
            },
            padded: c.next_multiple_of(Kind::Bf16.depth()),
            x: e.view(x, &[n * h * w, c]),
            image: [h, w, c],
            out_hw: [oh, ow],
            kernel: [kernel[0], kernel[1]],
            window,
            first: [Scratch::new(e, "first"), Scratch::new(e, "fih"), Scratch::new(e, "fiw")],
            source: Scratch::new(e, "src"),
        })),
    };
    let depth = kernel[0] * kernel[1] * c;
    Product::new(e, Kind::Bf16, &[], pixels, depth, rows, wp, out, Some([oh, ow]), finish).emit(e);
}

/// `body(last)` for block `index` of `count`: the last block's code apart from the others'
/// (`last` true) unless `same` says they are alike.
fn for_last(e: &mut Emitter, index: &V, count: usize, same: bool, body: impl Fn(&mut Emitter, bool)) {
    if same || count == 1 {
        return body(e, count == 1);
    }
    let last = e.idx(count as i64 - 1);
    let is_last = e.cmp_idx("eq", index, &last);
    e.if_else_like(
        &is_last,
        &[],
        |e| {
            body(e, true);
            Vec::new()
        },
        |e| {
            body(e, false);
            Vec::new()
        },
    );
}

fn tile(rows: usize, columns: usize, elem: TileElem) -> Ty {
    Ty::Tile {
        rows: rows as u8,
        columns: columns as u8,
        elem,
    }
}

/// The heights of the row tiles of a block of `rows` rows (at most 32): one or two tiles.
fn tile_heights(rows: usize) -> Vec<usize> {
    match rows > ROWS {
        true => vec![ROWS, rows - ROWS],
        false => vec![rows],
    }
}

/// A tile of type `ty` loaded from the 2-D `buf` at `at` (its rows `buf`'s rows apart).
fn load(e: &mut Emitter, buf: &Buf, at: [&V; 2], ty: Ty) -> V {
    e.op(
        "t",
        ty,
        &format!(
            "amx.tile_load {}[{}, {}] : {} into {}",
            buf.name,
            at[0],
            at[1],
            buf.memref(),
            ty.mlir()
        ),
    )
}

/// `tiles` A tiles of `kind` of a block's rows in `buf` (its rows the block's), from `column`
/// on.
fn tiles_of(e: &mut Emitter, kind: Kind, buf: &Buf, column: &V, tiles: usize) -> Vec<V> {
    (0..tiles)
        .map(|t| {
            let row = e.idx((t * ROWS) as i64);
            load(e, buf, [&row, column], tile(ROWS, kind.depth(), kind.operands().0))
        })
        .collect()
}

/// One block's place: its batch index, row block and column block, and its shape.
struct Block<'a> {
    batch: &'a [V],
    /// The block's first result row within its batch.
    first_row: V,
    columns: &'a V,
    heights: &'a [usize],
    panels: usize,
    /// Columns of the last panel that are in the result.
    valid: usize,
}

impl<'a> Product<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        e: &mut Emitter,
        kind: Kind,
        batch: &'a [usize],
        m: usize,
        k: usize,
        rows: Rows<'a>,
        bp: &Buf,
        out: &'a Buf,
        pixels: Option<[usize; 2]>,
        finish: Finish<'a>,
    ) -> Product<'a> {
        let stack = |e: &mut Emitter, hint: &str, dtype: DType, shape: &[usize]| {
            let buf = Buf::new(&e.fresh(hint), dtype, shape);
            e.line(&format!("{} = memref.alloca() : {}", buf.name, buf.memref()));
            buf
        };
        let (a_dtype, b_width) = (kind.operands().1, kind.group() * COLUMNS);
        let sums = stack(e, "sums", kind.sums().1, &[2 * ROWS, 2 * COLUMNS]);
        let staged_a = stack(e, "staged", a_dtype, &[2 * ROWS, kind.depth()]);
        let staged_b = stack(e, "staged", bp.dtype, &[ROWS, b_width]);
        let b_rows = bp.len() / b_width;
        Product {
            batch,
            m,
            k,
            rows,
            kind,
            b: e.view(bp, &[b_rows, b_width]),
            panel_rows: bp.shape[bp.rank() - 2],
            batched_b: bp.rank() > 3,
            panels: bp.shape[bp.rank() - 3],
            out,
            pixels,
            finish,
            sums,
            staged_a,
            staged_b,
        }
    }

    /// The loops over the blocks, each block's code.
    fn emit(&self, e: &mut Emitter) {
        let (m, panels) = (self.m, self.panels);
        let n = self.out.shape[self.out.rank() - 1];
        let row_blocks = m.div_ceil(2 * ROWS);
        let column_blocks = panels.div_ceil(2);
        // the parallel loop over the row blocks, each running over every column block (a
        // window's rows gathered once for all of them)
        let mut dims = self.batch.to_vec();
        dims.push(row_blocks);
        e.nest(&dims, |e, idx| {
            let (batch, rows) = idx.split_at(self.batch.len());
            let rows = &rows[0];
            let full_rows = [ROWS, ROWS];
            let last_rows = tile_heights(m - (row_blocks - 1) * 2 * ROWS);
            let last_panels = panels - (column_blocks - 1) * 2;
            let valid = n - (panels - 1) * COLUMNS;
            for_last(e, rows, row_blocks, full_rows == last_rows[..], |e, last_row| {
                let heights: &[usize] = if last_row { &last_rows } else { &full_rows };
                let first_row = e.lin(&[(rows, (2 * ROWS) as i64)], 0);
                self.prepare_rows(e, &first_row, heights);
                let whole = last_panels == 2 && valid == COLUMNS;
                e.for_each(column_blocks, |e, columns| {
                    for_last(e, &columns, column_blocks, whole, |e, last_column| {
                        let (panels, valid) = match last_column {
                            true => (last_panels, valid),
                            false => (2, COLUMNS),
                        };
                        let block = Block {
                            batch,
                            first_row: first_row.clone(),
                            columns: &columns,
                            heights,
                            panels,
                            valid,
                        };
                        self.block(e, &block);
                    });
                });
            });
        });
    }

    /// For a window's rows, each row's first input pixel, found once per row block.
    fn prepare_rows(&self, e: &mut Emitter, first_row: &V, heights: &[usize]) {
        let Rows::Window(g) = &self.rows else {
            return;
        };
        let [h, w, _] = g.image;
        let [oh, ow] = g.out_hw;
        let window = g.window;
        let valid: usize = heights.iter().sum();
        e.for_each(heights.len() * ROWS, |e, r| {
            // the rows past the block's last (zeros in its tiles) repeat the last one's pixel
            let (slot, last) = (r.clone(), e.idx(valid as i64 - 1));
            let r = e.min_idx(&r, &last);
            let pixel = e.lin(&[(first_row, 1), (&r, 1)], 0);
            let (image, at) = (e.div_idx(&pixel, (oh * ow) as i64), e.rem_idx(&pixel, (oh * ow) as i64));
            let (y, x) = (e.div_idx(&at, ow as i64), e.rem_idx(&at, ow as i64));
            let iy = e.lin(&[(&y, window.strides[0] as i64)], -window.pad_begin(0));
            let ix = e.lin(&[(&x, window.strides[1] as i64)], -window.pad_begin(1));
            let row = e.lin(&[(&image, (h * w) as i64), (&iy, w as i64), (&ix, 1)], 0);
            for (scratch, v) in g.first.iter().zip([row, iy, ix]) {
                scratch.store(e, &slot, &v);
            }
        });
        let Some(strip) = &g.strip else {
            return;
        };
        let (rows, c) = (heights.len() * ROWS, g.image[2]);
        for tap in 0..g.kernel[0] * g.kernel[1] {
            g.find_sources(e, heights, tap);
            let copy = |e: &mut Emitter, channel: &V, width: usize| {
                let to = e.lin(&[(channel, 1)], (tap * g.padded) as i64);
                self.copy_rows(e, rows, width, |e, r| g.source_row(e, r), channel, strip, &to);
            };
            let depth = self.kind.depth();
            let steps = c / depth;
            if steps > 0 {
                let open = e.begin_for(0, (steps * depth) as i64, depth as i64, &[]);
                let channel = open.iv.clone();
                copy(e, &channel, depth);
                e.end_for(open, &[]);
            }
            if !c.is_multiple_of(depth) {
                let channel = e.idx((steps * depth) as i64);
                copy(e, &channel, c % depth);
            }
        }
    }

    /// One block: its sums over the whole depth, then the epilogue.
    fn block(&self, e: &mut Emitter, block: &Block) {
        let flat_batch = flat_index(e, block.batch, self.batch);
        let pairs = self.panel_rows;
        let b_matrix = match self.batched_b {
            true => flat_batch.clone(),
            false => e.idx(0),
        };
        // where each of the block's panels starts among B's rows
        let panel_rows: Vec<V> = (0..block.panels)
            .map(|j| {
                let panel = e.lin(&[(block.columns, 2)], j as i64);
                e.lin(&[(&b_matrix, (self.panels * pairs) as i64), (&panel, pairs as i64)], 0)
            })
            .collect();
        // every tile of the kernel is 16 rows of 64 bytes, rows past the block's last zeros:
        // the tile registers' shapes are configured once per kernel, and tiles of several
        // shapes (a last block's fewer rows, a last step's fewer depths) can need more
        // registers than the 8 there are
        let sum_tile = tile(ROWS, COLUMNS, self.kind.sums().0);
        let tiles = block.heights.len();
        let mut sums: Vec<V> = (0..tiles * block.panels)
            .map(|_| e.op("acc", sum_tile, &format!("amx.tile_zero : {}", sum_tile.mlir())))
            .collect();
        let step = Step {
            block,
            panel_rows: &panel_rows,
        };
        sums = match &self.rows {
            Rows::Matrix(a) => {
                let first = e.lin(&[(&flat_batch, self.m as i64), (&block.first_row, 1)], 0);
                let a_rows: Vec<V> = (0..block.heights.len())
                    .map(|i| e.lin(&[(&first, 1)], (i * ROWS) as i64))
                    .collect();
                let valid: usize = block.heights.iter().sum();
                let partial = valid < tiles * ROWS;
                self.depth_run(e, sums, 0, self.k, &step, &|e, depth, width| {
                    if width < self.kind.depth() || partial {
                        let source = |e: &mut Emitter, r: &V| {
                            let row = e.lin(&[(&a_rows[0], 1), (r, 1)], 0);
                            let inside = partial.then(|| {
                                let valid = e.idx(valid as i64);
                                e.cmp_idx("slt", r, &valid)
                            });
                            (a.clone(), row, inside)
                        };
                        return self.stage_rows(e, tiles, width, source, depth);
                    }
                    let whole = tile(ROWS, self.kind.depth(), self.kind.operands().0);
                    a_rows.iter().map(|row| load(e, a, [row, depth], whole)).collect()
                })
            }
            Rows::Window(g) => {
                let c = g.image[2];
                for tap in 0..g.kernel[0] * g.kernel[1] {
                    if g.strip.is_none() {
                        g.find_sources(e, block.heights, tap);
                    }
                    sums = self.depth_run(e, sums, tap * c, c, &step, &|e, depth, width| {
                        let channel = e.lin(&[(depth, 1)], -((tap * c) as i64));
                        match &g.strip {
                            Some(strip) => {
                                let column = e.lin(&[(&channel, 1)], (tap * g.padded) as i64);
                                tiles_of(e, self.kind, strip, &column, tiles)
                            }
                            None => self.stage_rows(e, tiles, width, |e, r| g.source_row(e, r), &channel),
                        }
                    });
                }
                sums
            }
        };
        for (i, _) in block.heights.iter().enumerate() {
            for j in 0..block.panels {
                let at = [e.idx((i * ROWS) as i64), e.idx((j * COLUMNS) as i64)];
                let c = &sums[i * block.panels + j];
                e.store_line(&format!(
                    "amx.tile_store {}[{}, {}], {c} : {}, {}",
                    self.sums.name,
                    at[0],
                    at[1],
                    self.sums.memref(),
                    c.ty.mlir()
                ));
            }
        }
        self.finish(e, block);
    }

    /// The sums `acc` carried over depths `start..start + len` in steps of a tile row's depths
    /// (32 bf16, 64 bytes; a last, shorter step where `len` is not a multiple);
    /// `a_tiles(depth, width)` gives the A tiles of the step at `depth`, a whole step wide
    /// (zeros past `width`). Every tile keeps the shape
    /// of a whole step: the tile registers' shapes are configured once per kernel, and a last
    /// step of other shapes would need more registers than the 8 there are.
    fn depth_run(
        &self,
        e: &mut Emitter,
        acc: Vec<V>,
        start: usize,
        len: usize,
        step: &Step,
        a_tiles: &dyn Fn(&mut Emitter, &V, usize) -> Vec<V>,
    ) -> Vec<V> {
        let whole = self.kind.depth();
        let steps = len / whole;
        let mut acc = acc;
        if steps > 0 {
            let end = (start + steps * whole) as i64;
            let open = e.begin_for(start as i64, end, whole as i64, &acc);
            let depth = open.iv.clone();
            let carried = open.carried.clone();
            let a = a_tiles(e, &depth, whole);
            let next = self.products(e, &carried, &a, &depth, whole, step);
            acc = e.end_for(open, &next);
        }
        if !len.is_multiple_of(whole) {
            let depth = e.idx((start + steps * whole) as i64);
            let width = len % whole;
            let a = a_tiles(e, &depth, width);
            acc = self.products(e, &acc, &a, &depth, width, step);
        }
        acc
    }

    /// The sums `acc` plus the products of the A tiles `a` by the block's B tiles at `depth`.
    fn products(&self, e: &mut Emitter, acc: &[V], a: &[V], depth: &V, width: usize, step: &Step) -> Vec<V> {
        let (whole, group) = (self.kind.depth(), self.kind.group());
        let pair_row = e.div_idx(depth, group as i64);
        let b_tile = tile(whole / group, group * COLUMNS, self.kind.operands().0);
        let b: Vec<V> = step
            .panel_rows
            .iter()
            .map(|start| {
                let row = e.lin(&[(start, 1), (&pair_row, 1)], 0);
                let zero = e.idx(0);
                if width == whole {
                    return load(e, &self.b, [&row, &zero], b_tile);
                }
                // the last step's pairs or groups (a last group padded with zeros in the
                // panels), then zeros: the rows past them are another panel's
                e.for_each(whole / group, |e, r| {
                    let inside = e.idx(width.div_ceil(group) as i64);
                    let inside = e.cmp_idx("slt", &r, &inside);
                    let at = e.lin(&[(&row, 1), (&r, 1)], 0);
                    let at = e.select(&inside, &at, &row);
                    let mask = e.splat(&inside, group * COLUMNS);
                    let v = e.masked(Some(mask), |e| e.vload(&self.b, &[at, zero.clone()], group * COLUMNS));
                    e.vstore(&self.staged_b, &[r, zero.clone()], &v);
                });
                load(e, &self.staged_b, [&zero, &zero], b_tile)
            })
            .collect();
        let panels = step.block.panels;
        let mut next = Vec::with_capacity(acc.len());
        for (i, ai) in a.iter().enumerate() {
            for (j, bj) in b.iter().enumerate() {
                let c = &acc[i * panels + j];
                let product = self.kind.multiply_add(ai, bj, c);
                next.push(e.op("acc", c.ty, &product));
            }
        }
        next
    }

    /// `tiles` A tiles copied through `staged_a` (`copy_rows`), then loaded.
    fn stage_rows(
        &self,
        e: &mut Emitter,
        tiles: usize,
        width: usize,
        source: impl Fn(&mut Emitter, &V) -> (Buf, V, Option<V>),
        column: &V,
    ) -> Vec<V> {
        let zero = e.idx(0);
        self.copy_rows(e, tiles * ROWS, width, source, column, &self.staged_a, &zero);
        tiles_of(e, self.kind, &self.staged_a, &zero, tiles)
    }

    /// For each of `rows` rows `r`, `width` elements of row `source(r)` of the buffer it names
    /// from column `column` on (none, and zeros, where its condition is false), then zeros to
    /// 32, copied to row `r` of `to` from column `to_column` on.
    #[allow(clippy::too_many_arguments)]
    fn copy_rows(
        &self,
        e: &mut Emitter,
        rows: usize,
        width: usize,
        source: impl Fn(&mut Emitter, &V) -> (Buf, V, Option<V>),
        column: &V,
        to: &Buf,
        to_column: &V,
    ) {
        e.for_each(rows, |e, r| {
            let (buf, row, inside) = source(e, &r);
            let zero = e.idx(0);
            let depth = self.kind.depth();
            let lanes = e.first_lanes(width, depth);
            let mask = match &inside {
                // a row in the padding loads nothing (every lane masked) from row 0
                Some(inside) => {
                    let all = e.splat(inside, depth);
                    e.and(&all, &lanes)
                }
                None => lanes,
            };
            let row = match &inside {
                Some(inside) => e.select(inside, &row, &zero),
                None => row,
            };
            let v = e.masked(Some(mask), |e| e.vload(&buf, &[row, column.clone()], depth));
            e.vstore(to, &[r, to_column.clone()], &v);
        });
    }

    /// The block's sums, in the scratch, finished and written to the result a row at a time.
    fn finish(&self, e: &mut Emitter, block: &Block) {
        let lanes = COLUMNS;
        for (i, &h) in block.heights.iter().enumerate() {
            e.for_each(h, |e, r| {
                let local = e.lin(&[(&r, 1)], (i * ROWS) as i64);
                let row = e.lin(&[(&block.first_row, 1), (&local, 1)], 0);
                let at = self.out_row(e, block.batch, &row);
                for j in 0..block.panels {
                    let slot = [local.clone(), e.idx((j * COLUMNS) as i64)];
                    let column = e.lin(&[(block.columns, (2 * COLUMNS) as i64)], (j * COLUMNS) as i64);
                    let idx = [&at[..], &[column]].concat();
                    let mask =
                        (j + 1 == block.panels && block.valid < lanes).then(|| e.first_lanes(block.valid, lanes));
                    let v = e.read_lanes(&self.sums, &slot, lanes);
                    let v = (self.finish)(e, &idx, v);
                    e.masked(mask, |e| e.write(self.out, &idx, &v));
                }
            });
        }
    }

    /// The output index of result row `row` (of batch `batch`), all but its column.
    fn out_row(&self, e: &mut Emitter, batch: &[V], row: &V) -> Vec<V> {
        match self.pixels {
            Some([oh, ow]) => {
                let (image, at) = (e.div_idx(row, (oh * ow) as i64), e.rem_idx(row, (oh * ow) as i64));
                let (y, x) = (e.div_idx(&at, ow as i64), e.rem_idx(&at, ow as i64));
                vec![image, y, x]
            }
            None => [batch, std::slice::from_ref(row)].concat(),
        }
    }
}

/// What a depth step's products need of the block.
struct Step<'a> {
    block: &'a Block<'a>,
    panel_rows: &'a [V],
}

impl Gather<'_> {
    /// Per row of the block's tiles, the row of the image it reads at window tap `tap` (taps
    /// row-major over the window), or -1 where that falls in the padding or past the block's
    /// rows (`heights`).
    fn find_sources(&self, e: &mut Emitter, heights: &[usize], tap: usize) {
        let [h, w, _] = self.image;
        let (i, j) = (tap / self.kernel[1], tap % self.kernel[1]);
        let (dy, dx) = (
            (i * self.window.dilations[0]) as i64,
            (j * self.window.dilations[1]) as i64,
        );
        let valid: usize = heights.iter().sum();
        e.for_each(heights.len() * ROWS, |e, r| {
            let [first, iy, ix] = &self.first;
            let (first, iy, ix) = (first.load(e, &r), iy.load(e, &r), ix.load(e, &r));
            let (y, x) = (e.lin(&[(&iy, 1)], dy), e.lin(&[(&ix, 1)], dx));
            let bounds = [(&y, h), (&x, w)];
            let mut inside = Vec::new();
            for (v, size) in bounds {
                let (zero, size) = (e.idx(0), e.idx(size as i64));
                inside.push(e.cmp_idx("sge", v, &zero));
                inside.push(e.cmp_idx("slt", v, &size));
            }
            let last = e.idx(valid as i64);
            inside.push(e.cmp_idx("slt", &r, &last));
            let inside = e.all(&inside);
            let row = e.lin(&[(&first, 1)], dy * w as i64 + dx);
            let none = e.idx(-1);
            let source = e.select(&inside, &row, &none);
            self.source.store(e, &r, &source);
        });
    }

    /// The image row result row `r` of the block reads at the current tap, and whether it is
    /// inside the image (`find_sources`).
    fn source_row(&self, e: &mut Emitter, r: &V) -> (Buf, V, Option<V>) {
        let source = self.source.load(e, r);
        let zero = e.idx(0);
        let inside = e.cmp_idx("sge", &source, &zero);
        (self.x.clone(), source, Some(inside))
    }
}

/// The batch index `idx` (of dimensions `dims`) as one row-major number.
fn flat_index(e: &mut Emitter, idx: &[V], dims: &[usize]) -> V {
    let mut stride = 1i64;
    let mut terms = Vec::with_capacity(idx.len());
    for (i, &d) in idx.iter().zip(dims).rev() {
        terms.push((i, stride));
        stride *= d as i64;
    }
    e.lin(&terms, 0)
}

#[cfg(test)]
mod tests;
