//! The cpu target's register-tiled matrix product, written at the loop level. The result is
//! computed in micro-tiles of `rows` x (`vectors` x lanes) elements: each is accumulated in
//! vector registers over the whole depth (per step of the depth loop, `vectors` vectors of B
//! are loaded and each row's element of A is broadcast and multiplied into them with fused
//! multiply-adds), then finished (gemm's scaling, the fused epilogue: bias, residual,
//! activation) and stored, the last columns under a lane mask and the last rows guarded.
//!
//! The kernel's parallel loop runs over blocks of the output: batch x row blocks x column
//! panels, so threads split a product by M x N tiles. Inside a block, the micro-tiles of one
//! panel are computed top to bottom, so the panel of B (depth x width) stays in the L1 cache
//! while the block of A (sized for the L2 cache) streams past it.
//!
//! B is read either where it lies, row-major (`Panels::RowMajor`: a vector is consecutive
//! columns of one row), or packed (`Panels::Packed`, what `mx.pack` makes of constant weights:
//! panels of `PANEL` columns, each depth x `PANEL` contiguous, zero-padded to whole panels).
//!
//! The sums are f32 (`Sums::Float`: a multiply-add per depth), or exact i32 sums of u8 x i8
//! products (`Sums::ByteGroups`: each step of the depth loop is a group of four depths, A's
//! element the group's four bytes as one i32 and B's vector a 32-bit lane of four i8 per
//! column, `integer.rs`).

use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::sizes::Extent;
use super::vector::VectorIsa;
use mxc_dialects::mx::depth_pairing;
use mxc_dialects::DType;

/// The columns of one packed panel of B: 16 f32, a cache line.
pub const PANEL: usize = 16;

/// The part of the L2 cache a block of A is sized for, in bytes.
const A_BLOCK_BYTES: usize = 192 * 1024;

/// The shape of a micro-tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicroTile {
    pub rows: usize,
    pub vectors: usize,
    pub lanes: usize,
}

impl MicroTile {
    /// The tile for a product of `m` rows: two vectors wide with 32 registers, three with 16;
    /// at most as many rows as let its accumulators, B vectors and broadcast element of A fit
    /// the registers (14 x 2 with 32 registers, 4 x 3 with 16), and as few as cover the `m`
    /// rows in the same number of tiles, so that the last tile is not mostly rows computed
    /// only to be dropped (16 rows are two tiles of 8, not 14 and 2).
    ///
    /// With 16 registers, 4 x 3 reads 7 vectors (3 of B, 4 broadcasts of A) per 12 multiply-
    /// adds where 6 x 2 reads 8, which matters where a core loads one 256-bit vector per cycle
    /// (AMD Zen 1): measured there 2-5% faster on the products of `cargo bench --bench gemm`
    /// (92-97% of the peak against 90-92%), 2-3% on ResNet-50 and BERT-mini, and 7-12% on
    /// MobileNetV2's projections to 24 channels (one tile of 24 columns, not 16 and 8).
    pub fn for_isa(isa: VectorIsa, m: usize) -> MicroTile {
        let vectors = if isa.registers >= 32 { 2 } else { 3 };
        Self::even(isa, m, vectors, Self::most_rows_of(isa, vectors))
    }

    /// The tile for a product whose A is a matrix (`Matrix`): its rows lie a whole depth apart,
    /// each a stream of cache lines of its own (at a depth of 1024 floats, 14 rows fall in
    /// one set of the L1 cache), so with 32 registers the tile is 8 rows of 3 vectors, which
    /// reads fewer rows per multiply-add (measured 10-25% faster than 14 x 2 on the products of
    /// `cargo bench --bench gemm` with AVX-512; the convolutions' rows, a pixel's channels
    /// apart, are faster at 14 x 2); with 16 registers, as `for_isa`.
    pub fn for_matrix(isa: VectorIsa, m: usize) -> MicroTile {
        match isa.registers >= 32 {
            true => Self::even(isa, m, 3, 8),
            false => Self::for_isa(isa, m),
        }
    }

    /// The tile for a product whose depth comes in short runs, each with work of its own per
    /// row (a convolution with few channels finds each row's input run per kernel row): with
    /// 32 registers, up to 4 vectors wide (as many as `n` columns fill) and so fewer rows, which
    /// does that work once for more columns (measured 14% faster than 14 x 2 on ResNet-50's
    /// first convolution, 3 channels, 64 outputs); with 16 registers, as `for_isa`.
    pub fn for_short_runs(isa: VectorIsa, m: usize, n: usize) -> MicroTile {
        let vectors = n.div_ceil(isa.lanes).clamp(2, 4);
        match isa.registers >= 32 {
            true => Self::even(isa, m, vectors, Self::most_rows_of(isa, vectors)),
            false => Self::for_isa(isa, m),
        }
    }

    /// The most rows a two-vector tile can have on `isa`.
    pub fn most_rows(isa: VectorIsa) -> usize {
        Self::most_rows_of(isa, 2)
    }

    /// The most rows a tile `vectors` wide can have on `isa`: its accumulators, a vector of B
    /// per column vector and the broadcast element of A in the registers.
    fn most_rows_of(isa: VectorIsa, vectors: usize) -> usize {
        (isa.registers - 1 - vectors) / vectors
    }

    /// `vectors` wide and at most `most` rows, as even as covering `m` rows allows.
    fn even(isa: VectorIsa, m: usize, vectors: usize, most: usize) -> MicroTile {
        let m = m.max(1);
        MicroTile {
            rows: m.div_ceil(m.div_ceil(most)),
            vectors,
            lanes: isa.lanes,
        }
    }

    /// Columns per tile.
    pub fn width(&self) -> usize {
        self.vectors * self.lanes
    }
}

/// How a micro-tile forms its sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sums {
    /// f32, a fused multiply-add per depth.
    Float,
    /// i32, exact: per step a group of four depths, u8 elements of A times i8 elements of B
    /// (`Emitter::dot_u8_i8`), B packed in groups of four (`mx::depth_pairing` of i8).
    ByteGroups,
}

impl Sums {
    fn ty(self) -> Ty {
        match self {
            Sums::Float => Ty::F32,
            Sums::ByteGroups => Ty::Int { bits: 32, signed: true },
        }
    }

    fn dtype(self) -> DType {
        match self {
            Sums::Float => DType::F32,
            Sums::ByteGroups => DType::I32,
        }
    }
}

/// An index into a buffer computed from the batch index and two more indices.
pub type At<'a> = &'a dyn Fn(&mut Emitter, &[V], &V, &V) -> Vec<V>;

/// Where the product reads B.
pub enum Panels<'a> {
    /// B as it lies: `at(batch, k, column)` is the index of an element, the following columns
    /// next to it in memory.
    RowMajor { buf: &'a Buf, at: At<'a> },
    /// B packed by `mx.pack`: `[ceil(N / PANEL), depth, PANEL]`, the padding zeros; with
    /// more dimensions, one such matrix per batch index.
    Packed(&'a Buf),
}

impl Panels<'_> {
    /// Prefetches packed B at depth `k` for the columns from `column` on (row-major B, whose
    /// rows the hardware streams well, is left alone).
    fn prefetch(&self, e: &mut Emitter, batch: &[V], k: &V, column: &V) {
        if let Panels::Packed(buf) = self {
            let panel = e.div_idx(column, PANEL as i64);
            let batch = &batch[..buf.rank() - 3];
            let zero = e.idx(0);
            let row = e.div_idx(k, depth_step(buf.dtype) as i64);
            let idx = [batch, &[panel, row, zero]].concat();
            e.prefetch(buf, &idx);
        }
    }

    /// `lanes` columns from `column` on, at depth `k` (for i8 panels, the group `k` of four
    /// depths: a lane's four bytes as one i32); only the first `valid` lanes are read from a
    /// row-major B (packed panels are padded, so they are read whole).
    fn load(&self, e: &mut Emitter, batch: &[V], k: &V, column: &V, lanes: usize, valid: usize) -> V {
        match self {
            Panels::RowMajor { buf, at } => {
                let idx = at(e, batch, k, column);
                let mask = (valid < lanes).then(|| e.first_lanes(valid, lanes));
                e.masked(mask, |e| e.read_lanes(buf, &idx, lanes))
            }
            Panels::Packed(buf) => {
                let panel = e.div_idx(column, PANEL as i64);
                let offset = e.rem_idx(column, PANEL as i64);
                let batch = &batch[..buf.rank() - 3];
                match depth_pairing(buf.dtype) {
                    1 => {
                        let idx = [batch, &[panel, k.clone(), offset]].concat();
                        e.read_lanes(buf, &idx, lanes)
                    }
                    4 => {
                        let at = e.lin(&[(&offset, 4)], 0);
                        let idx = [batch, &[panel, k.clone(), at]].concat();
                        e.read_byte_groups(buf, &idx, lanes)
                    }
                    g => {
                        let (pair, which) = (e.div_idx(k, g as i64), e.rem_idx(k, g as i64));
                        let at = e.lin(&[(&offset, g as i64)], 0);
                        let idx = [batch, &[panel, pair, at]].concat();
                        e.read_pair_halves(buf, &idx, lanes, &which)
                    }
                }
            }
        }
    }
}

/// How many depths a step of the depth loop over panels of `dtype` covers: a group of four for
/// i8 panels (`Sums::ByteGroups`), else one.
fn depth_step(dtype: DType) -> usize {
    match depth_pairing(dtype) {
        4 => 1,
        g => g,
    }
}

/// How the rows of A are read: the depth loop of a micro-tile, which reads one element of A
/// per row at each depth `k` and hands them to `step`. The depth is walked in outer steps of
/// equal depth (a matrix: one column; an image under a window: one window position, all its
/// channels), so that it can be cut into chunks at step boundaries.
pub trait RowsOfA {
    /// Written at the start of each iteration of the parallel loop (scratch to fill).
    fn prepare(&self, _e: &mut Emitter) {}

    /// The number of outer steps, and the depth of each.
    fn steps(&self) -> (usize, usize);

    /// The micro-tile for a product of `m` rows read this way.
    fn tile(&self, isa: VectorIsa, m: usize) -> MicroTile {
        MicroTile::for_isa(isa, m)
    }

    /// The depth loop over outer steps `from..to`, for `rows` (indices of A's rows, of the
    /// result's rows), carrying the accumulators from `inits`: at each depth `k`, `step(acc,
    /// k, a)` with `a` A's element of each row gives the next accumulators. Returns the final
    /// ones.
    fn accumulate(&self, e: &mut Emitter, batch: &[V], rows: &[V], inits: &[V], steps: (&V, &V), step: Step) -> Vec<V>;
}

/// One step of a depth loop: `(accumulators, k, A's element of each row) -> accumulators`.
pub type Step<'s> = &'s dyn Fn(&mut Emitter, &[V], &V, &[V]) -> Vec<V>;

/// A as a matrix of `depth` columns: `at(batch, row, k)` is the index of its element.
pub struct Matrix<'a> {
    pub buf: &'a Buf,
    pub depth: usize,
    pub at: At<'a>,
}

impl RowsOfA for Matrix<'_> {
    fn steps(&self) -> (usize, usize) {
        (self.depth, 1)
    }

    fn tile(&self, isa: VectorIsa, m: usize) -> MicroTile {
        MicroTile::for_matrix(isa, m)
    }

    fn accumulate(
        &self,
        e: &mut Emitter,
        batch: &[V],
        rows: &[V],
        inits: &[V],
        (from, to): (&V, &V),
        step: Step,
    ) -> Vec<V> {
        e.for_between(from, to, self.depth as u64, inits, |e, k, acc| {
            let a: Vec<V> = rows
                .iter()
                .map(|row| {
                    let idx = (self.at)(e, batch, row, k);
                    e.read(self.buf, &idx)
                })
                .collect();
            step(e, acc, k, &a)
        })
    }
}

/// A matrix product `out[batch, m, n] = finish(sum over k of A[batch, m, k] * B[batch, k, n])`.
/// The batch and the rows may be sizes only the run knows (`Extent::Run`); the columns and the
/// depth are fixed.
pub struct Product<'a> {
    pub batch: Vec<Extent>,
    pub m: Extent,
    pub n: usize,
    /// How A's rows are read.
    pub a: &'a dyn RowsOfA,
    pub b: Panels<'a>,
    /// The result and the index of its element `(batch, row, column)`.
    pub out: &'a Buf,
    pub out_at: At<'a>,
    /// The value stored at result index `idx` for the accumulated sums `acc` (a vector).
    pub finish: &'a dyn Fn(&mut Emitter, &[V], V) -> V,
    pub sums: Sums,
    /// Where the sums of a vector of columns start, if not from zero.
    pub start: Option<Start<'a>>,
}

/// The value the sums of the `lanes` columns from `column` on start from: a term of the result
/// that depends on the column alone (an integer product's `-zero * column_sums`), added once
/// per micro-tile before the depth loop instead of once per row after it. Exact for integer
/// sums, whose order does not change them.
pub type Start<'a> = &'a dyn Fn(&mut Emitter, &V, usize) -> V;

/// The depth of B a chunk spans, in bytes of one micro-tile's columns: what the L1 cache keeps
/// while the micro-tiles of a block pass over it.
const B_CHUNK_BYTES: usize = 24 * 1024;

/// Into how many equal parts a run of `run` consecutive depth elements is cut so that a part
/// of B, for a tile `width` columns wide, fits `B_CHUNK_BYTES`: the fewest parts that divide
/// the run and fit, none shorter than `SHORTEST_PART` (each part repeats the work of finding
/// the rows' runs); a run no such division fits stays whole.
pub fn run_parts(run: usize, width: usize) -> usize {
    let most_depth = (B_CHUNK_BYTES / (4 * width.max(1))).max(1);
    (1..=run / SHORTEST_PART)
        .find(|&parts| run.is_multiple_of(parts) && run / parts <= most_depth)
        .unwrap_or(1)
}

/// The shortest part `run_parts` cuts a run into.
const SHORTEST_PART: usize = 32;

/// Packed B is prefetched a chunk ahead when a block has at most this many rows: each element of
/// B then feeds at most 2 x 64 FLOPs, so B streams from memory about as fast as one core can
/// draw (ResNet-50's last convolutions, 49 rows: measured 10% faster); with more rows the
/// hardware keeps up and the prefetches only take load slots (measured 15-40% slower).
const PREFETCH_ROWS: usize = 64;

/// Which part of the depth a micro-tile accumulates, and so where its sums start and go.
#[derive(Clone, Copy)]
enum Part<'v> {
    /// All of the depth: from zeros to the result.
    Whole,
    /// Chunk `index` of `count`: from zeros (the first) or the block's scratch, to the scratch
    /// or (the last) the result; decided when it runs, so the micro-tile is written once.
    Chunk { index: &'v V, count: usize },
}

/// Writes the micro-tiles of a block for one part of the depth (outer steps `from..to`).
type Pass<'p> = &'p dyn Fn(&mut Emitter, Part, (&V, &V));

/// How the depth is cut: outer steps per chunk and the number of chunks.
struct Chunks {
    steps: usize,
    per_chunk: usize,
    count: usize,
}

/// Writes the tiled product `p` for the vector unit `isa`.
pub fn emit(e: &mut Emitter, p: &Product, isa: VectorIsa) {
    // the tile and the blocks are chosen for the rows at the cost point
    let tile = p.a.tile(isa, p.m.at_cost_point());
    let width = tile.width();
    let panels = p.n.div_ceil(width);
    let micro_row_extent = e.extent_chunks(&p.m, tile.rows);
    let micro_rows = micro_row_extent.at_cost_point();
    let (steps, per_step) = p.a.steps();
    let per_chunk = (B_CHUNK_BYTES / (4 * width * per_step.max(1))).clamp(1, steps.max(1));
    let chunks = Chunks {
        steps,
        per_chunk,
        count: steps.div_ceil(per_chunk).max(1),
    };
    let per_block = block_micro_rows(per_chunk * per_step, tile, micro_rows);
    let most = most_block_micro_rows(per_chunk * per_step, tile);
    let (blocks, block_rows) = run_time_blocks(e, &micro_row_extent, (per_block, most));
    // the sums of a block's micro-tiles between chunks, per thread (on its stack)
    let scratch = (chunks.count > 1).then(|| {
        let rows = match &block_rows {
            None => per_block,
            Some(_) => most,
        };
        let buf = Buf::new(&e.fresh("sums"), p.sums.dtype(), &[rows * tile.rows, width]);
        e.line(&format!("{} = memref.alloca() : {}", buf.name, buf.memref()));
        buf
    });
    let mut dims = p.batch.clone();
    dims.extend([blocks, Extent::Fixed(panels)]);
    let rows = RowCount::of(e, &p.m, tile.rows);
    let count = e.extent_value(&micro_row_extent);
    e.nest_over(&dims, |e, idx| {
        let (batch, rest) = idx.split_at(p.batch.len());
        let (block, panel) = (&rest[0], &rest[1]);
        p.a.prepare(e);
        let column = e.lin(&[(panel, width as i64)], 0);
        let (first, next) = match &block_rows {
            None => {
                let first = e.lin(&[(block, per_block as i64)], 0);
                let next = e.lin(&[(&first, 1)], per_block as i64);
                (first, next)
            }
            Some(rows) => {
                let first = e.op("t", Ty::Index, &format!("arith.muli {block}, {rows} : index"));
                let next = e.op("t", Ty::Index, &format!("arith.addi {first}, {rows} : index"));
                (first, next)
            }
        };
        let end = e.min_idx(&next, &count);
        let at = Tiles {
            p,
            tile,
            rows: &rows,
            batch,
            column: &column,
            first: &first,
            scratch: scratch.as_ref(),
            ahead: (per_block * tile.rows <= PREFETCH_ROWS).then_some(per_chunk * per_step),
        };
        let tiles = |e: &mut Emitter, vectors: usize, valid: usize| {
            let pass = |e: &mut Emitter, part: Part, steps: (&V, &V)| {
                e.for_between(&first, &end, per_block as u64, &[], |e, micro, _| {
                    at.micro_tile(e, (vectors, valid), micro, part, steps);
                    Vec::new()
                });
            };
            chunks.passes(e, &pass);
        };
        let tail = p.n % width;
        if tail == 0 {
            return tiles(e, tile.vectors, tile.lanes);
        }
        let last = e.idx(panels as i64 - 1);
        let whole = e.cmp_idx("slt", panel, &last);
        e.if_else_like(
            &whole,
            &[],
            |e| {
                tiles(e, tile.vectors, tile.lanes);
                Vec::new()
            },
            |e| {
                tiles(e, tail.div_ceil(tile.lanes), (tail - 1) % tile.lanes + 1);
                Vec::new()
            },
        );
    });
}

impl Chunks {
    /// Writes `pass(part, outer steps)`: one pass over the whole depth, or a loop over the
    /// chunks.
    fn passes(&self, e: &mut Emitter, pass: Pass) {
        let (zero, all) = (e.idx(0), e.idx(self.steps as i64));
        if self.count == 1 {
            return pass(e, Part::Whole, (&zero, &all));
        }
        let per = self.per_chunk as i64;
        let count = e.idx(self.count as i64);
        e.for_between(&zero, &count, self.count as u64, &[], |e, c, _| {
            let from = e.lin(&[(c, per)], 0);
            let next = e.lin(&[(c, per)], per);
            let to = e.min_idx(&next, &all);
            let part = Part::Chunk {
                index: c,
                count: self.count,
            };
            pass(e, part, (&from, &to));
            Vec::new()
        });
    }
}

/// Micro-tile rows per block: at most as many as keep the block of A (`depth` deep) within
/// `A_BLOCK_BYTES`, and blocks as even as that allows (threads take whole blocks, so one short
/// block would leave a thread idle).
fn block_micro_rows(depth: usize, tile: MicroTile, micro_rows: usize) -> usize {
    let most = most_block_micro_rows(depth, tile).min(micro_rows.max(1));
    let blocks = micro_rows.max(1).div_ceil(most);
    micro_rows.max(1).div_ceil(blocks)
}

/// The most micro-tile rows a block has: its block of A (`depth` deep) within `A_BLOCK_BYTES`.
fn most_block_micro_rows(depth: usize, tile: MicroTile) -> usize {
    (A_BLOCK_BYTES / (4 * depth.max(1)) / tile.rows).max(1)
}

/// The blocks of `micro_rows` micro-tile rows: their count, and where the rows are known only
/// at run time, the micro-tile rows of each, at most `most` and as even as that allows
/// (computed at the kernel's entry; `None`: each has `per_block`, `block_micro_rows`').
fn run_time_blocks(e: &mut Emitter, micro_rows: &Extent, (per_block, most): (usize, usize)) -> (Extent, Option<V>) {
    let Extent::Run { value, .. } = micro_rows else {
        return (e.extent_chunks(micro_rows, per_block), None);
    };
    let blocks = e.extent_chunks(micro_rows, most);
    let count = e.extent_value(&blocks);
    let one = e.idx(1);
    let padded = e.hoisted_op(&format!("arith.addi {value}, {count} : index"), Ty::Index, 1);
    let padded = e.hoisted_op(&format!("arith.subi {padded}, {one} : index"), Ty::Index, 1);
    let rows = e.hoisted_op(&format!("arith.divsi {padded}, {count} : index"), Ty::Index, 1);
    (blocks, Some(rows))
}

/// The product's rows as its micro-tiles see them: how many, the last one's index, and from
/// which row of a micro-tile on the row may lie past the end (the last micro-tile's missing
/// rows: none where the rows are a fixed multiple of the tile's; from the second where only
/// the run knows).
struct RowCount {
    count: V,
    last: V,
    partial_from: Option<usize>,
}

impl RowCount {
    fn of(e: &mut Emitter, m: &Extent, tile_rows: usize) -> RowCount {
        let count = e.extent_value(m);
        let last = e.extent_last(m);
        let partial_from = match m {
            Extent::Fixed(m) => Some(m % tile_rows).filter(|&f| f != 0),
            Extent::Run { .. } => Some(1).filter(|_| tile_rows > 1),
        };
        RowCount {
            count,
            last,
            partial_from,
        }
    }
}

/// What the micro-tiles of one iteration of the parallel loop share.
struct Tiles<'a> {
    p: &'a Product<'a>,
    tile: MicroTile,
    rows: &'a RowCount,
    batch: &'a [V],
    /// The first column of the panel.
    column: &'a V,
    /// The block's first micro-tile.
    first: &'a V,
    scratch: Option<&'a Buf>,
    /// How far ahead in the depth packed B is prefetched, if it is: a chunk's depth, so that
    /// the next chunk streams in from memory while the block's micro-tiles pass over this one.
    ahead: Option<usize>,
}

impl Tiles<'_> {
    /// One micro-tile: the rows from `micro * tile.rows` on, `vectors` vectors of columns from
    /// `column` on (`valid` lanes of the last one in the result), over outer depth steps
    /// `steps` as `part` says.
    fn micro_tile(&self, e: &mut Emitter, (vectors, valid): (usize, usize), micro: &V, part: Part, steps: (&V, &V)) {
        let (p, tile, batch) = (self.p, self.tile, self.batch);
        let lanes = tile.lanes;
        let first_row = e.lin(&[(micro, tile.rows as i64)], 0);
        // the last micro-tile may have fewer rows: the missing ones repeat the last row, unstored
        let rows: Vec<V> = (0..tile.rows)
            .map(|i| {
                let r = e.lin(&[(&first_row, 1)], i as i64);
                match self.rows.partial_from {
                    Some(f) if i >= f => e.min_idx(&r, &self.rows.last),
                    _ => r,
                }
            })
            .collect();
        let columns: Vec<V> = (0..vectors)
            .map(|j| e.lin(&[(self.column, 1)], (j * lanes) as i64))
            .collect();
        // the tile's place in the block's scratch: row, then column of each accumulator
        let local = e.lin(&[(micro, tile.rows as i64), (self.first, -(tile.rows as i64))], 0);
        let slot =
            |e: &mut Emitter, i: usize, j: usize| vec![e.lin(&[(&local, 1)], i as i64), e.idx((j * lanes) as i64)];
        let zero = e.zero(p.sums.ty());
        let zeros = match p.start {
            None => vec![e.splat(&zero, lanes); tile.rows * vectors],
            Some(start) => {
                let per_column: Vec<V> = (0..vectors)
                    .map(|j| {
                        let mask = (j + 1 == vectors && valid < lanes).then(|| e.first_lanes(valid, lanes));
                        e.masked(mask, |e| start(e, &columns[j], lanes))
                    })
                    .collect();
                (0..tile.rows * vectors)
                    .map(|a| per_column[a % vectors].clone())
                    .collect()
            }
        };
        let inits: Vec<V> = match (part, self.scratch) {
            (Part::Chunk { index, .. }, Some(scratch)) => {
                let start = e.idx(0);
                let first = e.cmp_idx("eq", index, &start);
                let from_scratch = |e: &mut Emitter| {
                    (0..tile.rows * vectors)
                        .map(|a| {
                            let at = slot(e, a / vectors, a % vectors);
                            e.read_lanes(scratch, &at, lanes)
                        })
                        .collect()
                };
                e.if_else_like(&first, &zeros, |_| zeros.clone(), from_scratch)
            }
            _ => zeros,
        };
        let step = |e: &mut Emitter, acc: &[V], k: &V, a: &[V]| {
            if let Some(ahead) = self.ahead {
                let ahead = e.lin(&[(k, 1)], ahead as i64);
                for column in &columns {
                    p.b.prefetch(e, batch, &ahead, column);
                }
            }
            let b: Vec<V> = (0..vectors)
                .map(|j| {
                    let lanes_read = if j + 1 == vectors { valid } else { lanes };
                    p.b.load(e, batch, k, &columns[j], lanes, lanes_read)
                })
                .collect();
            let mut next = Vec::with_capacity(acc.len());
            for (i, a) in a.iter().enumerate() {
                let a = e.splat(a, lanes);
                for (j, bj) in b.iter().enumerate() {
                    let acc = &acc[i * vectors + j];
                    next.push(match p.sums {
                        Sums::Float => e.fma(&a, bj, acc),
                        Sums::ByteGroups => e.dot_u8_i8(acc, &a, bj),
                    });
                }
            }
            next
        };
        let residuals = p.out.epilogue.as_ref().map_or_else(Vec::new, |ep| ep.residuals());
        if !residuals.is_empty() {
            // a residual's lines for the tile (a panel's width is a cache line), asked for
            // before the depth loop hides the wait
            for row in &rows {
                for col in columns.iter().step_by((PANEL / lanes).max(1)) {
                    let idx = (p.out_at)(e, batch, row, col);
                    residuals.iter().for_each(|r| e.prefetch(r, &idx));
                }
            }
        }
        let sums = p.a.accumulate(e, batch, &rows, &inits, steps, &step);
        let finish = |e: &mut Emitter| self.finish(e, (vectors, valid), &rows, &first_row, &columns, &sums);
        match (part, self.scratch) {
            (Part::Chunk { index, count }, Some(scratch)) => {
                let end = e.idx(count as i64 - 1);
                let last = e.cmp_idx("eq", index, &end);
                let to_scratch = |e: &mut Emitter| {
                    for (a, sum) in sums.iter().enumerate() {
                        let at = slot(e, a / vectors, a % vectors);
                        e.store(scratch, &at, sum);
                    }
                    Vec::new()
                };
                e.if_else_like(
                    &last,
                    &[],
                    |e| {
                        finish(e);
                        Vec::new()
                    },
                    to_scratch,
                );
            }
            _ => finish(e),
        }
    }

    /// The micro-tile's sums finished and stored to the result: the missing rows of the last
    /// micro-tile left out, the lanes past the last column masked.
    fn finish(
        &self,
        e: &mut Emitter,
        (vectors, valid): (usize, usize),
        rows: &[V],
        first_row: &V,
        columns: &[V],
        sums: &[V],
    ) {
        let (p, lanes, batch) = (self.p, self.tile.lanes, self.batch);
        for (i, row) in rows.iter().enumerate() {
            let store = |e: &mut Emitter| {
                for (j, col) in columns.iter().enumerate() {
                    let idx = (p.out_at)(e, batch, row, col);
                    let mask = (j + 1 == vectors && valid < lanes).then(|| e.first_lanes(valid, lanes));
                    e.masked(mask, |e| {
                        let v = (p.finish)(e, &idx, sums[i * vectors + j].clone());
                        e.write(p.out, &idx, &v);
                    });
                }
            };
            if self.rows.partial_from.is_some_and(|f| i >= f) {
                let r = e.lin(&[(first_row, 1)], i as i64);
                let inside = e.cmp_idx("slt", &r, &self.rows.count);
                e.if_then(&inside, store);
            } else {
                store(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, lower_one_for, lower_one_vector, t, AVX2, AVX512};
    use super::{run_parts, MicroTile};
    use mxc_dialects::{Attr, DType, OpKind};

    #[test]
    fn micro_tiles_are_as_even_as_the_rows_allow() {
        let rows = |isa, m| MicroTile::for_isa(isa, m).rows;
        // at most 14 rows (of 2 vectors) with 32 registers, 4 (of 3) with 16; no more tiles
        // than that needs
        assert_eq!([16, 49, 196, 4, 1, 0].map(|m| rows(AVX512, m)), [8, 13, 14, 4, 1, 1]);
        assert_eq!([12, 13, 6, 128].map(|m| rows(AVX2, m)), [4, 4, 3, 4]);
        assert_eq!(
            (
                MicroTile::for_isa(AVX512, 64).vectors,
                MicroTile::for_isa(AVX2, 64).vectors
            ),
            (2, 3)
        );
        assert_eq!((MicroTile::most_rows(AVX512), MicroTile::most_rows(AVX2)), (14, 6));
        // a matrix's rows: 8 x 3 vectors with 32 registers, 4 x 3 with 16
        let matrix = |isa, m| {
            let t = MicroTile::for_matrix(isa, m);
            (t.rows, t.vectors, t.width())
        };
        assert_eq!(matrix(AVX512, 128), (8, 3, 48));
        assert_eq!(matrix(AVX512, 49), (7, 3, 48));
        assert_eq!(matrix(AVX2, 128), (4, 3, 24));
    }

    #[test]
    fn short_runs_take_wider_tiles_with_32_registers() {
        let tile = |isa, m, n| {
            let t = MicroTile::for_short_runs(isa, m, n);
            (t.rows, t.vectors)
        };
        // ResNet's first convolution: 112 x 112 pixels, 64 channels: 6 rows of 4 vectors
        assert_eq!(tile(AVX512, 12544, 64), (6, 4));
        // as wide as the columns fill, at least 2 vectors
        assert_eq!(tile(AVX512, 12544, 40), (9, 3));
        assert_eq!(tile(AVX512, 100, 16), (13, 2));
        assert_eq!(tile(AVX2, 12544, 64), (4, 3));
    }

    #[test]
    fn long_runs_are_cut_into_parts_whose_b_fits_a_chunk() {
        // a tile of 32 columns: 192 deep fit 24 KiB
        assert_eq!([512, 1024, 192, 64, 21].map(|run| run_parts(run, 32)), [4, 8, 1, 1, 1]);
        // 2304 = 12 x 192; 389 (prime) has no parts of 32 or more that fit, so stays whole
        assert_eq!([2304, 389].map(|run| run_parts(run, 32)), [12, 1]);
        // a tile of 64 columns: 96 deep
        assert_eq!(run_parts(512, 64), 8);
    }

    #[test]
    fn packed_b_is_prefetched_a_chunk_ahead_only_for_few_rows() {
        let product = |m: usize| {
            lower_one_for(
                AVX512,
                OpKind::MatMulPacked,
                &[t(DType::F32, &[m, 512]), t(DType::F32, &[3, 512, 16])],
                attrs(&[("n", Attr::Int(48))]),
            )
        };
        // 16 rows: each element of B feeds 32 FLOPs, so B is fetched 128 deep (a chunk) ahead,
        // a line per vector of the tile, inside the depth loop
        let few = product(16);
        check_in_order(&few, &["iter_args", ", %c128 : index", "memref.prefetch %in1"]);
        assert_eq!(few.matches("memref.prefetch").count(), 3, "{few}");
        // 256 rows reuse each chunk of B enough for the hardware to keep up
        assert!(!product(256).contains("memref.prefetch"));
    }

    #[test]
    fn a_matrix_product_on_avx512_holds_24_accumulators_of_16_lanes() {
        // 100 columns: two tiles of 48 and 4 columns masked in a third; 20 rows: 3 tiles of 7
        let m = lower_one_for(
            AVX512,
            OpKind::MatMulPacked,
            &[t(DType::F32, &[20, 64]), t(DType::F32, &[7, 64, 16])],
            attrs(&[("n", Attr::Int(100))]),
        );
        let accumulators = m.lines().find(|l| l.contains("iter_args")).unwrap();
        assert_eq!(accumulators.matches("vector<16xf32>").count(), 21, "{accumulators}");
        check_in_order(
            &m,
            &["the parallel loop over 1x3 of 1x3", "math.fma", "vector.maskedstore"],
        );
    }

    #[test]
    fn a_packed_product_accumulates_micro_tiles_and_masks_the_last_panel() {
        // 28 columns: a tile of 24 and 4 columns in a second, masked; 11 rows: three
        // micro-tiles of 4, the last with 3, the missing row unstored
        let m = lower_one_vector(
            OpKind::MatMulPacked,
            &[t(DType::F32, &[11, 33]), t(DType::F32, &[2, 33, 16])],
            attrs(&[("n", Attr::Int(28))]),
        );
        check_in_order(
            &m,
            &[
                "the parallel loop over 1x2 of 1x2",
                "iter_args",
                "memref.load %in0",
                "vector.load %in1",
                "vector.broadcast",
                "math.fma",
                "vector.store",
                "} else {",
                "vector.maskedstore",
            ],
        );
        // 12 accumulators of 8 lanes: 4 rows x 3 vectors
        let accumulators = m.lines().find(|l| l.contains("iter_args")).unwrap();
        assert_eq!(accumulators.matches("vector<8xf32>").count(), 12, "{accumulators}");
        assert!(
            m.contains("arith.minsi"),
            "the ragged last rows repeat the last one: {m}"
        );
    }

    #[test]
    fn a_deep_product_is_cut_into_chunks_summed_in_scratch() {
        let m = lower_one_vector(
            OpKind::MatMulPacked,
            &[t(DType::F32, &[12, 2048]), t(DType::F32, &[1, 2048, 16])],
            attrs(&[("n", Attr::Int(16))]),
        );
        check_in_order(
            &m,
            &[
                "memref.alloca() : memref<12x24xf32>",
                "scf.for",
                "arith.cmpi eq",
                "scf.if",
                "vector.load %sums",
            ],
        );
    }
}
