#!/bin/sh
# check-noble-packages.sh [LIST] -- on Ubuntu 24.04 (noble), best inside the image's base, where
# NVIDIA's repository is configured too: every package of ubuntu-noble-packages.txt must have an
# installation candidate. CI (Debian 12, no Ubuntu archive) checks the rest of that list.
#   docker run --rm -v "$PWD/deploy/docker:/d:ro" nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04 \
#       sh /d/check-noble-packages.sh
set -eu
list=${1:-$(dirname "$0")/ubuntu-noble-packages.txt}
# shellcheck disable=SC1091  # the system's own file
. /etc/os-release
[ "${VERSION_CODENAME:-}" = noble ] ||
    echo "check-noble-packages.sh: warning: this is ${PRETTY_NAME:-an unknown system}, not Ubuntu 24.04" >&2
apt-get update -qq >/dev/null
missing=0
# shellcheck disable=SC2013  # package names are single words
for pkg in $(grep -v '^[[:space:]]*#' "$list" | awk 'NF >= 2 { print $2 }'); do
    candidate=$(apt-cache policy "$pkg" | awk '/Candidate:/ { print $2 }')
    if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then
        echo "missing: $pkg"
        missing=$((missing + 1))
    else
        echo "ok:      $pkg $candidate"
    fi
done
[ "$missing" -eq 0 ] || { echo "$missing package(s) of $list have no candidate here" >&2; exit 1; }
echo "every package of $list has a candidate"
