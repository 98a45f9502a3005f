#!/usr/bin/env bash
# Checks mxc's gpu target on a machine with a GPU, against ref computed here.
#
#   scripts/gpu-check.sh prepare DIR [MODEL.onnx ...]
#       Here, where mxc builds: makes DIR with the runner (mxc-runner: the runtime alone, no
#       LLVM or MLIR), this script, and for each model a case: the model compiled for the gpu
#       target (code for $GPU_ARCHS, default gfx90a,gfx942,gfx1100,sm_90), its inputs (the
#       model's test_data_set_0 where it has one, else seeded random values) and ref's outputs
#       on them. Without models: the repo's models and every 40th case of the ONNX node suite
#       that mxc passes. A model whose compile or ref run fails is listed and left out.
#   DIR/gpu-check.sh run DIR
#       There, on the GPU machine (no network, nothing but DIR needed): runs each case with
#       mxc-runner, compares its outputs with ref's (|gpu - ref| <= $ATOL + $RTOL * |ref|,
#       default 1e-4 and 1e-3), and prints a scoreboard with each case's median time of
#       $REPEAT runs (default 10); it is also written to DIR/scoreboard.txt. Exits 1 when a
#       case fails.
set -euo pipefail

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

prepare() {
    local out=$1; shift
    local repo; repo=$(cd "$(dirname "$0")/.." && pwd)
    local py=$repo/.cache/venv/bin/python archs=${GPU_ARCHS:-gfx90a,gfx942,gfx1100,sm_90}
    [ -x "$py" ] || { echo "gpu-check: $py is missing: run scripts/setup.sh first" >&2; exit 1; }
    (cd "$repo" && cargo build --release -q -p mxc -p mxc-runner)
    local mxc=$repo/target/release/mxc
    mkdir -p "$out/cases"
    cp "$repo/target/release/mxc-runner" "$0" "$out/"
    local models=("$@")
    if [ ${#models[@]} -eq 0 ]; then
        models=("$repo"/.cache/models/{convnet,encoder}/model.onnx "$repo"/.cache/models/control_flow/*/model.onnx)
        local node=$repo/.cache/onnx-backend-tests/node
        while read -r case; do models+=("$node/$case/model.onnx"); done \
            < <(grep -v '^#' "$repo/tests/node_expected_pass.txt" | awk 'NR % 40 == 1')
    fi
    local left_out=0
    for model in "${models[@]}"; do
        local dir; dir=$(dirname "$model")
        local name; name=$(realpath --relative-to="$repo/.cache" "$dir" 2>/dev/null || basename "$dir")
        name=${name#onnx-backend-tests/node/}
        name=${name#models/}
        name=${name//\//_}
        local case=$out/cases/$name
        mkdir -p "$case"
        # the data set's inputs, named as the model names them
        local inputs=()
        if [ -d "$dir/test_data_set_0" ]; then
            mapfile -t inputs < <("$py" - "$model" "$dir/test_data_set_0" <<'EOF'
import glob, os, sys, onnx
model = onnx.load(sys.argv[1], load_external_data=False)
weights = {i.name for i in model.graph.initializer}
names = [i.name for i in model.graph.input if i.name not in weights]
files = sorted(glob.glob(os.path.join(sys.argv[2], "input_*.pb")), key=lambda f: int(f.rsplit("_", 1)[1][:-3]))
for name, f in zip(names, files):
    print(f"--input={name}={f}")
EOF
)
        fi
        if ! "$mxc" compile "$model" --target gpu --gpu-arch "$archs" -o "$case/model.mxr" -q 2> "$case/why.txt"; then
            echo "left out $name: compiling: $(tail -1 "$case/why.txt")"
            rm -rf "$case"; left_out=$((left_out + 1)); continue
        fi
        if ! "$mxc" run "$model" --target ref "${inputs[@]}" --save-inputs "$case/inputs" -o "$case/ref" 2> "$case/why.txt"; then
            echo "left out $name: ref: $(tail -1 "$case/why.txt")"
            rm -rf "$case"; left_out=$((left_out + 1)); continue
        fi
        if compgen -G "$case/ref/*.pb" > /dev/null; then
            echo "left out $name: a sequence or optional output (the runner writes tensors)"
            rm -rf "$case"; left_out=$((left_out + 1)); continue
        fi
        rm -f "$case/why.txt"
    done
    echo "gpu-check: $(ls "$out/cases" | wc -l) cases in $out ($left_out left out), $(du -sh "$out" | cut -f1)"
    echo "gpu-check: on the GPU machine: $out/gpu-check.sh run $out"
}

run() {
    local dir=$1 runner=$1/mxc-runner
    local repeat=${REPEAT:-10} rtol=${RTOL:-1e-3} atol=${ATOL:-1e-4}
    local passed=0 failed=0 board=$dir/scoreboard.txt
    [ -x "$runner" ] || { echo "gpu-check: $runner is missing: make DIR with 'prepare'" >&2; exit 1; }
    {
        echo "# mxc gpu-check, $(date -u +%Y-%m-%dT%H:%MZ), $(uname -n)"
        printf '%-6s %12s  %s\n' result "median ms" case
    } > "$board"
    local first=1
    for case in "$dir"/cases/*/; do
        case=${case%/}
        local name; name=$(basename "$case")
        local log rc=0
        log=$("$runner" "$case/model.mxr" --inputs "$case/inputs" --check "$case/ref" \
            --rtol "$rtol" --atol "$atol" --repeat "$repeat" 2>&1) || rc=$?
        if [ $first = 1 ] && grep -q 'no GPU runtime was found' <<< "$log"; then
            echo "gpu-check: $(tail -1 <<< "$log")" >&2
            exit 1
        fi
        if [ $first = 1 ]; then
            echo "# $(grep -m1 '^device:' <<< "$log")" >> "$board"
            first=0
        fi
        local ms; ms=$(sed -n 's/^time: median \([0-9.]*\) ms.*/\1/p' <<< "$log")
        if [ $rc = 0 ]; then
            passed=$((passed + 1)); printf '%-6s %12s  %s\n' pass "${ms:--}" "$name" >> "$board"
        else
            failed=$((failed + 1)); printf '%-6s %12s  %s\n' FAIL "${ms:--}" "$name" >> "$board"
            grep -E 'FAIL|error' <<< "$log" | head -3 | sed 's/^/         /' >> "$board"
        fi
    done
    echo "# $passed passed, $failed failed" >> "$board"
    cat "$board"
    [ $failed = 0 ]
}

case ${1:-} in
    prepare) [ $# -ge 2 ] || usage; shift; prepare "$@" ;;
    run) [ $# -eq 2 ] || usage; run "$2" ;;
    *) usage ;;
esac
