// keys.js — for operators: API keys and their tenants (GET /v1/api-keys: never a key, never its
// hash), a new key for a tenant (made if new; the key is shown once, here), and revocation
// (which also ends the sessions signed in with that key); what each tenant stores (GET /v1/tenants).
import { api } from './api.js';
import { announce } from './app.js';
import { bytes, h, replace, table, when } from './dom.js';
import { clearErrors, fieldError, formError } from './forms.js';

function createForm(refresh) {
  const tenant = h('input', { id: 'k-tenant', type: 'text', required: true, maxlength: 200, spellcheck: 'false' });
  const role = h('select', { id: 'k-role' }, h('option', { value: 'user' }, 'user'), h('option', { value: 'admin' }, 'admin'));
  const label = h('input', { id: 'k-label', type: 'text', maxlength: 200 });
  const shown = h('div', { 'aria-live': 'polite' });
  const form = h('form', { class: 'card', novalidate: true, 'aria-labelledby': 'new-h' },
    h('h2', { id: 'new-h' }, 'New key'),
    h('div', { class: 'field' }, h('label', { for: 'k-tenant' }, 'Tenant'), tenant),
    h('div', { class: 'field' }, h('label', { for: 'k-role' }, 'Role'), role),
    h('div', { class: 'field' }, h('label', { for: 'k-label' }, 'Label (optional)'), label),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Create the key')), shown);
  const fields = { tenant, role, label };
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(form);
    replace(shown);
    try {
      const body = { tenant: tenant.value, role: role.value };
      if (label.value) body.label = label.value;
      const k = await api('POST', '/v1/api-keys', { json: body });
      const keyBox = h('input', { id: 'k-new', type: 'text', readonly: true, value: k.key, class: 'mono', 'aria-describedby': 'k-new-help' });
      replace(shown, h('div', { class: 'notice' },
        h('label', { for: 'k-new' }, `The new key of ${k.tenant} (${k.role})`), keyBox,
        h('p', { id: 'k-new-help' }, 'It is shown this once: give it to its owner now. The service keeps only its hash.')));
      keyBox.select();
      announce('Key created');
      await refresh();
    } catch (err) {
      if (fields[err.field]) fieldError(form, fields[err.field], err.message);
      else formError(form, err.message);
    }
  });
  return form;
}

export async function render(main) {
  const list = h('div', {});
  const storage = h('div', {});
  const problem = h('p', { class: 'error', role: 'alert', hidden: true, tabindex: '-1' });
  const refresh = async () => {
    const keys = (await api('GET', '/v1/api-keys')).keys;
    const rows = keys.map((k) => {
      const btn = h('button', { type: 'button', class: 'danger' }, 'Revoke', h('span', { class: 'sr-only' }, ` key ${k.prefix}… of ${k.tenant}`));
      btn.addEventListener('click', async () => {
        if (!window.confirm(`Revoke key ${k.prefix}… of ${k.tenant}? Its sessions end too.`)) return;
        btn.disabled = true;
        try {
          await api('DELETE', `/v1/api-keys/${k.id}`);
          announce('Key revoked');
          await refresh();
        } catch (err) {
          btn.disabled = false;
          problem.textContent = err.message;
          problem.hidden = false;
          problem.focus();
        }
      });
      return h('tr', { 'data-key': k.id },
        h('th', { scope: 'row' }, k.tenant), h('td', {}, k.role), h('td', {}, k.label || '—'),
        h('td', { class: 'mono' }, `${k.prefix}…`), h('td', {}, when(k.created_at)),
        h('td', {}, k.revoked_at ? `revoked ${when(k.revoked_at)}` : 'active'),
        h('td', { class: 'actions' }, k.revoked_at ? null : btn));
    });
    replace(list, table('API keys by tenant', ['Tenant', 'Role', 'Label', 'Key starts', 'Created', 'State', 'Actions'], rows));
    const tenants = (await api('GET', '/v1/tenants')).tenants;
    replace(storage, table('Storage by tenant',
      ['Tenant', 'Stored', 'Quota'], tenants.map((t) => h('tr', { 'data-tenant': t.id },
        h('th', { scope: 'row' }, t.name), h('td', {}, bytes(t.storage.used_bytes)),
        h('td', {}, t.storage.quota_bytes ? `${bytes(t.storage.quota_bytes)}${t.storage.quota === 'tenant' ? ' (own)' : ''}` : 'none')))));
  };
  replace(main, h('h1', {}, 'API keys and tenants'), problem, list, createForm(refresh), storage);
  await refresh();
}
