#!/bin/sh
# check-binary.sh build|runtime BINARY -- the image build stops here rather than ship a binary
# that quietly lost a part:
#   build:   linked against the CUDA runtime and cuDNN (without cuDNN meson only prints a note
#            and leaves out the ONNX runtime's GPU backend);
#   runtime: every shared library resolves (ldd), and the binary starts and reports CUDA.
set -eu
mode=${1:?usage: check-binary.sh build|runtime BINARY}
bin=${2:?usage: check-binary.sh build|runtime BINARY}
fail() { echo "check-binary.sh: $bin: $*" >&2; exit 1; }

case $mode in
build)
    needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    for lib in libcudart.so libcudnn.so; do
        echo "$needed" | grep -q "^$lib\." || fail "not linked against $lib (is this a -cudnn-devel base?)"
    done
    ;;
runtime)
    missing=$(ldd "$bin" | grep 'not found' || true)
    [ -z "$missing" ] || fail "libraries missing from the image: $missing"
    "$bin" version | grep -q '(CUDA)' || fail "'gpujobd version' does not report a CUDA build"
    ;;
*)
    fail "unknown mode '$mode' (build or runtime)"
    ;;
esac
echo "check-binary.sh: $mode checks of $bin passed"
