#!/bin/bash
# bench_decode.sh — decode rate per transfer syntax: `gpujobd dicom info FILE
# --pixels OUT.f32` against the toolkits' own decompressors, on the same files,
# one process per file for both (so process start-up is paid by both).
#
# usage: tests/dicom/bench_decode.sh [TOOL] [N]
#   TOOL: gpujobd binary or build-dir/tests/dicom/dicom_tool (both run
#         `TOOL dicom info ...`); default: $GPUJOBD, else build-dicom's dicom_tool
#   N:    files per syntax (default 200), 512x512, 16-bit (12 stored) except
#         JPEG baseline (8-bit)
# Prints a Markdown table: files/s and MB/s by wall clock, where MB is decoded
# pixel data (512*512*2 bytes per 16-bit file, 512*512 per 8-bit file; 1 MB =
# 10^6 bytes), and files per CPU-second (user+sys of the processes), which is
# less sensitive to other load on a shared machine. Each side runs twice,
# alternating; the faster round is reported. The last three columns: the same
# files opened and decoded inside one process (dicom_bench_inproc), twice, the
# round with less CPU time reported.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
tool=${1:-${GPUJOBD:-$src/build-dicom/tests/dicom/dicom_tool}}
tool=$(readlink -f "$tool")
# the in-process rate (no exec per file) comes from dicom_bench_inproc, if built
inproc=${DICOM_BENCH_INPROC:-$(dirname "$tool")/dicom_bench_inproc}
[ -x "$inproc" ] || inproc=$src/build-dicom/tests/dicom/dicom_bench_inproc
n=${2:-200}
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/dicombench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

$py - <<'PY'
import numpy as np
rng = np.random.default_rng(3)
y, x = np.mgrid[0:512, 0:512]
body = ((x - 256) ** 2 + (y - 256) ** 2 < 200 ** 2)
img = 1024 + body * (40 + 300 * np.sin(x / 17.0) * np.cos(y / 23.0)) + rng.normal(0, 20, (512, 512))
img.clip(0, 4095).astype('<u2').tofile('px16.raw')
(img / 16).clip(0, 255).astype('u1').tofile('px8.raw')
PY
mk() {  # name bits raw
  cat > "$1.dump" <<EOF
(0002,0010) UI =LittleEndianExplicit
(0008,0016) UI =CTImageStorage
(0008,0018) UI [1.2.826.0.1.3680043.2.1125.9.$2]
(0008,0060) CS [CT]
(0028,0002) US 1
(0028,0004) CS [MONOCHROME2]
(0028,0010) US 512
(0028,0011) US 512
(0028,0100) US $2
(0028,0101) US $([ "$2" = 16 ] && echo 12 || echo 8)
(0028,0102) US $([ "$2" = 16 ] && echo 11 || echo 7)
(0028,0103) US 0
(0028,1052) DS [-1024]
(0028,1053) DS [1]
(7fe0,0010) $([ "$2" = 16 ] && echo OW || echo OB) =$3
EOF
  dump2dcm "$1.dump" "$1.dcm"
}
mk src16 16 px16.raw
mk src8 8 px8.raw

# name | make command (SRC OUT) | toolkit decoder (IN OUT) | bytes per decoded file
syntaxes=(
  "explicit_le|dcmconv +te|dcmconv +te|524288"
  "implicit_le|dcmconv +ti|dcmconv +te|524288"
  "explicit_be|dcmconv +tb|dcmconv +te|524288"
  "deflated|dcmconv +td|dcmconv +te|524288"
  "rle|dcmcrle|dcmdrle|524288"
  "jpeg_lossless_sv1|dcmcjpeg +e1|dcmdjpeg|524288"
  "jpeg_baseline_8bit|dcmcjpeg +eb|dcmdjpeg|262144"
  "jpegls_lossless|dcmcjpls|dcmdjpls|524288"
  "j2k_lossless|gdcmconv --j2k|gdcmconv --raw|524288"
)

# Runs "$@" (a loop) and prints "wall_s cpu_s" (cpu = user + sys of all children).
measure() {
  /usr/bin/time -f "%e %U %S" -o t.txt bash -c "$1" >/dev/null 2>&1
  awk '{ printf "%s %.3f\n", $1, $2 + $3 }' t.txt
}
# "files/s MB/s" from seconds, files, bytes per file
rate() { awk -v t="$1" -v n="$2" -v b="$3" 'BEGIN { printf "%.1f | %.1f", n / t, n * b / t / 1e6 }'; }
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a < b ? a : b) }'; }

echo "| syntax | file bytes | gpujobd files/s (wall) | MB/s (wall) | files/CPU-s | toolkit | files/s (wall) | MB/s (wall) | files/CPU-s | in-process files/s (wall) | in-process files/CPU-s | in-process MB/CPU-s |"
echo "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
for s in "${syntaxes[@]}"; do
  IFS='|' read -r name make dec bytes <<<"$s"
  srcf=src16.dcm
  [ "$bytes" = 262144 ] && srcf=src8.dcm
  $make $srcf "$name.dcm"
  mkdir -p "$name"
  for i in $(seq 1 "$n"); do cp "$name.dcm" "$name/$i.dcm"; done
  fsize=$(stat -c %s "$name.dcm")
  # warm-up (and check that both decode)
  "$tool" dicom info "$name/1.dcm" --pixels out.f32 >/dev/null
  $dec "$name/1.dcm" out.dcm >/dev/null
  ours="for i in \$(seq 1 $n); do '$tool' dicom info '$name/'\$i.dcm --pixels out.f32; done"
  theirs="for i in \$(seq 1 $n); do $dec '$name/'\$i.dcm out.dcm; done"
  # two alternating rounds each; the faster round counts (the machine is shared)
  ow=1e9; oc=1e9; tw=1e9; tc=1e9
  for round in 1 2; do
    read -r w c < <(measure "$ours"); ow=$(min "$ow" "$w"); oc=$(min "$oc" "$c")
    read -r w c < <(measure "$theirs"); tw=$(min "$tw" "$w"); tc=$(min "$tc" "$c")
  done
  ip="- | - | -"
  if [ -x "$inproc" ]; then
    read -r f1 m1 c1 cm1 < <("$inproc" 1 "$name"/*.dcm)
    read -r f2 m2 c2 cm2 < <("$inproc" 1 "$name"/*.dcm)
    if awk -v a="$c1" -v b="$c2" 'BEGIN { exit !(a > b) }'; then ip="$f1 | $c1 | $cm1"; else ip="$f2 | $c2 | $cm2"; fi
  fi
  echo "| $name | $fsize | $(rate "$ow" "$n" "$bytes") | $(awk -v n="$n" -v c="$oc" 'BEGIN { printf "%.1f", n / c }') | \`$dec\` | $(rate "$tw" "$n" "$bytes") | $(awk -v n="$n" -v c="$tc" 'BEGIN { printf "%.1f", n / c }') | $ip |"
done
