// The Trips view: the list with filters, a trip's route (origin, stops, destination; a v2 trip's
// planned stops, reached or not), its events, distance, duration and ETA, its controls and its
// tracking link. v1/v3 and v2 trips are two lists of the API; a trip is shown in one shape (v1's
// field names, see fromV2). A trip's stream messages refresh what is shown (no timer).

import { api } from './api.js';
import { $, el, clear, facts, bus, failed, announce, busy, confirmClick, pager, shortId, debounce, copyText } from './ui.js';
import { fmtTime, timeEl, fmtDistance, fmtDuration } from './time.js';

let map;
let layer;
let page = 1;
let current = null; // the trip shown
let listCtrl = null;
let visible = false;
const apiOf = new Map(); // trip id → 'v1' or 'v2', as a list showed it
let v2Cursors = [null]; // v2 pages by cursor: page n starts after v2Cursors[n - 1]

// A v2 trip in the fields the view reads (v1's names), with its planned stops.
function fromV2(t) {
  const s = t.trip_state;
  return {
    api: 'v2', id: t.id, name: t.name, description: t.description, user_id: t.user ? t.user.id : null,
    is_started: s !== 'created', is_paused: s === 'paused', is_ended: s === 'ended',
    created_at: t.created_at, trip_started_at: t.started_at, trip_ended_at: t.ended_at,
    distance_covered: t.total_distance, duration: t.total_duration, eta: t.eta,
    events: t.events || [], stops: t.stops || [], trip_tracking_url: t.trip_tracking_url,
  };
}

export function tripState(t) {
  if (t.is_ended) return 'ended';
  if (t.is_paused) return 'paused';
  if (t.is_started) return 'started';
  return 'created';
}
const STATE_TEXT = { created: 'Created', started: 'Under way', paused: 'Paused', ended: 'Ended' };
const ALLOWED = {
  created: ['start'], started: ['pause', 'end'], paused: ['resume', 'end'], ended: [],
};

export function initTrips(m) {
  map = m;
  layer = L.featureGroup();
  $('trip-filter').addEventListener('submit', (e) => { e.preventDefault(); v2Cursors = [null]; loadList(1); });
  // v2's list has no creation days to filter by: their fields go while it is chosen (also when
  // the browser restored the choice on a reload).
  const kind = () => {
    const v2 = $('tf-api').value === 'v2';
    for (const id of ['tf-from', 'tf-to']) $(id).closest('.field').hidden = v2;
  };
  kind();
  $('tf-api').addEventListener('change', () => {
    kind();
    v2Cursors = [null];
    if (visible) loadList(1);
  });
  for (const b of $('trip-controls').querySelectorAll('button[data-action]')) {
    b.addEventListener('click', () => busy(b, () => control(b.dataset.action)));
  }
  $('trip-copy').addEventListener('click', async () => {
    const ok = await copyText($('trip-link').value, $('trip-link'));
    announce(ok ? 'Tracking link copied.' : 'Copying failed: select the link and copy it.');
  });
  confirmClick($('trip-revoke'), revoke);
  const refresh = debounce(() => { if (current) select(current.id, true); }, 300);
  const refreshList = debounce(() => { if (visible) loadList(page); }, 1000);
  bus.on('*', (msg, type) => {
    if (!type.startsWith('trip.')) return;
    const d = msg.data || {};
    const id = d.trip_id || (d.trip && (d.trip.id || d.trip.trip_id));
    if (current && id === current.id) refresh();
    refreshList();
  });
  bus.on('network.online', () => { if (visible) { loadList(page); if (current) select(current.id, true); } });
}

export function showTrips(rest) {
  visible = true;
  layer.addTo(map);
  loadList(page);
  if (rest[0] && (!current || current.id !== rest[0])) select(rest[0]);
}

export function hideTrips() {
  visible = false;
  map.removeLayer(layer);
}

async function loadList(p) {
  if (listCtrl) listCtrl.abort();
  const ctrl = new AbortController();
  listCtrl = ctrl;
  const state = $('tf-state').value;
  const v2 = $('tf-api').value === 'v2';
  try {
    const d = v2 ? await listV2(p, state, ctrl.signal) : await listV1(p, state, ctrl.signal);
    page = p;
    const list = clear($('trip-list'));
    // The API filters by user, dates and type; started against paused is told here.
    const trips = d.trips.filter((t) => !state || tripState(t) === state);
    for (const t of trips) {
      apiOf.set(t.id, t.api);
      const s = tripState(t);
      const stops = t.api === 'v2' ? ` · ${t.stops.length} planned stop${t.stops.length === 1 ? '' : 's'}` : '';
      list.append(el('li', {}, el('button', {
        type: 'button', class: 'item', dataset: { tripId: t.id, api: t.api },
        'aria-current': current && current.id === t.id ? 'true' : null,
        onclick: () => { location.hash = `#trips/${t.id}`; },
      }, el('strong', {}, t.name ? `Trip ${t.name}` : `Trip ${shortId(t.id)}`), el('span', { class: `pill pill-${s}` }, STATE_TEXT[s]),
      el('span', { class: 'hint' }, ` · user ${t.user_id ? shortId(t.user_id) : 'none'}${stops} · created ${fmtTime(t.created_at)}`))));
    }
    if (!trips.length) list.append(el('li', { class: 'hint' }, state && d.trips.length ? 'No trips in this state on this page.' : 'No trips.'));
    if (v2) cursorPager(p, d); else pager($('trip-pager'), p, d, loadList);
  } catch (e) {
    if (e.status === 400) { failed('Filtering trips', e); return; }
    failed('Loading trips', e, () => loadList(p));
  }
}

async function listV1(p, state, signal) {
  const query = {
    user_id: $('tf-user').value.trim(), start_date: $('tf-from').value, end_date: $('tf-to').value, page_number: p,
  };
  // The API's `trip_type` narrows the list itself (upcoming, active: started or paused,
  // completed); started and paused are told apart on the page.
  const TYPE = { created: 'upcoming', started: 'active', paused: 'active', ended: 'completed' };
  if (state) query.trip_type = TYPE[state];
  if (query.end_date && !query.start_date) query.start_date = query.end_date;
  if (query.end_date && query.end_date === query.start_date) delete query.end_date; // one day: start alone
  const d = await api('GET', '/v1/api/trips/', { query, signal });
  return { ...d, trips: (d.trips || []).map((t) => ({ ...t, api: 'v1' })) };
}

// v2 pages by cursor (`starting_after` the last trip of the page before), newest first. Under
// way is v2's started or resumed: that state is told on the page, the others by `trip_state`.
async function listV2(p, state, signal) {
  const query = { user_id: $('tf-user').value.trim(), limit: 10, starting_after: v2Cursors[p - 1] };
  if (state && state !== 'started') query.trip_state = state;
  const d = await api('GET', '/v2/trips/', { query, signal, bearer: true });
  const trips = (d.trips || []).map(fromV2);
  v2Cursors = v2Cursors.slice(0, p);
  if (d.has_more && trips.length) v2Cursors.push(trips[trips.length - 1].id);
  return { trips, has_more: !!d.has_more };
}

function cursorPager(p, d) {
  const node = clear($('trip-pager'));
  if (p === 1 && !d.has_more) return;
  node.append(
    el('button', { type: 'button', class: 'btn btn-light', disabled: p === 1, onclick: () => loadList(p - 1) }, 'Previous page'),
    el('span', { class: 'hint' }, ` Page ${p} `),
    el('button', { type: 'button', class: 'btn btn-light', disabled: !d.has_more, onclick: () => loadList(p + 1) }, 'Next page'),
  );
}

// Only the latest read of a trip is shown: one begun before a change (a stream message's
// refresh racing a revoke) must not bring back what the change replaced.
let selectSeq = 0;

// A trip and its summary (null when it has none) from the API it belongs to.
async function read(kind, id) {
  if (kind === 'v2') {
    const path = `/v2/trips/${encodeURIComponent(id)}/`;
    const [d, s] = await Promise.all([
      api('GET', path, { bearer: true }),
      api('GET', `${path}summary/`, { bearer: true }).catch(() => null),
    ]);
    return [fromV2(d.trip), s && s.summary];
  }
  const [td, summary] = await Promise.all([
    api('GET', '/v1/api/trips/', { query: { trip_id: id } }),
    api('GET', '/v1/api/trips/summary/', { query: { trip_id: id } }).catch(() => null),
  ]);
  const t = Array.isArray(td) ? td[0] : (td.trips || [])[0];
  if (!t) throw new Error('not found');
  return [{ ...t, api: 'v1' }, summary];
}

export async function select(id, keepView) {
  const seq = ++selectSeq;
  try {
    // A trip no list has shown (a link, an event) is looked for in v1/v3, then in v2.
    let got;
    try {
      got = await read(apiOf.get(id) || 'v1', id);
    } catch (e) {
      if (e.status !== 404 || apiOf.has(id)) throw e;
      got = await read('v2', id);
    }
    if (seq !== selectSeq) return;
    const [t, summary] = got;
    apiOf.set(id, t.api);
    current = t;
    render(t, summary, keepView);
  } catch (e) {
    failed('Loading the trip', e, () => select(id, keepView));
  }
}

function render(t, summary, keepView) {
  const s = tripState(t);
  $('trip-detail').hidden = false;
  $('trip-h').textContent = t.name ? `Trip ${t.name}` : `Trip ${shortId(t.id)}`;
  const pill = $('trip-state');
  pill.textContent = STATE_TEXT[s];
  pill.className = `pill pill-${s}`;
  pill.dataset.state = s;
  for (const b of $('trip-controls').querySelectorAll('button[data-action]')) {
    b.disabled = !ALLOWED[s].includes(b.dataset.action) || (b.dataset.action === 'start' && !t.user_id);
  }
  const distance = summary ? summary.distance_covered : t.distance_covered;
  const duration = summary ? summary.duration : t.duration;
  const eta = t.eta ? el('span', {}, timeEl(t.eta.arrival_at), ` (${fmtDistance(t.eta.distance_remaining)} to go)`) : 'none';
  facts($('trip-facts'), [
    ['Trip ID', t.id],
    ['Name', t.api === 'v2' ? t.name || '–' : null],
    ['Description', t.description || null],
    ['User', t.user_id ? el('a', { href: `#map/user/${t.user_id}` }, `User ${shortId(t.user_id)} on the map`) : 'none'],
    ['Created', timeEl(t.created_at)],
    ['Started', t.trip_started_at ? timeEl(t.trip_started_at) : '–'],
    ['Ended', t.trip_ended_at ? timeEl(t.trip_ended_at) : '–'],
    ['Distance', fmtDistance(distance || 0)],
    ['Duration', fmtDuration(duration || 0)],
    ['ETA', eta],
  ]);
  $('trip-link').value = t.trip_tracking_url || '';

  const places = clear($('trip-places'));
  const all = [...(t.origins || []).map((p) => ['Origin', p]), ...(t.destinations || []).map((p, i) => [`Destination ${i + 1}`, p])];
  for (const [name, p] of all) {
    const c = p.coordinates.coordinates;
    places.append(el('li', {}, el('strong', {}, name), ` ${c[1].toFixed(5)}, ${c[0].toFixed(5)} · `,
      p.reached ? `reached${p.left ? ', left' : ''}` : 'not reached yet'));
  }
  $('trip-places-box').hidden = t.api === 'v2' && !all.length;
  listStops(t.stops || []);
  const events = clear($('trip-events'));
  for (const ev of (t.events || []).slice().reverse()) {
    events.append(el('li', {}, el('strong', {}, ev.event_type), ' · ', timeEl(ev.recorded_at || ev.created_at)));
  }
  if (!(t.events || []).length) events.append(el('li', { class: 'hint' }, 'No events yet.'));
  for (const b of $('trip-list').querySelectorAll('button[data-trip-id]')) {
    b.setAttribute('aria-current', b.dataset.tripId === t.id ? 'true' : 'false');
  }
  drawRoute(t, summary, keepView);
}

function drawRoute(t, summary, keepView) {
  layer.clearLayers();
  const route = summary && summary.route ? summary.route : [];
  if (route.length > 1) {
    L.polyline(route.map((p) => [p.coordinates.coordinates[1], p.coordinates.coordinates[0]]), { className: 'wm-route', weight: 4 }).addTo(layer);
  }
  route.filter((p) => p.activity === 'STOP').forEach((p, i) => {
    const c = p.coordinates.coordinates;
    L.circleMarker([c[1], c[0]], { radius: 7, className: 'wm-stop' }).bindTooltip(`Stop ${i + 1}, ${fmtTime(p.recorded_at)}`).addTo(layer);
  });
  (t.origins || []).forEach((p) => {
    const c = p.coordinates.coordinates;
    L.circleMarker([c[1], c[0]], { radius: 9, className: 'wm-origin' }).bindTooltip('Origin', { permanent: true, direction: 'top', className: 'wm-place-label' }).addTo(layer);
  });
  (t.destinations || []).forEach((p, i) => {
    const c = p.coordinates.coordinates;
    L.circleMarker([c[1], c[0]], { radius: 9, className: 'wm-destination' }).bindTooltip(`Destination ${i + 1}`, { permanent: true, direction: 'top', className: 'wm-place-label' }).addTo(layer);
  });
  // v2's planned stops: the area that reaches each, and a marker numbered in order whose look
  // says planned, arrived or departed (the text list says the same, listStops).
  (t.stops || []).forEach((st, i) => {
    const c = st.geometry.coordinates;
    const state = stopState(st);
    L.circle([c[1], c[0]], { radius: st.geometry_radius || 100, className: 'wm-stop-area', weight: 1, fillOpacity: 0.08, interactive: false }).addTo(layer);
    // The label as a text node: names come from the API, and a string tooltip is set as HTML.
    const label = document.createTextNode(`${i + 1}. ${st.name || 'Stop'}${state === 'planned' ? '' : ` (${state})`}`);
    L.circleMarker([c[1], c[0]], { radius: 9, className: `wm-planned wm-planned-${state}` })
      .bindTooltip(label, { permanent: true, direction: 'top', className: 'wm-place-label' }).addTo(layer);
  });
  if (!keepView && layer.getLayers().length) map.fitBounds(layer.getBounds(), { padding: [40, 40], maxZoom: 16 });
}

// A planned stop's progress: 'planned', 'arrived' or 'departed'.
function stopState(st) {
  if (st.departed_at) return 'departed';
  return st.arrived_at ? 'arrived' : 'planned';
}

// The planned stops as text, in order (the map's markers for screen readers and keyboards).
function listStops(stops) {
  const list = clear($('trip-stops'));
  $('trip-stops-box').hidden = !stops.length;
  $('trip-stops-count').textContent = stops.length ? `(${stops.length})` : '';
  stops.forEach((st, i) => {
    const c = st.geometry.coordinates;
    const state = stopState(st);
    const progress = state === 'planned' ? ['not reached yet']
      : state === 'arrived' ? ['arrived ', timeEl(st.arrived_at), ', not departed yet']
        : ['arrived ', timeEl(st.arrived_at), ', departed ', timeEl(st.departed_at)];
    list.append(el('li', { dataset: { stopId: st.id, state } },
      el('strong', {}, `Stop ${i + 1}: ${st.name || 'unnamed'}`),
      st.address ? ` · ${st.address}` : '',
      ` · ${c[1].toFixed(5)}, ${c[0].toFixed(5)}, within ${fmtDistance(st.geometry_radius || 100)} · `,
      ...progress));
  });
}

async function control(action) {
  if (!current) return;
  try {
    if (current.api === 'v2') {
      await api('POST', `/v2/trips/${encodeURIComponent(current.id)}/controls/`, { body: { action }, bearer: true });
    } else {
      await api('POST', '/v1/api/trips/controls/', { body: { trip_id: current.id, action } });
    }
    announce(`Trip ${action === 'end' ? 'ended' : action === 'start' ? 'started' : action === 'pause' ? 'paused' : 'resumed'}.`);
    await select(current.id, true);
    loadList(page);
  } catch (e) {
    failed(`The trip's ${action}`, e);
  }
}

async function revoke() {
  if (!current) return;
  try {
    const d = await api('POST', '/v1/api/trips/revoke-link/', { body: { trip_id: current.id } });
    selectSeq += 1; // a read still in flight began before the revoke
    $('trip-link').value = d.trip_tracking_url;
    current.trip_tracking_url = d.trip_tracking_url;
    announce('The old tracking link no longer works; a new one is shown.');
  } catch (e) {
    failed('Revoking the link', e);
  }
}
