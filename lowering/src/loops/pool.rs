//! Pooling: max and average over an N-d window (strides, dilations, explicit pads; the
//! result extent already accounts for `ceil_mode`), channels first, or 2-D channels last
//! (`max_pool_nhwc`, `average_pool_nhwc`), and global average pooling.
//!
//! Padding never takes part in a max. An average divides by the number of window positions
//! inside the input, or with `count_include_pad` inside the padded input (a window that runs
//! past the end padding because of `ceil_mode` counts only what lies within it). Global
//! average pooling is a mean over the spatial dimensions.
//!
//! Channels last on a vector unit, vectors run across the channels, and for each output pixel
//! the window positions inside the input are a rectangle: loops with bounds computed per pixel
//! and no test inside; the count is the rectangle's area.

use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::reduce;
use super::rows;
use super::sizes::Extent;
use super::window::{spans, Span, Window};
use mxc_dialects::{Attrs, OpKind};

pub fn lower(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    use OpKind::*;
    let (x, out) = (&ins[0], &outs[0]);
    if kind == GlobalAveragePool {
        let spatial: Vec<usize> = (2..x.rank()).collect();
        reduce::reduce(e, ReduceMean, x, out, &spatial, true);
        return Ok(());
    }
    let pool = Pool {
        max: matches!(kind, MaxPool | MaxPoolNhwc),
        include_pad: matches!(kind, AveragePool | AveragePoolNhwc) && attrs.int("count_include_pad")? != 0,
        channels_last: matches!(kind, MaxPoolNhwc | AveragePoolNhwc),
        window: Window::from_attrs(attrs)?,
        kernel: attrs.dims("kernel")?,
    };
    match kind {
        MaxPool | AveragePool | MaxPoolNhwc | AveragePoolNhwc => {
            match e.f32_lanes().filter(|_| {
                let float = x.holds_float_vectors() && out.holds_float_vectors();
                // a maximum compares integers (a quantised model's bytes) as well
                let integers = pool.max && x.dtype.is_int() && x.holds_vectors() && out.holds_vectors();
                pool.channels_last && (float || integers)
            }) {
                Some(lanes) => pool.vectors(e, lanes, x, out),
                None => pool.scalar(e, x, out),
            }
            Ok(())
        }
        _ => Err(format!("{kind} is not a pooling op")),
    }
}

/// A windowed pooling op.
struct Pool {
    max: bool,
    include_pad: bool,
    channels_last: bool,
    window: Window,
    kernel: Vec<usize>,
}

impl Pool {
    /// The spatial part of a shape or an index.
    fn spatial<'t, T>(&self, dims: &'t [T]) -> &'t [T] {
        match self.channels_last {
            true => &dims[1..dims.len() - 1],
            false => &dims[2..],
        }
    }

    /// The index `(n, c, spatial...)` in this layout.
    fn index(&self, n: &V, c: &V, pos: &[V]) -> Vec<V> {
        match self.channels_last {
            true => [std::slice::from_ref(n), pos, std::slice::from_ref(c)].concat(),
            false => [&[n.clone(), c.clone()], pos].concat(),
        }
    }

    /// One result element per iteration, the window's positions tested one by one.
    fn scalar(&self, e: &mut Emitter, x: &Buf, out: &Buf) {
        let (win, kernel) = (&self.window, &self.kernel[..]);
        let ty = x.ty();
        let (x_dims, out_dims) = (x.extents(), out.extents());
        let extents = self.spatial(&x_dims);
        let out_extents = self.spatial(&out_dims);
        let input = spans(extents);
        let padded = self.padded(e, extents);
        e.nest_over(&out_dims, |e, idx| {
            let n = &idx[0];
            let c = if self.channels_last {
                &idx[idx.len() - 1]
            } else {
                &idx[1]
            };
            let o = self.spatial(idx);
            let inits = if self.max {
                vec![e.lowest(ty)]
            } else {
                vec![e.zero(ty), e.zero(ty)]
            };
            let acc = e.nest_acc(kernel, &inits, |e, k, acc| {
                let pos = win.positions(e, o, k);
                let inside = win.inside(e, &pos, &input, out_extents, kernel);
                if self.max {
                    return e.when(&inside, acc, |e| {
                        let v = e.read(x, &self.index(n, c, &pos));
                        vec![e.max(&acc[0], &v)]
                    });
                }
                // the count: positions inside the input, or inside the padded input
                let counted = if self.include_pad {
                    win.inside(e, &pos, &padded, out_extents, kernel)
                } else {
                    inside.clone()
                };
                let count = increment_if(e, &counted, &acc[1]);
                let sum = e.when(&inside, &acc[..1], |e| {
                    let v = e.read(x, &self.index(n, c, &pos));
                    vec![e.add(&acc[0], &v)]
                });
                vec![sum[0].clone(), count]
            });
            let r = if self.max {
                acc[0].clone()
            } else {
                e.div(&acc[0], &acc[1])
            };
            e.write(out, idx, &r);
        });
    }

    /// The padded input's range along each spatial dimension.
    fn padded(&self, e: &mut Emitter, extents: &[Extent]) -> Vec<Span> {
        (0..self.window.spatial())
            .map(|d| {
                let end = e.extent_offset(&extents[d], self.window.pad_end(d));
                (-self.window.pad_begin(d), end)
            })
            .collect()
    }

    /// Channels last (2-D), f32 (or integers, for a maximum): per output pixel, the window's
    /// rectangle inside the input, vectors of channels.
    fn vectors(&self, e: &mut Emitter, lanes: usize, x: &Buf, out: &Buf) {
        let (win, kernel) = (&self.window, &self.kernel[..]);
        let channels = x.shape[3];
        let (x_dims, out_dims) = (x.extents(), out.extents());
        let input = spans(&x_dims[1..3]);
        let counted = match self.include_pad {
            true => self.padded(e, &x_dims[1..3]),
            false => input.clone(),
        };
        e.nest_over(&out_dims[..3], |e, idx| {
            let (n, o) = (&idx[0], &idx[1..3]);
            let inside: Vec<(V, V)> = (0..2)
                .map(|d| win.range_inside(e, d, &input[d], (&out_dims[d + 1], kernel[d]), &o[d]))
                .collect();
            let count = (!self.max).then(|| {
                let sides: Vec<V> = (0..2)
                    .map(|d| {
                        let (lo, hi) = win.range_inside(e, d, &counted[d], (&out_dims[d + 1], kernel[d]), &o[d]);
                        e.lin(&[(&hi, 1), (&lo, -1)], 0)
                    })
                    .collect();
                let area = e.op(
                    "t",
                    Ty::Index,
                    &format!("arith.muli {}, {} : index", sides[0], sides[1]),
                );
                let area = e.convert(&area, Ty::Int { bits: 64, signed: true });
                e.convert(&area, Ty::F32)
            });
            rows::each(e, (channels, lanes), &|e, c, lanes| {
                let ty = super::buffer::compute_ty(x.dtype);
                let init = if self.max { e.lowest(ty) } else { e.zero(Ty::F32) };
                let init = e.splat(&init, lanes);
                let acc = e.for_between(&inside[0].0, &inside[0].1, kernel[0] as u64, &[init], |e, kh, acc| {
                    e.for_between(&inside[1].0, &inside[1].1, kernel[1] as u64, acc, |e, kw, acc| {
                        let pos = win.positions(e, o, &[kh.clone(), kw.clone()]);
                        let v = e.read_lanes(x, &self.index(n, c, &pos), lanes);
                        vec![if self.max {
                            e.max(&acc[0], &v)
                        } else {
                            e.add(&acc[0], &v)
                        }]
                    })
                });
                let r = match &count {
                    Some(count) => e.div(&acc[0], count),
                    None => acc[0].clone(),
                };
                e.write(out, &self.index(n, c, o), &r);
            });
        });
    }
}

/// `count + 1` when all of `conds` hold, else `count`.
fn increment_if(e: &mut Emitter, conds: &[V], count: &V) -> V {
    let one = e.one(count.ty);
    let next = e.add(count, &one);
    if conds.is_empty() {
        return next;
    }
    let cond = e.all(conds);
    e.select(&cond, &next, count)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, ints, loop_depth, lower_one, t};
    use mxc_dialects::{Attr, DType, OpKind};

    fn pool(kind: OpKind, pads: &[i64], include_pad: i64) -> String {
        let mut a = attrs(&[
            ("kernel", ints(&[2, 2])),
            ("strides", ints(&[2, 2])),
            ("pads", ints(pads)),
            ("dilations", ints(&[1, 1])),
            ("ceil_mode", Attr::Int(0)),
        ]);
        if kind == OpKind::AveragePool {
            a.set("count_include_pad", Attr::Int(include_pad));
        }
        lower_one(kind, &[t(DType::F32, &[1, 2, 6, 6])], a).mlir
    }

    #[test]
    fn max_pool_starts_from_minus_infinity() {
        let m = pool(OpKind::MaxPool, &[0; 4], 0);
        assert_eq!(loop_depth(&m), 6, "{m}");
        check_in_order(&m, &["arith.constant 0xFF800000 : f32", "iter_args", "arith.maximumf"]);
    }

    #[test]
    fn average_pool_counts_the_positions_it_divides_by() {
        let m = pool(OpKind::AveragePool, &[1, 1, 1, 1], 0);
        check_in_order(
            &m,
            &[
                "scf.for",
                "iter_args",
                "arith.addf",
                "arith.select",
                "scf.if",
                "arith.addf",
                "arith.divf",
            ],
        );
        // counting the padding too: every window position lies within the padded input
        let m = pool(OpKind::AveragePool, &[1, 1, 1, 1], 1);
        assert!(!m.contains("arith.select"), "{m}");
    }

    #[test]
    fn global_average_pool_is_a_mean_over_the_spatial_dimensions() {
        let m = lower_one(
            OpKind::GlobalAveragePool,
            &[t(DType::F32, &[1, 2, 3, 3])],
            Default::default(),
        )
        .mlir;
        check_in_order(
            &m,
            &["arith.constant 9.0e0 : f32", "arith.addf", "arith.divf", "memref.store"],
        );
    }
}
