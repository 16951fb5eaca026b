// The REST client and the console session. The session token lives in sessionStorage (this tab
// only; gone when the tab closes), is sent as `Api-Key`, and never goes into a URL or a log.

import { parseTs } from './time.js';

const SESSION = 'waymark.console.session';
const FLASH = 'waymark.console.flash';

export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.field = field || null;
  }
}

export const session = {
  get() {
    try {
      const s = JSON.parse(sessionStorage.getItem(SESSION) || 'null');
      if (s && s.token && (!s.expires_at || parseTs(s.expires_at).getTime() > Date.now())) return s;
    } catch (_) { /* unreadable: no session */ }
    return null;
  },
  set(s) { sessionStorage.setItem(SESSION, JSON.stringify(s)); },
  clear() { sessionStorage.removeItem(SESSION); },
};

// A message for the sign-in page after a reload (why the session ended).
export const flash = {
  set(text) { sessionStorage.setItem(FLASH, text); },
  take() {
    const t = sessionStorage.getItem(FLASH);
    sessionStorage.removeItem(FLASH);
    return t;
  },
};

let expired = () => {};
// Called once with the server's message when a request answers 401 (expired or revoked).
export function onExpired(fn) { expired = fn; }

const sleep = (ms, signal) => new Promise((resolve, reject) => {
  const t = setTimeout(resolve, ms);
  if (signal) signal.addEventListener('abort', () => { clearTimeout(t); reject(new DOMException('aborted', 'AbortError')); }, { once: true });
});

function buildUrl(path, query) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v != null && v !== '') url.searchParams.set(k, String(v));
  }
  return url;
}

// api('GET', '/v1/api/user/', {query, body, signal, key, bearer}) → the envelope's `data` (v2's
// envelope, which has none, whole). `bearer`: the token goes as `Authorization: Bearer`, as the
// v2 trips API takes it. Transient failures are retried with backoff: network errors and 5xx for
// reads and idempotent writes; 503/429 (the server's "try again") for every method. Errors carry
// the server's message (v1's `msg`, v2's `description`).
export async function api(method, path, opts = {}) {
  const { query, body, signal, key, bearer, retries = 3 } = opts;
  const token = key || (session.get() || {}).token;
  const headers = { Accept: 'application/json' };
  if (token && bearer) headers.Authorization = `Bearer ${token}`;
  else if (token) headers['Api-Key'] = token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const idempotent = method === 'GET' || method === 'PUT' || method === 'DELETE';
  const url = buildUrl(path, query);
  for (let attempt = 0; ; attempt++) {
    const wait = Math.min(8000, 500 * 2 ** attempt) * (0.8 + Math.random() * 0.4);
    let res;
    try {
      res = await fetch(url, {
        method, headers, signal, cache: 'no-store', credentials: 'omit',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      if (idempotent && attempt < retries) { await sleep(wait, signal); continue; }
      throw new ApiError(0, navigator.onLine === false
        ? 'you are offline; it will work again when the network is back'
        : 'the server could not be reached');
    }
    let json = null;
    try { json = await res.json(); } catch (_) { /* not JSON */ }
    if (res.ok) return json && 'data' in json ? json.data : json;
    const transient = res.status === 503 || res.status === 429 || (idempotent && res.status >= 500);
    if (transient && attempt < retries) {
      const after = Number(res.headers.get('Retry-After'));
      await sleep(after > 0 ? Math.min(after * 1000, 10000) : wait, signal);
      continue;
    }
    const msg = (json && (json.msg || json.description || json.message)) || `HTTP ${res.status}`;
    const field = json && json.errors && json.errors[0] ? json.errors[0].field : null;
    const err = new ApiError(res.status, msg, field);
    if (res.status === 401 && !key) expired(msg);
    throw err;
  }
}

// Every page of a paged list (bounded), for small lists the console shows whole.
export async function allPages(path, query, field, max = 20, signal) {
  const out = [];
  for (let page = 1; page <= max; page++) {
    const d = await api('GET', path, { query: { ...query, page_number: page }, signal });
    out.push(...(d[field] || []));
    if (!d.next_page) break;
  }
  return out;
}
