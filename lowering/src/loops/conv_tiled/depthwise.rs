//! The depthwise kernel of `conv_tiled.rs` (a group per channel, f32 lanes across the
//! channels; the integer depthwise convolution on the same code, its bytes read as f32): for
//! each output pixel the window positions inside the input are a rectangle, so the loops over it
//! have bounds computed per pixel and no test inside, and several vectors of channels accumulate
//! at once. Rows and columns whose windows lie inside the image run several pixels at a time
//! without tests; their ranges are numbers, or computed at the kernel's entry where the image's
//! sizes are known only at run time.

use super::{PackedConv, Window};
use crate::loops::buffer::Buf;
use crate::loops::emit::{Emitter, Ty, V};
use crate::loops::sizes::Extent;
use crate::loops::tile::PANEL;
use crate::loops::window::spans;
use mxc_dialects::DType;

/// Writes `conv_nhwc_integer_depthwise` on `ins` (`x` bytes, i8 panels, the zero point) into
/// `out` on a vector unit: the depthwise kernel below on f32 lanes, each byte read as f32 and
/// the sums converted to i32. Every product and partial sum is an integer below 2^24 in
/// magnitude (the op's bound on the window), so f32 computes them exactly and the result is
/// the integer one to the bit. The kernel's preamble converts the weights to f32 and computes
/// `-zero_point x sum(w)` per channel, on the stack: a pixel whose window lies inside the
/// image starts its sums there and reads its bytes as they are, and only a pixel at the border
/// subtracts the zero point from each byte it reads. Returns whether it did (else the caller
/// writes the scalar form).
pub fn lower_integer_depthwise(e: &mut Emitter, window: &Window, kernel: &[usize], ins: &[Buf], out: &Buf) -> bool {
    let (x, wp, x_zero) = (&ins[0], &ins[1], &ins[2]);
    let Some(isa) = e.isa else {
        return false;
    };
    if !x.holds_vectors() || !out.holds_vectors() || wp.shape[2] != PANEL || !PANEL.is_multiple_of(isa.lanes) {
        return false;
    }
    let zero = e.read(x_zero, &[]);
    let zero = e.convert(&zero, Ty::F32);
    let zero = e.splat(&zero, isa.lanes);
    let (weights, starts) = e.preamble(|e| float_weights_and_starts(e, isa.lanes, wp, &zero));
    let groups = isa
        .vnni
        .then(|| e.preamble(|e| byte_groups::interleaved_weights(e, wp, kernel)));
    let finish = |e: &mut Emitter, _: &[V], sums: V| e.convert(&sums, Ty::Int { bits: 32, signed: true });
    let conv = PackedConv {
        isa,
        window,
        kernel,
        x,
        wp: &weights,
        out,
        finish: &finish,
        bytes: Some(Bytes { zero, starts, groups }),
    };
    conv.depthwise(e);
    true
}

/// The i8 panels `wp` (`[P, taps, PANEL]`) as f32 in a buffer on the stack, and per channel
/// `-zero x` the sum of its taps' weights (`[P * PANEL]`), in vectors of `lanes`.
fn float_weights_and_starts(e: &mut Emitter, lanes: usize, wp: &Buf, zero: &V) -> (Buf, Buf) {
    let (panels, taps) = (wp.shape[0], wp.shape[1]);
    let weights = Buf::new(&e.fresh("weights"), DType::F32, &wp.shape);
    let starts = Buf::new(&e.fresh("starts"), DType::F32, &[panels * PANEL]);
    for b in [&weights, &starts] {
        e.line(&format!("{} = memref.alloca() : {}", b.name, b.memref()));
    }
    e.nest(&[panels, PANEL / lanes], |e, idx| {
        let (p, off) = (&idx[0], e.lin(&[(&idx[1], lanes as i64)], 0));
        let zeros = {
            let z = e.zero(Ty::F32);
            e.splat(&z, lanes)
        };
        let sum = e.nest_acc(&[taps], &[zeros], |e, t, acc| {
            let at = [p.clone(), t[0].clone(), off.clone()];
            let w = e.read_lanes(wp, &at, lanes);
            let w = e.convert(&w, Ty::F32);
            e.write(&weights, &at, &w);
            vec![e.add(&acc[0], &w)]
        });
        let start = e.mul(&sum[0], zero);
        let start = e.neg(&start);
        let channel = e.lin(&[(p, PANEL as i64), (&off, 1)], 0);
        e.write(&starts, &[channel], &start);
    });
    (weights, starts)
}

/// The bytes of an integer depthwise convolution's image: their zero point in f32 lanes, per
/// channel the sums' start inside the image (`float_weights_and_starts`), and on VNNI the
/// weights interleaved four kernel rows at a time (`byte_groups.rs`).
pub(super) struct Bytes {
    zero: V,
    starts: Buf,
    groups: Option<Buf>,
}

/// Vectors of channels accumulated at once by the depthwise kernel at the image's border.
const DEPTHWISE_VECTORS: usize = 4;

/// At most this many output pixels along a row are computed at once by the depthwise kernel
/// inside the image (more share more input loads, but leave a longer rest to the row).
const DEPTHWISE_PIXELS: usize = 8;

impl PackedConv<'_> {
    /// Depthwise: packed weights `[C / PANEL, kh * kw, PANEL]`, vectors across the channels.
    /// Output rows whose windows lie inside the image in height go in three parts along the
    /// row: the left border, the interior in steps of a few pixels (`depthwise_pixels`: no
    /// test, no loop over the window), and the rest with the right border; the other rows,
    /// and the border pixels, each loop over their window's part inside the image.
    pub(super) fn depthwise(&self, e: &mut Emitter) {
        let out = self.out.extents();
        let [rows, cols] = [0, 1].map(|d| self.interior_outputs(e, d));
        e.nest_over(&out[..2], |e, idx| {
            let (n, oh) = (&idx[0], &idx[1]);
            self.depthwise_row(e, n, oh, &rows, &cols);
            if self.out.deferred_store().is_some() {
                self.epilogue_row(e, n, oh);
            }
        });
    }

    /// Output row `oh` of the depthwise kernel: `interior_row` where the row's windows lie
    /// inside the image in height (`rows`), else every pixel at the border.
    fn depthwise_row(&self, e: &mut Emitter, n: &V, oh: &V, rows: &(V, V), cols: &(V, V)) {
        let width = self.out.extents()[2].clone();
        let every_row = rows.0.known == Some(0) && rows.1.known.map(|h| h as usize) == self.out.extents()[1].fixed();
        if every_row {
            return self.interior_row(e, n, oh, cols);
        }
        let conds = [e.cmp_idx("sge", oh, &rows.0), e.cmp_idx("slt", oh, &rows.1)];
        let inside = e.all(&conds);
        e.if_else_like(
            &inside,
            &[],
            |e| {
                self.interior_row(e, n, oh, cols);
                Vec::new()
            },
            |e| {
                let (first, last) = (e.idx(0), e.extent_value(&width));
                self.border_pixels(e, n, oh, (&first, &last));
                Vec::new()
            },
        );
    }

    /// A long epilogue (`Buf::deferred_store`) applied to output row `oh`, once its sums are
    /// stored.
    fn epilogue_row(&self, e: &mut Emitter, n: &V, oh: &V) {
        let lanes = self.isa.lanes;
        e.for_each(self.out.extents()[2].clone(), |e, ow| {
            for_channel_blocks(e, self.out.shape[3], (DEPTHWISE_VECTORS, lanes), &|e, block| {
                for (j, col) in block.columns.iter().enumerate() {
                    let at = [n.clone(), oh.clone(), ow.clone(), col.clone()];
                    let mask = block.mask(e, j);
                    e.masked(mask, |e| e.apply_epilogue(self.out, &at, lanes));
                }
            });
        });
    }

    /// The output positions `lo..hi` along spatial dimension `d` whose windows lie inside the
    /// input (an empty range where none does): numbers where the sizes are fixed, else
    /// computed at the kernel's entry.
    fn interior_outputs(&self, e: &mut Emitter, d: usize) -> (V, V) {
        let (s, dil, pad) = (
            self.window.strides[d],
            self.window.dilations[d],
            self.window.pad_begin(d) as usize,
        );
        let (size, out) = (&self.x.extents()[d + 1], &self.out.extents()[d + 1]);
        if let (Extent::Fixed(size), Extent::Fixed(out)) = (size, out) {
            let lo = pad.div_ceil(s).min(*out);
            // o * s + (k - 1) * dil - pad <= size - 1
            let hi = (size - 1 + pad)
                .checked_sub((self.kernel[d] - 1) * dil)
                .map_or(0, |reach| (reach / s + 1).min(*out));
            return (e.idx(lo as i64), e.idx(hi.max(lo) as i64));
        }
        let (size, out) = (e.extent_value(size), e.extent_value(out));
        let first = e.idx(pad.div_ceil(s) as i64);
        let lo = e.min_idx(&first, &out);
        // the last interior position is floor((size - 1 + pad - (k - 1) * dil) / s), less
        // than lo (an empty range) where the window is wider than the padded image
        let reach = e.lin(&[(&size, 1)], pad as i64 - 1 - ((self.kernel[d] - 1) * dil) as i64);
        let stride = e.idx(s as i64);
        let last = e.op("t", Ty::Index, &format!("arith.floordivsi {reach}, {stride} : index"));
        let end = e.lin(&[(&last, 1)], 1);
        let end = e.min_idx(&end, &out);
        let hi = e.op("t", Ty::Index, &format!("arith.maxsi {end}, {lo} : index"));
        (lo, hi)
    }

    /// Output row `oh`, its windows inside the image in height: the pixels of `cols` (inside
    /// in width too) up to `DEPTHWISE_PIXELS` at a time (`depthwise_pixels`), the others one
    /// by one.
    fn interior_row(&self, e: &mut Emitter, n: &V, oh: &V, (lo, hi): &(V, V)) {
        let (first, width) = (e.idx(0), e.extent_value(&self.out.extents()[2]));
        self.border_pixels(e, n, oh, (&first, lo));
        let (Some(lo_at), Some(hi_at)) = (lo.known, hi.known) else {
            // sizes known at run time: whole steps of DEPTHWISE_PIXELS, then the rest one by one
            let steps = {
                let span = e.lin(&[(hi, 1), (lo, -1)], 0);
                e.div_idx(&span, DEPTHWISE_PIXELS as i64)
            };
            let zero = e.idx(0);
            let trips = (self.out.shape[2] / DEPTHWISE_PIXELS) as u64;
            e.for_between(&zero, &steps, trips, &[], |e, step, _| {
                let first = e.lin(&[(step, DEPTHWISE_PIXELS as i64), (lo, 1)], 0);
                self.depthwise_pixels(e, n, oh, &first, DEPTHWISE_PIXELS);
                Vec::new()
            });
            let rest = e.lin(&[(&steps, DEPTHWISE_PIXELS as i64), (lo, 1)], 0);
            self.border_pixels(e, n, oh, (&rest, hi));
            return self.border_pixels(e, n, oh, (hi, &width));
        };
        let (lo_at, hi_at) = (lo_at as usize, hi_at as usize);
        let pixels = DEPTHWISE_PIXELS.min(hi_at - lo_at);
        let (steps, rest) = match pixels {
            0 => (0, 0),
            _ => ((hi_at - lo_at) / pixels, (hi_at - lo_at) % pixels),
        };
        if steps > 0 {
            e.for_each(steps, |e, step| {
                let first = e.lin(&[(&step, pixels as i64)], lo_at as i64);
                self.depthwise_pixels(e, n, oh, &first, pixels);
            });
        }
        if rest > 0 {
            let first = e.idx((lo_at + steps * pixels) as i64);
            self.depthwise_pixels(e, n, oh, &first, rest);
        }
        self.border_pixels(e, n, oh, (hi, &width));
    }

    /// The output pixels `from..to` of row `oh`, each by `depthwise_pixel` (none where the
    /// bounds are numbers and `from` is not below `to`).
    fn border_pixels(&self, e: &mut Emitter, n: &V, oh: &V, (from, to): (&V, &V)) {
        let trips = match (from.known, to.known) {
            (Some(a), Some(b)) if a >= b => return,
            (Some(a), Some(b)) => (b - a) as u64,
            _ => self.kernel[1] as u64,
        };
        e.for_between(from, to, trips, &[], |e, ow, _| {
            self.depthwise_pixel(e, n, &[oh.clone(), ow.clone()]);
            Vec::new()
        });
    }

    /// `pixels` output pixels along row `oh` from column `first`, their windows inside the
    /// image. Per block of channel vectors and kernel row, the row's weights are loaded once,
    /// and each input column the pixels read is loaded once and multiplied into every pixel
    /// reading it: with stride 1 and 8 pixels, 10 loads of the input serve 24 products. As
    /// many vectors go in a block as leave the accumulators, one kernel row's weights and an
    /// input vector in the registers.
    fn depthwise_pixels(&self, e: &mut Emitter, n: &V, oh: &V, first: &V, pixels: usize) {
        if let Some(groups) = self.bytes.as_ref().and_then(|b| b.groups.as_ref()) {
            return self.byte_group_pixels(e, n, oh, first, pixels, groups);
        }
        let (kernel, lanes, window) = (self.kernel, self.isa.lanes, self.window);
        let vectors = ((self.isa.registers - 1) / (pixels + kernel[1])).max(1);
        let readers = self.span_readers(pixels);
        let left = e.lin(&[(first, window.strides[1] as i64)], -window.pad_begin(1));
        for_channel_blocks(e, self.x.shape[3], (vectors, lanes), &|e, block| {
            let width = block.columns.len();
            let mut acc: Vec<Option<V>> = vec![None; pixels * width];
            if let Some(bytes) = &self.bytes {
                for j in 0..width {
                    let mask = block.mask(e, j);
                    let start = e.masked(mask, |e| {
                        e.read_lanes(&bytes.starts, &[block.columns[j].clone()], lanes)
                    });
                    for p in 0..pixels {
                        acc[p * width + j] = Some(start.clone());
                    }
                }
            }
            for kh in 0..kernel[0] {
                let ih = e.lin(
                    &[(oh, window.strides[0] as i64)],
                    (kh * window.dilations[0]) as i64 - window.pad_begin(0),
                );
                let weights: Vec<Vec<V>> = (0..kernel[1])
                    .map(|kw| {
                        let tap = e.idx((kh * kernel[1] + kw) as i64);
                        block.columns.iter().map(|col| self.tap_weights(e, &tap, col)).collect()
                    })
                    .collect();
                for (iw, readers) in read_columns(e, &readers, &left) {
                    for j in 0..width {
                        let xv = self.input(e, n, &[ih.clone(), iw.clone()], block, j, false);
                        for &(p, kw) in readers {
                            let sum = &mut acc[p * width + j];
                            *sum = Some(match sum.take() {
                                None => e.mul(&xv, &weights[kw][j]),
                                Some(sum) => e.fma(&xv, &weights[kw][j], &sum),
                            });
                        }
                    }
                }
            }
            let sums: Vec<V> = acc
                .into_iter()
                .map(|sum| sum.expect("every pixel reads a tap"))
                .collect();
            for p in 0..pixels {
                let ow = e.lin(&[(first, 1)], p as i64);
                self.store_pixel(e, n, &[oh.clone(), ow], block, &sums[p * width..(p + 1) * width]);
            }
        });
    }

    /// For each input column `pixels` pixels side by side read along a row (from the first
    /// pixel's window's left), the pixels reading it, with the kernel column they read it
    /// with.
    fn span_readers(&self, pixels: usize) -> Vec<Vec<(usize, usize)>> {
        let (stride, dilation, width) = (self.window.strides[1], self.window.dilations[1], self.kernel[1]);
        let span = (pixels - 1) * stride + (width - 1) * dilation + 1;
        (0..span)
            .map(|c| {
                (0..pixels)
                    .filter_map(|p| {
                        let offset = c.checked_sub(p * stride)?;
                        (offset % dilation == 0 && offset / dilation < width).then_some((p, offset / dilation))
                    })
                    .collect()
            })
            .collect()
    }

    /// The packed weights of tap `row` (`kh * kw_size + kw`) for the channels from `col` on,
    /// as f32.
    fn tap_weights(&self, e: &mut Emitter, row: &V, col: &V) -> V {
        let (p, off) = (e.div_idx(col, PANEL as i64), e.rem_idx(col, PANEL as i64));
        let w = e.read_lanes(self.wp, &[p, row.clone(), off], self.isa.lanes);
        e.convert(&w, Ty::F32)
    }

    /// Vector `j` of a block of channels of the input at position `pos` (row, column), as f32:
    /// bytes converted, less their zero point where `centred` (at the border; inside the
    /// image the sums start from the zero point's share instead, `Bytes::starts`).
    fn input(&self, e: &mut Emitter, n: &V, pos: &[V], block: &ChannelBlock, j: usize, centred: bool) -> V {
        let idx = [n.clone(), pos[0].clone(), pos[1].clone(), block.columns[j].clone()];
        let mask = block.mask(e, j);
        let x = e.masked(mask, |e| e.read_lanes(self.x, &idx, self.isa.lanes));
        match &self.bytes {
            Some(bytes) => {
                let x = e.convert(&x, Ty::F32);
                match centred {
                    true => e.sub(&x, &bytes.zero),
                    false => x,
                }
            }
            None => x,
        }
    }

    /// The sums of a block of channels of output pixel `o` (row, column), finished and stored.
    fn store_pixel(&self, e: &mut Emitter, n: &V, o: &[V], block: &ChannelBlock, sums: &[V]) {
        for (j, (col, sum)) in block.columns.iter().zip(sums).enumerate() {
            let at = [n.clone(), o[0].clone(), o[1].clone(), col.clone()];
            let mask = block.mask(e, j);
            e.masked(mask, |e| {
                let v = (self.finish)(e, &at, sum.clone());
                e.write(self.out.deferred_store().unwrap_or(self.out), &at, &v);
            });
        }
    }

    /// One output pixel `o` (row, column) at the image's border: loops over its window's part
    /// inside the image.
    fn depthwise_pixel(&self, e: &mut Emitter, n: &V, o: &[V]) {
        let (window, kernel, x, out) = (self.window, self.kernel, self.x, self.out);
        let lanes = self.isa.lanes;
        let (input, out_dims) = (spans(&x.extents()[1..3]), out.extents());
        let ranges: Vec<(V, V)> = (0..2)
            .map(|d| window.range_inside(e, d, &input[d], (&out_dims[d + 1], kernel[d]), &o[d]))
            .collect();
        for_channel_blocks(e, x.shape[3], (DEPTHWISE_VECTORS, lanes), &|e, block| {
            let zero = e.zero(Ty::F32);
            let zeros = vec![e.splat(&zero, lanes); block.columns.len()];
            let trips = kernel[0] as u64;
            let sums = e.for_between(&ranges[0].0, &ranges[0].1, trips, &zeros, |e, kh, acc| {
                e.for_between(&ranges[1].0, &ranges[1].1, kernel[1] as u64, acc, |e, kw, acc| {
                    let k = [kh.clone(), kw.clone()];
                    let pos = window.positions(e, o, &k);
                    let row = e.lin(&[(kh, kernel[1] as i64), (kw, 1)], 0);
                    (0..block.columns.len())
                        .map(|j| {
                            let w = self.tap_weights(e, &row, &block.columns[j]);
                            let xv = self.input(e, n, &pos, block, j, true);
                            e.fma(&xv, &w, &acc[j])
                        })
                        .collect()
                })
            });
            self.store_pixel(e, n, o, block, &sums);
        });
    }
}

/// The input columns of a row's span that pixels read (`readers`, from `span_readers`) as
/// positions from `left`, with their readers.
fn read_columns<'r>(e: &mut Emitter, readers: &'r [Vec<(usize, usize)>], left: &V) -> Vec<(V, &'r [(usize, usize)])> {
    (readers.iter().enumerate())
        .filter(|(_, r)| !r.is_empty())
        .map(|(c, r)| (e.lin(&[(left, 1)], c as i64), r.as_slice()))
        .collect()
}

/// A block of channels: the first column of each of its vectors, and the lanes of the last one
/// that hold channels.
struct ChannelBlock {
    columns: Vec<V>,
    valid: usize,
    lanes: usize,
}

impl ChannelBlock {
    /// The lane mask of vector `j`: only the last one's, when it is partial.
    fn mask(&self, e: &mut Emitter, j: usize) -> Option<V> {
        (j + 1 == self.columns.len() && self.valid < self.lanes).then(|| e.first_lanes(self.valid, self.lanes))
    }
}

/// Calls `block` for the blocks of `vectors` vectors that cover `channels`: a loop over the
/// whole blocks, then the rest (its last vector partial when `channels` is not a multiple of
/// `lanes`).
fn for_channel_blocks(
    e: &mut Emitter,
    channels: usize,
    (vectors, lanes): (usize, usize),
    block: &dyn Fn(&mut Emitter, &ChannelBlock),
) {
    let width = vectors * lanes;
    let of = |e: &mut Emitter, first: &V, count: usize, valid: usize| ChannelBlock {
        columns: (0..count).map(|j| e.lin(&[(first, 1)], (j * lanes) as i64)).collect(),
        valid,
        lanes,
    };
    let blocks = channels / width;
    if blocks > 0 {
        e.for_each(blocks, |e, b| {
            let first = e.lin(&[(&b, width as i64)], 0);
            let whole = of(e, &first, vectors, lanes);
            block(e, &whole);
        });
    }
    let rest = channels % width;
    if rest > 0 {
        let first = e.idx((blocks * width) as i64);
        let last = of(e, &first, rest.div_ceil(lanes), (rest - 1) % lanes + 1);
        block(e, &last);
    }
}

mod byte_groups;
