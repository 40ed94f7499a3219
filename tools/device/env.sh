# shellcheck shell=bash
# Sourced on the device machine (bash): `. tools/device/env.sh`.
#
# Unpacks .debs/*.deb (made here by tools/device/fetch-debs.sh, carried with the call) into a
# prefix with `dpkg -x` (never into /), fixes the prefix up, and exports what the build, the
# tests and the benchmarks read:
#   PATH                PostgreSQL's bin (initdb, postgres, psql), the prefix's usr/bin
#                       (pkg-config, protoc-c), the CUDA toolkit's bin, the Python venv's bin
#   PKG_CONFIG, PKG_CONFIG_PATH, PKG_CONFIG_LIBDIR   the prefix's .pc files first
#   CPATH, LIBRARY_PATH, LD_LIBRARY_PATH              headers/libraries found without pkg-config
#   GPUJOBD_PG_BINDIR, GPUJOBD_PG_USER                gpujobd's --pg-bindir, --pg-user (the harness
#                                                     finds initdb and psql on PATH)
#   GJ_CUDNN_DIR, GJ_CUDNN_VERSION                    cuDNN (include/, lib/) for -Dcudnn_dir
#   GJ_PYTHON                                         the python3 that has torch/numpy/skimage
#   DCMDICTPATH                                       DCMTK's dictionary (img2dcm, dcmodify)
#   GJ_DEPS_PREFIX                                    the prefix
# It also creates the `postgres` user when missing (initdb refuses root).
#
# Settings (environment, before sourcing):
#   GJ_DEPS_PREFIX=/opt/gjdeps   where to unpack
#   GJ_DEPS_PREFER=system        a carried library whose soname the machine already has is
#                                replaced by a link to the machine's own copy (its programs,
#                                Python's pyexpat say, keep their own, usually newer, libraries);
#                                `prefix` keeps every carried copy (used to check the closure)
#   GJ_DEPS_ISOLATED=0           1: pkg-config reads the prefix's .pc files only
#   GJ_DEPS_QUIET=0              1: no summary
# Safe to source again: the prefix is unpacked once per set of .debs (a stamp file).

_gj_env_main() {
    local root deb p ml stamp want n
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    p=${GJ_DEPS_PREFIX:-/opt/gjdeps}
    ml=x86_64-linux-gnu
    local prefer=${GJ_DEPS_PREFER:-system} isolated=${GJ_DEPS_ISOLATED:-0}
    local pcdirs="$p/usr/lib/$ml/pkgconfig:$p/usr/lib/$ml/openblas-pthread/pkgconfig:$p/usr/lib/pkgconfig:$p/usr/share/pkgconfig"
    local sysdirs="/usr/local/lib/$ml/pkgconfig:/usr/local/lib/pkgconfig:/usr/local/share/pkgconfig:/usr/lib/$ml/pkgconfig:/usr/lib/pkgconfig:/usr/share/pkgconfig"
    local libdirs="$p/usr/lib/$ml:$p/lib/$ml:$p/usr/lib/$ml/openblas-pthread"

    # A python3 for the fix-ups and the tests: the one with torch (the venv on the device).
    local py cand
    py=""
    for cand in "${GJ_PYTHON:-}" /opt/torch/.venv/bin/python3 "$(command -v python3 || true)" /usr/bin/python3; do
        [ -n "$cand" ] && [ -x "$cand" ] || continue
        if "$cand" -c 'import numpy' 2>/dev/null; then py=$cand; break; fi
        [ -z "$py" ] && py=$cand
    done
    [ -n "$py" ] || { echo "env.sh: no python3 found" >&2; return 1; }
    export GJ_PYTHON=$py

    # 1. Unpack (once per set of .debs and settings).
    if ! ls "$root"/.debs/*.deb >/dev/null 2>&1; then
        echo "env.sh: no $root/.debs/*.deb: run tools/device/fetch-debs.sh on the dev machine and carry [\".debs\"]" >&2
        return 1
    fi
    want=$( (cd "$root/.debs" && ls -l -- *.deb | awk '{print $5, $NF}'; echo "$prefer $isolated v3") | cksum)
    stamp="$p/.gj-stamp"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        rm -rf "$p"
        mkdir -p "$p"
        chmod 755 "$p"
        n=0
        for deb in "$root"/.debs/*.deb; do
            if command -v dpkg-deb >/dev/null; then
                dpkg-deb -x "$deb" "$p" || { echo "env.sh: dpkg-deb -x $deb failed" >&2; return 1; }
            else
                # No dpkg: a .deb is an ar archive holding data.tar.xz.
                (cd "$p" && ar p "$deb" data.tar.xz | tar -xJ) || { echo "env.sh: cannot unpack $deb" >&2; return 1; }
            fi
            n=$((n + 1))
        done
        # PostgreSQL's JIT needs libLLVM, which is not carried: without llvmjit.so the JIT is off.
        rm -f "$p"/usr/lib/postgresql/*/lib/llvmjit*.so

        # 2. Absolute symlinks (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13) into the prefix.
        local l t
        while IFS= read -r l; do
            t=$(readlink "$l")
            if [ -e "$p$t" ] || [ -L "$p$t" ]; then ln -sfn "$p$t" "$l"; fi
        done < <(find "$p" -type l -lname '/*')

        # 3. Libraries the machine already has (same soname): use the machine's copy.
        if [ "$prefer" = system ] && command -v readelf >/dev/null; then
            local f so sys replaced=0
            declare -A have=()
            while read -r so sys; do have[$so]=$sys; done < <(
                { /sbin/ldconfig -p 2>/dev/null || ldconfig -p; } |
                    awk '/\(libc6,x86-64/ {print $1, $NF}')
            while IFS= read -r f; do
                so=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
                [ -n "$so" ] && [ -n "${have[$so]:-}" ] || continue
                ln -sfn "${have[$so]}" "$f" && replaced=$((replaced + 1))
            done < <(find "$p/usr/lib/$ml" "$p/lib/$ml" -type f -name 'lib*.so*' 2>/dev/null)
            echo "env.sh: $replaced carried libraries replaced by the machine's own (same soname)"
        elif [ "$prefer" = system ]; then
            echo "env.sh: no readelf: keeping every carried library" >&2
        fi

        # 4. .pc files: /usr -> the prefix; drop Requires.private modules that are nowhere
        #    (libmicrohttpd's gnutls: no public header of ours includes theirs).
        local avail=$pcdirs
        [ "$isolated" = 1 ] || avail="$pcdirs:$sysdirs"
        "$py" - "$p" "$avail" <<'PY' || { echo "env.sh: .pc fix-up failed" >&2; return 1; }
import glob, os, re, sys
p, avail = sys.argv[1], sys.argv[2].split(":")
have = {os.path.basename(f)[:-3] for d in avail for f in glob.glob(os.path.join(d, "*.pc"))}
for f in sorted(set(glob.glob(p + "/**/*.pc", recursive=True))):
    if os.path.islink(f):
        continue
    out = []
    for line in open(f, encoding="utf-8", errors="surrogateescape").read().splitlines():
        line = re.sub(r"(^|(?<=[=\s'\"])|(?<=-I)|(?<=-L))/usr(?=/|\s|$)", p + "/usr", line)
        if line.startswith("Requires.private:"):
            mods = [m.strip() for m in line.split(":", 1)[1].split(",")]
            keep = [m for m in mods if m and re.split(r"[\s<>=]", m)[0] in have]
            line = "Requires.private: " + ", ".join(keep)
        out.append(line)
    with open(f, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write("\n".join(out) + "\n")
PY
        echo "$want" >"$stamp"
        echo "env.sh: unpacked $n packages into $p"
    fi

    # 5. The environment.
    local pgbin
    pgbin=$(ls -d "$p"/usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    local cuda=${GJ_CUDA_HOME:-/usr/local/cuda}
    export GJ_DEPS_PREFIX=$p
    PATH="$p/usr/bin:$PATH"
    [ -n "$pgbin" ] && PATH="$pgbin:$PATH"
    [ -x "$cuda/bin/nvcc" ] && ! command -v nvcc >/dev/null && PATH="$PATH:$cuda/bin"
    # meson and ninja: the venv's pip packages, where none is on PATH.
    if ! command -v meson >/dev/null || ! command -v ninja >/dev/null; then
        PATH="$PATH:$(dirname "$py")"
    fi
    export PATH
    export PKG_CONFIG="$p/usr/bin/pkgconf"
    export PKG_CONFIG_PATH="$pcdirs"
    if [ "$isolated" = 1 ]; then
        export PKG_CONFIG_LIBDIR="$pcdirs"
    else
        export PKG_CONFIG_LIBDIR="$pcdirs:$sysdirs"
    fi
    export CPATH="$p/usr/include:$p/usr/include/$ml:$p/usr/include/$ml/openblas-pthread${CPATH:+:$CPATH}"
    export LIBRARY_PATH="$libdirs${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

    # 6. PostgreSQL: gpujobd takes GPUJOBD_PG_BINDIR (--pg-bindir), else PATH; the harness PATH.
    #    As root both run initdb/postgres as GPUJOBD_PG_USER (default postgres).
    [ -n "$pgbin" ] && export GPUJOBD_PG_BINDIR="$pgbin"
    export GPUJOBD_PG_USER=${GPUJOBD_PG_USER:-postgres}
    if [ "$(id -u)" = 0 ] && ! id -u "$GPUJOBD_PG_USER" >/dev/null 2>&1; then
        if command -v useradd >/dev/null; then
            useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
                --user-group "$GPUJOBD_PG_USER" || echo "env.sh: useradd $GPUJOBD_PG_USER failed" >&2
        else
            local uid=${GJ_PG_UID:-7432}
            echo "$GPUJOBD_PG_USER:x:$uid:$uid:PostgreSQL:/nonexistent:/usr/sbin/nologin" >>/etc/passwd
            echo "$GPUJOBD_PG_USER:x:$uid:" >>/etc/group
        fi
        echo "env.sh: created user $GPUJOBD_PG_USER for PostgreSQL"
    fi
    # DCMTK (img2dcm, dcmodify for the gpu_serving test) reads its dictionary from the prefix.
    local dic="$p/usr/share/libdcmtk17"
    [ -f "$dic/dicom.dic" ] && export DCMDICTPATH="$dic/dicom.dic:$dic/private.dic"
    # initdb fails on a locale the machine lacks.
    if [ -z "${LC_ALL:-}" ] && command -v locale >/dev/null && locale 2>&1 | grep -q 'Cannot set'; then
        export LC_ALL=C.UTF-8
    fi

    # 7. cuDNN: GJ_CUDNN_DIR given, the toolkit, the system, or Python's nvidia-cudnn-cu13
    #    (which has no unversioned libcudnn.so: a dir of links under the prefix gets them).
    local inc="" lib="" d h
    if [ -n "${GJ_CUDNN_DIR:-}" ] && [ -f "$GJ_CUDNN_DIR/include/cudnn.h" ]; then
        inc=$GJ_CUDNN_DIR/include
        lib=$(ls -d "$GJ_CUDNN_DIR"/lib64 "$GJ_CUDNN_DIR"/lib 2>/dev/null | head -1)
    else
        for h in "$cuda/include/cudnn.h" /usr/include/cudnn.h /usr/include/$ml/cudnn.h \
                 $(ls -d /usr/include/$ml/cudnn_v*.h 2>/dev/null) \
                 $("$py" -c 'import site,glob; [print(f) for s in site.getsitepackages() for f in glob.glob(s+"/nvidia/cudnn*/include/cudnn.h")+glob.glob(s+"/nvidia/cu*/include/cudnn.h")]' 2>/dev/null) \
                 $(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/include/cudnn.h 2>/dev/null); do
            [ -f "$h" ] || continue
            inc=$(dirname "$h")
            for d in "$(dirname "$inc")/lib" "$(dirname "$inc")/lib64" "$cuda/lib64" /usr/lib/$ml; do
                if ls "$d"/libcudnn.so* >/dev/null 2>&1; then lib=$d; break; fi
            done
            [ -n "$lib" ] && break
        done
    fi
    if [ -n "$inc" ] && [ -n "$lib" ]; then
        local shim="$p/cudnn" f b
        rm -rf "$shim"
        mkdir -p "$shim/lib"
        ln -sfn "$inc" "$shim/include"
        for f in "$lib"/libcudnn*.so*; do
            b=$(basename "$f")
            ln -sfn "$f" "$shim/lib/$b"
            # libcudnn.so.9 -> also libcudnn.so, for -lcudnn
            [ -e "$lib/${b%%.so*}.so" ] || ln -sfn "$f" "$shim/lib/${b%%.so*}.so"
        done
        ln -sfn lib "$shim/lib64"
        export GJ_CUDNN_DIR="$shim"
        local ver_h="$inc/cudnn_version.h"
        [ -f "$ver_h" ] || ver_h="$inc/cudnn.h"
        GJ_CUDNN_VERSION=$(awk '/#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{v[$2]=$3} END{if (v["CUDNN_MAJOR"]!="") print v["CUDNN_MAJOR"]"."v["CUDNN_MINOR"]"."v["CUDNN_PATCHLEVEL"]}' "$ver_h")
        export GJ_CUDNN_VERSION GJ_CUDNN_REAL_DIR="$lib"
        case ":$LD_LIBRARY_PATH:" in *":$lib:"*) ;; *) export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$lib" ;; esac
    else
        unset GJ_CUDNN_VERSION GJ_CUDNN_REAL_DIR
        [ -n "${GJ_CUDNN_DIR:-}" ] && echo "env.sh: GJ_CUDNN_DIR=$GJ_CUDNN_DIR has no include/cudnn.h" >&2
        unset GJ_CUDNN_DIR
    fi

    # 8. /usr/bin/python3: the tests and benchmarks call it by that path and want numpy,
    #    scikit-image and torch (Debian's on the dev machine; the venv's here).
    if [ ! -e /usr/bin/python3 ] && [ "$(id -u)" = 0 ]; then
        printf '#!/bin/sh\nexec %s "$@"\n' "$py" >/usr/bin/python3
        chmod 755 /usr/bin/python3
        echo "env.sh: /usr/bin/python3 was missing: made it run $py"
    elif [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import numpy, skimage' 2>/dev/null; then
        local sv pv sp
        sv=$(/usr/bin/python3 -c 'import sys; print(sys.version_info[:2])' 2>/dev/null)
        pv=$("$py" -c 'import sys; print(sys.version_info[:2])' 2>/dev/null)
        if [ -n "$sv" ] && [ "$sv" = "$pv" ]; then
            sp=$("$py" -c 'import site; print(":".join(site.getsitepackages()))')
            export PYTHONPATH="$sp${PYTHONPATH:+:$PYTHONPATH}"
            echo "env.sh: /usr/bin/python3 lacks numpy/skimage: PYTHONPATH=$sp (same Python $sv)"
        else
            echo "env.sh: /usr/bin/python3 ($sv) lacks numpy/skimage and differs from $py ($pv):" \
                 "tests and benchmarks that use it will fail or skip" >&2
        fi
    fi

    if [ "${GJ_DEPS_QUIET:-0}" != 1 ]; then
        echo "env.sh: prefix $p ($prefer libraries preferred$([ "$isolated" = 1 ] && echo ', isolated pkg-config'))"
        echo "env.sh: pkg-config $("$PKG_CONFIG" --version 2>/dev/null || echo MISSING); protoc-c $(command -v protoc-c || echo MISSING)"
        echo "env.sh: PostgreSQL ${pgbin:-MISSING} (user $GPUJOBD_PG_USER)"
        echo "env.sh: cuDNN ${GJ_CUDNN_VERSION:-not found}${GJ_CUDNN_DIR:+ at $GJ_CUDNN_DIR -> ${GJ_CUDNN_REAL_DIR:-}}"
        echo "env.sh: python $py; glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
    fi
    return 0
}
_gj_env_main "$@" || echo "env.sh: FAILED (see above)" >&2
unset -f _gj_env_main
