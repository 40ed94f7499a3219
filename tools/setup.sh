#!/usr/bin/env bash
# Installs what gpujobd needs on Debian 12 (as root) and builds it into ./build.
#   tools/setup.sh [BUILD_DIR] [MESON_OPTIONS...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    pkgs=$(grep -v '^\s*#' tools/debian-packages.txt | awk '{print $1}' | grep -v '^$' | sort -u)
    missing=$(dpkg-query -W -f='${Package} ${Status}\n' $pkgs 2>/dev/null | awk '$4 != "installed" {print $1}' || true)
    # dpkg-query prints nothing for packages it has never seen: compare the counts too.
    known=$(dpkg-query -W -f='${Package}\n' $pkgs 2>/dev/null | wc -l || true)
    if [ -n "$missing" ] || [ "$known" -lt "$(echo "$pkgs" | wc -l)" ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
    fi
fi

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$@"
fi
ninja -C "$build"
