#!/bin/sh
# cudnn-prefix.sh PREFIX -- gives the cuDNN of a CUDA -cudnn-devel image the layout that meson's
# -Dcudnn_dir expects (PREFIX/include/cudnn.h, PREFIX/lib/libcudnn.so): NVIDIA's packages put
# the headers under /usr/include/<triplet> and the libraries in /usr/lib/<triplet>, where the
# build does not look. Fails when the image has no cuDNN.
set -eu
prefix=${1:?usage: cudnn-prefix.sh PREFIX}

header=
for dir in /usr/include /usr/include/*-linux-gnu /usr/local/cuda/include /usr/local/cuda/targets/*/include; do
    if [ -f "$dir/cudnn.h" ]; then
        header=$dir/cudnn.h
        break
    fi
done
[ -n "$header" ] || { echo "cudnn-prefix.sh: no cudnn.h in this image (build on a -cudnn-devel base)" >&2; exit 1; }

lib=$(ldconfig -p | awk '$1 == "libcudnn.so.9" { print $NF; exit }')
[ -n "$lib" ] || { echo "cudnn-prefix.sh: ldconfig knows no libcudnn.so.9" >&2; exit 1; }

mkdir -p "$prefix/lib"
ln -sfn "$(dirname "$header")" "$prefix/include"
ln -sf "$lib" "$prefix/lib/libcudnn.so.9"
ln -sf "$lib" "$prefix/lib/libcudnn.so"
echo "cudnn-prefix.sh: $prefix -> $header, $lib"
