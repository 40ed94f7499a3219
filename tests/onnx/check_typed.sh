#!/bin/sh
# check_typed.sh NAME: exports the typed model NAME (typed_models.py: several inputs and outputs,
# element types other than float32) with PyTorch into the build dir and checks gpujobd's ONNX
# runtime against PyTorch's outputs, output by output (onnx_check_io).
set -eu
name=$1
out=${GJ_BUILD_ROOT:?}/tests/onnx/models
/usr/bin/python3 "${GJ_SOURCE_ROOT:?}/tests/onnx/typed_models.py" "$out" "$name" --reuse >/dev/null
exec "${ONNX_CHECK_IO:?path of onnx_check_io}" "$out/$name.manifest" 2
