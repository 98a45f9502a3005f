#!/usr/bin/env bash
# Builds the seed corpora and runs every cargo-fuzz target in fuzz/ for a given time each,
# one after another, single process. Any crash, panic, leak, timeout or out-of-memory fails
# the script; the input is left in fuzz/artifacts/<target>/.
#
#   scripts/fuzz.sh 15m                 each target 15 minutes (the long run)
#   scripts/fuzz.sh 15s                 the short run of scripts/test.sh
#   scripts/fuzz.sh 2m mxr_decode ...   only the targets named
#
# Seeds are generated into fuzz/seeds/<target> (from examples/, the node-suite models in
# .cache/onnx-backend-tests, the rule files and docs, `mxc compile` and `mxc read` output);
# what the fuzzer finds accumulates in fuzz/corpus/<target>. Both are ignored by git. The
# inputs kept in fuzz/regressions/<target> are replayed by every run.
# Needs the nightly toolchain and cargo-fuzz (scripts/setup.sh installs cargo-fuzz).
# Environment: MXC_FUZZ_ARGS  extra libFuzzer arguments, e.g. "-rss_limit_mb=4096".
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ALL_TARGETS=(onnx_import onnx_graph mxr_decode rules_parse mx_text)
say() { printf 'fuzz: %s\n' "$*"; }
die() { printf 'fuzz: error: %s\n' "$*" >&2; exit 1; }

[[ $# -ge 1 ]] || die "usage: scripts/fuzz.sh TIME [TARGET...]  (TIME: 90, 15s, 15m, 1h)"
case "$1" in
    *[0-9]h) secs=$(( ${1%h} * 3600 )) ;;
    *[0-9]m) secs=$(( ${1%m} * 60 )) ;;
    *[0-9]s) secs=${1%s} ;;
    *[0-9]) secs=$1 ;;
    *) die "bad time '$1' (e.g. 90, 15s, 15m, 1h)" ;;
esac
[[ "$secs" =~ ^[0-9]+$ && "$secs" -gt 0 ]] || die "bad time '$1'"
shift
targets=("$@")
(( ${#targets[@]} > 0 )) || targets=("${ALL_TARGETS[@]}")
for t in "${targets[@]}"; do
    [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || die "no fuzz target '$t' (have: ${ALL_TARGETS[*]})"
done

cargo +nightly --version >/dev/null 2>&1 || die "no nightly toolchain (rustup toolchain install nightly)"
cargo +nightly fuzz --version >/dev/null 2>&1 || die "cargo-fuzz is missing (scripts/setup.sh installs it)"

# --- the fuzz targets, built first so that a build failure stops everything ------------
say "building the fuzz targets"
(cd fuzz && cargo +nightly fuzz build --debug-assertions) || die "building the fuzz targets failed"

# --- seeds -----------------------------------------------------------------------------
SEEDS="$ROOT/fuzz/seeds"
MXC="$ROOT/target/release/mxc"
seed() { # seed TARGET FILE: copy FILE under its content hash (idempotent)
    local h
    h=$(sha256sum "$2" | cut -c1-16)
    cp "$2" "$SEEDS/$1/$h"
}

make_seeds() {
    local dir="$SEEDS.tmp" f n=0 out
    rm -rf "$dir" && mkdir -p "$dir"
    SEEDS="$dir"
    for t in "${ALL_TARGETS[@]}"; do mkdir -p "$dir/$t"; done

    say "building target/release/mxc for the seeds"
    cargo build --release --bin mxc -q || die "building mxc failed"

    # ONNX models: the examples and the ONNX backend tests (all small; the generated
    # models in .cache/models are too large to mutate quickly).
    local models=(examples/*.onnx)
    if [[ -d .cache/onnx-backend-tests ]]; then
        while IFS= read -r f; do models+=("$f"); done \
            < <(find .cache/onnx-backend-tests -name model.onnx -size -64k | sort)
    else
        say "no .cache/onnx-backend-tests (scripts/setup.sh fetches it): fewer ONNX seeds"
    fi
    for f in "${models[@]}"; do seed onnx_import "$f"; done

    # onnx_graph reads its bytes as choices (arbitrary), not as a format: random bytes of a
    # fixed seed are as good a start as any.
    .cache/venv/bin/python -c '
import random, sys
r = random.Random(36)
for i in range(64):
    open(f"{sys.argv[1]}/random{i}", "wb").write(r.randbytes(r.randrange(16, 1024)))' "$dir/onnx_graph" \
        || die "making the onnx_graph seeds failed"

    # mx text: what `mxc read` prints for the examples and every 4th node-suite case that
    # passes (imported, and rewritten for cpu for a few).
    local texts=(examples/tiny_cnn.onnx)
    if [[ -d .cache/onnx-backend-tests/node ]]; then
        while IFS= read -r f; do
            [[ -f ".cache/onnx-backend-tests/node/$f/model.onnx" ]] \
                && texts+=(".cache/onnx-backend-tests/node/$f/model.onnx")
        done < <(grep -v '^#' tests/node_expected_pass.txt | awk 'NR % 4 == 1')
    fi
    out="$dir/tmp.mx"
    for f in "${texts[@]}"; do
        "$MXC" read "$f" >"$out" 2>/dev/null && seed mx_text "$out"
        if (( n++ % 8 == 0 )); then
            "$MXC" read --target cpu "$f" >"$out" 2>/dev/null && seed mx_text "$out"
        fi
    done
    rm -f "$out"

    # .mxr: the example compiled three ways (a must: the format has no other source) and a
    # few one-op node-suite models.
    out="$dir/tmp.mxr"
    for opts in "-O 2" "-O 0" "--no-fusion"; do
        # shellcheck disable=SC2086
        "$MXC" compile -q --no-cache $opts examples/tiny_cnn.onnx -o "$out" >/dev/null \
            || die "mxc compile $opts examples/tiny_cnn.onnx failed"
        seed mxr_decode "$out"
    done
    # a file of programs by size: the example with its batch made a dim_param
    .cache/venv/bin/python -c '
import sys, onnx
m = onnx.load("examples/tiny_cnn.onnx")
for v in [m.graph.input[0], *m.graph.output]:
    v.type.tensor_type.shape.dim[0].dim_param = "batch"
onnx.save(m, sys.argv[1])' "$dir/dynamic.onnx" || die "making a model with a dynamic batch failed"
    "$MXC" compile -q --no-cache "$dir/dynamic.onnx" --shape 'image=n[1..4]{1,2}x3x8x8' -o "$out" >/dev/null 2>&1 \
        || die "mxc compile of the dynamic example failed"
    seed mxr_decode "$out"
    rm -f "$dir/dynamic.onnx"
    for f in test_relu test_add_bcast test_matmul_2d test_softmax_axis_1 test_maxpool_2d_default \
        test_conv_with_strides_padding test_gemm_default_matrix_bias test_transpose_default; do
        f=".cache/onnx-backend-tests/node/$f/model.onnx"
        [[ -f "$f" ]] || continue
        "$MXC" compile -q --no-cache "$f" -o "$out" >/dev/null || die "mxc compile $f failed"
        seed mxr_decode "$out"
    done
    rm -f "$out"

    # Rule files: the built-in sets, the examples and each fenced block of docs/rules.md.
    for f in rewrite/rules/*.rules examples/rules/*.rules; do seed rules_parse "$f"; done
    awk -v dir="$dir" '/^```/ { if (inb) { close(f); inb = 0 } else { inb = 1; f = dir "/block" (++k) }; next }
        inb { print > f }' docs/rules.md
    for f in "$dir"/block*; do seed rules_parse "$f"; rm -f "$f"; done

    for t in "${ALL_TARGETS[@]}"; do
        n=$(find "$dir/$t" -type f | wc -l)
        (( n > 0 )) || die "no seeds for $t"
        say "seeds for $t: $n"
    done
    rm -rf "$ROOT/fuzz/seeds"
    mv "$dir" "$ROOT/fuzz/seeds"
    SEEDS="$ROOT/fuzz/seeds"
}

# The seeds are rebuilt when this script, the examples, the rule files or the `.mxr` format
# (kernels/src/mxr/) change.
stamp_want=$( { cat "$0" examples/*.onnx rewrite/rules/*.rules examples/rules/*.rules docs/rules.md kernels/src/mxr/*.rs; \
    ls .cache/onnx-backend-tests 2>/dev/null; } | sha256sum | cut -d' ' -f1)
if [[ -f "$SEEDS/.stamp" && "$(cat "$SEEDS/.stamp")" == "$stamp_want" ]]; then
    say "seeds present"
else
    make_seeds
    printf '%s' "$stamp_want" >"$SEEDS/.stamp"
fi

# --- the runs --------------------------------------------------------------------------
# -rss_limit_mb: libFuzzer's default (2 GiB) also caps a single allocation, so an input
# that makes the code ask for an absurd buffer is reported as a crash, as it should be.
# The inputs of fuzz/regressions/<target> (ones that crashed it once) are read with the
# seeds, so every run, short ones included, replays them first.
failed=()
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t"
    dirs=("corpus/$t" "seeds/$t")
    [[ -d "fuzz/regressions/$t" ]] && dirs+=("regressions/$t")
    say "running $t for ${secs}s"
    # shellcheck disable=SC2086
    if ! (cd fuzz && cargo +nightly fuzz run --debug-assertions "$t" "${dirs[@]}" -- \
        -max_total_time="$secs" -timeout=20 -print_final_stats=1 ${MXC_FUZZ_ARGS:-}); then
        failed+=("$t")
        say "$t FAILED: the input is in fuzz/artifacts/$t/"
    fi
done
(( ${#failed[@]} == 0 )) || die "crashes in: ${failed[*]}"
say "no crashes in: ${targets[*]}"
