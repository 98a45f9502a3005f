"""How far mxc's outputs are from the expected ones (a measurement, not a test): for each model
directory in the ONNX backend-test layout (`DIR/model.onnx`, `DIR/test_data_set_0/input_*.pb`
and `output_*.pb`: for the reduced-precision variants of `make_reduced.py`, onnxruntime's
outputs), compiles the model with `mxc compile` and the flags given, runs it on the stored
inputs and prints, per output, the largest absolute difference, the largest magnitude of the
expected output and their ratio (the issue's measure: "no further than 5e-3 of the output's
largest magnitude").

`--expected DIR` takes the expected outputs from another directory of the same layout (the fp32
model's, to see what `--fp16` or `--bf16` does to a model's answers). Usage:
    .cache/venv/bin/python bench/accuracy.py DIR... [--flags="--bf16"] [--expected-from fp32]
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
MXC = ROOT / "target" / "release" / "mxc"


def read_pb(path: Path) -> np.ndarray:
    proto = onnx.TensorProto()
    proto.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(proto)


def graph_inputs(model: Path) -> list:
    m = onnx.load(str(model), load_external_data=False)
    initializers = {i.name for i in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in initializers], [o.name for o in m.graph.output]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--flags", default="", help="extra `mxc compile` flags, e.g. --flags=--bf16")
    parser.add_argument("--expected", type=Path, help="a directory whose test_data_set_0 holds the expected outputs")
    args = parser.parse_args()
    if not MXC.exists():
        sys.exit(f"{MXC} is missing: run `cargo build --release` first")
    print(f"{'model':<24} {'output':<18} {'max |diff|':>12} {'max |expected|':>15} {'ratio':>10}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        for d in args.dirs:
            model = d / "model.onnx"
            ins, outs = graph_inputs(model)
            mxr = work / "m.mxr"
            compile_args = [str(MXC), "compile", str(model), "-o", str(mxr), "-q", *args.flags.split()]
            done = subprocess.run(compile_args, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"mxc compile {model} failed:\n{done.stderr}")
            run = [str(MXC), "run", str(mxr), "-o", str(work / "out")]
            for j, name in enumerate(ins):
                path = work / f"in{j}.npy"
                np.save(path, read_pb(d / "test_data_set_0" / f"input_{j}.pb"))
                run += ["--input", f"{name}={path}"]
            done = subprocess.run(run, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"mxc run {mxr} failed:\n{done.stderr}")
            source = args.expected or d
            for j, name in enumerate(outs):
                expected = read_pb(source / "test_data_set_0" / f"output_{j}.pb").astype(np.float64)
                got = np.load(work / "out" / f"{name}.npy").astype(np.float64)
                diff = float(np.max(np.abs(got - expected)))
                scale = float(np.max(np.abs(expected)))
                ratio = diff / scale if scale else diff
                worst = max(worst, ratio)
                print(f"{d.name:<24} {name:<18} {diff:>12.3e} {scale:>15.4g} {ratio:>10.2e}", flush=True)
    print(f"worst ratio: {worst:.2e}")


if __name__ == "__main__":
    main()
