// forms.js — errors shown where the user acted: next to the control (aria-invalid, linked by
// aria-describedby, focused), or at the top of the form when no control matches.
import { h, newId } from './dom.js';

export function clearErrors(root) {
  for (const el of root.querySelectorAll('.error[data-generated]')) el.remove();
  for (const el of root.querySelectorAll('[aria-invalid="true"]')) {
    el.removeAttribute('aria-invalid');
    const ids = (el.getAttribute('aria-describedby') || '').split(' ').filter((id) => id && !id.startsWith('err-'));
    if (ids.length) el.setAttribute('aria-describedby', ids.join(' '));
    else el.removeAttribute('aria-describedby');
  }
}

// Shows message under control (an input, select, textarea or a drop zone's button).
export function fieldError(root, control, message) {
  const id = newId('err');
  const p = h('p', { class: 'error', id, 'data-generated': '1', role: 'alert' }, message);
  const box = control.closest('.field') || control.parentElement;
  box.append(p);
  control.setAttribute('aria-invalid', 'true');
  const described = control.getAttribute('aria-describedby');
  control.setAttribute('aria-describedby', described ? `${described} ${id}` : id);
  for (let d = control.closest('details'); d; d = d.parentElement && d.parentElement.closest('details')) d.open = true;
  control.focus();
  return p;
}

// An error with no control of its own: first thing in the form.
export function formError(root, message) {
  const p = h('p', { class: 'error', 'data-generated': '1', role: 'alert' }, message);
  root.prepend(p);
  p.setAttribute('tabindex', '-1');
  p.focus();
  return p;
}

// A labelled progress bar with its text, for uploads and jobs.
export function progressBar(label) {
  const bar = h('progress', { max: 1, value: 0, 'aria-label': label });
  const text = h('span', { class: 'progress-text' }, '');
  return {
    element: h('span', { class: 'progress' }, bar, text),
    set(fraction, note) {
      bar.value = Math.max(0, Math.min(1, fraction || 0));
      text.textContent = note !== undefined ? note : `${Math.round(bar.value * 100)} %`;
    },
  };
}
