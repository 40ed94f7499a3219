// reference.js — the API reference, rendered from the contract the server serves at
// /openapi.yaml (read with js-yaml): operations grouped by tag, each with its parameters,
// request body, responses; then the schemas. Text is shown as text; `code` spans and "- "
// lists of the descriptions are the only markup understood.
import { load } from './js-yaml.mjs';
import { api } from './api.js';
import { h, replace } from './dom.js';

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

function inline(text) {
  return String(text).split('`').map((part, i) => (i % 2 ? h('code', {}, part) : part));
}

// Paragraphs, "- " lists and `code`.
function prose(text) {
  if (!text) return null;
  const out = [];
  let list = null;
  for (const block of String(text).trim().split(/\n\s*\n/)) {
    const lines = block.split('\n');
    for (const line of lines) {
      const m = /^\s*- (.*)$/.exec(line);
      if (m) {
        if (!list) {
          list = h('ul', {});
          out.push(list);
        }
        list.append(h('li', {}, inline(m[1])));
      } else if (list && /^\s+\S/.test(line)) {
        list.lastChild.append(' ', ...inline(line.trim()));
      } else {
        list = null;
        out.push(h('p', {}, inline(line.trim())));
      }
    }
    list = null;
  }
  return h('div', { class: 'prose' }, out);
}

function schemaText(schema) {
  return JSON.stringify(schema, null, 2)
    .replace(/\{\s*"\$ref": "#\/components\/schemas\/([^"]+)"\s*\}/g, '$1');
}

function resolve(spec, obj) {
  if (obj && obj.$ref && obj.$ref.startsWith('#/')) {
    return obj.$ref.slice(2).split('/').reduce((o, k) => (o ? o[k] : undefined), spec) || obj;
  }
  return obj;
}

function operation(spec, path, method, op) {
  const params = [...(spec.paths[path].parameters || []), ...(op.parameters || [])].map((p) => resolve(spec, p));
  const secured = op.security ? op.security.length > 0 : true;
  const body = op.requestBody ? resolve(spec, op.requestBody) : null;
  const responses = Object.entries(op.responses || {}).map(([code, r]) => [code, resolve(spec, r)]);
  return h('details', { class: 'op' },
    h('summary', {}, h('span', { class: `method m-${method}` }, method.toUpperCase()), ' ', h('code', {}, path),
      op.summary ? [' — ', op.summary] : null),
    h('div', { class: 'op-body' },
      h('p', { class: 'muted small' }, secured ? 'Needs an API key (or a portal session).' : 'No key needed.'),
      prose(op.description),
      params.length ? h('div', { class: 'table-wrap' }, h('table', {},
        h('caption', {}, 'Parameters'),
        h('thead', {}, h('tr', {}, ['Name', 'In', 'Required', 'Schema', 'Description'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, params.map((p) => h('tr', {},
          h('th', { scope: 'row' }, h('code', {}, p.name)), h('td', {}, p.in), h('td', {}, p.required ? 'yes' : 'no'),
          h('td', {}, h('code', {}, p.schema ? schemaText(p.schema).replace(/\s+/g, ' ') : '')), h('td', {}, inline(p.description || ''))))))) : null,
      body ? h('div', {}, h('h4', {}, 'Request body'), prose(body.description),
        Object.entries(body.content || {}).map(([type, c]) => h('div', {}, h('p', {}, h('code', {}, type)),
          c.schema ? h('pre', { class: 'mono' }, schemaText(c.schema)) : null))) : null,
      h('h4', {}, 'Responses'),
      h('dl', { class: 'responses' }, responses.map(([code, r]) => [
        h('dt', {}, h('code', {}, code)),
        h('dd', {}, inline(r.description || ''), Object.keys(r.content || {}).length
          ? [' (', Object.keys(r.content).map((t, i) => [i ? ', ' : '', h('code', {}, t)]), ')'] : null)]))));
}

export async function render(main) {
  const text = await api('GET', '/openapi.yaml');
  const spec = load(text);
  const byTag = new Map();
  for (const [path, item] of Object.entries(spec.paths || {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const tag = (op.tags && op.tags[0]) || 'other';
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push(operation(spec, path, method, op));
    }
  }
  const tagInfo = new Map((spec.tags || []).map((t) => [t.name, t]));
  replace(main,
    h('h1', {}, `${spec.info.title} ${spec.info.version}`),
    h('p', {}, inline(spec.info.summary || ''), ' — ', h('a', { href: '/openapi.yaml', download: 'openapi.yaml' }, 'openapi.yaml')),
    prose(spec.info.description),
    [...byTag.entries()].map(([tag, ops]) => h('section', { 'aria-labelledby': `tag-${tag}` },
      h('h2', { id: `tag-${tag}` }, tag), prose(tagInfo.get(tag)?.description), ops)),
    h('section', { 'aria-labelledby': 'schemas-h' }, h('h2', { id: 'schemas-h' }, 'Schemas'),
      Object.entries((spec.components && spec.components.schemas) || {}).map(([name, s]) =>
        h('details', { class: 'op' }, h('summary', {}, h('code', {}, name)), h('pre', { class: 'mono' }, schemaText(s))))));
}
