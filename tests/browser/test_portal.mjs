// test_portal.mjs — the portal in Debian's chromium (Playwright), against a real gpujobd over
// HTTPS with a real PostgreSQL (serve.py): sign in with a key (a wrong one first: the server's
// message at the field), the session cookie's flags, a phantom from its preset watched to the
// end and its slice viewer moved, a reconstruction of its projections chosen from its outputs
// (the form filled in from the phantom's page) watched to the end and its viewer moved, a refused parameter's message at
// its field, a noop job submitted and cancelled with the keyboard only (sign-in too; the focus
// visible at every stop), the brkga example's plot, the infer example's scores and
// thumbnail with a DICOM written by DCMTK's img2dcm dropped beside it, an operator unloading and
// loading a model, uploading a version through the models form (a refused file's message at its
// field first) and making and revoking a key,
// sign-out ending the cookie; a first visit, sign-in and sign-out with no failed request. axe-core
// on every page; no console error or uncaught exception; a screenshot of each page in
// build/browser-screenshots.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Server, SHOTS, launch, guard, axe, shot, assert, dropFile, tabTo } from './lib.mjs';

const DONE_MS = 90000;   // a phantom or a recon of 64 x 64 x 48 voxels on CPU takes seconds

// A job page reached: its id from the URL, then its state shown as succeeded.
async function waitSucceeded(page) {
  await page.waitForURL(/#\/jobs\/[0-9a-f-]{36}$/);
  const id = page.url().split('/').pop();
  const state = page.locator('dl.facts .badge');
  await page.waitForFunction(() => {
    const b = document.querySelector('dl.facts .badge');
    return b && ['succeeded', 'failed', 'canceled'].includes(b.textContent);
  }, null, { timeout: DONE_MS });
  const final = await state.textContent();
  if (final !== 'succeeded') {
    const why = await page.locator('p.error[role=alert]').first().textContent().catch(() => '');
    throw new Error(`job ${id} ended ${final}: ${why}`);
  }
  return id;
}

// The viewer's image once a PNG is loaded: its src and natural size.
async function sliceShown(page, notSrc = null) {
  await page.waitForFunction((prev) => {
    const img = document.querySelector('img.slice');
    return img && img.complete && img.naturalWidth > 0 && img.src !== prev;
  }, notSrc, { timeout: 20000 });
  return page.evaluate(() => {
    const img = document.querySelector('img.slice');
    return { src: img.src, w: img.naturalWidth, h: img.naturalHeight };
  });
}

// The only failed load the page may log: the refused key below (POST /v1/session, 401).
// Anything else (a 401 elsewhere, a 4xx/5xx) fails.
guard.expected.push(/status of 401 .*\(https:\/\/127\.0\.0\.1:\d+\/v1\/session\)$/);

// Everything that goes wrong in a page, with nothing excused: console errors, uncaught
// exceptions, requests that fail and answers of 400 or more. The one request a page ends on
// purpose is the live list's event stream, closed when the page leaves the list.
function recordFailures(page) {
  const failures = [];
  page.on('console', (m) => { if (m.type() === 'error') failures.push(`console: ${m.text()} (${m.location().url})`); });
  page.on('pageerror', (e) => failures.push(`uncaught: ${e.message}`));
  page.on('requestfailed', (r) => {
    const why = r.failure() ? r.failure().errorText : '';
    if (!(why === 'net::ERR_ABORTED' && new URL(r.url()).pathname === '/v1/events')) failures.push(`failed: ${r.method()} ${r.url()} ${why}`);
  });
  page.on('response', (r) => { if (r.status() >= 400) failures.push(`${r.status()}: ${r.request().method()} ${r.url()}`); });
  return failures;
}

// Issue 27: a new user's first visit, a sign-in and a sign-out make no failed request and log
// no error (the page's probe of /v1/session before sign-in is a 200 saying "not signed in").
async function cleanVisit(context, srv) {
  const page = await context.newPage();
  const failures = recordFailures(page);
  const probe = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/session' && r.request().method() === 'GET');
  await page.goto(`${srv.url}/`);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  const answer = await probe;
  assert(answer.status() === 200 && (await answer.json()).signed_in === false, `the probe before sign-in: ${answer.status()}`);
  await page.getByLabel('API key').fill(srv.admin_key);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Jobs' }).waitFor();
  await page.getByText('Live: changes appear as they happen.').waitFor();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await page.reload();   // and a visit after sign-out: the cookie is gone, the probe is a 200 again
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await page.close();
  assert(failures.length === 0, `a first visit, sign-in and sign-out without a failure:\n  ${failures.join('\n  ')}`);
}

async function signIn(page, srv) {
  await page.goto(`${srv.url}/`);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await axe(page, 'sign-in');
  await shot(page, '01-signin');

  // with the keyboard only: a key the server does not know, its 401 message at the field;
  // then the right key
  const field = page.getByLabel('API key');
  await tabTo(page, field);
  await page.keyboard.type('gjk_not-a-key-at-all-0000000000000000000000000');
  await page.keyboard.press('Enter');
  const err = page.locator('.field p.error[role=alert]');
  await err.waitFor();
  assert(/not valid/.test(await err.textContent()), `the refused key's message: ${await err.textContent()}`);
  assert(await field.getAttribute('aria-invalid') === 'true', 'the key field is marked invalid');

  await tabTo(page, field);
  await page.keyboard.press('Control+A');
  await page.keyboard.type(srv.admin_key);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Jobs' }).waitFor();
}

// The key is not kept by the page; the cookie is HttpOnly, Secure, SameSite=Strict.
async function checkSession(page, context, srv) {
  const kept = await page.evaluate(() => [document.cookie, JSON.stringify(localStorage), JSON.stringify(sessionStorage)].join(' '));
  assert(!kept.includes(srv.admin_key) && !kept.includes('gj_session'), `script-readable storage: ${kept}`);
  const cookies = await context.cookies(srv.url);
  const c = cookies.find((x) => x.name === '__Host-gj_session');
  assert(c, `the session cookie: ${JSON.stringify(cookies.map((x) => x.name))}`);
  assert(c.httpOnly && c.secure && c.sameSite === 'Strict' && c.path === '/', `cookie flags ${JSON.stringify(c)}`);
  return c.value;
}

async function phantom(page, srv) {
  await page.goto(`${srv.url}/#/submit/phantom?preset=1`);
  await page.getByRole('heading', { name: 'Submit a phantom job' }).waitFor();
  await axe(page, 'submit');
  await shot(page, '03-submit-phantom');
  await page.getByRole('button', { name: 'Submit' }).click();
  const id = await waitSucceeded(page);
  const first = await sliceShown(page);
  assert(first.w === 64 && first.h === 64, `a 64 x 64 slice: ${JSON.stringify(first)}`);
  // the z slider moves the slice: a new PNG for another z
  const z = page.getByLabel('Slice (z)');
  await z.focus();
  await page.keyboard.press('End');
  const last = await sliceShown(page, first.src);
  assert(/\/slices\/47\.png/.test(last.src), `the last slice after End: ${last.src}`);
  await axe(page, 'phantom job');
  await shot(page, '04-job-phantom');
  // "Reconstruct" on the projections prefills the recon form with that output
  await page.getByRole('link', { name: 'Reconstruct projections.nrrd' }).click();
  await page.getByRole('heading', { name: 'Submit a recon job' }).waitFor();
  await page.locator('.fname', { hasText: `projections.nrrd of job ${id.slice(0, 8)}` }).waitFor();
  return id;
}

// The recon's page shows what its run recorded (Provenance, opened) and "Run again" makes a
// rerun whose page links the original and, once done, says it reproduced it.
async function runAgain(page, srv, reconId) {
  await page.goto(`${srv.url}/#/jobs/${reconId}`);
  await page.getByText('Provenance', { exact: true }).click();
  await page.getByRole('rowheader', { name: 'kind.name' }).waitFor();
  const fftw = page.getByRole('row').filter({ hasText: 'libraries.fftw' });
  assert(/fftw-3/.test(await fftw.textContent()), `the recorded FFTW: ${await fftw.textContent()}`);
  await axe(page, 'recon job, provenance open');
  await page.getByRole('button', { name: `Run again job ${reconId.slice(0, 8)} as it was` }).click();
  await page.waitForURL((u) => !u.href.endsWith(reconId));
  const again = await waitSucceeded(page);
  assert(again !== reconId, 'a new job');
  await page.getByRole('link', { name: reconId.slice(0, 8) }).waitFor();
  await page.locator('dl.facts dd', { hasText: /^identical/ }).waitFor({ timeout: DONE_MS });
}

// The recon form filled in from the phantom's page ("Reconstruct projections.nrrd": the
// phantom's projections blob and its geometry and grid) is submitted as it is; the recon
// reaches done, its input is the phantom's output, and its slice viewer moves.
async function reconFromPhantom(page, srv, phantomId) {
  await axe(page, 'submit recon');
  await shot(page, '05-submit-recon');
  const auth = { headers: { Authorization: `Bearer ${srv.admin_key}` } };
  const outs = (await (await srv.fetch(`/v1/jobs/${phantomId}/outputs`, auth)).json()).outputs;
  const proj = outs.find((o) => o.name === 'projections.nrrd');
  const png = page.waitForResponse((r) => /\/slices\/\d+\.png/.test(r.url()) && r.status() === 200, { timeout: DONE_MS });
  await page.getByRole('button', { name: 'Submit' }).click();
  const id = await waitSucceeded(page);
  const r = await png;
  assert(r.headers()['content-type'] === 'image/png', `slice content type ${r.headers()['content-type']}`);
  assert((await r.body()).subarray(1, 4).toString() === 'PNG', 'the slice is a PNG');
  const job = await (await srv.fetch(`/v1/jobs/${id}`, auth)).json();
  assert(job.kind === 'recon' && job.inputs.projections === proj.blob_id,
    `the recon reads the phantom's projections: ${JSON.stringify(job.inputs)} vs ${proj.blob_id}`);
  assert(job.params.volume.nz === 48 && job.params.geometry.angles_deg.count === 120, 'the phantom\'s grid and geometry');
  const first = await sliceShown(page);
  assert(first.w === 64 && first.h === 64, `recon slice ${JSON.stringify(first)}`);
  const z = page.getByLabel('Slice (z)');
  await z.focus();
  await page.keyboard.press('Home');
  const moved = await sliceShown(page, first.src);
  assert(/\/slices\/0\.png/.test(moved.src), `the first slice after Home: ${moved.src}`);
  await axe(page, 'recon job');
  await shot(page, '06-job-recon');
  return id;
}

// A parameter the server refuses: its message under that field (the form does not check
// ranges itself: novalidate, so the server's own words are shown).
async function badParameter(page, srv) {
  await page.goto(`${srv.url}/#/submit/noop`);
  await page.getByRole('heading', { name: 'Submit a noop job' }).waitFor();
  await page.getByText(/^Optional parameters/).click();
  const sleep = page.locator('#main').getByLabel(/^sleep_ms/);
  await sleep.fill('86400001');
  await submitRefused(page, sleep, 'params.sleep_ms');
  await axe(page, 'refused submit');
  await shot(page, '10-submit-refused');
}

// Submits the form and expects the server's 422 naming field, its message shown as the
// control's own: linked by aria-describedby, the control marked invalid.
async function submitRefused(page, control, field) {
  guard.expected.push(/status of 422 .*\/v1\/jobs\)$/);
  const refused = page.waitForResponse((r) => r.url().endsWith('/v1/jobs') && r.request().method() === 'POST');
  await page.getByRole('button', { name: 'Submit' }).click();
  const problem = await (await refused).json();
  assert(problem.status === 422 && problem.field === field, `the server refused: ${JSON.stringify(problem)}`);
  const err = page.locator('p.error[role=alert]', { hasText: problem.detail });
  await err.waitFor();
  const errId = await err.getAttribute('id');
  assert((await control.getAttribute('aria-describedby')).split(' ').includes(errId), `the message describes ${field}`);
  assert(await control.getAttribute('aria-invalid') === 'true', `${field} marked invalid`);
  guard.expected.pop();
}

// A time limit from Queue options: one past 30 days is refused under its own field; one
// second on a sixty-second noop ends the job failed, the job page saying it timed out.
async function timeLimit(page, srv) {
  await page.goto(`${srv.url}/#/jobs`);                 // a fresh form: the last step left one on this page
  await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
  await page.goto(`${srv.url}/#/submit/noop`);
  await page.getByRole('heading', { name: 'Submit a noop job' }).waitFor();
  await page.getByText(/^Optional parameters/).click();
  await page.locator('#main').getByLabel(/^sleep_ms/).fill('60000');
  await page.getByText('Queue options').click();
  const limit = page.getByLabel('Time limit (seconds)');
  await limit.fill('2592001');
  await submitRefused(page, limit, 'timeout_seconds');
  await limit.fill('1');
  await page.getByRole('button', { name: 'Submit' }).click();
  await page.waitForURL(/#\/jobs\/[0-9a-f-]{36}$/);
  await page.locator('dl.facts .badge', { hasText: 'failed' }).waitFor({ timeout: 30000 });
  await page.locator('p.error[role=alert]', { hasText: 'timed out' }).waitFor();
  const facts = await page.locator('dl.facts').innerText();
  assert(/Time limit\s+1\.0 s/.test(facts), `the facts show the limit: ${facts}`);
  await axe(page, 'timed-out job');
  await shot(page, '11-job-timed-out');
}

// With the keyboard only, from the jobs list: the Submit link in the navigation, the kind
// (type-ahead in its list), "Fill in the example" (noop: five seconds), ten minutes typed over
// its sleep (five seconds could end before Cancel is reached on a loaded machine), Submit, then
// Cancel job on the job's page; the job ends canceled. The focus is visible at every stop.
async function keyboardSubmitCancel(page, srv) {
  await page.goto(`${srv.url}/#/jobs`);
  await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
  await tabTo(page, page.locator('#nav').getByRole('link', { name: 'Submit', exact: true }), { back: true });
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: /^Submit a \w+ job$/ }).waitFor();
  await tabTo(page, page.locator('#kind'));
  await page.keyboard.press('n');
  await page.getByRole('heading', { name: 'Submit a noop job' }).waitFor();
  await tabTo(page, page.getByRole('link', { name: 'Fill in the example' }));
  await page.keyboard.press('Enter');
  await page.waitForURL(/preset=1$/);
  await page.getByRole('heading', { name: 'Submit a noop job' }).waitFor();
  const sleep = page.locator('#main').getByLabel(/^sleep_ms/);
  assert(await sleep.inputValue() === '5000', 'the example fills in five seconds');
  await tabTo(page, sleep);
  await page.keyboard.press('Control+A');
  await page.keyboard.type('600000');
  const submit = page.getByRole('button', { name: 'Submit', exact: true });
  await tabTo(page, submit);
  await shot(page, '10-submit-keyboard');
  await page.keyboard.press('Enter');
  await page.waitForURL(/#\/jobs\/[0-9a-f-]{36}$/);
  const id = page.url().split('/').pop();
  await page.locator('dl.facts .badge', { hasText: 'running' }).waitFor({ timeout: 30000 });
  await tabTo(page, page.getByRole('button', { name: /^Cancel job/ }));
  await page.keyboard.press('Enter');
  await page.locator('dl.facts .badge', { hasText: 'canceled' }).waitFor({ timeout: 30000 });
  const job = await (await srv.fetch(`/v1/jobs/${id}`, { headers: { Authorization: `Bearer ${srv.admin_key}` } })).json();
  assert(job.kind === 'noop' && job.params.sleep_ms === 600000 && job.state === 'canceled', `the job: ${JSON.stringify(job)}`);
}

// The brkga example (the thesis's 12-node network, its three XML files uploaded from the
// portal's own samples) ends with the convergence plot and the best network drawn.
async function brkga(page, srv) {
  await page.goto(`${srv.url}/#/submit/brkga?preset=1`);
  await page.getByRole('heading', { name: 'Submit a brkga job' }).waitFor();
  await page.locator('[data-input=params] li').getByText('uploaded').waitFor();
  await page.getByRole('button', { name: 'Submit' }).click();
  const id = await waitSucceeded(page);
  const plot = page.getByRole('img', { name: /^Convergence: best fitness .* after 300 generations/ });
  await plot.waitFor();
  assert(await plot.locator('canvas').count() > 0, 'uPlot drew a canvas');
  await page.locator('svg.network').waitFor();
  await axe(page, 'brkga job');
  await shot(page, '11-job-brkga');
  return id;
}

// The infer example (the portal's synthetic radiograph) plus a DICOM written by DCMTK's img2dcm,
// dropped on the form's drop zone: one job scores both; the table shows each one's thumbnail
// and scores, and the stored input is the dropped file byte for byte.
async function infer(page, srv, dir) {
  const file = await srv.dicom(join(dir, 'chest-img2dcm.dcm'));
  await page.goto(`${srv.url}/#/submit/infer?preset=1`);
  await page.getByRole('heading', { name: 'Submit a infer job' }).waitFor();
  const zone = page.locator('[data-input=dicom]');
  await zone.locator('li', { hasText: 'chest-synthetic.dcm' }).getByText('uploaded').waitFor();
  await dropFile(page, zone, file, 'chest-img2dcm.dcm', 'application/dicom');
  await zone.locator('li', { hasText: 'chest-img2dcm.dcm' }).getByText('uploaded').waitFor();
  await shot(page, '12-submit-infer');
  await page.getByRole('button', { name: 'Submit' }).click();
  const id = await waitSucceeded(page);
  const table = page.getByRole('table', { name: 'Scores per image and label' });
  await table.waitFor();
  assert(await table.locator('tbody tr').count() === 2, 'two images scored');
  const auth = { headers: { Authorization: `Bearer ${srv.admin_key}` } };
  const job = await (await srv.fetch(`/v1/jobs/${id}`, auth)).json();
  const blob = await srv.fetch(`/v1/blobs/${job.inputs['dicom.1']}`, auth);
  assert(Buffer.from(await blob.arrayBuffer()).equals(readFileSync(file)), 'the stored input equals the dropped file');
  for (const input of ['dicom', 'dicom.1']) {
    const row = table.locator(`tbody tr[data-input="${input}"]`);
    assert((await row.locator('.top-label').textContent()).length > 0, `a top label for ${input}`);
    const scores = await row.locator('meter').evaluateAll((ms) => ms.map((m) => m.value));
    assert(scores.length === 4 && scores.every((s) => s >= 0 && s <= 1), `scores of ${input}: ${scores}`);
    await page.waitForFunction((sel) => {
      const img = document.querySelector(sel);
      return img && img.complete && img.naturalWidth > 0;
    }, `tr[data-input="${input}"] img.thumb`);
  }
  await axe(page, 'infer job');
  await shot(page, '12-job-infer');
  return id;
}

// An operator unloads the demo model and loads it again; the server agrees each time.
async function models(page, srv) {
  await page.goto(`${srv.url}/#/models`);
  await page.getByRole('heading', { name: 'Models', level: 1 }).waitFor();
  const row = page.locator('tr[data-model="chest-xray-demo"][data-version="1"]');
  const state = async () => (await (await srv.fetch('/v1/models', { headers: { Authorization: `Bearer ${srv.admin_key}` } })).json())
    .models.find((m) => m.name === 'chest-xray-demo').versions.find((v) => v.version === 1).state;
  await row.getByRole('button', { name: 'Unload chest-xray-demo version 1' }).click();
  await row.locator('.badge', { hasText: 'unloaded' }).waitFor();
  assert(await state() === 'unloaded', 'the server unloaded it');
  await row.getByRole('button', { name: 'Load chest-xray-demo version 1' }).click();
  await row.locator('.badge', { hasText: /^loaded$/ }).waitFor();
  assert(await state() === 'loaded', 'the server loaded it');
  await axe(page, 'models');
  await shot(page, '13-models');
}

// An operator uploads a version through the models page's form (model.onnx and config.json
// chosen in its file inputs, multipart PUT with progress): first a file that is not ONNX, whose
// refusal by the server appears at the model.onnx field, then the demo model's own ONNX file as
// version 2, which the server stores (after a trial load) and the table lists as unloaded; its
// Load button loads it; then it is deleted again.
const DEMO = fileURLToPath(new URL('../../models/chest-xray-demo/', import.meta.url));

async function uploadModel(page, srv, notOnnx) {
  await page.goto(`${srv.url}/#/models`);
  await page.getByRole('heading', { name: 'Models', level: 1 }).waitFor();
  const form = page.locator('form', { has: page.getByRole('heading', { name: 'Upload a version' }) });
  await form.getByLabel('Model name').fill('chest-xray-demo');
  await form.getByLabel('Version').fill('2');
  await form.getByLabel('config.json').setInputFiles(join(DEMO, 'config.json'));

  guard.expected.push(/status of 422 .*\/v1\/models\/chest-xray-demo\/versions\/2\)$/);
  await form.getByLabel('model.onnx').setInputFiles({ name: 'model.onnx', mimeType: 'application/octet-stream', buffer: readFileSync(notOnnx) });
  const refused = page.waitForResponse((r) => /\/v1\/models\/chest-xray-demo\/versions\/2$/.test(r.url()));
  await form.getByRole('button', { name: 'Upload' }).click();
  const problem = await (await refused).json();
  assert(problem.status === 422 && /^model/.test(problem.field), `the server refused the non-ONNX file: ${JSON.stringify(problem)}`);
  const err = form.locator('p.error[role=alert]', { hasText: problem.detail });
  await err.waitFor();
  const errId = await err.getAttribute('id');
  assert((await form.getByLabel('model.onnx').getAttribute('aria-describedby')).split(' ').includes(errId), 'the message describes model.onnx');
  guard.expected.pop();

  await form.getByLabel('model.onnx').setInputFiles(join(DEMO, '1', 'model.onnx'));
  await form.getByRole('button', { name: 'Upload' }).click();
  await form.getByText('uploaded: Load it to serve it').waitFor({ timeout: 30000 });
  const row = page.locator('tr[data-model="chest-xray-demo"][data-version="2"]');
  await row.locator('.badge', { hasText: 'unloaded' }).waitFor();
  await row.getByRole('button', { name: 'Load chest-xray-demo version 2' }).click();
  await row.locator('.badge', { hasText: /^loaded$/ }).waitFor();
  const auth = { headers: { Authorization: `Bearer ${srv.admin_key}` } };
  const v2 = (await (await srv.fetch('/v1/models', auth)).json()).models.find((m) => m.name === 'chest-xray-demo')
    .versions.find((v) => v.version === 2);
  assert(v2 && v2.state === 'loaded', `the server has version 2 loaded: ${JSON.stringify(v2)}`);
  await axe(page, 'models upload');
  await shot(page, '13-models-upload');
  page.once('dialog', (d) => d.accept());
  await row.getByRole('button', { name: 'Delete chest-xray-demo version 2' }).click();
  await row.waitFor({ state: 'detached' });
}

// The jobs list is live (GET /v1/events over the cookie): a job submitted elsewhere (the API,
// by key) appears and reaches its end without a reload; the state filter narrows the list.
async function liveList(page, srv) {
  await page.goto(`${srv.url}/#/jobs`);
  await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
  await page.locator('#storage-use').getByText(/^Storage: \S+ \S+ \(no quota\)$/).waitFor();   // GET /v1/usage
  // no wait for the stream to open: it replays the last 30 s on connecting, so a job made
  // between the list and the stream is not missed
  const r = await srv.fetch('/v1/jobs', { method: 'POST', body: JSON.stringify({ kind: 'noop', params: { sleep_ms: 1500 } }),
    headers: { Authorization: `Bearer ${srv.admin_key}`, 'Content-Type': 'application/json' } });
  assert(r.status === 201, `submit by key: ${r.status}`);
  const id = (await r.json()).id;
  const row = page.locator(`tr[data-job="${id}"]`);
  await row.waitFor({ timeout: 20000 });
  await page.locator(`tr[data-job="${id}"][data-state="succeeded"]`).waitFor({ timeout: 30000 });
  await page.locator('#f-state').selectOption('canceled');
  await page.locator(`tr[data-job="${id}"]`).waitFor({ state: 'detached' });
  await page.locator('tr[data-job][data-state="canceled"]').first().waitFor();   // the one cancelled above
  assert(await page.locator('tr[data-job]:not([data-state="canceled"])').count() === 0, 'only canceled jobs listed');
  await shot(page, '14-jobs-live');
}

// Readable on a 320 px phone and on a 4K screen (3840 x 2160 CSS px, as a 4K monitor without
// desktop scaling): no page scrolls sideways (wide tables scroll in their own box), and no visible
// text is tiny (its computed font size; on the 4K screen the type grows with the viewport). A
// screenshot of each page at each size (size-320-*.png whole pages, size-3840-*.png the screen).
const SIZES = [
  { width: 320, height: 700, minText: 12, minRoot: 16, full: true },
  { width: 3840, height: 2160, minText: 18, minRoot: 24, full: false },
];

function sizedPages(ids) {
  return [
    ['jobs', '#/jobs', 'tr[data-job]'],
    ['submit', '#/submit/recon?preset=1', 'form button[type=submit]'],
    ['job-phantom', `#/jobs/${ids.phantom}`, 'img.slice'],
    ['job-recon', `#/jobs/${ids.recon}`, 'img.slice'],
    ['job-brkga', `#/jobs/${ids.brkga}`, 'svg.network'],
    ['job-infer', `#/jobs/${ids.infer}`, 'img.thumb'],
    ['models', '#/models', 'tr[data-model]'],
    ['operate', '#/operate', '#main h2'],
    ['keys', '#/keys', 'tr[data-key]'],
    ['api', '#/api', '#main h2'],
  ];
}

// The page's width and its smallest visible text (sr-only text and drawings excepted).
function measure() {
  let min = Infinity;
  let where = '';
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || el.closest('.sr-only, svg, script, style') || !el.checkVisibility()) continue;
    const size = parseFloat(getComputedStyle(el).fontSize);
    if (size < min) [min, where] = [size, `${el.tagName.toLowerCase()}.${el.className} "${n.textContent.trim().slice(0, 30)}"`];
  }
  return { scroll: document.documentElement.scrollWidth, view: window.innerWidth, min, where,
    root: parseFloat(getComputedStyle(document.documentElement).fontSize) };
}

async function checkSize(page, size, name) {
  const m = await page.evaluate(measure);
  assert(m.scroll <= m.view, `${name} is ${m.scroll} px wide at a ${m.view} px viewport`);
  assert(m.root >= size.minRoot, `${name} at ${size.width} px: body text ${m.root} px (at least ${size.minRoot})`);
  assert(m.min >= size.minText, `${name} at ${size.width} px: text of ${m.min} px (${m.where}), at least ${size.minText}`);
  await page.screenshot({ path: join(SHOTS, `size-${size.width}-${name}.png`), fullPage: size.full });
}

async function sizes(page, srv, ids) {
  for (const size of SIZES) {
    await page.setViewportSize({ width: size.width, height: size.height });
    for (const [name, hash, ready] of sizedPages(ids)) {
      await page.goto(`${srv.url}/${hash}`);
      await page.locator('#main h1').waitFor();
      await page.locator(ready).first().waitFor();
      await page.waitForTimeout(150);
      await checkSize(page, size, name);
    }
  }
  await page.setViewportSize({ width: 1280, height: 900 });
}

// An operator makes a user key for a new tenant (shown once), which works, then revokes it,
// after which it does not.
async function keys(page, srv) {
  await page.goto(`${srv.url}/#/keys`);
  await page.getByRole('heading', { name: 'API keys and tenants', level: 1 }).waitFor();
  await page.getByLabel('Tenant').fill('radiology');
  await page.getByRole('button', { name: 'Create the key' }).click();
  const key = await page.locator('#k-new').inputValue({ timeout: 20000 });
  assert(/^gjk_/.test(key), `the new key is shown: ${key.slice(0, 4)}`);
  const me = await srv.fetch('/v1/session', { headers: { Authorization: `Bearer ${key}` } });
  assert(me.status === 200 && (await me.json()).tenant === 'radiology', `the new key works: ${me.status}`);
  const row = page.locator('tr[data-key]', { has: page.getByRole('rowheader', { name: 'radiology' }) });
  page.once('dialog', (d) => d.accept());
  await row.getByRole('button', { name: /^Revoke key .* of radiology$/ }).click();
  await row.getByText(/^revoked /).waitFor();
  const after = await srv.fetch('/v1/session', { headers: { Authorization: `Bearer ${key}` } });
  assert(after.status === 401, `the revoked key answers ${after.status}`);
  const stored = page.locator('tr[data-tenant]', { has: page.getByRole('rowheader', { name: 'radiology' }) });
  assert(/^0 B$/.test(await stored.locator('td').first().innerText()), 'the new tenant stores nothing');
  await axe(page, 'keys');
  await shot(page, '08-keys');
}

async function otherPages(page, srv) {
  for (const [hash, heading, name] of [['#/operate', /GPUs|Operations/, '07-operate'], ['#/api', /API reference|gpujobd API/, '09-api']]) {
    await page.goto(`${srv.url}/${hash}`);
    await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
    await axe(page, hash);
    await shot(page, name);
  }
}

async function signOut(page, srv, cookie) {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  const after = await srv.fetch('/v1/session', { headers: { Cookie: `__Host-gj_session=${cookie}` } });
  assert(after.status === 401, `the cookie after sign-out answers ${after.status}`);
  // the sign-in page at both sizes too
  for (const size of SIZES) {
    await page.setViewportSize({ width: size.width, height: size.height });
    await checkSize(page, size, 'signin');
  }
  await page.setViewportSize({ width: 1280, height: 900 });
}

// Runs one step and says how long it took (the whole test should stay well under 2 minutes).
async function step(name, fn) {
  const t0 = Date.now();
  const out = await fn();
  console.log(`ok: ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  return out;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'gj-browser-'));
  const srv = await Server.start();
  const { context, dataDir } = await launch();
  const page = await context.newPage();
  const g = guard(page);
  try {
    await step('first visit, sign in, sign out: no failed request', () => cleanVisit(context, srv));
    await step('sign in', () => signIn(page, srv));
    const cookie = await checkSession(page, context, srv);
    const live = await srv.fetch('/v1/session', { headers: { Cookie: `__Host-gj_session=${cookie}` } });
    assert(live.status === 200, `the cookie works outside the browser too: ${live.status}`);
    await axe(page, 'jobs');
    await shot(page, '02-jobs');
    const phantomId = await step('phantom', () => phantom(page, srv));
    const reconId = await step('recon of its projections', () => reconFromPhantom(page, srv, phantomId));
    await step('provenance and run again', () => runAgain(page, srv, reconId));
    await step('bad parameter', () => badParameter(page, srv));
    await step('time limit', () => timeLimit(page, srv));
    await step('keyboard: submit and cancel', () => keyboardSubmitCancel(page, srv));
    const brkgaId = await step('brkga', () => brkga(page, srv));
    const inferId = await step('infer', () => infer(page, srv, dir));
    await step('models', () => models(page, srv));
    await step('model upload', () => uploadModel(page, srv, join(dir, 'chest-img2dcm.dcm')));
    await step('live list', () => liveList(page, srv));
    await step('320 px and 4K', () => sizes(page, srv, { phantom: phantomId, recon: reconId, brkga: brkgaId, infer: inferId }));
    await step('keys', () => keys(page, srv));
    await step('other pages', () => otherPages(page, srv));
    await step('sign out', () => signOut(page, srv, cookie));
    g.check('the portal');
    console.log('ok: the portal in chromium');
  } catch (e) {
    await shot(page, 'zz-failure').catch(() => {});
    console.error(`server log:\n${(await srv.log().catch(() => '')).slice(-4000)}`);
    throw e;
  } finally {
    await context.close();
    await srv.stop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
