// Geofences on the map: those near the viewport, read with the nearby search (a circle around
// the map's centre, at most 10 km; docs/geofences.md), drawn in their colours with their names.

import { api } from './api.js';
import { bus, failed, debounce, fenceColor } from './ui.js';

const MAX_RADIUS = 10000;
const MAX_PAGES = 20; // 2,000 fences per view at most

let map;
let group;
let ctrl = null;
const fences = new Map(); // id → {fence, layer}
const held = new Set(); // ids being edited: loads leave their layers alone

export const fenceId = (f) => f.geofence_id || f.id;

export function isEnabled(f) {
  return Array.isArray(f.is_enabled) ? !!f.is_enabled[0] : !!f.is_enabled;
}

export function initFenceLayer(m, onNotice) {
  map = m;
  group = L.featureGroup().addTo(map);
  const load = debounce(() => loadViewport(onNotice), 300);
  map.on('moveend', load);
  bus.on('network.online', load);
  bus.on('stream.resumed', load);
  return load;
}

// Named on the map when this few are in view; more get their name on hover only: a permanent
// label is measured by the browser as it is added, thousands of them froze the page for seconds
// (scripts/bench/console.sh).
const LABEL_MAX = 150;
// Pages of the search in flight at once, and drawn as they come, a page a frame.
const PAGES_IN_FLIGHT = 4;
const nextFrame = () => new Promise((r) => requestAnimationFrame(() => r()));

async function loadViewport(onNotice) {
  if (ctrl) ctrl.abort();
  const c = new AbortController();
  ctrl = c;
  const center = map.getCenter();
  const corner = map.getBounds().getNorthEast();
  const wanted = center.distanceTo(corner);
  const radius = Math.max(1, Math.min(MAX_RADIUS, Math.ceil(wanted)));
  if (Math.abs(center.lat) + radius / 111000 > 85) return; // the index stops at ±85°
  const page = (n) => api('GET', '/v1/api/search/geofences/', {
    query: { location: `${center.lat.toFixed(6)},${center.lng.toFixed(6)}`, radius, page_limit: 100, page_number: n },
    signal: c.signal,
  });
  try {
    const first = await page(1);
    const pages = Math.min(first.pages || 1, MAX_PAGES);
    const labelled = (first.pages || 1) * 100 <= LABEL_MAX;
    const ids = new Set();
    const draw = async (d) => {
      if (c !== ctrl) return;
      for (const f of d.geofences || []) {
        ids.add(fenceId(f));
        if (!held.has(fenceId(f))) drawFence(f, labelled);
      }
      await nextFrame();
    };
    await draw(first);
    for (let n = 2; n <= pages; n += PAGES_IN_FLIGHT) {
      const batch = [];
      for (let k = n; k < n + PAGES_IN_FLIGHT && k <= pages; k++) batch.push(page(k));
      for (const d of await Promise.all(batch)) await draw(d);
    }
    if (c !== ctrl) return;
    const complete = (first.pages || 1) <= MAX_PAGES;
    // Fences no longer found near here were deleted (or moved away); those far out of view go,
    // so that panning keeps the map's layers bounded.
    const near = map.getBounds().pad(1);
    for (const [id, v] of fences) {
      if (ids.has(id) || held.has(id)) continue;
      const inCircle = center.distanceTo(v.layer.getBounds().getCenter()) < radius;
      if ((complete && inCircle) || !near.intersects(v.layer.getBounds())) removeFence(id);
    }
    const notes = [];
    if (wanted > MAX_RADIUS) notes.push('only those within 10 km of the centre are shown');
    if (!complete) notes.push(`only the nearest ${MAX_PAGES * 100} are shown`);
    if (!labelled) notes.push('names show on hover');
    onNotice(notes.length ? `Geofences: ${notes.join('; ')}. Zoom in to see more.` : '');
  } catch (e) {
    if (e.name === 'AbortError') return;
    if (e.status === 400) { onNotice('Geofences cannot be searched here.'); return; }
    failed('Loading geofences in view', e, () => loadViewport(onNotice));
  }
}

export function shapeLayer(f) {
  const color = fenceColor(f.color_code);
  const style = {
    color, fillColor: color, weight: 2, fillOpacity: 0.15,
    dashArray: isEnabled(f) ? null : '6 6', className: 'wm-fence',
  };
  if (f.geometry_type === 'polygon' && f.geometry) {
    const ring = f.geometry.coordinates[0].slice(0, -1).map(([x, y]) => [y, x]);
    return L.polygon(ring, style);
  }
  const c = f.geometry_center.coordinates;
  return L.circle([c[1], c[0]], { ...style, radius: f.geometry_radius || 100 });
}

// Draws (or redraws) one fence with its name: a permanent label, or on hover (`labelled` false).
export function drawFence(f, labelled = true) {
  const id = fenceId(f);
  const old = fences.get(id);
  if (old && old.labelled === labelled && JSON.stringify(old.fence) === JSON.stringify(f)) return old.layer;
  if (old) group.removeLayer(old.layer);
  const layer = shapeLayer(f);
  // A text node: the name comes from the API, and Leaflet sets a string tooltip as HTML.
  layer.bindTooltip(document.createTextNode(f.description || 'Unnamed geofence'), {
    permanent: labelled, direction: 'center', className: 'wm-fence-label', opacity: 1,
  });
  layer.on('click', () => bus.emit('fence.select', id));
  layer.addTo(group);
  fences.set(id, { fence: f, layer, labelled });
  return layer;
}

export function removeFence(id) {
  const v = fences.get(id);
  if (v) group.removeLayer(v.layer);
  fences.delete(id);
  held.delete(id);
}

export function fenceLayer(id) {
  const v = fences.get(id);
  return v ? v.layer : null;
}

export function hold(id, on) {
  if (on) held.add(id); else held.delete(id);
}
