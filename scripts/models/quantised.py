"""Quantised models made with onnxruntime's own tools, as a user quantises a model, each with
one test data set whose expected outputs come from onnxruntime:

    OUT/qdq     the convnet (convnet.py) quantised statically: QDQ, per-channel s8 weights,
                u8 activations, 4 seeded calibration inputs (quantize_static)
    OUT/dynq    a two-layer perceptron f32[8,64] -> 96 -> 48 quantised dynamically:
                DynamicQuantizeLinear + MatMulInteger, s8 weights (quantize_dynamic)
    OUT/join    a ResNet bottleneck whose shortcut is a convolution too (the first block of a
                stage): f32[1,64,16,16] -> 1x1 (32) -> 3x3 (32) -> 1x1 (64), plus a 1x1 (64)
                of the input, added; quantised statically as OUT/qdq is

Usage: quantised.py OUT_DIR
"""

import os
import sys
import tempfile

import numpy as np
import onnx

from common import GraphBuilder, TensorProto, make_model, tensor_info, write_case
from convnet import SEED, ConvNet


def perceptron(rng):
    b = GraphBuilder()
    w1 = rng.normal(0.0, 0.15, (64, 96)).astype(np.float32)
    b1 = rng.normal(0.0, 0.05, 96).astype(np.float32)
    w2 = rng.normal(0.0, 0.15, (96, 48)).astype(np.float32)
    y = b.op("MatMul", ["input", b.weight("fc1.weight", w1)])
    y = b.op("Add", [y, b.weight("fc1.bias", b1)])
    y = b.op("Relu", [y])
    y = b.op("MatMul", [y, b.weight("fc2.weight", w2)])
    b.nodes[-1].output[0] = "output"
    graph = b.graph(
        "perceptron",
        [tensor_info("input", TensorProto.FLOAT, [8, 64])],
        [tensor_info("output", TensorProto.FLOAT, [8, 48])],
    )
    return make_model(graph)


def bottleneck(rng):
    b = GraphBuilder()

    def conv(x, name, cin, cout, k):
        w = rng.normal(0.0, (2.0 / (cin * k * k)) ** 0.5, (cout, cin, k, k)).astype(np.float32)
        bias = rng.normal(0.0, 0.05, cout).astype(np.float32)
        return b.op("Conv", [x, b.weight(f"{name}.weight", w), b.weight(f"{name}.bias", bias)],
                    kernel_shape=[k, k], pads=[k // 2] * 4)

    y = b.op("Relu", [conv("input", "conv1", 64, 32, 1)])
    y = b.op("Relu", [conv(y, "conv2", 32, 32, 3)])
    y = conv(y, "conv3", 32, 64, 1)
    y = b.op("Add", [y, conv("input", "downsample", 64, 64, 1)])
    y = b.op("Relu", [y])
    b.nodes[-1].output[0] = "output"
    graph = b.graph(
        "bottleneck",
        [tensor_info("input", TensorProto.FLOAT, [1, 64, 16, 16])],
        [tensor_info("output", TensorProto.FLOAT, [1, 64, 16, 16])],
    )
    return make_model(graph)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)

    out = sys.argv[1]
    rng = np.random.default_rng(SEED)
    convnet = ConvNet(rng).build()
    samples = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(5)]

    class Calibration(CalibrationDataReader):
        def __init__(self, samples):
            self.samples = iter({"input": s} for s in samples)

        def get_next(self):
            return next(self.samples, None)

    with tempfile.TemporaryDirectory() as tmp:
        source, target = os.path.join(tmp, "f32.onnx"), os.path.join(tmp, "q.onnx")
        onnx.save_model(convnet, source)
        static = dict(quant_format=QuantFormat.QDQ, per_channel=True,
                      activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        quantize_static(source, target, Calibration(samples[1:]), **static)
        write_case(onnx.load(target), {"input": samples[0]}, os.path.join(out, "qdq"))

        onnx.save_model(bottleneck(rng), source)
        images = [rng.standard_normal((1, 64, 16, 16)).astype(np.float32) for _ in range(5)]
        quantize_static(source, target, Calibration(images[1:]), **static)
        write_case(onnx.load(target), {"input": images[0]}, os.path.join(out, "join"))

        onnx.save_model(perceptron(rng), source)
        quantize_dynamic(source, target, weight_type=QuantType.QInt8)
        feeds = {"input": rng.standard_normal((8, 64)).astype(np.float32)}
        write_case(onnx.load(target), feeds, os.path.join(out, "dynq"))
    print(f"quantised: {out}/qdq (QDQ convnet), {out}/dynq (dynamically quantised perceptron), "
          f"{out}/join (QDQ bottleneck)")


if __name__ == "__main__":
    main()
