#!/bin/sh
# bench_vs_onnxruntime.sh — gpujobd's ONNX runtime against ONNX Runtime's CPU execution
# provider, in the same run, on the same model files, inputs, thread count and CPUs.
#
#   tests/onnx/bench_vs_onnxruntime.sh [BUILD_DIR]      (default: build-onnx)
#   env: THREADS (2), BENCH_SECONDS (10), BATCHES ("1 8"), CPUS (taskset list, default 0..THREADS-1),
#        GPUJOBD (the binary; falls back to BUILD_DIR/tests/onnx/onnx_bench), ROUNDS (2)
#
# Models: ResNet-18 and DenseNet-121 (torchvision architectures, random weights, opset 17,
# 224x224), exported by tests/onnx/models.py into BUILD_DIR/bench-models. ONNX Runtime:
# npm's onnxruntime-node, installed into BUILD_DIR/onnxruntime (never the source tree;
# --ignore-scripts: the install script only fetches GPU providers from the network).
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build-onnx}" && pwd)
threads=${THREADS:-2}
secs=${BENCH_SECONDS:-10}
batches=${BATCHES:-"1 8"}
rounds=${ROUNDS:-2}
last=$((threads - 1))
cpus=${CPUS:-0-$last}
models="$build/bench-models"
ort="$build/onnxruntime"

mkdir -p "$models"
for m in resnet18 densenet121; do
    [ -s "$models/${m}_224.onnx" ] ||
        /usr/bin/python3 "$src/tests/onnx/models.py" "$models" "$m" --size 224 --batch 1 --no-reference >/dev/null
done
if [ ! -d "$ort/node_modules/onnxruntime-node" ]; then
    mkdir -p "$ort"
    (cd "$ort" && npm init -y >/dev/null && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node >/dev/null)
fi

ours="${GPUJOBD:-$build/service/gpujobd} bench onnx"
if ! ${GPUJOBD:-$build/service/gpujobd} bench 2>&1 | grep -q '^ *onnx '; then
    ours="$build/tests/onnx/onnx_bench"
fi

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs online, pinned to CPUs $cpus, $threads threads"
echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ours: $ours ; onnxruntime-node $(sed -n 's/ *"version": "\(.*\)",/\1/p' "$ort/node_modules/onnxruntime-node/package.json" | head -1)"
r=1
while [ "$r" -le "$rounds" ]; do
    for m in resnet18 densenet121; do
        for b in $batches; do
            printf 'gpujobd      '
            taskset -c "$cpus" $ours --threads "$threads" --seconds "$secs" --batch "$b" "$models/${m}_224.onnx"
            printf 'onnxruntime  '
            NODE_PATH="$ort/node_modules" taskset -c "$cpus" node "$src/tests/onnx/bench_ort.js" \
                "$threads" "$secs" "$b" "$models/${m}_224.onnx"
        done
    done
    r=$((r + 1))
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
