// operate_charts.js — the Operations page's charts of the last hour, from the polls of
// /metrics this tab has kept (metrics_history.js): the queue, jobs started and finished, wait
// and run time percentiles, each GPU's memory and utilization, busy slots, inference rate and
// latency per model, API requests (HTTP and gRPC), upload bytes. Process counters are the answering replica's: with api and
// worker replicas apart, the fleet's are in the Grafana dashboard (deploy/grafana).
import { chart } from './charts.js';
import { bytes, duration, h, number } from './dom.js';
import { gauges, history, quantiles, rates } from './metrics_history.js';

// Per-sample Maps -> [{label, values}] (one series per key, in key order), values scaled.
function series(rows, label = (k) => k, scale = 1) {
  const keys = [...new Set(rows.flatMap((r) => [...r.keys()]))].sort();
  return keys.map((k) => ({ label: label(k), values: rows.map((r) => (r.get(k) ?? null) === null ? null : r.get(k) * scale) }));
}

const nonEmpty = (list) => list.filter((s) => s.values.some((v) => v !== null && v !== 0));
const perMinute = (name) => rates(name).map((r) => new Map([...r].map(([k, v]) => [k, v === null ? null : v * 60])));

function percentiles(name, by, what) {
  return [...series(quantiles(name, 0.5, by), (k) => `p50 ${what(k)}`),
    ...series(quantiles(name, 0.99, by), (k) => `p99 ${what(k)}`)].filter((s) => s.values.some((v) => v !== null));
}

const count = (v) => number(v, 2);
const fine = (v) => number(v, 4);
const CHARTS = [
  { title: 'Queue depth by kind', caption: 'jobs queued, waiting for a slot (all tenants)', format: count,
    data: () => {
      const all = series(gauges('gpujobd_jobs', 'kind', { state: 'queued' }));
      const busy = nonEmpty(all);
      return busy.length ? busy : series(gauges('gpujobd_queue_depth'), () => 'all kinds');
    } },
  { title: 'Jobs started and finished', caption: 'per minute, by this replica', format: count, tick: fine,
    data: () => [...series(perMinute('gpujobd_job_wait_seconds_count'), () => 'started'),
      ...series(perMinute('gpujobd_job_duration_seconds_count'), () => 'finished')] },
  { title: 'Wait time', caption: 'queued to started, p50 and p99 over 5 minutes, by kind', format: duration,
    data: () => percentiles('gpujobd_job_wait_seconds', 'kind', (k) => k) },
  { title: 'Run time', caption: 'of finished jobs, p50 and p99 over 5 minutes, by kind', format: duration,
    data: () => percentiles('gpujobd_job_duration_seconds', 'kind', (k) => k) },
  { title: 'GPU memory', caption: 'reserved by jobs and models, and used as the driver reports it', format: bytes,
    data: () => [...series(gauges('gpujobd_gpu_reserved_bytes', 'gpu'), (k) => `GPU ${k} reserved`),
      ...series(gauges('gpujobd_nv_gpu_memory_used_bytes', 'gpu'), (k) => `GPU ${k} used`)] },
  { title: 'GPU utilization', caption: 'as the driver reports it (simulated GPUs: 0)', format: (v) => `${number(v * 100, 1)} %`,
    range: [0, 1],
    data: () => series(gauges('gpujobd_nv_gpu_utilization', 'gpu'), (k) => `GPU ${k}`) },
  { title: 'Slots busy', caption: 'jobs running on each GPU and on the CPU slots', format: count,
    data: () => [...series(gauges('gpujobd_gpu_running_tasks', 'gpu'), (k) => `GPU ${k}`),
      ...series(gauges('gpujobd_cpu_running_tasks'), () => 'CPU')] },
  { title: 'Inference rate', caption: 'requests answered per second, by model (/v2)', format: count, tick: fine,
    data: () => series(rates('gpujobd_inference_request_success', 'model')) },
  { title: 'Inference latency', caption: 'enqueue to answer, p50 and p99 over 5 minutes, by model', format: duration,
    data: () => percentiles('gpujobd_inference_request_latency_seconds', 'model', (k) => k) },
  { title: 'API requests', caption: 'requests answered per second: HTTP by method, and gRPC (Triton\'s protocol)',
    format: count, tick: fine,
    data: () => series(rates('gpujobd_http_requests_total', 'method'), (k) => (k === 'GRPC' ? 'gRPC' : `HTTP ${k}`)) },
  { title: 'Upload bytes', caption: 'request bodies received per second', format: (v) => `${bytes(v)}/s`,
    data: () => series(rates('gpujobd_http_received_bytes_total'), () => 'received') },
];

export function makeCharts() {
  const made = CHARTS.map((c) => ({ ...c, view: chart(c) }));
  const el = h('section', { 'aria-labelledby': 'charts-h' },
    h('h2', { id: 'charts-h' }, 'The last hour'),
    h('p', { class: 'muted small' }, 'Kept by this browser tab from the polls of this page, every 5 s.'),
    h('div', { class: 'charts' }, made.map((c) => c.view.el)));
  function update() {
    const times = history().map((s) => s.t / 1000);
    for (const c of made) c.view.update(times, c.data());
  }
  return { el, update };
}
