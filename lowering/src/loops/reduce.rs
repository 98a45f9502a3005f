//! Reductions over `axes` (sorted, non-negative) with `keepdims`: sum, mean (integer means
//! truncate) and max. The loops run over the kept dimensions outside and the reduced ones
//! inside, accumulating in the compute type.

use super::buffer::Buf;
use super::emit::{Emitter, V};
use super::rows;
use super::sizes::Extent;
use mxc_dialects::{Attrs, OpKind};

pub fn lower(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    let axes = attrs.dims("axes")?;
    let keep = attrs.int("keepdims")? != 0;
    reduce(e, kind, &ins[0], &outs[0], &axes, keep);
    Ok(())
}

/// `out` = the reduction `kind` (`reduce_sum`, `reduce_mean` or `reduce_max`) of `x` over `axes`.
/// On a vector unit, f32 reductions run in vectors: across the last dimension when it is kept
/// (each lane its own reduction), along it when it is the only one reduced.
pub fn reduce(e: &mut Emitter, kind: OpKind, x: &Buf, out: &Buf, axes: &[usize], keep: bool) {
    let kept: Vec<usize> = (0..x.rank()).filter(|d| !axes.contains(d)).collect();
    let extents = x.extents();
    let kept_shape: Vec<Extent> = kept.iter().map(|&d| extents[d].clone()).collect();
    let reduced_shape: Vec<Extent> = axes.iter().map(|&d| extents[d].clone()).collect();
    let reduction = Reduction {
        kind,
        x,
        out,
        kept: &kept,
        axes,
        count: e.extent_product(&reduced_shape),
        reduced_shape,
        keep,
    };
    let last = x.rank().checked_sub(1);
    let vectors = x.holds_float_vectors() && out.holds_float_vectors();
    let last_kept = last.is_some() && kept.last() == last.as_ref();
    let across = e
        .f32_lanes()
        .filter(|&l| last_kept && vectors && x.shape[x.rank() - 1] >= l);
    if let Some(lanes) = across {
        let (outer_dims, width) = kept_shape.split_at(kept_shape.len() - 1);
        return e.nest_over(outer_dims, |e, row| {
            rows::each(e, (width[0].clone(), lanes), &|e, column, lanes| {
                let outer = [row, std::slice::from_ref(column)].concat();
                reduction.at(e, &outer, lanes)
            });
        });
    }
    let last_only = last.is_some() && axes == [x.rank() - 1];
    if let Some(lanes) = e.f32_lanes().filter(|_| last_only && vectors) {
        return reduction.rows(e, lanes);
    }
    // the trailing dimensions reduced (all of them, to one scalar; or a spatial mean of an
    // NCHW tensor): each result folds a contiguous run of elements, as one row in vectors
    let trailing = axes.len() > 1 && axes.iter().enumerate().all(|(i, &d)| d == kept.len() + i);
    let plain = x.epilogue.is_none() && out.epilogue.is_none();
    if let Some(lanes) = e.f32_lanes().filter(|_| trailing && vectors && plain) {
        return as_rows(e, &reduction, lanes);
    }
    e.nest_over(&kept_shape, |e, outer| reduction.at(e, outer, 1));
}

/// `reduction`, whose reduced dimensions are the trailing ones, over views of its buffers as
/// rows: `x` as `[kept..., count]` and the result as `[kept..., 1]`.
fn as_rows(e: &mut Emitter, reduction: &Reduction, lanes: usize) {
    let kept = reduction.kept;
    let extents = reduction.x.extents();
    let outer = &extents[..kept.len()];
    let x = e.view_over(reduction.x, [outer, std::slice::from_ref(&reduction.count)].concat());
    let out = e.view_over(reduction.out, [outer, &[Extent::Fixed(1)]].concat());
    let last = [kept.len()];
    let rows = Reduction {
        kind: reduction.kind,
        x: &x,
        out: &out,
        kept,
        axes: &last,
        reduced_shape: vec![reduction.count.clone()],
        count: reduction.count.clone(),
        keep: true,
    };
    rows.rows(e, lanes);
}

/// One reduction op on its buffers.
struct Reduction<'a> {
    kind: OpKind,
    x: &'a Buf,
    out: &'a Buf,
    kept: &'a [usize],
    axes: &'a [usize],
    reduced_shape: Vec<Extent>,
    /// The elements each result reduces.
    count: Extent,
    keep: bool,
}

impl Reduction<'_> {
    /// `acc` combined with `v`: their sum, or their maximum.
    fn step(&self, e: &mut Emitter, acc: &V, v: &V) -> V {
        match self.kind {
            OpKind::ReduceMax => e.max(acc, v),
            _ => e.add(acc, v),
        }
    }

    /// The result from the reduced value of `count` elements: their mean, or itself.
    fn finish(&self, e: &mut Emitter, r: V, count: &Extent) -> V {
        match self.kind {
            OpKind::ReduceMean => {
                let n = e.extent_as_number(count, r.ty);
                let n = e.splat(&n, r.lanes);
                e.div(&r, &n)
            }
            _ => r,
        }
    }

    /// The result at kept index `outer` (`lanes` results along the last dimension).
    fn at(&self, e: &mut Emitter, outer: &[V], lanes: usize) {
        let (x, axes, kept) = (self.x, self.axes, self.kept);
        let init = match self.kind {
            OpKind::ReduceMax => e.lowest(x.ty()),
            _ => e.zero(x.ty()),
        };
        let init = e.splat(&init, lanes);
        let acc = e.nest_acc_over(&self.reduced_shape, &[init], |e, inner, acc| {
            let idx = merge(x.rank(), kept, outer, axes, inner);
            let v = e.read_lanes(x, &idx, lanes);
            vec![self.step(e, &acc[0], &v)]
        });
        let r = self.finish(e, acc[0].clone(), &self.count);
        let out_idx = if self.keep {
            let zeros: Vec<V> = axes.iter().map(|_| e.idx(0)).collect();
            merge(x.rank(), kept, outer, axes, &zeros)
        } else {
            outer.to_vec()
        };
        e.write(self.out, &out_idx, &r);
    }

    /// The last dimension alone reduced: each row folded in vectors, then across the lanes.
    fn rows(&self, e: &mut Emitter, lanes: usize) {
        let x = self.x;
        let mut outer = x.extents();
        let n = outer.pop().expect("a reduced last dimension");
        let (neutral, across) = match self.kind {
            OpKind::ReduceMax => (f64::NEG_INFINITY, "maximumf"),
            _ => (0.0, "add"),
        };
        e.nest_over(&outer, |e, row| {
            let read =
                |e: &mut Emitter, j: &V, lanes: usize| e.read_lanes(x, &[row, std::slice::from_ref(j)].concat(), lanes);
            let folded = rows::fold(e, (n.clone(), lanes), (neutral, neutral), &read, &|e, a, v| {
                self.step(e, a, v)
            });
            let r = e.reduce_lanes(across, &folded);
            let r = self.finish(e, r, &n);
            let mut at = row.to_vec();
            if self.keep {
                at.push(e.idx(0));
            }
            e.write(self.out, &at, &r);
        });
    }
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
    fn trailing_dimensions_reduced_fold_each_result_as_one_row_of_vectors() {
        for (shape, axes, keep) in [(&[2, 3, 40][..], &[0, 1, 2][..], 0), (&[1, 8, 5, 7], &[2, 3], 1)] {
            let a = attrs(&[("axes", ints(axes)), ("keepdims", Attr::Int(keep))]);
            let m = super::super::testing::lower_one_vector(OpKind::ReduceSum, &[t(DType::F32, shape)], a);
            check_in_order(
                &m,
                &["memref.reinterpret_cast", "vector<8xf32>", "vector.reduction <add>"],
            );
        }
    }

    #[test]
    fn an_integer_max_starts_from_the_least_value() {
        let a = attrs(&[("axes", ints(&[1])), ("keepdims", Attr::Int(0))]);
        let m = lower_one(OpKind::ReduceMax, &[t(DType::I8, &[2, 3])], a).mlir;
        check_in_order(&m, &["arith.constant -128 : i8", "arith.maxsi"]);
    }
}
