//! bf16 matrix products on AMX tiles (Intel's Advanced Matrix Extensions): `matmul_packed` of
//! a bf16 `a [..., M, K]` by bf16 panels that hold pairs of depths side by side
//! (`mx::depth_pairing`), summed in f32.
//!
//! A tile is up to 16 rows of 64 bytes. Each product step multiplies an A tile (16 rows x 32
//! depths of bf16, read straight from `a`, whose rows lie `K` apart) by a B tile (16 rows of 16
//! columns x 2 depths: a panel's 32 depths, read straight from the packed weights) into a 16 x 16
//! tile of f32 sums (`tdpbf16ps`: 16 x 16 x 32 multiply-adds). A block of the result is up to
//! 2 x 2 such tiles (32 rows, 2 panels), so each A and B tile loaded feeds two products; the
//! sums stay in tile registers over the whole depth (a last step of fewer than 32 depths where
//! `K` is not a multiple of 32; `K` must be even, so that a row of A holds whole pairs), then go
//! to a scratch of 32 x 32 f32 that the epilogue reads in vectors and finishes as the other
//! kernels do (bias, activation, residual, the rounding to the result's type), the columns past
//! the last panel's masked. The parallel loop runs over batch x row blocks x column blocks.
//!
//! Tile shapes are static in MLIR's `amx` dialect, so the last row block (fewer than 32 rows)
//! and the last column block (one panel, or a partial one) are code of their own. LLVM
//! configures the tiles (`ldtilecfg`) at the kernel's entry; the runtime asks Linux for the
//! tiles' state before the first kernel runs (`mxc_kernels::amx`).

use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::vector::VectorIsa;
use mxc_dialects::DType;

/// Rows of a tile.
const ROWS: usize = 16;
/// bf16 depths in a row of an A tile (64 bytes).
const DEPTH: usize = 32;
/// f32 columns in a row of a sum tile, and columns of a panel.
const COLUMNS: usize = 16;

/// Whether the product of `a` by the packed `bp` into `out` runs on AMX tiles on `isa`.
pub fn usable(isa: VectorIsa, a: &Buf, bp: &Buf, out: &Buf) -> bool {
    let depth = a.shape[a.rank() - 1];
    isa.amx_bf16
        && isa.lanes == COLUMNS
        && a.dtype == DType::BF16
        && bp.dtype == DType::BF16
        && bp.shape[bp.rank() - 1] == 2 * COLUMNS
        && depth.is_multiple_of(2)
        && !a.is_empty()
        && out.holds_float_vectors()
}

/// The product's sizes and buffers.
struct Product<'a> {
    batch: &'a [usize],
    m: usize,
    k: usize,
    /// `a` as `[batch * M, K]`.
    a: Buf,
    /// The panels as `[b_batch * P * K/2, 32]`.
    b: Buf,
    /// Whether B has `a`'s batch dimensions (one matrix per batch index) or none.
    batched_b: bool,
    panels: usize,
    out: &'a Buf,
    /// The block's sums, `[32, 32]` f32, on the calling thread's stack.
    sums: Buf,
}

/// Writes `out = a x unpack(bp)` (`matmul_packed`) on AMX tiles (`usable` said it may).
pub fn emit(e: &mut Emitter, a: &Buf, bp: &Buf, out: &Buf) {
    let rank = a.rank();
    let (m, k) = (a.shape[rank - 2], a.shape[rank - 1]);
    let n = out.shape[rank - 1];
    let batch = &out.shape[..rank - 2];
    let panels = bp.shape[bp.rank() - 3];
    let a_rows = a.len() / k;
    let b_rows = bp.len() / (2 * COLUMNS);
    let sums = Buf::new(&e.fresh("sums"), DType::F32, &[2 * ROWS, 2 * COLUMNS]);
    e.line(&format!("{} = memref.alloca() : {}", sums.name, sums.memref()));
    let p = Product {
        batch,
        m,
        k,
        a: e.view(a, &[a_rows, k]),
        b: e.view(bp, &[b_rows, 2 * COLUMNS]),
        batched_b: bp.rank() > 3,
        panels,
        out,
        sums,
    };
    let row_blocks = m.div_ceil(2 * ROWS);
    let column_blocks = panels.div_ceil(2);
    let mut dims = batch.to_vec();
    dims.extend([row_blocks, column_blocks]);
    e.nest(&dims, |e, idx| {
        let (batch, rest) = idx.split_at(p.batch.len());
        let (rows, columns) = (&rest[0], &rest[1]);
        let full_rows = [ROWS, ROWS];
        let last_rows = tile_heights(m - (row_blocks - 1) * 2 * ROWS);
        let last_panels = panels - (column_blocks - 1) * 2;
        let valid = n - (panels - 1) * COLUMNS;
        for_last(e, rows, row_blocks, full_rows == last_rows[..], |e, last_row| {
            let heights: &[usize] = if last_row { &last_rows } else { &full_rows };
            let whole = last_panels == 2 && valid == COLUMNS;
            for_last(e, columns, column_blocks, whole, |e, last_column| {
                let (block_panels, valid) = match last_column {
                    true => (last_panels, valid),
                    false => (2, COLUMNS),
                };
                p.block(e, batch, rows, columns, heights, (block_panels, valid));
            });
        });
    });
}

/// The heights of the row tiles of a block of `rows` rows (at most 32): one or two tiles.
fn tile_heights(rows: usize) -> Vec<usize> {
    match rows > ROWS {
        true => vec![ROWS, rows - ROWS],
        false => vec![rows],
    }
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

fn tile(rows: usize, columns: usize, f32: bool) -> Ty {
    Ty::Tile {
        rows: rows as u8,
        columns: columns as u8,
        f32,
    }
}

impl Product<'_> {
    /// One block: row tiles of `heights` from row `2 * 16 * rows` on, `panels` panels from panel
    /// `2 * columns` on (`valid` columns of the last one in the result).
    fn block(
        &self,
        e: &mut Emitter,
        batch: &[V],
        rows: &V,
        columns: &V,
        heights: &[usize],
        (panels, valid): (usize, usize),
    ) {
        let flat_batch = flat_index(e, batch, self.batch);
        let first_row = e.lin(&[(&flat_batch, self.m as i64), (rows, (2 * ROWS) as i64)], 0);
        let pairs = self.k / 2;
        let b_matrix = match self.batched_b {
            true => flat_batch.clone(),
            false => e.idx(0),
        };
        // where each of the block's panels starts among B's rows
        let panel_rows: Vec<V> = (0..panels)
            .map(|j| {
                let panel = e.lin(&[(columns, 2)], j as i64);
                e.lin(&[(&b_matrix, (self.panels * pairs) as i64), (&panel, pairs as i64)], 0)
            })
            .collect();
        let a_rows: Vec<V> = (0..heights.len())
            .map(|i| e.lin(&[(&first_row, 1)], (i * ROWS) as i64))
            .collect();
        let mut sums: Vec<V> = Vec::new();
        for &h in heights {
            for _ in 0..panels {
                let ty = tile(h, COLUMNS, true);
                sums.push(e.op("acc", ty, &format!("amx.tile_zero : {}", ty.mlir())));
            }
        }
        let steps = self.k / DEPTH;
        let step = |e: &mut Emitter, acc: &[V], depth: &V, width: usize| -> Vec<V> {
            let pair_row = e.div_idx(depth, 2);
            let a: Vec<V> = heights
                .iter()
                .zip(&a_rows)
                .map(|(&h, row)| self.load(e, &self.a, [row, depth], tile(h, width, false)))
                .collect();
            let b: Vec<V> = panel_rows
                .iter()
                .map(|start| {
                    let row = e.lin(&[(start, 1), (&pair_row, 1)], 0);
                    let zero = e.idx(0);
                    self.load(e, &self.b, [&row, &zero], tile(width / 2, 2 * COLUMNS, false))
                })
                .collect();
            let mut next = Vec::with_capacity(acc.len());
            for (i, ai) in a.iter().enumerate() {
                for (j, bj) in b.iter().enumerate() {
                    let c = &acc[i * panels + j];
                    next.push(e.op(
                        "acc",
                        c.ty,
                        &format!(
                            "amx.tile_mulf {ai}, {bj}, {c} : {}, {}, {}",
                            ai.ty.mlir(),
                            bj.ty.mlir(),
                            c.ty.mlir()
                        ),
                    ));
                }
            }
            next
        };
        if steps > 0 {
            let open = e.begin_for(0, (steps * DEPTH) as i64, DEPTH as i64, &sums);
            let depth = open.iv.clone();
            let carried = open.carried.clone();
            let next = step(e, &carried, &depth, DEPTH);
            sums = e.end_for(open, &next);
        }
        if !self.k.is_multiple_of(DEPTH) {
            let depth = e.idx((steps * DEPTH) as i64);
            sums = step(e, &sums, &depth, self.k % DEPTH);
        }
        for (i, _) in heights.iter().enumerate() {
            for j in 0..panels {
                let at = [e.idx((i * ROWS) as i64), e.idx((j * COLUMNS) as i64)];
                let c = &sums[i * panels + j];
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
        self.finish(e, batch, rows, columns, heights, (panels, valid));
    }

    /// A tile of type `ty` loaded from the 2-D `buf` at `at` (its rows `buf`'s rows apart).
    fn load(&self, e: &mut Emitter, buf: &Buf, at: [&V; 2], ty: Ty) -> V {
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

    /// The block's sums, in the scratch, finished and written to the result a row at a time.
    fn finish(
        &self,
        e: &mut Emitter,
        batch: &[V],
        rows: &V,
        columns: &V,
        heights: &[usize],
        (panels, valid): (usize, usize),
    ) {
        let lanes = COLUMNS;
        for (i, &h) in heights.iter().enumerate() {
            e.for_each(h, |e, r| {
                let local = e.lin(&[(&r, 1)], (i * ROWS) as i64);
                let row = e.lin(&[(rows, (2 * ROWS) as i64), (&local, 1)], 0);
                for j in 0..panels {
                    let slot = [local.clone(), e.idx((j * COLUMNS) as i64)];
                    let column = e.lin(&[(columns, (2 * COLUMNS) as i64)], (j * COLUMNS) as i64);
                    let idx = [batch, &[row.clone(), column]].concat();
                    let mask = (j + 1 == panels && valid < lanes).then(|| e.first_lanes(valid, lanes));
                    let v = e.read_lanes(&self.sums, &slot, lanes);
                    e.masked(mask, |e| e.write(self.out, &idx, &v));
                }
            });
        }
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
mod tests {
    use super::super::testing::{attrs, check_in_order, lower_one_for, t, AVX512};
    use super::*;
    use mxc_dialects::{Attr, OpKind};

    const AMX: VectorIsa = VectorIsa {
        amx_bf16: true,
        ..AVX512
    };

    /// `matmul_packed` of bf16 `a` by `panels` bf16 pair panels of depth `k` into `n` columns.
    fn product(isa: VectorIsa, a: &[usize], panels: usize, n: usize) -> String {
        let k = a[a.len() - 1];
        let b = t(DType::BF16, &[panels, k.div_ceil(2), 2 * COLUMNS]);
        let n = attrs(&[("n", Attr::Int(n as i64))]);
        lower_one_for(isa, OpKind::MatMulPacked, &[t(DType::BF16, a), b], n)
    }

    #[test]
    fn bf16_pair_products_run_on_tiles_and_translate_to_llvm() {
        // whole 32 x 32 blocks; a partial row block and a partial last panel with a depth step
        // of fewer than 32; a batch of matrices
        for (a, panels, n) in [(vec![64, 128], 4, 64), (vec![45, 96], 3, 40), (vec![2, 20, 34], 1, 16)] {
            let mlir = product(AMX, &a, panels, n);
            check_in_order(
                &mlir,
                &["amx.tile_zero", "amx.tile_load", "amx.tile_mulf", "amx.tile_store"],
            );
        }
    }

    #[test]
    fn odd_depths_and_machines_without_tiles_take_the_vector_kernel() {
        for (isa, a) in [(AMX, vec![20, 33]), (AVX512, vec![20, 64])] {
            let mlir = product(isa, &a, 1, 16);
            assert!(!mlir.contains("amx."), "{isa:?} {a:?}");
        }
    }
}
