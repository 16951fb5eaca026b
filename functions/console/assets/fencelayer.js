// Geofences on the map: those meeting the viewport, read by bounding box
// (`GET /v1/api/geofences/in-view/`, page by page as the users in view are; docs/console.md),
// drawn in their colours with their names.

import { api } from './api.js';
import { bus, failed, debounce, fenceColor } from './ui.js';

// Fences a request, and requests a view: past 6,000 the map says to zoom in (a street-level view
// of the densest city in scripts/bench/console.sh holds 5,300; thousands of SVG shapes are what
// the browser still pans smoothly).
const VIEW_PAGE = 3000;
const VIEW_PAGES = 2;

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
// Milliseconds of drawing a frame: a page of 3,000 at once would be a long task, and a fixed
// count a frame waits on paint more often than it needs to.
const FRAME_BUDGET = 30;
const nextFrame = () => new Promise((r) => requestAnimationFrame(() => r()));

async function loadViewport(onNotice) {
  if (ctrl) ctrl.abort();
  const c = new AbortController();
  ctrl = c;
  const b = map.getBounds();
  const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));
  const box = [clamp(b.getWest(), -180, 180), clamp(b.getSouth(), -85, 85), clamp(b.getEast(), -180, 180), clamp(b.getNorth(), -85, 85)];
  const page = (cursor) => {
    const query = { bbox: box.map((x) => x.toFixed(6)).join(','), limit: VIEW_PAGE };
    if (cursor) query.cursor = cursor;
    return api('GET', '/v1/api/geofences/in-view/', { query, signal: c.signal });
  };
  try {
    const ids = new Set();
    let labelled = null;
    let cursor = null;
    let pending = page(null);
    for (let n = 0; n < VIEW_PAGES && pending; n++) {
      const d = await pending;
      if (c !== ctrl) return;
      cursor = d.next;
      // The next page is asked for before this one is drawn.
      pending = cursor && n + 1 < VIEW_PAGES ? page(cursor) : null;
      if (pending) pending.catch(() => {}); // its failure is met when it is awaited
      const list = d.geofences || [];
      if (labelled === null) labelled = !cursor && list.length <= LABEL_MAX;
      let since = performance.now();
      for (const f of list) {
        ids.add(fenceId(f));
        if (!held.has(fenceId(f))) drawFence(f, labelled);
        if (performance.now() - since > FRAME_BUDGET) {
          await nextFrame();
          if (c !== ctrl) return;
          since = performance.now();
        }
      }
      await nextFrame();
      if (c !== ctrl) return;
    }
    const complete = !cursor;
    // Fences in view no longer listed were deleted (or moved away); those far out of view go,
    // so that panning keeps the map's layers bounded.
    const near = b.pad(0.5);
    for (const [id, v] of fences) {
      if (ids.has(id) || held.has(id)) continue;
      const lb = v.layer.getBounds();
      if ((complete && b.intersects(lb)) || !near.intersects(lb)) removeFence(id);
    }
    const notes = [];
    if (!complete) notes.push(`only the first ${ids.size.toLocaleString('en')} in this area are shown`);
    if (!labelled) notes.push('names show on hover');
    onNotice(notes.length ? `Geofences: ${notes.join('; ')}.${complete ? '' : ' Zoom in to see them all.'}` : '');
  } catch (e) {
    if (e.name === 'AbortError') return;
    if (e.status === 400 && e.field === 'bbox') { onNotice('Zoom in to load geofences.'); return; }
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
