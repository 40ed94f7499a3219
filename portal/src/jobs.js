// jobs.js — the tenant's jobs, live: GET /v1/jobs for the first page, then one Server-Sent
// Events stream (GET /v1/events) that brings every change of any of them (state, progress,
// device, times). Filters by state and kind; cancel and delete.
import { api } from './api.js';
import { announce, signedOut } from './app.js';
import { bytes, duration, h, replace, shortId, since, when } from './dom.js';
import { progressBar } from './forms.js';
import { kinds } from './submit.js';

const STATES = ['queued', 'running', 'succeeded', 'failed', 'canceled'];
const FINAL = new Set(['succeeded', 'failed', 'canceled']);

export function stateBadge(state) {
  return h('span', { class: `badge state-${state}` }, state);
}

// Cancel / delete buttons for a job; after(job or null) when done; errors go to onError.
export function jobActions(job, after, onError) {
  const act = async (btn, method, path, verb) => {
    btn.disabled = true;
    try {
      const r = await api(method, path);
      announce(`Job ${shortId(job.id)} ${verb}`);
      after(r);
    } catch (err) {
      btn.disabled = false;
      onError(err, btn);
    }
  };
  const out = [];
  if (!FINAL.has(job.state) && !job.cancel_requested) {
    const b = h('button', { type: 'button', class: 'secondary' }, 'Cancel', h('span', { class: 'sr-only' }, ` job ${shortId(job.id)}`));
    b.addEventListener('click', () => act(b, 'POST', `/v1/jobs/${job.id}/cancel`, 'cancel requested'));
    out.push(b);
  }
  if (FINAL.has(job.state)) {
    const b = h('button', { type: 'button', class: 'danger' }, 'Delete', h('span', { class: 'sr-only' }, ` job ${shortId(job.id)}`));
    b.addEventListener('click', () => {
      if (window.confirm(`Delete job ${shortId(job.id)} and its outputs?`)) act(b, 'DELETE', `/v1/jobs/${job.id}`, 'deleted');
    });
    out.push(b);
  }
  return out;
}

class JobList {
  constructor(filters) {
    this.filters = filters;
    this.rows = new Map();   // id -> {tr, job}
    this.tbody = h('tbody', {});
    this.empty = h('p', { class: 'muted' }, 'No jobs yet: submit one, or try an example.');
    this.message = h('p', { class: 'error', role: 'alert', hidden: true });
  }

  matches(job) {
    const { state, kind } = this.filters;
    return (!state || job.state === state) && (!kind || job.kind === kind);
  }

  rowOf(job) {
    const bar = progressBar(`Progress of job ${shortId(job.id)}`);
    bar.set(job.state === 'succeeded' ? 1 : job.progress, job.state === 'succeeded' ? '100 %' : undefined);
    const took = since(job.started_at, job.finished_at);
    const tr = h('tr', { 'data-job': job.id, 'data-state': job.state },
      h('th', { scope: 'row' }, h('a', { href: `#/jobs/${job.id}` }, shortId(job.id))),
      h('td', {}, job.kind),
      h('td', {}, stateBadge(job.state), job.cancel_requested && !FINAL.has(job.state) ? ' (stopping)' : ''),
      h('td', {}, bar.element, job.message ? h('div', { class: 'muted small' }, job.message) : null),
      h('td', {}, job.device || '—'),
      h('td', {}, when(job.created_at)),
      h('td', {}, took === null ? '—' : duration(took)),
      h('td', { class: 'actions' }, jobActions(job, (r) => this.afterAction(job, r), (err) => this.error(err))));
    return tr;
  }

  error(err) {
    this.message.textContent = err.message;
    this.message.hidden = false;
  }

  afterAction(job, result) {
    if (result && result.id) this.update(result);
    else this.remove(job.id);
  }

  remove(id) {
    const r = this.rows.get(id);
    if (r) r.tr.remove();
    this.rows.delete(id);
    this.empty.hidden = this.rows.size > 0;
  }

  // A job from the list or an event: its row made or replaced (new jobs go first).
  update(job, prepend = true) {
    const old = this.rows.get(job.id);
    if (old && old.job.updated_at && job.updated_at && job.updated_at < old.job.updated_at) return;
    const merged = old ? { ...old.job, ...job } : job;
    if (!this.matches(merged)) {
      if (old) this.remove(job.id);
      return;
    }
    const tr = this.rowOf(merged);
    if (old) old.tr.replaceWith(tr);
    else if (prepend) this.tbody.prepend(tr);
    else this.tbody.append(tr);
    this.rows.set(job.id, { tr, job: merged });
    this.empty.hidden = true;
  }

  element() {
    return h('div', {}, this.message,
      h('div', { class: 'table-wrap' },
        h('table', { class: 'jobs' },
          h('caption', { class: 'sr-only' }, 'Your jobs, newest first, updated live'),
          h('thead', {}, h('tr', {}, ['Job', 'Kind', 'State', 'Progress', 'Device', 'Submitted', 'Run time', 'Actions']
            .map((t) => h('th', { scope: 'col' }, t)))),
          this.tbody)),
      this.empty);
  }
}

// "Storage: 1.2 MiB of 10 MiB (the tenant's quota)" — what uploads, outputs and files take.
export function storageLine(st) {
  const of = st.quota_bytes ? ` of ${bytes(st.quota_bytes)}` : ' (no quota)';
  return `Storage: ${bytes(st.used_bytes)}${of}`;
}

function filterForm(all, filters) {
  const state = h('select', { id: 'f-state' }, h('option', { value: '' }, 'any'), STATES.map((s) => h('option', { value: s }, s)));
  const kind = h('select', { id: 'f-kind' }, h('option', { value: '' }, 'any'), all.map((k) => h('option', { value: k.name }, k.name)));
  state.value = filters.state || '';
  kind.value = filters.kind || '';
  const go = () => {
    const q = new URLSearchParams();
    if (state.value) q.set('state', state.value);
    if (kind.value) q.set('kind', kind.value);
    location.hash = `#/jobs${q.toString() ? `?${q}` : ''}`;
  };
  state.addEventListener('change', go);
  kind.addEventListener('change', go);
  return h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter jobs' },
    h('div', { class: 'field inline' }, h('label', { for: 'f-state' }, 'State'), state),
    h('div', { class: 'field inline' }, h('label', { for: 'f-kind' }, 'Kind'), kind));
}

export async function render(main, { query }) {
  const filters = { state: query.get('state') || '', kind: query.get('kind') || '' };
  const all = await kinds();
  const list = new JobList(filters);
  const live = h('p', { class: 'muted small', id: 'live' }, 'Connecting to live updates…');
  const storage = h('p', { class: 'muted small', id: 'storage-use' });
  replace(main,
    h('div', { class: 'page-head' }, h('h1', {}, 'Jobs'), h('a', { class: 'button', href: '#/submit' }, 'Submit a job')),
    filterForm(all, filters), live, storage, list.element());
  api('GET', '/v1/usage').then((u) => { storage.textContent = storageLine(u.storage); }).catch(() => {});
  const q = new URLSearchParams({ limit: '100' });
  if (filters.state) q.set('state', filters.state);
  if (filters.kind) q.set('kind', filters.kind);
  try {
    const page = await api('GET', `/v1/jobs?${q}`);
    for (const job of page.jobs) list.update(job, false);
    list.empty.hidden = page.jobs.length > 0;
  } catch (err) {
    list.error(err);
  }
  // The stream replays the last 30 s of changes on connecting: nothing between the list and
  // the stream is missed.
  const events = new EventSource('/v1/events');
  events.addEventListener('open', () => { live.textContent = 'Live: changes appear as they happen.'; });
  events.addEventListener('job', (e) => list.update(JSON.parse(e.data)));
  events.addEventListener('error', () => {
    live.textContent = events.readyState === EventSource.CLOSED
      ? 'Live updates stopped: reload the page.' : 'Live updates interrupted: reconnecting…';
    // an ended session: 401 with the cookie, {"signed_in": false} once it has gone
    if (events.readyState === EventSource.CLOSED) {
      api('GET', '/v1/session').then((s) => { if (s && !s.signed_in) signedOut(); }).catch(() => {});
    }
  });
  return { destroy: () => events.close() };
}
