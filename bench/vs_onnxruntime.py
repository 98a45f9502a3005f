"""Run-time benchmark (not a test): mxc against onnxruntime on the same models and inputs,
at each thread count asked for, in one session. Each model is compiled once to a `.mxr`;
then the two are measured in alternating rounds (onnxruntime's N timed runs, then mxc's, R
times over), so that a slow spell of a shared machine falls on both rather than on one.
Prints, per model and thread count, the median over the rounds of each one's median time and
the median of the rounds' ratios; mxc's times are `mxc perf`'s end-to-end medians.

Inputs come from the model's `test_data_set_0/input_*.pb` when it has one, else seeded
random values. Usage:
    .cache/venv/bin/python bench/vs_onnxruntime.py MODEL.onnx... [--threads 1,2] [-n 20] [--rounds 5]
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


def serve_onnxruntime(model_path: Path, pairs: list, threads: int) -> None:
    """The worker process: one session (after a warm-up run); each line of stdin is a number
    of runs to time, answered with their median in ms."""
    inputs = {name: np.load(path) for name, path in (str(p).split("=", 1) for p in pairs)}
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    session.run(None, inputs)
    for line in sys.stdin:
        times = []
        for _ in range(int(line)):
            start = time.perf_counter()
            session.run(None, inputs)
            times.append((time.perf_counter() - start) * 1e3)
        print(float(np.median(times)), flush=True)


class OnnxruntimeWorker:
    """onnxruntime in a process of its own, so that no thread of it (ORT's spin after a run)
    competes with mxc's measurement; it keeps its session between rounds."""

    def __init__(self, model_path: Path, input_files: list, threads: int):
        args = [sys.executable, __file__, "--onnxruntime-worker", str(threads), str(model_path)]
        args += [f"{name}={path}" for name, path in input_files]
        self.process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def median_ms(self, runs: int) -> float:
        self.process.stdin.write(f"{runs}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            sys.exit("the onnxruntime worker stopped")
        return float(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def mxc_compile(model_path: Path, mxr: Path) -> None:
    done = subprocess.run([str(MXC), "compile", str(model_path), "-o", str(mxr), "-q"], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"mxc compile {model_path} failed:\n{done.stderr}")


def mxc_ms(mxr: Path, input_files: list, threads: int, runs: int) -> float:
    args = [str(MXC), "perf", str(mxr), "-n", str(runs), "--threads", str(threads)]
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
    parser.add_argument("-n", type=int, default=20, dest="runs", help="timed runs per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per measurement")
    parser.add_argument("--onnxruntime-worker", type=int, metavar="THREADS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.onnxruntime_worker:
        # MODEL NAME=FILE...: serve timings on stdin
        serve_onnxruntime(args.models[0], args.models[1:], args.onnxruntime_worker)
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
            mxr = Path(work) / "model.mxr"
            mxc_compile(model_path, mxr)
            name = model_path.parent.name if model_path.name == "model.onnx" else model_path.stem
            serial = None
            for threads in thread_counts:
                worker = OnnxruntimeWorker(model_path, files, threads)
                theirs, ours = [], []
                for _ in range(args.rounds):
                    theirs.append(worker.median_ms(args.runs))
                    ours.append(mxc_ms(mxr, files, threads, args.runs))
                worker.close()
                ratio = float(np.median([o / t for o, t in zip(ours, theirs)]))
                ort_ms, mxc_med = float(np.median(theirs)), float(np.median(ours))
                serial = serial or mxc_med
                print(
                    f"{name:<18} {threads:>7} {ort_ms:>15.3f} {mxc_med:>10.3f} {ratio:>8.2f} {serial / mxc_med:>12.2f}x",
                    flush=True,
                )


if __name__ == "__main__":
    main()
