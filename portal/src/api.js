// api.js — the portal's one way to the API: fetch with the session cookie (sent by the browser,
// unreadable by this script) and the CSRF token (kept in this module's memory only, never in
// storage), problem+json turned into ApiError, uploads with progress.

let csrfToken = null;
let onSignedOut = null;

export function setCsrf(token) {
  csrfToken = token || null;
}

// Called (once per failure) when the server says the session is over.
export function whenSignedOut(fn) {
  onSignedOut = fn;
}

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.field = (problem && problem.field) || null;
    this.problem = problem || {};
  }
}

async function problemOf(resp) {
  let body = null;
  try {
    const text = await resp.text();
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  return new ApiError(resp.status, body || { detail: `${resp.status} ${resp.statusText}` });
}

function unsafe(method) {
  return !['GET', 'HEAD', 'OPTIONS'].includes(method);
}

// api('POST', '/v1/jobs', {json: {...}}) -> parsed JSON (or text, or null for 204).
// options: json, body, headers, raw (the Response itself), signal, quiet401 (no sign-out on 401).
export async function api(method, path, options = {}) {
  const headers = { ...(options.headers || {}) };
  let body = options.body;
  if (options.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(options.json);
  }
  if (unsafe(method) && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  let resp;
  try {
    resp = await fetch(path, { method, headers, body, credentials: 'same-origin', signal: options.signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { detail: `the server could not be reached (${e.message})` });
  }
  if (resp.status === 401 && !options.quiet401 && onSignedOut) onSignedOut();
  if (!resp.ok) throw await problemOf(resp);
  if (options.raw) return resp;
  if (resp.status === 204 || resp.status === 304) return null;
  const type = resp.headers.get('Content-Type') || '';
  return type.includes('json') ? resp.json() : resp.text();
}

// A request whose body is sent with XMLHttpRequest, for its upload progress events.
// onProgress(loaded, total). Returns {promise, abort}.
export function send(method, path, body, { headers = {}, onProgress } = {}) {
  const xhr = new XMLHttpRequest();
  const promise = new Promise((resolve, reject) => {
    xhr.open(method, path);
    for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v);
    if (csrfToken) xhr.setRequestHeader('X-CSRF-Token', csrfToken);
    xhr.responseType = 'text';
    if (onProgress) {
      xhr.upload.addEventListener('progress', (e) => onProgress(e.loaded, e.lengthComputable ? e.total : 0));
    }
    xhr.addEventListener('load', () => {
      let parsed = null;
      try {
        parsed = xhr.responseText ? JSON.parse(xhr.responseText) : null;
      } catch {
        parsed = null;
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve(parsed);
        return;
      }
      if (xhr.status === 401 && onSignedOut) onSignedOut();
      reject(new ApiError(xhr.status, parsed || { detail: `${xhr.status} ${xhr.statusText}` }));
    });
    xhr.addEventListener('error', () => reject(new ApiError(0, { detail: 'the upload was cut off: the server could not be reached' })));
    xhr.addEventListener('abort', () => reject(new ApiError(0, { detail: 'the upload was stopped' })));
    xhr.send(body);
  });
  return { promise, abort: () => xhr.abort() };
}

// Streams a file (or Blob) into POST /v1/blobs: {promise -> blob JSON, abort}.
export function uploadBlob(file, onProgress) {
  const type = file.type && /^[\x21-\x7e]+\/[\x21-\x7e]+$/.test(file.type) ? file.type : 'application/octet-stream';
  return send('POST', '/v1/blobs', file, { headers: { 'Content-Type': type }, onProgress });
}
