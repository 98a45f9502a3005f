//! The `com.microsoft` contrib ops that onnxruntime's transformer optimiser writes into
//! exported models, decomposed into mx ops following onnxruntime's contrib op definitions:
//! the GELU forms (`Gelu`, `BiasGelu`, `FastGelu`, `QuickGelu`), `FusedMatMul`, and the fused
//! residual normalisations `SkipLayerNormalization` and `SkipSimplifiedLayerNormalization`,
//! `EmbedLayerNormalization`, `RotaryEmbedding`, and `Attention` and `MultiHeadAttention`
//! without caches.
//! onnxruntime registers `SimplifiedLayerNormalization` (RMS normalisation returning the
//! inverse RMS too) in the default domain, so it is imported from there.

mod attention;
mod embed;
mod gelu;
mod matmul;
mod norm;
mod rotary;

use super::super::registry::{Registry, LATEST};

const MS: &str = "com.microsoft";

pub fn register(r: &mut Registry) {
    r.add(MS, "Gelu", 1, LATEST, |ctx| gelu::biased_gelu(ctx, "none"));
    r.add(MS, "BiasGelu", 1, LATEST, |ctx| {
        ctx.input(1)?; // the bias is required here
        gelu::biased_gelu(ctx, "none")
    });
    r.add(MS, "FastGelu", 1, LATEST, |ctx| gelu::biased_gelu(ctx, "tanh"));
    r.add(MS, "QuickGelu", 1, LATEST, gelu::quick_gelu);
    r.add(MS, "FusedMatMul", 1, LATEST, matmul::fused_matmul);
    r.add(MS, "SkipLayerNormalization", 1, LATEST, norm::skip_layer_norm);
    r.add(
        MS,
        "SkipSimplifiedLayerNormalization",
        1,
        LATEST,
        norm::skip_simplified_layer_norm,
    );
    r.add(MS, "Attention", 1, LATEST, attention::attention);
    r.add(MS, "MultiHeadAttention", 1, LATEST, attention::multi_head_attention);
    r.add(MS, "EmbedLayerNormalization", 1, LATEST, embed::embed_layer_norm);
    r.add(MS, "RotaryEmbedding", 1, LATEST, rotary::rotary_embedding);
    r.add(
        "",
        "SimplifiedLayerNormalization",
        1,
        LATEST,
        super::norm::simplified_layer_norm,
    );
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::{AttributeProto, NodeProto};
    use super::super::super::testutil::*;
    use super::MS;

    fn ms_node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            domain: Some(MS.into()),
            ..node(op, inputs, outputs, attrs)
        }
    }

    fn model(n: NodeProto) -> ModelBuilder {
        ModelBuilder::new(17)
            .domain(MS, 1)
            .input("a", DataType::Float, &[2, 3, 4])
            .input("b", DataType::Float, &[2, 3, 4])
            .input("g", DataType::Float, &[4])
            .node(n)
            .output("y")
    }

    #[test]
    fn bias_gelu_adds_then_applies_the_erf_form() {
        let text = model(ms_node("BiasGelu", &["a", "g"], &["y"], vec![])).text();
        assert!(text.contains("%0 = mx.add %arg0, %arg2"), "{text}");
        assert!(text.contains("mx.gelu %0 {approximate = \"none\"}"), "{text}");
    }

    #[test]
    fn fused_matmul_transposes_the_last_two_axes() {
        let text = model(ms_node("FusedMatMul", &["a", "b"], &["y"], vec![int_attr("transB", 1)])).text();
        assert!(text.contains("mx.transpose %arg1 {perm = [0, 2, 1]}"), "{text}");
        assert!(text.contains("mx.matmul %arg0, %0 : tensor<2x3x3xf32>"), "{text}");
    }

    #[test]
    fn skip_layer_norm_returns_the_residual_sum() {
        let text = model(ms_node(
            "SkipLayerNormalization",
            &["a", "b", "g"],
            &["y", "", "", "sum"],
            vec![],
        ))
        .output("sum")
        .text();
        assert!(text.contains("mx.layer_norm %0, %arg2 {axis = 2"), "{text}");
        assert!(text.contains("\"sum\" = %0"), "{text}");
    }

    #[test]
    fn batch_transposes_are_refused() {
        let m = model(ms_node(
            "FusedMatMul",
            &["a", "b"],
            &["y"],
            vec![int_attr("transBatchA", 1)],
        ));
        assert_eq!(
            m.error(),
            "node #0 (output \"y\") (FusedMatMul): transBatchA = 1 is not supported"
        );
    }

    #[test]
    fn the_mean_of_an_rms_normalisation_is_refused() {
        let m = model(ms_node(
            "SkipSimplifiedLayerNormalization",
            &["a", "b", "g"],
            &["y", "mean"],
            vec![],
        ));
        assert!(m.error().contains("the mean output is not supported"));
    }

    #[test]
    fn attention_caches_are_refused() {
        let m = ModelBuilder::new(17)
            .domain(MS, 1)
            .input("x", DataType::Float, &[1, 2, 4])
            .input("w", DataType::Float, &[4, 12])
            .input("past", DataType::Float, &[2, 1, 2, 1, 2])
            .node(ms_node(
                "Attention",
                &["x", "w", "", "", "past"],
                &["y"],
                vec![int_attr("num_heads", 2)],
            ))
            .output("y");
        assert_eq!(
            m.error(),
            "node #0 (output \"y\") (Attention): input `past` is not supported"
        );
    }
}
