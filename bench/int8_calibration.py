"""Benchmark (not a test) of `mxc compile --int8 --calibration`: an f32 model quantised by mxc
against the same model quantised by onnxruntime's `quantize_static` (QDQ, per-channel s8
weights, u8 activations, MinMax calibration: what a user of onnxruntime runs) on the same
calibration samples, and mxc's int8 program against mxc's f32 one in speed.

For each model directory (`model.onnx` + `test_data_set_0`, as ../shared/bench-models makes):
  - calibration: N seeded samples (float inputs standard normal, as make_reduced.py's; integer
    inputs uniform over the stored input's range), written in the layout --calibration reads;
  - accuracy: on the stored input and M more seeded ones (none of them a calibration sample),
    each program's largest difference from onnxruntime's f32 outputs over the largest of
    those outputs, the worst over the inputs, for mxc's int8 and onnxruntime's int8 program;
  - speed: `mxc perf` of the f32 and the int8 `.mxr` in alternating rounds, at each thread
    count (the speed-up is f32 time / int8 time; `--rounds 0` skips it).
`--ort-activations s8` quantises onnxruntime's activations as s8 symmetric instead of u8
asymmetric: the error of the other scheme mxc could have chosen (docs/quantisation.md).
Usage:
    .cache/venv/bin/python bench/int8_calibration.py MODEL_DIR... [--samples 8] [--inputs 4]
        [--threads 1,2] [-n 10] [--rounds 3] [--ins-names conv,matmul] [--ort-activations s8]
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
MXC = ROOT / "target" / "release" / "mxc"


def stored_inputs(model_dir: Path, session: ort.InferenceSession) -> dict:
    names = [i.name for i in session.get_inputs()]
    files = sorted((model_dir / "test_data_set_0").glob("input_*.pb"))
    values = []
    for path in files:
        proto = onnx.TensorProto()
        proto.ParseFromString(path.read_bytes())
        values.append(numpy_helper.to_array(proto))
    return dict(zip(names, values))


def random_like(template: dict, rng: np.random.Generator) -> dict:
    out = {}
    for name, value in template.items():
        if np.issubdtype(value.dtype, np.floating):
            out[name] = rng.standard_normal(value.shape).astype(value.dtype)
        else:
            out[name] = rng.integers(value.min(), value.max() + 1, size=value.shape).astype(value.dtype)
    return out


def relative_error(expected: list, got: list) -> float:
    worst = 0.0
    for e, g in zip(expected, got):
        scale = float(np.abs(e).max()) or 1.0
        worst = max(worst, float(np.abs(e.astype(np.float64) - g.astype(np.float64)).max()) / scale)
    return worst


def mxc(*args: str) -> str:
    done = subprocess.run([str(MXC), *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"mxc {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout + done.stderr


def mxc_outputs(mxr: Path, inputs: dict, work: Path, names: list) -> list:
    args = ["run", str(mxr), "-o", str(work / "out")]
    for name, value in inputs.items():
        path = work / f"in_{name}.npy"
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    mxc(*args)
    return [np.load(work / "out" / f"{re.sub(r'[^A-Za-z0-9._-]', '_', n)}.npy") for n in names]


def perf_ms(mxr: Path, threads: int, runs: int) -> float:
    out = mxc("perf", str(mxr), "-n", str(runs), "--threads", str(threads))
    return float(re.search(r"median ([0-9.]+) ms", out).group(1))


def onnxruntime_int8(model: Path, samples: list, target: Path, activations: str) -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples)

        def get_next(self):
            return next(self.it, None)

    pre = target.with_suffix(".pre.onnx")
    quant_pre_process(str(model), str(pre))
    scheme = {
        "u8": dict(activation_type=QuantType.QUInt8),
        "s8": dict(activation_type=QuantType.QInt8, extra_options={"ActivationSymmetric": True}),
    }[activations]
    quantize_static(str(pre), str(target), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    weight_type=QuantType.QInt8, **scheme)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--inputs", type=int, default=4, help="inputs the errors are measured on")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("-n", type=int, default=10, dest="runs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ins-names", default="", help="--int8-ops for mxc (default: every conv and product)")
    parser.add_argument("--ort-activations", choices=["u8", "s8"], default="u8")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    print(f"{'model':<16} {'ort int8 err':>12} {'mxc int8 err':>12} {'mxc/ort err':>11} "
          + " ".join(f"{f'{t}t f32/int8':>13}" for t in threads) + "  quantised")
    for model_dir in args.models:
        model = model_dir / "model.onnx"
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            f32 = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
            names = [o.name for o in f32.get_outputs()]
            template = stored_inputs(model_dir, f32)
            rng = np.random.default_rng(0)
            samples = [random_like(template, rng) for _ in range(args.samples)]
            for k, sample in enumerate(samples):
                (work / "calibration" / f"{k:03}").mkdir(parents=True)
                for name, value in sample.items():
                    np.save(work / "calibration" / f"{k:03}" / f"{name}.npy", value)
            onnxruntime_int8(model, samples, work / "ort_int8.onnx", args.ort_activations)
            theirs = ort.InferenceSession(str(work / "ort_int8.onnx"), providers=["CPUExecutionProvider"])
            plain, quantised = work / "f32.mxr", work / "int8.mxr"
            mxc("compile", str(model), "-o", str(plain), "-q")
            flags = ["--int8", "--calibration", str(work / "calibration")]
            if args.ins_names:
                flags = ["--int8-ops", args.ins_names, "--calibration", str(work / "calibration")]
            mxc("compile", str(model), "-o", str(quantised), "-q", *flags)
            precision = re.search(r"precision: (.*?) \(docs", mxc("params", str(quantised)))
            eval_rng = np.random.default_rng(1)
            inputs = [template] + [random_like(template, eval_rng) for _ in range(args.inputs - 1)]
            ort_err = mxc_err = 0.0
            for x in inputs:
                expected = f32.run(None, x)
                ort_err = max(ort_err, relative_error(expected, theirs.run(None, x)))
                mxc_err = max(mxc_err, relative_error(expected, mxc_outputs(quantised, x, work, names)))
            speedups = []
            for t in threads if args.rounds > 0 else []:
                ratios = []
                for _ in range(args.rounds):
                    ratios.append(perf_ms(plain, t, args.runs) / perf_ms(quantised, t, args.runs))
                speedups.append(statistics.median(ratios))
            print(f"{model_dir.name:<16} {ort_err:>12.4f} {mxc_err:>12.4f} {mxc_err / ort_err:>11.2f} "
                  + " ".join(f"{s:>12.2f}x" for s in speedups)
                  + f"  {precision.group(1) if precision else '?'}", flush=True)


if __name__ == "__main__":
    main()
