//! `RotaryEmbedding` (opset 23), decomposed into mx ops: each token's cos and sin rows (gathered
//! at `position_ids`, or given per token), the first `rotary_embedding_dim` entries of each head
//! taken as pairs (the two halves, or neighbours when `interleaved`), each pair `(x1, x2)`
//! turned to `(cos x1 - sin x2, sin x1 + cos x2)` and put back in place, the rest of the head
//! passed through.

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::layout::{concat_values, slice_value, DimSlice};
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    r.add("", "RotaryEmbedding", 23, LATEST, rotary_embedding);
}

const COS_CACHE: usize = 1;
const SIN_CACHE: usize = 2;
const POSITION_IDS: usize = 3;

fn rotary_embedding(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).shape.clone();
    let interleaved = interleaved(ctx)?;
    let num_heads = ctx.node.opt_int("num_heads")?;
    let (heads, token_shape) = heads_view(ctx, x, num_heads)?;
    let head = ctx.ty(heads).shape[3];
    let rotated = rotated_entries(ctx.node.int("rotary_embedding_dim", 0)?, head)?;
    let half = rotated / 2;
    let token_shape = [token_shape[0], token_shape[1], token_shape[2], half];
    let cos = per_token(ctx, COS_CACHE, "cos_cache", &token_shape)?;
    let sin = per_token(ctx, SIN_CACHE, "sin_cache", &token_shape)?;
    let y = rotate(ctx, heads, [cos, sin], rotated, interleaved)?;
    Ok(vec![reshape(ctx, y, &shape)?])
}

/// The `interleaved` attribute: whether pairs are neighbours (1) or the two halves (0).
pub(super) fn interleaved(ctx: &Ctx) -> Result<bool, String> {
    match ctx.node.int("interleaved", 0)? {
        0 => Ok(false),
        1 => Ok(true),
        i => Err(format!("interleaved {i} is not supported (0 or 1)")),
    }
}

/// How many entries of each head of `head` entries are rotated for `rotary_embedding_dim`
/// `dim` (0: all), checked to split into pairs.
pub(super) fn rotated_entries(dim: i64, head: usize) -> Result<usize, String> {
    let rotated = match dim {
        0 => head,
        d if d > 0 && d as usize <= head => d as usize,
        d => {
            return Err(format!(
                "rotary_embedding_dim {d} is not supported (0, all, or up to the head size {head})"
            ))
        }
    };
    if !rotated.is_multiple_of(2) {
        return Err(format!(
            "{rotated} rotated entries (rotary_embedding_dim {dim}, head size {head}) do not split into pairs"
        ));
    }
    Ok(rotated)
}

/// The 4D `heads` with the first `rotated` entries of each head turned by the per-token
/// `[cos, sin]` (which broadcast against the pairs), the rest passed through.
pub(super) fn rotate(
    ctx: &mut Ctx,
    heads: ValueId,
    [cos, sin]: [ValueId; 2],
    rotated: usize,
    interleaved: bool,
) -> Result<ValueId, String> {
    let head = ctx.ty(heads).shape[3];
    let (x1, x2) = pairs(ctx, heads, rotated, interleaved)?;
    let real = combine_products(ctx, OpKind::Sub, [cos, x1], [sin, x2])?;
    let imag = combine_products(ctx, OpKind::Add, [sin, x1], [cos, x2])?;
    let mut parts = vec![join_pairs(ctx, real, imag, interleaved)?];
    if rotated < head {
        parts.push(slice_last(ctx, heads, rotated as i64, head as i64, 1)?);
    }
    concat_values(ctx, parts, 3)
}

/// The input as 4D heads, and the shape (a 1 for the heads, the depth left out) that per-token
/// values broadcast in: a 4D input `[batch, heads, seq, depth]` as it is, tokens
/// `[batch, 1, seq]`; a 3D one `[batch, seq, heads * depth]` as `[batch, seq, heads, depth]`,
/// tokens `[batch, seq, 1]`.
pub(super) fn heads_view(ctx: &mut Ctx, x: ValueId, num_heads: Option<i64>) -> Result<(ValueId, [usize; 3]), String> {
    match (&ctx.ty(x).shape[..], num_heads) {
        (&[batch, _, seq, _], None) => Ok((x, [batch, 1, seq])),
        (&[batch, heads, seq, _], Some(n)) if n as usize == heads => Ok((x, [batch, 1, seq])),
        (&[batch, seq, hidden], Some(n)) if n > 0 && hidden.is_multiple_of(n as usize) => {
            let n = n as usize;
            let split = reshape(ctx, x, &[batch, seq, n, hidden / n])?;
            Ok((split, [batch, seq, 1]))
        }
        (shape, Some(n)) => Err(format!(
            "num_heads {n} is not supported for an input of shape {shape:?}"
        )),
        (shape, None) => Err(format!(
            "an input of shape {shape:?} is not supported (4D, or 3D with `num_heads`)"
        )),
    }
}

/// The cos or sin values of each token (`[batch, seq, half]`: gathered from the cache at
/// `position_ids`, or the cache itself without them) in `shape`.
fn per_token(ctx: &mut Ctx, cache: usize, name: &str, shape: &[usize; 4]) -> Result<ValueId, String> {
    let table = ctx.input(cache)?;
    let rows = match ctx.opt_input(POSITION_IDS) {
        Some(positions) => ctx.build1(
            OpKind::Gather,
            vec![table, positions],
            Attrs::new().with("axis", Attr::Int(0)),
        )?,
        None => table,
    };
    let given = &ctx.ty(rows).shape;
    let wanted = [shape[0], shape[1] * shape[2], shape[3]];
    if given[..] != wanted {
        return Err(format!(
            "{name} gives values of shape {given:?} for the tokens, expected {wanted:?}"
        ));
    }
    reshape(ctx, rows, shape)
}

/// Entries `start, start + step, ...` before `end` of the last axis of 4D `x`.
fn slice_last(ctx: &mut Ctx, x: ValueId, start: i64, end: i64, step: i64) -> Result<ValueId, String> {
    slice_value(ctx, x, &[(3, DimSlice { start, end, step })])
}

/// The two members of each rotated pair: the first and second halves of the rotated entries,
/// or the even and odd ones when `interleaved`.
fn pairs(ctx: &mut Ctx, x: ValueId, rotated: usize, interleaved: bool) -> Result<(ValueId, ValueId), String> {
    let (r, half) = (rotated as i64, rotated as i64 / 2);
    Ok(if interleaved {
        (slice_last(ctx, x, 0, r, 2)?, slice_last(ctx, x, 1, r, 2)?)
    } else {
        (slice_last(ctx, x, 0, half, 1)?, slice_last(ctx, x, half, r, 1)?)
    })
}

/// `a0 * a1` and `b0 * b1` combined by `combine` (added or subtracted).
fn combine_products(ctx: &mut Ctx, combine: OpKind, a: [ValueId; 2], b: [ValueId; 2]) -> Result<ValueId, String> {
    let a = ctx.op(OpKind::Mul, &a)?;
    let b = ctx.op(OpKind::Mul, &b)?;
    ctx.op(combine, &[a, b])
}

/// The turned pairs put back where `pairs` took them from.
fn join_pairs(ctx: &mut Ctx, real: ValueId, imag: ValueId, interleaved: bool) -> Result<ValueId, String> {
    if !interleaved {
        return concat_values(ctx, vec![real, imag], 3);
    }
    let shape = ctx.ty(real).shape.clone();
    let mut column = shape.clone();
    column.push(1);
    let (real, imag) = (reshape(ctx, real, &column)?, reshape(ctx, imag, &column)?);
    let side_by_side = concat_values(ctx, vec![real, imag], 4)?;
    reshape(ctx, side_by_side, &[shape[0], shape[1], shape[2], shape[3] * 2])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::AttributeProto;
    use super::super::super::testutil::*;
    use mxc_dialects::{eval, DType, Tensor};

    /// RotaryEmbedding of one head of depth 4 over 2 tokens at positions 1 and 0, with cos and
    /// sin tables whose row p is `[p + 1, 10 (p + 1)]` and `[-(p + 1), 100]`.
    fn rotate(input: &[f64], attrs: Vec<AttributeProto>) -> Result<Vec<f64>, String> {
        let cos = [1.0, 10.0, 2.0, 20.0];
        let sin = [-1.0, 100.0, -2.0, 100.0];
        let g = ModelBuilder::new(23)
            .input("x", DataType::Float, &[1, 1, 2, 4])
            .input("pos", DataType::Int64, &[1, 2])
            .init(f32_tensor("cos", &[2, 2], &cos.map(|v| v as f32)))
            .init(f32_tensor("sin", &[2, 2], &sin.map(|v| v as f32)))
            .node(node("RotaryEmbedding", &["x", "cos", "sin", "pos"], &["y"], attrs))
            .output("y")
            .import()
            .map_err(|e| e.to_string())?;
        let x = Tensor::from_f64s(DType::F32, vec![1, 1, 2, 4], input);
        let pos = Tensor::from_i64s(DType::I64, vec![1, 2], &[1, 0]);
        Ok(eval::run(&g, &[x, pos])?.remove(0).to_f64_vec())
    }

    #[test]
    fn halves_and_neighbours_are_turned_by_their_tokens_rows() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        // token 0 (position 1): cos [2, 20], sin [-2, 100]; token 1: cos [1, 10], sin [-1, 100]
        let halves = rotate(&x, vec![]).unwrap();
        // pairs (1, 3), (2, 4); (5, 7), (6, 8)
        let want = [
            2.0 * 1.0 + 2.0 * 3.0,
            20.0 * 2.0 - 100.0 * 4.0,
            -2.0 * 1.0 + 2.0 * 3.0,
            100.0 * 2.0 + 20.0 * 4.0,
            5.0 + 7.0,
            10.0 * 6.0 - 100.0 * 8.0,
            -5.0 + 7.0,
            100.0 * 6.0 + 10.0 * 8.0,
        ];
        assert_eq!(halves, want);
        // pairs (1, 2), (3, 4); (5, 6), (7, 8)
        let neighbours = rotate(&x, vec![int_attr("interleaved", 1)]).unwrap();
        let want = [
            2.0 * 1.0 + 2.0 * 2.0,
            -2.0 * 1.0 + 2.0 * 2.0,
            20.0 * 3.0 - 100.0 * 4.0,
            100.0 * 3.0 + 20.0 * 4.0,
            5.0 + 6.0,
            -5.0 + 6.0,
            10.0 * 7.0 - 100.0 * 8.0,
            100.0 * 7.0 + 10.0 * 8.0,
        ];
        assert_eq!(neighbours, want);
    }

    #[test]
    fn unsupported_attribute_values_are_refused_by_name() {
        let x = [0.0; 8];
        let err = rotate(&x, vec![int_attr("rotary_embedding_dim", 6)]).unwrap_err();
        assert!(
            err.ends_with("rotary_embedding_dim 6 is not supported (0, all, or up to the head size 4)"),
            "{err}"
        );
        let err = rotate(&x, vec![int_attr("rotary_embedding_dim", 3)]).unwrap_err();
        assert!(
            err.ends_with("3 rotated entries (rotary_embedding_dim 3, head size 4) do not split into pairs"),
            "{err}"
        );
        let err = rotate(&x, vec![int_attr("interleaved", 2)]).unwrap_err();
        assert!(err.ends_with("interleaved 2 is not supported (0 or 1)"), "{err}");
        let err = rotate(&x, vec![int_attr("num_heads", 2)]).unwrap_err();
        assert!(err.contains("num_heads 2 is not supported"), "{err}");
    }
}
