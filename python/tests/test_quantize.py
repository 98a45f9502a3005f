"""quantize_fp16, quantize_bf16 and autocast_fp8 (docs/quantisation.md): a small fp32 conv net
made here, quantised by mxc, against onnxruntime running it in fp32 and as onnxconverter-common's
fp16 model; the ops MIGraphX's names choose; what is refused; the saved file's precision in the
command line; fp8 inputs and outputs taken and given as f32, against ONNX's reference evaluator."""

import subprocess

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnxconverter_common import float16

import mxc

IMAGE = (1, 16, 12, 12)


@pytest.fixture(scope="module")
def residual_net(tmp_path_factory):
    """Conv 3x3 (bias) -> Relu -> Conv 3x3 -> + input -> GlobalAveragePool -> Flatten -> Gemm,
    fp32, with its fp16 version (onnxconverter-common, inputs and outputs kept f32) and an input.
    The nodes are named, as exporters name them: the converter names its casts after them."""
    rng = np.random.default_rng(11)

    def weight(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], "conv1", **conv),
            helper.make_node("Relu", ["c1"], ["r1"], "relu"),
            helper.make_node("Conv", ["r1", "w2"], ["c2"], "conv2", **conv),
            helper.make_node("Add", ["c2", "x"], ["sum"], "residual"),
            helper.make_node("GlobalAveragePool", ["sum"], ["pooled"], "pool"),
            helper.make_node("Flatten", ["pooled"], ["flat"], "flatten"),
            helper.make_node("Gemm", ["flat", "wf", "bf"], ["y"], "fc", transB=1),
        ],
        "residual",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(IMAGE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [
            weight("w1", (16, 16, 3, 3), 0.12),
            weight("b1", (16,), 0.1),
            weight("w2", (16, 16, 3, 3), 0.12),
            weight("wf", (10, 16), 0.5),
            weight("bf", (10,), 0.1),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    folder = tmp_path_factory.mktemp("quantize")
    path, half = folder / "residual.onnx", folder / "residual_fp16.onnx"
    onnx.save(model, str(path))
    onnx.save(float16.convert_float_to_float16(model, keep_io_types=True), str(half))
    x = rng.standard_normal(IMAGE).astype(np.float32)
    return path, half, x


def ort_run(model, x):
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": x})
    return y


def mxc_run(model, x, quantize=None, **compile_args):
    """The model's output in mxc on cpu, after `quantize(program)` when given."""
    p = mxc.parse_onnx(str(model))
    if quantize is not None:
        quantize(p)
    p.compile(mxc.get_target("cpu"), **compile_args)
    (y,) = p.run({"x": x})
    return np.array(y)


def assert_within(actual, expected, fraction):
    """|actual - expected| <= fraction of expected's largest magnitude, everywhere."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    bound = fraction * np.abs(expected).max()
    worst = np.abs(actual - expected).max()
    assert worst <= bound, f"max |diff| {worst} > {bound}"


def test_fp16_agrees_with_onnxruntimes_fp16_model_and_with_fp32(residual_net):
    path, half, x = residual_net
    f32 = mxc_run(path, x)
    f16 = mxc_run(path, x, mxc.quantize_fp16)
    assert f16.dtype == np.float32, "the outputs keep their type"
    assert_within(f16, ort_run(half, x), 1e-2)
    assert_within(f16, ort_run(path, x), 2e-2)
    assert not np.array_equal(f16, f32), "quantising changed nothing"


def test_bf16_agrees_with_fp32(residual_net):
    path, _, x = residual_net
    bf16 = mxc_run(path, x, mxc.quantize_bf16)
    assert_within(bf16, ort_run(path, x), 3e-2)
    assert not np.array_equal(bf16, mxc_run(path, x)), "quantising changed nothing"


def test_half_as_f32_computes_the_fp16_model_as_onnxruntime_does(residual_net):
    _, half, x = residual_net
    wide = mxc_run(half, x, advance_backend_options={"half_as_f32": True})
    assert_within(wide, ort_run(half, x), 1e-5)


def test_the_program_shows_the_half_precision_ops_before_compiling(residual_net):
    path, _, _ = residual_net
    p = mxc.parse_onnx(str(path))
    assert "xf16>" not in str(p)
    mxc.quantize_fp16(p)
    text = str(p)
    assert "xf16>" in text and "bf16" not in text, text
    assert "to compile in fp16" in repr(p)
    # the inputs and outputs keep their types
    assert p.get_parameter_shapes()["x"].type_string() == "float_type"
    assert [s.type_string() for s in p.get_output_shapes()] == ["float_type"]
    # quantising again replaces the earlier choice
    mxc.quantize_bf16(p)
    text = str(p)
    assert "xbf16>" in text and "xf16>" not in text, text


def test_ins_names_choose_the_ops(residual_net):
    path, _, x = residual_net
    p = mxc.parse_onnx(str(path))
    mxc.quantize_fp16(p, ins_names=["convolution"])
    lines = str(p).splitlines()
    convs = [line for line in lines if " = mx.conv" in line]
    gemms = [line for line in lines if " = mx.gemm" in line]
    assert len(convs) == 2 and all("xf16>" in line for line in convs), lines
    assert gemms and not any("xf16>" in line for line in gemms), lines
    p.compile(mxc.get_target("cpu"))
    (y,) = p.run({"x": x})
    assert_within(np.array(y), ort_run(path, x), 2e-2)


def test_unknown_op_names_and_compiled_programs_are_refused(residual_net):
    path, _, _ = residual_net
    p = mxc.parse_onnx(str(path))
    with pytest.raises(mxc.Error, match="no op is named `no_such_op`"):
        mxc.quantize_fp16(p, ins_names=["no_such_op"])
    with pytest.raises(mxc.Error, match="quantize_bf16: no op is named `gem`"):
        mxc.quantize_bf16(p, ins_names=["gem"])
    assert "xf16>" not in str(p) and "xbf16>" not in str(p), "a refused call changes nothing"
    p.compile(mxc.get_target("cpu"))
    for quantize in (mxc.quantize_fp16, mxc.quantize_bf16, mxc.autocast_fp8):
        name = quantize.__name__
        with pytest.raises(mxc.Error, match=f"{name}: .*compile the program after quantising"):
            quantize(p)


def test_the_saved_file_says_its_precision(residual_net, tmp_path, mxc_cli):
    path, _, x = residual_net
    p = mxc.parse_onnx(str(path))
    mxc.quantize_fp16(p)
    p.compile(mxc.get_target("cpu"))
    file = tmp_path / "residual_fp16.mxr"
    mxc.save(p, str(file))
    shown = subprocess.run([str(mxc_cli), "params", str(file)], check=True, capture_output=True, text=True).stdout
    assert "precision: fp16 (docs/quantisation.md)" in shown, shown
    loaded = mxc.load(str(file))
    assert loaded == p
    np.testing.assert_array_equal(np.array(loaded.run({"x": x})[0]), np.array(p.run({"x": x})[0]))


def test_quantising_a_symbolic_program_applies_when_it_compiles(residual_net, tmp_path):
    path, _, x = residual_net
    model = onnx.load(str(path))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    dynamic = tmp_path / "residual_batch.onnx"
    onnx.save(model, str(dynamic))
    p = mxc.parse_onnx(str(dynamic), map_dyn_input_dims={"x": ["batch[1..2]{1,2}", 16, 12, 12]})
    mxc.quantize_fp16(p)
    p.compile(mxc.get_target("cpu"))
    (y,) = p.run({"x": x})
    f16 = np.array(y)
    assert_within(f16, mxc_run(path, x, mxc.quantize_fp16), 1e-6)
    assert not np.array_equal(f16, mxc_run(path, x))


@pytest.fixture(scope="module")
def fp8_double(tmp_path_factory):
    """y = fp8(2 * relu(float(x))) with x and y of type float8e4m3fn, [n, 8]."""
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
            helper.make_node("Relu", ["xf"], ["r"]),
            helper.make_node("Mul", ["r", "two"], ["d"]),
            helper.make_node("Cast", ["d"], ["y"], to=TensorProto.FLOAT8E4M3FN),
        ],
        "fp8_double",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, ["n", 8])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("fp8") / "fp8_double.onnx"
    onnx.save(model, str(path))
    return model, path


@pytest.mark.parametrize("dims", ["fixed", "symbolic"])
def test_autocast_fp8_takes_and_gives_f32(fp8_double, dims):
    model, path = fp8_double
    if dims == "fixed":
        p = mxc.parse_onnx(str(path), map_input_dims={"x": [4, 8]})
    else:
        p = mxc.parse_onnx(str(path), map_dyn_input_dims={"x": ["n[1..4]{4}", 8]})
    assert p.get_parameter_shapes()["x"].type_string() != "float_type"
    mxc.autocast_fp8(p)
    assert p.get_parameter_shapes()["x"].type_string() == "float_type"
    p.compile(mxc.get_target("cpu"))
    assert [s.type_string() for s in p.get_output_shapes()] == ["float_type"]
    # values fp8 does not hold exactly too: they are rounded as they enter, as a cast rounds
    x = np.random.default_rng(5).uniform(-6, 6, (4, 8)).astype(np.float32)
    (y,) = p.run({"x": x})
    (expected,) = ReferenceEvaluator(model).run(None, {"x": x.astype(ml_dtypes.float8_e4m3fn)})
    assert expected.dtype == ml_dtypes.float8_e4m3fn
    y = np.array(y)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, expected.astype(np.float32))
    assert (y > 0).any() and not np.array_equal(y, np.maximum(2 * x, 0)), "no value was rounded"
