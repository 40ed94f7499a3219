#!/usr/bin/env bash
# The SECOND, optional device call (carry [".debs"]): builds on the device and takes what the
# first call cannot (serving, the inference benchmarks, suite gpu through meson). The first
# call, the GPU evidence in 540 s from binaries built here, is tools/device/gpu-kit.sh.
#
#   bash tools/device/gpu-run.sh [STEP...]          (e.g. build bench-onnx bench-infer)
#
# STEP: info        nvidia-smi, nvcc, cuDNN, compilers, OS (also at the start of every call)
#       build       meson setup -Dcuda=enabled -Dgpu_arch=90 build-gpu (once), ninja
#       test        meson test --suite gpu (verbose: the tests print their GPU-vs-CPU figures)
#       bench       bench-recon bench-brkga bench-onnx bench-infer
#       bench-recon gpujobd bench recon --n512 --json   (FDK GUPS, FBP/SART images/s; CPU and GPU)
#       bench-brkga gpujobd bench brkga                 (decodes/s, generations/s; CPU and GPU)
#       bench-onnx  ResNet-18/DenseNet-121 (torchvision, exported there) through gpujobd bench
#                   onnx: cpu fp32, cuda fp32/tf32/fp16, fp16 with CUDA graphs
#       bench-infer bench/infer_gpu_bench.py (gpujobd bench infer, gpujobd serve, vs PyTorch;
#                   7-8 min on an H100: give it a call of its own)
#       test-rest   every other suite (not gpu, not the libFuzzer ones: no clang there)
#       all         info build test bench test-rest, RESUMABLE: a step that succeeded in an
#                   earlier call on the same warm machine is skipped (GJ_FORCE=1 redoes it), so
#                   calling `all` again continues where the last call stopped.
#
# Time: the device kills a command at timeout_s (600 s at most). Every step runs under a
# deadline GJ_TIME_LIMIT seconds (default 570) after the start; a step that cannot start with
# enough time left is reported "not run (time)" and the call ends cleanly; call again.
#
# Results under $OUT (at most 8 files come back; all are written as the steps go, so a call
# killed at its limit still returns what it did):
#   run.log          everything printed          summary.txt   one line per step
#   info.txt         the machine                 meson-log.txt only when meson setup failed
#   testlog-gpu.txt  meson's log of suite gpu    testlog-rest.txt   the other suites
#   bench.tar.gz     bench-*.log and bench-*.json of every benchmark run in this call
#
# Settings: GJ_BUILD_DIR (build-gpu; git-ignored, so kept on a warm machine between calls),
# GJ_GPU_ARCH (90), GJ_MESON_ARGS (extra setup options), GJ_JOBS (nproc), GJ_TIME_LIMIT (570),
# GJ_FORCE (0), GJ_BENCH_RECON_ARGS (--n512), GJ_BENCH_BRKGA_ARGS,
# GJ_BENCH_ONNX_CONFIGS (';'-separated argument lists), GJ_BENCH_INFER_PY_ARGS (extra arguments
# of bench/infer_gpu_bench.py), GJ_BENCH_INFER_ARGS (also run `gpujobd bench infer` with these),
# GJ_TEST_REST_ARGS.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
t0=$(date +%s)
limit=${GJ_TIME_LIMIT:-570}
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
teepid=$!
B=${GJ_BUILD_DIR:-build-gpu}
case $B in /*) ;; *) B="$root/$B" ;; esac
W="$B/gj-bench"        # this call's benchmark logs, packed into $OUT/bench.tar.gz
stamps="$B/.gj-done"
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(all)

left() { echo $((limit - ($(date +%s) - t0))); }
say() { echo "[gpu-run $(($(date +%s) - t0))s] $*"; }
note() { say "$*"; echo "$*" >>"$OUT/summary.txt"; }

# run_step NAME MIN_SECONDS FUNCTION: runs FUNCTION if MIN_SECONDS are left, under a timeout
# that ends it before the device's limit; records the outcome.
resumable=0
run_step() {
    local name=$1 min=$2 fn=$3 s rc
    # (build always runs: ninja is a no-op when nothing changed, and the tree may have.)
    if [ "$resumable" = 1 ] && [ "${GJ_FORCE:-0}" != 1 ] && [ "$name" != build ] && [ -f "$stamps/$name" ]; then
        note "$name: done in an earlier call ($(cat "$stamps/$name")), skipped"
        return 0
    fi
    if [ "$(left)" -lt "$min" ]; then
        note "$name: NOT RUN (time: $(left) s left, needs about $min): call again"
        return 2
    fi
    say "== $name (up to $(($(left) - 10)) s)"
    s=$(date +%s)
    GJ_STEP_TIMEOUT=$(($(left) - 10)) "$fn"
    rc=$?
    if [ "$rc" = 0 ]; then
        note "$name: ok, $(($(date +%s) - s)) s"
        mkdir -p "$stamps" && date -u +%FT%TZ >"$stamps/$name"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        note "$name: TIMED OUT after $(($(date +%s) - s)) s (rc $rc): call again, or run it alone"
    else
        note "$name: FAILED (rc $rc), $(($(date +%s) - s)) s"
    fi
    return "$rc"
}
# tmo CMD...: CMD under the step's remaining time.
tmo() { timeout --kill-after=5 "${GJ_STEP_TIMEOUT:-60}" "$@"; }
# Only the small text results travel back (a file may be 16 MiB at most): never the models.
pack_bench() {
    [ -d "$W" ] || return 0
    (cd "$W" && find . -type f -size -4M \( -name '*.log' -o -name '*.json' -o -name '*.jsonl' \
        -o -name '*.md' -o -name '*.csv' -o -name '*.txt' \) -print0 |
        tar --null -T - -czf "$OUT/bench.tar.gz") 2>/dev/null
    true
}

step_info() {
    {
        echo "# date: $(date -u +%FT%TZ)"
        echo "# os: $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}"); kernel $(uname -r); glibc $(getconf GNU_LIBC_VERSION | awk '{print $2}')"
        echo "# cpu: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
        echo "# nvidia-smi:"; nvidia-smi 2>&1 | head -20
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv 2>&1
        echo "# nvcc: $(nvcc --version 2>&1 | tail -2 | tr '\n' ' ')"
        echo "# CUDA libraries in ${GJ_CUDA_HOME:-/usr/local/cuda}/lib64:"
        ls "${GJ_CUDA_HOME:-/usr/local/cuda}"/lib64/ 2>&1 | grep -E '^lib(cudart|cufft|cublas|cublasLt|cudnn)\.so' | tr '\n' ' '; echo
        echo "# cuDNN: ${GJ_CUDNN_VERSION:-not found} ${GJ_CUDNN_DIR:+($GJ_CUDNN_DIR -> ${GJ_CUDNN_REAL_DIR:-})}"
        echo "# gcc: $(gcc --version 2>&1 | head -1); g++: $(g++ --version 2>&1 | head -1)"
        echo "# meson $(meson --version 2>&1), ninja $(ninja --version 2>&1), pkg-config $($PKG_CONFIG --version 2>&1)"
        echo "# python: $GJ_PYTHON ($("$GJ_PYTHON" --version 2>&1)); /usr/bin/python3: $(/usr/bin/python3 -c 'import sys, numpy, torch; print(sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tail -1)"
        echo "# PostgreSQL: $("$GPUJOBD_PG_BINDIR/postgres" --version 2>&1) (user $GPUJOBD_PG_USER: $(id "$GPUJOBD_PG_USER" 2>&1))"
        echo "# working tree: $root"
    } | tee "$OUT/info.txt"
}

step_build() {
    local args=(-Dcuda=enabled "-Dgpu_arch=${GJ_GPU_ARCH:-90}")
    local cuda=${GJ_CUDA_HOME:-/usr/local/cuda}
    [ "$cuda" != /usr/local/cuda ] && args+=("-Dcudatoolkit=$cuda")
    if grep -q "'cudnn_dir'" meson_options.txt && [ -n "${GJ_CUDNN_DIR:-}" ]; then
        args+=("-Dcudnn_dir=$GJ_CUDNN_DIR")
    fi
    # shellcheck disable=SC2206
    args+=(${GJ_MESON_ARGS:-})
    if [ ! -f "$B/build.ninja" ]; then
        say "meson setup $B ${args[*]}"
        if ! tmo meson setup "$B" "${args[@]}"; then
            cp "$B/meson-logs/meson-log.txt" "$OUT/meson-log.txt" 2>/dev/null
            return 1
        fi
    fi
    tmo ninja -C "$B" -j "${GJ_JOBS:-$(nproc)}" || return $?
    if ! grep -q 'GJ_HAVE_CUDA 1' "$B/gj_config.h"; then
        say "built WITHOUT CUDA ($B/gj_config.h): see meson-log.txt"
        cp "$B/meson-logs/meson-log.txt" "$OUT/meson-log.txt" 2>/dev/null
        return 1
    fi
    ldd "$B/service/gpujobd" | grep -E 'not found|cuda|cufft|cublas|cudnn|gjdeps' || true
    ! ldd "$B/service/gpujobd" | grep -q 'not found'
}

step_test() {
    local rc
    tmo meson test -C "$B" --suite gpu --verbose --print-errorlogs --num-processes 2
    rc=$?
    cp "$B/meson-logs/testlog.txt" "$OUT/testlog-gpu.txt" 2>/dev/null
    if grep -q 'SKIP' "$OUT/testlog-gpu.txt" 2>/dev/null; then
        say "WARNING: GPU tests SKIPPED (exit 77) on a GPU machine: the binaries saw no device"
        [ "$rc" = 0 ] && rc=3
    fi
    return "$rc"
}

step_test_rest() {
    local rc
    # shellcheck disable=SC2086
    tmo meson test -C "$B" --no-suite gpu --no-suite fuzz \
        --print-errorlogs --num-processes "${GJ_JOBS:-$(nproc)}" ${GJ_TEST_REST_ARGS:-}
    rc=$?
    cp "$B/meson-logs/testlog.txt" "$OUT/testlog-rest.txt" 2>/dev/null
    return "$rc"
}

G="$B/service/gpujobd"
bench_cmd() {    # bench_cmd NAME CMD...: CMD's output into $W/bench-NAME.log and run.log
    local name=$1 rc
    shift
    mkdir -p "$W"
    say "$*"
    (cd "$W" && tmo "$@") 2>&1 | tee "$W/bench-$name.log"
    rc=${PIPESTATUS[0]}
    pack_bench
    return "$rc"
}
step_bench_recon() {
    # shellcheck disable=SC2086
    bench_cmd recon "$G" bench recon ${GJ_BENCH_RECON_ARGS:---n512} --json "$W/bench-recon.json"
}
step_bench_brkga() {
    # shellcheck disable=SC2086
    bench_cmd brkga "$G" bench brkga ${GJ_BENCH_BRKGA_ARGS:-}
}
step_bench_onnx() {
    local models="$B/bench-models" m
    mkdir -p "$models"
    for m in resnet18 densenet121; do
        [ -s "$models/${m}_224.onnx" ] ||
            tmo "$GJ_PYTHON" tests/onnx/models.py "$models" "$m" --size 224 --batch 1 --no-reference ||
            return 1
    done
    # One run per configuration; GJ_BENCH_ONNX_CONFIGS: ';'-separated argument lists.
    local configs=${GJ_BENCH_ONNX_CONFIGS:-"--backend cpu --batch 1,8 --seconds 3;--backend cuda --precision fp32 --batch 1,8,32 --seconds 3;--backend cuda --precision tf32 --batch 1,8,32 --seconds 3;--backend cuda --precision fp16 --batch 1,8,32 --seconds 3;--backend cuda --precision fp16 --cuda-graphs --batch 1,8,32 --seconds 3"}
    local c i=0 rc=0 IFS=';'
    for c in $configs; do
        i=$((i + 1))
        IFS=' '
        # shellcheck disable=SC2086
        bench_cmd "onnx-$i" "$G" bench onnx $c "$models"/resnet18_224.onnx "$models"/densenet121_224.onnx || rc=1
        IFS=';'
    done
    return "$rc"
}
step_bench_infer() {
    local ran=0 rc=0
    # bench/infer_gpu_bench.py drives `gpujobd bench infer` (runtime, in-process batcher) and
    # `gpujobd serve` over HTTPS against PyTorch; it bounds itself by $GJ_STEP_TIMEOUT.
    if [ -f bench/infer_gpu_bench.py ]; then
        # shellcheck disable=SC2086
        GPUJOBD="$G" GJ_SOURCE_ROOT="$root" GJ_BUILD_ROOT="$B" PYTHONUNBUFFERED=1 \
            bench_cmd infer-e2e "$GJ_PYTHON" "$root/bench/infer_gpu_bench.py" --out "$W/infer" \
            --models-dir "$B/bench-models-infer" ${GJ_BENCH_INFER_PY_ARGS:-} || rc=$?
        ran=1
    fi
    if [ -n "${GJ_BENCH_INFER_ARGS:-}" ]; then
        # shellcheck disable=SC2086
        bench_cmd infer "$G" bench infer $GJ_BENCH_INFER_ARGS || rc=$?
        ran=1
    fi
    [ "$ran" = 1 ] || say "no infer benchmark in this tree yet (gpujobd bench infer, bench/infer_gpu_bench.py)"
    return "$rc"
}

# The environment: the carried prefix, PostgreSQL, cuDNN, python.
say "working tree $root, build dir $B, $(left) s to go"
# shellcheck source=tools/device/env.sh
. tools/device/env.sh
[ -n "${GJ_DEPS_PREFIX:-}" ] || { note "env: FAILED (no .debs? carry [\".debs\"])"; exit 1; }
# The postgres user must reach the test clusters' directories (the harness and the unit tests
# use /tmp; gpujobd serve's data dir may lie under the working tree).
d=$root
while [ "$d" != / ]; do
    if [ "$(stat -c %A "$d" | cut -c10)" != x ]; then chmod o+x "$d" && say "chmod o+x $d (for the postgres user)"; fi
    d=$(dirname "$d")
done
step_info >/dev/null
say "$(grep -E '^# (nvcc|cuDNN|os)' "$OUT/info.txt" | tr '\n' ' ')"
nvidia-smi -L 2>&1 | head -2

final=0
bench_all() {
    run_step bench-recon 60 step_bench_recon || final=1
    run_step bench-brkga 60 step_bench_brkga || final=1
    run_step bench-onnx 60 step_bench_onnx || final=1
    run_step bench-infer 240 step_bench_infer || final=1
}
for s in "${steps[@]}"; do
    case $s in
        info) cat "$OUT/info.txt" ;;
        build) run_step build 60 step_build || final=1 ;;
        test) run_step test 30 step_test || final=1 ;;
        bench) bench_all ;;
        bench-recon | bench-brkga | bench-onnx | bench-infer)
            run_step "$s" 30 "step_${s//-/_}" || final=1 ;;
        test-rest) run_step test-rest 60 step_test_rest || final=1 ;;
        all)
            resumable=1
            # Later steps need the build: stop at a failed build.
            if run_step build 60 step_build; then
                run_step test 30 step_test || final=1
                bench_all
                run_step test-rest 60 step_test_rest || final=1
            else
                final=1
            fi
            resumable=0
            ;;
        *) echo "gpu-run: unknown step $s (info build test bench bench-recon bench-brkga bench-onnx bench-infer test-rest all)"; final=1 ;;
    esac
done
pack_bench
say "summary:"
cat "$OUT/summary.txt" 2>/dev/null
exec >&- 2>&-
wait "$teepid" 2>/dev/null
exit "$final"
