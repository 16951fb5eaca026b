// The live map: every user's latest position in the viewport (loaded by bounding box, clustered),
// moved by the stream's `location.updated` messages (batched per animation frame), a text list of
// the users in view, a user's card and a day of their history with its stops.

import { api } from './api.js';
import { $, el, clear, facts, bus, failed, debounce, shortId, announce, mapNotice } from './ui.js';
import { zone, fmtTime, timeEl, ago, localDay, parseTs, fmtDistance, fmtDuration } from './time.js';

const VIEW = 'waymark.console.view';
const LIST_MAX = 100; // users listed as text; the rest are counted
const BATCH_REBUILD = 40; // moves per frame above which the cluster is updated in one batch

let map;
let cluster;
let historyLayer;
let usersCtrl = null;
let selected = null;
const users = new Map(); // user id → {id, latlng, recorded_at, description, battery, marker}
const pending = new Map(); // user id → latest fix not drawn yet
let frame = 0;
let listTimer = 0;

export function getMap() { return map; }

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

export function initMap(config) {
  map = L.map('map', { zoomControl: true, attributionControl: !!config.tile_url, worldCopyJump: false, minZoom: 2, maxZoom: 19 });
  if (config.tile_url) {
    L.tileLayer(config.tile_url, { maxZoom: 19, attribution: escapeHtml(config.tile_attribution || '') }).addTo(map);
    map.attributionControl.setPrefix(false);
  } else {
    $('map').classList.add('blank');
  }
  L.control.scale({ metric: true, imperial: false, position: 'bottomleft' }).addTo(map);

  cluster = L.markerClusterGroup({
    chunkedLoading: true, // big loads are added in slices between frames, never one long task
    chunkInterval: 100,
    chunkDelay: 20,
    showCoverageOnHover: false,
    maxClusterRadius: 50,
    iconCreateFunction(c) {
      const n = c.getChildCount();
      const size = n < 10 ? 'small' : n < 100 ? 'medium' : 'large';
      return L.divIcon({
        html: `<span>${n}</span><span class="sr-only"> users here, zoom in</span>`,
        className: `wm-cluster wm-cluster-${size}`,
        iconSize: L.point(38, 38),
      });
    },
  });
  map.addLayer(cluster);
  historyLayer = L.layerGroup().addTo(map);

  map.on('moveend', () => {
    const c = map.getCenter();
    sessionStorage.setItem(VIEW, JSON.stringify({ lat: c.lat, lng: c.lng, zoom: map.getZoom() }));
    loadUsers();
    scheduleList(0);
  });
  bus.on('location.updated', onLocation);
  bus.on('stream.resumed', () => loadUsers());
  bus.on('network.online', () => loadUsers());

  $('card-close').addEventListener('click', closeCard);
  $('history-form').addEventListener('submit', (e) => { e.preventDefault(); showHistory(); });
  $('history-clear').addEventListener('click', clearHistory);
  $('history-day').value = localDay();
  setInterval(() => { refreshAges(); }, 15000);
}

// Where to look first: the last view of this tab, else a user's latest position, else a fence.
export async function startView() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(VIEW) || 'null');
    if (saved) { map.setView([saved.lat, saved.lng], saved.zoom); return; }
  } catch (_) { /* no saved view */ }
  map.setView([20, 0], 2);
  try {
    const d = await api('GET', '/v1/api/user/');
    const u = (d.users || []).find((x) => x.last_location_update && x.last_location_update.coordinates);
    if (u) {
      const c = u.last_location_update.coordinates.coordinates;
      map.setView([c[1], c[0]], 14);
      return;
    }
    const g = await api('GET', '/v1/api/geofence/');
    const f = (g.geofences || [])[0];
    if (f && f.geometry_center) {
      const c = f.geometry_center.coordinates;
      map.setView([c[1], c[0]], 14);
    }
  } catch (e) {
    failed('Finding where your users are', e, startView);
  }
}

export function showMapView(rest) {
  if (rest[0] === 'user' && rest[1]) openCard(rest[1], true);
}

const notice = (text) => mapNotice('users', text);

// Positions in the viewport. Debounced so a pan loads once; a newer load aborts the older one.
const loadUsers = debounce(async () => {
  if (!map) return;
  if (usersCtrl) usersCtrl.abort();
  const ctrl = new AbortController();
  usersCtrl = ctrl;
  const b = map.getBounds();
  const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));
  const box = [clamp(b.getWest(), -180, 180), clamp(b.getSouth(), -85, 85), clamp(b.getEast(), -180, 180), clamp(b.getNorth(), -85, 85)];
  try {
    // Page by page (`next`), each shown as it comes, up to VIEW_PAGES pages a view.
    const seen = new Set();
    let cursor = null;
    let shown = 0;
    for (let page = 0; page < VIEW_PAGES; page++) {
      const query = { bbox: box.map((x) => x.toFixed(6)).join(','), limit: VIEW_PAGE };
      if (cursor) query.cursor = cursor;
      const d = await api('GET', '/v1/api/users/positions/', { query, signal: ctrl.signal });
      if (ctrl !== usersCtrl) return;
      (d.positions || []).forEach((p) => seen.add(p.user_id));
      shown += (d.positions || []).length;
      merge(d.positions || []);
      cursor = d.next;
      if (!cursor) break;
    }
    notice(cursor ? `Showing the first ${shown.toLocaleString('en')} users in this area; zoom in to see them all.` : '');
    if (!cursor) prune(b, seen);
  } catch (e) {
    if (e.name === 'AbortError') return;
    if (e.status === 400 && e.field === 'bbox') { notice('Zoom in to load users.'); return; }
    failed('Loading users in view', e, () => loadUsers());
  }
}, 250);

// Users the server no longer has in this box (moved away or erased) leave it.
function prune(bounds, seen) {
  const gone = [];
  for (const u of users.values()) {
    if (!seen.has(u.id) && bounds.contains(u.latlng) && !pending.has(u.id) && u.id !== selected) gone.push(u);
  }
  if (gone.length) {
    cluster.removeLayers(gone.map((u) => u.marker));
    gone.forEach((u) => users.delete(u.id));
  }
}

function label(u) {
  return u.description || `User ${shortId(u.id)}`;
}

function makeMarker(u) {
  const m = L.marker(u.latlng, {
    icon: L.divIcon({ className: 'wm-user', iconSize: L.point(18, 18) }),
    keyboard: false, // the side list is the keyboard path (thousands of tab stops would not be)
    title: label(u),
    riseOnHover: true,
  });
  m.on('click', () => openCard(u.id));
  m.on('add', () => {
    const e = m.getElement();
    if (!e) return;
    e.dataset.userId = u.id;
    e.classList.toggle('wm-selected', u.id === selected);
  });
  return m;
}

// A page of the users in view: at most VIEW_PAGE positions a request, VIEW_PAGES pages a view.
const VIEW_PAGE = 5000;
const VIEW_PAGES = 4;

function merge(positions) {
  const add = [];
  for (const p of positions) {
    const latlng = L.latLng(p.coordinates[1], p.coordinates[0]);
    const u = users.get(p.user_id);
    if (!u) {
      const nu = { id: p.user_id, latlng, recorded_at: p.recorded_at, description: p.description || null };
      nu.marker = makeMarker(nu);
      users.set(nu.id, nu);
      add.push(nu.marker);
    } else if (!u.recorded_at || (p.recorded_at && parseTs(p.recorded_at) > parseTs(u.recorded_at))) {
      pending.set(u.id, { latlng, recorded_at: p.recorded_at });
    }
  }
  if (add.length) cluster.addLayers(add);
  if (pending.size && !frame) frame = requestAnimationFrame(flush);
  scheduleList(0);
}

// A fix from the stream: kept until the next frame, only the newest per user.
function onLocation(msg) {
  const d = msg.data || {};
  const loc = d.location;
  const id = d.user_id || (d.user && d.user.user_id);
  if (!loc || !loc.coordinates || !id) return;
  const c = loc.coordinates.coordinates;
  pending.set(id, {
    latlng: L.latLng(c[1], c[0]), recorded_at: loc.recorded_at,
    description: d.user ? d.user.description : undefined, battery: loc.battery_remaining, location: loc,
  });
  if (!frame) frame = requestAnimationFrame(flush);
}

function flush() {
  frame = 0;
  const moved = [];
  const added = [];
  for (const [id, p] of pending) {
    let u = users.get(id);
    if (!u) {
      u = { id, latlng: p.latlng, recorded_at: p.recorded_at, description: p.description || null };
      u.marker = makeMarker(u);
      users.set(id, u);
      added.push(u.marker);
    } else {
      if (p.recorded_at && u.recorded_at && parseTs(p.recorded_at) < parseTs(u.recorded_at)) continue; // an older fix
      u.latlng = p.latlng;
      u.recorded_at = p.recorded_at;
      moved.push(u);
    }
    if (p.description !== undefined && p.description !== u.description) {
      u.description = p.description;
      u.marker.options.title = label(u);
      const e = u.marker.getElement();
      if (e) e.title = label(u);
    }
    if (p.battery != null) u.battery = p.battery;
    if (id === selected) updateCardFix(u, p.location);
  }
  pending.clear();
  if (moved.length > BATCH_REBUILD) {
    // One batch: out of the cluster, moved, back in (each alone would re-cluster per marker).
    const ms = moved.map((u) => u.marker);
    cluster.removeLayers(ms);
    moved.forEach((u) => u.marker.setLatLng(u.latlng));
    cluster.addLayers(ms);
  } else {
    moved.forEach((u) => u.marker.setLatLng(u.latlng));
  }
  if (added.length) cluster.addLayers(added);
  scheduleList(1000);
}

// The text list of users in view, for everyone and for screen readers; at most once a second.
function scheduleList(ms) {
  if (listTimer && ms) return;
  clearTimeout(listTimer);
  listTimer = setTimeout(() => { listTimer = 0; renderList(); }, ms);
}

function renderList() {
  if (!map) return;
  const list = $('inview');
  const b = map.getBounds();
  const inView = [...users.values()].filter((u) => b.contains(u.latlng));
  inView.sort((a, z) => label(a).localeCompare(label(z)));
  const focused = list.contains(document.activeElement) ? document.activeElement.dataset.userId : null;
  clear(list);
  for (const u of inView.slice(0, LIST_MAX)) {
    list.append(el('li', {}, el('button', {
      type: 'button', class: 'link-btn', dataset: { userId: u.id },
      'aria-current': u.id === selected ? 'true' : null,
      onclick: () => openCard(u.id, true),
    }, label(u), el('span', { class: 'hint' }, ` · last fix ${fmtTime(u.recorded_at)} (${ago(u.recorded_at)})`))));
  }
  $('inview-count').textContent = `(${inView.length})`;
  const more = $('inview-more');
  more.hidden = inView.length <= LIST_MAX;
  more.textContent = `${inView.length - LIST_MAX} more users in view; zoom in to list them.`;
  if (!inView.length) list.append(el('li', { class: 'hint' }, 'No users in view.'));
  if (focused) {
    const b2 = list.querySelector(`button[data-user-id="${CSS.escape(focused)}"]`);
    if (b2) b2.focus();
  }
  nameListed(inView.slice(0, LIST_MAX));
}

// The positions endpoint carries no description: the listed users still unnamed are looked up
// once each (4 at a time), so the text list reads as names.
const asked = new Set();
let naming = 0;
function nameListed(listed) {
  const todo = listed.filter((u) => !u.description && !asked.has(u.id));
  while (naming < 4 && todo.length) {
    const u = todo.shift();
    asked.add(u.id);
    naming++;
    api('GET', '/v1/api/user/', { query: { user_id: u.id }, retries: 1 })
      .then((d) => {
        const r = (d.users || [])[0];
        if (r && r.description && !u.description) {
          u.description = r.description;
          u.marker.options.title = label(u);
          if (u.marker.getElement()) u.marker.getElement().title = label(u);
          scheduleList(1000);
        }
      })
      .catch(() => { /* stays unnamed; the id is shown */ })
      .finally(() => { naming--; if (todo.length) nameListed(todo); });
  }
}

function refreshAges() {
  scheduleList(0);
  if (selected && users.has(selected)) updateCardFix(users.get(selected));
}

// ---- the user card ----

let cardCtrl = null;
let cardUser = null; // the user record from the API

export async function openCard(id, pan) {
  const prev = selected && users.get(selected);
  selected = id;
  if (prev && prev.marker.getElement()) prev.marker.getElement().classList.remove('wm-selected');
  const u = users.get(id);
  if (u && u.marker.getElement()) u.marker.getElement().classList.add('wm-selected');
  $('user-card').hidden = false;
  $('card-h').textContent = u ? label(u) : `User ${shortId(id)}`;
  clearHistory();
  cardUser = null;
  renderCard(u, null);
  if (u && pan) map.panTo(u.latlng);
  if (cardCtrl) cardCtrl.abort();
  const ctrl = new AbortController();
  cardCtrl = ctrl;
  try {
    const [ud, td] = await Promise.all([
      api('GET', '/v1/api/user/', { query: { user_id: id }, signal: ctrl.signal }),
      api('GET', '/v1/api/trips/', { query: { user_id: id }, signal: ctrl.signal }),
    ]);
    if (ctrl !== cardCtrl) return;
    cardUser = (ud.users || [])[0] || null;
    const trip = (td.trips || []).find((t) => t.is_started && !t.is_ended) || null;
    const last = cardUser && cardUser.last_location_update;
    if (cardUser && !u && last && last.coordinates) {
      // Not loaded on the map yet (e.g. opened from the events feed): go where they are.
      const c = last.coordinates.coordinates;
      map.setView([c[1], c[0]], Math.max(map.getZoom(), 14));
    }
    if (cardUser) {
      $('card-h').textContent = cardUser.description || `User ${shortId(id)}`;
      const known = users.get(id);
      if (known && cardUser.description && known.description !== cardUser.description) {
        known.description = cardUser.description;
        known.marker.options.title = label(known);
        if (known.marker.getElement()) known.marker.getElement().title = label(known);
      }
    }
    renderCard(users.get(id), trip);
    scheduleList(0);
  } catch (e) {
    failed('Loading the user', e, () => openCard(id, pan));
  }
}

let cardTrip = null;
function renderCard(u, trip) {
  if (trip !== undefined) cardTrip = trip;
  const r = cardUser || {};
  const last = r.last_location_update && r.last_location_update.recorded_at ? r.last_location_update : null;
  const recorded = u && u.recorded_at ? u.recorded_at : last && last.recorded_at;
  const battery = u && u.battery != null ? u.battery : last ? last.battery_remaining : null;
  const device = [r.brand, r.model].filter(Boolean).join(' ') + (r.os_version ? ` (OS ${r.os_version})` : '');
  const pos = u ? u.latlng : last && last.coordinates ? L.latLng(last.coordinates.coordinates[1], last.coordinates.coordinates[0]) : null;
  const fix = recorded ? el('span', {}, timeEl(recorded), ` (${ago(recorded)})`) : 'none yet';
  facts($('card-facts'), [
    ['User ID', selected],
    ['Description', r.description || '–'],
    ['Device', device || '–'],
    ['Last fix', fix],
    ['Position', pos ? `${pos.lat.toFixed(5)}, ${pos.lng.toFixed(5)}` : '–'],
    ['Battery', battery != null ? `${battery} %` : '–'],
    ['Active trip', cardTrip ? el('a', { href: `#trips/${cardTrip.id}` }, `Trip ${shortId(cardTrip.id)}`) : 'none'],
  ]);
}

function updateCardFix(u, location) {
  if (location && cardUser) cardUser.last_location_update = location;
  renderCard(u, undefined);
}

function closeCard() {
  const u = selected && users.get(selected);
  if (u && u.marker.getElement()) u.marker.getElement().classList.remove('wm-selected');
  selected = null;
  cardUser = null;
  $('user-card').hidden = true;
  clearHistory();
  scheduleList(0);
  $('map-h').focus();
}

// ---- a day of history ----

// HyperTrack's time-aware polyline: lat, lng (×1e5) and Unix seconds, each delta-encoded.
export function decodeTimeAware(s) {
  const out = [];
  let i = 0;
  const vals = [0, 0, 0];
  while (i < s.length) {
    for (let k = 0; k < 3; k++) {
      let result = 0;
      let shift = 0;
      let b;
      do {
        b = s.charCodeAt(i++) - 63;
        result += (b & 0x1f) * 2 ** shift; // arithmetic, not bit operations: seconds pass 2^31
        shift += 5;
      } while (b >= 0x20);
      vals[k] += result % 2 ? -(result + 1) / 2 : result / 2;
    }
    out.push({ lat: vals[0] / 1e5, lng: vals[1] / 1e5, t: vals[2] });
  }
  return out;
}

// Stops: runs within 50 m of their first fix lasting 3 minutes or more.
export function findStops(points) {
  const stops = [];
  let i = 0;
  while (i < points.length) {
    let j = i;
    const a = L.latLng(points[i].lat, points[i].lng);
    while (j + 1 < points.length && a.distanceTo([points[j + 1].lat, points[j + 1].lng]) <= 50) j++;
    if (points[j].t - points[i].t >= 180) {
      const run = points.slice(i, j + 1);
      stops.push({
        lat: run.reduce((s, p) => s + p.lat, 0) / run.length,
        lng: run.reduce((s, p) => s + p.lng, 0) / run.length,
        from: points[i].t, to: points[j].t,
      });
      i = j + 1;
    } else {
      i++;
    }
  }
  return stops;
}

async function showHistory() {
  if (!selected) return;
  const day = $('history-day').value || localDay();
  try {
    const d = await api('GET', '/v1/api/location/', {
      query: { user_id: selected, start_date: day, timezone_offset: zone, points_encoded: 'true' },
    });
    const pts = d.time_aware_polyline ? decodeTimeAware(d.time_aware_polyline) : [];
    historyLayer.clearLayers();
    clear($('history-stops'));
    $('history-clear').hidden = false;
    if (!pts.length) {
      $('history-summary').textContent = `No fixes on ${day}.`;
      announce(`No fixes on ${day}.`);
      return;
    }
    const line = L.polyline(pts.map((p) => [p.lat, p.lng]), { className: 'wm-history', weight: 4 }).addTo(historyLayer);
    let dist = 0;
    for (let k = 1; k < pts.length; k++) dist += L.latLng(pts[k - 1].lat, pts[k - 1].lng).distanceTo([pts[k].lat, pts[k].lng]);
    const stops = findStops(pts);
    stops.forEach((s, k) => {
      const text = `Stop ${k + 1}: ${fmtTime(new Date(s.from * 1000))} to ${fmtTime(new Date(s.to * 1000))} (${fmtDuration(s.to - s.from)})`;
      L.circleMarker([s.lat, s.lng], { radius: 8, className: 'wm-stop' }).bindTooltip(text).addTo(historyLayer);
      $('history-stops').append(el('li', {}, text));
    });
    const first = pts[0];
    const last = pts[pts.length - 1];
    L.circleMarker([first.lat, first.lng], { radius: 6, className: 'wm-start' }).bindTooltip(`First fix ${fmtTime(new Date(first.t * 1000))}`).addTo(historyLayer);
    L.circleMarker([last.lat, last.lng], { radius: 6, className: 'wm-end' }).bindTooltip(`Last fix ${fmtTime(new Date(last.t * 1000))}`).addTo(historyLayer);
    const summary = `${pts.length} fixes on ${day}, ${fmtDistance(dist)}, ${stops.length} stop${stops.length === 1 ? '' : 's'}.`;
    $('history-summary').textContent = summary;
    announce(summary);
    map.fitBounds(line.getBounds(), { padding: [30, 30], maxZoom: 16 });
  } catch (e) {
    failed('Loading the history', e, showHistory);
  }
}

function clearHistory() {
  if (historyLayer) historyLayer.clearLayers();
  $('history-summary').textContent = '';
  clear($('history-stops'));
  $('history-clear').hidden = true;
}
