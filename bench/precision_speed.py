"""Run-time benchmark (not a test): an f32 model compiled as it is and with each of the
precision flags given (`--fp16`, `--bf16`, ...), timed in alternating rounds in one session so
that a slow spell of a shared machine falls on all of them. Each variant is compiled once to
a `.mxr`; each round runs `mxc perf` on every variant in turn. Prints, per model and thread
count, the median over the rounds of each variant's end-to-end median and of the rounds'
ratios against the plain compile (above 1: the variant is faster). docs/quantisation.md says
what the flags compute; bench/accuracy.py how far their answers move. Usage:
    .cache/venv/bin/python bench/precision_speed.py MODEL.onnx... [--flags=--fp16,--bf16]
        [--threads 1,2] [-n 10] [--rounds 5]
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MXC = ROOT / "target" / "release" / "mxc"


def perf_ms(mxr: Path, threads: int, runs: int) -> float:
    """`mxc perf`'s end-to-end median in ms."""
    out = subprocess.run(
        [str(MXC), "perf", str(mxr), "-n", str(runs), "--threads", str(threads)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    match = re.search(r"median ([0-9.]+) ms", out)
    if not match:
        sys.exit(f"no median in `mxc perf {mxr}`'s output:\n{out}")
    return float(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--flags", default="--fp16,--bf16", help="comma-separated precision flags")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("-n", type=int, default=10, help="runs per `mxc perf`")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    variants = [""] + [f for f in args.flags.split(",") if f]
    threads = [int(t) for t in args.threads.split(",")]
    header = "".join(f"{(v or 'f32') + ' ms':>12}" for v in variants)
    ratios = "".join(f"{'f32/' + v.lstrip('-'):>14}" for v in variants[1:])
    print(f"{'model':<22}{'threads':>8}{header}{ratios}")
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            files = []
            for v in variants:
                mxr = Path(tmp) / f"{model.parent.name}{v.replace('-', '_')}.mxr"
                command = [str(MXC), "compile", str(model), "-o", str(mxr), "-q"] + ([v] if v else [])
                subprocess.run(command, check=True, capture_output=True)
                files.append(mxr)
            for t in threads:
                times = [[] for _ in variants]
                for _ in range(args.rounds):
                    for i, mxr in enumerate(files):
                        times[i].append(perf_ms(mxr, t, args.n))
                medians = "".join(f"{statistics.median(ts):>12.2f}" for ts in times)
                speedups = "".join(
                    f"{statistics.median(p / v for p, v in zip(times[0], ts)):>14.2f}" for ts in times[1:]
                )
                name = model.parent.name if model.name == "model.onnx" else model.stem
                print(f"{name:<22}{t:>8}{medians}{speedups}", flush=True)


if __name__ == "__main__":
    main()
