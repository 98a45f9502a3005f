"""Run-time benchmark (not a test): mxc against onnxruntime on the same models and inputs,
at each thread count asked for, in one session. Prints the median of N timed runs of each
(after a warm-up run) and their ratio; mxc's times are `mxc perf`'s end-to-end medians.

Inputs come from the model's `test_data_set_0/input_*.pb` when it has one, else seeded
random values. Usage:
    .cache/venv/bin/python bench/vs_onnxruntime.py MODEL.onnx... [--threads 1,2] [-n 20]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
MXC = ROOT / "target" / "release" / "mxc"


def model_inputs(model_path: Path) -> dict:
    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    stored = sorted((model_path.parent / "test_data_set_0").glob("input_*.pb"))
    if stored:
        tensors = []
        for path in stored:
            proto = onnx.TensorProto()
            proto.ParseFromString(path.read_bytes())
            tensors.append(numpy_helper.to_array(proto))
        return dict(zip(names, tensors))
    rng = np.random.default_rng(0)
    values = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        t = value.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        values[value.name] = rng.standard_normal(shape).astype(dtype)
    return values


def onnxruntime_ms(model_path: Path, inputs: dict, threads: int, runs: int) -> float:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    session.run(None, inputs)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, inputs)
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def onnxruntime_ms_alone(model_path: Path, input_files: list, threads: int, runs: int) -> float:
    """`onnxruntime_ms` in a process of its own, so that no thread of one measurement (ORT's
    spin after a run) competes with the next."""
    args = [sys.executable, __file__, "--onnxruntime-only", str(threads), "-n", str(runs), str(model_path)]
    args += [f"{name}={path}" for name, path in input_files]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return float(out)


def mxc_ms(model_path: Path, input_files: list, threads: int, runs: int) -> float:
    args = [str(MXC), "perf", str(model_path), "-n", str(runs), "--threads", str(threads)]
    for name, path in input_files:
        args += ["--input", f"{name}={path}"]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    match = re.search(r"median ([0-9.]+) ms", out)
    if not match:
        sys.exit(f"mxc perf printed no median:\n{out}")
    return float(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--threads", default=f"1,{os.cpu_count()}")
    parser.add_argument("-n", type=int, default=20, dest="runs")
    parser.add_argument("--onnxruntime-only", type=int, metavar="THREADS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.onnxruntime_only:
        # MODEL NAME=FILE...: one measurement, in this process
        pairs = (str(arg).split("=", 1) for arg in args.models[1:])
        inputs = {name: np.load(path) for name, path in pairs}
        print(onnxruntime_ms(args.models[0], inputs, args.onnxruntime_only, args.runs))
        return
    thread_counts = sorted({int(t) for t in args.threads.split(",")})
    if not MXC.exists():
        sys.exit(f"{MXC} is missing: run `cargo build --release` first")
    print(f"{'model':<18} {'threads':>7} {'onnxruntime ms':>15} {'mxc ms':>10} {'mxc/ort':>8} {'mxc speed-up':>13}")
    with tempfile.TemporaryDirectory() as work:
        for model_path in args.models:
            inputs = model_inputs(model_path)
            files = []
            for i, (name, value) in enumerate(inputs.items()):
                path = Path(work) / f"input_{i}.npy"
                np.save(path, value)
                files.append((name, path))
            name = model_path.parent.name if model_path.name == "model.onnx" else model_path.stem
            serial = None
            for threads in thread_counts:
                ort_ms = onnxruntime_ms_alone(model_path, files, threads, args.runs)
                ours = mxc_ms(model_path, files, threads, args.runs)
                serial = serial or ours
                print(
                    f"{name:<18} {threads:>7} {ort_ms:>15.3f} {ours:>10.3f} {ours / ort_ms:>8.2f} {serial / ours:>12.2f}x",
                    flush=True,
                )


if __name__ == "__main__":
    main()
