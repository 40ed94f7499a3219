// dom.js — making elements without HTML strings (so no text a server or a user wrote is ever
// parsed as markup), and formatting numbers, sizes and times for people.

const SVG_NS = 'http://www.w3.org/2000/svg';

function put(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' && 'value' in el) el.value = v;
    else if (k === 'checked' || k === 'selected' || k === 'indeterminate') el[k] = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// h('button', {class: 'x', onclick: f}, 'text', child, [more]) — an HTML element.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  put(el, attrs);
  return append(el, children);
}

// svg('line', {x1: 0, ...}) — an SVG element (presentation attributes, never a style attribute).
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  put(el, attrs);
  return append(el, children);
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function replace(el, ...children) {
  clear(el);
  return append(el, children);
}

let uid = 0;
// A fresh id for label/aria pairs.
export function newId(prefix = 'f') {
  uid += 1;
  return `${prefix}-${uid}`;
}

export function bytes(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i += 1;
  }
  return `${i ? n.toFixed(n < 10 ? 1 : 0) : n} ${units[i]}`;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 90) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const m = Math.floor(seconds / 60);
  if (m < 90) return `${m} min ${Math.round(seconds - m * 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

// "2026-01-02T03:04:05.123456Z" -> a local date and time.
export function when(ts) {
  if (!ts) return '—';
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? ts : d.toLocaleString();
}

export function since(a, b) {
  if (!a) return null;
  const t0 = new Date(a).getTime();
  const t1 = b ? new Date(b).getTime() : Date.now();
  return Number.isFinite(t0) && Number.isFinite(t1) ? Math.max(0, (t1 - t0) / 1000) : null;
}

export function shortId(id) {
  return id ? id.slice(0, 8) : '';
}

export function number(v, digits = 4) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return String(v ?? '—');
  return Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : String(+v.toFixed(digits));
}

// A table wrapped so that a narrow screen scrolls it rather than the page. While it scrolls,
// the wrapper is a named region in the tab order, so a keyboard can scroll it too.
export function table(caption, headers, rows, attrs = {}) {
  const wrap = h('div', { class: 'table-wrap' },
    h('table', attrs,
      caption ? h('caption', {}, caption) : null,
      h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows)));
  new ResizeObserver(() => {
    const scrolls = wrap.scrollWidth > wrap.clientWidth;
    put(wrap, scrolls ? { tabindex: '0', role: 'region', 'aria-label': caption || 'table' } : {});
    if (!scrolls) for (const a of ['tabindex', 'role', 'aria-label']) wrap.removeAttribute(a);
  }).observe(wrap);
  return wrap;
}
