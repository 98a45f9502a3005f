#!/usr/bin/env bash
# Prepare a machine to build and test mxc. Idempotent: each step checks
# whether its result is already there and skips itself if so.
#
#   1. LLVM/MLIR 22, ROCm's device libraries and HIP runtime from Debian's apt (only the
#      packages that are missing)
#   2. a Python venv in .cache/venv with onnx, onnxruntime, numpy, pytest, maturin, Ray
#      Serve and onnxconverter-common (pinned; Ray for the serving example's test,
#      onnxconverter-common for the fp16 models the quantisation tests compare with)
#   3. the ONNX backend test data (node, simple, pytorch-*) in .cache/onnx-backend-tests
#   4. the generated test models in .cache/models/<name>
#   5. the nightly Rust toolchain and cargo-fuzz, for the fuzz targets in fuzz/
#   6. NVIDIA's libdevice and ptxas for the gpu target's PTX, from the PyPI wheel
#      nvidia-cuda-nvcc-cu12, in $XDG_CACHE_HOME/mxc/nvidia (else ~/.cache/mxc/nvidia)
#   7. the Python module: the wheel built from python/ (maturin) into target/wheels and
#      installed into the venv (docs/python.md)
#
# Environment:
#   MXC_PYTHON   interpreter used to create the venv (default: python3)
#   MXC_QUIET=1  print only what is done, not what is skipped
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
VENV="$CACHE/venv"
PY="$VENV/bin/python"

APT_PACKAGES=(
    llvm-22-dev libmlir-22-dev mlir-22-tools libpolly-22-dev libzstd-dev
    clang-22 lld-22 libclang-22-dev llvm-22-tools
    rocm-device-libs libamdhip64-dev
)
PIP_PACKAGES=(onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6 pytest==9.2.0 maturin==1.16.0 "ray[serve]==2.60.0" onnxconverter-common==1.16.0)
NVCC_WHEEL=nvidia-cuda-nvcc-cu12==12.9.86
# The backend test data comes from this onnx release's wheel; the data is the
# same in every wheel, so one fixed platform tag is used.
BACKEND_ONNX_VERSION=1.22.0
BACKEND_DIRS=(node simple pytorch-converted pytorch-operator)
MODELS=(convnet encoder microsoft_ops control_flow quantised)
CARGO_FUZZ_VERSION=0.13.2

say() { printf 'setup: %s\n' "$*"; }
skip() { [[ "${MXC_QUIET:-0}" == 1 ]] || say "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [[ "$(id -u)" == 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

mkdir -p "$CACHE"
export PYTHONDONTWRITEBYTECODE=1

# --- 1. apt packages ----------------------------------------------------------
apt_missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
        apt_missing+=("$pkg")
    fi
done
if (( ${#apt_missing[@]} > 0 )); then
    say "installing apt packages: ${apt_missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -q
    as_root apt-get install -y -q "${apt_missing[@]}" </dev/null
else
    skip "apt packages present"
fi
for f in /usr/lib/llvm-22/bin/llvm-config /usr/lib/llvm-22/lib/libMLIR.so; do
    [[ -e "$f" ]] || die "$f is missing after installing the LLVM packages"
done

# --- 2. Python venv -----------------------------------------------------------
venv_stamp="$VENV/.mxc-stamp"
venv_want="${PIP_PACKAGES[*]}"
if [[ ! -f "$venv_stamp" || "$(cat "$venv_stamp")" != "$venv_want" ]] || ! "$PY" -c "" 2>/dev/null; then
    say "creating venv $VENV (${venv_want})"
    rm -rf "$VENV"
    base_python="${MXC_PYTHON:-python3}"
    command -v "$base_python" >/dev/null 2>&1 || die "no $base_python found"
    if ! "$base_python" -m venv "$VENV"; then
        # Debian's own python3 needs python3-venv for ensurepip.
        rm -rf "$VENV"
        say "python3 -m venv failed; installing python3-venv"
        export DEBIAN_FRONTEND=noninteractive
        as_root apt-get update -q
        as_root apt-get install -y -q --no-install-recommends python3-venv </dev/null
        "$base_python" -m venv "$VENV"
    fi
    "$PY" -m pip install -q --disable-pip-version-check --no-input "${PIP_PACKAGES[@]}"
    "$PY" -c 'import onnx, onnxruntime, numpy'
    printf '%s' "$venv_want" >"$venv_stamp"
else
    skip "venv present"
fi

# --- 3. ONNX backend test data ------------------------------------------------
backend="$CACHE/onnx-backend-tests"
backend_stamp="$backend/.mxc-stamp"
backend_want="onnx==$BACKEND_ONNX_VERSION ${BACKEND_DIRS[*]}"
if [[ ! -f "$backend_stamp" || "$(cat "$backend_stamp")" != "$backend_want" ]]; then
    say "fetching ONNX backend tests from onnx==$BACKEND_ONNX_VERSION"
    tmp="$backend.tmp"
    rm -rf "$tmp"
    wheels="$tmp/wheel"
    mkdir -p "$wheels"
    # cp311 manylinux x86_64, whichever glibc level the release was built for
    # (pip does not widen a manylinux_2_N tag to older ones by itself).
    platforms=(--platform manylinux2014_x86_64)
    for glibc in $(seq 17 36); do platforms+=(--platform "manylinux_2_${glibc}_x86_64"); done
    "$PY" -m pip download -q --disable-pip-version-check --no-input \
        "onnx==$BACKEND_ONNX_VERSION" --no-deps --only-binary :all: \
        --implementation cp --python-version 3.11 --abi cp311 "${platforms[@]}" \
        -d "$wheels"
    wheel=$(find "$wheels" -maxdepth 1 -name "onnx-$BACKEND_ONNX_VERSION-cp311-cp311-*x86_64*.whl" | head -n1)
    [[ -n "$wheel" ]] || die "pip download gave no onnx $BACKEND_ONNX_VERSION wheel in $wheels"

    prefix="onnx/backend/test/data"
    if command -v unzip >/dev/null 2>&1; then
        patterns=()
        for d in "${BACKEND_DIRS[@]}"; do patterns+=("$prefix/$d/*"); done
        unzip -q "$wheel" "${patterns[@]}" -d "$tmp/raw"
    else
        "$PY" - "$wheel" "$tmp/raw" "$prefix" "${BACKEND_DIRS[@]}" <<'EOF'
import sys, zipfile
wheel, dest, prefix, *dirs = sys.argv[1:]
wanted = tuple(f"{prefix}/{d}/" for d in dirs)
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [n for n in z.namelist() if n.startswith(wanted)])
EOF
    fi
    for d in "${BACKEND_DIRS[@]}"; do
        [[ -d "$tmp/raw/$prefix/$d" ]] || die "$wheel has no $prefix/$d"
        mv "$tmp/raw/$prefix/$d" "$tmp/$d"
    done
    rm -rf "$tmp/raw" "$wheels"
    printf '%s' "$backend_want" >"$tmp/.mxc-stamp"
    rm -rf "$backend"
    mv "$tmp" "$backend"
    count=$(find "$backend/node" -mindepth 2 -maxdepth 2 -name model.onnx | wc -l)
    say "ONNX backend tests: $count node cases in $backend/node"
else
    count=$(find "$backend/node" -mindepth 2 -maxdepth 2 -name model.onnx | wc -l)
    skip "ONNX backend tests present ($count node cases)"
fi

# --- 4. generated models ------------------------------------------------------
# A model is regenerated when its script, the shared helper or the venv's
# package pins change.
models_dir="$CACHE/models"
mkdir -p "$models_dir"
for name in "${MODELS[@]}"; do
    script="$ROOT/scripts/models/$name.py"
    [[ -f "$script" ]] || die "missing $script"
    hash=$( { cat "$script" "$ROOT/scripts/models/common.py"; printf '%s' "$venv_want"; } \
        | sha256sum | cut -d' ' -f1)
    out="$models_dir/$name"
    if [[ -f "$out/.mxc-stamp" && "$(cat "$out/.mxc-stamp")" == "$hash" ]]; then
        skip "model $name present"
        continue
    fi
    say "generating model $name"
    rm -rf "$out.tmp"
    "$PY" "$script" "$out.tmp"
    printf '%s' "$hash" >"$out.tmp/.mxc-stamp"
    rm -rf "$out"
    mv "$out.tmp" "$out"
done

# --- 5. nightly and cargo-fuzz ------------------------------------------------
command -v rustup >/dev/null 2>&1 || die "no rustup (install Rust with rustup first)"
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    say "installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
else
    skip "nightly toolchain present"
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz $CARGO_FUZZ_VERSION"
    cargo install --locked --version "$CARGO_FUZZ_VERSION" cargo-fuzz
    cargo +nightly fuzz --version >/dev/null 2>&1 || die "cargo-fuzz is missing after installing it"
else
    skip "cargo-fuzz present"
fi

# --- 6. libdevice and ptxas ---------------------------------------------------
mxc_cache="${XDG_CACHE_HOME:-$HOME/.cache}/mxc"
nvidia="$mxc_cache/nvidia"
if [[ ! -f "$nvidia/libdevice.10.bc" || ! -x "$nvidia/ptxas" || "$(cat "$nvidia/.mxc-stamp" 2>/dev/null)" != "$NVCC_WHEEL" ]]; then
    say "fetching libdevice and ptxas ($NVCC_WHEEL) into $nvidia"
    tmp="$nvidia.tmp"
    rm -rf "$tmp"
    mkdir -p "$tmp/wheel"
    "$PY" -m pip download -q --disable-pip-version-check --no-input --no-deps \
        --only-binary :all: "$NVCC_WHEEL" -d "$tmp/wheel"
    wheel=$(find "$tmp/wheel" -maxdepth 1 -name 'nvidia_cuda_nvcc_cu12-*.whl' | head -n1)
    [[ -n "$wheel" ]] || die "pip download gave no $NVCC_WHEEL wheel"
    "$PY" - "$wheel" "$tmp" <<'EOF'
import os, sys, zipfile
wheel, dest = sys.argv[1:]
wanted = {"nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc": "libdevice.10.bc",
          "nvidia/cuda_nvcc/bin/ptxas": "ptxas"}
with zipfile.ZipFile(wheel) as z:
    for name, out in wanted.items():
        with z.open(name) as src, open(os.path.join(dest, out), "wb") as dst:
            dst.write(src.read())
EOF
    chmod +x "$tmp/ptxas"
    rm -rf "$tmp/wheel"
    printf '%s' "$NVCC_WHEEL" >"$tmp/.mxc-stamp"
    rm -rf "$nvidia"
    mkdir -p "$mxc_cache"
    mv "$tmp" "$nvidia"
else
    skip "libdevice and ptxas present"
fi

# --- 7. the Python module -----------------------------------------------------
# Built every time (cargo rebuilds only what changed), one abi3 wheel for every CPython >= 3.9.
wheels="${CARGO_TARGET_DIR:-$ROOT/target}/wheels"
say "building the mxc wheel into $wheels and installing it into $VENV"
rm -rf "$wheels"
"$VENV/bin/maturin" build --release --compatibility linux -m "$ROOT/python/Cargo.toml" --out "$wheels" \
    >"$CACHE/maturin.log" 2>&1 || { cat "$CACHE/maturin.log" >&2; die "building the wheel failed"; }
wheel=$(find "$wheels" -maxdepth 1 -name 'mxc-*.whl' | head -n1)
[[ -n "$wheel" ]] || die "maturin built no wheel in $wheels"
"$PY" -m pip install -q --disable-pip-version-check --no-input --no-deps --force-reinstall "$wheel"
"$PY" -c 'import mxc' || die "the installed wheel does not import"

skip "done"
