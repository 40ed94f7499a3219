#!/bin/bash
# merge.sh — replaces the kept corpus fuzz/corpus/HARNESS by the inputs of it and of DIRS
# that together reach all the coverage (libFuzzer -set_cover_merge=1: a greedy minimum set
# cover of the features), so the corpus stays small.
# Inputs named regress-* (reproducers of fixed findings) are always kept.
#
#   fuzz/merge.sh HARNESS DIR...          ($FUZZ_BIN: the harnesses, default build-fuzz/)
set -u
here=$(cd "$(dirname "$0")" && pwd)
h=${1:?usage: fuzz/merge.sh HARNESS DIR...}
shift
# shellcheck source=fuzz/flags.sh
. "$here/flags.sh"
flags=$(fuzz_flags "$h") || { echo "unknown harness '$h'"; exit 2; }
bin=$(mkdir -p "${FUZZ_BIN:-$here/../build-fuzz}" && cd "${FUZZ_BIN:-$here/../build-fuzz}" && pwd)
"$here/build.sh" "$bin" "$h" || exit $?
kept=$here/corpus/$h
new=$(mktemp -d "/tmp/merge-$h.XXXXXX")
mkdir -p "$kept"
# shellcheck disable=SC2086
if ! "$bin/${h}_fuzz" $FUZZ_COMMON_FLAGS $flags -set_cover_merge=1 "$new" "$kept" "$@" > "$new.log" 2>&1; then
  tail -30 "$new.log"; echo "merge: $h: failed (log $new.log)"; exit 1
fi
# libFuzzer names inputs by their SHA-1: keep those names, drop what the merge left out
find "$kept" -maxdepth 1 -type f ! -name 'regress-*' -delete
cp "$new"/* "$kept"/
for r in "$kept"/regress-*; do   # no second copy of a reproducer under its SHA-1 name
  [ -e "$r" ] && rm -f "$kept/$(sha1sum < "$r" | cut -d' ' -f1)"
done
rm -rf "$new" "$new.log"
echo "merge: $h: $(ls "$kept" | wc -l) inputs, $(du -sk "$kept" | cut -f1) KiB"
