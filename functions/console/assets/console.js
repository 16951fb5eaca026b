// Waymark console: sign-in and the session, the router (#map, #trips, #geofences, #events,
// #webhooks, each with an optional id after a slash), the live stream and network recovery.
// Every view lives in its own module; they talk through the bus (ui.js).

import { api, session, flash, onExpired } from './api.js';
import { $, bus, initAlerts, showError, clearError, announce, mapNotice } from './ui.js';
import { zoneLabel, parseTs } from './time.js';
import { createStream } from './stream.js';
import { initMap, startView, showMapView, getMap } from './map.js';
import { initFenceLayer } from './fencelayer.js';
import { initFences, showFences, hideFences } from './fences.js';
import { initTrips, showTrips, hideTrips } from './trips.js';
import { initEvents, showEvents, hideEvents } from './events.js';
import { initWebhooks, showWebhooks, hideWebhooks } from './webhooks.js';

function readConfig() {
  try {
    return JSON.parse($('config').textContent);
  } catch (_) {
    return { tile_url: null, tile_attribution: '', stream_url: '/v1/api/streams/ws/' };
  }
}
const config = readConfig();

const VIEWS = {
  map: { map: true, show: showMapView, hide() {} },
  trips: { map: true, show: showTrips, hide: hideTrips },
  geofences: { map: true, show: showFences, hide: hideFences },
  events: { map: false, show: showEvents, hide: hideEvents },
  webhooks: { map: false, show: showWebhooks, hide: hideWebhooks },
};
const TITLES = { map: 'Map', trips: 'Trips', geofences: 'Geofences', events: 'Events', webhooks: 'Webhooks' };

let started = false;
let stream = null;
let current = null;
let expiryTimer = 0;

// Leaves the session: forgets it, and reloads so nothing of the project stays in memory.
// Once. A sign-out's own DELETE makes requests still in flight answer 401, whose "expired"
// must not replace the sign-out's message (`signingOut`).
let leaving = false;
let signingOut = false;
function leave(message) {
  if (leaving) return;
  leaving = true;
  session.clear();
  if (message) flash.set(message);
  location.replace(location.pathname);
}

onExpired(() => { if (!signingOut) leave('Your session has expired or was revoked. Sign in again.'); });

function showSignin() {
  $('view-signin').hidden = false;
  $('app').hidden = true;
  $('nav').hidden = true;
  $('session-box').hidden = true;
  document.title = 'Sign in · Waymark console';
  const msg = flash.take();
  if (msg) $('signin-msg').textContent = msg;
  $('signin-key').focus();
}

async function signIn(e) {
  e.preventDefault();
  const input = $('signin-key');
  const msg = $('signin-msg');
  const key = input.value.trim();
  msg.textContent = '';
  if (!key) { msg.textContent = 'Enter the project\'s secret API key.'; input.focus(); return; }
  $('signin-submit').disabled = true;
  try {
    const d = await api('POST', '/v1/api/console/sessions/', { key, body: {}, retries: 0 });
    session.set({ token: d.token, session_id: d.session_id, expires_at: d.expires_at });
    input.value = '';
    if (!location.hash || location.hash === '#') history.replaceState(null, '', '#map');
    start();
  } catch (err) {
    msg.textContent = err.status === 0 ? `Signing in failed: ${err.message}.` : err.message;
    input.focus();
  } finally {
    $('signin-submit').disabled = false;
  }
}

async function signOut() {
  $('signout').disabled = true;
  signingOut = true;
  if (stream) stream.stop();
  try {
    await api('DELETE', '/v1/api/console/sessions/', { retries: 0 });
  } catch (_) { /* already gone, or offline: forgetting it here is what matters */ }
  leave('You are signed out.');
}

// The app after sign-in (or a reload with a session in this tab).
function start() {
  const s = session.get();
  $('view-signin').hidden = true;
  $('app').hidden = false;
  $('nav').hidden = false;
  $('session-box').hidden = false;
  clearTimeout(expiryTimer);
  if (s.expires_at) {
    const ms = parseTs(s.expires_at).getTime() - Date.now(); // UTC, zone-less as the API writes
    expiryTimer = setTimeout(() => leave('Your session has expired. Sign in again.'), Math.min(Math.max(ms, 0), 2 ** 31 - 1));
  }
  if (!started) {
    started = true;
    const map = initMap(config) || getMap();
    initFenceLayer(map, (t) => mapNotice('fences', t));
    initFences(map);
    initTrips(map);
    initEvents();
    initWebhooks();
    bus.on('fence.select', (id) => { location.hash = `#geofences/${id}`; });
    stream = createStream(config.stream_url || '/v1/api/streams/ws/');
    stream.start();
  }
  route();
  startView();
}

const LIVE_TEXT = { live: 'Live', connecting: 'Connecting…', reconnecting: 'Reconnecting…', off: 'Live updates off' };
let wasLive = false;
bus.on('stream.state', (s) => {
  const box = $('live-state');
  box.dataset.state = s;
  box.textContent = LIVE_TEXT[s] || s;
  if (s === 'reconnecting' && wasLive) announce('Live updates interrupted; reconnecting.');
  if (s === 'live' && wasLive === 'lost') announce('Live updates restored.');
  if (s === 'live') wasLive = true;
  else if (wasLive && s === 'reconnecting') wasLive = 'lost';
});

function route() {
  if (!session.get()) { showSignin(); return; }
  const [name, ...rest] = location.hash.replace(/^#/, '').split('/');
  const view = VIEWS[name] ? name : 'map';
  const changed = current !== view;
  if (changed && current) VIEWS[current].hide();
  for (const v of Object.keys(VIEWS)) $(`view-${v}`).hidden = v !== view;
  for (const a of $('nav').querySelectorAll('a[data-view]')) {
    if (a.dataset.view === view) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  $('app').classList.toggle('no-map', !VIEWS[view].map);
  document.title = `${TITLES[view]} · Waymark console`;
  const prev = current;
  current = view;
  const map = getMap();
  if (VIEWS[view].map && map) map.invalidateSize();
  VIEWS[view].show(rest.filter(Boolean));
  // Screen readers: say where we are by moving focus to the view's heading (not on first load).
  if (changed && prev) $(`${view === 'geofences' ? 'fences' : view === 'webhooks' ? 'hooks' : view}-h`).focus();
}

function boot() {
  initAlerts();
  $('zone').textContent = `Times are shown in ${zoneLabel()}.`;
  $('signin-form').addEventListener('submit', signIn);
  $('signout').addEventListener('click', signOut);
  window.addEventListener('hashchange', route);
  window.addEventListener('offline', () => showError('You are offline. The console reconnects by itself when the network is back.'));
  window.addEventListener('online', () => {
    clearError();
    announce('Back online.');
    bus.emit('network.online', {});
  });
  if (session.get()) start(); else showSignin();
}

boot();
