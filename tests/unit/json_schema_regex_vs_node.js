// "pattern" against node's own RegExp (ECMA-262, the u flag, as JSON Schema reads
// patterns) on seeded random pattern/text pairs. Fails when a pattern our validator
// compiles answers differently from node, when it compiles one node rejects, or
// when it refuses one node accepts for a reason json_schema_regex.h does not list.
// Usage: node json_schema_regex_vs_node.js path/to/json_schema_regex_answers [N]
'use strict';
const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const helper = process.argv[2];
const patterns = Number(process.argv[3] || 8000);

let seed = 20251123;   // mulberry32: the same cases on every run
function random() {
  seed = (seed + 0x6D2B79F5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (list) => list[Math.floor(random() * list.length)];

const atoms = ['a', 'b', 'x', 'é', '😀', ' ', '\\u00a0', '\n', '.', '\\d', '\\D', '\\w', '\\W',
  '\\s', '\\S', '\\b', '[ab]', '[^a]', '[a-c]', '[\\s\\S]', '[\\dé]', '[^\\d\\s]', '[\\]]', '[-a]',
  '[a^]', '[á-é]', '\\.', '\\u{1F600}'];
// Rarer: what Unicode mode rejects, and what json_schema_regex.h refuses.
const oddities = ['\\-', '{', ']', '**', '(?=a)', '\\1', '\\p{L}'];
const quantifiers = ['', '', '', '*', '+', '?', '{2}', '{1,}', '{0,2}', '*?', '+?'];
const texts = ['a', 'b', 'x', 'é', 'â', '😀', ' ', '\u00a0', '\n', '1', '_', '-', '^', ']', '.', '\u2028'];

function pattern(depth) {
  let p = '';
  for (let n = 1 + Math.floor(random() * 4); n > 0; n--) {
    const r = random();
    let atom;
    if (r < 0.12 && depth < 2) atom = '(' + pattern(depth + 1) + ')';
    else if (r < 0.2 && depth < 2) atom = '(?:' + pattern(depth + 1) + '|' + pattern(depth + 1) + ')';
    else atom = random() < 0.02 ? pick(oddities) : pick(atoms);
    p += atom + pick(quantifiers);
  }
  if (random() < 0.3) p = '^' + p;
  if (random() < 0.3) p += '$';
  return p;
}

const cases = [];
for (let i = 0; i < patterns; i++) {
  const p = pattern(0);
  for (let j = 0; j < 3; j++) {
    let s = '';
    for (let n = Math.floor(random() * 7); n > 0; n--) s += pick(texts);
    cases.push([p, s]);
  }
}

function nodeSays(p, s) {
  try {
    return new RegExp(p, 'u').test(s) ? 'match' : 'no';
  } catch (e) {
    return 'error';
  }
}

const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gj-regex-')), 'cases.json');
fs.writeFileSync(file, JSON.stringify(cases));
const ours = JSON.parse(execFileSync(helper, [file], { maxBuffer: 1 << 28 }).toString());
fs.rmSync(path.dirname(file), { recursive: true });

// Refusals json_schema_regex.h lists for patterns ECMA-262 accepts.
const listed = /not supported|a repeated group holding \^ or \$|beyond ASCII spans more than/;
const tally = { agree: 0, bothRefuse: 0, refusedListed: 0, wrong: 0 };
const wrong = [];
cases.forEach(([p, s], i) => {
  const n = nodeSays(p, s), o = ours[i];
  let ok;
  if (o.startsWith('refused')) {
    ok = n === 'error' || listed.test(o);
    if (ok) tally[n === 'error' ? 'bothRefuse' : 'refusedListed']++;
  } else {
    ok = n === o;
    if (ok) tally.agree++;
  }
  if (!ok) {
    tally.wrong++;
    if (wrong.length < 20) wrong.push(`  /${p}/u on ${JSON.stringify(s)}: node ${n}, ours ${o}`);
  }
});
console.log(`node ${process.version}: ${cases.length} pattern/text pairs, ${tally.agree} same answer, ` +
  `${tally.bothRefuse} rejected by both, ${tally.refusedListed} refused by us for a listed reason, ` +
  `${tally.wrong} wrong`);
if (wrong.length) console.log(wrong.join('\n'));
process.exit(tally.wrong ? 1 : 0);
