// test_operations.mjs — the Operations page's charts in Debian's chromium (Playwright), against
// a real gpujobd over HTTPS on two simulated GPUs (serve.py): while jobs run, uploads arrive and
// a model answers inferences, each chart of the last hour draws data points and shows its
// current figures as numbers, its drawing has a text alternative, axe-core finds no serious
// violation, and the page fits 320 px and 3840 px without scrolling sideways. No console error.
import { Server, launch, guard, axe, shot, assert } from './lib.mjs';

const TITLES = ['Queue depth by kind', 'Jobs started and finished', 'Wait time', 'Run time', 'GPU memory',
  'GPU utilization', 'Slots busy', 'Inference rate', 'Inference latency', 'API requests', 'Upload bytes'];

guard.expected.push(/status of 401 .*\(https:\/\/127\.0\.0\.1:\d+\/v1\/session\)$/);   // the sign-in probe

function inference() {
  const n = 256 * 256;
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = Math.sin(i / 97);
  const head = Buffer.from(JSON.stringify({ inputs: [{ name: 'image', shape: [1, 1, 256, 256], datatype: 'FP32',
    parameters: { binary_data_size: n * 4 } }] }));
  return { body: Buffer.concat([head, Buffer.from(x.buffer)]), length: head.length };
}

// Jobs, an upload and inferences, as the page polls: every chart gets something to draw.
async function activity(srv) {
  const auth = { Authorization: `Bearer ${srv.admin_key}` };
  const json = { ...auth, 'Content-Type': 'application/json' };
  for (let i = 0; i < 3; i++) {
    const r = await srv.fetch('/v1/jobs', { method: 'POST', headers: json,
      body: JSON.stringify({ kind: 'noop', params: { sleep_ms: 1500 + 500 * i, device_bytes: 1 << 28 } }) });
    assert(r.status === 201, `a noop job: ${r.status}`);
  }
  const up = await srv.fetch('/v1/blobs', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/octet-stream' },
    body: Buffer.alloc(256 * 1024, 7) });
  assert(up.status === 201, `an upload: ${up.status}`);
  const { body, length } = inference();
  const r = await srv.fetch('/v2/models/chest-xray-demo/infer', { method: 'POST', body,
    headers: { ...auth, 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(length) } });
  assert(r.status === 200, `an inference: ${r.status}`);
}

async function signIn(page, srv) {
  await page.goto(`${srv.url}/`);
  await page.getByLabel('API key').fill(srv.admin_key);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Jobs' }).waitFor();
}

// Per chart: its title, points drawn, its numbers, and its drawing's text alternative.
function readCharts() {
  return [...document.querySelectorAll('figure.chart')].map((f) => ({
    title: f.querySelector('figcaption strong').textContent,
    points: Number(f.dataset.points),
    canvas: !!f.querySelector('canvas'),
    numbers: [...f.querySelectorAll('dl.now dd')].map((d) => d.textContent),
    label: f.querySelector('.plot[role=img]').getAttribute('aria-label'),
  }));
}

async function main() {
  process.env.GPUJOBD_FAKE_GPUS = '2:16G';
  const srv = await Server.start(['--cpu-workers', '1']);
  const { context } = await launch();
  const page = await context.newPage();
  const g = guard(page);
  try {
    await signIn(page, srv);
    await page.goto(`${srv.url}/#/operate`);
    await page.getByRole('heading', { name: 'The last hour' }).waitFor();
    for (let i = 0; i < 4; i++) {      // the page polls every 5 s: four rounds of work between polls
      await activity(srv);
      await page.waitForTimeout(5000);
    }
    const charts = await page.evaluate(readCharts);
    assert(charts.map((c) => c.title).join('|') === TITLES.join('|'), `the charts: ${charts.map((c) => c.title)}`);
    for (const c of charts) {
      assert(c.canvas && c.points >= 3, `${c.title} draws points: ${JSON.stringify(c)}`);
      assert(c.numbers.length && c.numbers.some((n) => /\d/.test(n)), `${c.title} shows its figures: ${c.numbers}`);
      assert(/now: .*\d/.test(c.label) && !/no data/.test(c.label), `${c.title}'s text alternative: ${c.label}`);
    }
    const gpus = charts.find((c) => c.title === 'GPU memory').numbers.length;
    assert(gpus >= 2, `one GPU memory series a simulated GPU: ${gpus}`);
    await axe(page, 'operations with charts');
    await shot(page, '10-operate-charts');
    for (const [width, height] of [[320, 800], [3840, 2160]]) {
      await page.setViewportSize({ width, height });
      await page.waitForTimeout(300);
      const over = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
      assert(over <= 0, `at ${width} px the page scrolls sideways by ${over} px`);
      await axe(page, `operations at ${width} px`);
      await shot(page, `10-operate-charts-${width}`);
    }
    g.check('operations');
    console.log('ok: the Operations charts in chromium');
  } catch (e) {
    await shot(page, 'zz-operate-failure').catch(() => {});
    throw e;
  } finally {
    await context.close();
    await srv.stop();
  }
}

await main();
