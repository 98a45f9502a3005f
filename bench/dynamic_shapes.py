"""Dynamic-shape benchmark (not a test): one `.mxr` compiled with a symbolic dimension against
files compiled for each size alone and against onnxruntime, at each size asked for, in one
session. The model's input dimension is made a `dim_param` (and the outputs' dimension of the
same size at that axis) unless it is one, the dynamic file compiled once with `--shape NAME=...SYMBOL...`, a
fixed-size file compiled per size; then, per size, the dynamic file's outputs are checked
against onnxruntime's and the three are timed in alternating rounds (onnxruntime, the
fixed-size file, the dynamic file; `mxc perf` end-to-end medians). Prints the medians and the
ratios dynamic/fixed and dynamic/onnxruntime.

Usage:
    .cache/venv/bin/python bench/dynamic_shapes.py MODEL.onnx --input input --axis 0 \\
        --symbol 'n[1..16]{1,8}' --sizes 1,3,8,16 [--threads 2] [-n 20] [--rounds 3]
    .cache/venv/bin/python bench/dynamic_shapes.py ~/.cache/mxc-bench-models/bert_mini_dynamic/model.onnx \\
        --input input_ids --axis 1 --symbol 's[1..512]{1,7,128,512}' --sizes 1,7,128,512
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_onnxruntime import MXC, OnnxruntimeWorker, mxc_ms  # noqa: E402


def make_dynamic(model_path: Path, input_name: str, axis: int, out: Path) -> list:
    """The model with `input_name`'s dimension `axis` a dim_param (and each output's dimension
    of the same size at that axis), unless it is one already; returns the input's declared
    dimensions (a dim_param as 1)."""
    model = onnx.load(str(model_path))
    value = next(v for v in model.graph.input if v.name == input_name)
    dims = value.type.tensor_type.shape.dim
    if not dims[axis].dim_param:
        size = dims[axis].dim_value
        for v in [value, *model.graph.output]:
            d = v.type.tensor_type.shape.dim
            if len(d) > axis and d[axis].dim_value == size:
                d[axis].ClearField("dim_value")
                d[axis].dim_param = "dynamic"
    onnx.save(model, str(out))
    return [d.dim_value or 1 for d in dims]


def random_inputs(model_path: Path, input_name: str, shape: list, axis: int, size: int, rng) -> dict:
    """A value for every input: the symbolic dimension (the dim_param of `input_name`'s axis,
    wherever it appears) at `size`, another dim_param as `input_name`'s dimension `shape` gives
    where it has it, else 1; floats normal, integers 0 or 1."""
    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in initializers]
    dims = next(v for v in inputs if v.name == input_name).type.tensor_type.shape.dim
    params = {d.dim_param: n for d, n in zip(dims, shape) if d.dim_param}
    params[dims[axis].dim_param] = size
    values = {}
    for v in inputs:
        t = v.type.tensor_type
        shape = [params.get(d.dim_param, 1) if d.dim_param else d.dim_value for d in t.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if np.issubdtype(dtype, np.floating):
            values[v.name] = rng.standard_normal(shape).astype(dtype)
        else:
            values[v.name] = rng.integers(0, 2, shape).astype(dtype)
    return values


def run(args: list, refusal_ok: bool = False) -> str:
    """`mxc ARGS`' stderr; a failure ends the benchmark unless `refusal_ok` (then None)."""
    done = subprocess.run([str(MXC), *args], capture_output=True, text=True)
    if done.returncode != 0:
        if refusal_ok:
            return None
        sys.exit(f"mxc {' '.join(args)} failed:\n{done.stderr}")
    return done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--input", required=True, help="the input whose dimension is symbolic")
    parser.add_argument("--axis", type=int, required=True)
    parser.add_argument("--symbol", required=True, help="the dimension, e.g. n[1..16]{1,8}")
    parser.add_argument("--sizes", required=True, help="sizes to run, e.g. 1,3,8,16")
    parser.add_argument("--dims", help="the input's other dimensions where the model leaves them open, e.g. 1,128")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("-n", type=int, default=20, dest="runs")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        dynamic_onnx = work / "dynamic.onnx"
        shape = make_dynamic(args.model, args.input, args.axis, dynamic_onnx)
        if args.dims:
            shape = [int(d) for d in args.dims.split(",")]
        dims = [str(d) for d in shape]
        dims[args.axis] = args.symbol
        dynamic = work / "dynamic.mxr"
        said = run(["compile", str(dynamic_onnx), "--shape", f"{args.input}={','.join(dims)}", "-o", str(dynamic), "-q"])
        for line in said.splitlines():
            if "independent items" in line or "only at the compiled sizes" in line:
                print(line.split(": ", 1)[1])
        print(f"{'size':>5} {'max |mxc-ort|':>14} {'onnxruntime ms':>15} {'fixed ms':>10} {'dynamic ms':>11} {'dyn/fixed':>10} {'dyn/ort':>8}")
        rng = np.random.default_rng(0)
        for size in sizes:
            shape_n = list(shape)
            shape_n[args.axis] = size
            values = random_inputs(dynamic_onnx, args.input, shape, args.axis, size, rng)
            files = []
            for i, (name, value) in enumerate(values.items()):
                path = work / f"in{size}_{i}.npy"
                np.save(path, value)
                files.append((name, path))
            fixed = work / f"fixed{size}.mxr"
            shape_text = ",".join(str(d) for d in shape_n)
            run(["compile", str(dynamic_onnx), "--shape", f"{args.input}={shape_text}", "-o", str(fixed), "-q"])
            out = work / f"out{size}"
            given = [a for name, path in files for a in ("--input", f"{name}={path}")]
            if run(["run", str(dynamic), *given, "-o", str(out)], refusal_ok=True) is None:
                print(f"{size:>5} the dynamic file refuses this size (mxc run says why)", flush=True)
                continue
            session = ort.InferenceSession(str(dynamic_onnx), providers=["CPUExecutionProvider"])
            expected = session.run(None, values)
            names = [o.name for o in session.get_outputs()]
            diff = max(float(np.max(np.abs(np.load(out / f"{n}.npy") - e))) for n, e in zip(names, expected))
            worker = OnnxruntimeWorker(dynamic_onnx, files, args.threads)
            theirs, fixed_ms, dynamic_ms = [], [], []
            for _ in range(args.rounds):
                theirs.append(worker.median_ms(args.runs))
                fixed_ms.append(mxc_ms(fixed, files, args.threads, args.runs))
                dynamic_ms.append(mxc_ms(dynamic, files, args.threads, args.runs))
            worker.close()
            med = lambda xs: float(np.median(xs))  # noqa: E731
            per_fixed = med([d / f for d, f in zip(dynamic_ms, fixed_ms)])
            per_ort = med([d / t for d, t in zip(dynamic_ms, theirs)])
            print(
                f"{size:>5} {diff:>14.2e} {med(theirs):>15.3f} {med(fixed_ms):>10.3f} {med(dynamic_ms):>11.3f} {per_fixed:>10.2f} {per_ort:>8.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
