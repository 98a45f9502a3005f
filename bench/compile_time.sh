#!/usr/bin/env bash
# Compile-time benchmark (not a test): compiles synthetic models of 100, 1,000 and 10,000
# nodes and the repo's real models for a target, 3 times each, and prints the median wall
# time and the time per ONNX node (cold: --no-cache). Compile time per node should stay about flat.
# Usage: bench/compile_time.sh [ref|cpu]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
target=${1:-cpu}
bash scripts/setup.sh >/dev/null
cargo build --release -q
PY=.cache/venv/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
models=()
for n in 100 1000 10000; do
    "$PY" bench/synthetic_model.py "$n" "$work/synthetic_$n.onnx"
    models+=("$work/synthetic_$n.onnx")
done
models+=(.cache/models/convnet/model.onnx .cache/models/encoder/model.onnx)
printf '%-22s %8s %12s %14s\n' model nodes "median s" "ms per node"
for m in "${models[@]}"; do
    nodes=$("$PY" -c 'import onnx, sys; print(len(onnx.load(sys.argv[1]).graph.node))' "$m")
    times=()
    for _ in 1 2 3; do
        start=$(date +%s.%N)
        target/release/mxc compile "$m" -o "$work/out.mxr" --target "$target" --no-cache
        times+=("$(echo "$(date +%s.%N) - $start" | bc)")
    done
    median=$(printf '%s\n' "${times[@]}" | sort -g | sed -n 2p)
    name=$(basename "$(dirname "$m")")
    [[ "$m" == "$work"/* ]] && name=$(basename "$m" .onnx)
    printf '%-22s %8d %12.3f %14.3f\n' "$name" "$nodes" "$median" "$(echo "$median * 1000 / $nodes" | bc -l)"
done
