#!/bin/sh
# require_tools.sh TOOL... -- COMMAND [ARG...]
#
# Runs COMMAND when every TOOL is on PATH (or is an executable path); otherwise prints
# which are missing and exits 77, which meson reports as SKIP. Tests that need programs
# from outside the build (DCMTK, GDCM) are therefore always defined: where the programs
# are missing they show as skipped, with the reason, instead of vanishing at configure
# time. CI installs them (tools/debian-packages.txt), so there they run.
missing=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    command -v "$1" >/dev/null 2>&1 || missing="$missing $1"
    shift
done
if [ "$1" != "--" ] || [ $# -lt 2 ]; then
    echo "usage: require_tools.sh TOOL... -- COMMAND [ARG...]" >&2
    exit 2
fi
shift
if [ -n "$missing" ]; then
    echo "SKIP: not installed:$missing (Debian packages: tools/debian-packages.txt)"
    exit 77
fi
exec "$@"
