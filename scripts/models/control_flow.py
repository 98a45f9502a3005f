"""Small models of ONNX control flow (`If`, `Loop`, `Scan`) whose conditions and trip counts
are known only at run time, or whose bodies read values from the graphs around them, each with
one data set whose expected outputs onnxruntime computes:

    OUT/<case>/model.onnx
    OUT/<case>/test_data_set_0/{input,output}_<i>.pb

    if_runtime_then, if_runtime_else  one If on reduce_sum(x) > 0, its branches reading an outer
                                      weight; the inputs take the then and the else branch
    loop_runtime                      a Loop whose trip count M is an input and whose body stops
                                      it once a carried sum passes a threshold
    loop_static_scan                  a Loop of constant M with scan outputs
    nested                            an If inside a Loop body, reading a main-graph input
    scan                              a Scan with two states, its input read backwards along
                                      axis 1 and its output built backwards along axis 1

Usage: control_flow.py OUT_DIR
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from common import make_model, summary, tensor_info, write_case

SEED = 2025
F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, **attrs)


def const(name, value, dtype=np.float32):
    """A Constant node giving `name`."""
    return node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value, dtype=dtype)))


def weight(name, array):
    return numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name)


def graph(name, nodes, inputs, outputs, initializers=()):
    return helper.make_graph(nodes, name, inputs, outputs, list(initializers))


def if_runtime(rng):
    """then: tanh(x · w + b); else: (x · w) * 0.5 - b. `w` (64 x 80) is too large to be copied
    into the branches, `b` is small."""
    w = weight("w", rng.normal(0.0, 0.2, (64, 80)))
    b = weight("b", rng.normal(0.0, 1.0, (80,)))
    then_branch = graph(
        "then_branch",
        [node("MatMul", ["x", "w"], ["then_xw"]), node("Add", ["then_xw", "b"], ["then_pre"]),
         node("Tanh", ["then_pre"], ["then_out"])],
        [],
        [tensor_info("then_out", F32, [2, 80])],
    )
    else_branch = graph(
        "else_branch",
        [node("MatMul", ["x", "w"], ["else_xw"]), const("half", 0.5),
         node("Mul", ["else_xw", "half"], ["else_half"]), node("Sub", ["else_half", "b"], ["else_out"])],
        [],
        [tensor_info("else_out", F32, [2, 80])],
    )
    nodes = [
        node("ReduceSum", ["x"], ["sum"], keepdims=0),
        const("zero", 0.0),
        node("Greater", ["sum", "zero"], ["positive"]),
        node("If", ["positive"], ["y"], then_branch=then_branch, else_branch=else_branch),
    ]
    g = graph("if_runtime", nodes, [tensor_info("x", F32, [2, 64])], [tensor_info("y", F32, [2, 80])], [w, b])
    return make_model(g)


def loop_runtime(rng):
    """h <- tanh(h · w + u), sum <- sum + reduce_sum(|h|), count <- count + 1, while sum < 30 and
    at most M times (M an input)."""
    w = weight("w", rng.normal(0.0, 0.5, (16, 16)))
    u = weight("u", rng.normal(0.0, 0.5, (1, 16)))
    body = graph(
        "body",
        [
            node("MatMul", ["h", "w"], ["hw"]),
            node("Add", ["hw", "u"], ["pre"]),
            node("Tanh", ["pre"], ["h_next"]),
            node("Abs", ["h_next"], ["magnitude"]),
            node("ReduceSum", ["magnitude"], ["step"], keepdims=0),
            node("Add", ["sum", "step"], ["sum_next"]),
            const("threshold", 30.0),
            node("Less", ["sum_next", "threshold"], ["going"]),
            const("one", 1, np.int64),
            node("Add", ["count", "one"], ["count_next"]),
        ],
        [tensor_info("i", I64, []), tensor_info("cond_in", BOOL, []), tensor_info("h", F32, [1, 16]),
         tensor_info("sum", F32, []), tensor_info("count", I64, [])],
        [tensor_info("going", BOOL, []), tensor_info("h_next", F32, [1, 16]), tensor_info("sum_next", F32, []),
         tensor_info("count_next", I64, [])],
    )
    nodes = [
        const("start", True, np.bool_),
        const("sum_0", 0.0),
        const("count_0", 0, np.int64),
        node("Loop", ["m", "start", "h_0", "sum_0", "count_0"], ["h_final", "sum_final", "count_final"], body=body),
    ]
    g = graph(
        "loop_runtime",
        nodes,
        [tensor_info("m", I64, []), tensor_info("h_0", F32, [1, 16])],
        [tensor_info("h_final", F32, [1, 16]), tensor_info("sum_final", F32, []),
         tensor_info("count_final", I64, [])],
        [w, u],
    )
    return make_model(g)


def loop_static_scan(rng):
    """Five iterations (M constant, no condition) of h <- sigmoid(h · w + 0.1 i), stacking h and
    i * 2 as scan outputs."""
    w = weight("w", rng.normal(0.0, 0.5, (8, 8)))
    body = graph(
        "body",
        [
            node("Identity", ["cond_in"], ["cond_out"]),
            node("Cast", ["i"], ["fi"], to=F32),
            const("tenth", 0.1),
            node("Mul", ["fi", "tenth"], ["shift"]),
            node("MatMul", ["h", "w"], ["hw"]),
            node("Add", ["hw", "shift"], ["pre"]),
            node("Sigmoid", ["pre"], ["h_next"]),
            node("Identity", ["h_next"], ["h_next_scan"]),
            node("Add", ["i", "i"], ["twice"]),
        ],
        [tensor_info("i", I64, []), tensor_info("cond_in", BOOL, []), tensor_info("h", F32, [1, 8])],
        [tensor_info("cond_out", BOOL, []), tensor_info("h_next", F32, [1, 8]), tensor_info("h_next_scan", F32, [1, 8]),
         tensor_info("twice", I64, [])],
    )
    nodes = [const("m", 5, np.int64), node("Loop", ["m", "", "h_0"], ["h_final", "hs", "twos"], body=body)]
    g = graph(
        "loop_static_scan",
        nodes,
        [tensor_info("h_0", F32, [1, 8])],
        [tensor_info("h_final", F32, [1, 8]), tensor_info("hs", F32, [5, 1, 8]), tensor_info("twos", I64, [5])],
        [w],
    )
    return make_model(g)


def nested():
    """Four iterations of y <- y + w on even iterations, y * w on odd ones: the If in the body
    reads `w`, an input of the main graph, two levels up."""
    then_branch = graph("then_branch", [node("Add", ["y", "w"], ["added"])], [], [tensor_info("added", F32, [3])])
    else_branch = graph("else_branch", [node("Mul", ["y", "w"], ["scaled"])], [], [tensor_info("scaled", F32, [3])])
    body = graph(
        "body",
        [
            node("Identity", ["cond_in"], ["cond_out"]),
            const("two", 2, np.int64),
            node("Mod", ["i", "two"], ["parity"]),
            const("zero", 0, np.int64),
            node("Equal", ["parity", "zero"], ["even"]),
            node("If", ["even"], ["y_next"], then_branch=then_branch, else_branch=else_branch),
        ],
        [tensor_info("i", I64, []), tensor_info("cond_in", BOOL, []), tensor_info("y", F32, [3])],
        [tensor_info("cond_out", BOOL, []), tensor_info("y_next", F32, [3])],
    )
    nodes = [const("m", 4, np.int64), node("Loop", ["m", "", "x"], ["y_final"], body=body)]
    g = graph("nested", nodes, [tensor_info("x", F32, [3]), tensor_info("w", F32, [3])],
              [tensor_info("y_final", F32, [3])])
    return make_model(g)


def scan():
    """States s <- tanh(0.5 s + column), m <- max(m, column) over the 6 columns of x (4 x 6),
    read from the last; the scan output, s after each step, is stacked along axis 1 from the
    end."""
    body = graph(
        "body",
        [
            const("half", 0.5),
            node("Mul", ["s", "half"], ["s_half"]),
            node("Add", ["s_half", "column"], ["s_pre"]),
            node("Tanh", ["s_pre"], ["s_next"]),
            node("Max", ["m", "column"], ["m_next"]),
            node("Identity", ["s_next"], ["s_scan"]),
        ],
        [tensor_info("s", F32, [4]), tensor_info("m", F32, [4]), tensor_info("column", F32, [4])],
        [tensor_info("s_next", F32, [4]), tensor_info("m_next", F32, [4]), tensor_info("s_scan", F32, [4])],
    )
    nodes = [
        node(
            "Scan",
            ["s_0", "m_0", "x"],
            ["s_final", "m_final", "ss"],
            body=body,
            num_scan_inputs=1,
            scan_input_axes=[1],
            scan_input_directions=[1],
            scan_output_axes=[-1],
            scan_output_directions=[1],
        )
    ]
    g = graph(
        "scan",
        nodes,
        [tensor_info("s_0", F32, [4]), tensor_info("m_0", F32, [4]), tensor_info("x", F32, [4, 6])],
        [tensor_info("s_final", F32, [4]), tensor_info("m_final", F32, [4]), tensor_info("ss", F32, [4, 6])],
    )
    return make_model(g)


def cases(rng):
    """Each case's model and inputs."""

    def normal(*shape):
        return rng.normal(0.0, 1.0, shape).astype(np.float32)

    if_model = if_runtime(rng)
    x = np.abs(normal(2, 64))
    return {
        "if_runtime_then": (if_model, {"x": x}),
        "if_runtime_else": (if_model, {"x": -x}),
        "loop_runtime": (loop_runtime(rng), {"m": np.array(20, np.int64), "h_0": normal(1, 16)}),
        "loop_static_scan": (loop_static_scan(rng), {"h_0": normal(1, 8)}),
        "nested": (nested(), {"x": normal(3), "w": normal(3)}),
        "scan": (scan(), {"s_0": normal(4), "m_0": normal(4), "x": normal(4, 6)}),
    }


def main(out_dir):
    rng = np.random.default_rng(SEED)
    for name, (model, feeds) in cases(rng).items():
        outputs = write_case(model, feeds, os.path.join(out_dir, name))
        print(f"{name}: {summary(model, outputs)}")


if __name__ == "__main__":
    main(sys.argv[1])
