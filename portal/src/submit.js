// submit.js — a job of any kind: its parameters as a form made from the kind's JSON Schema, its
// input files dropped or chosen (each streamed at once to POST /v1/blobs with a progress bar),
// then a JSON submit naming the blobs. Server errors land on the field they name.
//
//   #/submit/KIND                       the form
//   #/submit/KIND?preset=1              with the kind's example (presets.js)
//   #/submit/recon?from=JOB&output=N    a reconstruction of job JOB's output N (its projections),
//                                       with that job's geometry and grid
//   #/submit/KIND?again=JOB             JOB's parameters and inputs again
import { api, uploadBlob } from './api.js';
import { navigate, announce } from './app.js';
import { bytes, h, replace, shortId } from './dom.js';
import { clearErrors, fieldError, formError, progressBar } from './forms.js';
import { PRESETS, presetFile } from './presets.js';
import { schemaForm } from './schema_form.js';

let kindsCache = null;

export async function kinds() {
  if (!kindsCache) kindsCache = (await api('GET', '/v1/kinds')).kinds;
  return kindsCache;
}

// One input of the kind: its drop zone and the files in it.
class InputZone {
  constructor(spec) {
    this.spec = spec;
    this.items = [];   // {label, size, blobId, upload, promise, row, error}
    const id = `in-${spec.name}`;
    this.file = h('input', { type: 'file', id, multiple: spec.multiple, 'aria-describedby': `${id}-help` });
    this.file.addEventListener('change', () => {
      this.addFiles([...this.file.files]);
      this.file.value = '';
    });
    this.list = h('ul', { class: 'files', 'aria-label': `Files of ${spec.name}` });
    this.element = h('div', { class: 'field dropzone', 'data-input': spec.name },
      h('label', { for: id }, h('code', {}, spec.name), spec.required ? h('span', { class: 'req' }, ' (required)') : null),
      h('p', { class: 'help', id: `${id}-help` },
        `${spec.description || ''}${spec.multiple ? ' — several files allowed' : ''}. Drop files here or choose them.`),
      this.file, this.list);
    this.element.addEventListener('dragover', (e) => {
      e.preventDefault();
      this.element.classList.add('over');
    });
    this.element.addEventListener('dragleave', () => this.element.classList.remove('over'));
    this.element.addEventListener('drop', (e) => {
      e.preventDefault();
      this.element.classList.remove('over');
      this.addFiles([...e.dataTransfer.files]);
    });
  }

  addFiles(files) {
    if (!this.spec.multiple) this.clear();
    for (const f of this.spec.multiple ? files : files.slice(0, 1)) this.addUpload(f);
  }

  clear() {
    for (const it of this.items) if (it.upload) it.upload.abort();
    this.items = [];
    replace(this.list);
  }

  remove(item) {
    if (item.upload) item.upload.abort();
    this.items = this.items.filter((x) => x !== item);
    item.row.remove();
  }

  addRow(item, extra) {
    const removeBtn = h('button', { type: 'button', class: 'link', onclick: () => this.remove(item) },
      'Remove', h('span', { class: 'sr-only' }, ` ${item.label}`));
    item.row = h('li', {}, h('span', { class: 'fname' }, item.label), ` (${bytes(item.size)}) `, extra, removeBtn);
    this.items.push(item);
    this.list.append(item.row);
  }

  addUpload(file) {
    const item = { label: file.name, size: file.size, blobId: null };
    const bar = progressBar(`Upload of ${file.name}`);
    this.addRow(item, bar.element);
    item.upload = uploadBlob(file, (loaded, total) => bar.set(total ? loaded / total : 0));
    item.promise = item.upload.promise.then((blob) => {
      item.blobId = blob.id;
      item.upload = null;
      bar.set(1, 'uploaded');
      return blob.id;
    }, (err) => {
      item.upload = null;
      item.error = err;
      bar.set(0, `failed: ${err.message}`);
      throw err;
    });
    item.promise.catch(() => {});
  }

  // An existing blob (another job's output or input).
  addBlob(label, size, blobId) {
    const item = { label, size, blobId, promise: Promise.resolve(blobId) };
    this.addRow(item, h('span', { class: 'muted' }, 'already stored '));
  }

  // name -> blob id for the submit; waits for uploads; throws {zone, message}.
  async collect() {
    const out = {};
    const ids = [];
    for (const it of this.items) {
      try {
        ids.push(await it.promise);
      } catch (err) {
        throw Object.assign(new Error(`${it.label}: ${err.message}`), { control: this.file });
      }
    }
    ids.forEach((id, i) => {
      out[i === 0 ? this.spec.name : `${this.spec.name}.${i}`] = id;
    });
    return out;
  }
}

function kindPicker(all, current) {
  const sel = h('select', { id: 'kind', 'aria-describedby': 'kind-help' },
    all.map((k) => h('option', { value: k.name }, k.name)));
  sel.value = current;
  sel.addEventListener('change', () => navigate(`#/submit/${sel.value}`));
  const summary = all.find((k) => k.name === current);
  return h('div', { class: 'field' }, h('label', { for: 'kind' }, 'Kind'), sel,
    h('p', { class: 'help', id: 'kind-help' }, summary ? summary.summary : ''));
}

// Where the form starts from: the example, another job's parameters, or nothing.
async function startingPoint(kind, query) {
  if (query.get('preset')) return { params: PRESETS[kind]?.params || {}, files: PRESETS[kind]?.inputs || {}, blobs: [] };
  const from = query.get('from');
  if (from) {
    const job = await api('GET', `/v1/jobs/${encodeURIComponent(from)}`);
    const outs = (await api('GET', `/v1/jobs/${encodeURIComponent(from)}/outputs`)).outputs;
    const out = outs.find((o) => o.name === query.get('output'));
    const p = job.params || {};
    const params = { ...(PRESETS[kind]?.params || {}) };
    for (const k of ['geometry', 'volume', 'batch', 'short_scan']) if (p[k] !== undefined) params[k] = p[k];
    const blobs = out ? [{ input: 'projections', label: `${out.name} of job ${shortId(from)}`, size: out.size, id: out.blob_id }] : [];
    return { params, files: {}, blobs };
  }
  const again = query.get('again');
  if (again) {
    const job = await api('GET', `/v1/jobs/${encodeURIComponent(again)}`);
    const blobs = Object.entries(job.inputs || {}).map(([name, id]) =>
      ({ input: name.replace(/\.\d+$/, ''), label: `${name} of job ${shortId(again)}`, size: null, id }));
    return { params: job.params || {}, files: {}, blobs };
  }
  return { params: {}, files: {}, blobs: [] };
}

export async function render(main, { parts, query }) {
  const all = await kinds();
  const kind = all.some((k) => k.name === parts[1]) ? parts[1] : (all[0] && all[0].name);
  const spec = all.find((k) => k.name === kind);
  const start = await startingPoint(kind, query);
  const sf = schemaForm(spec.params_schema, start.params);
  const zones = (spec.inputs || []).map((s) => new InputZone(s));
  for (const b of start.blobs) zones.find((z) => z.spec.name === b.input)?.addBlob(b.label, b.size, b.id);
  for (const [name, files] of Object.entries(start.files)) {
    const zone = zones.find((z) => z.spec.name === name);
    for (const f of files) presetFile(f).then((file) => zone.addUpload(file), (e) => announce(e.message));
  }
  const priority = h('input', { id: 'priority', type: 'number', step: '1', min: -1000, max: 1000, inputmode: 'numeric' });
  const timeout = h('input', { id: 'timeout', type: 'number', step: '1', min: 0, max: 2592000, inputmode: 'numeric',
    'aria-describedby': 'timeout-help' });
  const submitBtn = h('button', { type: 'submit' }, 'Submit');
  const form = h('form', { class: 'card', novalidate: true },
    h('fieldset', {}, h('legend', {}, 'Parameters'), sf.element),
    zones.length ? h('fieldset', {}, h('legend', {}, 'Input files'), zones.map((z) => z.element)) : null,
    h('details', { class: 'more' }, h('summary', {}, 'Queue options'),
      h('div', { class: 'field' }, h('label', { for: 'priority' }, 'Priority'), priority,
        h('p', { class: 'help' }, 'Higher runs first, from -1000 to 1000 (default 0).')),
      h('div', { class: 'field' }, h('label', { for: 'timeout' }, 'Time limit (seconds)'), timeout,
        h('p', { class: 'help', id: 'timeout-help' },
          'A run that lasts longer is stopped and the job fails. Empty: the server\'s default; 0: no limit.'))),
    h('div', { class: 'actions' }, submitBtn));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submit(form, kind, sf, zones, { priority, timeout }, submitBtn);
  });
  const preset = PRESETS[kind];
  const tryIt = preset
    ? h('aside', { class: 'card tryit' },
      h('h2', {}, `Try it: ${preset.title}`), h('p', {}, preset.text),
      kind === 'recon' ? null : h('a', { class: 'button', href: `#/submit/${kind}?preset=1`, id: 'try-it' }, 'Fill in the example'))
    : null;
  replace(main, h('h1', {}, `Submit a ${kind} job`), kindPicker(all, kind), tryIt, form);
  return { destroy: () => zones.forEach((z) => z.items.forEach((it) => it.upload && it.upload.abort())) };
}

// queue: the Queue options' inputs ({priority, timeout}), sent when filled in.
async function submit(form, kind, sf, zones, queue, btn) {
  clearErrors(form);
  let params;
  const inputs = {};
  try {
    params = sf.values();
  } catch (err) {
    fieldError(form, err.control, err.message);
    return;
  }
  btn.disabled = true;
  btn.textContent = 'Waiting for uploads…';
  try {
    for (const z of zones) Object.assign(inputs, await z.collect());
  } catch (err) {
    fieldError(form, err.control, err.message);
    btn.disabled = false;
    btn.textContent = 'Submit';
    return;
  }
  btn.textContent = 'Submitting…';
  const body = { kind, params };
  if (Object.keys(inputs).length) body.inputs = inputs;
  if (queue.priority.value.trim() !== '') body.priority = Number(queue.priority.value);
  if (queue.timeout.value.trim() !== '') body.timeout_seconds = Number(queue.timeout.value);
  try {
    const job = await api('POST', '/v1/jobs', { json: body });
    announce(`Job ${shortId(job.id)} submitted`);
    navigate(`#/jobs/${job.id}`);
  } catch (err) {
    btn.disabled = false;
    btn.textContent = 'Submit';
    showSubmitError(form, err, sf, zones, queue);
  }
}

function showSubmitError(form, err, sf, zones, queue) {
  const field = err.field || '';
  if (field.startsWith('params') && sf.showError(field, err.message, form)) return;
  const bare = field.replace(/^params\.?/, '').split('.')[0];
  if (field.startsWith('inputs') || zones.some((z) => z.spec.name === bare)) {
    const name = field.startsWith('inputs') ? field.split('.')[1] || '' : bare;
    const zone = zones.find((z) => name === z.spec.name || name.startsWith(`${z.spec.name}.`)) || zones[0];
    if (zone) {
      fieldError(form, zone.file, err.message);
      return;
    }
  }
  if (field === 'priority' || field === 'timeout_seconds') {
    const control = field === 'priority' ? queue.priority : queue.timeout;
    fieldError(form, control, err.message);
    return;
  }
  formError(form, err.message);
}
