//! `Attention` (packed Q/K/V projection weights) and `MultiHeadAttention` (separate Q, K, V)
//! of `com.microsoft`, without caches: the heads' `softmax(q · kᵀ * scale + mask + bias) · v`
//! built from the pieces of the ONNX `Attention` parser. The masks follow onnxruntime's CPU
//! kernel: a masked key's score is replaced by `mask_filter_value` (finite, default -10000),
//! a key after the query under `unidirectional` by the lowest float; `attention_bias` is added.

use super::super::super::ctx::Ctx;
use super::super::attention::{merge_heads, scaled_product, split_heads};
use super::super::layout::{slice_value, DimSlice};
use super::super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, ValueId};

/// The attributes both ops share, checked.
struct Options {
    heads: usize,
    scale: Option<f64>,
    causal: bool,
    mask_filter_value: f64,
}

impl Options {
    fn read(ctx: &Ctx) -> Result<Options, String> {
        let node = &ctx.node;
        let heads = match node.opt_int("num_heads")? {
            Some(n) if n > 0 => n as usize,
            other => return Err(format!("num_heads {other:?} is not supported (a positive count)")),
        };
        // onnxruntime reads a scale of 0 (the default) as 1 / sqrt(head size)
        let scale = Some(node.float("scale", 0.0)? as f64).filter(|&s| s != 0.0);
        let causal = match node.int("unidirectional", 0)? {
            0 => false,
            1 => true,
            u => return Err(format!("unidirectional {u} is not supported (0 or 1)")),
        };
        let mask_filter_value = node.float("mask_filter_value", -10000.0)? as f64;
        Ok(Options {
            heads,
            scale,
            causal,
            mask_filter_value,
        })
    }
}

/// Refuses the inputs (cache and packing forms) that the parsers do not handle.
fn refuse_inputs(ctx: &Ctx, names: &[(usize, &str)]) -> Result<(), String> {
    match names.iter().find(|(i, _)| ctx.opt_input(*i).is_some()) {
        Some((_, name)) => Err(format!("input `{name}` is not supported")),
        None => Ok(()),
    }
}

/// Refuses the attributes that turn on features the parsers do not handle.
fn refuse_flags(ctx: &Ctx, names: &[&str]) -> Result<(), String> {
    for name in names {
        if ctx.node.int(name, 0)? != 0 {
            return Err(format!("{name} = 1 is not supported"));
        }
    }
    Ok(())
}

/// `Attention`: input `[batch, seq, in]` projected by `weights` `[in, q + k + v]` (plus
/// `bias`), split at `qkv_hidden_sizes` (default three equal parts) into Q, K and V.
pub(super) fn attention(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    refuse_inputs(ctx, &[(4, "past"), (6, "past_sequence_length")])?;
    refuse_flags(ctx, &["do_rotary", "past_present_share_buffer", "rotary_embedding_dim"])?;
    let opts = Options::read(ctx)?;
    let mut qkv = ctx.op(OpKind::MatMul, &[ctx.input(0)?, ctx.input(1)?])?;
    if let Some(bias) = ctx.opt_input(2) {
        qkv = ctx.op(OpKind::Add, &[qkv, bias])?;
    }
    let total = *ctx.ty(qkv).shape.last().unwrap();
    let sizes = match ctx.node.opt_ints("qkv_hidden_sizes")? {
        Some(s) => s.iter().map(|&n| n as usize).collect(),
        None if total.is_multiple_of(3) => vec![total / 3; 3],
        None => return Err(format!("weights of width {total} do not split into Q, K and V")),
    };
    let [q, k, v] = split_last(ctx, qkv, &sizes)?;
    let (mask, attention_bias) = (ctx.opt_input(3), ctx.opt_input(5));
    Ok(vec![attend(ctx, &opts, [q, k, v], mask, attention_bias)?])
}

/// `MultiHeadAttention` with 3D query, key and value (plus the optional packed `bias` of
/// their projections).
pub(super) fn multi_head_attention(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    refuse_inputs(
        ctx,
        &[
            (6, "past_key"),
            (7, "past_value"),
            (8, "past_sequence_length"),
            (9, "cache_indirection"),
        ],
    )?;
    let opts = Options::read(ctx)?;
    let mut qkv = [ctx.input(0)?, ctx.input(1)?, ctx.input(2)?];
    if let Some(t) = qkv.iter().map(|&x| ctx.ty(x)).find(|t| t.rank() != 3) {
        return Err(format!(
            "query, key and value must be 3D (packed forms are not supported), got {t}"
        ));
    }
    if let Some(bias) = ctx.opt_input(3) {
        let sizes: Vec<usize> = qkv.iter().map(|&x| ctx.ty(x).shape[2]).collect();
        let parts = split_last(ctx, bias, &sizes)?;
        for (x, b) in qkv.iter_mut().zip(parts) {
            *x = ctx.op(OpKind::Add, &[*x, b])?;
        }
    }
    let (mask, attention_bias) = (ctx.opt_input(4), ctx.opt_input(5));
    Ok(vec![attend(ctx, &opts, qkv, mask, attention_bias)?])
}

/// `x` cut along its last axis into three parts of `sizes` (which must cover it).
fn split_last(ctx: &mut Ctx, x: ValueId, sizes: &[usize]) -> Result<[ValueId; 3], String> {
    let shape = ctx.ty(x).shape.clone();
    let Some((axis, &width)) = shape.iter().enumerate().next_back() else {
        return Err("the packed Q, K and V input is a scalar".into());
    };
    if sizes.len() != 3 || sizes.iter().sum::<usize>() != width {
        return Err(format!("Q, K and V sizes {sizes:?} do not split a width of {width}"));
    }
    let mut start = 0;
    let mut parts = [x; 3];
    for (part, &size) in parts.iter_mut().zip(sizes) {
        let bounds = DimSlice {
            start: start as i64,
            end: (start + size) as i64,
            step: 1,
        };
        *part = slice_value(ctx, x, &[(axis, bounds)])?;
        start += size;
    }
    Ok(parts)
}

/// The attention of 3D `[q, k, v]` (`[batch, seq, heads * depth]`) over their heads, merged
/// back to `[batch, seq, heads * v_depth]`.
fn attend(
    ctx: &mut Ctx,
    opts: &Options,
    [q, k, v]: [ValueId; 3],
    mask: Option<ValueId>,
    attention_bias: Option<ValueId>,
) -> Result<ValueId, String> {
    let (q, k, v) = (
        split_heads(ctx, q, opts.heads)?,
        split_heads(ctx, k, opts.heads)?,
        split_heads(ctx, v, opts.heads)?,
    );
    let mut scores = scaled_product(ctx, q, k, opts.scale)?;
    if let Some(bias) = mask_bias(ctx, opts, scores, mask)? {
        scores = ctx.op(OpKind::Add, &[scores, bias])?;
    }
    if let Some(bias) = attention_bias {
        scores = ctx.op(OpKind::Add, &[scores, bias])?;
    }
    let p = ctx.build1(OpKind::Softmax, vec![scores], Attrs::new().with("axis", Attr::Int(3)))?;
    let y = ctx.op(OpKind::MatMul, &[p, v])?;
    merge_heads(ctx, y)
}

/// The bias onnxruntime puts on the scores `[batch, heads, queries, keys]` for the mask and
/// `unidirectional` (broadcasting over the heads), or `None` when there is neither.
fn mask_bias(ctx: &mut Ctx, opts: &Options, scores: ValueId, mask: Option<ValueId>) -> Result<Option<ValueId>, String> {
    let &[batch, _, queries, keys] = &ctx.ty(scores).shape[..] else {
        unreachable!("4D scores")
    };
    let dtype = ctx.ty(scores).dtype;
    let zero = ctx.scalar(dtype, 0.0);
    let mut bias = None;
    if let Some(mask) = mask {
        let kept = kept_keys(ctx, mask, batch, queries, keys)?;
        let filter = ctx.scalar(dtype, opts.mask_filter_value);
        bias = Some(ctx.op(OpKind::Where, &[kept, zero, filter])?);
    }
    if opts.causal {
        if queries != keys {
            return Err(format!(
                "unidirectional with {queries} queries and {keys} keys is not supported"
            ));
        }
        let query = ctx.ramp(queries, 0, 2, DType::I64)?;
        let key = ctx.ramp(keys, 1, 2, DType::I64)?;
        let later = ctx.op(OpKind::Greater, &[key, query])?;
        let lowest = ctx.scalar(dtype, f32::MIN as f64);
        let otherwise = bias.unwrap_or(zero);
        bias = Some(ctx.op(OpKind::Where, &[later, lowest, otherwise])?);
    }
    Ok(bias)
}

/// Which keys each query may see under `mask_index` (i32), as a boolean broadcasting to
/// `[batch, 1, queries, keys]`: a raw 0/1 mask `[batch, keys]` or `[batch, queries, keys]`;
/// each sequence's end `[batch]` (right padding); or its end then its start `[2 * batch]`
/// (left padding too).
fn kept_keys(ctx: &mut Ctx, mask: ValueId, batch: usize, queries: usize, keys: usize) -> Result<ValueId, String> {
    let shape = ctx.ty(mask).shape.clone();
    let dtype = ctx.ty(mask).dtype;
    let zero = ctx.scalar(dtype, 0.0);
    match shape[..] {
        [b, k] if b == batch && k == keys => {
            let raw = reshape(ctx, mask, &[batch, 1, 1, keys])?;
            ctx.op(OpKind::Greater, &[raw, zero])
        }
        [b, q, k] if b == batch && q == queries && k == keys => {
            let raw = reshape(ctx, mask, &[batch, 1, queries, keys])?;
            ctx.op(OpKind::Greater, &[raw, zero])
        }
        [n] if n == batch || n == 2 * batch => {
            let bounds = reshape(ctx, mask, &[n, 1, 1, 1])?;
            let key = ctx.ramp(keys, 3, 4, dtype)?;
            let ends = batch_rows(ctx, bounds, 0, batch)?;
            let before_end = ctx.op(OpKind::Less, &[key, ends])?;
            if n == batch {
                return Ok(before_end);
            }
            let starts = batch_rows(ctx, bounds, batch, 2 * batch)?;
            let before_start = ctx.op(OpKind::Less, &[key, starts])?;
            let no = ctx.constant(Tensor::from_i64s(DType::Bool, vec![], &[0]));
            ctx.op(OpKind::Where, &[before_start, no, before_end])
        }
        _ => Err(format!(
            "mask_index of shape {shape:?} is not supported ([{batch}], [{}], [{batch}, {keys}] or [{batch}, {queries}, {keys}])",
            2 * batch
        )),
    }
}

/// Rows `start..end` of `x` along its first axis.
fn batch_rows(ctx: &mut Ctx, x: ValueId, start: usize, end: usize) -> Result<ValueId, String> {
    let bounds = DimSlice {
        start: start as i64,
        end: end as i64,
        step: 1,
    };
    slice_value(ctx, x, &[(0, bounds)])
}
