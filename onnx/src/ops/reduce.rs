//! Reductions: `ReduceSum`, `ReduceMean`, `ReduceMax`, `ReduceMin` (of floats and bools,
//! through `reduce_max`), and `ReduceL1`, `ReduceL2`,
//! `ReduceSumSquare`, `ReduceLogSum`, `ReduceLogSumExp` as element-wise ops around a
//! `reduce_sum`; `ReduceProd` as halves multiplied until one is left. Axes are an attribute until the op's opset that made them an input (13 for
//! `ReduceSum`, 18 for the others); no axes means all of them, unless `noop_with_empty_axes`.

use super::super::ctx::Ctx;
use super::super::registry::{ParseFn, Registry};
use super::axes;
use super::layout::{concat_values, slice_value, DimSlice};
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    for (op, parse) in [
        ("ReduceSum", reduce_sum as ParseFn),
        ("ReduceMean", reduce_mean),
        ("ReduceMax", reduce_max),
        ("ReduceMin", reduce_min),
        ("ReduceProd", reduce_prod),
        ("ReduceL1", reduce_l1),
        ("ReduceL2", reduce_l2),
        ("ReduceSumSquare", reduce_sum_square),
        ("ReduceLogSum", reduce_log_sum),
        ("ReduceLogSumExp", reduce_log_sum_exp),
    ] {
        r.add_all(op, parse);
    }
}

/// Builds `kind` over the axes the node names (from opset `input_since` an input), or
/// returns `x` unchanged for an empty list with `noop_with_empty_axes`.
fn reduce(ctx: &mut Ctx, kind: OpKind, x: ValueId, input_since: i64) -> Result<ValueId, String> {
    let Some((list, keepdims)) = reduced_axes(ctx, ctx.ty(x).rank(), input_since)? else {
        return Ok(x);
    };
    let attrs = Attrs::new()
        .with("axes", axes::ints(&list))
        .with("keepdims", Attr::Int(keepdims as i64));
    ctx.build1(kind, vec![x], attrs)
}

/// The axes the node reduces and `keepdims`, or `None` for an empty list with
/// `noop_with_empty_axes`.
fn reduced_axes(ctx: &Ctx, rank: usize, input_since: i64) -> Result<Option<(Vec<usize>, bool)>, String> {
    let given = if ctx.opset < input_since {
        ctx.node.opt_ints("axes")?
    } else {
        ctx.opt_const_input(1, "axes")?.map(|t| t.to_i64_vec())
    };
    let noop = ctx.node.int("noop_with_empty_axes", 0)? != 0;
    let keepdims = ctx.node.int("keepdims", 1)? != 0;
    let list = match given {
        Some(list) if !list.is_empty() => axes::axes(&list, rank)?,
        _ if noop => return Ok(None),
        _ => (0..rank).collect(),
    };
    Ok(Some((list, keepdims)))
}

/// The product over the reduced axes: they are moved last and merged, and the two halves of
/// the merged axis multiplied until one entry is left (an odd extent is padded with a 1).
fn reduce_prod(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    if ty.dtype == DType::Bool {
        return Err("cannot reduce a bool tensor".into());
    }
    let Some((list, keepdims)) = reduced_axes(ctx, ty.rank(), 18)? else {
        return Ok(vec![x]);
    };
    let kept: Vec<usize> = (0..ty.rank()).filter(|d| !list.contains(d)).collect();
    let out_shape: Vec<usize> = (0..ty.rank())
        .filter_map(|d| match (list.contains(&d), keepdims) {
            (false, _) => Some(ty.shape[d]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    let rows: usize = kept.iter().map(|&d| ty.shape[d]).product();
    let mut n: usize = list.iter().map(|&d| ty.shape[d]).product();
    if n == 0 {
        let ones = vec![1.0; out_shape.iter().product()];
        return Ok(vec![ctx.constant(Tensor::from_f64s(ty.dtype, out_shape, &ones))]);
    }
    let perm: Vec<usize> = kept.iter().chain(&list).copied().collect();
    let moved = ctx.transpose(x, &perm)?;
    let mut v = reshape(ctx, moved, &[rows, n])?;
    while n > 1 {
        if n % 2 == 1 {
            let one = ctx.filled(TensorType::new(ty.dtype, vec![rows, 1]), 1.0)?;
            v = concat_values(ctx, vec![v, one], 1)?;
            n += 1;
        }
        let half = (n / 2) as i64;
        let low = slice_value(
            ctx,
            v,
            &[(
                1,
                DimSlice {
                    start: 0,
                    end: half,
                    step: 1,
                },
            )],
        )?;
        let high = slice_value(
            ctx,
            v,
            &[(
                1,
                DimSlice {
                    start: half,
                    end: 2 * half,
                    step: 1,
                },
            )],
        )?;
        v = ctx.op(OpKind::Mul, &[low, high])?;
        n /= 2;
    }
    Ok(vec![reshape(ctx, v, &out_shape)?])
}

fn unary(ctx: &mut Ctx, kind: OpKind, x: ValueId) -> Result<ValueId, String> {
    ctx.build1(kind, vec![x], Attrs::new())
}

fn square(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    ctx.build1(OpKind::Mul, vec![x, x], Attrs::new())
}

fn reduce_sum(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    Ok(vec![reduce(ctx, OpKind::ReduceSum, x, 13)?])
}

fn reduce_mean(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    Ok(vec![reduce(ctx, OpKind::ReduceMean, x, 18)?])
}

/// `reduce_max` of `x`; of bools (an "any") through u8.
fn max_of(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    if ctx.ty(x).dtype != DType::Bool {
        return reduce(ctx, OpKind::ReduceMax, x, 18);
    }
    let cast = |ctx: &mut Ctx, v: ValueId, to: DType| {
        ctx.build1(OpKind::Cast, vec![v], Attrs::new().with("to", Attr::DType(to)))
    };
    let bytes = cast(ctx, x, DType::U8)?;
    let m = reduce(ctx, OpKind::ReduceMax, bytes, 18)?;
    cast(ctx, m, DType::Bool)
}

fn reduce_max(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    Ok(vec![max_of(ctx, x)?])
}

/// ReduceMin as the max of the negation (`-x` for floats, which only flips the sign; `not x`
/// for bools), negated back.
fn reduce_min(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let negation = match ctx.ty(x).dtype {
        DType::Bool => OpKind::Not,
        d if d.is_float() => OpKind::Neg,
        d => return Err(format!("ReduceMin of {d} is not supported (only floats and bools)")),
    };
    let n = unary(ctx, negation, x)?;
    let m = max_of(ctx, n)?;
    Ok(vec![unary(ctx, negation, m)?])
}

fn reduce_l1(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let a = unary(ctx, OpKind::Abs, x)?;
    Ok(vec![reduce(ctx, OpKind::ReduceSum, a, 18)?])
}

fn reduce_l2(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let sq = square(ctx, x)?;
    let s = reduce(ctx, OpKind::ReduceSum, sq, 18)?;
    Ok(vec![unary(ctx, OpKind::Sqrt, s)?])
}

fn reduce_sum_square(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let sq = square(ctx, x)?;
    Ok(vec![reduce(ctx, OpKind::ReduceSum, sq, 18)?])
}

fn reduce_log_sum(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let s = reduce(ctx, OpKind::ReduceSum, x, 18)?;
    Ok(vec![unary(ctx, OpKind::Log, s)?])
}

fn reduce_log_sum_exp(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let e = unary(ctx, OpKind::Exp, x)?;
    let s = reduce(ctx, OpKind::ReduceSum, e, 18)?;
    Ok(vec![unary(ctx, OpKind::Log, s)?])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    #[test]
    fn axes_come_from_attributes_or_inputs() {
        let text = ModelBuilder::new(11)
            .input("x", DataType::Float, &[2, 3, 4])
            .node(node(
                "ReduceMean",
                &["x"],
                &["y"],
                vec![ints_attr("axes", &[-1, 0]), int_attr("keepdims", 0)],
            ))
            .output("y")
            .text();
        assert!(
            text.contains("mx.reduce_mean %arg0 {axes = [0, 2], keepdims = 0} : tensor<3xf32>"),
            "{text}"
        );
        let model = |noop| {
            ModelBuilder::new(13)
                .input("x", DataType::Float, &[2, 3])
                .node(node(
                    "ReduceSum",
                    &["x"],
                    &["y"],
                    vec![int_attr("noop_with_empty_axes", noop)],
                ))
                .output("y")
                .text()
        };
        assert!(model(0).contains("mx.reduce_sum %arg0 {axes = [0, 1], keepdims = 1} : tensor<1x1xf32>"));
        assert!(model(1).contains("mx.identity %arg0"));
    }
}
