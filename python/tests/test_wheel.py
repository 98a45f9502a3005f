"""The wheel scripts/setup.sh built installs with pip into a fresh venv (numpy from PyPI)
and compiles and runs a model there as it does here."""

import os
import pathlib
import subprocess
import venv

import numpy as np

import mxc

from conftest import ROOT


def test_the_wheel_installs_and_runs_in_a_fresh_venv(tmp_path, tiny_cnn):
    wheels = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "wheels"
    found = sorted(wheels.glob("mxc-*.whl"))
    assert found, f"no wheel in {wheels}: scripts/setup.sh builds it"
    env_dir = tmp_path / "fresh"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(found[0])], check=True)
    x = np.random.default_rng(4).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = (
        "import sys, numpy as np, mxc\n"
        "p = mxc.parse_onnx(sys.argv[1])\n"
        "p.compile(mxc.get_target('cpu'))\n"
        "np.save(sys.argv[3], np.asarray(p.run({'image': np.load(sys.argv[2])})[0]))\n"
    )
    # run outside the repository so that nothing but the installed wheel can be imported
    subprocess.run(
        [str(python), "-c", script, str(tiny_cnn), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        check=True,
        cwd=tmp_path,
    )
    here = mxc.parse_onnx(str(tiny_cnn))
    here.compile(mxc.get_target("cpu"))
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.asarray(here.run({"image": x})[0]))
