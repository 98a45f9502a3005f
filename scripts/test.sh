#!/usr/bin/env bash
# Set up the machine (which builds the Python wheel and installs it into .cache/venv), then
# run the whole test suite, the Python module's tests (pytest python/tests: the API, the
# wheel in a fresh venv, the Ray Serve example), the runtime's tests again with HIP linked
# instead of loaded (the `hip-sys` feature, against Debian's libamdhip64-dev), and a short run
# of every fuzz target (15 s each, scripts/fuzz.sh; any crash fails). Arguments go to `cargo
# test`, e.g. `scripts/test.sh -p mxc-dialects` or `scripts/test.sh -- onnx_node`; a run with
# arguments is a selection of the cargo tests and does none of the last three.
# The LLVM/MLIR prefixes and $HIP_PATH come from .cargo/config.toml.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
cargo test --release --workspace "$@"
if (( $# == 0 )); then
    .cache/venv/bin/python -m pytest -q python/tests
    cargo test --release -p mxc-kernels --features hip-sys
    bash scripts/fuzz.sh 15s
fi
