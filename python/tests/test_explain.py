"""explain(program) gives as data what `mxc explain` prints."""

import re
import subprocess

import pytest

import mxc

from conftest import ROOT

CONVNET = ROOT / ".cache" / "models" / "convnet" / "model.onnx"


def test_explain_matches_the_command_line(mxc_cli):
    assert CONVNET.exists(), f"{CONVNET} is made by scripts/setup.sh"
    e = mxc.explain(mxc.parse_onnx(str(CONVNET)))
    text = subprocess.run([str(mxc_cli), "explain", str(CONVNET)], check=True, capture_output=True, text=True).stdout
    before, after = (int(n) for n in re.search(r"kernels\s+(\d+) -> (\d+)", text).groups())
    assert e["kernels"] == (before, after)
    cost = re.search(r"cost\s+(\d+) -> (\d+)", text).groups()
    assert [f"{c:.0f}" for c in e["cost"]] == list(cost)
    assert e["rewriting"]["stop_reason"] in text
    kernels = e["kernel_list"]
    assert len(kernels) == after
    for k, kernel in enumerate(kernels):
        assert f"kernel {k}: {kernel['op']}\n" in text
        assert f"  cost      {kernel['cost']:.0f} (" in text
    fused = [k for k in kernels if len(k["ops"]) > 1]
    assert fused, "the cpu target fuses convnet's convolutions with their epilogues"
    assert any(k["algorithms"] for k in kernels)
    assert any(k["rules"] for k in kernels)


def test_ref_rewrites_nothing_and_compiled_programs_have_no_graph(tiny_cnn):
    p = mxc.parse_onnx(str(tiny_cnn))
    e = mxc.explain(p, mxc.get_target("ref"))
    assert e["rewriting"] is None and e["kernels"][0] == e["kernels"][1]
    assert all(k["origin"] is None for k in e["kernel_list"])
    p.compile(mxc.get_target("cpu"))
    with pytest.raises(mxc.Error, match="explained before it is compiled"):
        mxc.explain(p)
