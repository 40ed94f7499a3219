// job.js — one job: its state and progress live (GET /v1/jobs/{id}/events), its parameters,
// its history, every output to download, and the view its kind's results call for; its
// provenance (what the run recorded, the RO-Crate to download) and "Run again" (a rerun that
// says whether it reproduced the job).
import { api } from './api.js';
import { announce, navigate } from './app.js';
import { bytes, duration, h, replace, shortId, since, when } from './dom.js';
import { progressBar } from './forms.js';
import { jobActions, stateBadge } from './jobs.js';

const FINAL = new Set(['succeeded', 'failed', 'canceled']);
const VIEWS = {
  phantom: () => import('./view_volume.js'),
  recon: () => import('./view_volume.js'),
  brkga: () => import('./view_brkga.js'),
  infer: () => import('./view_infer.js'),
};

function summary(job) {
  const rows = [
    ['Kind', job.kind],
    ['State', [stateBadge(job.state), job.cancel_requested && !FINAL.has(job.state) ? ' (stopping)' : '']],
    ['Device', job.device || '—'],
    ['Submitted', when(job.created_at)],
    ['Started', when(job.started_at)],
    ['Finished', when(job.finished_at)],
    ['Run time', job.started_at ? duration(since(job.started_at, job.finished_at)) : '—'],
    ['Attempts', `${job.attempts} of ${job.max_attempts}`],
    ['Time limit', job.timeout_seconds ? duration(job.timeout_seconds) : 'none'],
  ];
  if (job.rerun_of) rows.push(['Rerun of', h('a', { href: `#/jobs/${job.rerun_of}` }, shortId(job.rerun_of))]);
  if (job.reproduced) rows.push(['Reproduced', reproducedText(job)]);
  return h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

function reproducedText(job) {
  const r = job.reproduction || {};
  if (job.reproduced === 'identical') return `identical (${(r.compared || []).length} output(s) compared by digest)`;
  if (job.reproduced === 'unknown') return `not known: ${r.why || ''}`;
  const outs = (r.differing_outputs || []).map((d) => d.name).join(', ');
  const env = (r.environment_differences || []).map((d) => d.path).join(', ');
  return `different: ${outs}${env ? `; the environment differed in ${env}` : ''}`;
}

// What the job's last attempt recorded (its action's environment in the crate), on demand.
function provenanceSection(job) {
  const box = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const details = h('details', {}, h('summary', {}, 'Provenance'),
    h('p', {}, 'How this result was made, as a ',
      h('a', { href: `/v1/jobs/${job.id}/provenance`, target: '_blank', rel: 'noopener' }, 'Process Run Crate'),
      ' (RO-Crate); ',
      h('a', { href: `/v1/jobs/${job.id}/provenance?format=zip`, download: `job-${job.id}-crate.zip` },
        'download it with its files'), '.'),
    box);
  let loaded = false;
  details.addEventListener('toggle', async () => {
    if (!details.open || loaded) return;
    loaded = true;
    try {
      const crate = await api('GET', `/v1/jobs/${job.id}/provenance`);
      const byId = new Map(crate['@graph'].map((e) => [e['@id'], e]));
      const action = byId.get(`#action-${job.id}`) || {};
      const rows = (action.environment || []).map((ref) => byId.get(ref['@id'])).filter(Boolean)
        .map((p) => h('tr', {}, h('th', { scope: 'row' }, p.name), h('td', { class: 'mono' }, String(p.value))));
      replace(box, rows.length
        ? h('div', { class: 'table-wrap' }, h('table', {}, h('caption', {}, 'Recorded at the start of the last attempt'),
          h('tbody', {}, rows)))
        : h('p', { class: 'muted' }, 'Nothing recorded yet: the job has not started.'));
    } catch (err) {
      replace(box, h('p', { class: 'error', role: 'alert' }, err.message));
    }
  });
  return details;
}

// POST /v1/jobs/{id}/rerun, then the new job's page.
function runAgainButton(job, onError) {
  const b = h('button', { type: 'button', class: 'secondary' }, 'Run again',
    h('span', { class: 'sr-only' }, ` job ${shortId(job.id)} as it was`));
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      const again = await api('POST', `/v1/jobs/${job.id}/rerun`);
      announce(`Job ${shortId(again.id)} reruns job ${shortId(job.id)}`);
      navigate(`#/jobs/${again.id}`);
    } catch (err) {
      b.disabled = false;
      onError(err);
    }
  });
  return b;
}

// A large output is fetched straight from the object store when the service keeps it there
// (?redirect=presigned: 307 to a presigned URL; a large object is answered as before).
const PRESIGNED_FROM = 16 * 1024 * 1024;
function downloadUrl(o) {
  return o.size >= PRESIGNED_FROM ? `${o.url}${o.url.includes('?') ? '&' : '?'}redirect=presigned` : o.url;
}

function outputsTable(job, outputs) {
  const rows = outputs.map((o) => {
    const extra = [];
    if (/^projections\.(nrrd|raw)$/.test(o.name) && job.kind === 'phantom') {
      extra.push(h('a', { class: 'button small', href: `#/submit/recon?from=${job.id}&output=${encodeURIComponent(o.name)}` },
        'Reconstruct', h('span', { class: 'sr-only' }, ` ${o.name}`)));
    }
    return h('tr', {},
      h('th', { scope: 'row' }, h('a', { href: downloadUrl(o), download: o.name }, o.name)),
      h('td', {}, bytes(o.size)), h('td', {}, o.content_type), h('td', {}, extra));
  });
  return h('section', { 'aria-labelledby': 'outputs-h' }, h('h2', { id: 'outputs-h' }, 'Outputs'),
    outputs.length
      ? h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, ['File (download)', 'Size', 'Type', h('span', { class: 'sr-only' }, 'Actions')]
          .map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, rows)))
      : h('p', { class: 'muted' }, 'This job wrote no outputs.'));
}

function historyItem(ev) {
  const d = ev.data;
  let text = ev.type;
  if (ev.type === 'state') text = `state: ${d.state}${d.device ? ` on ${d.device}` : ''}${d.error ? ` — ${d.error.message || ''}` : ''}`;
  if (ev.type === 'message') text = d.message;
  if (ev.type === 'cancel_requested') text = 'cancel requested';
  return h('li', {}, h('time', { datetime: d.at }, when(d.at)), ' ', text);
}

export async function render(main, { parts }) {
  const id = parts[1];
  let job;
  try {
    job = await api('GET', `/v1/jobs/${encodeURIComponent(id)}`);
  } catch (err) {
    replace(main, h('h1', {}, 'Job'), h('p', { class: 'error', role: 'alert' }, err.message), h('a', { href: '#/jobs' }, 'Back to the jobs'));
    return null;
  }
  const bar = progressBar(`Progress of job ${shortId(id)}`);
  const head = h('div', {});
  const message = h('p', { class: 'muted' });
  const problem = h('p', { class: 'error', role: 'alert', hidden: true });
  const actions = h('div', { class: 'actions' });
  const history = h('ol', { class: 'history', 'aria-label': 'History' });
  const results = h('div', { id: 'results' });
  let shownFinal = false;
  const show = () => {
    replace(head, summary(job));
    bar.set(job.state === 'succeeded' ? 1 : job.progress);
    message.textContent = job.message || '';
    replace(actions,
      jobActions(job, (r) => {
        if (r && r.id) {
          job = { ...job, ...r };
          show();
        } else navigate('#/jobs');
      }, (err) => { problem.textContent = err.message; problem.hidden = false; }),
      job.parent_id ? [] : runAgainButton(job, (err) => { problem.textContent = err.message; problem.hidden = false; }),
      h('a', { class: 'button secondary', href: `#/submit/${job.kind}?again=${job.id}` }, 'Submit again'));
    if (job.error) {
      problem.textContent = `Failed: ${job.error.message || JSON.stringify(job.error)}`;
      problem.hidden = false;
    }
    if (FINAL.has(job.state) && !shownFinal) {
      shownFinal = true;
      announce(`Job ${shortId(id)} ${job.state}`);
      showResults(job, results);
    }
  };
  replace(main,
    h('h1', {}, `Job ${shortId(id)} `, h('span', { class: 'muted small' }, job.kind)),
    problem, head,
    h('div', { class: 'field' }, h('span', { class: 'label', id: 'prog-label' }, 'Progress'), bar.element), message,
    actions,
    h('details', {}, h('summary', {}, 'Parameters'), h('pre', { class: 'mono' }, JSON.stringify(job.params, null, 2))),
    h('details', {}, h('summary', {}, 'History'), history),
    provenanceSection(job),
    results);
  show();
  const events = new EventSource(`/v1/jobs/${encodeURIComponent(id)}/events`);
  let finalSeen = false;
  const onEvent = (type) => (e) => {
    const data = JSON.parse(e.data);
    if (type === 'state' && FINAL.has(data.state)) finalSeen = true;   // the server ends the stream
    history.append(historyItem({ type, data }));
    if (type === 'progress') {
      job.progress = data.progress;
      job.message = data.message;
    }
    if (type === 'state' || type === 'cancel_requested') {
      api('GET', `/v1/jobs/${encodeURIComponent(id)}`).then((j) => { job = j; show(); }, () => {});
      return;
    }
    show();
  };
  for (const t of ['state', 'progress', 'message', 'cancel_requested', 'retry']) events.addEventListener(t, onEvent(t));
  events.addEventListener('deleted', () => navigate('#/jobs'));
  events.addEventListener('error', () => {
    if (finalSeen || FINAL.has(job.state)) events.close();
  });
  return { destroy: () => events.close() };
}

async function showResults(job, box) {
  let outputs = [];
  try {
    outputs = (await api('GET', `/v1/jobs/${job.id}/outputs`)).outputs;
  } catch (err) {
    replace(box, h('p', { class: 'error', role: 'alert' }, err.message));
    return;
  }
  const view = h('div', {});
  replace(box, view, outputsTable(job, outputs));
  if (job.state !== 'succeeded' || !VIEWS[job.kind]) return;
  try {
    const module = await VIEWS[job.kind]();
    await module.render(view, job, outputs);
  } catch (err) {
    replace(view, h('p', { class: 'error', role: 'alert' }, `The results could not be shown: ${err.message}`));
  }
}
