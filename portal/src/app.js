// app.js — the portal's shell: who is signed in, the navigation, and the router (hash routes,
// so that the server serves one page at / and a reload keeps the place).
//
//   #/signin  #/jobs[?state=&kind=]  #/jobs/ID  #/submit[/KIND][?preset=1|from=JOB&output=NAME]
//   #/operate  #/models  #/keys (admins)  #/api
import { api, setCsrf, whenSignedOut } from './api.js';
import { h, replace } from './dom.js';

const pages = {
  signin: () => import('./signin.js'),
  jobs: () => import('./jobs.js'),
  job: () => import('./job.js'),
  submit: () => import('./submit.js'),
  operate: () => import('./operate.js'),
  models: () => import('./models.js'),
  keys: () => import('./keys.js'),
  api: () => import('./reference.js'),
};

const NAV = [
  ['#/jobs', 'Jobs', false],
  ['#/submit', 'Submit', false],
  ['#/operate', 'Operations', true],
  ['#/models', 'Models', true],
  ['#/keys', 'API keys', true],
  ['#/api', 'API reference', false],
];

const state = { who: null, current: null, signedOutNotice: '' };

export function who() {
  return state.who;
}

export function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

// A message for everyone: polite live region.
export function announce(text) {
  const el = document.getElementById('status');
  el.textContent = '';
  window.setTimeout(() => { el.textContent = text; }, 30);
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, query = ''] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(query) };
}

function renderNav() {
  const nav = document.getElementById('nav');
  const user = document.getElementById('user');
  if (!state.who) {
    replace(nav);
    replace(user);
    return;
  }
  const here = `#/${parseHash().parts[0] || 'jobs'}`;
  const links = NAV.filter(([, , admin]) => !admin || state.who.role === 'admin').map(([href, label]) =>
    h('li', {}, h('a', { href, 'aria-current': href === here ? 'page' : null }, label)));
  replace(nav, h('ul', {}, links));
  replace(user,
    h('span', { class: 'who' }, `${state.who.tenant} · ${state.who.role}`),
    h('button', { type: 'button', class: 'secondary', onclick: signOut }, 'Sign out'));
}

async function signOut() {
  try {
    await api('DELETE', '/v1/session', { quiet401: true });
  } catch {
    // already over: nothing to end
  }
  signedOut('You are signed out.');
}

export function signedOut(notice) {
  if (!state.who && parseHash().parts[0] === 'signin') return;
  state.who = null;
  setCsrf(null);
  state.signedOutNotice = notice || 'Your session has ended: sign in again.';
  renderNav();
  navigate('#/signin');
}

export function signedIn(session) {
  state.who = session;
  setCsrf(session.csrf_token);
  renderNav();
}

export function takeNotice() {
  const n = state.signedOutNotice;
  state.signedOutNotice = '';
  return n;
}

async function route() {
  const { parts, query } = parseHash();
  let name = parts[0] || 'jobs';
  if (name === 'jobs' && parts[1]) name = 'job';
  if (!pages[name]) name = 'jobs';
  if (!state.who && name !== 'signin') {
    navigate('#/signin');
    return;
  }
  if (state.who && name === 'signin') {
    navigate('#/jobs');
    return;
  }
  if (state.current && state.current.destroy) state.current.destroy();
  state.current = null;
  renderNav();
  const main = document.getElementById('main');
  replace(main, h('p', { class: 'muted' }, 'Loading…'));
  const module = await pages[name]();
  const page = await module.render(main, { parts, query });
  state.current = page || null;
  const heading = main.querySelector('h1');
  document.title = heading ? `${heading.textContent} — gpujobd` : 'gpujobd';
  if (heading && !main.contains(document.activeElement)) {
    heading.setAttribute('tabindex', '-1');
    heading.focus({ preventScroll: true });
  }
}

async function boot() {
  whenSignedOut(() => signedOut());
  // the skip link moves focus without touching the route in the hash
  document.getElementById('skip').addEventListener('click', (e) => {
    e.preventDefault();
    document.getElementById('main').focus();
  });
  try {
    // 200 {"signed_in": false} for a visitor without a cookie: no failed request
    const s = await api('GET', '/v1/session', { quiet401: true });
    if (s && s.signed_in) signedIn(s);
    else state.who = null;
  } catch {
    state.who = null;
  }
  window.addEventListener('hashchange', route);
  route();
}

boot();
