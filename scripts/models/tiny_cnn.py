"""The small example model shipped in examples/tiny_cnn.onnx.

    image f32[1,3,8,8] -> Conv3x3(3->4, pad 1) -> Relu -> MaxPool(2, stride 2)
    -> GlobalAveragePool -> Flatten -> Gemm(transB=1) -> scores f32[1,3]

The output is deterministic (fixed seed), so the committed file only changes
when this script does.

Usage: tiny_cnn.py [OUT.onnx]   (default: examples/tiny_cnn.onnx in the repo)
"""

import os
import sys

import numpy as np
import onnx

from common import GraphBuilder, TensorProto, make_model, tensor_info

SEED = 7


def build():
    rng = np.random.default_rng(SEED)
    b = GraphBuilder()
    conv_w = rng.normal(0.0, np.sqrt(2.0 / 27), (4, 3, 3, 3)).astype(np.float32)
    conv_b = rng.normal(0.0, 0.1, 4).astype(np.float32)
    fc_w = rng.normal(0.0, 0.5, (3, 4)).astype(np.float32)
    fc_b = rng.normal(0.0, 0.1, 3).astype(np.float32)

    y = b.op("Conv", ["image", b.weight("conv.weight", conv_w), b.weight("conv.bias", conv_b)],
             kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    y = b.op("Relu", [y])
    y = b.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = b.op("GlobalAveragePool", [y])
    y = b.op("Flatten", [y], axis=1)
    b.op("Gemm", [y, b.weight("fc.weight", fc_w), b.weight("fc.bias", fc_b)], transB=1)
    b.nodes[-1].output[0] = "scores"
    graph = b.graph(
        "tiny_cnn",
        [tensor_info("image", TensorProto.FLOAT, [1, 3, 8, 8])],
        [tensor_info("scores", TensorProto.FLOAT, [1, 3])],
    )
    return make_model(graph)


def main():
    if len(sys.argv) > 2:
        sys.exit(__doc__)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = sys.argv[1] if len(sys.argv) == 2 else os.path.join(repo, "examples", "tiny_cnn.onnx")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    model = build()
    onnx.save_model(model, out)
    print(f"wrote {out} ({os.path.getsize(out)} bytes, {len(model.graph.node)} nodes)")


if __name__ == "__main__":
    main()
