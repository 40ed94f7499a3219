#!/bin/sh
# check_model.sh NAME [OPSET]: exports NAME (at opset 17 unless given) with PyTorch into the build dir and checks gpujobd's
# ONNX runtime against PyTorch's output (relative L2 <= 1e-4, float32, batch 2 and 1).
set -eu
name=$1
opset=${2:-17}
check=${ONNX_CHECK:?path of onnx_check}
out=${GJ_BUILD_ROOT:?}/tests/onnx/models
base=$name
[ "$opset" = 17 ] || base=${name}_opset$opset
/usr/bin/python3 "${GJ_SOURCE_ROOT:?}/tests/onnx/models.py" "$out" "$name" --opset "$opset" >/dev/null
exec "$check" "$out/$base.onnx" "$out/$base.in.f32" "$out/$base.out.f32" 2 2 1e-4
