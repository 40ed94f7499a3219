#!/usr/bin/env bash
# Run HERE (Debian 12, as root, with network to the Debian mirrors), never on the device.
#
# Downloads into .debs/ (git-ignored) the Debian 12 packages that the C build, the GPU tests,
# the integration tests and the benchmarks need and that the device image (Ubuntu, CUDA 13,
# PyTorch venv, no Debian packages, no network) lacks: the libraries with their headers and
# .pc files, pkg-config, protoc-c, cmocka, and the PostgreSQL 15 server and client.
# A GPU session names ".debs" in the device tool's `carry`; tools/device/env.sh unpacks it there
# into a prefix (never into /).
#
#   tools/device/fetch-debs.sh            # resolve, download, slim, print the total size
#   tools/device/fetch-debs.sh --list     # only print the resolved package list
#
# The dependency closure is walked from ROOTS below, leaving out ASSUMED (what any image with
# gcc/nvcc and Python has: libc, the compiler's runtimes) and UNNEEDED (maintainer-script
# machinery, locales, LLVM for PostgreSQL's JIT, FFTW precisions we do not use). Base libraries
# that the device probably has as well (zlib, OpenSSL, zstd, ...) are carried anyway: env.sh
# uses the device's own copy of any library whose soname the device already has, so carrying
# them costs only space.
#
# Each .deb is then slimmed (documentation, man pages, locales, static libraries, PostgreSQL's
# JIT bitcode removed) and rebuilt with xz: the device tool carries at most 64 MiB together
# with the working tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.debs
list_only=0
[ "${1:-}" = --list ] && list_only=1

# What the build, the tests and the benchmarks use (see tools/debian-packages.txt); dcmtk:
# img2dcm and dcmodify, without which meson leaves out the gpu_serving test (suite gpu).
ROOTS="
pkgconf
libmicrohttpd-dev libjansson-dev libpq-dev libssl-dev libcmocka-dev
libfftw3-dev libopenblas-dev libdnnl-dev libpng-dev zlib1g-dev libexpat1-dev
libturbojpeg0-dev libjpeg62-turbo-dev libopenjp2-7-dev libcharls-dev
libprotobuf-c-dev protobuf-c-compiler libcurl4-openssl-dev libarchive-dev libgrpc-dev
postgresql-15 postgresql-client-15
dcmtk
"
# On the device already: C library and compiler runtimes (nvcc needs gcc/g++ there).
ASSUMED="
libc6 libc-bin libc6-dev libc-dev linux-libc-dev libcrypt-dev libgcc-s1 libstdc++6 gcc-12-base
libgomp1 libquadmath0
"
# Not needed to build or run: package-manager and maintainer-script machinery, data we do
# without, LLVM (PostgreSQL's JIT; env.sh removes llvmjit.so so the JIT stays off), FFTW's
# double/long/quad precisions (recon uses fftw3f only), gnutls' -dev chain (env.sh drops
# Requires.private modules that are not there; microhttpd.h includes no gnutls header).
UNNEEDED="
debconf debconf-2.0 dpkg install-info perl perl-base perl:any adduser lsb-base
init-system-helpers ucf netbase sensible-utils locales locales-all libc-l10n tzdata
postgresql-common postgresql-client-common ssl-cert openssl readline-common
libllvm14 libfftw3-bin libfftw3-double3 libfftw3-long3 libfftw3-quad3
libgnutls28-dev libsasl2-modules-db libldap-common krb5-locales
"

pkgs=$(/usr/bin/python3 - "$ROOTS" "$ASSUMED" "$UNNEEDED" <<'PY'
import re, subprocess, sys
roots, assumed, unneeded = (set(a.split()) for a in sys.argv[1:4])
skip = assumed | unneeded

def show(name):
    r = subprocess.run(["apt-cache", "show", "--no-all-versions", name],
                       capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        return None
    fields, key = {}, None
    for line in r.stdout.split("\n\n")[0].splitlines():
        if line[:1] in (" ", "\t") and key:
            fields[key] += " " + line.strip()
        elif ":" in line:
            key, v = line.split(":", 1)
            fields[key] = v.strip()
    return fields

def provider(virtual):
    """A real package providing a virtual one (first of `apt-cache showpkg`'s list)."""
    r = subprocess.run(["apt-cache", "showpkg", virtual], capture_output=True, text=True)
    lines = r.stdout.splitlines()
    if "Reverse Provides: " in lines:
        for l in lines[lines.index("Reverse Provides: ") + 1:]:
            if l.strip():
                return l.split()[0]
    return None

chosen, queue = {}, sorted(roots)
while queue:
    name = queue.pop()
    if name in chosen or name in skip:
        continue
    f = show(name)
    if f is None:
        p = provider(name)
        if p is None:
            sys.exit(f"fetch-debs: cannot resolve {name}")
        queue.append(p)
        continue
    chosen[name] = f
    for clause in (f.get("Pre-Depends", "") + "," + f.get("Depends", "")).split(","):
        alts = [re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", a).strip().split(":")[0]
                for a in clause.split("|")]
        alts = [a for a in alts if a]
        if not alts or any(a in skip or a in chosen for a in alts):
            continue
        queue.append(alts[0])
print("\n".join(sorted(chosen)))
PY
)
if [ "$list_only" = 1 ]; then
    echo "$pkgs"
    exit 0
fi

rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
apt-get update -qq
(cd "$tmp" && apt-get -o APT::Sandbox::User=root download -qq $pkgs)

# Slim each package: rebuild it without what neither the build nor the tests read.
for deb in "$tmp"/*.deb; do
    name=$(basename "$deb")
    d="$tmp/x"
    rm -rf "$d"
    dpkg-deb -R "$deb" "$d"
    rm -rf "$d"/usr/share/doc "$d"/usr/share/man "$d"/usr/share/info "$d"/usr/share/locale \
           "$d"/usr/share/lintian "$d"/usr/share/bug "$d"/usr/share/doc-base \
           "$d"/usr/lib/postgresql/*/lib/bitcode "$d"/usr/lib/postgresql/*/lib/llvmjit*.so \
           "$d"/usr/lib/postgresql/*/lib/llvmjit_types.bc \
           "$d"/usr/share/postgresql/*/man
    find "$d" -name '*.a' -path '*/lib/*' -delete
    # Keep the control files (name, version) but no maintainer scripts: dpkg -x never runs them.
    rm -f "$d"/DEBIAN/{preinst,postinst,prerm,postrm,triggers,conffiles,md5sums,shlibs,symbols,templates,config}
    dpkg-deb --root-owner-group -Zxz -z9 -b "$d" "$out/$name" >/dev/null
done
rm -rf "$tmp"/x

n=$(ls "$out"/*.deb | wc -l)
total=$(du -cb "$out"/*.deb | tail -1 | cut -f1)
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
printf 'fetch-debs: %d packages in %s/: %.1f MiB (the tracked tree: %.1f MiB; the device tool carries at most 64 MiB in all)\n' \
    "$n" "$out" "$(echo "$total / 1048576" | bc -l)" "$(echo "$tree / 1048576" | bc -l)"
