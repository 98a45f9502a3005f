"""Shared fixtures of the mxc Python tests: the repository's models and an ONNX model with a
dynamic batch, made here with onnx's helpers."""

import pathlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tiny_cnn():
    return ROOT / "examples" / "tiny_cnn.onnx"


@pytest.fixture(scope="session")
def mxc_cli():
    """The mxc command line, built by the test command before pytest runs."""
    path = ROOT / "target" / "release" / "mxc"
    assert path.exists(), f"{path} is missing: cargo build --release first"
    return path


@pytest.fixture(scope="session")
def dense_batch(tmp_path_factory):
    """y = relu(x @ w + b) for x of shape [batch, 8] with `batch` a dim_param."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["xw"]),
            helper.make_node("Add", ["xw", "b"], ["pre"]),
            helper.make_node("Relu", ["pre"], ["y"]),
        ],
        "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])],
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path_factory.mktemp("models") / "dense_batch.onnx"
    onnx.save(model, str(path))
    return path, w, b


@pytest.fixture(scope="session")
def masked_pair(tmp_path_factory):
    """y = x * mask, both [batch, sequence] (dim_params), as transformers' inputs are."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "mask"], ["y"])],
        "masked",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence"]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path_factory.mktemp("models") / "masked.onnx"
    onnx.save(model, str(path))
    return path
