// view_brkga.js — results of brkga: the convergence plot (statistics.csv: best and mean fitness
// per generation, uPlot) and, for the network decoder, the best solution drawn from
// result.json: the optical links it uses (with their load) and the path of each demand over
// the virtual links, one demand at a time.
import uPlot from './uPlot.esm.js';
import { api } from './api.js';
import { h, newId, number, replace, svg, table } from './dom.js';

function parseStats(text) {
  const lines = text.trim().split(/\r?\n/);
  const head = lines.shift().split(';');
  const col = (name) => head.indexOf(name);
  const g = col('NumGenerations');
  const best = col('IncumbentValue');
  const mean = col('MeanValue');
  const data = [[], [], []];
  for (const line of lines) {
    const f = line.split(';');
    data[0].push(Number(f[g]));
    data[1].push(Number(f[best]));
    data[2].push(f[mean] === '' ? null : Number(f[mean]));
  }
  return data;
}

function plot(data) {
  const holder = h('div', { class: 'plot', role: 'img', 'aria-label': `Convergence: best fitness ${number(data[1][data[1].length - 1])} after ${data[0][data[0].length - 1]} generations` });
  const figure = h('figure', { class: 'figure' }, holder,
    h('figcaption', {}, 'Best (incumbent) and mean fitness of the population per generation (statistics.csv).'));
  // sized in the page's rem, which grows with the viewport: the axes stay readable on a 4K screen
  const rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
  const font = `${Math.round(0.8 * rem)}px system-ui, sans-serif`;
  const axis = (label) => ({ label, font, labelFont: font, size: 3.5 * rem, labelSize: 1.5 * rem });
  const height = Math.round(20 * rem);
  const width = () => Math.max(260, Math.min(holder.clientWidth || 45 * rem, 90 * rem));
  const chart = new uPlot({
    width: Math.round(45 * rem),
    height,
    scales: { x: { time: false } },
    axes: [axis('generation'), axis('fitness')],
    series: [{ label: 'generation' },
      { label: 'best', stroke: '#b3261e', width: 2 },
      { label: 'mean', stroke: '#1f5fa8', width: 1.5 }],
  }, data, holder);
  const resize = () => chart.setSize({ width: width(), height });
  const observer = new ResizeObserver(resize);
  observer.observe(holder);
  return figure;
}

// Layout: core (optical) nodes on a circle, the others just outside, beside the core node they
// hang from.
function layout(result) {
  // virtual links join MPLS nodes (access, transit); the nodes their optical paths pass are core
  const mpls = new Set();
  for (const vl of result.virtual_links || []) { mpls.add(vl.a); mpls.add(vl.b); }
  const core = new Set();
  const attach = new Map();
  for (const vl of result.virtual_links || []) {
    for (const hop of vl.optical_hops || []) for (const n of hop) if (!mpls.has(n)) core.add(n);
  }
  for (const ol of result.optical_links_used || []) { core.add(ol.a); core.add(ol.b); }
  for (const vl of result.virtual_links || []) {
    const hops = vl.optical_hops || [];
    if (hops.length) {
      if (!attach.has(vl.a)) attach.set(vl.a, hops[0][1]);
      if (!attach.has(vl.b)) attach.set(vl.b, hops[hops.length - 1][0]);
    }
  }
  const cores = [...core].sort();
  const pos = new Map();
  const R = 150;
  cores.forEach((n, i) => {
    const t = (2 * Math.PI * i) / cores.length - Math.PI / 2;
    pos.set(n, { x: Math.cos(t) * R, y: Math.sin(t) * R, core: true });
  });
  const perCore = new Map();
  for (const [n, c] of [...attach.entries()].sort()) {
    const k = perCore.get(c) || 0;
    perCore.set(c, k + 1);
    const p = pos.get(c) || { x: 0, y: 0 };
    const t = Math.atan2(p.y, p.x) + (k - 0.5) * 0.35;
    pos.set(n, { x: Math.cos(t) * (R + 70), y: Math.sin(t) * (R + 70), core: false });
  }
  return pos;
}

function network(result) {
  const pos = layout(result);
  const W = 460;
  const line = (a, b, cls, title) => {
    const p = pos.get(a);
    const q = pos.get(b);
    if (!p || !q) return null;
    return svg('line', { x1: p.x, y1: p.y, x2: q.x, y2: q.y, class: cls }, title ? svg('title', {}, title) : null);
  };
  const hopsOf = (vlId) => (result.virtual_links[vlId] || {}).optical_hops || [];
  const highlight = svg('g', { class: 'route' });
  const used = (result.optical_links_used || []).map((l) => line(l.a, l.b, 'olink', `${l.a}–${l.b}: load ${l.load}`));
  const access = (result.virtual_links || []).flatMap((vl) => (vl.optical_hops || [])
    .filter(([a, b]) => !(pos.get(a)?.core && pos.get(b)?.core)).map(([a, b]) => line(a, b, 'alink')));
  const nodes = [...pos.entries()].map(([n, p]) => svg('g', { class: p.core ? 'node core' : 'node access' },
    svg('circle', { cx: p.x, cy: p.y, r: p.core ? 16 : 13 }),
    svg('text', { x: p.x, y: p.y + 4, 'text-anchor': 'middle' }, n)));
  const picture = svg('svg', { viewBox: `${-W / 2} ${-W / 2} ${W} ${W}`, class: 'network', role: 'img', 'aria-labelledby': 'net-title' },
    svg('title', { id: 'net-title' }, 'The best solution: optical links used, and the selected demand’s route'),
    access, used, highlight, nodes);
  const demands = result.demands || [];
  const pickId = newId('dem');
  const pick = h('select', { id: pickId }, demands.map((d) =>
    h('option', { value: String(d.id) }, `${d.source} → ${d.destination} (${d.bw})${d.routed ? '' : ' — not routed'}`)));
  const routeText = h('p', { class: 'muted', 'aria-live': 'polite' });
  const show = () => {
    const d = demands.find((x) => String(x.id) === pick.value);
    highlight.replaceChildren();
    if (!d || !d.routed) {
      routeText.textContent = d ? `Not routed: ${d.reason || ''}` : '';
      return;
    }
    for (const v of d.virtual_links || []) for (const [a, b] of hopsOf(v)) highlight.append(line(a, b, 'rlink'));
    routeText.textContent = `Route: ${d.route.join(' → ')} over virtual links ${(d.virtual_links || []).join(', ')}`;
  };
  pick.addEventListener('change', show);
  show();
  const rows = demands.map((d) => h('tr', {}, h('td', {}, d.source), h('td', {}, d.destination), h('td', {}, d.bw),
    h('td', {}, d.routed ? d.route.join(' → ') : `not routed${d.reason ? `: ${d.reason}` : ''}`)));
  return h('section', { 'aria-labelledby': 'net-h' }, h('h3', { id: 'net-h' }, 'Best solution'),
    h('p', {}, result.feasible ? `Fitness ${number(result.best_fitness)} (optical links used: ${(result.optical_links_used || []).length})`
      : (result.message || 'No feasible solution was found.')),
    h('div', { class: 'field' }, h('label', { for: pickId }, 'Demand'), pick), routeText,
    h('div', { class: 'network-box' }, picture),
    table('Demands and their routes', ['Source', 'Destination', 'Bandwidth', 'Route'], rows));
}

export async function render(box, job, outputs) {
  const section = h('section', { 'aria-labelledby': 'view-h' }, h('h2', { id: 'view-h' }, 'Convergence'));
  replace(box, section);
  if (outputs.some((o) => o.name === 'statistics.csv')) {
    const text = await api('GET', `/v1/jobs/${job.id}/outputs/statistics.csv`);
    const data = parseStats(text);
    section.append(plot(data));
  }
  if (outputs.some((o) => o.name === 'result.json')) {
    const result = await api('GET', `/v1/jobs/${job.id}/outputs/result.json`);
    section.append(h('p', {}, `${result.generations} generations, ${result.decodes} decodes, ${number(result.elapsed_s)} s on ${result.device}; stopped by ${result.stop_reason}.`));
    if (result.decoder === 'network') section.append(network(result));
    else if (result.tour) section.append(h('p', {}, `Tour length ${number(result.best_fitness)}.`));
  }
}
