// The Webhooks view: endpoints, their delivery log (status, attempts, responses), replay, test
// and secret rotation. After an action the log is read again twice, a moment later (bounded, not
// a timer that runs on).

import { api } from './api.js';
import { $, el, clear, facts, failed, announce, busy, confirmClick, pager, shortId } from './ui.js';
import { timeEl } from './time.js';

let current = null; // the endpoint shown
let page = 1;
let followUps = [];
let listCtrl = null;

export function initWebhooks() {
  $('hook-form').addEventListener('submit', (e) => { e.preventDefault(); create(); });
  $('hook-test').addEventListener('click', (e) => busy(e.currentTarget, test));
  $('hook-toggle').addEventListener('click', (e) => busy(e.currentTarget, toggle));
  $('hook-rotate').addEventListener('click', (e) => busy(e.currentTarget, rotate));
  confirmClick($('hook-delete'), remove);
  $('hook-status').addEventListener('change', () => loadDeliveries(1));
  $('hook-refresh').addEventListener('click', (e) => busy(e.currentTarget, () => loadDeliveries(page)));
}

export function showWebhooks(rest) {
  loadList();
  if (rest[0] && (!current || current.webhook_id !== rest[0])) select(rest[0]);
}
export function hideWebhooks() {
  followUps.forEach(clearTimeout);
  followUps = [];
}

async function loadList() {
  if (listCtrl) listCtrl.abort();
  const ctrl = new AbortController();
  listCtrl = ctrl;
  try {
    const d = await api('GET', '/v1/api/webhooks/', { signal: ctrl.signal });
    const list = clear($('hook-list'));
    for (const w of d.webhooks || []) {
      const state = w.enabled ? (w.failing_since ? 'failing' : 'enabled') : 'disabled';
      list.append(el('li', {}, el('button', {
        type: 'button', class: 'item', dataset: { webhookId: w.webhook_id },
        'aria-current': current && current.webhook_id === w.webhook_id ? 'true' : null,
        onclick: () => { location.hash = `#webhooks/${w.webhook_id}`; },
      }, el('strong', {}, w.description || w.url), el('span', { class: `pill pill-${state}` }, state),
      el('span', { class: 'hint' }, ` · ${w.url} · ${w.events.join(', ')}`))));
    }
    if (!(d.webhooks || []).length) list.append(el('li', { class: 'hint' }, 'No webhook endpoints yet.'));
  } catch (e) {
    failed('Loading webhooks', e, loadList);
  }
}

async function create() {
  const msg = $('hook-form-msg');
  msg.textContent = '';
  const url = $('hf-url').value.trim();
  const events = $('hf-events').value.split(',').map((x) => x.trim()).filter(Boolean);
  if (!url) { msg.textContent = 'URL: give the endpoint\'s address.'; return; }
  const body = { url, events: events.length ? events : ['*'] };
  if ($('hf-desc').value.trim()) body.description = $('hf-desc').value.trim();
  try {
    const d = await api('POST', '/v1/api/webhooks/', { body });
    $('hf-url').value = '';
    $('hf-desc').value = '';
    $('hook-new').open = false;
    announce('Endpoint added.');
    location.hash = `#webhooks/${d.webhook_id}`;
    await select(d.webhook_id);
    showSecret(d.secret, 'Signing secret (shown once: keep it)');
    loadList();
  } catch (e) {
    msg.textContent = `Adding failed: ${e.message}`;
  }
}

function showSecret(secret, text) {
  $('hook-secret-box').hidden = !secret;
  $('hook-secret').value = secret || '';
  $('hook-secret-box').querySelector('label').textContent = text;
}

export async function select(id) {
  try {
    const w = await api('GET', '/v1/api/webhooks/', { query: { webhook_id: id } });
    const changed = !current || current.webhook_id !== id;
    current = w;
    $('hook-detail').hidden = false;
    $('hook-h').textContent = w.description || `Endpoint ${shortId(w.webhook_id)}`;
    const state = w.enabled ? (w.failing_since ? 'failing' : 'enabled') : 'disabled';
    $('hook-state').textContent = state;
    $('hook-state').className = `pill pill-${state}`;
    $('hook-toggle').textContent = w.enabled ? 'Disable' : 'Enable';
    facts($('hook-facts'), [
      ['URL', w.url],
      ['Events', w.events.join(', ')],
      ['Created', timeEl(w.created_at)],
      ['Failing since', w.failing_since ? timeEl(w.failing_since) : null],
      ['Disabled because', w.disabled_reason || null],
    ]);
    if (changed) { showSecret(null, ''); page = 1; }
    for (const b of $('hook-list').querySelectorAll('button[data-webhook-id]')) {
      b.setAttribute('aria-current', b.dataset.webhookId === id ? 'true' : 'false');
    }
    await loadDeliveries(page);
  } catch (e) {
    failed('Loading the endpoint', e, () => select(id));
  }
}

async function loadDeliveries(p) {
  if (!current) return;
  const id = current.webhook_id;
  try {
    const d = await api('GET', '/v1/api/webhooks/deliveries/', {
      query: { webhook_id: id, status: $('hook-status').value, page_number: p },
    });
    if (!current || current.webhook_id !== id) return;
    page = p;
    const list = clear($('deliveries'));
    for (const dl of d.deliveries || []) list.append(deliveryItem(dl));
    if (!(d.deliveries || []).length) list.append(el('li', { class: 'hint' }, 'No deliveries.'));
    pager($('delivery-pager'), p, d, loadDeliveries);
  } catch (e) {
    failed('Loading deliveries', e, () => loadDeliveries(p));
  }
}

function deliveryItem(dl) {
  const attempts = dl.attempts || [];
  const last = attempts[attempts.length - 1];
  const outcome = last ? (last.status_code ? `HTTP ${last.status_code}` : last.error || 'no answer') : 'not tried yet';
  const details = el('details', {}, el('summary', {}, `${attempts.length} attempt${attempts.length === 1 ? '' : 's'}`),
    el('ol', { class: 'plain-list' }, attempts.map((a) => el('li', {}, timeEl(a.at),
      ` · ${a.status_code ? `HTTP ${a.status_code}` : a.error || 'no answer'} · ${a.latency_ms != null ? `${a.latency_ms} ms` : ''}`,
      a.response ? el('pre', { class: 'response' }, a.response) : null))));
  const replay = el('button', {
    type: 'button', class: 'btn', 'aria-label': `Replay ${dl.event_type} ${shortId(dl.event_id)}`,
    onclick: (e) => busy(e.currentTarget, () => replayEvents([dl.event_id])),
  }, 'Replay');
  return el('li', { class: 'delivery', dataset: { eventId: dl.event_id, status: dl.status } },
    el('div', {}, el('strong', {}, dl.event_type), ' ', el('span', { class: `pill pill-${dl.status}` }, dl.status),
      el('span', { class: 'hint' }, ` · event ${shortId(dl.event_id)} · last: ${outcome}`),
      dl.next_attempt_at && dl.status === 'pending' ? el('span', { class: 'hint' }, ' · next try ', timeEl(dl.next_attempt_at)) : null),
    details, replay);
}

// Reads the log again a little later, twice, to show the outcome of what was just queued.
function follow() {
  followUps.forEach(clearTimeout);
  followUps = [1500, 5000].map((ms) => setTimeout(() => loadDeliveries(page), ms));
}

async function replayEvents(ids) {
  if (!current) return;
  try {
    const d = await api('POST', '/v1/api/webhooks/replay/', { body: { webhook_id: current.webhook_id, event_ids: ids } });
    announce(`${d && d.queued != null ? d.queued : ids.length} delivery queued again.`);
    await loadDeliveries(page);
    follow();
  } catch (e) {
    failed('Replaying', e);
  }
}

async function test() {
  try {
    await api('POST', '/v1/api/webhooks/test/', { body: { webhook_id: current.webhook_id } });
    announce('Test event queued.');
    await loadDeliveries(page);
    follow();
  } catch (e) {
    failed('Sending a test event', e);
  }
}

async function toggle() {
  try {
    await api('PUT', '/v1/api/webhooks/', { body: { webhook_id: current.webhook_id, enabled: !current.enabled } });
    announce(current.enabled ? 'Endpoint disabled.' : 'Endpoint enabled.');
    await select(current.webhook_id);
    loadList();
  } catch (e) {
    failed('Changing the endpoint', e);
  }
}

async function rotate() {
  try {
    const d = await api('POST', '/v1/api/webhooks/rotate-secret/', { body: { webhook_id: current.webhook_id } });
    showSecret(d.secret, 'New signing secret (shown once; the old one signs for 24 h more)');
    announce('Secret rotated: the new one is shown once.');
  } catch (e) {
    failed('Rotating the secret', e);
  }
}

async function remove() {
  try {
    await api('DELETE', '/v1/api/webhooks/', { query: { webhook_id: current.webhook_id } });
    current = null;
    $('hook-detail').hidden = true;
    announce('Endpoint deleted.');
    history.replaceState(null, '', '#webhooks');
    loadList();
    $('hooks-h').focus();
  } catch (e) {
    failed('Deleting the endpoint', e);
  }
}
