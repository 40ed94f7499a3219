// test_vendor_current.mjs — portal/vendor is what tools/portal_vendor.sh makes from the npm
// packages pinned in portal/package-lock.json: re-made into a temporary directory and compared
// file by file, so that a hand edit of a vendored file, or a version bump without re-vendoring,
// fails here. (Run through run_node.sh, which makes sure npm is installed.)
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = process.env.GJ_SOURCE_ROOT;
const vendor = join(root, 'portal', 'vendor');
const tmp = mkdtempSync(join(tmpdir(), 'gj-vendor-'));
try {
  execFileSync('sh', [join(root, 'tools', 'portal_vendor.sh'), tmp], { stdio: 'inherit' });
  const want = readdirSync(tmp).sort();
  const have = readdirSync(vendor).sort();
  const bad = [];
  if (want.join() !== have.join()) bad.push(`files: portal/vendor has [${have}], the script makes [${want}]`);
  for (const f of want.filter((x) => have.includes(x))) {
    if (!readFileSync(join(tmp, f)).equals(readFileSync(join(vendor, f)))) bad.push(`${f} differs`);
  }
  if (bad.length) {
    console.error(`portal/vendor is not what tools/portal_vendor.sh makes (run it and commit):\n  ${bad.join('\n  ')}`);
    process.exit(1);
  }
  console.log(`ok: portal/vendor is current (${want.length} files)`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
