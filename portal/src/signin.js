// signin.js — an API key in, a session out. The key goes once to POST /v1/session and is then
// wiped from the form: the browser keeps only the HttpOnly cookie, this page only the CSRF
// token, in memory.
import { api } from './api.js';
import { navigate, signedIn, takeNotice } from './app.js';
import { h, replace } from './dom.js';
import { fieldError, clearErrors } from './forms.js';

export function render(main) {
  const notice = takeNotice();
  const input = h('input', {
    id: 'key', name: 'key', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true,
    'aria-describedby': 'key-help', inputmode: 'text',
  });
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h('form', { class: 'card narrow', novalidate: true },
    h('div', { class: 'field' },
      h('label', { for: 'key' }, 'API key'),
      input,
      h('p', { id: 'key-help', class: 'help' },
        'The key you were given (gjk_…). It is exchanged for a session cookie and not kept by this page.')),
    button);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(form);
    const key = input.value.trim();
    if (!key) {
      fieldError(form, input, 'Enter your API key.');
      return;
    }
    button.disabled = true;
    button.textContent = 'Signing in…';
    try {
      const session = await api('POST', '/v1/session', { json: { key }, quiet401: true });
      input.value = '';
      signedIn(session);
      navigate('#/jobs');
    } catch (err) {
      fieldError(form, input, err.message);
      button.disabled = false;
      button.textContent = 'Sign in';
    }
  });
  replace(main,
    h('h1', {}, 'Sign in'),
    notice ? h('p', { class: 'notice', role: 'status' }, notice) : null,
    form);
  input.focus();
}
