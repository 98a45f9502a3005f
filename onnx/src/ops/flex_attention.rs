//! `FlexAttention` (domain `ai.onnx.preview`, version 1), decomposed into mx ops as its
//! definition computes it: the scores `q · kᵀ * scale` (with `Attention`'s grouped-query heads
//! and Q and K each scaled by the square root of the scale), cast to `softmax_precision` (f32 by
//! default for 16-bit inputs), then `score_mod`, the softmax over the keys, `prob_mod`, and the
//! product with V in that precision, cast back to the input type. The modifiers are subgraphs
//! of one tensor input; each is imported in place on the scores or probabilities (all shapes
//! being static, their shape arithmetic folds to constants).

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::attention::{repeat_heads, scale, scaled_product, softmax_precision};
use mxc_dialects::{Attr, Attrs, DType, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    // a later version of a preview op may change its meaning
    r.add("ai.onnx.preview", "FlexAttention", 1, 1, flex_attention);
}

fn flex_attention(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let dtype = check_operands(ctx, q, k, v)?;
    let scale = scale(&ctx.node)?;
    let precision = softmax_precision(&ctx.node)?.unwrap_or(match dtype {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    });
    let product = scaled_product(ctx, q, k, scale)?;
    let scores = ctx.cast(product, precision)?;
    let scores = modified(ctx, "score_mod", scores)?;
    let probs = ctx.build1(OpKind::Softmax, vec![scores], Attrs::new().with("axis", Attr::Int(3)))?;
    let probs = modified(ctx, "prob_mod", probs)?;
    let q_heads = ctx.ty(q).shape[1];
    let v = repeat_heads(ctx, v, q_heads)?;
    let v = ctx.cast(v, precision)?;
    let y = ctx.op(OpKind::MatMul, &[probs, v])?;
    Ok(vec![ctx.cast(y, dtype)?])
}

/// Checks that Q, K and V are `[batch, q_heads, queries, depth]`, `[batch, kv_heads, keys,
/// depth]` and `[batch, kv_heads, keys, v_depth]` of one float type, which is returned.
fn check_operands(ctx: &Ctx, q: ValueId, k: ValueId, v: ValueId) -> Result<DType, String> {
    let [qt, kt, vt] = [q, k, v].map(|x| ctx.ty(x));
    let fits = match (&qt.shape[..], &kt.shape[..], &vt.shape[..]) {
        (&[b, _, _, e], &[bk, hk, s, ek], &[bv, hv, sv, _]) => [bk, bv] == [b, b] && hv == hk && sv == s && ek == e,
        _ => false,
    };
    if !fits || !qt.dtype.is_float() || kt.dtype != qt.dtype || vt.dtype != qt.dtype {
        return Err(format!(
            "Q, K and V of types {qt}, {kt} and {vt} do not fit together (one float type; Q [batch, \
             q_heads, queries, depth], K [batch, kv_heads, keys, depth], V [batch, kv_heads, keys, v_depth])"
        ));
    }
    Ok(qt.dtype)
}

/// `x` passed through the modifier subgraph the attribute `name` holds, if the node has one:
/// a graph of one input and one output, of `x`'s type.
fn modified(ctx: &mut Ctx, name: &str, x: ValueId) -> Result<ValueId, String> {
    let Some(g) = ctx.node.graph(name)? else {
        return Ok(x);
    };
    if g.input.len() != 1 || g.output.len() != 1 {
        return Err(format!(
            "{name} must have one input and one output, its graph has {} and {}",
            g.input.len(),
            g.output.len()
        ));
    }
    let y = ctx.apply_subgraph(g, &[x])?[0];
    if ctx.ty(y) != ctx.ty(x) {
        return Err(format!(
            "{name} must keep the type {} of its input, it gives {}",
            ctx.ty(x),
            ctx.ty(y)
        ));
    }
    Ok(y)
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::attribute_proto::AttributeType;
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::{
        AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, ValueInfoProto,
    };
    use super::super::super::testutil::*;
    use super::super::super::{import_bytes, ImportOptions};
    use prost::Message;

    /// A modifier attribute `name`: a graph from `x` (declared `[1, 4, 3, 5]` f32, the scores'
    /// type in `flex`) to the output of `nodes`' last node.
    fn modifier(name: &str, nodes: Vec<NodeProto>, inits: Vec<TensorProto>) -> AttributeProto {
        let out = nodes.last().unwrap().output[0].clone();
        let g = GraphProto {
            name: Some(name.into()),
            input: vec![value_info("x", DataType::Float, &[1, 4, 3, -1])],
            node: nodes,
            initializer: inits,
            output: vec![ValueInfoProto {
                name: Some(out),
                ..Default::default()
            }],
            ..Default::default()
        };
        graph_attr(name, g)
    }

    /// A FlexAttention node on Q `[1, 4, 3, 8]` and K, V `[1, 2, 5, 8]` (two query heads per
    /// key/value head) of `ty`, with `attrs`, imported and printed (or the import error).
    fn flex(ty: DataType, attrs: Vec<AttributeProto>) -> Result<String, String> {
        let mut n = node("FlexAttention", &["q", "k", "v"], &["y"], attrs);
        n.domain = Some("ai.onnx.preview".into());
        let graph = ModelBuilder::new(26)
            .input("q", ty, &[1, 4, 3, 8])
            .input("k", ty, &[1, 2, 5, 8])
            .input("v", ty, &[1, 2, 5, 8])
            .node(n)
            .output("y")
            .graph;
        let opset = |domain: &str, version| OperatorSetIdProto {
            domain: Some(domain.into()),
            version: Some(version),
        };
        let model = ModelProto {
            ir_version: Some(10),
            opset_import: vec![opset("", 26), opset("ai.onnx.preview", 1)],
            graph: Some(graph),
            ..Default::default()
        };
        import_bytes(&model.encode_to_vec(), None, &ImportOptions::default())
            .map(|g| mxc_dialects::text::print(&g))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn sixteen_bit_inputs_are_attended_in_f32_over_shared_heads() {
        let text = flex(DataType::Float16, vec![]).unwrap();
        for want in [
            "{shape = [1, 2, 2, 5, 8]}",
            "mx.softmax",
            "tensor<1x4x3x5xf32>",
            "tensor<1x4x5x8xf32>",
            ": tensor<1x4x3x8xf16>",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
    }

    #[test]
    fn modifiers_are_imported_on_the_scores_and_probabilities() {
        let causal = modifier(
            "score_mod",
            vec![
                node("Shape", &["x"], &["shape"], vec![]),
                node("Gather", &["shape", "three"], &["keys"], vec![int_attr("axis", 0)]),
                node("Range", &["zero", "keys", "one"], &["key"], vec![]),
                node("Less", &["two", "key"], &["later"], vec![]),
                node("Where", &["later", "lowest", "x"], &["masked"], vec![]),
            ],
            vec![
                i64_tensor("zero", &[], &[0]),
                i64_tensor("one", &[], &[1]),
                i64_tensor("two", &[], &[2]),
                i64_tensor("three", &[], &[3]),
                f32_tensor("lowest", &[], &[f32::NEG_INFINITY]),
            ],
        );
        let halve = modifier(
            "prob_mod",
            vec![node("Mul", &["x", "half"], &["halved"], vec![])],
            vec![f32_tensor("half", &[], &[0.5])],
        );
        let text = flex(DataType::Float, vec![causal, halve]).unwrap();
        // the key mask folded to a constant `[5]` (keys past 2 hidden), then the softmax, then
        // the halving
        let mask = text.find("mx.where").expect(&text);
        let softmax = text.find("mx.softmax").expect(&text);
        let halving = text[softmax..].find("mx.mul").expect(&text);
        assert!(mask < softmax && halving > 0, "{text}");
        assert!(text.contains("dense<[0, 0, 0, 1, 1]> : tensor<5xbool>"), "{text}");
        assert!(!text.contains("mx.gather"), "{text}");
    }

    #[test]
    fn unsupported_attribute_values_and_modifiers_are_refused() {
        let err = flex(
            DataType::Float,
            vec![int_attr("softmax_precision", DataType::Int32 as i64)],
        )
        .unwrap_err();
        assert!(
            err.ends_with("softmax_precision 6 is not supported (a float type)"),
            "{err}"
        );
        let mut scale = int_attr("scale", 0);
        (scale.r#type, scale.i, scale.f) = (Some(AttributeType::Float as i32), None, Some(-1.0));
        let err = flex(DataType::Float, vec![scale]).unwrap_err();
        assert!(err.contains("scale -1 is not supported"), "{err}");
        let summed = modifier("score_mod", vec![node("ReduceSum", &["x"], &["sum"], vec![])], vec![]);
        let err = flex(DataType::Float, vec![summed]).unwrap_err();
        assert!(
            err.ends_with(
                "score_mod must keep the type tensor<1x4x3x5xf32> of its input, it gives tensor<1x1x1x1xf32>"
            ),
            "{err}"
        );
        let mut two_inputs = modifier("prob_mod", vec![node("Relu", &["x"], &["r"], vec![])], vec![]);
        let g = two_inputs.g.as_mut().unwrap();
        g.input.push(g.input[0].clone());
        let err = flex(DataType::Float, vec![two_inputs]).unwrap_err();
        assert!(
            err.ends_with("prob_mod must have one input and one output, its graph has 2 and 1"),
            "{err}"
        );
        let mut wrong_type = modifier("score_mod", vec![node("Relu", &["x"], &["r"], vec![])], vec![]);
        wrong_type.g.as_mut().unwrap().input[0] = value_info("x", DataType::Double, &[1, 4, 3, 5]);
        let err = flex(DataType::Float, vec![wrong_type]).unwrap_err();
        assert!(err.contains("in subgraph \"score_mod\""), "{err}");
    }
}
