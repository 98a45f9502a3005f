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

use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::vector::VectorIsa;

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
    /// The largest tile two vectors wide whose accumulators, B vectors and broadcast element of
    /// A fit the registers (6 rows with 16 registers, 14 with 32), with no more rows than the
    /// product has.
    pub fn for_isa(isa: VectorIsa, m: usize) -> MicroTile {
        let vectors = 2;
        let rows = (isa.registers - vectors - 1) / vectors;
        MicroTile {
            rows: rows.min(m).max(1),
            vectors,
            lanes: isa.lanes,
        }
    }

    /// Columns per tile.
    pub fn width(&self) -> usize {
        self.vectors * self.lanes
    }
}

/// An index into a buffer computed from the batch index and two more indices.
pub type At<'a> = &'a dyn Fn(&mut Emitter, &[V], &V, &V) -> Vec<V>;

/// Where the product reads B.
pub enum Panels<'a> {
    /// B as it lies: `at(batch, k, column)` is the index of an element, the following columns
    /// next to it in memory.
    RowMajor { buf: &'a Buf, at: At<'a> },
    /// B packed by `mx.pack`: `[ceil(N / PANEL), depth, PANEL]`, the padding zeros.
    Packed(&'a Buf),
}

impl Panels<'_> {
    /// `lanes` columns from `column` on, at depth `k`; only the first `valid` lanes are read
    /// from a row-major B (packed panels are padded, so they are read whole).
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
                e.read_lanes(buf, &[panel, k.clone(), offset], lanes)
            }
        }
    }
}

/// A matrix product `out[batch, m, n] = finish(sum over k of A[batch, m, k] * B[batch, k, n])`.
pub struct Product<'a> {
    pub batch: &'a [usize],
    pub m: usize,
    pub n: usize,
    pub depth: usize,
    /// A and the index of its element `(batch, row, k)`.
    pub a: &'a Buf,
    pub a_at: At<'a>,
    pub b: Panels<'a>,
    /// The result and the index of its element `(batch, row, column)`.
    pub out: &'a Buf,
    pub out_at: At<'a>,
    /// The value stored at result index `idx` for the accumulated sums `acc` (a vector).
    pub finish: &'a dyn Fn(&mut Emitter, &[V], V) -> V,
}

/// Writes the tiled product `p` for the vector unit `isa`.
pub fn emit(e: &mut Emitter, p: &Product, isa: VectorIsa) {
    let tile = MicroTile::for_isa(isa, p.m);
    let width = tile.width();
    let panels = p.n.div_ceil(width);
    let micro_rows = p.m.div_ceil(tile.rows);
    let per_block = block_micro_rows(p.depth, tile, micro_rows);
    let blocks = micro_rows.div_ceil(per_block);
    let mut dims = p.batch.to_vec();
    dims.extend([blocks, panels]);
    e.nest(&dims, |e, idx| {
        let (batch, rest) = idx.split_at(p.batch.len());
        let (block, panel) = (&rest[0], &rest[1]);
        let column = e.lin(&[(panel, width as i64)], 0);
        let first = e.lin(&[(block, per_block as i64)], 0);
        let next = e.lin(&[(&first, 1)], per_block as i64);
        let count = e.idx(micro_rows as i64);
        let end = e.min_idx(&next, &count);
        let tiles = |e: &mut Emitter, vectors: usize, valid: usize| {
            e.for_between(&first, &end, per_block as u64, &[], |e, micro, _| {
                micro_tile(e, p, tile, (vectors, valid), batch, micro, &column);
                Vec::new()
            });
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

/// Micro-tile rows per block: as many as keep the block of A within `A_BLOCK_BYTES`.
fn block_micro_rows(depth: usize, tile: MicroTile, micro_rows: usize) -> usize {
    let rows = A_BLOCK_BYTES / (4 * depth.max(1));
    (rows / tile.rows).clamp(1, micro_rows.max(1))
}

/// One micro-tile: the rows from `micro * tile.rows` on, `vectors` vectors of columns from
/// `column` on (`valid` lanes of the last one in the result).
fn micro_tile(
    e: &mut Emitter,
    p: &Product,
    tile: MicroTile,
    (vectors, valid): (usize, usize),
    batch: &[V],
    micro: &V,
    column: &V,
) {
    let lanes = tile.lanes;
    let first_row = e.lin(&[(micro, tile.rows as i64)], 0);
    // the last micro-tile may have fewer rows: the missing ones repeat the last row, unstored
    let full_rows = p.m % tile.rows;
    let last_row = e.idx(p.m as i64 - 1);
    let rows: Vec<V> = (0..tile.rows)
        .map(|i| {
            let r = e.lin(&[(&first_row, 1)], i as i64);
            match full_rows {
                0 => r,
                f if i < f => r,
                _ => e.min_idx(&r, &last_row),
            }
        })
        .collect();
    let columns: Vec<V> = (0..vectors)
        .map(|j| e.lin(&[(column, 1)], (j * lanes) as i64))
        .collect();
    let zero = e.zero(Ty::F32);
    let zeros = vec![e.splat(&zero, lanes); tile.rows * vectors];
    let sums = e.nest_acc(&[p.depth], &zeros, |e, k, acc| {
        let k = &k[0];
        let b: Vec<V> = (0..vectors)
            .map(|j| {
                let lanes_read = if j + 1 == vectors { valid } else { lanes };
                p.b.load(e, batch, k, &columns[j], lanes, lanes_read)
            })
            .collect();
        let mut next = Vec::with_capacity(acc.len());
        for (i, row) in rows.iter().enumerate() {
            let at = (p.a_at)(e, batch, row, k);
            let a = e.read(p.a, &at);
            let a = e.splat(&a, lanes);
            for (j, bj) in b.iter().enumerate() {
                next.push(e.fma(&a, bj, &acc[i * vectors + j]));
            }
        }
        next
    });
    let rows_left = e.idx(p.m as i64);
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
        if full_rows != 0 && i >= full_rows {
            let r = e.lin(&[(&first_row, 1)], i as i64);
            let inside = e.cmp_idx("slt", &r, &rows_left);
            e.if_then(&inside, store);
        } else {
            store(e);
        }
    }
}
