#!/usr/bin/env bash
# Runs mxc on the real-architecture benchmark models of ../shared/bench-models (torchvision and
# transformers exports with PyTorch reference outputs; making them needs a ~6 GB torch venv,
# so this is not part of the test suite) on both targets, and compares every output with
# PyTorch's (atol 1e-4, rtol 1e-4).
# Usage: scripts/check-bench-models.sh [MODELS_DIR]   (default: ~/.cache/mxc-bench-models,
#        made by ../shared/bench-models/make.sh when missing)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
models=${1:-$HOME/.cache/mxc-bench-models}
[[ -d "$models" ]] || bash ../shared/bench-models/make.sh "$models"
bash scripts/setup.sh >/dev/null
cargo build --release -q
PY=.cache/venv/bin/python
status=0
for dir in "$models"/*/; do
    name=$(basename "$dir")
    args=()
    for f in "$dir"test_data_set_0/input_*.pb; do
        args+=(--input "$("$PY" -c 'import onnx, sys; print(onnx.load_tensor(sys.argv[1]).name)' "$f")=$f")
    done
    for target in ref cpu; do
        out=$(mktemp -d)
        start=$(date +%s.%N)
        if ! target/release/mxc run "$dir/model.onnx" --target "$target" "${args[@]}" -o "$out"; then
            echo "$name [$target]: mxc failed"; status=1; rm -rf "$out"; continue
        fi
        seconds=$(echo "$(date +%s.%N) - $start" | bc)
        "$PY" - "$dir" "$out" "$name [$target] compile+run ${seconds}s:" <<'PY' || status=1
import glob, os, sys
import numpy as np, onnx
from onnx import numpy_helper
case, out, label = sys.argv[1:]
ok = True
for f in sorted(glob.glob(os.path.join(case, "test_data_set_0", "output_*.pb"))):
    t = onnx.load_tensor(f)
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in t.name)
    ref, got = numpy_helper.to_array(t), np.load(os.path.join(out, name + ".npy"))
    close = got.shape == ref.shape and np.allclose(got, ref, atol=1e-4, rtol=1e-4)
    print(f"{label} {t.name}: max |diff| {np.abs(got.astype(np.float64) - ref).max():.3g}, {'ok' if close else 'MISMATCH'}")
    ok &= close
sys.exit(0 if ok else 1)
PY
        rm -rf "$out"
    done
done
exit $status
