#!/bin/sh
# compare_with_onnxruntime.sh [BUILD_DIR]: ONNX Runtime as the second reference of the model
# tests. Exports the test models (tests/onnx/models.py), runs ONNX Runtime's CPU provider
# (npm onnxruntime-node, installed into BUILD_DIR/onnxruntime, never the source tree) on the
# same inputs, and checks gpujobd's runtime against its outputs: relative L2 <= 1e-4, batch 2.
# Not part of `meson test` (it downloads ONNX Runtime from npm); run it where npm works.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
ort="$build/onnxruntime"
out="$build/tests/onnx/ort-compare"
mkdir -p "$out" "$ort"
if [ ! -d "$ort/node_modules/onnxruntime-node" ]; then
    (cd "$ort" && npm init -y >/dev/null && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node >/dev/null)
fi
echo "# onnxruntime-node $(sed -n 's/ *"version": "\(.*\)",/\1/p' "$ort/node_modules/onnxruntime-node/package.json" | head -1)"
fail=0
for name in resnet18 densenet121 vit; do
    size=64
    [ "$name" = vit ] && size=32
    /usr/bin/python3 "$src/tests/onnx/models.py" "$out" "$name" >/dev/null
    NODE_PATH="$ort/node_modules" node "$src/tests/onnx/ort_reference.js" "$out/$name.onnx" \
        "$out/$name.in.f32" "$out/$name.ort.f32" 2 3 "$size" "$size"
    if "$build/tests/onnx/onnx_check" "$out/$name.onnx" "$out/$name.in.f32" "$out/$name.ort.f32" 2 2 1e-4; then
        echo "ok   $name: gpujobd vs ONNX Runtime"
    else
        echo "FAIL $name: gpujobd vs ONNX Runtime"
        fail=1
    fi
done
exit $fail
