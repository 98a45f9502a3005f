//! `RotaryEmbedding` of `com.microsoft`, built on the rotation of the ONNX op's parser.

use super::super::super::ctx::Ctx;
use super::super::rotary;
use super::super::shape::reshape;
use mxc_dialects::{Attr, Attrs, OpKind, ValueId};

/// `RotaryEmbedding` of `com.microsoft` (inputs: input, position_ids, cos_cache, sin_cache),
/// the same rotation as the ONNX op's with the positions required: `[batch, seq]` ids, or
/// one offset `p` for positions `p, p + 1, ...` of every sequence. Without `num_heads`, a 3D
/// input's head size is twice the cache's width (as onnxruntime infers it).
pub(super) fn rotary_embedding(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    if ctx.node.int("is_packed_batching", 0)? != 0 {
        return Err("is_packed_batching = 1 is not supported".into());
    }
    let scale = ctx.node.float("scale", 1.0)?;
    if scale != 1.0 {
        return Err(format!("scale {scale} is not supported (only 1)"));
    }
    let x = ctx.input(0)?;
    let (cos, sin) = (ctx.input(2)?, ctx.input(3)?);
    let shape = ctx.ty(x).shape.clone();
    let interleaved = rotary::interleaved(ctx)?;
    let dim = ctx.node.int("rotary_embedding_dim", 0)?;
    let num_heads = match ctx.node.int("num_heads", 0)? {
        0 if shape.len() == 3 && dim == 0 => {
            let half = ctx.ty(cos).shape.get(1).copied().filter(|&w| w > 0);
            let half = half.ok_or_else(|| format!("cos_cache {} is not [positions, rotary dim / 2]", ctx.ty(cos)))?;
            Some((shape[2] / (2 * half)) as i64)
        }
        0 => None,
        n => Some(n),
    };
    let (heads, [_, token_heads, token_seq]) = rotary::heads_view(ctx, x, num_heads)?;
    let rotated = rotary::rotated_entries(dim, ctx.ty(heads).shape[3])?;
    let positions = position_ids(ctx, shape[if shape.len() == 3 { 1 } else { 2 }])?;
    let batch = ctx.ty(positions).shape[0];
    let token_shape = [batch, token_heads, token_seq, rotated / 2];
    let cos = cache_rows(ctx, cos, positions, &token_shape)?;
    let sin = cache_rows(ctx, sin, positions, &token_shape)?;
    let y = rotary::rotate(ctx, heads, [cos, sin], rotated, interleaved)?;
    Ok(vec![reshape(ctx, y, &shape)?])
}

/// The `[batch, seq]` positions of the tokens (batch 1 for an offset, broadcast later).
fn position_ids(ctx: &mut Ctx, seq: usize) -> Result<ValueId, String> {
    let ids = ctx.input(1)?;
    match ctx.ty(ids).shape[..] {
        [_, s] if s == seq => Ok(ids),
        [1] => {
            let ramp = ctx.ramp(seq, 1, 2, ctx.ty(ids).dtype)?;
            ctx.op(OpKind::Add, &[ramp, ids])
        }
        ref other => Err(format!(
            "position_ids of shape {other:?} are not supported ([batch, {seq}] or [1])"
        )),
    }
}

/// The rows of a cos or sin cache at `positions`, in `shape` (checked to hold them).
fn cache_rows(ctx: &mut Ctx, cache: ValueId, positions: ValueId, shape: &[usize; 4]) -> Result<ValueId, String> {
    let attrs = Attrs::new().with("axis", Attr::Int(0));
    let rows = ctx.build1(OpKind::Gather, vec![cache, positions], attrs)?;
    if ctx.ty(rows).shape.last() != Some(&shape[3]) {
        return Err(format!(
            "the cos and sin caches must be {} wide, got {:?}",
            shape[3],
            ctx.ty(rows).shape
        ));
    }
    reshape(ctx, rows, shape)
}
