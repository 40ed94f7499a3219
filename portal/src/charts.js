// charts.js — a time chart of the Operations page: a uPlot drawing (role img, its label the
// chart's current figures, for screen readers), and the same figures as numbers beside it.
// Sized in rem, which the page grows with the viewport, so it reads at 320 px and on 4K.
import uPlot from './uPlot.esm.js';
import { h, replace } from './dom.js';

const COLORS = ['#1f5fa8', '#b3261e', '#2e7d32', '#8e24aa', '#ef6c00', '#00838f', '#5d4037', '#546e7a'];

function lastOf(values) {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null && values[i] !== undefined) return values[i];
  return null;
}

// A colour key; set through the CSSOM, as the page's CSP refuses style attributes.
function swatch(color) {
  const el = h('span', { class: 'swatch', 'aria-hidden': 'true' });
  el.style.backgroundColor = color;
  return el;
}

// chart({title, caption, format, range, tick}) -> {el, update(times, series)}; series: [{label, values}],
// times in seconds since the epoch, values null where there is no point.
// range: a fixed [min, max] of the values (a utilization's [0, 1]); tick: the axis' format when
// it needs more digits than the figures.
export function chart({ title, caption, format, range = null, tick = null }) {
  const holder = h('div', { class: 'plot', role: 'img', 'aria-label': `${title}: no data yet` });
  const numbers = h('dl', { class: 'facts now' });
  const el = h('figure', { class: 'figure chart', 'data-points': '0' },
    h('figcaption', {}, h('strong', {}, title), ` — ${caption}`),
    h('div', { class: 'chart-body' }, holder, numbers));
  let plot = null;
  let labels = '';

  const rem = () => parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
  const size = () => ({ width: Math.max(200, Math.min(holder.clientWidth || 30 * rem(), 60 * rem())), height: Math.round(12 * rem()) });

  function make(series, data) {
    if (plot) plot.destroy();
    const r = rem();
    const font = `${Math.round(0.8 * r)}px system-ui, sans-serif`;
    // the value axis as wide as its longest label, so none is cut
    const fit = (u, values) => {
      if (!values) return 4 * r;
      u.ctx.font = font;
      return Math.ceil(Math.max(...values.map((v) => u.ctx.measureText(v).width), 0)) + 1.5 * r;
    };
    plot = new uPlot({
      ...size(),
      legend: { show: false },
      cursor: { show: false },
      scales: range ? { y: { range: () => range } } : {},
      axes: [{ font, size: 3 * r, stroke: '#333' },
        { font, size: fit, stroke: '#333', values: (u, ticks) => ticks.map((v) => (tick || format)(v)) }],
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true }))],
    }, data, holder);
  }

  function update(times, series) {
    const shown = series.length ? series : [{ label: 'none', values: times.map(() => null) }];
    const data = [times, ...shown.map((s) => s.values)];
    const key = shown.map((s) => s.label).join('\u0000');
    if (!plot || key !== labels) make(shown, data);
    else plot.setData(data);
    labels = key;
    const points = series.reduce((n, s) => n + s.values.filter((v) => v !== null && v !== undefined).length, 0);
    el.dataset.points = String(points);
    const now = series.map((s, i) => [s.label, lastOf(s.values), COLORS[i % COLORS.length]]);
    replace(numbers, now.length ? now.map(([label, v, color]) => [
      h('dt', {}, swatch(color), label),
      h('dd', {}, v === null ? '—' : format(v))]) : [h('dt', {}, 'Now'), h('dd', {}, 'nothing yet')]);
    const said = now.map(([label, v]) => `${label} ${v === null ? 'no value' : format(v)}`).join('; ');
    holder.setAttribute('aria-label', `${title}, last ${Math.round((times[times.length - 1] - times[0]) / 60) || 0} minutes; now: ${said || 'no data yet'}`);
  }

  new ResizeObserver(() => { if (plot) plot.setSize(size()); }).observe(holder);
  return { el, update };
}
