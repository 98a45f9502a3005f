"""Failures raise mxc.Error with the message the command line prints for the same failure;
options mxc does not have are refused, never ignored."""

import subprocess

import numpy as np
import pytest

import mxc


def cli_error(mxc_cli, *args):
    run = subprocess.run([str(mxc_cli), *args], capture_output=True, text=True)
    assert run.returncode != 0
    return run.stderr.strip().removeprefix("error: ")


def test_a_missing_model_raises_the_cli_message(mxc_cli, tmp_path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(mxc.Error) as raised:
        mxc.parse_onnx(str(missing))
    assert str(raised.value) == cli_error(mxc_cli, "read", str(missing))


def test_a_corrupt_mxr_raises_the_cli_message(mxc_cli, tmp_path):
    bad = tmp_path / "bad.mxr"
    bad.write_bytes(b"not an mxr file at all")
    with pytest.raises(mxc.Error) as raised:
        mxc.load(str(bad))
    assert str(raised.value) == cli_error(mxc_cli, "run", str(bad))


def test_a_wrong_input_raises_naming_it(tiny_cnn):
    p = mxc.parse_onnx(str(tiny_cnn))
    p.compile(mxc.get_target("cpu"))
    with pytest.raises(mxc.Error, match="input `image`: expected tensor<1x3x8x8xf32>, got tensor<1x3x8x8xf64>"):
        p.run({"image": np.zeros((1, 3, 8, 8))})
    with pytest.raises(mxc.Error, match="input `image`: no value given"):
        p.run({})


def test_refusals(tiny_cnn):
    with pytest.raises(mxc.Error, match="target `tpu`"):
        mxc.get_target("tpu")
    with pytest.raises(mxc.Error, match="skip_unknown_operators"):
        mxc.parse_onnx(str(tiny_cnn), skip_unknown_operators=True)
    p = mxc.parse_onnx(str(tiny_cnn))
    with pytest.raises(mxc.Error, match="compile the program first"):
        p.run({})
    with pytest.raises(mxc.Error, match="compile the program first"):
        mxc.save(p, "never.mxr")
    with pytest.raises(mxc.Error, match="fast_math=False"):
        p.compile(mxc.get_target("cpu"), fast_math=False)
    with pytest.raises(mxc.Error, match="`tuning` is not an option of mxc"):
        p.compile(mxc.get_target("cpu"), advance_backend_options={"tuning": 1})
    with pytest.raises(mxc.Error, match="format `json`"):
        mxc.load("x.mxr", format="json")
