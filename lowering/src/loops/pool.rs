//! Pooling: max and average over an N-d window (strides, dilations, explicit pads; the
//! result extent already accounts for `ceil_mode`), and global average pooling.
//!
//! Padding never takes part in a max. An average divides by the number of window positions
//! inside the input, or with `count_include_pad` inside the padded input (a window that runs
//! past the end padding because of `ceil_mode` counts only what lies within it). Global
//! average pooling is a mean over the spatial dimensions.

use super::buffer::Buf;
use super::emit::{Emitter, V};
use super::reduce;
use super::window::Window;
use mxc_dialects::{Attrs, OpKind};

pub fn lower(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    let (x, out) = (&ins[0], &outs[0]);
    match kind {
        OpKind::GlobalAveragePool => {
            let spatial: Vec<usize> = (2..x.rank()).collect();
            reduce::reduce(e, OpKind::ReduceMean, x, out, &spatial, true);
        }
        OpKind::MaxPool | OpKind::AveragePool => {
            let window = Window::from_attrs(attrs)?;
            let kernel = attrs.dims("kernel")?;
            let include_pad = kind == OpKind::AveragePool && attrs.int("count_include_pad")? != 0;
            windowed(e, kind == OpKind::MaxPool, include_pad, &window, &kernel, x, out);
        }
        _ => return Err(format!("{kind} is not a pooling op")),
    }
    Ok(())
}

fn windowed(e: &mut Emitter, max: bool, include_pad: bool, win: &Window, kernel: &[usize], x: &Buf, out: &Buf) {
    let ty = x.ty();
    let extents = &x.shape[2..];
    let out_extents = &out.shape[2..];
    e.nest(&out.shape, |e, idx| {
        let (n, c, o) = (&idx[0], &idx[1], &idx[2..]);
        let inits = if max {
            vec![e.lowest(ty)]
        } else {
            vec![e.zero(ty), e.zero(ty)]
        };
        let acc = e.nest_acc(kernel, &inits, |e, k, acc| {
            let pos = win.positions(e, o, k);
            let input: Vec<(i64, i64)> = extents.iter().map(|&n| (0, n as i64)).collect();
            let inside = win.inside(e, &pos, &input, out_extents, kernel);
            if max {
                return e.when(&inside, acc, |e| {
                    let v = read_at(e, x, n, c, &pos);
                    vec![e.max(&acc[0], &v)]
                });
            }
            // the count: positions inside the input, or inside the padded input
            let counted = if include_pad {
                let padded: Vec<(i64, i64)> = (0..win.spatial())
                    .map(|d| (-win.pad_begin(d), extents[d] as i64 + win.pad_end(d)))
                    .collect();
                win.inside(e, &pos, &padded, out_extents, kernel)
            } else {
                inside.clone()
            };
            let count = increment_if(e, &counted, &acc[1]);
            let sum = e.when(&inside, &acc[..1], |e| {
                let v = read_at(e, x, n, c, &pos);
                vec![e.add(&acc[0], &v)]
            });
            vec![sum[0].clone(), count]
        });
        let r = if max { acc[0].clone() } else { e.div(&acc[0], &acc[1]) };
        e.write(out, idx, &r);
    });
}

fn read_at(e: &mut Emitter, x: &Buf, n: &V, c: &V, pos: &[V]) -> V {
    let mut xi = vec![n.clone(), c.clone()];
    xi.extend_from_slice(pos);
    e.read(x, &xi)
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
