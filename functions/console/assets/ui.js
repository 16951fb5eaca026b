// DOM helpers shared by the views. Everything from the server is set as text, never as HTML,
// and no element gets a style attribute (the page's CSP forbids inline styles).

export const $ = (id) => document.getElementById(id);

// el('li', {class: 'x', text: 'y', onclick: fn, dataset: {id: 1}}, child, ...)
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'text') node.textContent = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else if (k === 'style') throw new Error('no inline styles');
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

// A definition list from [label, value] pairs (value: text or a node).
export function facts(dl, rows) {
  clear(dl);
  for (const [k, v] of rows) {
    if (v == null) continue;
    dl.append(el('div', {}, el('dt', { text: k }), el('dd', {}, v)));
  }
}

// The stream's messages and other page-wide happenings: bus.on('location.updated', fn).
const handlers = new Map();
export const bus = {
  on(type, fn) {
    if (!handlers.has(type)) handlers.set(type, new Set());
    handlers.get(type).add(fn);
  },
  emit(type, payload) {
    for (const key of [type, '*']) {
      for (const fn of handlers.get(key) || []) {
        try { fn(payload, type); } catch (e) { console.error(e); }
      }
    }
  },
};

// Polite status for screen readers (cleared first so the same text is read again).
let statusTimer = 0;
export function announce(text) {
  const s = $('status');
  s.textContent = '';
  clearTimeout(statusTimer);
  statusTimer = setTimeout(() => { s.textContent = text; }, 30);
}

// The one visible error banner (role=alert); `retry` adds a Retry button.
let retryFn = null;
export function showError(text, retry) {
  $('alert-text').textContent = text;
  retryFn = retry || null;
  $('alert-retry').hidden = !retry;
  $('alert').hidden = false;
}
export function clearError() {
  $('alert').hidden = true;
  $('alert-text').textContent = '';
  retryFn = null;
}
export function initAlerts() {
  $('alert-close').addEventListener('click', clearError);
  $('alert-retry').addEventListener('click', () => {
    const fn = retryFn;
    clearError();
    if (fn) fn();
  });
}

// Reports a failed request in the banner, unless it was aborted (a newer one replaced it).
export function failed(what, err, retry) {
  if (err && err.name === 'AbortError') return;
  if (err && err.status === 401) return; // the session handler takes over
  showError(`${what} failed: ${err && err.message ? err.message : err}`, retry);
}

export function debounce(fn, ms) {
  let t = 0;
  const d = (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
  d.cancel = () => clearTimeout(t);
  return d;
}

// A destructive button asks once more in place (no window.confirm: it blocks the page).
export function confirmClick(button, action) {
  const label = button.textContent;
  let armed = 0;
  button.addEventListener('click', async () => {
    if (!armed) {
      button.textContent = `Confirm: ${label.toLowerCase()}`;
      armed = setTimeout(() => { armed = 0; button.textContent = label; }, 6000);
      return;
    }
    clearTimeout(armed);
    armed = 0;
    button.textContent = label;
    await action();
  });
}

// Runs an async action with its button disabled, so a double click sends one request.
export async function busy(button, fn) {
  if (button) button.disabled = true;
  try { return await fn(); } finally { if (button) button.disabled = false; }
}

// Pager buttons: prev/next for {prev_page, next_page, pages}.
export function pager(node, page, data, go) {
  clear(node);
  if (!data || !data.pages || data.pages <= 1) return;
  node.append(
    el('button', { type: 'button', class: 'btn btn-light', disabled: !data.prev_page, onclick: () => go(data.prev_page) }, 'Previous page'),
    el('span', { class: 'hint' }, ` Page ${page} of ${data.pages} `),
    el('button', { type: 'button', class: 'btn btn-light', disabled: !data.next_page, onclick: () => go(data.next_page) }, 'Next page'),
  );
}

export function shortId(id) {
  return id ? `${String(id).slice(0, 6)}…${String(id).slice(-4)}` : '';
}

// A fence's colour as CSS, only when it is the hex the API keeps (3 or 6 digits).
export function fenceColor(code) {
  return /^[0-9a-f]{3}([0-9a-f]{3})?$/i.test(code || '') ? `#${code}` : '#2b6cb0';
}

export async function copyText(text, input) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (_) {
    if (input) { input.select(); return document.execCommand && document.execCommand('copy'); }
    return false;
  }
}

// The notice over the map, shared by its layers (users: "zoom in", fences: "within 10 km").
const notices = {};
export function mapNotice(source, text) {
  notices[source] = text || '';
  const all = Object.values(notices).filter(Boolean).join(' ');
  const n = $('map-notice');
  if (n.textContent !== all) n.textContent = all;
  n.hidden = !all;
}
