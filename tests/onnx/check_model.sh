#!/bin/sh
# check_model.sh NAME [OPSET [BACKEND PRECISION GRAPHS BATCH TOL]]: exports NAME (at opset 17
# unless given; chest-xray: the shipped demo model) with PyTorch into the build dir and checks
# gpujobd's ONNX runtime against PyTorch's output by relative L2 error (default: cpu, fp32, no
# CUDA graphs, batch 2 then 1, 1e-4). A backend that cannot run here exits 77 (skipped) before
# anything is exported. GJ_PYTHON: the python3 with torch (default /usr/bin/python3; the GPU
# machine's is a venv's).
set -eu
name=$1
opset=${2:-17}
backend=${3:-cpu}
precision=${4:-fp32}
graphs=${5:-0}
batch=${6:-2}
tol=${7:-1e-4}
check=${ONNX_CHECK:?path of onnx_check}
"$check" --available "$backend" || exit $?
out=${GJ_BUILD_ROOT:?}/tests/onnx/models
base=$name
[ "$opset" = 17 ] || base=${base}_opset$opset
[ "$batch" = 2 ] || base=${base}_b$batch
"${GJ_PYTHON:-/usr/bin/python3}" "${GJ_SOURCE_ROOT:?}/tests/onnx/models.py" "$out" "$name" --opset "$opset" --batch "$batch" \
    --reuse >/dev/null
exec "$check" "$out/$base.onnx" "$out/$base.in.f32" "$out/$base.out.f32" "$batch" 2 "$tol" \
    "$backend" "$precision" "$graphs"
