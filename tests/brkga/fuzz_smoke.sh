#!/bin/bash
# fuzz_smoke.sh — builds the brkga libFuzzer harness with clang outside meson
# (-fsanitize=fuzzer,address,undefined) and runs it for FUZZ_SECONDS (default 30)
# over a seed corpus made of the test data. Exit 0: no crash; 1: a crash (the
# temporary directory with the reproducer is kept); 77: no clang / libFuzzer.
set -u
src=${GJ_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${GJ_BUILD_ROOT:-}
secs=${FUZZ_SECONDS:-30}
command -v clang >/dev/null || { echo "clang not found: skipped"; exit 77; }
tmp=$(mktemp -d /tmp/brkgafuzz.XXXXXX)
keep=0
cleanup() { [ "$keep" = 1 ] || rm -rf "$tmp"; }
trap cleanup EXIT
cd "$tmp"
cfg=""
[ -n "$build" ] && [ -f "$build/gj_config.h" ] && cfg="-I$build"
[ -z "$cfg" ] && { printf '#define GJ_HAVE_CUDA 0\n#define GJ_VERSION "fuzz"\n' > gj_config.h; cfg="-I$tmp"; }
deps="$(pkg-config --cflags --libs jansson expat) -lm -lpthread"
if ! clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$src/compute" $cfg -o brkga_fuzz "$src/tests/brkga/fuzz_brkga.c" \
    "$src"/compute/brkga/brkga_{engine,cpu,net_parse,paths,net,tsp,params,kind,output,bench,gpu_none}.c \
    "$src"/compute/common/{gj_error,gj_ctx,gj_poll,json_schema,json_schema_check,json_schema_value,json_schema_regex,kind_validate,fsutil}.c \
    $deps 2>build.log; then
  if grep -q "libclang_rt.fuzzer\|fuzzer.*not found\|cannot find" build.log; then
    cat build.log; echo "libFuzzer runtime not available: skipped"; exit 77
  fi
  cat build.log; exit 1
fi
mkdir -p corpus
d="$src/tests/brkga/data"
i=0
for f in net14.xml net12.xml net14.json; do { printf '\0'; cat "$d/$f"; } > corpus/n$i; i=$((i+1)); done
for f in dem14.xml dem12.xml dem14.json; do { printf '\1'; cat "$d/$f"; } > corpus/d$i; i=$((i+1)); done
for f in berlin52.tsp att48.tsp; do { printf '\2'; cat "$d/$f"; } > corpus/t$i; i=$((i+1)); done
for f in params14.xml params12.xml; do { printf '\3'; cat "$d/$f"; } > corpus/p$i; i=$((i+1)); done
# inputs that once failed (regressions), kept as seeds
cp "$src"/tests/brkga/fuzz-corpus/* corpus/ 2>/dev/null || true
if ! ./brkga_fuzz -seed="${FUZZ_SEED:-1}" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$tmp/" corpus > fuzz.log 2>&1; then
  keep=1
  tail -40 fuzz.log
  echo "crash: reproducer in $tmp"
  exit 1
fi
tail -3 fuzz.log
exit 0
