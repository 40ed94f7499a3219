#!/bin/sh
# build.sh [--push] IMAGE     builds the image as IMAGE:TAG (and pushes it), prints IMAGE:TAG
# build.sh --print-tag        prints TAG only
#
# TAG is VERSION-cudaCUDA: the project version (meson.build) and the CUDA of the base image
# (the Dockerfile's CUDA_VERSION), e.g. 0.1.0-cuda13.0.2. A tag names one build: never push
# two builds under one tag, never use `latest`; the Kubernetes overlays pin this tag (images:).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
version=$(sed -n "s/^  version: '\([^']*\)',$/\1/p" "$root/meson.build")
cuda=$(sed -n 's/^ARG CUDA_VERSION=//p' "$root/Dockerfile")
{ [ -n "$version" ] && [ -n "$cuda" ]; } || { echo "build.sh: cannot read the version or CUDA_VERSION" >&2; exit 1; }
tag="$version-cuda$cuda"

push=0
case ${1:-} in
    --print-tag) echo "$tag"; exit 0 ;;
    --push) push=1; shift ;;
esac
image=${1:?usage: build.sh [--push] IMAGE | build.sh --print-tag}
case $image in
    *:*) echo "build.sh: give the image without a tag; the tag is $tag" >&2; exit 2 ;;
esac

revision=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]; then
    revision="$revision-dirty"
fi
docker build --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
    --build-arg "CUDA_VERSION=$cuda" -t "$image:$tag" "$root"
if [ "$push" = 1 ]; then
    docker push "$image:$tag"
fi
echo "$image:$tag"
