#!/bin/sh
# fetch_deb.sh PACKAGE DIR -- downloads Debian's PACKAGE with apt-get and unpacks it into DIR
# (dpkg -x: nothing is installed, no other package's file is touched). Used for Debian's
# kubectl (kubernetes-client), whose /usr/bin/kubectl some images already have from another
# package. Updates apt's lists first when there are none (as root).
set -eu
package=${1:?usage: fetch_deb.sh PACKAGE DIR}
dir=${2:?usage: fetch_deb.sh PACKAGE DIR}
mkdir -p "$dir"
cd "$dir"
[ ! -e ".fetched-$package" ] || exit 0   # another test fetched it while this one waited
if ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || { echo "fetch_deb.sh: apt has no package lists; run apt-get update as root" >&2; exit 1; }
    apt-get update -qq
fi
rm -f ./*.deb
apt-get download -qq "$package" 2>&1 | grep -v 'unsandboxed as root' >&2 || true
deb=$(find . -maxdepth 1 -name "${package}_*.deb" | head -n 1)
[ -n "$deb" ] || { echo "fetch_deb.sh: apt-get download $package fetched nothing" >&2; exit 1; }
dpkg -x "$deb" .
rm -f "$deb"
touch ".fetched-$package"
