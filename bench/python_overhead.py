"""What running from Python costs over `mxc perf` (not a test): each model compiled once to an
`.mxr`, then in rounds, each going first in turn, timed by `mxc perf` (its end-to-end median)
and from Python (`mxc.load`, `set_threads`, `program.run` on numpy arrays: the median of as
many runs), on the same inputs (the model's stored test inputs, else seeded ones). Prints the
medians over the rounds and the median of the rounds' ratios Python / `mxc perf` (each round's
pair timed back to back, so that the machine's slower and faster spells cancel).

Usage:
    .cache/venv/bin/python bench/python_overhead.py ~/.cache/mxc-bench-models/{bert_mini,resnet50}/model.onnx \\
        [--threads 1,2] [-n 50] [--rounds 6]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import mxc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_onnxruntime import MXC, model_inputs, mxc_ms  # noqa: E402


def python_ms(program, feeds: dict, runs: int) -> float:
    program.run(feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        program.run(feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("-n", type=int, default=50, help="timed runs per round")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    print(f"{'model':<12} {'threads':>7} {'mxc perf ms':>12} {'python ms':>10} {'python/perf':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            name = model.parent.name
            mxr = Path(tmp) / f"{name}.mxr"
            subprocess.run([str(MXC), "compile", str(model), "-o", str(mxr), "-q"], check=True, capture_output=True)
            feeds = model_inputs(model)
            files = []
            for input_name, value in feeds.items():
                path = Path(tmp) / f"{name}-{len(files)}.npy"
                np.save(path, value)
                files.append((input_name, path))
            for t in threads:
                program = mxc.load(str(mxr))
                program.set_threads(t)
                perf, py = [], []
                for r in range(args.rounds):
                    # alternate which goes first, so that neither always follows the other
                    if r % 2:
                        py.append(python_ms(program, feeds, args.n))
                        perf.append(mxc_ms(mxr, files, t, args.n))
                    else:
                        perf.append(mxc_ms(mxr, files, t, args.n))
                        py.append(python_ms(program, feeds, args.n))
                p, q = statistics.median(perf), statistics.median(py)
                ratio = statistics.median(b / a for a, b in zip(perf, py))
                print(f"{name:<12} {t:>7} {p:>12.3f} {q:>10.3f} {ratio:>12.3f}", flush=True)


if __name__ == "__main__":
    main()
