"""A BERT-style encoder, written node by node the way the PyTorch (TorchScript)
exporter emits one, with one test data set.

    input_ids i64[1,16], attention_mask i64[1,16] (last 4 positions 0)
    embeddings: Gather(word) + Gather(position, ids sliced from a [1,512] range)
                + token-type row 0, then LayerNormalization (the ONNX op)
    2 layers, hidden 64, 4 heads of 16, intermediate 256:
        Q/K/V MatMul+Add, Reshape to [1,16,4,16] with the target shape built
        from Shape/Gather/Unsqueeze/Concat, Transpose, MatMul, Div by sqrt(16),
        + extended mask, Softmax, MatMul, Transpose, Reshape to [1,16,64],
        output projection, residual, LayerNorm (decomposed: ReduceMean, Sub,
        Pow, ReduceMean, Add, Sqrt, Div, Mul, Add);
        FFN MatMul+Add, GELU as x*0.5*(1+Erf(x/sqrt(2))), MatMul+Add,
        residual, LayerNorm (decomposed)
    -> last_hidden_state f32[1,16,64]

The extended attention mask is built twice, in the two forms exporters emit:
(1 - Cast(Unsqueeze(Unsqueeze(mask)))) * -10000 for layer 0, and
Where(Equal(mask, 0), -10000, 0) for layer 1. Expected outputs come from
onnxruntime.

Usage: encoder.py OUT_DIR
"""

import sys

import numpy as np

from common import GraphBuilder, TensorProto, make_model, summary, tensor_info, write_case

SEED = 4321
LAYERS = 2
HIDDEN = 64
HEADS = 4
HEAD_SIZE = HIDDEN // HEADS
INTERMEDIATE = 256
SEQ = 16
VOCAB = 100
MAX_POSITIONS = 512
TYPE_VOCAB = 2
MASKED_TAIL = 4
EPS = 1e-12
STD = 0.05


class Encoder:
    def __init__(self, rng):
        self.rng = rng
        self.b = GraphBuilder()

    def param(self, name, shape):
        return self.b.weight(name, self.rng.normal(0.0, STD, shape).astype(np.float32))

    def ln_params(self, prefix):
        gamma = (1.0 + self.rng.normal(0.0, STD, HIDDEN)).astype(np.float32)
        return self.b.weight(f"{prefix}.weight", gamma), self.param(f"{prefix}.bias", HIDDEN)

    def linear(self, x, prefix, n_in, n_out, bias_first=False):
        """nn.Linear on a 3-D input: MatMul with the transposed weight, then Add."""
        b = self.b
        y = b.op("MatMul", [x, self.param(f"{prefix}.weight.T", (n_in, n_out))])
        bias = self.param(f"{prefix}.bias", n_out)
        return b.op("Add", [bias, y] if bias_first else [y, bias])

    def layer_norm_decomposed(self, x, prefix):
        b = self.b
        gamma, beta = self.ln_params(prefix)
        with b.scope("LayerNorm"):
            mean = b.op("ReduceMean", [x], axes=[-1], keepdims=1)
            d = b.op("Sub", [x, mean])
            sq = b.op("Pow", [d, b.const(2.0)])
            var = b.op("ReduceMean", [sq], axes=[-1], keepdims=1)
            var = b.op("Add", [var, b.const(EPS)])
            std = b.op("Sqrt", [var])
            y = b.op("Div", [d, std])
            y = b.op("Mul", [y, gamma])
            return b.op("Add", [y, beta])

    def dims(self, x, indices):
        """[x.shape[i] for i in indices], each as a 1-element i64 tensor, exporter style:
        Shape -> Gather(scalar index) -> Unsqueeze(axes=[0])."""
        b = self.b
        out = []
        for i in indices:
            shape = b.op("Shape", [x])
            d = b.op("Gather", [shape, b.const_i64(i)], axis=0)
            out.append(b.op("Unsqueeze", [d, b.const_i64([0])]))
        return out

    def split_heads(self, x, perm):
        """[1,S,H] -> Reshape [1,S,heads,head] -> Transpose(perm)."""
        b = self.b
        n, s = self.dims(x, [0, 1])
        shape = b.op("Concat", [n, s, b.const_i64([HEADS]), b.const_i64([HEAD_SIZE])], axis=0)
        y = b.op("Reshape", [x, shape])
        return b.op("Transpose", [y], perm=perm)

    def attention(self, h, prefix, mask):
        b = self.b
        with b.scope("attention"):
            with b.scope("self"):
                q = self.linear(h, f"{prefix}.attention.self.query", HIDDEN, HIDDEN, bias_first=True)
                k = self.linear(h, f"{prefix}.attention.self.key", HIDDEN, HIDDEN, bias_first=True)
                v = self.linear(h, f"{prefix}.attention.self.value", HIDDEN, HIDDEN, bias_first=True)
                q = self.split_heads(q, [0, 2, 1, 3])   # [1,4,16,16]
                kt = self.split_heads(k, [0, 2, 3, 1])  # [1,4,16(head),16(seq)]
                v = self.split_heads(v, [0, 2, 1, 3])
                scores = b.op("MatMul", [q, kt])
                scores = b.op("Div", [scores, b.const(np.sqrt(HEAD_SIZE))])
                scores = b.op("Add", [scores, mask])
                probs = b.op("Softmax", [scores], axis=-1)
                ctx = b.op("MatMul", [probs, v])
                ctx = b.op("Transpose", [ctx], perm=[0, 2, 1, 3])
                n, s = self.dims(ctx, [0, 1])
                shape = b.op("Concat", [n, s, b.const_i64([HIDDEN])], axis=0)
                ctx = b.op("Reshape", [ctx, shape])
            with b.scope("output"):
                y = self.linear(ctx, f"{prefix}.attention.output.dense", HIDDEN, HIDDEN)
                y = b.op("Add", [y, h])
                return self.layer_norm_decomposed(y, f"{prefix}.attention.output.LayerNorm")

    def feed_forward(self, h, prefix):
        b = self.b
        with b.scope("intermediate"):
            x = self.linear(h, f"{prefix}.intermediate.dense", HIDDEN, INTERMEDIATE)
            with b.scope("intermediate_act_fn"):
                e = b.op("Div", [x, b.const(np.sqrt(2.0))])
                e = b.op("Erf", [e])
                e = b.op("Add", [e, b.const(1.0)])
                x = b.op("Mul", [x, b.const(0.5)])
                x = b.op("Mul", [x, e])
        with b.scope("output"):
            y = self.linear(x, f"{prefix}.output.dense", INTERMEDIATE, HIDDEN)
            y = b.op("Add", [y, h])
            return self.layer_norm_decomposed(y, f"{prefix}.output.LayerNorm")

    def embeddings(self):
        b = self.b
        with b.scope("embeddings"):
            words = b.op("Gather", [self.param("embeddings.word_embeddings.weight", (VOCAB, HIDDEN)),
                                    "input_ids"], axis=0)
            # position_ids = self.position_ids[:, :seq_length], where seq_length
            # comes from input_ids.size(1): Shape -> Slice -> Squeeze -> Unsqueeze.
            shape = b.op("Shape", ["input_ids"])
            seq = b.op("Slice", [shape, b.const_i64([1]), b.const_i64([2]), b.const_i64([0])])
            seq = b.op("Squeeze", [seq, b.const_i64([0])])
            end = b.op("Unsqueeze", [seq, b.const_i64([0])])
            position_ids = b.weight("embeddings.position_ids",
                                    np.arange(MAX_POSITIONS, dtype=np.int64).reshape(1, MAX_POSITIONS))
            pos_ids = b.op("Slice", [position_ids, b.const_i64([0]), end,
                                     b.const_i64([1]), b.const_i64([1])])
            pos = b.op("Gather", [self.param("embeddings.position_embeddings.weight",
                                             (MAX_POSITIONS, HIDDEN)), pos_ids], axis=0)
            # All token types are 0: one row of the table, broadcast over the sequence.
            token_type = b.op("Gather", [self.param("embeddings.token_type_embeddings.weight",
                                                    (TYPE_VOCAB, HIDDEN)), b.const_i64(0)], axis=0)
            x = b.op("Add", [words, pos])
            x = b.op("Add", [x, token_type])
            gamma, beta = self.ln_params("embeddings.LayerNorm")
            with b.scope("LayerNorm"):
                return b.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=EPS)

    def masks(self):
        """The [1,1,1,S] additive masks: arithmetic form and Where form."""
        b = self.b
        m = b.op("Unsqueeze", ["attention_mask", b.const_i64([1])])
        m = b.op("Unsqueeze", [m, b.const_i64([2])])
        f = b.op("Cast", [m], to=TensorProto.FLOAT)
        inv = b.op("Sub", [b.const(1.0), f])
        arith = b.op("Mul", [inv, b.const(-10000.0)])

        masked = b.op("Equal", [m, b.const_i64(0)])
        where = b.op("Where", [masked, b.const(-10000.0), b.const(0.0)])
        return [arith, where]

    def build(self):
        b = self.b
        h = self.embeddings()
        masks = self.masks()
        with b.scope("encoder"):
            for i in range(LAYERS):
                with b.scope(f"layer.{i}"):
                    prefix = f"encoder.layer.{i}"
                    h = self.attention(h, prefix, masks[i % len(masks)])
                    h = self.feed_forward(h, prefix)
        b.nodes[-1].output[0] = "last_hidden_state"
        graph = b.graph(
            "encoder",
            [tensor_info("input_ids", TensorProto.INT64, [1, SEQ]),
             tensor_info("attention_mask", TensorProto.INT64, [1, SEQ])],
            [tensor_info("last_hidden_state", TensorProto.FLOAT, [1, SEQ, HIDDEN])],
        )
        return make_model(graph)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rng = np.random.default_rng(SEED)
    model = Encoder(rng).build()
    ids = rng.integers(1, VOCAB, (1, SEQ), dtype=np.int64)
    ids[0, 0] = 1  # a [CLS]-like first token
    ids[0, SEQ - MASKED_TAIL:] = 0  # padding
    mask = np.ones((1, SEQ), dtype=np.int64)
    mask[0, SEQ - MASKED_TAIL:] = 0
    outputs = write_case(model, {"input_ids": ids, "attention_mask": mask}, sys.argv[1])
    out = outputs["last_hidden_state"]
    assert out.shape == (1, SEQ, HIDDEN) and np.isfinite(out).all() and out.std() > 0.1
    print(summary(model, outputs))


if __name__ == "__main__":
    main()
