//! `Attention` (opsets 23 and 24), decomposed into mx ops the way the ONNX definition computes
//! it: 3D inputs split into heads; the past key and value put in front of K and V (the present
//! outputs); each key/value head repeated for the query heads it serves (grouped-query
//! attention); then `softmax(softcap(q · kᵀ) + bias) · v`, with Q and K each scaled by the
//! square root of `scale`. The additive bias sums `attn_mask` (a boolean one as 0 / -inf, a short
//! one padded with -inf), the causal frontier and the padding `nonpad_kv_seqlen` declares; a
//! query row that the bias masks entirely gets zero probabilities, not softmax's NaN.

use super::super::ctx::Ctx;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::tensor::dtype_of;
use super::axes;
use super::layout::concat_values;
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    // opset 25 adds sliding windows (`left_window_size`, `right_window_size`)
    r.add("", "Attention", 23, 24, attention);
}

/// The inputs by position.
const MASK: usize = 3;
const PAST_KEY: usize = 4;
const PAST_VALUE: usize = 5;
const NONPAD_KV_SEQLEN: usize = 6;

/// What the `qk_matmul_output` output holds (`qk_matmul_output_mode` 0 to 3).
#[derive(Clone, Copy, Debug, PartialEq)]
enum QkOutput {
    /// `q · kᵀ` as the product gives it, before any softcap (as the operator's documentation
    /// and function body have it; onnx's Python reference shows the softcapped scores).
    Product,
    /// After the softcap.
    Softcapped,
    /// After the softcap and the bias.
    Biased,
    /// The probabilities (after the softmax, masked rows zeroed).
    Probabilities,
}

/// The node's attributes, checked.
struct Options {
    scale: Option<f64>,
    causal: bool,
    q_heads: Option<usize>,
    kv_heads: Option<usize>,
    softcap: Option<f64>,
    softmax_dtype: Option<DType>,
    qk_output: QkOutput,
}

impl Options {
    fn read(ctx: &Ctx) -> Result<Options, String> {
        let node = &ctx.node;
        let causal = match node.int("is_causal", 0)? {
            0 => false,
            1 => true,
            c => return Err(format!("is_causal {c} is not supported (0 or 1)")),
        };
        let softcap = match node.float("softcap", 0.0)? as f64 {
            0.0 => None,
            c if c > 0.0 => Some(c),
            c => return Err(format!("softcap {c} is not supported (0, none, or positive)")),
        };
        let qk_output = match node.int("qk_matmul_output_mode", 0)? {
            0 => QkOutput::Product,
            1 => QkOutput::Softcapped,
            2 => QkOutput::Biased,
            3 => QkOutput::Probabilities,
            m => return Err(format!("qk_matmul_output_mode {m} is not supported (0 to 3)")),
        };
        Ok(Options {
            scale: scale(node)?,
            causal,
            q_heads: head_count(node, "q_num_heads")?,
            kv_heads: head_count(node, "kv_num_heads")?,
            softcap,
            softmax_dtype: softmax_precision(node)?,
            qk_output,
        })
    }
}

/// The `scale` attribute, if given; a negative one is refused (its square root scales Q and K).
pub(super) fn scale(node: &NodeView) -> Result<Option<f64>, String> {
    let scale = node.opt_float("scale")?.map(f64::from);
    match scale {
        Some(s) if s < 0.0 => Err(format!(
            "scale {s} is not supported (Q and K are each scaled by its square root)"
        )),
        _ => Ok(scale),
    }
}

/// A head-count attribute (`q_num_heads`, `kv_num_heads`), if given, checked to be positive.
pub(super) fn head_count(node: &NodeView, name: &str) -> Result<Option<usize>, String> {
    node.opt_int(name)?
        .map(|h| {
            usize::try_from(h)
                .ok()
                .filter(|&h| h > 0)
                .ok_or_else(|| format!("{name} {h} is not supported (a positive count)"))
        })
        .transpose()
}

/// The `softmax_precision` attribute as a float type, if given.
pub(super) fn softmax_precision(node: &NodeView) -> Result<Option<DType>, String> {
    node.opt_int("softmax_precision")?
        .map(|code| {
            i32::try_from(code)
                .ok()
                .and_then(dtype_of)
                .filter(|d| d.is_float())
                .ok_or_else(|| format!("softmax_precision {code} is not supported (a float type)"))
        })
        .transpose()
}

/// The outputs: `Y`, `present_key`, `present_value`, `qk_matmul_output` (built only when the
/// node asks for it).
fn attention(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let opts = Options::read(ctx)?;
    let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let dtype = ctx.ty(q).dtype;
    if !dtype.is_float() {
        return Err(format!("Q must be a float tensor, got {dtype}"));
    }
    let rank = ctx.ty(q).rank();
    for (name, x) in [("K", k), ("V", v)] {
        let t = ctx.ty(x);
        if t.dtype != dtype || t.rank() != rank {
            return Err(format!(
                "{name} of type {t} with Q of type {} is not supported",
                ctx.ty(q)
            ));
        }
    }
    let (q, k, v) = match rank {
        3 => {
            let (Some(q_heads), Some(kv_heads)) = (opts.q_heads, opts.kv_heads) else {
                return Err("3D inputs need the attributes `q_num_heads` and `kv_num_heads`".into());
            };
            (
                split_heads(ctx, q, q_heads)?,
                split_heads(ctx, k, kv_heads)?,
                split_heads(ctx, v, kv_heads)?,
            )
        }
        4 => {
            check_heads(ctx, "q_num_heads", opts.q_heads, q)?;
            check_heads(ctx, "kv_num_heads", opts.kv_heads, k)?;
            (q, k, v)
        }
        _ => return Err(format!("Q must have rank 3 or 4, got shape {:?}", ctx.ty(q).shape)),
    };
    let past = past_length(ctx)?;
    let (present_key, present_value) = (with_past(ctx, k, PAST_KEY)?, with_past(ctx, v, PAST_VALUE)?);

    let scores = Scores::compute(ctx, &opts, q, present_key, past)?;
    let probabilities = probabilities(ctx, &opts, &scores, dtype)?;
    let q_heads = ctx.ty(q).shape[1];
    let values = repeat_heads(ctx, present_value, q_heads)?;
    let y = ctx.op(OpKind::MatMul, &[probabilities, values])?;
    let y = if rank == 3 { merge_heads(ctx, y)? } else { y };
    let mut outputs = vec![y, present_key, present_value];
    if ctx.wants_output(3) {
        outputs.push(match opts.qk_output {
            QkOutput::Product => scores.product,
            QkOutput::Softcapped => scores.softcapped,
            QkOutput::Biased => scores.biased,
            QkOutput::Probabilities => probabilities,
        });
    }
    Ok(outputs)
}

fn neg_inf(ctx: &mut Ctx, dtype: DType) -> ValueId {
    ctx.scalar(dtype, f64::NEG_INFINITY)
}

/// A 3D input `[batch, sequence, heads * depth]` as `[batch, heads, sequence, depth]`.
pub(super) fn split_heads(ctx: &mut Ctx, x: ValueId, heads: usize) -> Result<ValueId, String> {
    let &[batch, seq, hidden] = &ctx.ty(x).shape[..] else {
        return Err(format!(
            "Q, K and V must all have rank 3, got shape {:?}",
            ctx.ty(x).shape
        ));
    };
    if !hidden.is_multiple_of(heads) {
        return Err(format!("a hidden size of {hidden} does not split into {heads} heads"));
    }
    let split = reshape(ctx, x, &[batch, seq, heads, hidden / heads])?;
    ctx.transpose(split, &[0, 2, 1, 3])
}

/// The inverse of `split_heads`, for the result.
pub(super) fn merge_heads(ctx: &mut Ctx, y: ValueId) -> Result<ValueId, String> {
    let &[batch, heads, seq, depth] = &ctx.ty(y).shape[..] else {
        unreachable!("the result of a 4D attention")
    };
    let sequence_first = ctx.transpose(y, &[0, 2, 1, 3])?;
    reshape(ctx, sequence_first, &[batch, seq, heads * depth])
}

/// The head counts are attributes of the 3D form; given with 4D inputs, they must agree with
/// the inputs' head axis.
fn check_heads(ctx: &Ctx, name: &str, given: Option<usize>, x: ValueId) -> Result<(), String> {
    let shape = &ctx.ty(x).shape;
    match given {
        Some(h) if shape[1] != h => Err(format!("{name} {h} does not match the 4D input of shape {shape:?}")),
        _ => Ok(()),
    }
}

/// The number of cached keys before K (`past_key`'s sequence length, 0 without a cache).
fn past_length(ctx: &Ctx) -> Result<usize, String> {
    match (ctx.opt_input(PAST_KEY), ctx.opt_input(PAST_VALUE)) {
        (None, None) => Ok(0),
        (Some(past), Some(_)) if ctx.opt_input(NONPAD_KV_SEQLEN).is_some() => Err(format!(
            "nonpad_kv_seqlen with a past key and value is not supported (the cache is {:?})",
            ctx.ty(past).shape
        )),
        (Some(past), Some(_)) if ctx.ty(past).rank() == 4 => Ok(ctx.ty(past).shape[2]),
        (Some(past), Some(_)) => Err(format!("past_key must have rank 4, got shape {:?}", ctx.ty(past).shape)),
        _ => Err("past_key and past_value must be given together".into()),
    }
}

/// `x` (4D) with the cache input `past` (if given) in front along the sequence.
fn with_past(ctx: &mut Ctx, x: ValueId, past: usize) -> Result<ValueId, String> {
    match ctx.opt_input(past) {
        Some(p) => concat_values(ctx, vec![p, x], 2),
        None => Ok(x),
    }
}

/// Key or value heads `[batch, kv_heads, keys, depth]` repeated for `q_heads` query heads,
/// each kept together: `[h0, h0, h1, h1, ...]` (query head `i` reads kv head `i / group`).
pub(super) fn repeat_heads(ctx: &mut Ctx, x: ValueId, q_heads: usize) -> Result<ValueId, String> {
    let &[batch, kv_heads, keys, depth] = &ctx.ty(x).shape[..] else {
        unreachable!("4D keys and values")
    };
    if kv_heads == q_heads {
        return Ok(x);
    }
    if !q_heads.is_multiple_of(kv_heads) {
        return Err(format!(
            "{q_heads} query heads do not share {kv_heads} key/value heads evenly"
        ));
    }
    let group = q_heads / kv_heads;
    let single = reshape(ctx, x, &[batch, kv_heads, 1, keys, depth])?;
    let shape = axes::ints(&[batch, kv_heads, group, keys, depth]);
    let repeated = ctx.build1(OpKind::Expand, vec![single], Attrs::new().with("shape", shape))?;
    reshape(ctx, repeated, &[batch, q_heads, keys, depth])
}

/// The attention scores `[batch, q_heads, queries, keys]` at the stages `qk_matmul_output`
/// can show, and the bias added to them.
struct Scores {
    product: ValueId,
    softcapped: ValueId,
    biased: ValueId,
    bias: Option<ValueId>,
}

impl Scores {
    fn compute(ctx: &mut Ctx, opts: &Options, q: ValueId, k: ValueId, past: usize) -> Result<Scores, String> {
        let (queries, keys) = (ctx.ty(q).shape[2], ctx.ty(k).shape[2]);
        let dtype = ctx.ty(q).dtype;
        let product = scaled_product(ctx, q, k, opts.scale)?;
        let softcapped = match opts.softcap {
            Some(cap) => softcap(ctx, product, cap)?,
            None => product,
        };
        let bias = bias(ctx, opts, queries, keys, past, dtype)?;
        let biased = match bias {
            Some(b) => ctx.op(OpKind::Add, &[softcapped, b])?,
            None => softcapped,
        };
        Ok(Scores {
            product,
            softcapped,
            biased,
            bias,
        })
    }
}

/// The scores `q · kᵀ * scale` (`[batch, q_heads, queries, keys]`) of 4D `q` and `k`, each key
/// head repeated for the query heads it serves; `scale` defaults to `1 / sqrt(depth)`.
pub(super) fn scaled_product(ctx: &mut Ctx, q: ValueId, k: ValueId, scale: Option<f64>) -> Result<ValueId, String> {
    let q_shape = ctx.ty(q).shape.clone();
    let dtype = ctx.ty(q).dtype;
    // As the definition does, Q and K are each scaled by the square root of the scale
    // (rather than their product by the scale), so that the product does not overflow.
    let scale = scale.unwrap_or(1.0 / (q_shape[3] as f64).sqrt());
    let root = ctx.scalar(dtype, scale.sqrt());
    let k = repeat_heads(ctx, k, q_shape[1])?;
    let (q, k) = (ctx.op(OpKind::Mul, &[q, root])?, ctx.op(OpKind::Mul, &[k, root])?);
    let kt = ctx.transpose(k, &[0, 1, 3, 2])?;
    ctx.op(OpKind::MatMul, &[q, kt])
}

/// `cap * tanh(x / cap)`: the scores squashed into `(-cap, cap)` (before the bias, so that
/// masked keys stay at -inf).
fn softcap(ctx: &mut Ctx, x: ValueId, cap: f64) -> Result<ValueId, String> {
    let c = ctx.scalar(ctx.ty(x).dtype, cap);
    let scaled = ctx.op(OpKind::Div, &[x, c])?;
    let squashed = ctx.op(OpKind::Tanh, &[scaled])?;
    ctx.op(OpKind::Mul, &[squashed, c])
}

/// The softmax of the biased scores over the keys, in `softmax_precision` (the scores' type
/// without it), with the rows the bias masks entirely set to zero, in the scores' type.
fn probabilities(ctx: &mut Ctx, opts: &Options, scores: &Scores, dtype: DType) -> Result<ValueId, String> {
    let x = ctx.cast(scores.biased, opts.softmax_dtype.unwrap_or(dtype))?;
    let p = ctx.build1(OpKind::Softmax, vec![x], Attrs::new().with("axis", Attr::Int(3)))?;
    let p = match scores.bias {
        Some(bias) => zero_masked_rows(ctx, p, bias)?,
        None => p,
    };
    ctx.cast(p, dtype)
}

/// `p` with zeros in the query rows where every key's bias is -inf: softmax makes NaN of such
/// a row, the definition a zero row. The rows are found on the bias rather than the scores
/// (which may hold NaN or infinities of their own); when the bias is known at compile time to
/// leave a key to every row, `p` is returned as it is.
fn zero_masked_rows(ctx: &mut Ctx, p: ValueId, bias: ValueId) -> Result<ValueId, String> {
    let (dtype, rank) = (ctx.ty(bias).dtype, ctx.ty(bias).rank());
    let row_max = ctx.reduce(OpKind::ReduceMax, bias, &[rank - 1], true)?;
    let lowest = neg_inf(ctx, dtype);
    let masked = ctx.op(OpKind::Equal, &[row_max, lowest])?;
    if ctx
        .known(masked)
        .is_some_and(|t| t.to_i64_vec().iter().all(|&m| m == 0))
    {
        return Ok(p);
    }
    let zero = ctx.scalar(ctx.ty(p).dtype, 0.0);
    ctx.op(OpKind::Where, &[masked, zero, p])
}

/// The additive bias on the scores, broadcasting to `[batch, q_heads, queries, keys]`, or
/// `None` when nothing masks a key.
fn bias(
    ctx: &mut Ctx,
    opts: &Options,
    queries: usize,
    keys: usize,
    past: usize,
    dtype: DType,
) -> Result<Option<ValueId>, String> {
    let mut terms = Vec::new();
    if let Some(mask) = ctx.opt_input(MASK) {
        terms.push(mask_bias(ctx, mask, keys, dtype)?);
    }
    // The keys the last query of each batch sees: those `nonpad_kv_seqlen` says are valid (K
    // and V hold a cache padded to their length), or, for a causal mask, the past and new ones.
    let end = match ctx.opt_input(NONPAD_KV_SEQLEN) {
        Some(lengths) => Some(lengths_per_batch(ctx, lengths)?),
        None if opts.causal => Some(ctx.scalar(DType::I64, (past + queries) as f64)),
        None => None,
    };
    if let Some(end) = end {
        terms.push(frontier_bias(ctx, end, queries, keys, opts.causal, dtype)?);
    }
    let mut terms = terms.into_iter();
    let Some(mut sum) = terms.next() else {
        return Ok(None);
    };
    for t in terms {
        sum = ctx.op(OpKind::Add, &[sum, t])?;
    }
    Ok(Some(sum))
}

/// `attn_mask` as an additive bias: a boolean mask as 0 where it is true and -inf where it is
/// false, a float one as it is; one that covers fewer keys than there are is padded with -inf.
fn mask_bias(ctx: &mut Ctx, mask: ValueId, keys: usize, dtype: DType) -> Result<ValueId, String> {
    let t = ctx.ty(mask).clone();
    let additive = match t.dtype {
        DType::Bool => {
            let (zero, lowest) = (ctx.scalar(dtype, 0.0), neg_inf(ctx, dtype));
            ctx.op(OpKind::Where, &[mask, zero, lowest])?
        }
        d if d == dtype => mask,
        d => {
            return Err(format!(
                "attn_mask of type {d} is not supported (bool, or Q's type {dtype})"
            ))
        }
    };
    let given = match t.shape.last() {
        Some(&n) if t.rank() <= 4 && n <= keys => n,
        _ => {
            return Err(format!(
                "attn_mask of shape {:?} does not fit scores over {keys} keys",
                t.shape
            ))
        }
    };
    if given == keys {
        return Ok(additive);
    }
    let mut pad_shape = t.shape.clone();
    *pad_shape.last_mut().unwrap() = keys - given;
    let pad = ctx.filled(TensorType::new(dtype, pad_shape), f64::NEG_INFINITY)?;
    concat_values(ctx, vec![additive, pad], t.rank() - 1)
}

/// `nonpad_kv_seqlen` (`[batch]`, int64) as `[batch, 1, 1, 1]`, to broadcast against the scores.
fn lengths_per_batch(ctx: &mut Ctx, lengths: ValueId) -> Result<ValueId, String> {
    let t = ctx.ty(lengths);
    if t.dtype != DType::I64 || t.rank() != 1 {
        return Err(format!("nonpad_kv_seqlen must be a vector of int64, got {t}"));
    }
    let batch = t.shape[0];
    reshape(ctx, lengths, &[batch, 1, 1, 1])
}

/// The bias that hides from each query the keys from its `end` on: the last query's end is
/// `end`; if `causal`, each query before it ends one key earlier (the causal frontier, which
/// the definition aligns bottom-right), so that query `i` sees keys `j <= end - queries + i`.
fn frontier_bias(
    ctx: &mut Ctx,
    end: ValueId,
    queries: usize,
    keys: usize,
    causal: bool,
    dtype: DType,
) -> Result<ValueId, String> {
    let end = if causal {
        let query = ctx.ramp(queries, 0, 2, DType::I64)?;
        let last = ctx.scalar(DType::I64, queries as f64 - 1.0);
        let before_last = ctx.op(OpKind::Sub, &[query, last])?;
        ctx.op(OpKind::Add, &[end, before_last])?
    } else {
        end
    };
    let key = ctx.ramp(keys, 1, 2, DType::I64)?;
    let seen = ctx.op(OpKind::Less, &[key, end])?;
    let (zero, lowest) = (ctx.scalar(dtype, 0.0), neg_inf(ctx, dtype));
    ctx.op(OpKind::Where, &[seen, zero, lowest])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    /// An Attention node on Q `[2, 4, 3 * 8]` and K, V `[2, 6, 8]` (3 query heads sharing one
    /// key/value head), with `attrs` besides the head counts.
    fn gqa_3d(inputs: &[&str], attrs: Vec<super::super::super::proto::AttributeProto>) -> ModelBuilder {
        let mut all = vec![int_attr("q_num_heads", 3), int_attr("kv_num_heads", 1)];
        all.extend(attrs);
        ModelBuilder::new(23)
            .input("q", DataType::Float, &[2, 4, 24])
            .input("k", DataType::Float, &[2, 6, 8])
            .input("v", DataType::Float, &[2, 6, 8])
            .input("mask", DataType::Bool, &[4, 5])
            .node(node("Attention", inputs, &["y"], all))
            .output("y")
    }

    #[test]
    fn grouped_3d_heads_are_split_repeated_and_merged() {
        let text = gqa_3d(&["q", "k", "v"], vec![]).text();
        for want in [
            "{shape = [2, 4, 3, 8]}",
            "{perm = [0, 2, 1, 3]}",
            "mx.expand",
            "{shape = [2, 1, 3, 6, 8]}",
            "mx.softmax",
            "{shape = [2, 4, 24]} : tensor<2x4x24xf32>",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        assert!(!text.contains("mx.where"), "no bias, no masked rows: {text}");
    }

    #[test]
    fn a_causal_mask_that_leaves_every_row_a_key_needs_no_guard() {
        let text = gqa_3d(&["q", "k", "v"], vec![int_attr("is_causal", 1)]).text();
        // the bias is a constant [4, 6] (little-endian f32s, -inf is 000080ff): query i sees
        // keys 0..=i
        let rows = [
            "00000000",
            "000080ff000080ff000080ff000080ff000080ff",
            "0000000000000000",
            "000080ff",
        ];
        assert!(text.contains("tensor<4x6xf32>"), "{text}");
        assert!(text.contains(&format!("r0 = \"0x{}", rows.concat())), "{text}");
        assert!(!text.contains("mx.reduce_max"), "{text}");
    }

    #[test]
    fn a_short_boolean_mask_is_padded_and_its_masked_rows_zeroed() {
        let text = gqa_3d(&["q", "k", "v", "mask"], vec![]).text();
        assert!(text.contains("mx.concat"), "padded to 6 keys: {text}");
        assert!(text.contains("mx.reduce_max"), "{text}");
        assert_eq!(text.matches("mx.where").count(), 2, "{text}");
    }

    #[test]
    fn unsupported_attribute_values_are_refused_by_name() {
        let err = gqa_3d(&["q", "k", "v"], vec![int_attr("qk_matmul_output_mode", 4)]).error();
        assert!(
            err.ends_with("qk_matmul_output_mode 4 is not supported (0 to 3)"),
            "{err}"
        );
        let err = gqa_3d(
            &["q", "k", "v"],
            vec![int_attr("softmax_precision", DataType::Int32 as i64)],
        )
        .error();
        assert!(
            err.ends_with("softmax_precision 6 is not supported (a float type)"),
            "{err}"
        );
        let err = ModelBuilder::new(23)
            .input("q", DataType::Float, &[1, 2, 4])
            .node(node("Attention", &["q", "q", "q"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(
            err.ends_with("3D inputs need the attributes `q_num_heads` and `kv_num_heads`"),
            "{err}"
        );
        let err = ModelBuilder::new(23)
            .input("q", DataType::Float, &[1, 1, 2, 4])
            .input("k", DataType::Float, &[1, 2, 4])
            .node(node("Attention", &["q", "k", "k"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(
            err.ends_with("K of type tensor<1x2x4xf32> with Q of type tensor<1x1x2x4xf32> is not supported"),
            "{err}"
        );
    }
}
