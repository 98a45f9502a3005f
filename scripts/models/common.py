"""Shared helpers for the model generators in this folder.

A GraphBuilder collects nodes, initializers and Constant nodes with names in
the style of the PyTorch exporter ("/encoder/layer.0/attention/MatMul"), and
`write_case` saves a model together with one test data set whose expected
outputs come from onnxruntime, laid out like the ONNX backend node tests:

    OUT/model.onnx
    OUT/test_data_set_0/input_<i>.pb
    OUT/test_data_set_0/output_<i>.pb
"""

import os
from contextlib import contextmanager

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
PRODUCER = "mxc scripts/models"


class GraphBuilder:
    def __init__(self):
        self.nodes = []
        self.initializers = []
        self._scope = []
        self._used = set()

    @contextmanager
    def scope(self, name):
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def _unique(self, base):
        name, n = base, 0
        while name in self._used:
            n += 1
            name = f"{base}_{n}"
        self._used.add(name)
        return name

    def op(self, op_type, inputs, n_outputs=1, **attrs):
        """Adds a node; returns its output name (or a list of them if n_outputs > 1)."""
        prefix = "/" + "/".join(self._scope) + "/" if self._scope else "/"
        node_name = self._unique(prefix + op_type)
        outputs = [f"{node_name}_output_{i}" for i in range(n_outputs)]
        self.nodes.append(
            helper.make_node(op_type, list(inputs), outputs, name=node_name, **attrs)
        )
        return outputs[0] if n_outputs == 1 else outputs

    def weight(self, name, array):
        """Adds an initializer (a trained parameter); returns its name."""
        name = self._unique(name)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(self, value, dtype=np.float32):
        """Adds a Constant node holding `value` (scalar or array)."""
        tensor = numpy_helper.from_array(np.asarray(value, dtype=dtype))
        return self.op("Constant", [], value=tensor)

    def const_i64(self, value):
        return self.const(value, np.int64)

    def graph(self, name, inputs, outputs):
        return helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)


def make_model(graph):
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name=PRODUCER,
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def tensor_info(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def run_onnxruntime(model, feeds):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(
        model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def write_case(model, feeds, out_dir):
    """Writes model.onnx and test_data_set_0 with onnxruntime's outputs; returns the outputs."""
    graph_inputs = [i.name for i in model.graph.input]
    graph_outputs = [o.name for o in model.graph.output]
    assert sorted(feeds) == sorted(graph_inputs), (sorted(feeds), graph_inputs)

    outputs = run_onnxruntime(model, feeds)

    data_dir = os.path.join(out_dir, "test_data_set_0")
    os.makedirs(data_dir, exist_ok=True)
    onnx.save_model(model, os.path.join(out_dir, "model.onnx"))
    for i, name in enumerate(graph_inputs):
        _save_tensor(feeds[name], name, os.path.join(data_dir, f"input_{i}.pb"))
    for i, name in enumerate(graph_outputs):
        _save_tensor(outputs[name], name, os.path.join(data_dir, f"output_{i}.pb"))
    return outputs


def _save_tensor(array, name, path):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(array), name).SerializeToString())


def op_counts(model):
    counts = {}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return dict(sorted(counts.items()))


def summary(model, outputs):
    lines = [f"{len(model.graph.node)} nodes: " + ", ".join(f"{k} {v}" for k, v in op_counts(model).items())]
    for name, value in outputs.items():
        lines.append(
            f"{name}: {value.dtype}{list(value.shape)} mean {value.mean():.4f} std {value.std():.4f}"
        )
    return "\n".join(lines)


__all__ = [
    "GraphBuilder",
    "TensorProto",
    "make_model",
    "tensor_info",
    "write_case",
    "op_counts",
    "summary",
]
