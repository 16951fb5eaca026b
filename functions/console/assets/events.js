// The Events view: a live feed of geofence and trip events from the stream, today's earlier
// geofence events from the events API below them, filtered by type, user or fence, each linking
// to the map.

import { api } from './api.js';
import { $, el, clear, bus, failed, shortId } from './ui.js';
import { timeEl, utcDay, addDays, parseTs } from './time.js';

const KEEP = 500;
const API_TYPES = {
  'motion:geofence:entry': 'geofence.entry', 'motion:geofence:exit': 'geofence.exit', 'motion:geofence:dwell': 'geofence.dwell',
};
const NAMES = {
  'geofence.entry': 'Geofence entry', 'geofence.exit': 'Geofence exit', 'geofence.dwell': 'Geofence dwell',
  'trip.created': 'Trip created', 'trip.started': 'Trip started', 'trip.paused': 'Trip paused', 'trip.resumed': 'Trip resumed',
  'trip.ended': 'Trip ended', 'trip.origin_reached': 'Origin reached', 'trip.origin_left': 'Origin left',
  'trip.stop_arrived': 'Stop arrived', 'trip.stop_departed': 'Stop departed',
  'trip.destination_reached': 'Destination reached', 'trip.destination_left': 'Destination left',
};

const feed = new Map(); // id → event, any order; rendered newest first
let loaded = false;
let visible = false;
let frame = 0;

function fromMessage(m) {
  const d = m.data || {};
  return {
    id: m.id, type: m.type, at: d.recorded_at || d.created_at || m.created_at,
    user_id: d.user_id || (d.user && d.user.user_id) || null,
    user: (d.user && d.user.description) || d.user_description || null,
    fence_id: d.geofence_id || (d.geofence && (d.geofence.geofence_id || d.geofence.id)) || null,
    fence: d.geofence_description || (d.geofence && d.geofence.description) || null,
    trip_id: d.trip_id || (d.trip && (d.trip.id || d.trip.trip_id)) || null,
  };
}

function fromApi(e) {
  return {
    id: e.id, type: API_TYPES[e.event_type] || e.event_type, at: e.recorded_at || e.created_at,
    user_id: e.user_id, user: e.user_description, fence_id: e.geofence_id, fence: e.geofence_description, trip_id: null,
  };
}

export function initEvents() {
  bus.on('*', (msg, type) => {
    if (!msg || !msg.id || !(type.startsWith('geofence.') || type.startsWith('trip.'))) return;
    feed.set(msg.id, fromMessage(msg));
    trim();
    if (visible && !frame) frame = requestAnimationFrame(() => { frame = 0; render(); });
  });
  bus.on('stream.resumed', (x) => { if (x && x.gap) { loaded = false; if (visible) load(); } });
  bus.on('network.online', () => { if (visible && !loaded) load(); });
  for (const id of ['ef-type', 'ef-user', 'ef-fence']) $(id).addEventListener('input', render);
  $('event-filter').addEventListener('submit', (e) => e.preventDefault());
}

export function showEvents() {
  visible = true;
  render();
  if (!loaded) load();
}
export function hideEvents() { visible = false; }

function trim() {
  if (feed.size <= KEEP) return;
  const ids = [...feed.keys()].sort();
  for (const id of ids.slice(0, feed.size - KEEP)) feed.delete(id);
}

// Today's geofence events (UTC day, as the API counts days): the newest page.
async function load() {
  const query = { start_date: utcDay(), end_date: addDays(utcDay(), 1) };
  try {
    let d = await api('GET', '/v1/api/event/', { query });
    if (d.pages > 1) d = await api('GET', '/v1/api/event/', { query: { ...query, page_number: d.pages } });
    for (const e of d.events || []) if (!feed.has(e.id)) feed.set(e.id, fromApi(e));
    loaded = true;
    trim();
    render();
  } catch (e) {
    failed('Loading today\'s events', e, load);
  }
}

function render() {
  if (!visible) return;
  const type = $('ef-type').value;
  const user = $('ef-user').value.trim();
  const fence = $('ef-fence').value.trim();
  const list = clear($('event-feed'));
  const shown = [...feed.values()]
    .filter((e) => (!type || e.type === type || (type === 'trip.' && e.type.startsWith('trip.')))
      && (!user || e.user_id === user) && (!fence || e.fence_id === fence))
    .sort((a, b) => (parseTs(b.at) - parseTs(a.at)) || (b.id < a.id ? -1 : 1));
  for (const e of shown.slice(0, 200)) {
    const parts = [el('strong', {}, NAMES[e.type] || e.type), ' · ', timeEl(e.at)];
    if (e.user_id) {
      parts.push(' · ', el('a', { href: `#map/user/${e.user_id}` }, `${e.user || `User ${shortId(e.user_id)}`} on the map`));
    }
    if (e.fence_id) parts.push(' · ', el('a', { href: `#geofences/${e.fence_id}` }, `geofence ${e.fence || shortId(e.fence_id)}`));
    if (e.trip_id) parts.push(' · ', el('a', { href: `#trips/${e.trip_id}` }, `trip ${shortId(e.trip_id)}`));
    list.append(el('li', { dataset: { eventId: e.id, type: e.type } }, ...parts));
  }
  if (!shown.length) list.append(el('li', { class: 'hint' }, feed.size ? 'No events match the filter.' : 'No events yet today.'));
}
