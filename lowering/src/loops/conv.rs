//! Convolution and transposed convolution, N-d, with groups, strides, dilations, explicit pads
//! and an optional bias: one loop nest over the result, a reduction over the group's input
//! channels and the kernel window inside, positions outside the input skipped (zero padding).
//! The forward convolution also comes channels last (`conv_nhwc`, 2-D), from the same code:
//! its reduction runs over the window, then the channels innermost, for a block of output
//! channels at a time; and with its weights packed (`conv_nhwc_packed`), which on a vector
//! unit is `conv_tiled.rs`'s and here reads the packed weights in the same loops.

use super::buffer::Buf;
use super::conv_tiled;
use super::emit::{Emitter, V};
use super::sizes::Extent;
use super::window::{spans, Window};
use mxc_dialects::{Attrs, OpKind};

pub fn lower(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    let window = Window::from_attrs(attrs)?;
    let group = attrs.int("group")?;
    if group < 1 {
        return Err(format!("group must be positive, got {group}"));
    }
    let weights = match kind {
        OpKind::ConvNhwcPacked => {
            let kernel = attrs.dims("kernel")?;
            if conv_tiled::lower(e, &window, group as usize, &kernel, ins, &outs[0]) {
                return Ok(());
            }
            Weights::Packed {
                buf: &ins[1],
                kernel,
                per_group: ins[0].shape[3] / group as usize,
            }
        }
        _ => Weights::Plain(&ins[1]),
    };
    let conv = Conv {
        x: &ins[0],
        w: weights,
        bias: ins.get(2),
        out: &outs[0],
        group: group as usize,
        window,
    };
    match kind {
        OpKind::Conv => conv.forward(e, Layout::ChannelsFirst),
        OpKind::ConvNhwc | OpKind::ConvNhwcPacked => conv.forward(e, Layout::ChannelsLast),
        OpKind::ConvTranspose => conv.transposed(e, &ins[1]),
        _ => return Err(format!("{kind} is not a convolution")),
    }
    Ok(())
}

/// Where the channels are in the operands and the result of a forward convolution: second
/// (`conv`: `x[N, C, spatial...]`, `w[M, C/G, k...]`) or last (`conv_nhwc`: `x[N, H, W, C]`,
/// `w[M, kh, kw, C/G]`). The first axis is the batch, or the output channel of `w`, in both.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    ChannelsFirst,
    ChannelsLast,
}

impl Layout {
    fn channel_axis(self, rank: usize) -> usize {
        match self {
            Layout::ChannelsFirst => 1,
            Layout::ChannelsLast => rank - 1,
        }
    }

    /// The spatial part (the kernel window, of `w`) of a shape or an index.
    fn spatial<T>(self, dims: &[T]) -> &[T] {
        match self {
            Layout::ChannelsFirst => &dims[2..],
            Layout::ChannelsLast => &dims[1..dims.len() - 1],
        }
    }

    /// The index `(lead, channel, spatial...)` in this layout.
    fn index(self, lead: &V, channel: &V, spatial: &[V]) -> Vec<V> {
        let mut idx = vec![lead.clone()];
        if self == Layout::ChannelsFirst {
            idx.push(channel.clone());
        }
        idx.extend_from_slice(spatial);
        if self == Layout::ChannelsLast {
            idx.push(channel.clone());
        }
        idx
    }
}

/// How many output channels one iteration of a forward convolution computes: up to
/// `OUTPUT_BLOCK`, a divisor of the channels per group (a block never straddles two groups).
/// Independent sums let the CPU overlap their additions (one chain of dependent adds per
/// output was the measured bottleneck of both layouts).
fn output_block(per_group_out: usize) -> usize {
    (1..=OUTPUT_BLOCK)
        .rev()
        .find(|b| per_group_out.is_multiple_of(*b))
        .unwrap_or(1)
}

/// The most output channels a convolution computes per iteration.
const OUTPUT_BLOCK: usize = 4;

/// A convolution's weights.
enum Weights<'a> {
    /// As the op takes them: `[M, C/G, k...]`, or `[M, k..., C/G]` channels last.
    Plain(&'a Buf),
    /// Packed (`mx.pack`) from the matrix `[kh * kw * C/G, M]`: `[ceil(M / panel), kh * kw *
    /// C/G, panel]`, 2-D channels last.
    Packed {
        buf: &'a Buf,
        kernel: Vec<usize>,
        per_group: usize,
    },
}

impl Weights<'_> {
    /// The kernel window's extents.
    fn kernel(&self, layout: Layout) -> Vec<usize> {
        match self {
            Weights::Plain(w) => layout.spatial(&w.shape).to_vec(),
            Weights::Packed { kernel, .. } => kernel.clone(),
        }
    }

    /// Input channels per group.
    fn per_group(&self, layout: Layout) -> usize {
        match self {
            Weights::Plain(w) => w.shape[layout.channel_axis(w.rank())],
            Weights::Packed { per_group, .. } => *per_group,
        }
    }

    /// The weight of output channel `m`, input channel `c` (within the group), window offset `k`.
    fn read(&self, e: &mut Emitter, layout: Layout, m: &V, c: &V, k: &[V]) -> V {
        match self {
            Weights::Plain(w) => e.read(w, &layout.index(m, c, k)),
            Weights::Packed { buf, kernel, per_group } => {
                // `g` depths side by side (bf16 pairs: `mx::depth_pairing`)
                let g = mxc_dialects::mx::depth_pairing(buf.dtype) as i64;
                let panel = buf.shape[2] as i64 / g;
                let (p, j) = (e.div_idx(m, panel), e.rem_idx(m, panel));
                let per_group = *per_group as i64;
                let depth = e.lin(&[(&k[0], kernel[1] as i64 * per_group), (&k[1], per_group), (c, 1)], 0);
                let (row, t) = (e.div_idx(&depth, g), e.rem_idx(&depth, g));
                let column = e.lin(&[(&j, g), (&t, 1)], 0);
                e.read(buf, &[p, row, column])
            }
        }
    }
}

struct Conv<'a> {
    x: &'a Buf,
    w: Weights<'a>,
    bias: Option<&'a Buf>,
    out: &'a Buf,
    group: usize,
    window: Window,
}

impl Conv<'_> {
    /// `y[n, m, o] = sum over c, k of x[n, g*C/G + c, o*s + k*d - p] * w[m, c, k] (+ b[m])`
    /// where `g = m / (M/G)`, with the channels where `layout` puts them.
    ///
    /// The reduction is ordered for the layout's contiguous axis. Channels first: `c`, then
    /// the kernel window, innermost (and the padding check with it). Channels last: the
    /// window, its padding check once per kernel position, then `c` innermost, which reads
    /// both `x` and `w` contiguously.
    ///
    /// Each iteration over the result computes `block` output channels of one group at once:
    /// one read of `x` serves them all, and their sums are independent chains the CPU
    /// overlaps (each sum alone is a chain of dependent additions, which the float semantics
    /// forbid reordering). Each element is still summed in the same order, so the block does
    /// not change a value.
    fn forward(&self, e: &mut Emitter, layout: Layout) {
        let (x, out) = (self.x, self.out);
        let channel_axis = layout.channel_axis(out.rank());
        let channels = self.w.per_group(layout);
        let per_group_out = out.shape[channel_axis] / self.group;
        let block = output_block(per_group_out);
        let kernel = &self.w.kernel(layout)[..];
        let bounds = spans(layout.spatial(&x.extents()));
        let out_dims = out.extents();
        let out_extents = layout.spatial(&out_dims);
        // the loops before the padding check, and those after it
        let (outer, inner) = match layout {
            Layout::ChannelsFirst => ([&[channels], kernel].concat(), vec![]),
            Layout::ChannelsLast => (kernel.to_vec(), vec![channels]),
        };
        let mut blocks = out_dims.clone();
        blocks[channel_axis] = Extent::Fixed(out.shape[channel_axis] / block);
        e.nest_over(&blocks, |e, idx| {
            let n = &idx[0];
            let o = layout.spatial(idx);
            let first = e.lin(&[(&idx[channel_axis], block as i64)], 0);
            let ms: Vec<V> = (0..block as i64).map(|j| e.lin(&[(&first, 1)], j)).collect();
            // the group (statically 0 without groups, so the channel is `c` itself)
            let g = match self.group {
                1 => e.idx(0),
                _ => e.div_idx(&first, per_group_out as i64),
            };
            let zeros = vec![e.zero(out.ty()); block];
            let sums = e.nest_acc(&outer, &zeros, |e, a, acc| {
                let k = match layout {
                    Layout::ChannelsFirst => &a[1..],
                    Layout::ChannelsLast => a,
                };
                let pos = self.window.positions(e, o, k);
                let conds = self.window.inside(e, &pos, &bounds, out_extents, kernel);
                e.when(&conds, acc, |e| {
                    e.nest_acc(&inner, acc, |e, b, acc| {
                        let c = match layout {
                            Layout::ChannelsFirst => &a[0],
                            Layout::ChannelsLast => &b[0],
                        };
                        let channel = e.lin(&[(&g, channels as i64), (c, 1)], 0);
                        let xv = e.read(x, &layout.index(n, &channel, &pos));
                        let step = |(m, acc): (&V, &V)| {
                            let wv = self.w.read(e, layout, m, c, k);
                            let p = e.mul(&xv, &wv);
                            e.add(acc, &p)
                        };
                        ms.iter().zip(acc).map(step).collect()
                    })
                })
            });
            for (m, sum) in ms.iter().zip(&sums) {
                let mut at = idx.to_vec();
                at[channel_axis] = m.clone();
                self.finish(e, &at, m, sum);
            }
        });
    }

    /// `y[n, m, o] = sum of x[n, c, i] * w[c, m - g*M/G, k]` over the group's channels `c`
    /// and the `i`, `k` with `i*s + k*d - p = o`.
    fn transposed(&self, e: &mut Emitter, w: &Buf) {
        let (x, out) = (self.x, self.out);
        let channels = x.shape[1] / self.group;
        let per_group_out = w.shape[1];
        let kernel = &w.shape[2..];
        let win = &self.window;
        let mut inner = vec![channels];
        inner.extend_from_slice(kernel);
        let input = x.extents();
        e.nest_over(&out.extents(), |e, idx| {
            let (n, m, o) = (&idx[0], &idx[1], &idx[2..]);
            let g = e.div_idx(m, per_group_out as i64);
            let m_in_group = e.rem_idx(m, per_group_out as i64);
            let zero = e.zero(out.ty());
            let acc = e.nest_acc(&inner, &[zero], |e, ck, acc| {
                let (c, k) = (&ck[0], &ck[1..]);
                let mut conds = Vec::new();
                let mut pos = Vec::new();
                for d in 0..win.spatial() {
                    // o = i*s + k*d - p, so i*s = o + p - k*d
                    let t = e.lin(&[(&o[d], 1), (&k[d], -(win.dilations[d] as i64))], win.pad_begin(d));
                    let s = win.strides[d] as i64;
                    let zero = e.idx(0);
                    conds.push(e.cmp_idx("sge", &t, &zero));
                    if s > 1 {
                        let r = e.rem_idx(&t, s);
                        conds.push(e.cmp_idx("eq", &r, &zero));
                    }
                    let i = e.div_idx(&t, s);
                    let extent = e.extent_value(&input[d + 2]);
                    conds.push(e.cmp_idx("slt", &i, &extent));
                    pos.push(i);
                }
                e.when(&conds, acc, |e| {
                    let channel = e.lin(&[(&g, channels as i64), (c, 1)], 0);
                    let mut xi = vec![n.clone(), channel.clone()];
                    xi.extend(pos);
                    let mut wi = vec![channel, m_in_group.clone()];
                    wi.extend_from_slice(k);
                    vec![e.multiply_add(&acc[0], x, &xi, w, &wi)]
                })
            });
            self.finish(e, idx, m, &acc[0]);
        });
    }

    /// Adds the bias (after the sum, as the ONNX reference does) and stores.
    fn finish(&self, e: &mut Emitter, idx: &[V], m: &V, acc: &V) {
        let r = match self.bias {
            Some(b) => {
                let bv = e.read(b, std::slice::from_ref(m));
                e.add(acc, &bv)
            }
            None => acc.clone(),
        };
        e.write(self.out, idx, &r);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, ints, loop_depth, lower_one, t};
    use mxc_dialects::{Attr, Attrs, DType, OpKind};

    fn window(pads: &[i64], strides: &[i64]) -> Attrs {
        attrs(&[
            ("strides", ints(strides)),
            ("pads", ints(pads)),
            ("dilations", ints(&[1, 1])),
            ("group", Attr::Int(1)),
        ])
    }

    #[test]
    fn a_2d_conv_is_seven_loops_deep() {
        let m = lower_one(
            OpKind::Conv,
            &[t(DType::F32, &[1, 3, 8, 8]), t(DType::F32, &[4, 3, 3, 3])],
            window(&[0; 4], &[1, 1]),
        );
        assert_eq!(loop_depth(&m.mlir), 7, "{}", m.mlir);
        // without padding no position can fall outside the input
        assert!(!m.mlir.contains("scf.if"), "{}", m.mlir);
        check_in_order(
            &m.mlir,
            &["iter_args", "arith.mulf", "arith.addf", "scf.yield", "memref.store"],
        );
    }

    #[test]
    fn padding_guards_the_input_reads_and_bias_is_added_last() {
        let tys = [
            t(DType::F32, &[1, 3, 8, 8]),
            t(DType::F32, &[4, 3, 3, 3]),
            t(DType::F32, &[4]),
        ];
        let m = lower_one(OpKind::Conv, &tys, window(&[1, 1, 1, 1], &[1, 1]));
        check_in_order(
            &m.mlir,
            &[
                "arith.cmpi sge",
                "arith.cmpi slt",
                "scf.if",
                "memref.load %in0",
                "} else {",
                "memref.load %in2",
                "arith.addf",
                "memref.store",
            ],
        );
    }

    #[test]
    fn channels_last_sums_over_the_window_then_the_channels_four_output_channels_at_once() {
        let tys = [
            t(DType::F32, &[1, 8, 8, 3]),
            t(DType::F32, &[8, 3, 3, 3]),
            t(DType::F32, &[8]),
        ];
        let m = lower_one(OpKind::ConvNhwc, &tys, window(&[1, 1, 1, 1], &[1, 1]));
        assert_eq!(loop_depth(&m.mlir), 7, "{}", m.mlir);
        // two blocks of four output channels; the padding is checked once per kernel
        // position, outside the loop over the channels, which reads x and w along their last
        // (contiguous) axis: x once for the four sums, carried side by side
        check_in_order(
            &m.mlir,
            &[
                "the parallel loop over 1x8x8 of 1x8x8x2",
                "= %c0 to %c2 step %c1 {",
                "scf.for",
                "iter_args(",
                "-> (f32, f32, f32, f32)",
                "arith.cmpi sge",
                "scf.if",
                "to %c3 step %c1 iter_args",
                "memref.load %in0",
                "memref.load %in1",
                "arith.mulf",
                "arith.addf",
                "memref.load %in1",
                "memref.load %in1",
                "memref.load %in1",
                "scf.yield",
                "} else {",
                "memref.load %in2[%t5]",
                "arith.addf",
                "memref.store",
                "memref<1x8x8x8xf32>",
            ],
        );
        assert_eq!(m.mlir.matches("memref.load %in0").count(), 1, "{}", m.mlir);
        assert_eq!(m.mlir.matches("memref.store").count(), 4, "{}", m.mlir);
        // x and w are read at [.., c], c the innermost loop's variable
        let lines: Vec<&str> = m.mlir.lines().collect();
        let inner = lines.iter().position(|l| l.contains("memref.load %in0")).unwrap();
        let header = lines[..inner].iter().rev().find(|l| l.contains("scf.for")).unwrap();
        let c = header.split_whitespace().find(|w| w.starts_with("%i")).unwrap();
        for load in lines[inner..inner + 8].iter().filter(|l| l.contains("memref.load")) {
            assert!(load.contains(&format!(", {c}] :")), "not read at [.., {c}]: {load}");
        }
    }

    #[test]
    fn grouped_channels_last_reads_the_groups_channels() {
        let mut a = window(&[0; 4], &[2, 2]);
        a.set("group", Attr::Int(2));
        let m = lower_one(
            OpKind::ConvNhwc,
            &[t(DType::F32, &[1, 6, 6, 4]), t(DType::F32, &[6, 2, 2, 2])],
            a,
        );
        assert!(!m.mlir.contains("scf.if"), "{}", m.mlir);
        // a block is a group's 3 output channels: first = block * 3, group = first / 3,
        // channel = group * 2 + c
        check_in_order(
            &m.mlir,
            &[
                "the parallel loop over 1x3x3x2 of 1x3x3x2",
                "arith.remsi %i0, %c2",
                "arith.muli",
                "%c3",
                "arith.divsi",
                "%c3",
                "arith.muli",
                "%c2",
                "arith.addi",
                "memref.load %in0",
            ],
        );
        assert_eq!(m.mlir.matches("memref.store").count(), 3, "{}", m.mlir);
    }

    #[test]
    fn a_strided_transposed_conv_tests_divisibility() {
        let mut a = window(&[0; 4], &[2, 2]);
        a.set("output_padding", ints(&[1, 1]));
        let m = lower_one(
            OpKind::ConvTranspose,
            &[t(DType::F32, &[1, 2, 3, 3]), t(DType::F32, &[2, 4, 3, 3])],
            a,
        );
        check_in_order(&m.mlir, &["arith.remsi", "arith.cmpi eq", "arith.divsi", "scf.if"]);
    }
}
