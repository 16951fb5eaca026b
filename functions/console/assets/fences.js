// The Geofences view: the list, a fence's form (name, tag, colour, metadata, scope, window,
// enabled), drawing new circles and polygons on the map and reshaping them by dragging
// (leaflet-geoman) or typing their coordinates (for the keyboard: WCAG 2.1.1), the fence's
// recent events and the users inside it now (those it applies to).

import { api } from './api.js';
import { $, el, clear, bus, failed, announce, busy, confirmClick, pager, fenceColor, shortId } from './ui.js';
import { fmtTime, utcDay, addDays, toLocalInput, fromLocalInput, fmtDistance } from './time.js';
import { drawFence, removeFence, fenceLayer, fenceId, hold, isEnabled } from './fencelayer.js';

let map;
let page = 1;
let listCtrl = null;
// What the form shows: a new drawn shape (id null) or a fence; its layer and the shape's state.
let cur = null;
let drawing = null;

const round = (x) => Math.round(x * 1e6) / 1e6;

export function initFences(m) {
  map = m;
  map.pm.setGlobalOptions({
    minRadiusCircle: 50, maxRadiusCircle: 1000, // the API's limits for circles
    allowSelfIntersection: false, snappable: false, continueDrawing: false,
    pathOptions: { color: '#2b6cb0', fillOpacity: 0.15, weight: 2 },
  });
  map.on('pm:create', onDrawn);
  $('draw-circle').addEventListener('click', () => startDraw('Circle'));
  $('draw-polygon').addEventListener('click', () => startDraw('Polygon'));
  $('draw-typed').addEventListener('click', startTyped);
  $('draw-cancel').addEventListener('click', stopDraw);
  $('fence-form').addEventListener('submit', (e) => { e.preventDefault(); save(); });
  $('fence-edit-shape').addEventListener('click', toggleShapeEdit);
  $('fence-shape-cancel').addEventListener('click', undoShape);
  $('fence-close').addEventListener('click', closeForm);
  $('fence-toggle').addEventListener('click', (e) => busy(e.currentTarget, toggleEnabled));
  confirmClick($('fence-delete'), remove);
  bus.on('fence.saved', () => loadList());
}

export function showFences(rest) {
  loadList();
  if (rest[0] && (!cur || cur.id !== rest[0])) select(rest[0]);
}

export function hideFences() {
  stopDraw();
  if (cur && cur.editing) undoShape();
}

async function loadList(p = page) {
  if (listCtrl) listCtrl.abort();
  const ctrl = new AbortController();
  listCtrl = ctrl;
  try {
    const d = await api('GET', '/v1/api/geofence/', { query: { page_number: p }, signal: ctrl.signal });
    page = p;
    const list = clear($('fence-list'));
    for (const f of d.geofences || []) {
      const id = fenceId(f);
      const swatch = el('span', { class: 'swatch', 'aria-hidden': 'true' });
      swatch.style.backgroundColor = fenceColor(f.color_code); // CSSOM, allowed by the CSP
      const kind = f.geometry_type === 'polygon' ? 'polygon' : `circle ${fmtDistance(f.geometry_radius)}`;
      list.append(el('li', {}, el('button', {
        type: 'button', class: 'item', dataset: { fenceId: id }, 'aria-current': cur && cur.id === id ? 'true' : null,
        onclick: () => { location.hash = `#geofences/${id}`; },
      }, swatch, el('strong', {}, f.description || 'Unnamed geofence'),
      el('span', { class: 'hint' }, ` · ${kind} · ${isEnabled(f) ? 'enabled' : 'disabled'}${f.tag ? ` · tag ${f.tag}` : ''}`))));
    }
    if (!(d.geofences || []).length) list.append(el('li', { class: 'hint' }, 'No geofences yet: draw one on the map.'));
    pager($('fence-pager'), p, d, loadList);
  } catch (e) {
    failed('Loading geofences', e, () => loadList(p));
  }
}

// ---- drawing ----

function startDraw(shape) {
  if (cur && cur.editing) finishShapeEdit();
  map.pm.disableDraw();
  drawing = shape;
  map.pm.enableDraw(shape);
  $('draw-cancel').hidden = false;
  $('draw-hint').textContent = shape === 'Circle'
    ? 'Click the map at the centre, then click again to set the radius (50 to 1000 m).'
    : 'Click the map at each corner; click the first corner again to finish.';
}

function stopDraw() {
  if (!drawing) return;
  map.pm.disableDraw();
  drawing = null;
  $('draw-cancel').hidden = true;
  $('draw-hint').textContent = '';
}

function onDrawn(e) {
  stopDraw();
  if (cur && cur.id === null && cur.layer) map.removeLayer(cur.layer); // an unsaved earlier drawing
  if (cur && cur.id) releaseCurrent();
  cur = { id: null, fence: null, layer: e.layer, editing: false, original: snapshot(e.layer) };
  fillForm(null);
  $('draw-hint').textContent = 'Shape drawn: name it and save it.';
  $('ff-name').focus();
}

// A new fence whose shape is typed: the form without a drawn layer, at the coordinates field.
function startTyped() {
  stopDraw();
  if (cur && cur.id === null && cur.layer) map.removeLayer(cur.layer);
  releaseCurrent();
  cur = { id: null, fence: null, layer: null, editing: false, original: null };
  fillForm(null);
  $('draw-hint').textContent = 'Type the shape\'s coordinates, name it and save it.';
  $('ff-coords').focus();
}

// The coordinates field as the layer shows its shape: "lat, lng, radius" or "lat, lng; …".
function coordsText(layer) {
  if (!layer) return '';
  const s = shapeOf(layer);
  if (s.geometry_type === 'circle') return `${s.coordinates[1]}, ${s.coordinates[0]}, ${s.geometry_radius}`;
  return s.coordinates.map((c) => `${c[1]}, ${c[0]}`).join('; ');
}

// The typed shape as the API takes it, or null when the field still shows the layer's shape.
function typedShape() {
  const text = $('ff-coords').value.trim();
  if (!text || (cur && text === cur.coordsShown)) return null;
  const bad = (why) => new Error(`Shape as coordinates: ${why}`);
  const parts = text.split(';').map((p) => p.trim()).filter(Boolean).map((p) => p.split(',').map((x) => Number(x.trim())));
  for (const p of parts) {
    if (p.some((x) => !Number.isFinite(x))) throw bad('only numbers, separated by commas (and ; between corners).');
    if (p[0] < -90 || p[0] > 90 || p[1] < -180 || p[1] > 180) throw bad('a latitude is -90 to 90 and a longitude -180 to 180.');
  }
  if (parts.length === 1 && parts[0].length === 3) {
    const [lat, lng, r] = parts[0];
    if (r < 50 || r > 1000) throw bad('a circle\'s radius is 50 to 1000 m.');
    return { geometry_type: 'circle', coordinates: [round(lng), round(lat)], geometry_radius: Math.round(r) };
  }
  if (parts.length >= 3 && parts.every((p) => p.length === 2)) {
    return { geometry_type: 'polygon', coordinates: parts.map(([lat, lng]) => [round(lng), round(lat)]) };
  }
  throw bad('give "latitude, longitude, radius" for a circle, or at least 3 corners "latitude, longitude; …" for a polygon.');
}

function showCoords() {
  cur.coordsShown = coordsText(cur.layer);
  $('ff-coords').value = cur.coordsShown;
}

function snapshot(layer) {
  if (layer instanceof L.Circle) return { center: layer.getLatLng(), radius: layer.getRadius() };
  return { latlngs: layer.getLatLngs()[0].map((p) => L.latLng(p.lat, p.lng)) };
}

function shapeOf(layer) {
  if (layer instanceof L.Circle) {
    const c = layer.getLatLng();
    const r = Math.min(1000, Math.max(50, Math.round(layer.getRadius())));
    return { geometry_type: 'circle', coordinates: [round(c.lng), round(c.lat)], geometry_radius: r };
  }
  return { geometry_type: 'polygon', coordinates: layer.getLatLngs()[0].map((p) => [round(p.lng), round(p.lat)]) };
}

function shapeText(layer) {
  const s = shapeOf(layer);
  if (s.geometry_type === 'circle') {
    return `Circle of ${s.geometry_radius} m around ${s.coordinates[1].toFixed(5)}, ${s.coordinates[0].toFixed(5)}.`;
  }
  return `Polygon of ${s.coordinates.length} corners.`;
}

function toggleShapeEdit() {
  if (!cur || !cur.layer) return;
  if (cur.editing) { finishShapeEdit(); return; }
  cur.editing = true;
  if (cur.id) hold(cur.id, true);
  cur.layer.pm.enable({ draggable: true, allowSelfIntersection: false, snappable: false });
  cur.layer.on('pm:edit pm:dragend pm:markerdragend', onShapeChanged);
  $('fence-edit-shape').textContent = 'Finish editing shape';
  $('fence-shape-cancel').hidden = false;
  $('draw-hint').textContent = 'Drag the shape to move it, or drag its handles to reshape it; then save.';
}

function onShapeChanged() {
  if (!cur) return;
  cur.dirty = true;
  $('fence-shape').textContent = `${shapeText(cur.layer)} (changed, not saved)`;
  showCoords();
}

function finishShapeEdit() {
  if (!cur || !cur.editing) return;
  cur.layer.pm.disable();
  cur.layer.off('pm:edit pm:dragend pm:markerdragend', onShapeChanged);
  cur.editing = false;
  $('fence-edit-shape').textContent = 'Edit shape';
  $('draw-hint').textContent = '';
}

function undoShape() {
  if (!cur || !cur.layer) return;
  finishShapeEdit();
  const o = cur.original;
  if (o.center) { cur.layer.setLatLng(o.center); cur.layer.setRadius(o.radius); } else cur.layer.setLatLngs(o.latlngs);
  cur.dirty = false;
  $('fence-shape-cancel').hidden = true;
  $('fence-shape').textContent = shapeText(cur.layer);
  showCoords();
  if (cur.id) hold(cur.id, false);
}

// ---- the form ----

function fillForm(f) {
  const form = $('fence-form');
  form.hidden = false;
  $('fence-form-h').textContent = f ? `Geofence ${f.description || shortId(fenceId(f))}` : 'New geofence';
  $('fence-form-msg').textContent = '';
  $('fence-shape').textContent = cur.layer ? shapeText(cur.layer) : '';
  $('fence-edit-shape').textContent = 'Edit shape';
  $('fence-edit-shape').hidden = !cur.layer;
  $('fence-shape-cancel').hidden = true;
  showCoords();
  $('ff-name').value = f ? f.description || '' : '';
  $('ff-tag').value = f ? f.tag || '' : '';
  let color = f ? fenceColor(f.color_code) : '#2b6cb0';
  if (color.length === 4) color = `#${color[1]}${color[1]}${color[2]}${color[2]}${color[3]}${color[3]}`;
  $('ff-color').value = color.toLowerCase();
  $('ff-meta').value = JSON.stringify(f && f.metadata ? f.metadata : {});
  $('ff-users').value = f && f.user_ids ? f.user_ids.join(', ') : '';
  $('ff-groups').value = f && f.group_ids ? f.group_ids.join(', ') : '';
  const win = f && Array.isArray(f.is_enabled) ? f.is_enabled : [null, f && f.enable_at, f && f.disable_at];
  $('ff-start').value = toLocalInput(win[1]);
  $('ff-end').value = toLocalInput(win[2]);
  $('ff-enabled').checked = f ? isEnabled(f) : true;
  $('fence-toggle').hidden = !f;
  $('fence-toggle').textContent = f && isEnabled(f) ? 'Disable' : 'Enable';
  $('fence-delete').hidden = !f;
  $('fence-save').textContent = f ? 'Save changes' : 'Save geofence';
  $('fence-events-box').hidden = !f;
  $('fence-inside-box').hidden = !f;
}

function readForm() {
  const name = $('ff-name').value.trim();
  if (!name) throw new Error('Name: give the geofence a name.');
  let metadata;
  try { metadata = JSON.parse($('ff-meta').value.trim() || '{}'); } catch (_) { throw new Error('Metadata: not valid JSON.'); }
  if (!metadata || typeof metadata !== 'object' || Array.isArray(metadata)) throw new Error('Metadata: must be a JSON object.');
  const list = (v) => v.split(',').map((x) => x.trim()).filter(Boolean);
  const start = fromLocalInput($('ff-start').value);
  const end = fromLocalInput($('ff-end').value);
  if (start && end && end <= start) throw new Error('Active until: must be after Active from.');
  const typed = typedShape();
  if (!typed && !cur.layer) throw new Error('Shape as coordinates: draw the shape on the map or type it.');
  return {
    typed,
    description: name, tag: $('ff-tag').value.trim(), color_code: $('ff-color').value.replace('#', ''),
    metadata, user_ids: list($('ff-users').value), group_ids: list($('ff-groups').value),
    start, end, enabled: $('ff-enabled').checked,
  };
}

async function save() {
  if (!cur) return;
  const msg = $('fence-form-msg');
  msg.textContent = '';
  let v;
  try { v = readForm(); } catch (e) { msg.textContent = e.message; return; }
  finishShapeEdit();
  const scoped = v.user_ids.length || v.group_ids.length || v.start || v.end;
  await busy($('fence-save'), async () => {
    try {
      let id = cur.id;
      if (!id) {
        const body = { description: v.description, color_code: v.color_code, metadata: v.metadata, ...(v.typed || shapeOf(cur.layer)) };
        if (v.tag) body.tag = v.tag;
        if (scoped) Object.assign(body, { user_ids: v.user_ids, group_ids: v.group_ids, is_enabled: [v.enabled, v.start, v.end] });
        else body.is_enabled = v.enabled;
        const d = await api('POST', '/v1/api/geofence/', { body });
        id = d.geofence_id || d.id;
        if (cur.layer) map.removeLayer(cur.layer);
      } else {
        const was = cur.fence;
        const body = { geofence_id: id, description: v.description, color_code: v.color_code, metadata: v.metadata, is_enabled: v.enabled };
        if (v.tag || was.tag) body.tag = v.tag;
        if (v.typed) Object.assign(body, v.typed);
        else if (cur.dirty) Object.assign(body, shapeOf(cur.layer));
        if (scoped || Array.isArray(was.is_enabled)) {
          Object.assign(body, { user_ids: v.user_ids, group_ids: v.group_ids, enable_at: v.start, disable_at: v.end });
        }
        await api('PUT', '/v1/api/geofence/', { body });
      }
      cur.dirty = false;
      $('draw-hint').textContent = '';
      announce(`Geofence ${v.description} saved.`);
      bus.emit('fence.saved', id);
      await select(id, true);
      if (location.hash !== `#geofences/${id}`) history.replaceState(null, '', `#geofences/${id}`);
    } catch (e) {
      msg.textContent = `Saving failed: ${e.message}`;
    }
  });
}

// Leaves the fence shown before: its map layer goes back to the viewport's loads.
function releaseCurrent() {
  if (cur && cur.editing) undoShape();
  if (cur && cur.id) hold(cur.id, false);
}

export async function select(id, keepView) {
  try {
    const d = await api('GET', '/v1/api/geofence/', { query: { geofence_id: id } });
    const f = (d.geofences || [])[0];
    if (!f) throw new Error('not found');
    if (cur && cur.id === null && cur.layer) map.removeLayer(cur.layer);
    releaseCurrent();
    const layer = drawFence(f) || fenceLayer(id);
    cur = { id, fence: f, layer, editing: false, dirty: false, original: snapshot(layer) };
    fillForm(f);
    if (!keepView) map.fitBounds(layer.getBounds(), { padding: [40, 40], maxZoom: 16 });
    loadEvents(id);
    loadInside(id, layer);
    for (const b of $('fence-list').querySelectorAll('button[data-fence-id]')) {
      b.setAttribute('aria-current', b.dataset.fenceId === id ? 'true' : 'false');
    }
  } catch (e) {
    failed('Loading the geofence', e, () => select(id, keepView));
  }
}

async function toggleEnabled() {
  if (!cur || !cur.id) return;
  const on = !isEnabled(cur.fence);
  try {
    await api('PUT', '/v1/api/geofence/', { body: { geofence_id: cur.id, is_enabled: on } });
    announce(`Geofence ${on ? 'enabled' : 'disabled'}.`);
    bus.emit('fence.saved', cur.id);
    await select(cur.id, true);
  } catch (e) {
    failed(on ? 'Enabling the geofence' : 'Disabling the geofence', e);
  }
}

async function remove() {
  if (!cur || !cur.id) return;
  const id = cur.id;
  try {
    await api('DELETE', '/v1/api/geofence/', { query: { geofence_id: id } });
    finishShapeEdit();
    removeFence(id);
    cur = null;
    $('fence-form').hidden = true;
    announce('Geofence deleted.');
    history.replaceState(null, '', '#geofences');
    loadList();
    $('fences-h').focus();
  } catch (e) {
    failed('Deleting the geofence', e);
  }
}

function closeForm() {
  if (cur && cur.id === null && cur.layer) map.removeLayer(cur.layer);
  releaseCurrent();
  cur = null;
  $('fence-form').hidden = true;
  if (location.hash.startsWith('#geofences/')) history.replaceState(null, '', '#geofences');
  $('fences-h').focus();
}

const EVENT_NAMES = { 'motion:geofence:entry': 'Entry', 'motion:geofence:exit': 'Exit', 'motion:geofence:dwell': 'Dwell' };

async function loadEvents(id) {
  const list = clear($('fence-events'));
  const query = { geofence_id: id, start_date: addDays(utcDay(), -6), end_date: addDays(utcDay(), 1) };
  try {
    let d = await api('GET', '/v1/api/event/', { query });
    if (d.pages > 1) d = await api('GET', '/v1/api/event/', { query: { ...query, page_number: d.pages } });
    if (!cur || cur.id !== id) return;
    const events = (d.events || []).slice().reverse();
    for (const ev of events) {
      list.append(el('li', {}, el('strong', {}, EVENT_NAMES[ev.event_type] || ev.event_type), ' · ',
        el('a', { href: `#map/user/${ev.user_id}` }, ev.user_description || `User ${shortId(ev.user_id)}`),
        ` · ${fmtTime(ev.recorded_at)}`));
    }
    if (!events.length) list.append(el('li', { class: 'hint' }, 'No events in the last 7 days.'));
  } catch (e) {
    failed('Loading the geofence\'s events', e, () => loadEvents(id));
  }
}

// Whether `latlng` is inside the fence's layer: a circle by distance, a polygon by ray casting
// (its ring is small enough for a flat plane).
function contains(layer, latlng) {
  if (layer instanceof L.Circle) return layer.getLatLng().distanceTo(latlng) <= layer.getRadius();
  const ring = layer.getLatLngs()[0];
  let inside = false;
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
    const a = ring[i]; const b = ring[j];
    if ((a.lat > latlng.lat) !== (b.lat > latlng.lat)
      && latlng.lng < ((b.lng - a.lng) * (latlng.lat - a.lat)) / (b.lat - a.lat) + a.lng) inside = !inside;
  }
  return inside;
}

// The users whose latest position is inside the fence now and whom it applies to: the users in
// its bounding box (`/v1/api/users/positions/`), kept when inside its shape and in its scope.
async function loadInside(id, layer) {
  const list = clear($('fence-inside'));
  const b = layer.getBounds();
  const bbox = [b.getWest(), b.getSouth(), b.getEast(), b.getNorth()].map((x) => x.toFixed(6)).join(',');
  try {
    const d = await api('GET', '/v1/api/users/positions/', { query: { bbox, limit: 1000 } });
    if (!cur || cur.id !== id) return;
    const inShape = (d.positions || []).filter((p) => contains(layer, L.latLng(p.coordinates[1], p.coordinates[0])));
    const scope = await inScope(cur.fence, layer, inShape);
    if (!cur || cur.id !== id) return;
    const inside = scope.kept;
    for (const p of inside.slice(0, 100)) {
      list.append(el('li', {}, el('a', { href: `#map/user/${p.user_id}` }, `User ${shortId(p.user_id)}`),
        ` · last fix ${fmtTime(p.recorded_at)}`));
    }
    $('fence-inside-count').textContent = `(${inside.length}${d.truncated || scope.partial ? '+' : ''})`;
    if (!inside.length) list.append(el('li', { class: 'hint' }, 'No one is inside now.'));
    const out = inShape.length - inside.length;
    if (out > 0 && !scope.partial) {
      list.append(el('li', { class: 'hint', dataset: { outOfScope: out } },
        `${out} more inside its shape ${out === 1 ? 'is' : 'are'} not in its scope (its users and groups).`));
    }
  } catch (e) {
    if (e.status === 400) { list.append(el('li', { class: 'hint' }, 'Too large to list who is inside.')); return; }
    failed('Loading who is inside the geofence', e, () => loadInside(id, layer));
  }
}

// Groups' members near a fence read at most this many pages of 100 each.
const SCOPE_PAGES = 10;

// The positions whose users the fence applies to, as the server decides it for events
// (Geofence::applies_to): with no users and no groups, everyone; else its users and the members
// of its groups. The API reads no group's member list, so members come from the nearby-users
// search by `group_id` over a circle around the shape: one request a group (and page), not one a
// user. `partial`: a group had more members there than were read.
async function inScope(f, layer, positions) {
  const named = new Set(f.user_ids || []);
  const groups = f.group_ids || [];
  if (!named.size && !groups.length) return { kept: positions, partial: false };
  const rest = positions.filter((p) => !named.has(p.user_id));
  const members = new Set();
  let partial = false;
  if (rest.length && groups.length) {
    // The search's circle: the shape's bounds' centre to its farthest point, a little wider
    // than the index's distances may round (100 m to 10 km, the search's limits).
    const c = layer instanceof L.Circle ? layer.getLatLng() : layer.getBounds().getCenter();
    const far = layer instanceof L.Circle ? layer.getRadius() : Math.max(...layer.getLatLngs()[0].map((p) => c.distanceTo(p)));
    const radius = Math.ceil(Math.max(100, far * 1.01 + 10));
    if (radius > 10000) throw Object.assign(new Error('too large'), { status: 400 });
    const page = (g, n) => api('GET', '/v1/api/search/users/', {
      query: { location: `${c.lat.toFixed(6)},${c.lng.toFixed(6)}`, radius, group_id: g, page_limit: 100, page_number: n },
    });
    await Promise.all(groups.map(async (g) => {
      const first = await page(g, 1);
      const pages = Math.min(first.pages || 1, SCOPE_PAGES);
      if ((first.pages || 1) > SCOPE_PAGES) partial = true;
      const more = [];
      for (let n = 2; n <= pages; n++) more.push(page(g, n));
      for (const d of [first, ...(await Promise.all(more))]) for (const u of d.users || []) members.add(u.id);
    }));
  }
  return { kept: positions.filter((p) => named.has(p.user_id) || members.has(p.user_id)), partial };
}
