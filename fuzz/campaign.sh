#!/bin/bash
# campaign.sh — one harness's fuzzing campaign (FUZZING.md):
#
#   fuzz/campaign.sh HARNESS SECONDS WORKDIR [LIBFUZZER_OPTIONS...]
#
# Builds the harness into $FUZZ_BIN (default build-fuzz/), then fuzzes for SECONDS at
# nice 10, one process, from WORKDIR/corpus (created from the kept corpus fuzz/corpus/HARNESS
# and, when given, $FUZZ_SEEDS/HARNESS, the output of fuzz/seeds.py) with the options of
# flags.sh. New inputs go to WORKDIR/corpus, findings to WORKDIR/art/, the log to
# WORKDIR/fuzz.log; the last lines printed are libFuzzer's final figures. Extra options are
# passed on (e.g. -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 to collect
# every finding in one run). Then `fuzz/merge.sh HARNESS WORKDIR/corpus` keeps what adds
# coverage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
h=${1:?usage: fuzz/campaign.sh HARNESS SECONDS WORKDIR [OPTIONS...]}
secs=${2:?seconds}
work=${3:?workdir}
shift 3
# shellcheck source=fuzz/flags.sh
. "$here/flags.sh"
flags=$(fuzz_flags "$h") || { echo "unknown harness '$h'"; exit 2; }
bin=$(mkdir -p "${FUZZ_BIN:-$here/../build-fuzz}" && cd "${FUZZ_BIN:-$here/../build-fuzz}" && pwd)
"$here/build.sh" "$bin" "$h" || exit $?
mkdir -p "$work/corpus" "$work/art"
work=$(cd "$work" && pwd)
[ -n "${FUZZ_SEEDS:-}" ] && [ -d "$FUZZ_SEEDS/$h" ] && cp -n "$FUZZ_SEEDS/$h"/* "$work/corpus/" 2>/dev/null
cd "$work" || exit 1
# shellcheck disable=SC2086
nice -n 10 "$bin/${h}_fuzz" $FUZZ_COMMON_FLAGS $flags -max_total_time="$secs" -artifact_prefix="$work/art/" \
  "$@" "$work/corpus" "$here/corpus/$h" > "$work/fuzz.log" 2>&1
rc=$?
echo "campaign: $h: exit $rc after ${secs}s; findings: $(ls "$work/art" | wc -l)"
grep -E "^#[0-9]+.*(INITED|DONE)|^#[0-9]+: cov|stat::" "$work/fuzz.log" | tail -8
exit $rc
