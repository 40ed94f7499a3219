#!/bin/bash
# build.sh — builds the libFuzzer harnesses of fuzz/ with clang, ASan and UBSan, outside
# meson (the project's build may use gcc; libFuzzer needs clang).
#
#   fuzz/build.sh OUTDIR [HARNESS...]     (default: every harness; see `fuzz/build.sh --list`)
#
# Each harness becomes OUTDIR/<name>_fuzz. Every source is compiled to its own object (through
# ccache when it is installed, JOBS at a time, default 2), so a rebuild after a change is
# quick. Exit 0; 1 when a build failed; 77 when clang or its libFuzzer runtime is missing.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
all="dicom multipart_related brkga json_schema nrrd onnx http_route pbtxt oip_json_data"
[ "${1:-}" = "--list" ] && { echo "$all"; exit 0; }
[ $# -ge 1 ] || { echo "usage: fuzz/build.sh OUTDIR [HARNESS...] (harnesses: $all)" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
shift
names=${*:-$all}
cc=${FUZZ_CC:-clang}
command -v "$cc" >/dev/null || { echo "$cc not found: skipped"; exit 77; }
ccache=""
command -v ccache >/dev/null && ccache=ccache
san="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
cflags="-g -O1 -std=gnu17 -D_GNU_SOURCE -DONNX_WITH_CUDA=0 -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration $san -I$src/compute -I$src -I$out/gen"

# Generated files: a CPU-only gj_config.h and the ONNX protobuf decoder.
mkdir -p "$out/gen"
printf '#define GJ_HAVE_CUDA 0\n#define GJ_VERSION "fuzz"\n' > "$out/gen/gj_config.h.new"
cmp -s "$out/gen/gj_config.h.new" "$out/gen/gj_config.h" || mv "$out/gen/gj_config.h.new" "$out/gen/gj_config.h"
rm -f "$out/gen/gj_config.h.new"

common="compute/common/gj_error.c"
schema="compute/common/json_schema.c compute/common/json_schema_check.c compute/common/json_schema_value.c
        compute/common/json_schema_compiled.c compute/common/json_schema_regex.c"

# The routes of openapi/openapi.yaml (equal to `gpujobd serve --print-routes`, which the
# OpenAPI test holds) as C initialisers { "METHOD", "/path/{param}" }.
routes_inc() {
  python3 - "$src/openapi/openapi.yaml" > "$1.new" <<'PY' || return 1
import re, sys
path = None
for line in open(sys.argv[1]):
    m = re.match(r"^  (/\S*):\s*$", line)
    if m:
        path = m.group(1)
        continue
    m = re.match(r"^    (get|put|post|delete|patch|head|options):\s*$", line)
    if m and path:
        print('{ "%s", "%s" },' % (m.group(1).upper(), path))
    elif re.match(r"^\S", line):
        path = None
PY
  cmp -s "$1.new" "$1" && rm -f "$1.new" || mv "$1.new" "$1"
}

# The sources and libraries of one harness: sets $srcs and $libs.
harness() {
  srcs="fuzz/$1_fuzz.c $common"
  case $1 in
    dicom)
      srcs+=" $(cd "$src" && ls compute/infer/dicom_*.c | grep -v -e dicom_cli.c -e dicom_write.c -e dicom_sr.c)"
      libs="$(pkg-config --libs libturbojpeg charls libopenjp2 zlib) -lm" ;;
    multipart_related)
      srcs+=" $(cd "$src" && find service -name multipart_related.c)"
      libs="" ;;
    brkga)
      srcs+=" $(cd "$src" && ls compute/brkga/brkga_*.c | grep -v brkga_bench.c) $schema
              compute/common/gj_ctx.c compute/common/gj_poll.c compute/common/kind_validate.c
              compute/common/kind_schema.c compute/common/fsutil.c compute/common/gj_seed.c"
      libs="$(pkg-config --libs jansson expat) -lm -lpthread" ;;
    json_schema)
      srcs+=" $schema"
      libs="$(pkg-config --libs jansson) -lm" ;;
    nrrd)
      srcs+=" compute/recon/io.c compute/common/nrrd.c compute/common/gj_poll.c compute/common/gj_ctx.c"
      libs="$(pkg-config --libs libpng jansson) -lm" ;;
    onnx)
      [ -f "$out/gen/onnx.pb-c.c" ] && [ "$out/gen/onnx.pb-c.c" -nt "$src/compute/infer/onnx/onnx.proto" ] ||
        protoc-c --c_out="$out/gen" --proto_path="$src/compute/infer/onnx" "$src/compute/infer/onnx/onnx.proto" ||
        return 1
      srcs+=" $(cd "$src" && ls compute/infer/onnx/onnx_*.c | grep -v -e onnx_cuda.c -e onnx_bench.c) compute/common/fsutil.c $out/gen/onnx.pb-c.c"
      libs="$(pkg-config --libs libprotobuf-c) $(pkg-config --libs openblas 2>/dev/null || echo -lopenblas) -lm -lpthread" ;;
    http_route)
      routes_inc "$out/gen/http_routes.inc" || return 1
      srcs+=" service/http/http_parse.c service/http/http_target.c service/base/base64.c service/base/uuid.c compute/common/fsutil.c"
      libs="$(pkg-config --libs libmicrohttpd) -lpthread" ;;
    pbtxt)
      [ -f "$out/gen/infer/serving/triton_model_config.pb-c.c" ] &&
        [ "$out/gen/infer/serving/triton_model_config.pb-c.c" -nt "$src/compute/infer/serving/triton_model_config.proto" ] ||
        { mkdir -p "$out/gen/infer/serving" &&
          protoc-c --c_out="$out/gen/infer/serving" --proto_path="$src/compute/infer/serving" \
            "$src/compute/infer/serving/triton_model_config.proto"; } || return 1
      srcs+=" compute/infer/serving/pbtxt.c compute/infer/serving/model_pbtxt.c compute/common/fsutil.c
              $out/gen/infer/serving/triton_model_config.pb-c.c"
      libs="$(pkg-config --libs libprotobuf-c jansson)" ;;
    oip_json_data)
      srcs+=" service/infer/oip_json_data.c"
      libs="$(pkg-config --libs jansson) -lm" ;;
    *) echo "unknown harness '$1' (harnesses: $all)" >&2; return 1 ;;
  esac
}

# One object per source, rebuilt when the source or a header it includes changed (-MMD).
compile() {
  local s=$1 o=$2
  if [ -f "$o" ] && [ -f "$o.d" ]; then
    local stale=0 dep
    for dep in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$o.d"); do
      [ "$dep" -nt "$o" ] && { stale=1; break; }
    done
    [ "$stale" = 0 ] && return 0
  fi
  # shellcheck disable=SC2086
  $ccache "$cc" $cflags $pkgcflags -MMD -MF "$o.d" -c "$s" -o "$o"
}
pkgcflags=$(pkg-config --cflags jansson expat libpng libprotobuf-c libopenjp2 charls libturbojpeg libmicrohttpd libpq 2>/dev/null)
export -f compile
export cc ccache cflags pkgcflags

fail=0
for n in $names; do
  harness "$n" || { fail=1; continue; }
  objs=""
  list=""
  for s in $srcs; do
    case $s in /*) path=$s ;; *) path=$src/$s ;; esac
    o="$out/obj/$(echo "${s#"$src"/}" | tr / _).o"
    objs+=" $o"
    list+="$path $o"$'\n'
  done
  mkdir -p "$out/obj"
  if ! printf '%s' "$list" | xargs -P "${JOBS:-2}" -L 1 bash -c 'compile "$0" "$1"'; then
    echo "build.sh: $n: compilation failed" >&2; fail=1; continue
  fi
  # shellcheck disable=SC2086
  if ! "$cc" $san -o "$out/${n}_fuzz" $objs $libs 2>"$out/link-$n.log"; then
    cat "$out/link-$n.log" >&2
    if grep -q "libclang_rt.fuzzer\|cannot find.*fuzzer" "$out/link-$n.log"; then
      echo "libFuzzer runtime not available (libclang-rt-dev): skipped"; exit 77
    fi
    fail=1
  fi
done
exit $fail
