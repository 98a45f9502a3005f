"""parse_onnx -> compile -> run against onnxruntime, the program's queries, save and load in
another process, the dynamic-batch path, and the GIL released while compiling."""

import subprocess
import sys
import threading
import time

import numpy as np
import onnxruntime as ort
import pytest

import mxc


def ort_run(model, feeds):
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def test_compile_and_run_match_onnxruntime(tiny_cnn):
    p = mxc.parse_onnx(str(tiny_cnn))
    p.compile(mxc.get_target("cpu"))
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    (out,) = p.run({"image": x})
    (expected,) = ort_run(tiny_cnn, {"image": x})
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-4, atol=1e-5)


def test_ref_target_agrees_with_cpu(tiny_cnn):
    x = mxc.generate_argument(mxc.shape(type="float_type", lens=[1, 3, 8, 8]), seed=3)
    results = []
    for target in ("ref", "cpu"):
        p = mxc.parse_onnx(str(tiny_cnn))
        p.compile(mxc.get_target(target))
        results.append(np.array(p.run({"image": x})[0]))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-4, atol=1e-5)


def test_parameters_and_outputs_before_and_after_compile(tiny_cnn):
    p = mxc.parse_onnx(str(tiny_cnn))
    assert p.get_parameter_names() == ["image"]
    shapes = p.get_parameter_shapes()
    assert shapes["image"].lens() == [1, 3, 8, 8]
    assert shapes["image"].type_string() == "float_type"
    assert [s.lens() for s in p.get_output_shapes()] == [[1, 3]]
    text = str(p)
    assert "mx.conv" in text and '"scores"' in text
    copy = p.clone()
    assert copy == p
    p.sort()
    p.compile(mxc.get_target("cpu"))
    assert copy != p
    assert p.get_parameter_names() == ["image"]
    assert [s.lens() for s in p.get_output_shapes()] == [[1, 3]]
    assert "program compiled for cpu" in str(p)


def test_save_then_load_in_a_new_process(tiny_cnn, tmp_path):
    p = mxc.parse_onnx(str(tiny_cnn))
    p.compile(mxc.get_target("cpu"))
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    mxc.save(p, str(tmp_path / "tiny.mxr"))
    here = np.asarray(p.run({"image": x})[0])
    script = (
        "import sys, numpy as np, mxc\n"
        "p = mxc.load(sys.argv[1])\n"
        "x = np.load(sys.argv[2])\n"
        "np.save(sys.argv[3], np.asarray(p.run({'image': x})[0]))\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "tiny.mxr"), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        check=True,
    )
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), here)
    loaded = mxc.load(str(tmp_path / "tiny.mxr"))
    assert loaded.get_parameter_shapes()["image"].lens() == [1, 3, 8, 8]


def test_saved_file_runs_in_the_command_line(tiny_cnn, tmp_path, mxc_cli):
    p = mxc.parse_onnx(str(tiny_cnn))
    p.compile(mxc.get_target("cpu"))
    mxc.save(p, str(tmp_path / "tiny.mxr"))
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    subprocess.run(
        [str(mxc_cli), "run", str(tmp_path / "tiny.mxr"), "--input", f"image={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out")],
        check=True,
    )
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "scores.npy"), np.asarray(p.run({"image": x})[0]))


def test_dynamic_batch_compiles_once_and_runs_every_size(dense_batch):
    path, w, b = dense_batch
    p = mxc.parse_onnx(str(path), map_dyn_input_dims={"x": [mxc.dynamic_dimension(1, 8, [1, 4]), 8]})
    shape = p.get_parameter_shapes()["x"]
    assert shape.dynamic() and shape.symbolic()
    assert str(shape) == "tensor<batch[1..8]{1, 4}x8xf32>"
    assert shape.min_lens() == [1, 8] and shape.max_lens() == [8, 8]
    p.compile(mxc.get_target("cpu"))
    assert str(p.get_output_shapes()[0]) == "tensor<batch[1..8]{1, 4}x5xf32>"
    for n in (1, 3, 4, 8):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        (y,) = p.run({"x": x})
        np.testing.assert_allclose(np.asarray(y), np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-5)
    with pytest.raises(mxc.Error, match=r"batch is 9, outside its range \[1..8\]"):
        p.run({"x": np.zeros((9, 8), np.float32)})


def test_dim_params_take_the_default_size(dense_batch):
    path, w, b = dense_batch
    p = mxc.parse_onnx(str(path), default_dim_value=2)
    assert p.get_parameter_shapes()["x"].lens() == [2, 8]
    fixed = mxc.parse_onnx(str(path), map_input_dims={"x": [5, 8]})
    assert fixed.get_parameter_shapes()["x"].lens() == [5, 8]
    symbolic = mxc.parse_onnx(str(path), default_dim_value=None)
    # a symbol without constraints is in mxc's default range
    assert str(symbolic.get_parameter_shapes()["x"]) == "tensor<batchx8xf32>"
    assert symbolic.get_parameter_shapes()["x"].max_lens() == [4096, 8]


def test_the_gil_is_released_while_compiling(tiny_cnn):
    p = mxc.parse_onnx(str(tiny_cnn))
    options = {"kernel_cache": False}
    worker = threading.Thread(target=p.compile, args=(mxc.get_target("cpu"),), kwargs={"advance_backend_options": options})
    ticks = 0
    worker.start()
    start = time.perf_counter()
    while worker.is_alive():
        ticks += 1
        time.sleep(0.001)
    elapsed = time.perf_counter() - start
    worker.join()
    # with the GIL held for the whole compile this thread would not run until it ended
    assert elapsed > 0.05 and ticks > 10, (elapsed, ticks)
    assert "program compiled for cpu" in str(p)


def test_progress_only_when_asked(tiny_cnn, capfd):
    options = {"kernel_cache": False}
    quiet = mxc.parse_onnx(str(tiny_cnn))
    quiet.compile(mxc.get_target("cpu"), advance_backend_options=options)
    assert capfd.readouterr().err == ""
    loud = mxc.parse_onnx(str(tiny_cnn))
    loud.compile(mxc.get_target("cpu"), advance_backend_options=options, progress=True)
    err = capfd.readouterr().err
    for stage in ("saturation", "extraction", "lowering", "codegen"):
        assert f"mxc: {stage} (" in err, err


def test_print_writes_what_str_gives(tiny_cnn, capfd):
    p = mxc.parse_onnx(str(tiny_cnn))
    p.print()
    assert capfd.readouterr().out == str(p) + "\n"
    p.get_main_module().print()
    assert capfd.readouterr().out == str(p) + "\n"


def test_a_dim_param_given_in_one_input_holds_in_the_others(masked_pair):
    fixed = mxc.parse_onnx(str(masked_pair), map_input_dims={"x": [2, 7]})
    assert {n: s.lens() for n, s in fixed.get_parameter_shapes().items()} == {"x": [2, 7], "mask": [2, 7]}
    dynamic = mxc.parse_onnx(str(masked_pair), map_dyn_input_dims={"x": [1, "s[1..64]{7, 32}"]})
    shapes = {n: str(s) for n, s in dynamic.get_parameter_shapes().items()}
    assert shapes == {"x": "tensor<1xs[1..64]{7, 32}xf32>", "mask": "tensor<1xs[1..64]{7, 32}xf32>"}
    dynamic.compile(mxc.get_target("cpu"))
    x = np.arange(7, dtype=np.float32).reshape(1, 7)
    m = np.array([[1, 0, 1, 0, 1, 0, 1]], np.float32)
    np.testing.assert_array_equal(np.asarray(dynamic.run({"x": x, "mask": m})[0]), x * m)
    # positions of an element-wise product are independent: 9 runs in parts of 7 and smaller
    x9 = np.arange(9, dtype=np.float32).reshape(1, 9)
    np.testing.assert_array_equal(np.asarray(dynamic.run({"x": x9, "mask": x9})[0]), x9 * x9)
    with pytest.raises(mxc.Error, match=r"s is 65, outside its range \[1..64\]"):
        dynamic.run({"x": np.zeros((1, 65), np.float32), "mask": np.zeros((1, 65), np.float32)})
