"""Writes a synthetic ONNX model of about N nodes for compile-time benchmarks.

The model repeats a block of 10 nodes over a [1, 64] activation: MatMul + Add + Relu, an
identity multiplication by 1, a double Transpose, a Reshape pair, Sub of zero, and a residual
Add, so that a rewriting compiler has algebra to simplify at every size. All blocks share
one weight matrix so the file stays small.
Usage: python bench/synthetic_model.py N OUT.onnx"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BLOCK = 10


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    n, out = int(sys.argv[1]), sys.argv[2]
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array((rng.standard_normal((64, 64)) / 8).astype(np.float32), "w"),
        numpy_helper.from_array((rng.standard_normal(64) / 8).astype(np.float32), "b"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array([64, 1], np.int64), "tall"),
        numpy_helper.from_array(np.array([1, 64], np.int64), "wide"),
    ]
    nodes, x = [], "x"
    for i in range(max(1, n // BLOCK)):
        p = f"b{i}_"
        nodes += [
            helper.make_node("MatMul", [x, "w"], [p + "mm"]),
            helper.make_node("Add", [p + "mm", "b"], [p + "lin"]),
            helper.make_node("Relu", [p + "lin"], [p + "act"]),
            helper.make_node("Mul", [p + "act", "one"], [p + "same"]),
            helper.make_node("Transpose", [p + "same"], [p + "t1"], perm=[1, 0]),
            helper.make_node("Transpose", [p + "t1"], [p + "t2"], perm=[1, 0]),
            helper.make_node("Reshape", [p + "t2", "tall"], [p + "r1"]),
            helper.make_node("Reshape", [p + "r1", "wide"], [p + "r2"]),
            helper.make_node("Sub", [p + "r2", "zero"], [p + "d"]),
            helper.make_node("Add", [p + "d", x], [p + "out"]),
        ]
        x = p + "out"
    graph = helper.make_graph(
        nodes, "synthetic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 64])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
