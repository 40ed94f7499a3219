#!/usr/bin/env bash
# The GPU evidence in ONE device call of at most 540 s (HACKING.md, "When a GPU is lent").
#
#   tools/device/gpu-kit.sh --build-here   on the development machine (nvcc, no GPU needed):
#                                          builds the CUDA binaries (build-cuda, -Dcuda=enabled)
#                                          and packs them with the libraries a bare CUDA machine
#                                          lacks into .gpukit/ (git-ignored): carry [".gpukit"]
#   tools/device/gpu-kit.sh --plan         prints the device call's steps and budgets; runs nothing
#   bash tools/device/gpu-kit.sh           on the device: the call itself (run's command, with
#                                          carry [".gpukit"] and timeout_s 600)
#
# The device never compiles unless the carried binaries cannot run there (`ldd` finds a library
# missing): then it builds them (needs .debs from fetch-debs.sh carried too, and the time of the
# later steps). Each step runs under `timeout` with its own budget and writes its results under
# $OUT as it ends: summary.txt (one line a step), run.log (everything), facts.txt (the machine),
# steps.tar.gz (each step's log), gpu-YYYYMMDD.json (issue 10's figures, gpu_figures.py).
# A test that exits 77 (skipped) on the device is a FAILURE there: the GPU was not seen.
#
# Settings: GJ_KIT (.gpukit), GJ_KIT_BUILD (build-cuda), GJ_GPU_ARCH (90), GJ_KIT_ONLY (steps
# to run, space-separated; default all), GJ_CALL_LIMIT (540: the call's whole budget).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
KIT=${GJ_KIT:-.gpukit}
KB=${GJ_KIT_BUILD:-build-cuda}
CALL_LIMIT=${GJ_CALL_LIMIT:-540}

# The binaries the call runs, as build-dir paths.
KIT_TARGETS="service/gpujobd tests/recon/test_recon_gpu tests/brkga/test_brkga_gpu tests/onnx/test_onnx_gpu
tests/onnx/onnx_check tests/onnx/test_gpu_brkga_beside_graphs"

# The steps of the call: NAME BUDGET_SECONDS WHAT. The budgets add up to at most CALL_LIMIT.
STEPS=(
    "kit            20 unpack .gpukit, ldd of every carried binary (a missing library: build here instead, see fallback)"
    "facts          10 nvidia-smi, driver, CUDA runtime/toolkit, cuDNN found, compute-sanitizer, python/torch"
    "test-recon     55 test_recon_gpu: every recon algorithm/interpolation on the GPU against the CPU, split vs unsplit"
    "test-brkga     35 test_brkga_gpu: GPU fitness history bit-identical to the CPU backend's"
    "test-onnx-ops  40 test_onnx_gpu: every ONNX operator on CUDA against the CPU backend, graphs off/on, TF32, FP16, cuDNN algorithm log"
    "test-beside    35 test_gpu_brkga_beside_graphs: BRKGA on the GPU while ONNX sessions capture CUDA graphs"
    "memcheck-recon 50 compute-sanitizer --tool memcheck test_recon_gpu (third seed only)"
    "memcheck-brkga 35 compute-sanitizer --tool memcheck test_brkga_gpu (large instance, 20 generations)"
    "models        120 resnet18 densenet121 vit chest-xray exported there (dynamo=False), each against PyTorch: FP32 graphs off, FP32 graphs on, TF32, FP16"
    "bench-recon    85 gpujobd bench recon --n512 --no-skimage (FDK GUPS 256/512, FBP and SART images/s; CPU and GPU)"
    "bench-brkga    40 gpujobd bench brkga (network decoder decodes/s at p = 1024..16384, CPU and GPU; TSP)"
    "figures         5 gpu-YYYYMMDD.json: device, driver, cuda, gpu_suite_failed, fdk_gups_512, fbp_images_per_s_512, sart_images_per_s_256, brkga_decodes_per_s"
)
# The second, optional call (carry [".debs"], builds there): tools/device/gpu-run.sh.
SECOND_CALL="bash tools/device/gpu-run.sh build bench-onnx bench-infer   (then, if time: test: suite gpu with gpu_serving)"

step_field() { echo "$1" | awk -v f="$2" '{ if (f == 3) { $1 = ""; $2 = ""; sub(/^ +/, ""); print } else print $f }'; }

plan() {
    local s total=0 name budget
    echo "gpu-kit: the device call (bash tools/device/gpu-kit.sh, carry [\".gpukit\"], timeout_s 600)"
    printf '  %-15s %7s %9s  %s\n' step budget "ends by" what
    for s in "${STEPS[@]}"; do
        name=$(step_field "$s" 1)
        budget=$(step_field "$s" 2)
        total=$((total + budget))
        printf '  %-15s %6ss %8ss  %s\n' "$name" "$budget" "$total" "$(step_field "$s" 3)"
    done
    echo "  (if the kit cannot run there: fallback-build, up to $(budget_of fallback-build) s from the later steps, needs .debs)"
    echo "  total $total s of the $CALL_LIMIT s a call may take (run's limit is 600 s; the machine's start is not counted)"
    echo "  each step: timeout --kill-after=5 BUDGET; its log into \$OUT/steps.tar.gz and a line into \$OUT/summary.txt as it ends"
    echo "  a skip (exit 77) counts as a failure; a step that cannot start within the call's deadline is NOT RUN"
    echo "second, optional call (serving and the long benchmarks): $SECOND_CALL"
    [ "$total" -le "$CALL_LIMIT" ] || { echo "gpu-kit: the budgets add up to $total s, over $CALL_LIMIT" >&2; return 1; }
}

# ---- on the development machine ------------------------------------------------------------------

# Libraries every machine that runs the binaries has, or must supply itself: glibc's (the
# device's is newer; mixing is unsafe), the C++ runtime the CUDA libraries load too, and CUDA's
# own (the toolkit and cuDNN of the machine, found at run time).
KIT_SKIP_LIBS='/(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so|/lib(cuda|cudart|cufft|cublas|cublasLt|cudnn[a-z_]*|nvrtc|nvJitLink)\.so'

build_here() {
    local t b
    command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu-kit: no nvcc here (/usr/local/cuda/bin)" >&2; return 1; }
    if [ ! -f "$KB/build.ninja" ]; then
        meson setup "$KB" -Dcuda=enabled "-Dgpu_arch=${GJ_GPU_ARCH:-90}" || return 1
    fi
    grep -q 'GJ_HAVE_CUDA 1' "$KB/gj_config.h" || { echo "gpu-kit: $KB was configured without CUDA" >&2; return 1; }
    # shellcheck disable=SC2086
    ninja -C "$KB" $KIT_TARGETS || return 1
    stage=$(mktemp -d) || return 1
    trap 'rm -rf "$stage"' EXIT
    mkdir -p "$stage/libexec" "$stage/lib" "$stage/bin"
    for t in $KIT_TARGETS; do
        b=$(basename "$t")
        strip -o "$stage/libexec/$b" "$KB/$t" || return 1
        # bin/NAME: the binary with the carried libraries first (LD_LIBRARY_PATH for it alone,
        # never for the Python that exports the models) and the machine's CUDA libraries after.
        cat >"$stage/bin/$b" <<EOF
#!/bin/sh
k=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH="\$k/lib\${GJ_KIT_CUDA_LIBS:+:\$GJ_KIT_CUDA_LIBS}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$k/libexec/$b" "\$@"
EOF
        chmod 755 "$stage/bin/$b"
    done
    # shellcheck disable=SC2086
    (cd "$KB" && ldd $KIT_TARGETS) | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
        grep -vE "$KIT_SKIP_LIBS" | while read -r l; do cp -L "$l" "$stage/lib/" || exit 1; done || return 1
    strip --strip-unneeded "$stage"/lib/*.so* 2>/dev/null
    # No path of this machine may be compiled in, but for the source folders in the line tables
    # of device code (nvcc -lineinfo, for compute-sanitizer's reports; strip cannot reach into
    # the fatbin): they name where the source was, nothing reads them.
    local paths
    paths=$(grep -ao --binary-files=text "${root}[[:print:]]*" "$stage"/libexec/* |
        grep -vE "^[^:]*:$root/$KB/\.\./(kernels|compute)/[A-Za-z0-9_/]*\$" | sort -u)
    if [ -n "$paths" ]; then
        echo "gpu-kit: a path of this machine is compiled in:" >&2
        echo "$paths" | head -20 >&2
        return 1
    fi
    {
        echo "built $(date -u +%FT%TZ) from $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!.gpukit' || echo ' (with uncommitted changes)')"
        echo "on $(. /etc/os-release; echo "$PRETTY_NAME"), glibc $(getconf GNU_LIBC_VERSION | awk '{print $2}'), $(gcc --version | head -1)"
        echo "nvcc: $(PATH=$PATH:/usr/local/cuda/bin nvcc --version | tail -2 | tr '\n' ' ')"
        echo "gpu_arch: $(meson introspect --buildoptions "$KB" | /usr/bin/python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="gpu_arch"][0])')"
        echo "needs from the machine: glibc >= $(getconf GNU_LIBC_VERSION | awk '{print $2}'), libstdc++, libgcc_s, and CUDA's:"
        # shellcheck disable=SC2086
        (cd "$KB" && ldd $KIT_TARGETS) | awk '$2 == "=>" {print "  " $1}' | grep -E '^ *lib(cuda|cudart|cufft|cublas|cublasLt|cudnn[a-z_]*|nvrtc|nvJitLink)\.so' | sort -u
        echo "files:"
        (cd "$stage" && find . -type f -printf '  %p %s\n' | sort)
    } >"$stage/MANIFEST.txt"
    rm -rf "$KIT"
    mkdir -p "$KIT"
    cp "$stage/MANIFEST.txt" "$KIT/"
    tar -C "$stage" -cf - MANIFEST.txt bin libexec lib | xz -T2 -9 >"$KIT/kit.tar.xz" || return 1
    echo "gpu-kit: $KIT/kit.tar.xz $(du -b "$KIT/kit.tar.xz" | awk '{printf "%.1f MiB", $1/1048576}')" \
         "($(awk '/^  \.\// {s += $2} END {printf "%.1f MiB", s/1048576}' "$KIT/MANIFEST.txt") unpacked);" \
         "the tree travels too: $(git ls-files -z | du --files0-from=- -cb 2>/dev/null | tail -1 | awk '{printf "%.1f MiB", $1/1048576}') (64 MiB in all)"
}

# ---- on the device ---------------------------------------------------------------------------------

t0=$(date +%s)
left() { echo $((CALL_LIMIT - ($(date +%s) - t0))); }
say() { echo "[gpu-kit $(($(date +%s) - t0))s] $*"; }
note() { say "$*"; echo "$*" >>"$OUT/summary.txt"; }
pack_steps() { tar -C "$W" -czf "$OUT/steps.tar.gz" . 2>/dev/null; true; }

# A step's budget, from STEPS (fallback-build: the time it takes from the steps after it).
budget_of() {
    local s
    [ "$1" = fallback-build ] && { echo 300; return; }
    for s in "${STEPS[@]}"; do
        [ "$(step_field "$s" 1)" = "$1" ] && { step_field "$s" 2; return; }
    done
    echo "gpu-kit: no step $1 in STEPS" >&2
    echo 0
}

# run_step NAME CMD...: CMD under the step's budget (and the call's deadline); 77 is a failure.
run_step() {
    local name=$1 budget rc s
    shift
    budget=$(budget_of "$name")
    # (GJ_KIT_ONLY: the binaries are needed whatever runs)
    if [ -n "${GJ_KIT_ONLY:-}" ] && [ "$name" != kit ] && [ "$name" != fallback-build ] &&
        ! [[ " $GJ_KIT_ONLY " == *" $name "* ]]; then
        return 0
    fi
    [ "$budget" -le "$(left)" ] || budget=$(left)
    if [ "$budget" -lt 5 ]; then
        note "$name: NOT RUN (the call's $CALL_LIMIT s are spent)"
        failed=$((failed + 1))
        return 1
    fi
    say "== $name (budget $budget s): $*"
    s=$(date +%s)
    # (bash -c: a step may be one of the functions below, exported for it)
    timeout --kill-after=5 "$budget" bash -c '"$@"' "$name" "$@" 2>&1 | tee "$W/$name.log"
    rc=${PIPESTATUS[0]}
    case $rc in
        0) note "$name: ok, $(($(date +%s) - s)) s" ;;
        77) note "$name: FAILED: SKIPPED (exit 77) on the GPU machine: it saw no usable GPU" ;;
        124 | 137) note "$name: FAILED: over its budget of $budget s (rc $rc)" ;;
        *) note "$name: FAILED (rc $rc), $(($(date +%s) - s)) s" ;;
    esac
    pack_steps
    [ "$rc" = 0 ] || failed=$((failed + 1))
    return "$rc"
}

# The CUDA libraries of the machine: the toolkit's, then the Python wheels' (cuDNN ships there).
find_cuda_libs() {
    local d dirs="" py
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
        if [ ! -d "$d" ] || [[ ":$dirs:" == *":$(readlink -f "$d"):"* ]]; then continue; fi
        if ls "$d"/libcudart.so* >/dev/null 2>&1 || ls "$d"/libcudnn.so* >/dev/null 2>&1; then
            dirs="$dirs:$(readlink -f "$d")"
        fi
    done
    for py in /opt/torch/.venv/bin/python3 python3; do
        command -v "$py" >/dev/null || continue
        for d in $("$py" -c 'import site,glob; [print(d) for s in site.getsitepackages() for d in sorted(glob.glob(s+"/nvidia/*/lib"))]' 2>/dev/null); do
            dirs="$dirs:$d"
        done
        break
    done
    echo "${dirs#:}"
}

step_kit() {
    local b bad=0
    [ -f "$KIT/kit.tar.xz" ] || { echo "no $KIT/kit.tar.xz: run tools/device/gpu-kit.sh --build-here there, carry [\"$KIT\"]"; return 1; }
    rm -rf "$K" && mkdir -p "$K" || return 1
    if command -v xz >/dev/null; then
        xz -dc "$KIT/kit.tar.xz" | tar -C "$K" -xf - || return 1
    else
        "$PY" -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$KIT/kit.tar.xz" "$K" || return 1
    fi
    head -3 "$K/MANIFEST.txt"
    echo "CUDA libraries: ${GJ_KIT_CUDA_LIBS:-none found}"
    for b in "$K"/libexec/*; do
        if LD_LIBRARY_PATH="$K/lib:$GJ_KIT_CUDA_LIBS" ldd "$b" | grep -E 'not found'; then
            echo "$(basename "$b"): cannot run here"
            bad=1
        fi
    done
    return "$bad"
}

# Fallback: the kit cannot run here; build the same targets here (needs .debs).
step_fallback_build() {
    . tools/device/env.sh || return 1
    [ -n "${GJ_DEPS_PREFIX:-}" ] || { echo "no .debs carried: cannot build here either"; return 1; }
    local args=(-Dcuda=enabled "-Dgpu_arch=${GJ_GPU_ARCH:-90}")
    [ -n "${GJ_CUDNN_DIR:-}" ] && args+=("-Dcudnn_dir=$GJ_CUDNN_DIR")
    [ -f build-gpu/build.ninja ] || meson setup build-gpu "${args[@]}" || return 1
    # shellcheck disable=SC2086
    ninja -C build-gpu $KIT_TARGETS || return 1
    rm -rf "$K" && mkdir -p "$K/bin" || return 1
    for t in $KIT_TARGETS; do ln -s "$root/build-gpu/$t" "$K/bin/$(basename "$t")"; done
}

step_facts() {
    {
        echo "# date: $(date -u +%FT%TZ)"
        echo "# os: $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}"); kernel $(uname -r); glibc $(getconf GNU_LIBC_VERSION | awk '{print $2}')"
        echo "# cpu: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
        nvidia-smi 2>&1 | head -20
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv 2>&1
        echo "# nvcc: $(nvcc --version 2>&1 | tail -2 | tr '\n' ' ')"
        echo "# CUDA libraries used: $GJ_KIT_CUDA_LIBS"
        local d
        for d in ${GJ_KIT_CUDA_LIBS//:/ }; do
            # shellcheck disable=SC2012
            ls "$d"/libcudnn.so.[0-9]* 2>/dev/null | head -1 | sed 's/^/# cuDNN: /'
        done
        echo "# compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo missing)"
        echo "# python: $PY: $("$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1 | tail -1)"
        echo "# kit: $(head -1 "$K/MANIFEST.txt" 2>/dev/null || echo 'built here (fallback)')"
    } | tee "$OUT/facts.txt"
    nvidia-smi -L >/dev/null 2>&1
}

sanitizer() {
    local cs
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    [ -x "$cs" ] || { echo "compute-sanitizer not found"; return 1; }
    "$cs" --tool memcheck --leak-check full --error-exitcode 99 --target-processes all "$@"
}

# The models against PyTorch: each exported once (check_model.sh --reuse), then 4 configurations.
step_models() {
    local m cfg rc=0
    for m in resnet18 densenet121 vit chest-xray; do
        for cfg in "fp32 0 1e-4" "fp32 1 1e-4" "tf32 0 5e-3" "fp16 0 1e-2"; do
            # shellcheck disable=SC2086
            set -- $cfg
            echo "-- $m cuda $1 graphs $2 batch 4, tolerance $3"
            ONNX_CHECK="$K/bin/onnx_check" GJ_BUILD_ROOT="$MODELS" GJ_SOURCE_ROOT="$root" GJ_PYTHON="$PY" \
                sh tests/onnx/check_model.sh "$m" 17 cuda "$1" "$2" 4 "$3" || { echo "FAIL $m $1 graphs $2 (rc $?)"; rc=1; }
        done
    done
    return "$rc"
}

device_call() {
    OUT=${OUT:-$root/gpu-out}
    mkdir -p "$OUT"
    exec > >(tee -a "$OUT/run.log") 2>&1
    teepid=$!
    W=$(mktemp -d /tmp/gj-kit-logs.XXXX)
    K=/tmp/gj-kit
    MODELS=/tmp/gj-kit-models
    PY=/usr/bin/python3
    [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
    GJ_KIT_CUDA_LIBS=$(find_cuda_libs)
    [ -d /usr/local/cuda/bin ] && PATH="$PATH:/usr/local/cuda/bin"   # nvcc, compute-sanitizer
    export GJ_KIT_CUDA_LIBS GJ_SOURCE_ROOT="$root" PYTHONUNBUFFERED=1 PATH
    export OUT W K KIT MODELS PY root t0 KIT_TARGETS
    export -f say step_kit step_fallback_build step_facts sanitizer step_models
    failed=0
    say "working tree $root, $CALL_LIMIT s in all"
    if ! run_step kit step_kit; then
        failed=$((failed - 1))   # the fallback decides
        run_step fallback-build step_fallback_build || { note "no runnable binaries: stopping"; return 1; }
        # shellcheck source=tools/device/env.sh
        . tools/device/env.sh >/dev/null   # (unpacked already) the libraries of the build, for every step
    fi
    local B="$K/bin"
    run_step facts step_facts
    run_step test-recon "$B/test_recon_gpu"
    run_step test-brkga "$B/test_brkga_gpu"
    run_step test-onnx-ops "$B/test_onnx_gpu"
    run_step test-beside "$B/test_gpu_brkga_beside_graphs"
    GJ_TEST_RECON_FIRST_SEED=3 run_step memcheck-recon sanitizer "$B/test_recon_gpu"
    GJ_TEST_BRKGA_GENERATIONS=20 run_step memcheck-brkga sanitizer "$B/test_brkga_gpu"
    run_step models step_models
    run_step bench-recon "$B/gpujobd" bench recon --n512 --no-skimage --json "$W/bench-recon.json"
    run_step bench-brkga "$B/gpujobd" bench brkga
    run_step figures "$PY" tools/device/gpu_figures.py --facts "$OUT/facts.txt" --summary "$OUT/summary.txt" \
        --recon "$W/bench-recon.json" --brkga "$W/bench-brkga.log" --out "$OUT"
    pack_steps
    rm -rf "$W"   # its logs are in $OUT/steps.tar.gz now
    say "summary ($failed failed):"
    cat "$OUT/summary.txt"
    say "second, optional call: $SECOND_CALL"
    [ "$failed" = 0 ]
}

case ${1:-} in
    --plan) plan ;;
    --build-here) build_here ;;
    "")
        device_call
        rc=$?
        exec >&- 2>&-
        wait "$teepid" 2>/dev/null   # run.log complete before the call returns
        exit "$rc"
        ;;
    *) echo "usage: tools/device/gpu-kit.sh [--plan | --build-here]   (no option: the device call)" >&2; exit 2 ;;
esac
