//! Reductions over `axes` (sorted, non-negative) with `keepdims`: sum, mean (integer means
//! truncate) and max. The loops run over the kept dimensions outside and the reduced ones
//! inside, accumulating in the compute type.

use super::buffer::Buf;
use super::elementwise::in_vectors;
use super::emit::{Emitter, Ty, V};
use super::rows;
use mxc_dialects::{Attrs, OpKind};

pub fn lower(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    let axes = attrs.dims("axes")?;
    let keep = attrs.int("keepdims")? != 0;
    reduce(e, kind, &ins[0], &outs[0], &axes, keep);
    Ok(())
}

/// `out` = the reduction `kind` (`reduce_sum`, `reduce_mean` or `reduce_max`) of `x` over `axes`.
pub fn reduce(e: &mut Emitter, kind: OpKind, x: &Buf, out: &Buf, axes: &[usize], keep: bool) {
    let kept: Vec<usize> = (0..x.rank()).filter(|d| !axes.contains(d)).collect();
    let kept_shape: Vec<usize> = kept.iter().map(|&d| x.shape[d]).collect();
    let reduced_shape: Vec<usize> = axes.iter().map(|&d| x.shape[d]).collect();
    let count: usize = reduced_shape.iter().product();
    let ty = x.ty();
    let last = x.rank().checked_sub(1);
    let vectors = x.holds_f32_vectors() && out.holds_f32_vectors();
    let last_kept = last.is_some() && kept.last() == last.as_ref();
    let lanes = e
        .f32_lanes()
        .filter(|&l| last_kept && vectors && x.shape[x.rank() - 1] >= l);
    if let Some(lanes) = lanes {
        return reduce_across(
            e,
            kind,
            (x, out),
            (&kept, &kept_shape),
            (axes, &reduced_shape),
            keep,
            lanes,
        );
    }
    let last_only = last.is_some() && axes == [x.rank() - 1];
    if let Some(lanes) = e.f32_lanes().filter(|_| last_only && vectors) {
        return reduce_rows(e, kind, x, out, keep, lanes);
    }
    e.nest(&kept_shape, |e, outer| {
        let init = if kind == OpKind::ReduceMax {
            e.lowest(ty)
        } else {
            e.zero(ty)
        };
        let acc = e.nest_acc(&reduced_shape, &[init], |e, inner, acc| {
            let idx = merge(x.rank(), &kept, outer, axes, inner);
            let v = e.read(x, &idx);
            vec![if kind == OpKind::ReduceMax {
                e.max(&acc[0], &v)
            } else {
                e.add(&acc[0], &v)
            }]
        });
        let mut r = acc[0].clone();
        if kind == OpKind::ReduceMean {
            let n = e.num(ty, count as f64);
            r = e.div(&r, &n);
        }
        let out_idx = if keep {
            let zeros: Vec<V> = axes.iter().map(|_| e.idx(0)).collect();
            merge(x.rank(), &kept, outer, axes, &zeros)
        } else {
            outer.to_vec()
        };
        e.write(out, &out_idx, &r);
    });
}

/// The full index of a rank-`rank` tensor from the indices of the dimensions in `a` and in `b`.
/// `reduce` of the last dimension alone: each row folded in vectors, then across the lanes.
fn reduce_rows(e: &mut Emitter, kind: OpKind, x: &Buf, out: &Buf, keep: bool, lanes: usize) {
    let n = x.shape[x.rank() - 1];
    e.nest(&x.shape[..x.rank() - 1], |e, row| {
        let read =
            |e: &mut Emitter, j: &V, lanes: usize| e.read_lanes(x, &[row, std::slice::from_ref(j)].concat(), lanes);
        let r = match kind {
            OpKind::ReduceMax => {
                let inf = f64::NEG_INFINITY;
                let m = rows::fold(e, (n, lanes), (inf, inf), &read, &|e, a, v| e.max(a, v));
                e.reduce_lanes("maximumf", &m)
            }
            _ => {
                let s = rows::fold(e, (n, lanes), (0.0, 0.0), &read, &|e, a, v| e.add(a, v));
                e.reduce_lanes("add", &s)
            }
        };
        let r = match kind {
            OpKind::ReduceMean => {
                let count = e.num(Ty::F32, n as f64);
                e.div(&r, &count)
            }
            _ => r,
        };
        let mut at = row.to_vec();
        if keep {
            at.push(e.idx(0));
        }
        e.write(out, &at, &r);
    });
}

/// `reduce` where the last dimension is kept: vectors run along it, each lane its own sum.
fn reduce_across(
    e: &mut Emitter,
    kind: OpKind,
    (x, out): (&Buf, &Buf),
    (kept, kept_shape): (&[usize], &[usize]),
    (axes, reduced_shape): (&[usize], &[usize]),
    keep: bool,
    lanes: usize,
) {
    let (rows, width) = kept_shape.split_at(kept_shape.len() - 1);
    let width = width[0];
    let count: usize = reduced_shape.iter().product();
    e.nest(rows, |e, row| {
        e.for_each(width.div_ceil(lanes), |e, chunk| {
            let mut outer = row.to_vec();
            outer.push(e.lin(&[(&chunk, lanes as i64)], 0));
            in_vectors(e, &chunk, width, lanes, |e, lanes| {
                let init = if kind == OpKind::ReduceMax {
                    e.lowest(Ty::F32)
                } else {
                    e.zero(Ty::F32)
                };
                let init = e.splat(&init, lanes);
                let acc = e.nest_acc(reduced_shape, &[init], |e, inner, acc| {
                    let idx = merge(x.rank(), kept, &outer, axes, inner);
                    let v = e.read_lanes(x, &idx, lanes);
                    vec![if kind == OpKind::ReduceMax {
                        e.max(&acc[0], &v)
                    } else {
                        e.add(&acc[0], &v)
                    }]
                });
                let mut r = acc[0].clone();
                if kind == OpKind::ReduceMean {
                    let n = e.num(Ty::F32, count as f64);
                    r = e.div(&r, &n);
                }
                let out_idx = if keep {
                    let zeros: Vec<V> = axes.iter().map(|_| e.idx(0)).collect();
                    merge(x.rank(), kept, &outer, axes, &zeros)
                } else {
                    outer.clone()
                };
                e.write(out, &out_idx, &r);
            });
        });
    });
}

fn merge(rank: usize, a: &[usize], a_idx: &[V], b: &[usize], b_idx: &[V]) -> Vec<V> {
    let mut idx = vec![None; rank];
    for (&d, v) in a.iter().zip(a_idx).chain(b.iter().zip(b_idx)) {
        idx[d] = Some(v.clone());
    }
    idx.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, ints, loop_depth, lower_one, t};
    use mxc_dialects::{Attr, DType, OpKind};

    #[test]
    fn kept_dimensions_outside_reduced_ones_inside() {
        let a = attrs(&[("axes", ints(&[0, 2])), ("keepdims", Attr::Int(1))]);
        let m = lower_one(OpKind::ReduceMean, &[t(DType::F32, &[2, 3, 4])], a).mlir;
        assert_eq!(loop_depth(&m), 3, "{m}");
        check_in_order(
            &m,
            &[
                "memref<1x3x1xf32>",
                "arith.constant 8.0e0",
                "iter_args",
                "arith.addf",
                "arith.divf",
                "memref.store",
            ],
        );
    }

    #[test]
    fn an_integer_max_starts_from_the_least_value() {
        let a = attrs(&[("axes", ints(&[1])), ("keepdims", Attr::Int(0))]);
        let m = lower_one(OpKind::ReduceMax, &[t(DType::I8, &[2, 3])], a).mlir;
        check_in_order(&m, &["arith.constant -128 : i8", "arith.maxsi"]);
    }
}
