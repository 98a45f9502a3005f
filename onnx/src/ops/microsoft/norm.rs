//! The fused residual normalisations `SkipLayerNormalization` (layer normalisation) and
//! `SkipSimplifiedLayerNormalization` (RMS normalisation) of `input + skip (+ bias)`, which
//! they also return, and `SimplifiedLayerNormalization` (RMS normalisation that returns the
//! inverse RMS too).

use super::super::super::ctx::Ctx;
use super::super::norm::rms_normalise;
use mxc_dialects::{Attr, Attrs, OpKind, ValueId};

/// onnxruntime's default epsilon of the skip and embedding normalisations
/// (`kDefaultSkipLayerNormEpsilon`, `kDefaultEmbedLayerNormEpsilon`).
const FUSED_EPSILON: f32 = 1e-12;

/// `input + skip (+ bias)`, the residual sum a skip normalisation normalises (and returns as
/// its last output); `bias` is input `bias_index`, if given.
fn residual_sum(ctx: &mut Ctx, bias_index: usize) -> Result<ValueId, String> {
    let sum = ctx.op(OpKind::Add, &[ctx.input(0)?, ctx.input(1)?])?;
    match ctx.opt_input(bias_index) {
        Some(bias) => ctx.op(OpKind::Add, &[sum, bias]),
        None => Ok(sum),
    }
}

/// Layer normalisation of the residual sum over the last axis (inputs: input, skip, gamma,
/// optional beta, optional bias); outputs y, mean, inv_std_var, input_skip_bias_sum.
pub(super) fn skip_layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let sum = residual_sum(ctx, 4)?;
    let (gamma, beta) = (ctx.input(2)?, ctx.opt_input(3));
    let mut outputs = layer_norm_last(ctx, sum, gamma, beta)?;
    outputs.push(sum);
    Ok(outputs)
}

/// The last axis of `v`, which must have one.
fn last_axis(ctx: &Ctx, v: ValueId) -> Result<usize, String> {
    (ctx.ty(v).rank().checked_sub(1)).ok_or_else(|| "the input is a scalar: it has no axis to normalise over".into())
}

/// `mx.layer_norm` of `x` over its last axis with the node's `epsilon` (default
/// `FUSED_EPSILON`): y, mean and inv_std_var.
pub(super) fn layer_norm_last(
    ctx: &mut Ctx,
    x: ValueId,
    gamma: ValueId,
    beta: Option<ValueId>,
) -> Result<Vec<ValueId>, String> {
    let axis = last_axis(ctx, x)?;
    let mut operands = vec![x, gamma];
    operands.extend(beta);
    let attrs = Attrs::new()
        .with("axis", Attr::Int(axis as i64))
        .with("epsilon", Attr::Float(ctx.node.float("epsilon", FUSED_EPSILON)? as f64));
    ctx.build(OpKind::LayerNorm, operands, attrs)
}

/// RMS normalisation of the residual sum over the last axis (inputs: input, skip, gamma,
/// optional bias); outputs y, mean, inv_std_var, input_skip_bias_sum. RMS normalisation has
/// no mean (onnxruntime does not compute one), so asking for it is refused.
pub(super) fn skip_simplified_layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    if ctx.wants_output(1) {
        return Err("the mean output is not supported (RMS normalisation computes none)".into());
    }
    let sum = residual_sum(ctx, 3)?;
    let axis = last_axis(ctx, sum)?;
    let epsilon = ctx.node.float("epsilon", FUSED_EPSILON)? as f64;
    let (normalised, inv_std) = rms_normalise(ctx, sum, &[axis], epsilon)?;
    let y = ctx.op(OpKind::Mul, &[normalised, ctx.input(2)?])?;
    // The mean slot is never read (refused above); it holds a value only to keep the
    // outputs in place.
    Ok(vec![y, inv_std, inv_std, sum])
}
