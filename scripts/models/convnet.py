"""A ResNet-style CIFAR classifier (21 Conv layers) with one test data set.

    input f32[1,3,32,32]
    stem: Conv3x3(16, bias) - BatchNormalization - Relu - MaxPool(3, stride 1, pad 1)
    3 stages of 3 basic blocks, 16 / 32 / 64 channels:
        Conv3x3 - BN - Relu - Conv3x3 - BN, + shortcut, Relu
        the first block of stages 2 and 3 has stride 2 and a 1x1 stride-2
        projection (Conv - BN) on the shortcut
    GlobalAveragePool - Flatten - Gemm(transB=1) -> logits f32[1,10]

BatchNormalization nodes are kept, as an exporter in eval mode without
folding leaves them. Expected outputs come from onnxruntime.

Usage: convnet.py OUT_DIR
"""

import sys

import numpy as np

from common import GraphBuilder, TensorProto, make_model, summary, tensor_info, write_case

SEED = 1234
STAGES = (16, 32, 64)
BLOCKS_PER_STAGE = 3
CLASSES = 10


class ConvNet:
    def __init__(self, rng):
        self.rng = rng
        self.b = GraphBuilder()

    def conv(self, x, prefix, cin, cout, k, stride, bias=False):
        fan_in = cin * k * k
        w = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), (cout, cin, k, k)).astype(np.float32)
        inputs = [x, self.b.weight(f"{prefix}.weight", w)]
        if bias:
            inputs.append(self.b.weight(f"{prefix}.bias", self.rng.normal(0, 0.05, cout).astype(np.float32)))
        pad = k // 2
        return self.b.op(
            "Conv", inputs,
            kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4,
            dilations=[1, 1], group=1,
        )

    def bn(self, x, prefix, c, gamma_range=(0.8, 1.2)):
        r = self.rng
        scale = r.uniform(*gamma_range, c).astype(np.float32)
        bias = r.normal(0.0, 0.1, c).astype(np.float32)
        mean = r.normal(0.0, 0.1, c).astype(np.float32)
        var = r.uniform(0.5, 1.5, c).astype(np.float32)
        b = self.b
        return b.op(
            "BatchNormalization",
            [x, b.weight(f"{prefix}.weight", scale), b.weight(f"{prefix}.bias", bias),
             b.weight(f"{prefix}.running_mean", mean), b.weight(f"{prefix}.running_var", var)],
            epsilon=1e-5, momentum=0.9,
        )

    def block(self, x, name, cin, cout, stride):
        b = self.b
        with b.scope(name):
            y = self.conv(x, f"{name}.conv1", cin, cout, 3, stride)
            y = self.bn(y, f"{name}.bn1", cout)
            y = b.op("Relu", [y])
            y = self.conv(y, f"{name}.conv2", cout, cout, 3, 1)
            # A small gamma on the last BN of each residual branch (as with
            # zero-init-residual training) keeps activations O(1) down the net.
            y = self.bn(y, f"{name}.bn2", cout, gamma_range=(0.2, 0.5))
            shortcut = x
            if stride != 1 or cin != cout:
                with b.scope("downsample"):
                    shortcut = self.conv(x, f"{name}.downsample.0", cin, cout, 1, stride)
                    shortcut = self.bn(shortcut, f"{name}.downsample.1", cout)
            y = b.op("Add", [y, shortcut])
            return b.op("Relu", [y])

    def build(self):
        b = self.b
        x = "input"
        y = self.conv(x, "conv1", 3, STAGES[0], 3, 1, bias=True)
        y = self.bn(y, "bn1", STAGES[0])
        y = b.op("Relu", [y])
        y = b.op("MaxPool", [y], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
        cin = STAGES[0]
        for s, cout in enumerate(STAGES):
            for i in range(BLOCKS_PER_STAGE):
                stride = 2 if (s > 0 and i == 0) else 1
                y = self.block(y, f"layer{s + 1}.{i}", cin, cout, stride)
                cin = cout
        y = b.op("GlobalAveragePool", [y])
        y = b.op("Flatten", [y], axis=1)
        fc_w = self.rng.normal(0.0, np.sqrt(1.0 / cin), (CLASSES, cin)).astype(np.float32)
        fc_b = self.rng.normal(0.0, 0.05, CLASSES).astype(np.float32)
        y = b.op("Gemm", [y, b.weight("fc.weight", fc_w), b.weight("fc.bias", fc_b)],
                 alpha=1.0, beta=1.0, transB=1)
        # Name the last value "logits" (the graph output).
        b.nodes[-1].output[0] = "logits"
        graph = b.graph(
            "convnet",
            [tensor_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
            [tensor_info("logits", TensorProto.FLOAT, [1, CLASSES])],
        )
        return make_model(graph)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rng = np.random.default_rng(SEED)
    model = ConvNet(rng).build()
    feeds = {"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}
    outputs = write_case(model, feeds, sys.argv[1])
    print(summary(model, outputs))


if __name__ == "__main__":
    main()
