//! `ArgMax`, `ArgMin` and `Hardmax` from a `reduce_max`: the positions equal to the extreme
//! value along the axis are marked, and the first (or last) marked position is found as a
//! `reduce_max` of the ramp `0..n` where marked; `Hardmax` is the one-hot of `ArgMax`. `TopK`
//! picks `k` such positions in turn, each excluded from the next picks (for `k` up to
//! `TOP_K_LIMIT`: each pick is a pass over the data).

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::activation::limits;
use super::axes;
use super::index::take_along_axis;
use super::layout::concat_values;
use super::shape::reshape;
use mxc_dialects::{DType, OpKind, Tensor, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("ArgMax", |ctx| arg_extreme(ctx, Extreme::Max));
    r.add_all("ArgMin", |ctx| arg_extreme(ctx, Extreme::Min));
    r.add("", "Hardmax", 1, 12, |ctx| hardmax(ctx, true));
    r.add("", "Hardmax", 13, LATEST, |ctx| hardmax(ctx, false));
    r.add_all("TopK", top_k);
}

/// The largest `k` `TopK` is built for: each of the `k` picks is a pass over the data.
const TOP_K_LIMIT: usize = 64;

#[derive(Clone, Copy, PartialEq)]
enum Extreme {
    Max,
    Min,
}

fn arg_extreme(ctx: &mut Ctx, extreme: Extreme) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).shape.clone();
    let axis = axes::axis(ctx.node.int("axis", 0)?, shape.len())?;
    let keepdims = ctx.node.int("keepdims", 1)? != 0;
    let last = ctx.node.int("select_last_index", 0)? != 0;
    let index = position_of(ctx, x, axis, extreme, last)?;
    if keepdims {
        return Ok(vec![index]);
    }
    let mut reduced = shape;
    reduced.remove(axis);
    Ok(vec![reshape(ctx, index, &reduced)?])
}

/// The i64 position along `axis` (kept, with extent 1) of the first or `last` extreme of `x`.
fn position_of(ctx: &mut Ctx, x: ValueId, axis: usize, extreme: Extreme, last: bool) -> Result<ValueId, String> {
    let ty = ctx.ty(x).clone();
    // the minimum is the maximum of the negation; unsigned integers have no negation
    let x = match extreme {
        Extreme::Max => x,
        Extreme::Min if ty.dtype.is_float() || ty.dtype.is_signed_int() => ctx.op(OpKind::Neg, &[x])?,
        Extreme::Min => return Err(format!("ArgMin of {} is not supported", ty.dtype)),
    };
    if ty.dtype == DType::Bool {
        return Err("the extreme of a bool tensor is not supported".into());
    }
    let n = ty.shape[axis];
    let top = ctx.reduce(OpKind::ReduceMax, x, &[axis], true)?;
    let marked = ctx.op(OpKind::Equal, &[x, top])?;
    let ramp = ctx.ramp(n, axis, ty.rank(), DType::I64)?;
    if last {
        let none = ctx.scalar(DType::I64, -1.0);
        let candidates = ctx.op(OpKind::Where, &[marked, ramp, none])?;
        return ctx.reduce(OpKind::ReduceMax, candidates, &[axis], true);
    }
    first_marked(ctx, marked, ramp, n, axis)
}

/// The `k` largest (or smallest) entries along the axis and their positions, in order, ties
/// going to the lower position. Each pick is the first extreme among the positions not yet
/// taken, found as `position_of` finds it with the taken positions set to the lowest value
/// and unmarked.
fn top_k(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    let axis = axes::axis(ctx.node.int("axis", -1)?, ty.rank())?;
    let k = if ctx.opset < 10 {
        ctx.node.opt_int("k")?.ok_or("missing attribute `k`")?
    } else {
        ctx.const_number(1, "k")?.get_i64(0)
    };
    let n = ty.shape[axis];
    let k = usize::try_from(k)
        .ok()
        .filter(|&k| k <= n)
        .ok_or(format!("k {k} is not in 0..={n}"))?;
    if k > TOP_K_LIMIT {
        return Err(format!(
            "k {k} is not supported (at most {TOP_K_LIMIT}: mxc has no sort kernel yet)"
        ));
    }
    let largest = ctx.node.int("largest", 1)? != 0;
    // unsorted results may come in any order; sorted ones are what this gives
    ctx.node.without_effect(&["sorted"]);
    if ty.dtype == DType::Bool || (!largest && ty.dtype.is_unsigned_int()) {
        return Err(format!("TopK of {} is not supported", ty.dtype));
    }
    let keys = if largest { x } else { ctx.op(OpKind::Neg, &[x])? };
    let lowest = ctx.constant(limits(ty.dtype, true).0);
    let ramp = ctx.ramp(n, axis, ty.rank(), DType::I64)?;
    let mut taken: Option<ValueId> = None;
    let (mut values, mut indices) = (Vec::new(), Vec::new());
    for _ in 0..k {
        let (open, free) = match taken {
            Some(t) => (
                ctx.op(OpKind::Where, &[t, lowest, keys])?,
                Some(ctx.op(OpKind::Not, &[t])?),
            ),
            None => (keys, None),
        };
        let top = ctx.reduce(OpKind::ReduceMax, open, &[axis], true)?;
        let mut marked = ctx.op(OpKind::Equal, &[open, top])?;
        if let Some(free) = free {
            marked = ctx.op(OpKind::Where, &[free, marked, free])?;
        }
        let index = first_marked(ctx, marked, ramp, n, axis)?;
        let hit = ctx.op(OpKind::Equal, &[ramp, index])?;
        taken = Some(match taken {
            Some(t) => ctx.op(OpKind::Where, &[hit, hit, t])?,
            None => hit,
        });
        values.push(take_along_axis(ctx, x, index, axis)?);
        indices.push(index);
    }
    if k == 0 {
        let mut shape = ty.shape.clone();
        shape[axis] = 0;
        let empty = |ctx: &mut Ctx, dtype| ctx.constant(Tensor::from_f64s(dtype, shape.clone(), &[]));
        return Ok(vec![empty(ctx, ty.dtype), empty(ctx, DType::I64)]);
    }
    Ok(vec![
        concat_values(ctx, values, axis)?,
        concat_values(ctx, indices, axis)?,
    ])
}

/// The lowest position along `axis` that `marked` marks (kept, extent 1), as i64.
pub fn first_marked(ctx: &mut Ctx, marked: ValueId, ramp: ValueId, n: usize, axis: usize) -> Result<ValueId, String> {
    let negated = ctx.op(OpKind::Neg, &[ramp])?;
    let none = ctx.scalar(DType::I64, -(n as f64));
    let candidates = ctx.op(OpKind::Where, &[marked, negated, none])?;
    let first = ctx.reduce(OpKind::ReduceMax, candidates, &[axis], true)?;
    ctx.op(OpKind::Neg, &[first])
}

/// 1 at the first maximum along the axis, 0 elsewhere; before opset 13 (`legacy`) the input is
/// seen as a matrix of the dims before `axis` by the dims from it on.
fn hardmax(ctx: &mut Ctx, legacy: bool) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    let axis = axes::axis(ctx.node.int("axis", if legacy { 1 } else { -1 })?, ty.rank())?;
    let (v, axis) = if legacy {
        let (outer, inner) = ty.shape.split_at(axis);
        (reshape(ctx, x, &[outer.iter().product(), inner.iter().product()])?, 1)
    } else {
        (x, axis)
    };
    let vt = ctx.ty(v).clone();
    let index = position_of(ctx, v, axis, Extreme::Max, false)?;
    let ramp = ctx.ramp(vt.shape[axis], axis, vt.rank(), DType::I64)?;
    let hot = ctx.op(OpKind::Equal, &[index, ramp])?;
    let y = ctx.cast(hot, ty.dtype)?;
    Ok(vec![reshape(ctx, y, &ty.shape)?])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::Tensor;

    fn arg(op: &str, last: i64) -> Vec<f64> {
        let g = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2, 3])
            .node(node(
                op,
                &["x"],
                &["y"],
                vec![
                    int_attr("axis", 1),
                    int_attr("keepdims", 0),
                    int_attr("select_last_index", last),
                ],
            ))
            .output("y")
            .import()
            .unwrap();
        let x = Tensor::from_f32s(vec![2, 3], &[1., 5., 5., 2., 0., 2.]);
        run(&g, &[x]).unwrap()[0].to_f64_vec()
    }

    #[test]
    fn ties_go_to_the_first_or_the_last() {
        assert_eq!(arg("ArgMax", 0), [1., 0.]);
        assert_eq!(arg("ArgMax", 1), [2., 2.]);
        assert_eq!(arg("ArgMin", 0), [0., 1.]);
        assert_eq!(arg("ArgMin", 1), [0., 1.]);
    }

    #[test]
    fn hardmax_marks_the_first_maximum() {
        let g = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2, 3])
            .node(node("Hardmax", &["x"], &["y"], vec![]))
            .output("y")
            .import()
            .unwrap();
        let x = Tensor::from_f32s(vec![2, 3], &[1., 5., 5., 2., 0., 2.]);
        assert_eq!(run(&g, &[x]).unwrap()[0].to_f64_vec(), [0., 1., 0., 1., 0., 0.]);
    }

    #[test]
    fn top_k_takes_each_position_once_ties_first() {
        let g = ModelBuilder::new(11)
            .input("x", DataType::Float, &[4])
            .init(i64_tensor("k", &[1], &[4]))
            .node(node("TopK", &["x", "k"], &["v", "i"], vec![]))
            .output("v")
            .output("i")
            .import()
            .unwrap();
        let x = Tensor::from_f32s(vec![4], &[3.0, f32::NEG_INFINITY, f32::NEG_INFINITY, 3.0]);
        let out = run(&g, &[x]).unwrap();
        assert_eq!(out[0].to_f64_vec(), [3.0, 3.0, f64::NEG_INFINITY, f64::NEG_INFINITY]);
        assert_eq!(out[1].to_i64_vec(), [0, 3, 1, 2]);
    }
}
