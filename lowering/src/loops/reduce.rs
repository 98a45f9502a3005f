//! Reductions over `axes` (sorted, non-negative) with `keepdims`: sum, mean (integer means
//! truncate) and max. The loops run over the kept dimensions outside and the reduced ones
//! inside, accumulating in the compute type.

use super::buffer::Buf;
use super::emit::{Emitter, V};
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
