#!/usr/bin/env bash
# First look at mxc: set up the machine, build, then read, compile and run the
# example model shipped in examples/tiny_cnn.onnx.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
MXC="$TARGET_DIR/release/mxc"
MODEL=examples/tiny_cnn.onnx

step() { printf '\n==> %s\n' "$*"; }

step "scripts/setup.sh"
bash scripts/setup.sh

step "cargo build --release -p mxc -p mxc-runner"
cargo build --release -p mxc -p mxc-runner   # mxc, and mxc-runner (runs .mxr files, no LLVM)

step "mxc read $MODEL"
"$MXC" read "$MODEL"

step "mxc compile $MODEL -o $TARGET_DIR/tiny_cnn.mxr --target cpu"
"$MXC" compile "$MODEL" -o "$TARGET_DIR/tiny_cnn.mxr" --target cpu

step "mxc run $MODEL --target cpu"
"$MXC" run "$MODEL" --target cpu

step "mxc run $TARGET_DIR/tiny_cnn.mxr (the compiled file: no compilation at load)"
"$MXC" run "$TARGET_DIR/tiny_cnn.mxr"
