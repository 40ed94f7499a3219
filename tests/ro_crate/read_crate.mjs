// read_crate.mjs CRATE.json -- the npm ro-crate library (unchanged) reads a crate gpujobd
// answered (test_provenance.py writes it) and checks what RO-Crate 1.1 and the Process Run
// Crate profile 0.5 require: the library's Checker on the Root Data Entity, then through its
// linked entities each action the root mentions, its instrument, objects, results, agent, times
// and status. Prints one JSON line of what it saw; the Python side asserts on it.
// ro-crate 3.3.11 is pinned: the last release that bundles the RO-Crate 1.1 context (later ones
// bundle 1.2 and fetch 1.1's from the network, which CI has not). The Checker's context check,
// which fetches, is left out for the same reason; the other checks run as check() runs them.
import { readFileSync } from 'node:fs';
import rocrate from 'ro-crate';

const { ROCrate, Checker } = rocrate;
const json = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const crate = new ROCrate(json, { array: true, link: true });
const checker = new Checker(crate);
const checks = ['hasRootDataset', 'hasRootDatasetWithProperID', 'hasName', 'hasDescription', 'hasLicense',
  'hasDatePublished'].map((n) => checker[n]());
const out = {
  errors: checks.filter((c) => !c.status).map((c) => `${c.name}: ${c.message} ${c.diagnostics || ''}`),
  passed: checks.filter((c) => c.status).map((c) => c.name.trim()),
};

const root = crate.rootDataset;
const ids = (v) => (v || []).map((e) => e['@id']);
const types = (e) => [].concat(e?.['@type'] || []);
out.conformsTo = ids(root.conformsTo);
const profile = crate.getEntity('https://w3id.org/ro/wfrun/process/0.5');
out.profile = profile ? { types: types(profile), name: profile.name[0], version: profile.version[0] } : null;
out.actions = root.mentions.map((a) => ({
  id: a['@id'],
  types: types(a),
  instrument: a.instrument.map((i) => ({ types: types(i), name: i.name[0], version: i.version[0],
                                         partOf: (i.isPartOf || []).map((p) => [p.name[0], p.version[0]]) })),
  objects: a.object.map((o) => ({ id: o['@id'], types: types(o), sha256: (o.sha256 || [])[0], name: o.name[0] })),
  results: a.result.map((r) => ({ id: r['@id'], types: types(r), sha256: (r.sha256 || [])[0],
                                  contentSize: (r.contentSize || [])[0] })),
  agent: (a.agent || []).map((g) => ({ types: types(g), name: g.name[0] })),
  startTime: (a.startTime || [])[0] || null,
  endTime: (a.endTime || [])[0] || null,
  actionStatus: ids(a.actionStatus),
  environment: (a.environment || []).length,
}));
console.log(JSON.stringify(out));
