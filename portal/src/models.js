// models.js — for operators: the model repository (GET /v1/models): each version's state and
// devices, load and unload, delete a version, and upload a new one (model.onnx and
// config.json as multipart/form-data, with upload progress).
import { api, send } from './api.js';
import { announce } from './app.js';
import { h, replace, table } from './dom.js';
import { clearErrors, fieldError, formError, progressBar } from './forms.js';

function versionRow(model, v, refresh, problem) {
  const act = async (btn, method, path, verb) => {
    btn.disabled = true;
    try {
      await api(method, path);
      announce(`${model.name} version ${v.version} ${verb}`);
      await refresh();
    } catch (err) {
      btn.disabled = false;
      problem(err);
    }
  };
  const base = `/v1/models/${encodeURIComponent(model.name)}`;
  const label = `${model.name} version ${v.version}`;
  const load = h('button', { type: 'button' }, 'Load', h('span', { class: 'sr-only' }, ` ${label}`));
  const unload = h('button', { type: 'button', class: 'secondary' }, 'Unload', h('span', { class: 'sr-only' }, ` ${label}`));
  const del = h('button', { type: 'button', class: 'danger' }, 'Delete', h('span', { class: 'sr-only' }, ` ${label}`));
  load.addEventListener('click', () => act(load, 'POST', `${base}/load?version=${v.version}`, 'loaded'));
  unload.addEventListener('click', () => act(unload, 'POST', `${base}/unload?version=${v.version}`, 'unloaded'));
  del.addEventListener('click', () => {
    if (window.confirm(`Delete ${label} from the repository?`)) act(del, 'DELETE', `${base}/versions/${v.version}`, 'deleted');
  });
  const devices = (v.devices || []).map((d) => (typeof d === 'string' ? d : JSON.stringify(d))).join(', ') || '—';
  return h('tr', { 'data-model': model.name, 'data-version': String(v.version) },
    h('th', { scope: 'row' }, model.name), h('td', {}, String(v.version), model.default_version === v.version ? ' (default)' : ''),
    h('td', { class: 'model-state' }, h('span', { class: `badge model-${v.state}` }, v.state)), h('td', {}, devices),
    h('td', { class: 'actions' }, v.state === 'loaded' ? unload : load, del));
}

function uploadForm(refresh) {
  const name = h('input', { id: 'm-name', type: 'text', required: true, pattern: '[A-Za-z0-9._-]+', spellcheck: 'false' });
  const version = h('input', { id: 'm-version', type: 'number', min: 1, step: 1, required: true });
  const onnx = h('input', { id: 'm-onnx', type: 'file', accept: '.onnx', required: true });
  const config = h('input', { id: 'm-config', type: 'file', accept: '.json,application/json', 'aria-describedby': 'm-config-help' });
  const bar = progressBar('Model upload');
  const btn = h('button', { type: 'submit' }, 'Upload');
  const form = h('form', { class: 'card', novalidate: true, 'aria-labelledby': 'up-h' },
    h('h2', { id: 'up-h' }, 'Upload a version'),
    h('div', { class: 'field' }, h('label', { for: 'm-name' }, 'Model name'), name),
    h('div', { class: 'field' }, h('label', { for: 'm-version' }, 'Version'), version),
    h('div', { class: 'field' }, h('label', { for: 'm-onnx' }, 'model.onnx'), onnx),
    h('div', { class: 'field' }, h('label', { for: 'm-config' }, 'config.json'), config,
      h('p', { class: 'help', id: 'm-config-help' }, 'Required for a new model; a new version of a known model may keep its config.')),
    h('div', { class: 'actions' }, btn, bar.element));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(form);
    if (!name.value.trim()) return fieldError(form, name, 'Name the model.');
    if (!version.value) return fieldError(form, version, 'Give a version number.');
    if (!onnx.files.length) return fieldError(form, onnx, 'Choose the model.onnx file.');
    const fd = new FormData();
    fd.append('model', onnx.files[0], 'model.onnx');
    if (config.files.length) fd.append('config', config.files[0], 'config.json');
    btn.disabled = true;
    try {
      await send('PUT', `/v1/models/${encodeURIComponent(name.value.trim())}/versions/${encodeURIComponent(version.value)}`, fd,
        { onProgress: (l, t) => bar.set(t ? l / t : 0) }).promise;
      // stored once a trial load passed, but not served until someone loads it
      bar.set(1, 'uploaded: Load it to serve it');
      announce(`Model ${name.value} version ${version.value} uploaded; load it to serve it`);
      await refresh();
    } catch (err) {
      const f = err.field || '';
      if (f.includes('config')) fieldError(form, config, err.message);
      else if (f.includes('model')) fieldError(form, onnx, err.message);
      else if (f.includes('version')) fieldError(form, version, err.message);
      else formError(form, err.message);
    } finally {
      btn.disabled = false;
    }
    return null;
  });
  return form;
}

export async function render(main) {
  const list = h('div', {});
  const problem = h('p', { class: 'error', role: 'alert', hidden: true });
  const showProblem = (err) => {
    problem.textContent = err.message;
    problem.hidden = false;
    problem.focus();
  };
  problem.setAttribute('tabindex', '-1');
  const refresh = async () => {
    const r = await api('GET', '/v1/models');
    const rows = r.models.flatMap((m) => m.versions.map((v) => versionRow(m, v, refresh, showProblem)));
    replace(list, table('Models and versions', ['Model', 'Version', 'State', 'Devices', 'Actions'], rows));
  };
  replace(main, h('h1', {}, 'Models'), problem, list, uploadForm(refresh));
  await refresh();
}
