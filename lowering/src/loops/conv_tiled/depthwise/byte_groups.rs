//! The integer depthwise kernel's pixels inside the image on VNNI: four kernel rows at once.
//!
//! A depthwise window has no depth to sum in groups of four, as `vpdpbusd` does; its kernel
//! rows are the four. The kernel's preamble interleaves the i8 weights of each kernel column
//! four kernel rows at a time (`[P, groups * kw, PANEL]` words: byte `j` of channel `c`'s word in
//! group `g` is kernel row `4g + j`'s weight, zero past the last row), and per input column the kernel
//! reads the same four rows' bytes and interleaves them alike: one `vpdpbusd` then adds the
//! four products of each channel, where the f32 lanes take four conversions and four
//! multiply-adds. The sums are exact i32 from the start (`-zero x sum(w)`, the zero point's
//! share of a window inside the image), so nothing is converted back.

use super::{for_channel_blocks, read_columns, Buf, ChannelBlock, Emitter, PackedConv, PANEL, V};
use crate::loops::buffer::storage_ty;
use crate::loops::integer::{GROUP, I32};
use mxc_dialects::DType;

/// The interleaved weights of `wp` (`[P, kh * kw, PANEL]` i8) for a window of `kernel`, in a
/// buffer on the stack, written by the caller's preamble.
pub(super) fn interleaved_weights(e: &mut Emitter, wp: &Buf, kernel: &[usize]) -> Buf {
    let [kh, kw] = [kernel[0], kernel[1]];
    let groups = kh.div_ceil(GROUP);
    let buf = Buf::new(&e.fresh("groups"), DType::I32, &[wp.shape[0], groups * kw, PANEL]);
    e.line(&format!("{} = memref.alloca() : {}", buf.name, buf.memref()));
    e.nest(&[wp.shape[0], kw], |e, idx| {
        let (p, col) = (&idx[0], &idx[1]);
        let zero = e.zero(storage_ty(DType::I8));
        let none = e.splat(&zero, PANEL);
        let origin = e.idx(0);
        for g in 0..groups {
            let rows = [0, 1, 2, 3].map(|j| match GROUP * g + j < kh {
                true => {
                    let tap = e.lin(&[(col, 1)], ((GROUP * g + j) * kw) as i64);
                    e.vload(wp, &[p.clone(), tap, origin.clone()], PANEL)
                }
                false => none.clone(),
            });
            let words = e.interleave_bytes(&rows);
            let at = e.lin(&[(col, 1)], (g * kw) as i64);
            e.vstore(&buf, &[p.clone(), at, origin.clone()], &words);
        }
    });
    buf
}

impl PackedConv<'_> {
    /// `pixels` output pixels along row `oh` from column `first`, their windows inside the
    /// image, on the interleaved weights `groups`: as `depthwise_pixels`, each input column of
    /// the pixels' span read once per group of kernel rows and added into every pixel reading
    /// it.
    pub(super) fn byte_group_pixels(&self, e: &mut Emitter, n: &V, oh: &V, first: &V, pixels: usize, groups: &Buf) {
        let (kernel, lanes, window) = (self.kernel, self.isa.lanes, self.window);
        let starts = &self.bytes.as_ref().expect("an image of bytes").starts;
        // the accumulators, a group's weights, its four rows and their interleaving
        let vectors = ((self.isa.registers - 6) / (pixels + kernel[1])).max(1);
        let readers = self.span_readers(pixels);
        let left = e.lin(&[(first, window.strides[1] as i64)], -window.pad_begin(1));
        for_channel_blocks(e, self.x.shape[3], (vectors, lanes), &|e, block| {
            let width = block.columns.len();
            let starts: Vec<V> = (0..width)
                .map(|j| {
                    let mask = block.mask(e, j);
                    let start = e.masked(mask, |e| e.read_lanes(starts, &[block.columns[j].clone()], lanes));
                    e.convert(&start, I32)
                })
                .collect();
            // pixel p's sums for vector j at p * width + j
            let mut acc: Vec<V> = (0..pixels).flat_map(|_| starts.iter().cloned()).collect();
            let panels: Vec<(V, V)> = (block.columns.iter())
                .map(|col| (e.div_idx(col, PANEL as i64), e.rem_idx(col, PANEL as i64)))
                .collect();
            for g in 0..kernel[0].div_ceil(GROUP) {
                let weights: Vec<Vec<V>> = (0..kernel[1])
                    .map(|kw| {
                        let at = e.idx((g * kernel[1] + kw) as i64);
                        let read = |e: &mut Emitter, (p, off): &(V, V)| {
                            e.vload(groups, &[p.clone(), at.clone(), off.clone()], lanes)
                        };
                        panels.iter().map(|po| read(e, po)).collect()
                    })
                    .collect();
                let rows: Vec<Option<V>> = (0..GROUP)
                    .map(|j| {
                        let row = GROUP * g + j;
                        (row < kernel[0]).then(|| {
                            let offset = (row * window.dilations[0]) as i64 - window.pad_begin(0);
                            e.lin(&[(oh, window.strides[0] as i64)], offset)
                        })
                    })
                    .collect();
                for (iw, readers) in read_columns(e, &readers, &left) {
                    for j in 0..width {
                        let words = self.row_bytes(e, n, (&rows, &iw), block, j);
                        for &(p, kw) in readers {
                            let sum = &mut acc[p * width + j];
                            *sum = e.dot_u8_i8(sum, &words, &weights[kw][j]);
                        }
                    }
                }
            }
            for p in 0..pixels {
                let ow = e.lin(&[(first, 1)], p as i64);
                self.store_pixel(e, n, &[oh.clone(), ow], block, &acc[p * width..(p + 1) * width]);
            }
        });
    }

    /// The bytes of channel vector `j` of `block` at column `iw` of the input rows `rows` (a
    /// group's, `None` past the kernel's last row), interleaved.
    fn row_bytes(&self, e: &mut Emitter, n: &V, (rows, iw): (&[Option<V>], &V), block: &ChannelBlock, j: usize) -> V {
        let lanes = self.isa.lanes;
        let mask = block.mask(e, j);
        let read: [V; GROUP] = rows
            .iter()
            .map(|row| match row {
                Some(ih) => {
                    let idx = [n.clone(), ih.clone(), iw.clone(), block.columns[j].clone()];
                    e.masked(mask.clone(), |e| e.vload(self.x, &idx, lanes))
                }
                None => {
                    let zero = e.zero(storage_ty(self.x.dtype));
                    e.splat(&zero, lanes)
                }
            })
            .collect::<Vec<V>>()
            .try_into()
            .expect("a group of four rows");
        e.interleave_bytes(&read)
    }
}
