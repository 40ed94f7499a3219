// metrics_history.js — the Operations page's memory of /metrics: each poll's samples kept for
// the last hour in this browser tab (so a page opened again within it has history), and what
// the charts plot derived from them: rates of counters between polls, and percentiles of
// histograms over a trailing window, computed as Prometheus' histogram_quantile does.

const KEEP_MS = 3600 * 1000;
const WINDOW_MS = 5 * 60 * 1000;   // percentiles over the last 5 minutes of each point

// Prometheus text: [{name, labels, value}] (label values may hold braces: /v1/jobs/{id}).
export function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const kv of (m[3] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[kv[1]] = kv[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

const samples = [];   // [{t (ms), ms: parsed metrics}], oldest first; module state: one per tab

export function record(ms, t = Date.now()) {
  samples.push({ t, ms });
  while (samples.length && samples[0].t < t - KEEP_MS) samples.shift();
}

export function history() {
  return samples;
}

// Sum of a metric's values whose labels match `where`, grouped by the label `by` ('' : one group).
export function sumBy(ms, name, by = '', where = {}) {
  const out = new Map();
  for (const m of ms) {
    if (m.name !== name || !Object.entries(where).every(([k, v]) => m.labels[k] === v)) continue;
    const key = by ? m.labels[by] ?? '' : '';
    out.set(key, (out.get(key) || 0) + m.value);
  }
  return out;
}

// The earliest sample at most WINDOW_MS before sample i (i itself when it is the first).
function windowStart(i) {
  let j = i;
  while (j > 0 && samples[j - 1].t >= samples[i].t - WINDOW_MS) j -= 1;
  return j;
}

// Per sample, per group: the counter's increase per second since the previous sample (null for
// the first, and where it went down: the process restarted).
export function rates(name, by = '', where = {}) {
  const out = [];
  for (let i = 0; i < samples.length; i++) {
    const now = sumBy(samples[i].ms, name, by, where);
    const row = new Map();
    if (i > 0) {
      const before = sumBy(samples[i - 1].ms, name, by, where);
      const dt = (samples[i].t - samples[i - 1].t) / 1000;
      for (const [k, v] of now) {
        const d = v - (before.get(k) ?? 0);
        row.set(k, dt > 0 && d >= 0 ? d / dt : null);
      }
    }
    out.push(row);
  }
  return out;
}

// q-quantile of a cumulative histogram [{le, count}] sorted by le (linear within a bucket).
export function quantile(q, buckets) {
  if (!buckets.length) return null;
  const total = buckets[buckets.length - 1].count;
  if (!(total > 0)) return null;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return prevLe;   // as Prometheus: the highest finite bound
      const inBucket = b.count - prevCount;
      return inBucket > 0 ? prevLe + (b.le - prevLe) * ((rank - prevCount) / inBucket) : b.le;
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}

function bucketsBy(ms, name, by) {
  const out = new Map();
  for (const m of ms) {
    if (m.name !== `${name}_bucket`) continue;
    const key = by ? m.labels[by] ?? '' : '';
    const le = m.labels.le === '+Inf' ? Infinity : Number(m.labels.le);
    const per = out.get(key) || new Map();
    per.set(le, (per.get(le) || 0) + m.value);
    out.set(key, per);
  }
  return out;
}

// Per sample, per group: the q-quantile of what the histogram observed in the trailing window.
export function quantiles(name, q, by = '') {
  const out = [];
  for (let i = 0; i < samples.length; i++) {
    const now = bucketsBy(samples[i].ms, name, by);
    const then = bucketsBy(samples[windowStart(i)].ms, name, by);
    const row = new Map();
    for (const [k, per] of now) {
      const old = then.get(k) || new Map();
      const cum = [...per.entries()].sort((a, b) => a[0] - b[0])
        .map(([le, c]) => ({ le, count: i === 0 ? c : c - (old.get(le) || 0) }));
      row.set(k, quantile(q, cum));
    }
    out.push(row);
  }
  return out;
}

// Per sample, per group: a gauge's value.
export function gauges(name, by = '', where = {}) {
  return samples.map((s) => sumBy(s.ms, name, by, where));
}
