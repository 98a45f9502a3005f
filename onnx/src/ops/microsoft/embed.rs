//! `EmbedLayerNormalization`: BERT's embedding layer, the word, position and (optional)
//! segment embeddings of each token summed and layer-normalised, with the mask's count of
//! tokens per sequence as `mask_index`.

use super::super::super::ctx::Ctx;
use super::norm::layer_norm_last;
use mxc_dialects::{Attr, Attrs, DType, OpKind, TensorType, ValueId};

const INPUT_IDS: usize = 0;
const SEGMENT_IDS: usize = 1;
const WORD_EMBEDDING: usize = 2;
const POSITION_EMBEDDING: usize = 3;
const SEGMENT_EMBEDDING: usize = 4;
const GAMMA: usize = 5;
const BETA: usize = 6;
const MASK: usize = 7;
const POSITION_IDS: usize = 8;

/// Outputs: the normalised sum, mask_index and the sum itself.
pub(super) fn embed_layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    // mask_index_type only tells shape inference whether mask_index is 1D (1) or absent (0)
    match ctx.node.int("mask_index_type", 1)? {
        0 | 1 => {}
        t => return Err(format!("mask_index_type {t} is not supported (0 or 1)")),
    }
    let ids = ctx.input(INPUT_IDS)?;
    let &[batch, seq] = &ctx.ty(ids).shape[..] else {
        return Err(format!(
            "input_ids must be [batch, sequence], got {:?}",
            ctx.ty(ids).shape
        ));
    };
    let words = rows(ctx, WORD_EMBEDDING, ids)?;
    let positions = match ctx.opt_input(POSITION_IDS) {
        Some(p) => p,
        None => ctx.ramp(seq, 1, 2, ctx.ty(ids).dtype)?,
    };
    let positions = rows(ctx, POSITION_EMBEDDING, positions)?;
    let mut sum = ctx.op(OpKind::Add, &[words, positions])?;
    if let Some(segments) = ctx.opt_input(SEGMENT_IDS) {
        let segments = rows(ctx, SEGMENT_EMBEDDING, segments)?;
        sum = ctx.op(OpKind::Add, &[sum, segments])?;
    }
    let (gamma, beta) = (ctx.input(GAMMA)?, ctx.input(BETA)?);
    let y = layer_norm_last(ctx, sum, gamma, Some(beta))?[0];
    let mask_index = mask_index(ctx, batch)?;
    Ok(vec![y, mask_index, sum])
}

/// The rows of the embedding table input `table` at `ids`.
fn rows(ctx: &mut Ctx, table: usize, ids: ValueId) -> Result<ValueId, String> {
    let table = ctx.input(table)?;
    let attrs = Attrs::new().with("axis", Attr::Int(0));
    ctx.build1(OpKind::Gather, vec![table, ids], attrs)
}

/// The number of ones in each sequence's mask as i32 (onnxruntime counts them, so a mask
/// with holes counts its ones, not the position of its first 0); zeros without a mask.
fn mask_index(ctx: &mut Ctx, batch: usize) -> Result<ValueId, String> {
    match ctx.opt_input(MASK) {
        Some(mask) => {
            let mask = ctx.cast(mask, DType::I32)?;
            ctx.reduce(OpKind::ReduceSum, mask, &[1], false)
        }
        None => ctx.filled(TensorType::new(DType::I32, vec![batch]), 0.0),
    }
}
