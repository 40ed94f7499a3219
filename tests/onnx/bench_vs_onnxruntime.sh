#!/bin/sh
# bench_vs_onnxruntime.sh — gpujobd's ONNX runtime against ONNX Runtime's CPU execution
# provider, in the same run, on the same model files, inputs, thread count and CPUs.
#
#   tests/onnx/bench_vs_onnxruntime.sh [BUILD_DIR]      (default: build-onnx)
#   env: THREADS (2), BENCH_SECONDS (10), BATCHES ("1 8"), CPUS (taskset list, default 0..THREADS-1),
#        GPUJOBD (`gpujobd` or `onnx_bench`; default BUILD_DIR/service/gpujobd, else
#        BUILD_DIR/tests/onnx/onnx_bench), ROUNDS (2),
#        MODELS (default "resnet18:224 densenet121:224 densenet169:1024 chest-xray:256"),
#        BASELINE (a second `onnx_bench` or `gpujobd` binary, e.g. a build of the previous
#        commit: run too, alternating with the other two, rows marked "baseline")
#
# Models (torchvision architectures, random weights, opset 17, dynamic batch axis), exported
# by tests/onnx/models.py into BUILD_DIR/bench-models as NAME_SIZE_b1.onnx: ResNet-18 and
# DenseNet-121 at 224x224, DenseNet-169 at 1024x1024 (the seed hospital's input size); and the
# chest-xray demo model (models/chest-xray-demo, 1x256x256), as chest-xray_b1.onnx. A model
# that cannot be exported stops the script. ONNX Runtime: npm's onnxruntime-node, installed
# into BUILD_DIR/onnxruntime (never the source tree; --ignore-scripts: the install script only
# fetches GPU providers from the network).
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build-onnx}" && pwd)
threads=${THREADS:-2}
secs=${BENCH_SECONDS:-10}
batches=${BATCHES:-"1 8"}
rounds=${ROUNDS:-2}
last=$((threads - 1))
cpus=${CPUS:-0-$last}
list=${MODELS:-"resnet18:224 densenet121:224 densenet169:1024 chest-xray:256"}
models="$build/bench-models"
ort="$build/onnxruntime"

die() {
    echo "bench_vs_onnxruntime: $*" >&2
    exit 1
}

# The file of model NAME:SIZE, and its input's channels.
model_file() {
    case $1 in
    chest-xray:*) echo "$models/chest-xray_b1.onnx" ;;
    *) echo "$models/${1%%:*}_${1#*:}_b1.onnx" ;;
    esac
}
channels() {
    case $1 in
    chest-xray:*) echo 1 ;;
    *) echo 3 ;;
    esac
}

mkdir -p "$models"
for m in $list; do
    f=$(model_file "$m")
    if [ ! -s "$f" ]; then
        size=${m#*:}
        [ "${m%%:*}" = chest-xray ] && size=0
        /usr/bin/python3 "$src/tests/onnx/models.py" "$models" "${m%%:*}" --size "$size" --batch 1 \
            --no-reference >/dev/null || die "exporting ${m%%:*} failed"
    fi
    [ -s "$f" ] || die "$f is missing after export (models.py names its files NAME_SIZE_b1.onnx)"
done
if [ ! -d "$ort/node_modules/onnxruntime-node" ]; then
    mkdir -p "$ort"
    (cd "$ort" && npm init -y >/dev/null && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node >/dev/null) ||
        die "npm install onnxruntime-node failed"
fi

# `gpujobd bench onnx` where the binary has it, else the test tree's onnx_bench.
bench_cmd() {
    if "$1" bench 2>&1 | grep -q '^ *onnx '; then
        echo "$1 bench onnx"
    else
        echo "$1"
    fi
}
ours=$(bench_cmd "${GPUJOBD:-$build/service/gpujobd}")
[ -z "${GPUJOBD:-}" ] && [ "$ours" = "$build/service/gpujobd" ] && ours="$build/tests/onnx/onnx_bench"
[ -x "${ours%% *}" ] || die "no benchmark binary: build $build first (ninja -C $build tests/onnx/onnx_bench)"
base=
if [ -n "${BASELINE:-}" ]; then
    [ -x "$BASELINE" ] || die "BASELINE=$BASELINE is not an executable"
    base=$(bench_cmd "$BASELINE")
fi

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs online, pinned to CPUs $cpus, $threads threads"
echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ours: $ours${base:+ ; baseline: $base} ; onnxruntime-node $(sed -n 's/ *"version": "\(.*\)",/\1/p' "$ort/node_modules/onnxruntime-node/package.json" | head -1)"
r=1
while [ "$r" -le "$rounds" ]; do
    for m in $list; do
        f=$(model_file "$m")
        for b in $batches; do
            if [ -n "$base" ]; then
                printf 'baseline     '
                taskset -c "$cpus" $base --threads "$threads" --seconds "$secs" --batch "$b" "$f" || die "baseline failed on $f"
            fi
            printf 'gpujobd      '
            taskset -c "$cpus" $ours --threads "$threads" --seconds "$secs" --batch "$b" "$f" || die "gpujobd failed on $f"
            printf 'onnxruntime  '
            NODE_PATH="$ort/node_modules" taskset -c "$cpus" node "$src/tests/onnx/bench_ort.js" \
                "$threads" "$secs" "$b" "$f" "$(channels "$m")" "${m#*:}" || die "onnxruntime failed on $f"
        done
    done
    r=$((r + 1))
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
