// operate.js — for operators: the GPUs (slots, reserved memory, running jobs from /v1/gpus;
// utilization and used memory from NVML through /metrics, absent without a GPU or NVML), the
// CPU slots, the queue depth and jobs by state (/metrics), refreshed every 5 s; and charts of
// the last hour (operate_charts.js) from the same polls.
import { api } from './api.js';
import { bytes, h, replace, shortId, table } from './dom.js';
import { parseMetrics, record } from './metrics_history.js';
import { makeCharts } from './operate_charts.js';

function metric(ms, name, labels = {}) {
  const m = ms.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v));
  return m ? m.value : null;
}

function gpuTable(gpus, ms, running) {
  if (!gpus.gpus.length) {
    return h('p', {}, 'No GPU: jobs run on the CPU slots.');
  }
  const nvml = ms.some((m) => m.name === 'gpujobd_nv_gpu_utilization');
  const rows = gpus.gpus.map((g) => {
    const util = metric(ms, 'gpujobd_nv_gpu_utilization', { gpu: String(g.index) });
    const used = metric(ms, 'gpujobd_nv_gpu_memory_used_bytes', { gpu: String(g.index) });
    const jobs = running.filter((j) => j.device === `gpu:${g.index}`);
    return h('tr', {},
      h('th', { scope: 'row' }, `${g.index}${g.name ? ` — ${g.name}` : ''}${g.simulated ? ' (simulated)' : ''}`),
      h('td', {}, util === null ? 'not reported' : `${Math.round(util * 100)} %`),
      h('td', {}, used === null ? 'not reported' : `${bytes(used)} of ${bytes(g.memory_total_bytes)}`),
      h('td', {}, `${bytes(g.memory_reserved_bytes)} reserved, ${bytes(g.memory_free_bytes)} free`),
      h('td', {}, `${g.running_tasks} of ${g.slots}`),
      h('td', {}, String(g.completed_tasks)),
      h('td', {}, jobs.length ? jobs.map((j) => h('a', { href: `#/jobs/${j.id}`, class: 'chip' }, `${j.kind} ${shortId(j.id)}`)) : '—'));
  });
  return [
    nvml ? null : h('p', { class: 'notice' }, 'NVML is not available here: GPU utilization and used memory are not reported (only the service’s own reservations are).'),
    table('GPUs', ['GPU', 'Utilization (NVML)', 'Memory used (NVML)', 'Reserved by jobs', 'Running / slots', 'Completed', 'Your running jobs'], rows),
  ];
}

async function load(box, charts) {
  const [gpus, text, running] = await Promise.all([
    api('GET', '/v1/gpus'),
    api('GET', '/metrics'),
    api('GET', '/v1/jobs?state=running&limit=200').then((r) => r.jobs),
  ]);
  const ms = parseMetrics(text);
  record(ms);
  charts.update();
  const states = ['queued', 'running', 'succeeded', 'failed', 'canceled'];
  const byState = states.map((s) => ms.filter((m) => m.name === 'gpujobd_jobs' && m.labels.state === s).reduce((a, m) => a + m.value, 0));
  replace(box,
    h('section', { 'aria-labelledby': 'q-h' }, h('h2', { id: 'q-h' }, 'Queue'),
      h('dl', { class: 'facts' },
        h('dt', {}, 'Waiting to be claimed'), h('dd', { id: 'queue-depth' }, String(metric(ms, 'gpujobd_queue_depth') ?? '—')),
        states.map((s, i) => [h('dt', {}, `Jobs ${s} (all tenants, sub-tasks included)`), h('dd', {}, String(byState[i]))]),
        h('dt', {}, 'Placement'), h('dd', {}, gpus.policy))),
    h('section', { 'aria-labelledby': 'g-h' }, h('h2', { id: 'g-h' }, 'GPUs'), gpuTable(gpus, ms, running)),
    h('section', { 'aria-labelledby': 'c-h' }, h('h2', { id: 'c-h' }, 'CPU'),
      h('p', {}, `${gpus.cpu.running_tasks} of ${gpus.cpu.slots} CPU slots busy; ${gpus.cpu.completed_tasks} jobs completed on them by this process.`)),
    h('p', { class: 'muted small' }, `Updated ${new Date().toLocaleTimeString()}; every 5 s.`));
}

export async function render(main) {
  const box = h('div', { 'aria-live': 'off' });
  const problem = h('p', { class: 'error', role: 'alert', hidden: true });
  const charts = makeCharts();
  replace(main, h('h1', {}, 'Operations'), problem, box, charts.el);
  const tick = () => load(box, charts).then(() => { problem.hidden = true; }, (e) => { problem.textContent = e.message; problem.hidden = false; });
  await tick();
  const timer = window.setInterval(tick, 5000);
  return { destroy: () => window.clearInterval(timer) };
}
