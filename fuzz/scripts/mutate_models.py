"""Mutation fuzzing of the mxc command line: ONNX models of the node suite with hostile values
put into their attributes, input shapes and constants, run through `mxc read`, `read --target
cpu`, `params`, `compile` and `run` under an address-space limit, as a user's process would
meet them. Anything but a clean exit or a one-line refusal is a finding: a panic (exit 101), an
abort or signal (`memory allocation of N bytes failed`, SIGSEGV), or a hang of a command that
only compiles. A `run` past the time limit is counted as slow, not as a finding: a model may
legitimately ask for a lot of work.

    .cache/venv/bin/python fuzz/scripts/mutate_models.py --minutes 7.5 --jobs 2 --out /tmp/findings

Findings are written to OUT/<n>/ (model.onnx, command, stderr); the summary groups them by
their first line. Run from the repository root after `cargo build --release`.
"""
import argparse
import collections
import concurrent.futures
import pathlib
import random
import subprocess
import tempfile
import time

import onnx
from onnx import numpy_helper

HOSTILE_INTS = [0, 1, -1, 2, 3, 1 << 20, 10**9, 2**31 - 1, 2**31, 2**32, 2**32 + 1, 2**40, 2**62,
                2**63 - 1, -(2**63), -(2**31)]
HOSTILE_FLOATS = [0.0, -0.0, 1e-30, 1e9, 1e30, 3.4e38, float("inf"), float("-inf"), float("nan")]
COMMANDS = [["read"], ["read", "--target", "cpu"], ["params"], ["compile", "-q", "--no-cache"],
            ["run", "--seed", "1"]]
TIME_LIMIT_S = 15
ADDRESS_SPACE_KIB = 8 * 1024 * 1024


def mutate(model: onnx.ModelProto, rng: random.Random) -> str:
    """Puts one hostile value into the model and says where."""
    g = model.graph
    choices = []
    for n in g.node:
        for a in n.attribute:
            if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS, onnx.AttributeProto.FLOAT,
                          onnx.AttributeProto.FLOATS):
                choices.append(("attribute", n, a))
    for i in g.input:
        if i.type.HasField("tensor_type") and i.type.tensor_type.shape.dim:
            choices.append(("input", None, i))
    for t in g.initializer:
        if t.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.FLOAT):
            choices.append(("constant", None, t))
    if not choices:
        return "nothing to mutate"
    kind, node, item = rng.choice(choices)
    if kind == "attribute":
        if item.type == onnx.AttributeProto.INT:
            item.i = rng.choice(HOSTILE_INTS)
        elif item.type == onnx.AttributeProto.FLOAT:
            item.f = rng.choice(HOSTILE_FLOATS)
        elif item.type == onnx.AttributeProto.INTS and item.ints:
            item.ints[rng.randrange(len(item.ints))] = rng.choice(HOSTILE_INTS)
        elif item.type == onnx.AttributeProto.FLOATS and item.floats:
            item.floats[rng.randrange(len(item.floats))] = rng.choice(HOSTILE_FLOATS)
        return f"{node.op_type}.{item.name}"
    if kind == "input":
        dims = item.type.tensor_type.shape.dim
        d = dims[rng.randrange(len(dims))]
        d.dim_value = rng.choice([v for v in HOSTILE_INTS if v >= 0])
        return f"input {item.name}"
    array = numpy_helper.to_array(item).copy()
    if array.size == 0:
        return "an empty constant"
    flat = array.reshape(-1)
    at = rng.randrange(flat.size)
    if array.dtype.kind == "f":
        flat[at] = rng.choice(HOSTILE_FLOATS)
    else:
        info = __import__("numpy").iinfo(array.dtype)
        flat[at] = min(max(rng.choice(HOSTILE_INTS), info.min), info.max)
    item.CopyFrom(numpy_helper.from_array(array, item.name))
    return f"constant {item.name}"


def run_one(mxc: str, model_path: pathlib.Path, seed: int, workdir: pathlib.Path):
    """Mutates the model, runs one command on it; returns (verdict, command, stderr, model)."""
    rng = random.Random(seed)
    model = onnx.load(str(model_path))
    where = [mutate(model, rng) for _ in range(rng.randint(1, 3))]
    path = workdir / f"m{seed}.onnx"
    onnx.save(model, str(path))
    command = [mxc, *rng.choice(COMMANDS), str(path)]
    if command[1] == "compile":
        command += ["-o", str(workdir / f"m{seed}.mxr")]
    shell = f'ulimit -v {ADDRESS_SPACE_KIB}; exec "$@"'
    try:
        done = subprocess.run(["bash", "-c", shell, "mxc", *command], capture_output=True, text=True,
                              errors="replace", timeout=TIME_LIMIT_S)
        code, stderr = done.returncode, done.stderr
    except subprocess.TimeoutExpired:
        code, stderr = None, ""
    if code is None:
        verdict = "slow" if command[1] == "run" else "hang"
    elif code == 101 or "panicked" in stderr:
        verdict = "panic"
    elif code < 0 or code > 128 or "memory allocation of" in stderr:
        verdict = "abort"
    else:
        verdict = "ok"
    data = model.SerializeToString() if verdict not in ("ok", "slow") else None
    path.unlink(missing_ok=True)
    (workdir / f"m{seed}.mxr").unlink(missing_ok=True)
    return verdict, command[1:-1] if command[1] != "compile" else command[1:-3], where, stderr, data


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=5.0, help="wall time (CPU time: times --jobs)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=36)
    p.add_argument("--models", default=".cache/onnx-backend-tests/node")
    p.add_argument("--mxc", default="target/release/mxc")
    p.add_argument("--out", default="fuzz/artifacts/mutate_models")
    args = p.parse_args()
    models = sorted(pathlib.Path(args.models).glob("*/model.onnx"))
    if not models:
        raise SystemExit(f"no models under {args.models} (scripts/setup.sh fetches them)")
    rng = random.Random(args.seed)
    out = pathlib.Path(args.out)
    counts, findings = collections.Counter(), collections.defaultdict(list)
    end = time.monotonic() + args.minutes * 60
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        pending = set()
        while time.monotonic() < end or pending:
            while time.monotonic() < end and len(pending) < args.jobs:
                pending.add(pool.submit(run_one, args.mxc, rng.choice(models), rng.randrange(1 << 62),
                                        pathlib.Path(tmp)))
            done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for f in done:
                verdict, command, where, stderr, data = f.result()
                counts[verdict] += 1
                if data is None:
                    continue
                first = next((l for l in stderr.splitlines() if "panicked" in l or "memory" in l or l), "")
                key = f"{verdict}: {' '.join(command)}: {first[:160]}"
                n = sum(counts[v] for v in ("panic", "abort", "hang"))
                case = out / str(n)
                case.mkdir(parents=True, exist_ok=True)
                (case / "model.onnx").write_bytes(data)
                (case / "command").write_text(" ".join(["mxc", *command, "model.onnx"]) + "\n")
                (case / "stderr").write_text(stderr)
                findings[key].append(f"{case} ({', '.join(where)})")
    runs = sum(counts.values())
    print(f"{runs} runs in {args.minutes} min x {args.jobs} jobs: " + ", ".join(f"{v} {c}" for v, c in sorted(counts.items())))
    for key, cases in sorted(findings.items()):
        print(f"{len(cases):4}  {key}\n        {cases[0]}")
    raise SystemExit(1 if findings else 0)


if __name__ == "__main__":
    main()
