// view_volume.js — results of recon and phantom: a slice viewer over the volume outputs
// (volume.nrrd, truth.nrrd), fed by PNG slices the server renders on demand
// (GET .../outputs/NAME/slices/Z.png?lo=&hi=), with a z slider, window and level, and zoom;
// then the job's report.
import { api } from './api.js';
import { h, newId, number, replace } from './dom.js';

const VOLUMES = ['volume.nrrd', 'truth.nrrd'];

function slider(label, min, max, step, value, help) {
  const id = newId('s');
  const input = h('input', { type: 'range', id, min, max, step, value, 'aria-describedby': `${id}-v` });
  const out = h('output', { id: `${id}-v`, for: id });
  return { input, out, element: h('div', { class: 'field slider' }, h('label', { for: id }, label), input, out, help ? h('p', { class: 'help' }, help) : null) };
}

class SliceViewer {
  constructor(job, name, meta) {
    this.job = job;
    this.name = name;
    this.meta = meta;
    const [nx, ny, nz] = meta.sizes;
    const { lo, hi } = meta.window;
    const span = Math.max(hi - lo, 1e-6);
    this.z = slider('Slice (z)', 0, nz - 1, 1, Math.floor(nz / 2));
    this.level = slider('Level (window centre)', lo - span, hi + span, span / 200, (lo + hi) / 2);
    this.width = slider('Window width', span / 100, span * 4, span / 200, span);
    const zoomId = newId('zoom');
    this.zoom = h('select', { id: zoomId },
      [['fit', 'fit the page'], ['1', '1 ×'], ['2', '2 ×'], ['4', '4 ×'], ['8', '8 ×']].map(([v, t]) => h('option', { value: v }, t)));
    this.img = h('img', { class: 'slice', width: nx, height: ny, alt: '', decoding: 'async' });
    this.status = h('p', { class: 'muted small', 'aria-live': 'polite' });
    // scrollable when zoomed: focusable, so that the keyboard scrolls it too
    this.frame = h('div', { class: 'slice-frame zoom-fit', tabindex: '0', role: 'region', 'aria-label': `Slice image of ${name}` }, this.img);
    for (const s of [this.z, this.level, this.width]) s.input.addEventListener('input', () => this.schedule());
    this.zoom.addEventListener('change', () => this.applyZoom());
    this.img.addEventListener('load', () => { this.status.textContent = ''; });
    this.img.addEventListener('error', () => { this.status.textContent = 'This slice could not be rendered.'; });
    this.element = h('section', { class: 'viewer', 'aria-label': `Slices of ${name}` },
      h('div', { class: 'viewer-controls' }, this.z.element, this.level.element, this.width.element,
        h('div', { class: 'field' }, h('label', { for: zoomId }, 'Zoom'), this.zoom)),
      this.frame, this.status);
    this.update();
  }

  applyZoom() {
    const v = this.zoom.value;
    this.frame.className = `slice-frame zoom-${v === 'fit' ? 'fit' : 'px'}`;
    if (v === 'fit') {
      this.img.style.width = '';
    } else {
      this.img.style.width = `${this.meta.sizes[0] * Number(v)}px`;
    }
  }

  schedule() {
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => this.update(), 40);
  }

  update() {
    const z = Number(this.z.input.value);
    const level = Number(this.level.input.value);
    const width = Number(this.width.input.value);
    const lo = level - width / 2;
    const hi = level + width / 2;
    this.z.out.textContent = `${z + 1} of ${this.meta.slices}`;
    this.level.out.textContent = number(level);
    this.width.out.textContent = number(width);
    const q = new URLSearchParams({ lo: String(lo), hi: String(hi) });
    this.img.alt = `Slice ${z + 1} of ${this.meta.slices} of ${this.name}, values ${number(lo)} (black) to ${number(hi)} (white)`;
    this.img.src = `/v1/jobs/${this.job.id}/outputs/${encodeURIComponent(this.name)}/slices/${z}.png?${q}`;
  }
}

async function report(job, outputs) {
  if (!outputs.some((o) => o.name === 'report.json')) return null;
  const rep = await api('GET', `/v1/jobs/${job.id}/outputs/report.json`);
  const rows = Object.entries(rep).filter(([, v]) => v === null || typeof v !== 'object' || !Array.isArray(v));
  return h('details', {}, h('summary', {}, 'Report (report.json)'),
    h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, typeof v === 'object' && v ? JSON.stringify(v) : number(v))])));
}

export async function render(box, job, outputs) {
  const vols = VOLUMES.filter((n) => outputs.some((o) => o.name === n));
  const section = h('section', { 'aria-labelledby': 'view-h' }, h('h2', { id: 'view-h' }, 'Slices'));
  replace(box, section);
  if (!vols.length) {
    section.append(h('p', { class: 'muted' }, 'This job wrote no volume to look at.'));
  } else {
    const holder = h('div', {});
    const pickId = newId('vol');
    const pick = h('select', { id: pickId }, vols.map((n) => h('option', { value: n }, n)));
    const showVolume = async () => {
      const meta = await api('GET', `/v1/jobs/${job.id}/outputs/${encodeURIComponent(pick.value)}/slices`);
      replace(holder, new SliceViewer(job, pick.value, meta).element);
    };
    pick.addEventListener('change', () => showVolume().catch((e) => replace(holder, h('p', { class: 'error', role: 'alert' }, e.message))));
    if (vols.length > 1) section.append(h('div', { class: 'field' }, h('label', { for: pickId }, 'Volume'), pick));
    section.append(holder);
    await showVolume();
  }
  const rep = await report(job, outputs).catch(() => null);
  if (rep) box.append(rep);
}
