"""One small model per case of the `com.microsoft` contrib ops that onnxruntime's
transformer optimiser writes into exported models (and its `SimplifiedLayerNormalization`,
which onnxruntime registers in the default domain), each a single node on random inputs,
with onnxruntime's outputs as the expected ones:

    OUT/<case>/model.onnx
    OUT/<case>/test_data_set_0/{input,output}_<i>.pb

Usage: microsoft_ops.py OUT_DIR
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper

from common import IR_VERSION, OPSET, PRODUCER, tensor_info, write_case

SEED = 2024
MS = "com.microsoft"
# batch, sequence, hidden: the [B, S, H] activations of a transformer layer
B, S, H = 2, 5, 16


class Case:
    """One node of `op` whose inputs are all graph inputs (an empty name skips an optional
    one) and whose outputs are all graph outputs (an empty name skips an optional one). An
    input is given as its value, or as a shape for standard normal f32 values."""

    def __init__(self, rng, op, inputs, outputs, domain=MS, **attrs):
        self.op, self.domain, self.attrs = op, domain, attrs
        self.outputs = outputs
        self.feeds = {
            name: value
            if isinstance(value, np.ndarray)
            else rng.normal(0.0, 1.0, value).astype(np.float32)
            for name, value in inputs
            if name
        }
        self.inputs = [name for name, _ in inputs]

    def info(self, name):
        value = self.feeds[name]
        return tensor_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)

    def model(self):
        node = helper.make_node(
            self.op,
            self.inputs,
            self.outputs,
            domain=self.domain,
            **self.attrs,
        )
        graph = helper.make_graph(
            [node],
            self.op,
            [self.info(n) for n in self.inputs if n],
            [
                tensor_info(n, OUTPUT_TYPES.get(n, TensorProto.FLOAT), None)
                for n in self.outputs
                if n
            ],
        )
        return helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)],
            ir_version=IR_VERSION,
            producer_name=PRODUCER,
        )


X = ("x", [B, S, H])
SKIP = ("skip", [B, S, H])
GAMMA = ("gamma", [H])
BETA = ("beta", [H])
BIAS = ("bias", [H])
NONE = ("", None)
# the outputs that are not f32
OUTPUT_TYPES = {"mask_index": TensorProto.INT32}
MAX_POSITIONS = 12
VOCAB = 30


def rope_caches(rotated):
    """The cos and sin caches of RoPE over `rotated` entries per head:
    [MAX_POSITIONS, rotated / 2] each."""
    freq = 10000.0 ** (-np.arange(0, rotated, 2) / rotated)
    angles = np.outer(np.arange(MAX_POSITIONS), freq)
    return [("cos", np.cos(angles).astype(np.float32)), ("sin", np.sin(angles).astype(np.float32))]


def cases(rng):
    def c(*args, **attrs):
        return Case(rng, *args, **attrs)

    def ids(n):
        """[B, S] i32 indices below n."""
        return rng.integers(0, n, (B, S)).astype(np.int32)

    def weights(*shape):
        """Projection weights small enough that the softmax is not saturated."""
        return rng.normal(0.0, 0.3, shape).astype(np.float32)

    def i32(values):
        return np.array(values, np.int32)

    L = 7  # key/value length of the cross attention
    return {
        "bias_gelu": c("BiasGelu", [X, BIAS], ["y"]),
        "fast_gelu": c("FastGelu", [X], ["y"]),
        "fast_gelu_bias": c("FastGelu", [X, BIAS], ["y"]),
        "quick_gelu": c("QuickGelu", [X], ["y"]),
        "quick_gelu_alpha": c("QuickGelu", [X], ["y"], alpha=1.5),
        "gelu": c("Gelu", [X], ["y"]),
        "fused_matmul": c("FusedMatMul", [("a", [B, S, H]), ("b", [H, 8])], ["y"], alpha=0.5),
        "fused_matmul_trans": c(
            "FusedMatMul",
            [("a", [3, H, S]), ("b", [3, 8, H])],
            ["y"],
            transA=1,
            transB=1,
            alpha=2.0,
        ),
        "skip_layer_norm": c("SkipLayerNormalization", [X, SKIP, GAMMA], ["y"], epsilon=1e-5),
        "skip_layer_norm_all": c(
            "SkipLayerNormalization",
            [X, SKIP, GAMMA, BETA, BIAS],
            ["y", "mean", "inv_std_var", "sum"],
            epsilon=1e-6,
        ),
        "skip_layer_norm_sum": c(
            "SkipLayerNormalization", [X, SKIP, GAMMA, NONE, BIAS], ["y", "", "", "sum"]
        ),
        "skip_simplified_layer_norm": c(
            "SkipSimplifiedLayerNormalization",
            [X, SKIP, GAMMA, BIAS],
            ["y", "", "inv_std_var", "sum"],
            epsilon=1e-6,
        ),
        "rotary_3d": c(
            "RotaryEmbedding",
            [X, ("position_ids", rng.integers(0, MAX_POSITIONS, (B, S)))] + rope_caches(8),
            ["y"],
            num_heads=2,
        ),
        # no num_heads: the head size is twice the caches' width
        "rotary_offset_interleaved": c(
            "RotaryEmbedding",
            [X, ("position_ids", np.array([3]))] + rope_caches(4),
            ["y"],
            interleaved=1,
        ),
        "rotary_4d_partial": c(
            "RotaryEmbedding",
            [("x", [B, 2, S, 8]), ("position_ids", rng.integers(0, MAX_POSITIONS, (B, S)))]
            + rope_caches(4),
            ["y"],
            num_heads=2,
            rotary_embedding_dim=4,
        ),
        "embed_layer_norm": c(
            "EmbedLayerNormalization",
            [
                ("input_ids", ids(VOCAB)),
                ("segment_ids", ids(2)),
                ("word_embedding", [VOCAB, H]),
                ("position_embedding", [MAX_POSITIONS, H]),
                ("segment_embedding", [2, H]),
                GAMMA,
                BETA,
                # the second row has a hole: onnxruntime counts its ones
                ("mask", np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 0]], np.int32)),
            ],
            ["y", "mask_index", "sum"],
        ),
        "embed_layer_norm_positions": c(
            "EmbedLayerNormalization",
            [
                ("input_ids", ids(VOCAB)),
                NONE,
                ("word_embedding", [VOCAB, H]),
                ("position_embedding", [MAX_POSITIONS, H]),
                NONE,
                GAMMA,
                BETA,
                NONE,
                ("position_ids", ids(MAX_POSITIONS)),
            ],
            ["y", "mask_index"],
            epsilon=1e-5,
        ),
        "attention_raw_mask": c(
            "Attention",
            [X, ("weights", weights(H, 3 * H)), ("bias", weights(3 * H)),
             ("mask_index", i32([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]]))],
            ["y"],
            num_heads=2,
        ),
        "attention_lengths_causal": c(
            "Attention",
            [X, ("weights", weights(H, 3 * H)), ("bias", weights(3 * H)),
             ("mask_index", i32([5, 3]))],
            ["y"],
            num_heads=4,
            unidirectional=1,
        ),
        # ends then starts (left padding); V narrower than Q and K
        "attention_start_end": c(
            "Attention",
            [X, ("weights", weights(H, 2 * H + 8)), NONE, ("mask_index", i32([5, 4, 0, 2]))],
            ["y"],
            num_heads=2,
            qkv_hidden_sizes=[H, H, 8],
            scale=0.3,
        ),
        "attention_3d_mask_bias": c(
            "Attention",
            [X, ("weights", weights(H, 3 * H)), ("bias", weights(3 * H)),
             ("mask_index", rng.integers(0, 2, (B, S, S)).astype(np.int32)), NONE,
             ("attention_bias", [1, 2, S, S])],
            ["y"],
            num_heads=2,
            mask_filter_value=-1000.0,
        ),
        "multi_head_attention_cross": c(
            "MultiHeadAttention",
            [X, ("key", [B, L, H]), ("value", [B, L, 8]), ("bias", weights(2 * H + 8)),
             ("key_padding_mask", i32([[1] * L, [1, 1, 1, 1, 0, 0, 0]]))],
            ["y"],
            num_heads=2,
        ),
        "multi_head_attention_causal": c(
            "MultiHeadAttention",
            [X, ("key", [B, S, H]), ("value", [B, S, H]), NONE, NONE,
             ("attention_bias", [B, 1, S, S])],
            ["y"],
            num_heads=4,
            unidirectional=1,
            scale=0.2,
        ),
        "simplified_layer_norm": c(
            "SimplifiedLayerNormalization",
            [X, GAMMA],
            ["y", "inv_std_var"],
            domain="",
            axis=-1,
            epsilon=1e-5,
        ),
    }


def main(out_dir):
    rng = np.random.default_rng(SEED)
    for name, case in cases(rng).items():
        outputs = write_case(case.model(), case.feeds, os.path.join(out_dir, name))
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in outputs.items())
        print(f"{name}: {case.op} -> {shapes}")


if __name__ == "__main__":
    main(sys.argv[1])
