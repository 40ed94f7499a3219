// lib.mjs — what the browser tests share: a real gpujobd (serve.py: PostgreSQL and gpujobd over
// HTTPS, through tests/integration/harness.py), Debian's chromium driven by Playwright, axe-core
// on a page, screenshots into the build directory, and a guard that fails on any console
// error or uncaught exception.
import { spawn } from 'node:child_process';
import { request as httpsRequest } from 'node:https';
import { createInterface } from 'node:readline';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const CHROMIUM = process.env.GJ_CHROMIUM || '/usr/bin/chromium';
const AXE = readFileSync(join(here, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
export const SHOTS = join(process.env.GJ_BUILD_ROOT || join(here, '..', '..', 'build'), 'browser-screenshots');

export class Server {
  static async start(args = []) {
    const s = new Server();
    s.proc = spawn('/usr/bin/python3', [join(here, 'serve.py'), ...args], { stdio: ['pipe', 'pipe', 'inherit'], env: process.env });
    s.lines = createInterface({ input: s.proc.stdout })[Symbol.asyncIterator]();
    const first = await s.lines.next();
    if (first.done) throw new Error('serve.py exited before the server was ready');
    Object.assign(s, JSON.parse(first.value));
    return s;
  }

  async command(obj) {
    this.proc.stdin.write(`${JSON.stringify(obj)}\n`);
    const r = await this.lines.next();
    const out = JSON.parse(r.value);
    if (out.error) throw new Error(out.error);
    return out;
  }

  async sql(q) {
    return (await this.command({ sql: q })).rows;
  }

  // A DICOM file written by DCMTK (img2dcm, dcmodify) at path.
  async dicom(path) {
    return (await this.command({ dicom: path })).path;
  }

  async log() {
    return (await this.command({ log: true })).log;
  }

  async stop() {
    this.proc.stdin.end();
    await new Promise((resolve) => this.proc.on('exit', resolve));
  }

  // A request outside the browser, over HTTPS checked against the server's own certificate
  // (self-signed, in its data directory): {status, headers, arrayBuffer(), json()}.
  fetch(path, { method = 'GET', headers = {}, body = null } = {}) {
    const ca = readFileSync(join(this.data_dir, 'tls', 'cert.pem'));
    return new Promise((resolve, reject) => {
      const req = httpsRequest(this.url + path, { method, headers, ca }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const buf = Buffer.concat(chunks);
          resolve({ status: res.statusCode, headers: res.headers, arrayBuffer: async () => buf,
            json: async () => JSON.parse(buf.toString()) });
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  }
}

export async function launch() {
  const dataDir = join(process.env.TMPDIR || '/tmp', `gj-chromium-${process.pid}-${Date.now()}`);
  const context = await chromium.launchPersistentContext(dataDir, {
    executablePath: CHROMIUM,
    headless: true,
    ignoreHTTPSErrors: true,
    viewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  context.setDefaultTimeout(20000);
  return { context, dataDir };
}

// Collects console errors and page errors of a page; check() throws when there were any.
export function guard(page) {
  const errors = [];
  page.on('console', (m) => {
    const text = `${m.text()} (${m.location().url})`;
    if (m.type() === 'error' && !guard.expected.some((re) => re.test(text))) errors.push(`console: ${text}`);
  });
  page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
  return {
    errors,
    check(where) {
      if (errors.length) throw new Error(`${where}: errors in the page:\n  ${errors.join('\n  ')}`);
    },
  };
}
// Responses the tests cause on purpose (a refused key, the probe of a page not signed in yet)
// are logged by Chromium as "Failed to load resource (URL)": the test names them.
guard.expected = [];

// axe-core on the page as it is now: fails on serious or critical violations.
export async function axe(page, where) {
  await page.evaluate(AXE);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
  });
  const bad = result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  if (bad.length) throw new Error(`${where}: axe-core found ${JSON.stringify(bad, null, 1)}`);
  return result;
}

export async function shot(page, name) {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

export function assert(cond, what) {
  if (!cond) throw new Error(`assertion failed: ${what}`);
}

// Drops a file from disk on an element as a person dragging it from their file manager would:
// dragenter, dragover and drop events carrying a DataTransfer with the file.
export async function dropFile(page, target, path, name, type) {
  const b64 = readFileSync(path).toString('base64');
  const dt = await page.evaluateHandle(({ b64, name, type }) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const d = new DataTransfer();
    d.items.add(new File([bytes], name, { type }));
    return d;
  }, { b64, name, type });
  for (const ev of ['dragenter', 'dragover', 'drop']) await target.dispatchEvent(ev, { dataTransfer: dt });
  await dt.dispose();
}

// What has the keyboard focus, and whether a person can see it: an outline (2 px or more) or a
// box shadow on the element, which has a size on the screen.
function focusShown() {
  const el = document.activeElement;
  if (!el || el === document.body) return { what: 'nothing (the page itself)', shown: false };
  const cs = getComputedStyle(el);
  const r = el.getBoundingClientRect();
  const ring = (cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2) || cs.boxShadow !== 'none';
  const label = (el.getAttribute('aria-label') || el.textContent || el.id || '').trim().slice(0, 40);
  return { what: `${el.tagName.toLowerCase()} "${label}"`, shown: ring && r.width > 0 && r.height > 0 };
}

// Presses Tab (Shift+Tab with back) until target has the focus; every element the focus passes
// on the way must show it. Past the page's last control the focus leaves the page (to the
// browser's own controls) once, and the next press starts again from the top. Returns the
// number of presses.
export async function tabTo(page, target, { back = false, max = 60 } = {}) {
  let wrapped = false;
  for (let n = 0; n <= max; n++) {
    if (n > 0) await page.keyboard.press(back ? 'Shift+Tab' : 'Tab');
    if (n === 0 && !(await target.evaluate((el) => el === document.activeElement).catch(() => false))) continue;
    const f = await page.evaluate(focusShown);
    if (!f.shown && f.what.startsWith('nothing') && !wrapped && n > 0) {
      wrapped = true;
      continue;
    }
    if (!f.shown) throw new Error(`keyboard focus not visible on ${f.what} after ${n} presses (${page.url()})`);
    if (await target.evaluate((el) => el === document.activeElement).catch(() => false)) return n;
  }
  throw new Error(`${max} presses of Tab did not reach ${target}`);
}
