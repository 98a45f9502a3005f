"""Dynamic-shape benchmark (not a test): one `.mxr` compiled for a model's dynamic dimensions
against files compiled for each size alone and against onnxruntime, at each point of sizes
asked for, in one session. The dynamic file is compiled once, as a user would: with no
`--shape` (each `dim_param` a symbol of the default range, narrowed to what the model reads),
or with the `--shape` arguments given (narrower ranges, optimal sizes); a fixed-size file is
compiled per point. Then, per point, the dynamic file's outputs are checked against
onnxruntime's and the three are timed in alternating rounds (onnxruntime, the fixed-size
file, the dynamic file; `mxc perf` end-to-end medians). Prints the medians and the ratios
dynamic/fixed and dynamic/onnxruntime. A model whose dimensions are fixed gets one made a
`dim_param` with `--make-dynamic INPUT:AXIS:NAME` (and the outputs' dimension of the same size
at that axis).

Usage:
    .cache/venv/bin/python bench/dynamic_shapes.py MODEL.onnx --at batch=1,sequence=7 --at batch=2,sequence=64 \\
        [--shape 'input_ids=batchxsequence[1..512]{128}' ...] [--threads 2] [-n 20] [--rounds 3]
    .cache/venv/bin/python bench/dynamic_shapes.py ~/.cache/mxc-bench-models/resnet50/model.onnx \\
        --make-dynamic input:0:N --at N=1 --at N=3 --at N=5
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_onnxruntime import MXC, OnnxruntimeWorker, mxc_ms  # noqa: E402


def make_dynamic(model_path: Path, spec: str, out: Path) -> None:
    """The model with input INPUT's dimension AXIS a dim_param NAME (`spec`: INPUT:AXIS:NAME),
    and each output's dimension of the same size at that axis."""
    input_name, axis, name = spec.split(":")
    axis = int(axis)
    model = onnx.load(str(model_path))
    value = next(v for v in model.graph.input if v.name == input_name)
    size = value.type.tensor_type.shape.dim[axis].dim_value
    for v in [value, *model.graph.output]:
        d = v.type.tensor_type.shape.dim
        if len(d) > axis and d[axis].dim_value == size:
            d[axis].ClearField("dim_value")
            d[axis].dim_param = name
    onnx.save(model, str(out))


def input_shapes(model_path: Path, sizes: dict) -> dict:
    """Each input's shape at `sizes` (by dim_param; a dim_param not given is 1)."""
    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    shapes = {}
    for v in model.graph.input:
        if v.name in initializers:
            continue
        dims = v.type.tensor_type.shape.dim
        shapes[v.name] = (
            [sizes.get(d.dim_param, 1) if d.dim_param else d.dim_value for d in dims],
            onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type),
        )
    return shapes


def random_inputs(shapes: dict, rng) -> dict:
    """Floats normal, integers 0 or 1 (token ids, masks and segment ids alike)."""
    values = {}
    for name, (shape, dtype) in shapes.items():
        if np.issubdtype(dtype, np.floating):
            values[name] = rng.standard_normal(shape).astype(dtype)
        else:
            values[name] = rng.integers(0, 2, shape).astype(dtype)
    return values


def run(args: list, refusal_ok: bool = False):
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
    parser.add_argument("--at", action="append", required=True, help="a point of sizes, e.g. batch=1,sequence=7")
    parser.add_argument("--shape", action="append", default=[], help="an mxc --shape for the dynamic file")
    parser.add_argument("--make-dynamic", help="INPUT:AXIS:NAME, for a model of fixed shapes")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("-n", type=int, default=20, dest="runs")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    points = [{k: int(v) for k, v in (kv.split("=") for kv in at.split(","))} for at in args.at]
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        model = args.model
        if args.make_dynamic:
            model = work / "dynamic.onnx"
            make_dynamic(args.model, args.make_dynamic, model)
        dynamic = work / "dynamic.mxr"
        given = [a for s in args.shape for a in ("--shape", s)]
        said = run(["compile", str(model), *given, "-o", str(dynamic)])
        for line in said.splitlines():
            if ": " in line and not line.startswith(str(dynamic) + " ("):
                print(line.split(": ", 1)[1])
        print(f"{'sizes':>22} {'max |mxc-ort|':>14} {'onnxruntime ms':>15} {'fixed ms':>10} {'dynamic ms':>11} {'dyn/fixed':>10} {'dyn/ort':>8}")
        rng = np.random.default_rng(0)
        session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        for i, sizes in enumerate(points):
            label = ",".join(f"{k}={v}" for k, v in sizes.items())
            shapes = input_shapes(model, sizes)
            values = random_inputs(shapes, rng)
            files = []
            for j, (name, value) in enumerate(values.items()):
                path = work / f"in{i}_{j}.npy"
                np.save(path, value)
                files.append((name, path))
            fixed = work / f"fixed{i}.mxr"
            fixed_shapes = [a for n, (s, _) in shapes.items() for a in ("--shape", f"{n}={'x'.join(map(str, s))}")]
            run(["compile", str(model), *fixed_shapes, "-o", str(fixed), "-q"])
            out = work / f"out{i}"
            inputs = [a for name, path in files for a in ("--input", f"{name}={path}")]
            if run(["run", str(dynamic), *inputs, "-o", str(out)], refusal_ok=True) is None:
                print(f"{label:>22} the dynamic file refuses these sizes (mxc run says why)", flush=True)
                continue
            expected = session.run(None, values)
            names = [o.name for o in session.get_outputs()]
            diff = max(float(np.max(np.abs(np.load(out / f"{n}.npy") - e))) for n, e in zip(names, expected))
            worker = OnnxruntimeWorker(model, files, args.threads)
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
                f"{label:>22} {diff:>14.2e} {med(theirs):>15.3f} {med(fixed_ms):>10.3f} {med(dynamic_ms):>11.3f} {per_fixed:>10.2f} {per_ort:>8.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
