//! Channels-last convolutions with packed weights (`conv_nhwc_packed`) on a vector unit.
//!
//! - **Implicit GEMM** (one group): the convolution is the product of A, whose rows are the
//!   output pixels and whose depth is the window times the channels (`kh, kw, c`), with the
//!   packed weights; A is never built. The micro-tiles of `tile.rs` read it straight from the
//!   input: per window position, each row's input pixel is found once, and the depth loop over
//!   its channels reads them in order. A position outside the input (padding) reads a row of
//!   zeros instead, a scratch buffer chosen with a pointer select, so the inner loop has no test.
//! - **Depthwise** (a group per channel): vectors run across the channels; for each output
//!   pixel the window positions inside the input are a rectangle, so the loops over it have
//!   bounds computed per pixel and no test inside, and several vectors of channels accumulate
//!   at once.

use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::tile::{self, At, Panels, Product, RowsOfA, Step, PANEL};
use super::vector::VectorIsa;
use super::window::Window;

/// Writes `conv_nhwc_packed` on `ins` (`x`, packed weights, optional bias) into `out` as an
/// implicit GEMM or a depthwise kernel when it is one of those and everything holds f32 on a
/// vector unit; returns whether it did (else the caller writes the scalar form).
pub fn lower(e: &mut Emitter, window: &Window, group: usize, kernel: &[usize], ins: &[Buf], out: &Buf) -> bool {
    let (x, wp, bias) = (&ins[0], &ins[1], ins.get(2));
    let Some(isa) = e.isa else {
        return false;
    };
    if !ins.iter().chain([out]).all(Buf::holds_f32_vectors) || wp.shape[2] != PANEL {
        return false;
    }
    let channels = x.shape[3];
    let finish = |e: &mut Emitter, idx: &[V], acc: V| match bias {
        Some(b) => {
            let bv = e.read_bcast_lanes(b, idx, acc.lanes);
            e.add(&acc, &bv)
        }
        None => acc,
    };
    if group == 1 {
        implicit_gemm(e, isa, window, kernel, x, wp, out, &finish);
        return true;
    }
    if group == channels && out.shape[3] == channels {
        depthwise(e, isa, window, kernel, x, wp, out, &finish);
        return true;
    }
    false
}

/// The rows of A of an implicit GEMM: output pixels, each reading the input under the window.
struct ImageRows<'a> {
    x: &'a Buf,
    window: &'a Window,
    kernel: &'a [usize],
    /// The output's height and width.
    out_hw: [usize; 2],
    /// `x` as a flat `memref<?xf32>`, and a scratch row of zeros (when the window can leave
    /// the input), both made at the function's entry.
    flat: String,
    zeros: Option<String>,
}

/// `memref<?xf32>`: the type rows are read through (the input or the zeros, chosen per row).
const ROW_SOURCE: &str = "memref<?xf32>";

impl ImageRows<'_> {
    /// Output pixel `row` as `(n, oh, ow)`.
    fn pixel(&self, e: &mut Emitter, row: &V) -> [V; 3] {
        let [oh, ow] = self.out_hw.map(|d| d as i64);
        let w = e.rem_idx(row, ow);
        let rest = e.div_idx(row, ow);
        let h = e.rem_idx(&rest, oh);
        let n = e.div_idx(&rest, oh);
        [n, h, w]
    }
}

impl RowsOfA for ImageRows<'_> {
    fn prepare(&self, e: &mut Emitter) {
        let Some(zeros) = &self.zeros else { return };
        let channels = self.x.shape[3];
        let zero = e.zero(Ty::F32);
        e.for_each(channels, |e, c| {
            e.store_line(&format!("memref.store {zero}, {zeros}[{c}] : {ROW_SOURCE}"));
        });
    }

    fn steps(&self) -> (usize, usize) {
        (self.kernel.iter().product(), self.x.shape[3])
    }

    fn accumulate(
        &self,
        e: &mut Emitter,
        _batch: &[V],
        rows: &[V],
        inits: &[V],
        (from, to): (&V, &V),
        step: Step,
    ) -> Vec<V> {
        let [_, height, width, channels] = [0, 1, 2, 3].map(|d| self.x.shape[d]);
        let bounds = [(0, height as i64), (0, width as i64)];
        let pixels: Vec<[V; 3]> = rows.iter().map(|r| self.pixel(e, r)).collect();
        let positions = self.kernel.iter().product::<usize>() as u64;
        e.for_between(from, to, positions, inits, |e, position, acc| {
            let k = [
                e.div_idx(position, self.kernel[1] as i64),
                e.rem_idx(position, self.kernel[1] as i64),
            ];
            let sources: Vec<(String, V)> = pixels
                .iter()
                .map(|[n, oh, ow]| {
                    let pos = self.window.positions(e, &[oh.clone(), ow.clone()], &k);
                    let inside = self.window.inside(e, &pos, &bounds, &self.out_hw, self.kernel);
                    let c = channels as i64;
                    let at = e.lin(
                        &[(n, (height * width) as i64 * c), (&pos[0], width as i64 * c), (&pos[1], c)],
                        0,
                    );
                    match (&self.zeros, inside.is_empty()) {
                        (Some(zeros), false) => {
                            let ok = e.all(&inside);
                            let source = e.fresh("row");
                            e.line(&format!(
                                "{source} = arith.select {ok}, {}, {zeros} : {ROW_SOURCE}",
                                self.flat
                            ));
                            let zero = e.idx(0);
                            (source, e.select(&ok, &at, &zero))
                        }
                        _ => (self.flat.clone(), at),
                    }
                })
                .collect();
            let first = e.lin(&[(position, channels as i64)], 0);
            e.nest_acc(&[channels], acc, |e, c, acc| {
                let c = &c[0];
                let depth = e.lin(&[(&first, 1), (c, 1)], 0);
                let a: Vec<V> = sources
                    .iter()
                    .map(|(source, at)| {
                        let i = e.lin(&[(at, 1), (c, 1)], 0);
                        e.op("x", Ty::F32, &format!("memref.load {source}[{i}] : {ROW_SOURCE}"))
                    })
                    .collect();
                step(e, acc, &depth, &a)
            })
        })
    }
}

/// One group: the product of the window-gathered input with the packed weights.
#[allow(clippy::too_many_arguments)]
fn implicit_gemm(
    e: &mut Emitter,
    isa: VectorIsa,
    window: &Window,
    kernel: &[usize],
    x: &Buf,
    wp: &Buf,
    out: &Buf,
    finish: &dyn Fn(&mut Emitter, &[V], V) -> V,
) {
    let [batch, oh, ow, m] = [0, 1, 2, 3].map(|d| out.shape[d]);
    let channels = x.shape[3];
    let flat = e.fresh("image");
    e.line(&format!(
        "{flat} = memref.reinterpret_cast {} to offset: [0], sizes: [{}], strides: [1] : {} to {ROW_SOURCE}",
        x.name,
        x.len(),
        x.memref()
    ));
    let padded = (0..2).any(|d| {
        let (below, above) = window.leaves(d, (0, x.shape[d + 1] as i64), [oh, ow][d], kernel[d]);
        below || above
    });
    let zeros = padded.then(|| {
        let name = e.fresh("zeros");
        e.line(&format!("{name}_ = memref.alloca() : memref<{channels}xf32>"));
        e.line(&format!("{name} = memref.cast {name}_ : memref<{channels}xf32> to {ROW_SOURCE}"));
        name
    });
    let rows = ImageRows {
        x,
        window,
        kernel,
        out_hw: [oh, ow],
        flat,
        zeros,
    };
    let out_at: At = &|e: &mut Emitter, _: &[V], row: &V, col: &V| {
        let [n, h, w] = rows.pixel(e, row);
        vec![n, h, w, col.clone()]
    };
    let product = Product {
        batch: &[],
        m: batch * oh * ow,
        n: m,
        a: &rows,
        b: Panels::Packed(wp),
        out,
        out_at,
        finish,
    };
    tile::emit(e, &product, isa);
}

/// Vectors of channels accumulated at once by the depthwise kernel.
const DEPTHWISE_VECTORS: usize = 4;

/// A group per channel: `out[n, oh, ow, c] = sum over the window of x[n, ih, iw, c] * w[c, kh,
/// kw]`, vectors across `c`.
#[allow(clippy::too_many_arguments)]
fn depthwise(
    e: &mut Emitter,
    isa: VectorIsa,
    window: &Window,
    kernel: &[usize],
    x: &Buf,
    wp: &Buf,
    out: &Buf,
    finish: &dyn Fn(&mut Emitter, &[V], V) -> V,
) {
    let lanes = isa.lanes;
    let channels = x.shape[3];
    let width = DEPTHWISE_VECTORS * lanes;
    e.nest(&out.shape[..3], |e, idx| {
        let (n, o) = (&idx[0], &idx[1..3]);
        let ranges: Vec<(V, V)> = (0..2)
            .map(|d| window_range(e, window, kernel, (x.shape[d + 1], out.shape[d + 1]), &o[d], d))
            .collect();
        let block = |e: &mut Emitter, first: &V, vectors: usize, valid: usize| {
            let columns: Vec<V> = (0..vectors).map(|j| e.lin(&[(first, 1)], (j * lanes) as i64)).collect();
            let zero = e.zero(Ty::F32);
            let zeros = vec![e.splat(&zero, lanes); vectors];
            let mask = |e: &mut Emitter, j: usize| (j + 1 == vectors && valid < lanes).then(|| e.first_lanes(valid, lanes));
            let trips = kernel[0] as u64;
            let sums = e.for_between(&ranges[0].0, &ranges[0].1, trips, &zeros, |e, kh, acc| {
                e.for_between(&ranges[1].0, &ranges[1].1, kernel[1] as u64, acc, |e, kw, acc| {
                    let k = [kh.clone(), kw.clone()];
                    let pos = window.positions(e, o, &k);
                    let row = e.lin(&[(kh, kernel[1] as i64), (kw, 1)], 0);
                    (0..vectors)
                        .map(|j| {
                            let col = &columns[j];
                            let (p, off) = (e.div_idx(col, PANEL as i64), e.rem_idx(col, PANEL as i64));
                            let w = e.read_lanes(wp, &[p, row.clone(), off], lanes);
                            let m = mask(e, j);
                            let xv = e.masked(m, |e| {
                                e.read_lanes(x, &[n.clone(), pos[0].clone(), pos[1].clone(), col.clone()], lanes)
                            });
                            e.fma(&xv, &w, &acc[j])
                        })
                        .collect()
                })
            });
            for (j, col) in columns.iter().enumerate() {
                let at = [n.clone(), o[0].clone(), o[1].clone(), col.clone()];
                let m = mask(e, j);
                e.masked(m, |e| {
                    let v = finish(e, &at, sums[j].clone());
                    e.write(out, &at, &v);
                });
            }
        };
        let blocks = channels / width;
        if blocks > 0 {
            e.for_each(blocks, |e, b| {
                let first = e.lin(&[(&b, width as i64)], 0);
                block(e, &first, DEPTHWISE_VECTORS, lanes);
            });
        }
        let rest = channels % width;
        if rest > 0 {
            let first = e.idx((blocks * width) as i64);
            block(e, &first, rest.div_ceil(lanes), (rest - 1) % lanes + 1);
        }
    });
}

/// The window offsets `lo..hi` along spatial dimension `d` that output position `o` reads
/// inside the input (of extent `extent`, the output's `out`): `0 <= o * s + k * dil - pad <
/// extent`; the whole window where no position can leave the input.
fn window_range(
    e: &mut Emitter,
    window: &Window,
    kernel: &[usize],
    (extent, out): (usize, usize),
    o: &V,
    d: usize,
) -> (V, V) {
    let (s, dil, pad) = (window.strides[d] as i64, window.dilations[d] as i64, window.pad_begin(d));
    let k = kernel[d] as i64;
    let zero = e.idx(0);
    let kv = e.idx(k);
    if window.leaves(d, (0, extent as i64), out, kernel[d]) == (false, false) {
        return (zero, kv);
    }
    // k >= ceil((pad - o * s) / dil) and k < ceil((extent + pad - o * s) / dil)
    let low = e.lin(&[(o, -s)], pad);
    let high = e.lin(&[(o, -s)], extent as i64 + pad);
    let dv = e.idx(dil);
    let low = e.op("t", Ty::Index, &format!("arith.ceildivsi {low}, {dv} : index"));
    let high = e.op("t", Ty::Index, &format!("arith.ceildivsi {high}, {dv} : index"));
    let low = e.op("t", Ty::Index, &format!("arith.maxsi {low}, {zero} : index"));
    let high = e.min_idx(&high, &kv);
    (low, high)
}
