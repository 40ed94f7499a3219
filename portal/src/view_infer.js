// view_infer.js — results of infer: a table of the images with a thumbnail of each (rendered by
// the server from the user's own upload), the score per label and the top label, grouped by
// study. Studies are numbered here: their UIDs are neither shown nor put in a URL.
import { api } from './api.js';
import { h, number, replace } from './dom.js';

function scoreCell(label, score) {
  return h('td', { class: 'score' },
    h('meter', { min: 0, max: 1, value: score, 'aria-label': `${label} score` }),
    h('span', {}, number(score, 3)));
}

export async function render(box, job) {
  const result = await api('GET', `/v1/jobs/${job.id}/outputs/result.json`);
  const labels = result.model.labels || [];
  // the stored result.json names studies by a keyed hash (study_key), never by their UID
  const study = (im) => im.study_key || im.study_instance_uid || '';
  const studyNo = new Map();
  for (const im of result.images || []) {
    const key = study(im);
    if (!studyNo.has(key)) studyNo.set(key, studyNo.size + 1);
  }
  const rows = (result.images || []).map((im) => {
    const blob = (job.inputs || {})[im.input];
    const thumb = blob
      ? h('img', { class: 'thumb', src: `/v1/blobs/${blob}/thumbnail`, alt: `Thumbnail of ${im.input}`, loading: 'lazy', width: 96, height: 96 })
      : h('span', { class: 'muted' }, 'no longer kept');
    const cells = im.status === 'ok'
      ? labels.map((l) => scoreCell(l, im.scores[l]))
      : [h('td', { colspan: labels.length, class: 'muted' }, `${im.status}: ${im.reason || ''}`)];
    return h('tr', { 'data-input': im.input },
      h('td', {}, thumb), h('th', { scope: 'row' }, im.input), h('td', {}, `Study ${studyNo.get(study(im))}`),
      h('td', {}, im.status === 'ok' ? h('strong', { class: 'top-label' }, im.top_label) : '—'), cells);
  });
  replace(box, h('section', { 'aria-labelledby': 'view-h' },
    h('h2', { id: 'view-h' }, 'Scores'),
    h('p', {}, `Model ${result.model.name} version ${result.model.version} (${result.model.output_activation}), on ${result.device || '—'}: `
      + `${result.counts.inferred} of ${result.counts.images} images inferred, ${result.counts.skipped} skipped, ${result.counts.failed} failed.`),
    result.model.name === 'chest-xray-demo'
      ? h('p', { class: 'notice' }, 'chest-xray-demo is a demonstration model trained on synthetic images. It is not a diagnostic model.')
      : null,
    h('div', { class: 'table-wrap' }, h('table', { class: 'scores' },
      h('caption', {}, 'Scores per image and label'),
      h('thead', {}, h('tr', {}, ['Image', 'Input', 'Study', 'Top label', ...labels].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows)))));
}
