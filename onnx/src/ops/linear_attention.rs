//! `LinearAttention` (opset 27), decomposed into mx ops. Each key/value head carries a state
//! `S` (`[d_k, d_v]`, `past_state` or zeros) through the tokens, `S_t = decay_t(S_{t-1}) +
//! k_t ⊗ v'_t`, and each token's output is `scale * q_tᵀ S_t`; query head `h` reads the state
//! of key/value head `h / (q_num_heads / kv_num_heads)`. The update rule sets the decay
//! (`exp(decay_t)` per key row or per head for the gated rules) and the value written (`v'_t =
//! β_t (v_t - S'ᵀ k_t)`, `S'` the decayed state, for the delta rules). Two forms:
//!
//! - `linear`, whose state is a plain sum, in closed form over the whole sequence: outputs
//!   `q · S_0 + causal(q · kᵀ) · v`, state `S_0 + kᵀ · v`;
//! - `gated`, `delta` and `gated_delta` unrolled over the (static) sequence, one token at a
//!   time, for at most `MAX_STEPS` tokens.
//!
//! Everything is computed in f32, as the reference does (16-bit inputs are widened); the output
//! is cast back to the query's type and the state to `past_state`'s (the query's without it).
//! `chunk_size` only tunes how an implementation splits the sequence: it is read and ignored.

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::attention::{head_count, merge_heads, repeat_heads, split_heads};
use super::layout::{concat_values, slice_value, DimSlice};
use super::shape::reshape;
use mxc_dialects::{DType, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    r.add("", "LinearAttention", 27, LATEST, linear_attention);
}

/// The optional inputs by position.
const PAST_STATE: usize = 3;
const DECAY: usize = 4;
const BETA: usize = 5;

/// The longest sequence the recurrent rules are unrolled over: each token adds a dozen ops.
const MAX_STEPS: usize = 1024;

/// The type everything is computed in.
const COMPUTE: DType = DType::F32;

/// The `update_rule` attribute.
#[derive(Clone, Copy)]
enum Rule {
    Linear,
    Gated,
    Delta,
    GatedDelta,
}

impl Rule {
    fn read(ctx: &Ctx) -> Result<Rule, String> {
        match ctx.node.string("update_rule", "gated_delta")?.as_str() {
            "linear" => Ok(Rule::Linear),
            "gated" => Ok(Rule::Gated),
            "delta" => Ok(Rule::Delta),
            "gated_delta" => Ok(Rule::GatedDelta),
            r => Err(format!(
                "update_rule \"{r}\" is not supported (linear, gated, delta or gated_delta)"
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Rule::Linear => "linear",
            Rule::Gated => "gated",
            Rule::Delta => "delta",
            Rule::GatedDelta => "gated_delta",
        }
    }

    /// Whether the state decays by `exp(decay_t)` before each write.
    fn gated(self) -> bool {
        matches!(self, Rule::Gated | Rule::GatedDelta)
    }

    /// Whether the value written is the delta-rule correction `β_t (v_t - S'ᵀ k_t)`.
    fn delta(self) -> bool {
        matches!(self, Rule::Delta | Rule::GatedDelta)
    }
}

/// The extents of the problem.
struct Dims {
    batch: usize,
    tokens: usize,
    q_heads: usize,
    kv_heads: usize,
    d_k: usize,
    d_v: usize,
}

impl Dims {
    /// The extents of the packed `[batch, tokens, heads * depth]` query, key and value, checked
    /// to agree with each other and the head counts.
    fn read(ctx: &Ctx, q_heads: usize, kv_heads: usize) -> Result<Dims, String> {
        let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        let dtype = ctx.ty(q).dtype;
        if !matches!(dtype, DType::F16 | DType::BF16 | DType::F32) {
            return Err(format!("query of type {dtype} is not supported (f16, bf16 or f32)"));
        }
        let shapes = [q, k, v].map(|x| ctx.ty(x).shape.clone());
        let same_type = [k, v].iter().all(|&x| ctx.ty(x).dtype == dtype);
        let (&[batch, tokens, q_hidden], &[_, _, k_hidden], &[_, _, v_hidden]) =
            (&shapes[0][..], &shapes[1][..], &shapes[2][..])
        else {
            return Err(format!("query, key and value must have rank 3, got {shapes:?}"));
        };
        let dims = Dims {
            batch,
            tokens,
            q_heads,
            kv_heads,
            d_k: q_hidden / q_heads,
            d_v: v_hidden / kv_heads,
        };
        let fits = same_type
            && shapes.iter().all(|s| s[..2] == [batch, tokens])
            && q_hidden == q_heads * dims.d_k
            && k_hidden == kv_heads * dims.d_k
            && v_hidden == kv_heads * dims.d_v;
        if !fits {
            return Err(format!(
                "query, key and value of shapes {shapes:?} and types {dtype}, {}, {} do not fit {q_heads} query and \
                 {kv_heads} key/value heads",
                ctx.ty(k).dtype,
                ctx.ty(v).dtype
            ));
        }
        if !q_heads.is_multiple_of(kv_heads) {
            return Err(format!(
                "{q_heads} query heads do not share {kv_heads} key/value heads evenly"
            ));
        }
        if tokens == 0 {
            return Err("an empty sequence (no tokens) is not supported".into());
        }
        Ok(dims)
    }

    /// How many query heads read each key/value head's state.
    fn group(&self) -> usize {
        self.q_heads / self.kv_heads
    }
}

/// The inputs in the compute type, the query scaled, the decay exponentiated.
struct Inputs {
    q: ValueId,
    k: ValueId,
    v: ValueId,
    past: Option<ValueId>,
    /// `exp(decay)`, `[batch, tokens, kv_heads]` or `[batch, tokens, kv_heads * d_k]`.
    decay: Option<ValueId>,
    /// `[batch, tokens, kv_heads]` or `[batch, tokens, 1]`.
    beta: Option<ValueId>,
}

impl Inputs {
    fn read(ctx: &mut Ctx, rule: Rule, d: &Dims, scale: f64) -> Result<Inputs, String> {
        let mut widened = |i| -> Result<ValueId, String> {
            let x = ctx.input(i)?;
            ctx.cast(x, COMPUTE)
        };
        let (q, k, v) = (widened(0)?, widened(1)?, widened(2)?);
        let scale = ctx.scalar(COMPUTE, scale);
        let q = ctx.op(OpKind::Mul, &[q, scale])?;
        let past = match ctx.opt_input(PAST_STATE) {
            Some(p) => Some(state_input(ctx, p, d)?),
            None => None,
        };
        let decay = match rule_input(ctx, rule, DECAY, "decay", rule.gated())? {
            Some(g) => {
                let g = per_token(ctx, g, "decay", d, &[d.kv_heads, d.kv_heads * d.d_k])?;
                Some(ctx.op(OpKind::Exp, &[g])?)
            }
            None => None,
        };
        let beta = match rule_input(ctx, rule, BETA, "beta", rule.delta())? {
            Some(b) => Some(per_token(ctx, b, "beta", d, &[d.kv_heads, 1])?),
            None => None,
        };
        Ok(Inputs {
            q,
            k,
            v,
            past,
            decay,
            beta,
        })
    }
}

/// Input `i` (`name`), which `rule` needs when `needed` and refuses otherwise.
fn rule_input(ctx: &Ctx, rule: Rule, i: usize, name: &str, needed: bool) -> Result<Option<ValueId>, String> {
    match (ctx.opt_input(i), needed) {
        (x, true) => x
            .map(Some)
            .ok_or_else(|| format!("update_rule \"{}\" needs the input `{name}`", rule.name())),
        (None, false) => Ok(None),
        (Some(_), false) => Err(format!("update_rule \"{}\" takes no input `{name}`", rule.name())),
    }
}

/// A per-token input (`decay`, `beta`) `[batch, tokens, n]` of the query's type with `n` one of
/// `extents`, in the compute type.
fn per_token(ctx: &mut Ctx, x: ValueId, name: &str, d: &Dims, extents: &[usize]) -> Result<ValueId, String> {
    let t = ctx.ty(x);
    let fits = t.dtype == ctx.ty(ctx.input(0)?).dtype
        && t.rank() == 3
        && t.shape[..2] == [d.batch, d.tokens]
        && extents.contains(&t.shape[2]);
    if !fits {
        return Err(format!(
            "{name} must be [{}, {}, n] with n in {extents:?} of the query's type, got {t}",
            d.batch, d.tokens
        ));
    }
    ctx.cast(x, COMPUTE)
}

/// `past_state`, checked to be `[batch, kv_heads, d_k, d_v]` of a float type, in the compute
/// type.
fn state_input(ctx: &mut Ctx, p: ValueId, d: &Dims) -> Result<ValueId, String> {
    let t = ctx.ty(p);
    let shape = [d.batch, d.kv_heads, d.d_k, d.d_v];
    if t.shape != shape || !matches!(t.dtype, DType::F16 | DType::BF16 | DType::F32) {
        return Err(format!("past_state must be {shape:?} of f16, bf16 or f32, got {t}"));
    }
    ctx.cast(p, COMPUTE)
}

/// The outputs: `output` and `present_state`.
fn linear_attention(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let rule = Rule::read(ctx)?;
    // a tuning hint for chunked implementations; the result does not depend on it
    ctx.node.without_effect(&["chunk_size"]);
    let scale = ctx.node.float("scale", 0.0)?;
    let required = |name: &str| head_count(&ctx.node, name)?.ok_or(format!("missing attribute `{name}`"));
    let (q_heads, kv_heads) = (required("q_num_heads")?, required("kv_num_heads")?);
    let d = Dims::read(ctx, q_heads, kv_heads)?;
    // 0 asks for the default
    let scale = match scale {
        0.0 => 1.0 / (d.d_k as f64).sqrt(),
        s => s as f64,
    };
    let x = Inputs::read(ctx, rule, &d, scale)?;
    let (y, state) = match rule {
        Rule::Linear => closed_form(ctx, &d, &x)?,
        _ => unrolled(ctx, rule, &d, &x)?,
    };
    let q = ctx.input(0)?;
    let state_dtype = ctx.ty(ctx.opt_input(PAST_STATE).unwrap_or(q)).dtype;
    let y = ctx.cast(y, ctx.ty(q).dtype)?;
    Ok(vec![y, ctx.cast(state, state_dtype)?])
}

/// The `linear` rule over the whole sequence: token `t` reads `S_0 + Σ_{s <= t} k_s ⊗ v_s`, so
/// its output is `q_t · S_0 + Σ_{s <= t} (q_t · k_s) v_s`, a causally masked attention without
/// softmax.
fn closed_form(ctx: &mut Ctx, d: &Dims, x: &Inputs) -> Result<(ValueId, ValueId), String> {
    let q = split_heads(ctx, x.q, d.q_heads)?;
    let k = split_heads(ctx, x.k, d.kv_heads)?;
    let v = split_heads(ctx, x.v, d.kv_heads)?;
    let kt = ctx.transpose(k, &[0, 1, 3, 2])?;
    let shared_kt = repeat_heads(ctx, kt, d.q_heads)?;
    let scores = ctx.op(OpKind::MatMul, &[q, shared_kt])?;
    let query = ctx.ramp(d.tokens, 0, 2, DType::I64)?;
    let key = ctx.ramp(d.tokens, 1, 2, DType::I64)?;
    let later = ctx.op(OpKind::Less, &[query, key])?;
    let zero = ctx.scalar(COMPUTE, 0.0);
    let causal = ctx.op(OpKind::Where, &[later, zero, scores])?;
    let shared_v = repeat_heads(ctx, v, d.q_heads)?;
    let mut y = ctx.op(OpKind::MatMul, &[causal, shared_v])?;
    let mut state = ctx.op(OpKind::MatMul, &[kt, v])?;
    if let Some(past) = x.past {
        let shared_past = repeat_heads(ctx, past, d.q_heads)?;
        let from_past = ctx.op(OpKind::MatMul, &[q, shared_past])?;
        y = ctx.op(OpKind::Add, &[y, from_past])?;
        state = ctx.op(OpKind::Add, &[past, state])?;
    }
    Ok((merge_heads(ctx, y)?, state))
}

/// The recurrent rules, one token after the other; the outputs `[batch, 1, q_heads * d_v]` of
/// the tokens are joined along the sequence.
fn unrolled(ctx: &mut Ctx, rule: Rule, d: &Dims, x: &Inputs) -> Result<(ValueId, ValueId), String> {
    if d.tokens > MAX_STEPS {
        return Err(format!(
            "update_rule \"{}\" over {} tokens is not supported (it is unrolled over at most {MAX_STEPS})",
            rule.name(),
            d.tokens
        ));
    }
    let mut state = x.past;
    let mut outputs = Vec::with_capacity(d.tokens);
    for t in 0..d.tokens {
        let token = Token::at(ctx, d, x, t)?;
        let next = token.update(ctx, state)?;
        outputs.push(token.read(ctx, d, next)?);
        state = Some(next);
    }
    let y = concat_values(ctx, outputs, 1)?;
    Ok((y, state.expect("a sequence of at least one token")))
}

/// One token's share of the inputs, shaped against the states `[batch, kv_heads, d_k, d_v]`.
struct Token {
    /// `[batch, kv_heads, group, d_k]`: the query heads that read each state.
    q: ValueId,
    /// `[batch, kv_heads, 1, d_k]`
    k_row: ValueId,
    /// `[batch, kv_heads, d_k, 1]`
    k_col: ValueId,
    /// `[batch, kv_heads, 1, d_v]`
    v: ValueId,
    /// `[batch, kv_heads, d_k or 1, 1]`: the factor of each state row.
    decay: Option<ValueId>,
    /// `[batch, kv_heads or 1, 1, 1]`
    beta: Option<ValueId>,
}

impl Token {
    fn at(ctx: &mut Ctx, d: &Dims, x: &Inputs, t: usize) -> Result<Token, String> {
        let (b, h) = (d.batch, d.kv_heads);
        let k = token_slice(ctx, x.k, t)?;
        // a decay per head or per key row; a β per head or one for all
        let decay = x.decay.map(|g| token_as(ctx, g, t, |n| [b, h, n / h, 1])).transpose()?;
        let beta = x
            .beta
            .map(|beta| token_as(ctx, beta, t, |n| [b, n, 1, 1]))
            .transpose()?;
        let q = token_slice(ctx, x.q, t)?;
        let v = token_slice(ctx, x.v, t)?;
        Ok(Token {
            q: reshape(ctx, q, &[b, h, d.group(), d.d_k])?,
            k_row: reshape(ctx, k, &[b, h, 1, d.d_k])?,
            k_col: reshape(ctx, k, &[b, h, d.d_k, 1])?,
            v: reshape(ctx, v, &[b, h, 1, d.d_v])?,
            decay,
            beta,
        })
    }

    /// The state after this token (`None` before it stands for zeros).
    fn update(&self, ctx: &mut Ctx, state: Option<ValueId>) -> Result<ValueId, String> {
        let decayed = match (state, self.decay) {
            (Some(s), Some(g)) => Some(ctx.op(OpKind::Mul, &[s, g])?),
            (s, _) => s,
        };
        // the delta rules (the ones with a β) write what the decayed state misses of v
        let written = match (self.beta, decayed) {
            (Some(beta), Some(s)) => {
                let recalled = ctx.op(OpKind::MatMul, &[self.k_row, s])?;
                let missed = ctx.op(OpKind::Sub, &[self.v, recalled])?;
                ctx.op(OpKind::Mul, &[beta, missed])?
            }
            (Some(beta), None) => ctx.op(OpKind::Mul, &[beta, self.v])?,
            (None, _) => self.v,
        };
        let outer = ctx.op(OpKind::Mul, &[self.k_col, written])?;
        match decayed {
            Some(s) => ctx.op(OpKind::Add, &[s, outer]),
            None => Ok(outer),
        }
    }

    /// The token's output `[batch, 1, q_heads * d_v]`: each query head's (scaled) query times
    /// the state it reads.
    fn read(&self, ctx: &mut Ctx, d: &Dims, state: ValueId) -> Result<ValueId, String> {
        let y = ctx.op(OpKind::MatMul, &[self.q, state])?;
        reshape(ctx, y, &[d.batch, 1, d.q_heads * d.d_v])
    }
}

/// Token `t` of a per-token input `[batch, tokens, n]`, reshaped to `shape(n)`.
fn token_as(ctx: &mut Ctx, x: ValueId, t: usize, shape: impl Fn(usize) -> [usize; 4]) -> Result<ValueId, String> {
    let n = ctx.ty(x).shape[2];
    let slice = token_slice(ctx, x, t)?;
    reshape(ctx, slice, &shape(n))
}

/// Token `t` of a packed `[batch, tokens, n]` tensor: `[batch, 1, n]`.
fn token_slice(ctx: &mut Ctx, x: ValueId, t: usize) -> Result<ValueId, String> {
    let t = t as i64;
    let one = DimSlice {
        start: t,
        end: t + 1,
        step: 1,
    };
    slice_value(ctx, x, &[(1, one)])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::AttributeProto;
    use super::super::super::testutil::*;

    /// A LinearAttention node over `tokens` tokens of 4 query heads sharing 2 key/value heads
    /// (`d_k` 3, `d_v` 2) under `rule`, with the given inputs (`q`, `k`, `v`, `past`, a decay
    /// per head `g`, a β for all heads `beta`) and further attributes.
    fn model(tokens: i64, rule: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> ModelBuilder {
        let mut all = vec![
            int_attr("q_num_heads", 4),
            int_attr("kv_num_heads", 2),
            str_attr("update_rule", rule),
        ];
        all.extend(attrs);
        ModelBuilder::new(27)
            .input("q", DataType::Float16, &[1, tokens, 12])
            .input("k", DataType::Float16, &[1, tokens, 6])
            .input("v", DataType::Float16, &[1, tokens, 4])
            .input("past", DataType::Float, &[1, 2, 3, 2])
            .input("g", DataType::Float16, &[1, tokens, 2])
            .input("beta", DataType::Float16, &[1, tokens, 1])
            .node(node("LinearAttention", inputs, &["y", "state"], all))
            .output("y")
            .output("state")
    }

    #[test]
    fn the_linear_rule_is_a_causal_product_over_the_whole_sequence() {
        let text = model(3, "linear", &["q", "k", "v", "past"], vec![]).text();
        for want in [
            // the scaled query, split into heads; keys and values repeated for them
            "tensor<1x4x3x3xf32>",
            "{shape = [1, 2, 2, 3, 3]}",
            "mx.where",
            // the output in the query's type, the state in the past state's
            ": tensor<1x3x8xf16>",
            ": tensor<1x2x3x2xf32>",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        assert!(!text.contains("mx.concat"), "not unrolled: {text}");
    }

    #[test]
    fn the_recurrent_rules_are_unrolled_token_by_token() {
        let inputs = ["q", "k", "v", "", "g", "beta"];
        let text = model(3, "gated_delta", &inputs, vec![]).text();
        assert_eq!(text.matches("mx.exp").count(), 1, "{text}");
        // the first token writes into a zero state: nothing to recall from it
        assert_eq!(text.matches("mx.sub").count(), 2, "{text}");
        assert!(text.contains("{shape = [1, 2, 1, 1]}"), "a decay per head: {text}");
        assert!(text.contains("{shape = [1, 1, 1, 1]}"), "a β for all heads: {text}");
        assert!(text.contains("mx.concat"), "{text}");
        assert!(text.contains(": tensor<1x2x3x2xf16>"), "{text}");
    }

    #[test]
    fn long_sequences_are_unrolled_only_up_to_the_limit() {
        let err = model(1025, "gated", &["q", "k", "v", "", "g"], vec![]).error();
        assert!(
            err.ends_with("update_rule \"gated\" over 1025 tokens is not supported (it is unrolled over at most 1024)"),
            "{err}"
        );
        assert!(model(1025, "linear", &["q", "k", "v"], vec![]).import().is_ok());
    }

    #[test]
    fn unsupported_attribute_values_and_inputs_are_refused() {
        let err = model(2, "retention", &["q", "k", "v"], vec![]).error();
        assert!(
            err.ends_with("update_rule \"retention\" is not supported (linear, gated, delta or gated_delta)"),
            "{err}"
        );
        let err = model(2, "delta", &["q", "k", "v"], vec![]).error();
        assert!(err.ends_with("update_rule \"delta\" needs the input `beta`"), "{err}");
        let err = model(2, "linear", &["q", "k", "v", "", "g"], vec![]).error();
        assert!(err.ends_with("update_rule \"linear\" takes no input `decay`"), "{err}");
        let shared = |attrs| {
            ModelBuilder::new(27)
                .input("x", DataType::Float, &[1, 2, 4])
                .node(node("LinearAttention", &["x", "x", "x"], &["y"], attrs))
                .output("y")
        };
        let err = shared(vec![int_attr("q_num_heads", 4), int_attr("kv_num_heads", 3)]).error();
        assert!(err.contains("do not fit 4 query and 3 key/value heads"), "{err}");
        let err = shared(vec![int_attr("kv_num_heads", 1)]).error();
        assert!(err.ends_with("missing attribute `q_num_heads`"), "{err}");
    }
}
