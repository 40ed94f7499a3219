#!/usr/bin/env bash
# Run HERE (Debian 12, as root) after tools/device/fetch-debs.sh: checks that .debs/ alone is
# enough to build and test, the way the device will use it.
#
# In a private mount namespace, every header, .pc file, shared library and program that the
# machine's own copies of the carried packages installed is masked (/dev/null bound over it),
# so only the prefix can serve them. Then: source env.sh into a temporary prefix with
# GJ_DEPS_PREFER=prefix (keep every carried library) and GJ_DEPS_ISOLATED=1 (the prefix's .pc
# files only), meson setup -Dcuda=enabled, ninja, ldd of gpujobd (every carried library must
# resolve into the prefix), the gpu suite (77 without a GPU), and a few CPU tests, PostgreSQL
# ones included (initdb/postgres/psql from the prefix, as the `postgres` user).
#
#   tools/device/check-here.sh [WORKDIR] [TEST...]      (default WORKDIR /tmp/gj-device-check)
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${1:-/tmp/gj-device-check}
shift || true
tests=${*:-"json_schema placement db_migrate queue"}
[ "$(id -u)" = 0 ] || { echo "check-here: run as root (mount namespace, postgres user)" >&2; exit 1; }
ls .debs/*.deb >/dev/null
mkdir -p "$work"
rm -rf "$work/prefix" "$work/build"

# The machine's copies of what .debs carries.
mask="$work/mask.txt"
for deb in .debs/*.deb; do dpkg-deb -f "$deb" Package; done | sort -u |
    while read -r pkg; do dpkg -L "$pkg" 2>/dev/null || true; done | sort -u |
    while read -r f; do [ -f "$f" ] && [ ! -L "$f" ] && echo "$f"; done |
    grep -E '\.(h|pc)$|\.so(\.|$)|/bin/' >"$mask" || true
echo "check-here: masking $(wc -l <"$mask") files of the machine's own copies"

# Unpack first (dpkg-deb and mount themselves use libraries that get masked); inside the
# namespace env.sh finds its stamp and only exports.
export GJ_DEPS_PREFIX=$work/prefix GJ_DEPS_PREFER=prefix GJ_DEPS_ISOLATED=1
(. tools/device/env.sh)
pl="$work/prefix/usr/lib/x86_64-linux-gnu:$work/prefix/lib/x86_64-linux-gnu"
unshare --mount --propagation private env WORK="$work" MASK="$mask" TESTS="$tests" PL="$pl" bash -c '
set -euo pipefail
export LD_LIBRARY_PATH=$PL   # base tools (ls, grep, mount) link masked libraries too
while read -r f; do mount --bind /dev/null "$f"; done <"$MASK"
. tools/device/env.sh
echo "== meson setup (-Dcuda=enabled)"
extra=()
grep -q cudnn_dir meson_options.txt && [ -n "${GJ_CUDNN_DIR:-}" ] && extra+=("-Dcudnn_dir=$GJ_CUDNN_DIR")
meson setup "$WORK/build" -Dcuda=enabled -Dgpu_arch=90 "${extra[@]}" >"$WORK/setup.log" 2>&1 ||
    { tail -40 "$WORK/setup.log"; exit 1; }
grep -E "Run-time dependency|Found pkg-config|Program protoc-c|CUDA" "$WORK/setup.log" || true
echo "== ninja"
ninja -C "$WORK/build" >"$WORK/ninja.log" 2>&1 || { tail -40 "$WORK/ninja.log"; exit 1; }
tail -1 "$WORK/ninja.log"
echo "== ldd gpujobd"
ldd "$WORK/build/service/gpujobd" | tee "$WORK/ldd.txt"
if grep -q "not found" "$WORK/ldd.txt"; then echo "check-here: FAIL: unresolved libraries"; exit 1; fi
echo "prefix: $(grep -c "$WORK/prefix" "$WORK/ldd.txt") libraries; elsewhere:"
grep -v "$WORK/prefix" "$WORK/ldd.txt" | grep "=>" | awk "{print \"  \" \$1, \$3}"
echo "== meson test --suite gpu"
meson test -C "$WORK/build" --suite gpu --print-errorlogs
echo "== meson test $TESTS"
meson test -C "$WORK/build" --print-errorlogs --num-processes 2 $TESTS
'
echo "check-here: OK"
