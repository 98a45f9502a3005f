#!/usr/bin/env bash
# Set up the machine, then run the whole test suite. Arguments go to
# `cargo test`, e.g. `scripts/test.sh -p mxc-dialects` or `scripts/test.sh -- onnx_node`.
# The LLVM/MLIR prefixes come from .cargo/config.toml.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
exec cargo test --release --workspace "$@"
