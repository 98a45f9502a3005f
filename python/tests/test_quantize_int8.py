"""quantize_int8 (docs/quantisation.md), as MIGraphX documents it: `quantize_int8(prog, t,
calibration=[...], ins_names=[...])` on a small fp32 conv net made here. The quantised program is
close to fp32 but not equal, about as close as onnxruntime's own static quantisation of the model
calibrated on the same samples; `ins_names` chooses the ops; the saved file says so; misuse is
refused by name."""

import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

import mxc

IMAGE = (1, 16, 10, 10)


@pytest.fixture(scope="module")
def conv_net(tmp_path_factory):
    """Conv 3x3 (bias) -> Relu -> Conv 1x1 -> Relu -> GlobalAveragePool -> Flatten -> Gemm,
    fp32, with eight calibration samples and an input of the same distribution."""
    rng = np.random.default_rng(5)

    def weight(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], "conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c1"], ["r1"], "relu1"),
            helper.make_node("Conv", ["r1", "w2"], ["c2"], "conv2", kernel_shape=[1, 1]),
            helper.make_node("Relu", ["c2"], ["r2"], "relu2"),
            helper.make_node("GlobalAveragePool", ["r2"], ["pooled"], "pool"),
            helper.make_node("Flatten", ["pooled"], ["flat"], "flatten"),
            helper.make_node("Gemm", ["flat", "wf", "bf"], ["y"], "fc", transB=1),
        ],
        "conv_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(IMAGE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [
            weight("w1", (16, 16, 3, 3), 0.1),
            weight("b1", (16,), 0.1),
            weight("w2", (32, 16, 1, 1), 0.25),
            weight("wf", (10, 32), 0.5),
            weight("bf", (10,), 0.1),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("int8") / "conv_net.onnx"
    onnx.save(model, str(path))
    samples = [{"x": rng.standard_normal(IMAGE).astype(np.float32)} for _ in range(8)]
    x = rng.standard_normal(IMAGE).astype(np.float32)
    return path, samples, x


def run(p, x):
    (y,) = p.run({"x": x})
    return np.array(y)


def compiled(path, quantize=None):
    p = mxc.parse_onnx(str(path))
    if quantize is not None:
        quantize(p)
    p.compile(mxc.get_target("cpu"))
    return p


def relative_error(actual, expected):
    return float(np.abs(actual - expected).max() / np.abs(expected).max())


def ort_int8_error(path, samples, x, folder):
    """onnxruntime's static quantisation (QDQ, u8 activations, s8 weights per channel, MinMax
    calibration on `samples`): its error on `x` against the fp32 model."""

    class Samples(CalibrationDataReader):
        def __init__(self):
            self.rest = iter(samples)

        def get_next(self):
            return next(self.rest, None)

    quantised = folder / "conv_net_qdq.onnx"
    quantize_static(
        str(path),
        str(quantised),
        Samples(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )

    def output(model):
        session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        return session.run(None, {"x": x})[0]

    return relative_error(output(quantised), output(path))


def test_int8_is_close_to_fp32_and_as_close_as_onnxruntimes_int8(conv_net, tmp_path):
    path, samples, x = conv_net
    f32 = run(compiled(path), x)
    p = compiled(path, lambda p: mxc.quantize_int8(p, mxc.get_target("cpu"), calibration=samples))
    int8 = run(p, x)
    assert int8.dtype == f32.dtype and int8.shape == f32.shape
    assert not np.array_equal(int8, f32), "int8 rounds activations and weights"
    ours = relative_error(int8, f32)
    theirs = ort_int8_error(path, samples, x, tmp_path)
    assert ours <= max(2 * theirs, 0.01), f"mxc int8 error {ours}, onnxruntime's {theirs}"


def test_ins_names_choose_the_ops_and_the_saved_file_says_so(conv_net, tmp_path, mxc_cli):
    path, samples, x = conv_net
    cpu = mxc.get_target("cpu")
    p = compiled(path, lambda p: mxc.quantize_int8(p, cpu, calibration=samples, ins_names=["convolution"]))
    file = tmp_path / "conv_net_int8.mxr"
    mxc.save(p, str(file))
    shown = subprocess.run([str(mxc_cli), "params", str(file)], check=True, capture_output=True, text=True).stdout
    assert "precision: int8 (conv; 2 of 2 ops, 8 calibration samples)" in shown, shown
    loaded = mxc.load(str(file))
    np.testing.assert_array_equal(run(loaded, x), run(p, x))
    everything = compiled(path, lambda p: mxc.quantize_int8(p, cpu, calibration=samples))
    assert not np.array_equal(run(everything, x), run(p, x)), "the Gemm is quantised only when named"


def test_misuse_is_refused_by_name(conv_net):
    path, samples, _ = conv_net
    cpu = mxc.get_target("cpu")
    p = mxc.parse_onnx(str(path))
    with pytest.raises(mxc.Error, match="quantize_int8: no calibration samples"):
        mxc.quantize_int8(p, cpu)
    with pytest.raises(mxc.Error, match="quantize_int8: .*`relu` has no int8 form"):
        mxc.quantize_int8(p, cpu, calibration=samples, ins_names=["relu"])
    with pytest.raises(mxc.Error, match="`pixels` is not an input of the model"):
        mxc.quantize_int8(p, cpu, calibration=[{"pixels": samples[0]["x"]}])
    with pytest.raises(mxc.Error, match="calibration runs on the cpu or ref target"):
        mxc.quantize_int8(p, mxc.get_target("gpu"), calibration=samples)
    p.compile(cpu)
    with pytest.raises(mxc.Error, match="quantize_int8: .*compile the program after quantising"):
        mxc.quantize_int8(p, cpu, calibration=samples)
