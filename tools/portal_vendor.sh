#!/bin/sh
# portal_vendor.sh [OUT_DIR] — re-makes portal/vendor (or OUT_DIR) from the npm packages pinned in
# portal/package-lock.json: the browser builds of uPlot (the convergence plot) and js-yaml (the
# API reference page reads openapi.yaml), their licences, and VERSIONS.txt. The C build embeds
# the files of portal/vendor and needs no node; run this after changing a version in
# portal/package.json (then `npm install --package-lock-only` there) and commit the result.
# tests/browser/test_vendor_current.mjs runs it into a temporary directory and compares (portal-vendor-current).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/portal/vendor}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$root/portal/package.json" "$root/portal/package-lock.json" "$tmp/"
(cd "$tmp" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
mkdir -p "$out"
nm=$tmp/node_modules
# the source map comments go: the maps are not shipped, and a browser's tools would ask for them
strip_map() { sed '/^\/\/# sourceMappingURL=/d' "$1" > "$2"; }
strip_map "$nm/uplot/dist/uPlot.esm.js" "$out/uPlot.esm.js"
cp "$nm/uplot/dist/uPlot.min.css" "$out/uPlot.min.css"
cp "$nm/uplot/LICENSE" "$out/LICENSE-uplot.txt"
strip_map "$nm/js-yaml/dist/browser/js-yaml.esm.min.mjs" "$out/js-yaml.mjs"
cp "$nm/js-yaml/LICENSE" "$out/LICENSE-js-yaml.txt"
{
    echo "# Made by tools/portal_vendor.sh from portal/package-lock.json; do not edit."
    for p in uplot js-yaml; do
        node -e 'const p=require(process.argv[1]);console.log(p.name+" "+p.version+" "+p.license+" "+(p.repository.url||p.repository))' \
            "$nm/$p/package.json"
    done
} > "$out/VERSIONS.txt"
