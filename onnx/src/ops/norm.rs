//! Normalisation: `BatchNormalization` in its inference form and `LayerNormalization` with
//! its three outputs (Y, mean, inverse standard deviation) map to mx ops; training-mode
//! `BatchNormalization`, `RMSNormalization` (and onnxruntime's `SimplifiedLayerNormalization`),
//! `InstanceNormalization`, `GroupNormalization`, `MeanVarianceNormalization`,
//! `LpNormalization` and `LRN` are built from reductions and element-wise ops following their
//! ONNX definitions.

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::axes;
use super::layout::{concat_values, slice_value, DimSlice};
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("BatchNormalization", batch_norm);
    r.add_all("LayerNormalization", layer_norm);
    r.add_all("RMSNormalization", rms_norm);
    r.add_all("InstanceNormalization", instance_norm);
    r.add("", "GroupNormalization", 21, LATEST, group_norm);
    r.add_all("MeanVarianceNormalization", mean_variance_norm);
    r.add_all("LpNormalization", lp_norm);
    r.add_all("LRN", local_response_norm);
}

/// The element type statistics are computed in: `stash_type` 1 (float) computes those of
/// half-precision inputs in f32; any other value is refused.
fn stash_type(ctx: &Ctx, dtype: DType) -> Result<DType, String> {
    match ctx.node.int("stash_type", 1)? {
        1 if matches!(dtype, DType::F16 | DType::BF16) => Ok(DType::F32),
        1 => Ok(dtype),
        other => Err(format!("stash_type {other} is not supported (only 1, float)")),
    }
}

/// `(x - mean) / sqrt(variance + epsilon)` over `over` (the variance of `x - mean`, so large
/// offsets do not cancel).
fn standardise(ctx: &mut Ctx, x: ValueId, over: &[usize], epsilon: f64) -> Result<ValueId, String> {
    let mean = ctx.reduce(OpKind::ReduceMean, x, over, true)?;
    let centred = ctx.op(OpKind::Sub, &[x, mean])?;
    let squares = ctx.op(OpKind::Mul, &[centred, centred])?;
    let variance = ctx.reduce(OpKind::ReduceMean, squares, over, true)?;
    let eps = ctx.scalar(ctx.ty(x).dtype, epsilon);
    let padded = ctx.op(OpKind::Add, &[variance, eps])?;
    let deviation = ctx.op(OpKind::Sqrt, &[padded])?;
    ctx.op(OpKind::Div, &[centred, deviation])
}

/// `v` of shape [C] reshaped to broadcast along axis 1 of a rank-`rank` tensor.
fn per_channel(ctx: &mut Ctx, v: ValueId, rank: usize) -> Result<ValueId, String> {
    let mut shape = vec![1; rank];
    shape[1] = ctx.ty(v).num_elements();
    reshape(ctx, v, &shape)
}

/// `RMSNormalization`: `SimplifiedLayerNormalization`'s first output.
fn rms_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let mut outputs = simplified_layer_norm(ctx)?;
    outputs.truncate(1);
    Ok(outputs)
}

/// RMS normalisation over the axes from `axis` on, computed in the `stash_type` precision;
/// outputs y and inv_std_var (in that precision).
pub fn simplified_layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, scale) = (ctx.input(0)?, ctx.input(1)?);
    let ty = ctx.ty(x).clone();
    let axis = axes::axis(ctx.node.int("axis", -1)?, ty.rank())?;
    let epsilon = ctx.node.float("epsilon", 1e-5)? as f64;
    let stash = stash_type(ctx, ty.dtype)?;
    let xs = ctx.cast(x, stash)?;
    let over: Vec<usize> = (axis..ty.rank()).collect();
    let (normalised, inv_std) = rms_normalise(ctx, xs, &over, epsilon)?;
    let normalised = ctx.cast(normalised, ty.dtype)?;
    Ok(vec![ctx.op(OpKind::Mul, &[normalised, scale])?, inv_std])
}

/// `(x * inv, inv)` with `inv = 1 / sqrt(mean(x^2) + epsilon)` over `over` (kept as axes of
/// extent 1, the shape of the inv_std_var outputs).
pub fn rms_normalise(ctx: &mut Ctx, x: ValueId, over: &[usize], epsilon: f64) -> Result<(ValueId, ValueId), String> {
    let squares = ctx.op(OpKind::Mul, &[x, x])?;
    let mean = ctx.reduce(OpKind::ReduceMean, squares, over, true)?;
    let eps = ctx.scalar(ctx.ty(x).dtype, epsilon);
    let padded = ctx.op(OpKind::Add, &[mean, eps])?;
    let rms = ctx.op(OpKind::Sqrt, &[padded])?;
    let inv = ctx.op(OpKind::Reciprocal, &[rms])?;
    Ok((ctx.op(OpKind::Mul, &[x, inv])?, inv))
}

/// Each (sample, channel) standardised over its spatial dims, then scaled and shifted per
/// channel.
fn instance_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, scale, bias) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let rank = ctx.ty(x).rank();
    if rank < 3 {
        return Err(format!(
            "input must be N x C x spatial..., got shape {:?}",
            ctx.ty(x).shape
        ));
    }
    let epsilon = ctx.node.float("epsilon", 1e-5)? as f64;
    let over: Vec<usize> = (2..rank).collect();
    let y = standardise(ctx, x, &over, epsilon)?;
    let scale = per_channel(ctx, scale, rank)?;
    let bias = per_channel(ctx, bias, rank)?;
    let scaled = ctx.op(OpKind::Mul, &[y, scale])?;
    Ok(vec![ctx.op(OpKind::Add, &[scaled, bias])?])
}

/// The channels split into `num_groups` groups, each (sample, group) standardised over its
/// channels and spatial dims, then scaled and shifted per channel (opset 21's form; opset 18's
/// per-group scale was deprecated and is not registered).
fn group_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, scale, bias) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let ty = ctx.ty(x).clone();
    if ty.rank() < 3 {
        return Err(format!("input must be N x C x spatial..., got shape {:?}", ty.shape));
    }
    let groups = ctx
        .node
        .opt_int("num_groups")?
        .ok_or("missing attribute `num_groups`")?;
    let channels = ty.shape[1];
    if groups < 1 || !channels.is_multiple_of(groups as usize) {
        return Err(format!("num_groups {groups} does not divide the {channels} channels"));
    }
    let epsilon = ctx.node.float("epsilon", 1e-5)? as f64;
    let stash = stash_type(ctx, ty.dtype)?;
    let grouped_shape = [
        ty.shape[0],
        groups as usize,
        ty.shape[1..].iter().product::<usize>() / groups as usize,
    ];
    let grouped = reshape(ctx, x, &grouped_shape)?;
    let grouped = ctx.cast(grouped, stash)?;
    let y = standardise(ctx, grouped, &[2], epsilon)?;
    let y = ctx.cast(y, ty.dtype)?;
    let y = reshape(ctx, y, &ty.shape)?;
    let scale = per_channel(ctx, scale, ty.rank())?;
    let bias = per_channel(ctx, bias, ty.rank())?;
    let scaled = ctx.op(OpKind::Mul, &[y, scale])?;
    Ok(vec![ctx.op(OpKind::Add, &[scaled, bias])?])
}

/// `(x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9)` over `axes` (the ONNX function's form).
fn mean_variance_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let rank = ctx.ty(x).rank();
    let list = ctx.node.opt_ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]);
    let over = axes::axes(&list, rank)?;
    let mean = ctx.reduce(OpKind::ReduceMean, x, &over, true)?;
    let squares = ctx.op(OpKind::Mul, &[x, x])?;
    let mean_square = ctx.reduce(OpKind::ReduceMean, squares, &over, true)?;
    let square_mean = ctx.op(OpKind::Mul, &[mean, mean])?;
    let variance = ctx.op(OpKind::Sub, &[mean_square, square_mean])?;
    let deviation = ctx.op(OpKind::Sqrt, &[variance])?;
    let tiny = ctx.scalar(ctx.ty(x).dtype, 1e-9);
    let deviation = ctx.op(OpKind::Add, &[deviation, tiny])?;
    let centred = ctx.op(OpKind::Sub, &[x, mean])?;
    Ok(vec![ctx.op(OpKind::Div, &[centred, deviation])?])
}

/// `x` divided by its L1 (`p` = 1) or L2 (`p` = 2) norm along `axis` (0 where that is 0).
fn lp_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let axis = axes::axis(ctx.node.int("axis", -1)?, ctx.ty(x).rank())?;
    let norm = match ctx.node.int("p", 2)? {
        1 => {
            let magnitudes = ctx.op(OpKind::Abs, &[x])?;
            ctx.reduce(OpKind::ReduceSum, magnitudes, &[axis], true)?
        }
        2 => {
            let squares = ctx.op(OpKind::Mul, &[x, x])?;
            let sum = ctx.reduce(OpKind::ReduceSum, squares, &[axis], true)?;
            ctx.op(OpKind::Sqrt, &[sum])?
        }
        p => return Err(format!("p {p} is not supported (only 1 and 2)")),
    };
    // a zero vector stays zero (0 / 1) rather than becoming NaN (0 / 0)
    let zero = ctx.scalar(ctx.ty(x).dtype, 0.0);
    let one = ctx.scalar(ctx.ty(x).dtype, 1.0);
    let empty = ctx.op(OpKind::Equal, &[norm, zero])?;
    let divisor = ctx.op(OpKind::Where, &[empty, one, norm])?;
    Ok(vec![ctx.op(OpKind::Div, &[x, divisor])?])
}

/// `x / (bias + alpha / size * s)^beta`, with `s` the sum of squares over the `size` channels
/// around each one (`floor((size - 1) / 2)` before, the rest after; the channels past either
/// end count as 0): the squares padded with zeros, summed over `size` shifted slices.
fn local_response_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    if ty.rank() < 3 {
        return Err(format!("input must be N x C x spatial..., got shape {:?}", ty.shape));
    }
    let size = ctx.node.opt_int("size")?.ok_or("missing attribute `size`")?;
    if size < 1 {
        return Err(format!("size must be at least 1, got {size}"));
    }
    let (alpha, beta, bias) = (
        ctx.node.float("alpha", 1e-4)? as f64,
        ctx.node.float("beta", 0.75)? as f64,
        ctx.node.float("bias", 1.0)? as f64,
    );
    let size = size as usize;
    // a window reaching past every channel sums zeros there: it is cut to the channels (the
    // scale keeps the given size)
    let reach = ty.shape[1].saturating_sub(1);
    let (before, after) = (((size - 1) / 2).min(reach), (size / 2).min(reach));
    let squares = ctx.op(OpKind::Mul, &[x, x])?;
    let zeros = |ctx: &mut Ctx, n: usize| {
        let mut shape = ty.shape.clone();
        shape[1] = n;
        ctx.filled(TensorType::new(ty.dtype, shape), 0.0)
    };
    let mut parts = Vec::new();
    if before > 0 {
        parts.push(zeros(ctx, before)?);
    }
    parts.push(squares);
    if after > 0 {
        parts.push(zeros(ctx, after)?);
    }
    let padded = concat_values(ctx, parts, 1)?;
    let channels = ty.shape[1] as i64;
    let mut sum = None;
    for k in 0..(before + after + 1) as i64 {
        let window = slice_value(
            ctx,
            padded,
            &[(
                1,
                DimSlice {
                    start: k,
                    end: k + channels,
                    step: 1,
                },
            )],
        )?;
        sum = Some(match sum {
            None => window,
            Some(s) => ctx.op(OpKind::Add, &[s, window])?,
        });
    }
    let sum = sum.expect("the window holds at least its own channel");
    let scale = ctx.scalar(ty.dtype, alpha / size as f64);
    let scaled = ctx.op(OpKind::Mul, &[sum, scale])?;
    let bias = ctx.scalar(ty.dtype, bias);
    let base = ctx.op(OpKind::Add, &[scaled, bias])?;
    let beta = ctx.scalar(ty.dtype, beta);
    let divisor = ctx.op(OpKind::Pow, &[base, beta])?;
    Ok(vec![ctx.op(OpKind::Div, &[x, divisor])?])
}

fn batch_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    if ctx.opset >= 14 && ctx.node.int("training_mode", 0)? != 0 {
        return batch_norm_training(ctx);
    }
    if (1..5).any(|k| ctx.wants_output(k)) {
        return Err("training mode (running statistics outputs before opset 14) is not supported".into());
    }
    // `momentum` updates the running statistics (training mode, built above); `is_test`
    // (before opset 7) is ignored, as inference runtimes do
    ctx.node.without_effect(&["momentum", "is_test"]);
    if ctx.node.int("spatial", 1)? == 0 {
        return Err("spatial = 0 (per-element statistics) is not supported".into());
    }
    let operands = (0..5).map(|i| ctx.input(i)).collect::<Result<Vec<_>, _>>()?;
    let epsilon = ctx.node.float("epsilon", 1e-5)? as f64;
    Ok(vec![ctx.build1(
        OpKind::BatchNorm,
        operands,
        Attrs::new().with("epsilon", Attr::Float(epsilon)),
    )?])
}

/// Training mode (opset 14 on): `x` normalised with the statistics of this batch (over every
/// axis but the channels; the variance is the population's), and the running statistics
/// updated as `running * momentum + batch * (1 - momentum)`.
fn batch_norm_training(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let [x, scale, bias, mean, var] = [0, 1, 2, 3, 4].map(|i| ctx.input(i));
    let (x, scale, bias, mean, var) = (x?, scale?, bias?, mean?, var?);
    let ty = ctx.ty(x).clone();
    if ty.rank() < 2 {
        return Err(format!("input must be N x C x ..., got shape {:?}", ty.shape));
    }
    if ty.is_symbolic() {
        return Err("training mode over symbolic sizes is not supported yet".into());
    }
    let epsilon = ctx.node.float("epsilon", 1e-5)? as f64;
    let momentum = ctx.node.float("momentum", 0.9)? as f64;
    let over: Vec<usize> = (0..ty.rank()).filter(|&d| d != 1).collect();
    let y = standardise(ctx, x, &over, epsilon)?;
    let scale = per_channel(ctx, scale, ty.rank())?;
    let bias = per_channel(ctx, bias, ty.rank())?;
    let scaled = ctx.op(OpKind::Mul, &[y, scale])?;
    let y = ctx.op(OpKind::Add, &[scaled, bias])?;
    let batch_mean = ctx.reduce(OpKind::ReduceMean, x, &over, true)?;
    let centred = ctx.op(OpKind::Sub, &[x, batch_mean])?;
    let squares = ctx.op(OpKind::Mul, &[centred, centred])?;
    let batch_var = ctx.reduce(OpKind::ReduceMean, squares, &over, false)?;
    let batch_mean = reshape(ctx, batch_mean, &[ty.shape[1]])?;
    let (keep, take) = (ctx.scalar(ty.dtype, momentum), ctx.scalar(ty.dtype, 1.0 - momentum));
    let running = |ctx: &mut Ctx, old: ValueId, batch: ValueId| -> Result<ValueId, String> {
        let kept = ctx.op(OpKind::Mul, &[old, keep])?;
        let taken = ctx.op(OpKind::Mul, &[batch, take])?;
        ctx.op(OpKind::Add, &[kept, taken])
    };
    let running_mean = running(ctx, mean, batch_mean)?;
    let running_var = running(ctx, var, batch_var)?;
    Ok(vec![y, running_mean, running_var])
}

fn layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let stash = ctx.node.int("stash_type", 1)?;
    if stash != 1 {
        return Err(format!("stash_type {stash} is not supported (only 1, float)"));
    }
    let x = ctx.input(0)?;
    let axis = axes::axis(ctx.node.int("axis", -1)?, ctx.ty(x).rank())?;
    let mut operands = vec![x, ctx.input(1)?];
    operands.extend(ctx.opt_input(2));
    let attrs = Attrs::new()
        .with("axis", Attr::Int(axis as i64))
        .with("epsilon", Attr::Float(ctx.node.float("epsilon", 1e-5)? as f64));
    ctx.build(OpKind::LayerNorm, operands, attrs)
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    #[test]
    fn layer_norm_has_three_results() {
        let text = ModelBuilder::new(17)
            .input("x", DataType::Float, &[2, 3])
            .input("s", DataType::Float, &[3])
            .node(node("LayerNormalization", &["x", "s"], &["y", "mean", "inv"], vec![]))
            .output("y")
            .output("inv")
            .text();
        assert!(
            text.contains("%0, %1, %2 = mx.layer_norm %arg0, %arg1 {axis = 1, epsilon = "),
            "{text}"
        );
        assert!(text.contains("return \"y\" = %0, \"inv\" = %2"), "{text}");
    }

    #[test]
    fn batch_norm_training_before_14_is_refused_and_from_14_built() {
        let model = |opset| {
            ModelBuilder::new(opset)
                .input("x", DataType::Float, &[2, 2, 2])
                .input("p", DataType::Float, &[2])
                .node(node(
                    "BatchNormalization",
                    &["x", "p", "p", "p", "p"],
                    &["y", "running_mean"],
                    vec![int_attr("training_mode", 1)],
                ))
                .output("y")
                .output("running_mean")
        };
        assert_eq!(
            model(9).error(),
            "node #0 (output \"y\") (BatchNormalization): training mode (running statistics outputs before opset 14) is not supported"
        );
        let text = model(15).text();
        assert!(text.contains("return \"y\" = "), "{text}");
        assert!(text.contains("tensor<2xf32>"), "{text}");
    }
}
