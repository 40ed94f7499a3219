#!/bin/bash
# smoke.sh — the CI smoke run of one libFuzzer harness (suite 'fuzz'):
#
#   fuzz/smoke.sh HARNESS        (FUZZ_SECONDS, default 20; FUZZ_SEED, default 1)
#
# Builds the harness (fuzz/build.sh, into $GJ_BUILD_ROOT/fuzz or a temporary directory),
# replays its kept corpus (fuzz/corpus/HARNESS, never written to) and fuzzes from it for
# FUZZ_SECONDS, new inputs going to a temporary directory. Exit 0: no finding; 1: a crash,
# leak, UB report, out-of-memory or timeout (the reproducer and the log are kept and named);
# 77: clang or libFuzzer is missing.
#
# DICOM only: Debian 12's CharLS 2.4.1 can spin for seconds on a hostile JPEG-LS scan (fixed
# upstream after 2.4.1; compute/infer/BENCH_NOTES_DICOM.md). Its harness runs in fork mode
# so a timeout does not end the run, and each timeout is replayed: one whose stack is not
# inside libcharls fails the run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
h=${1:?usage: fuzz/smoke.sh HARNESS}
secs=${FUZZ_SECONDS:-20}
# shellcheck source=fuzz/flags.sh
. "$here/flags.sh"
flags=$(fuzz_flags "$h") || { echo "unknown harness '$h'"; exit 2; }
tmp=$(mktemp -d "/tmp/fuzz-$h.XXXXXX")
keep=0
cleanup() { [ "$keep" = 1 ] || rm -rf "$tmp"; }
trap cleanup EXIT
bindir=${GJ_BUILD_ROOT:+$GJ_BUILD_ROOT/fuzz}
bindir=${bindir:-$tmp/bin}
"$here/build.sh" "$bindir" "$h" > "$tmp/build.log" 2>&1
rc=$?
[ $rc = 77 ] && { tail -1 "$tmp/build.log"; exit 77; }
[ $rc != 0 ] && { cat "$tmp/build.log"; echo "smoke: $h: build failed"; exit 1; }
bin=$bindir/${h}_fuzz
corpus=$here/corpus/$h
mkdir -p "$tmp/new" "$tmp/art"
mode=""
[ "$h" = dicom ] && mode="-fork=1 -ignore_timeouts=1 -ignore_crashes=0 -ignore_ooms=0"
cd "$tmp" || exit 1
t0=$(date +%s)
# shellcheck disable=SC2086
"$bin" $FUZZ_COMMON_FLAGS $flags $mode -seed="${FUZZ_SEED:-1}" -max_total_time="$secs" \
  -artifact_prefix="$tmp/art/" "$tmp/new" "$corpus" > fuzz.log 2>&1
rc=$?
grep -E "INITED|DONE|stat::number_of_executed_units|stat::peak_rss" fuzz.log | tail -4
fail=0
[ $rc != 0 ] && { echo "smoke: $h: fuzzer exit $rc"; tail -60 fuzz.log; fail=1; }
for t in "$tmp"/art/timeout-*; do
  [ -e "$t" ] || continue
  "$bin" -timeout=3 "$t" > replay.log 2>&1
  if [ "$h" = dicom ] && grep -q "libcharls" replay.log; then
    echo "smoke: known CharLS 2.4.1 slow input (not ours): $(basename "$t")"
  else
    echo "smoke: $h: timeout: $t"; tail -30 replay.log; fail=1
  fi
done
for c in "$tmp"/art/crash-* "$tmp"/art/leak-* "$tmp"/art/oom-*; do
  [ -e "$c" ] && { echo "smoke: $h: finding $c"; fail=1; }
done
if [ $fail != 0 ]; then
  keep=1
  echo "smoke: $h: FAILED; reproducers and fuzz.log in $tmp"
  exit 1
fi
echo "smoke: $h: no finding in ${secs}s of fuzzing ($(($(date +%s) - t0))s with the corpus replay)"
