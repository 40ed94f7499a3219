#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (GPU tests skip without a GPU).
#   tools/test.sh [BUILD_DIR] [MESON_OPTIONS...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tools/setup.sh "$@"
meson test -C "$build" --print-errorlogs --num-processes "${GJ_TEST_JOBS:-2}"
