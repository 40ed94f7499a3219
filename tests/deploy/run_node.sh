#!/bin/sh
# run_node.sh SCRIPT.mjs -- runs a node test of this suite after installing the npm packages of
# package-lock.json into tests/deploy/node_modules (npm ci; again only when the lockfile
# changed; under a lock, as meson runs the tests in parallel). GJ_NODE_PACKAGES names another
# folder with its own package-lock.json (tests/dicomweb_client). Where npm is missing but Debian's
# apt is at hand (as root), Debian's npm is installed first.
set -eu
here=${GJ_NODE_PACKAGES:-$(cd "$(dirname "$0")" && pwd)}
command -v node >/dev/null 2>&1 || { echo "run_node.sh: node is not installed (tools/debian-packages.txt: nodejs)" >&2; exit 1; }
if ! command -v npm >/dev/null 2>&1; then
    { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; } ||
        { echo "run_node.sh: npm is not installed" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
(
    flock 9
    if ! cmp -s "$here/package-lock.json" "$here/node_modules/.installed-lock.json"; then
        (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
        cp "$here/package-lock.json" "$here/node_modules/.installed-lock.json"
    fi
) 9>"$here/.npm-install.lock"
exec node "$@"
