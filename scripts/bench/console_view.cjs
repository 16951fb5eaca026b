// The console's first view, a pan and the live map, timed in headless Chromium (issue 58, item 6).
// Run by scripts/bench/console.sh after it seeded `waymark serve` (see there). Env: WAYMARK_BASE,
// WM_SK, WM_PK (the keys), PLAYWRIGHT_CORE, OUT (seed.json is read from it; results.json,
// screenshots written to it), RUNS (3), LIVE (1), LIVE_RATE (200), LIVE_SECONDS (10),
// SCENARIOS (default,city: the console's own first view after sign-in, then the city at zoom 12;
// "cityfit" adds the zoom that fits the whole 20 km box).
//
// What is measured, in the page's own clock (performance.now(), 0 = navigation start):
//   users: the first frame with user markers or clusters drawn and the "Users in view" list filled
//          (or the map's notice saying to zoom in); fences: the first frame with a fence drawn;
//   ready: the later of the two; settled: the last change of what the map draws (markers in the
//          cluster, fences) before the network is quiet for 2 s; named: the list's names looked up.
//   responsive: when the page next answers input after `ready` (the end of the long task(s) then
//          running: the sampler's frame time comes before that frame's layout and paint).
// Long tasks ('longtask') and long animation frames ('long-animation-frame': scripts, forced
// layout, paint) come from PerformanceObserver; requests in flight from a wrapped fetch.
// Requests and bytes are the page's resource timing entries (transferSize: headers and body).
// A benchmark: nothing here fails on a slow figure.
'use strict';
const fs = require('fs');
const path = require('path');
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const BASE = process.env.WAYMARK_BASE;
const OUT = process.env.OUT;
const SK = process.env.WM_SK;
const PK = process.env.WM_PK;
const RUNS = Number(process.env.RUNS || 3);
const LIVE = process.env.LIVE !== '0';
const LIVE_RATE = Number(process.env.LIVE_RATE || 200);
const LIVE_SECONDS = Number(process.env.LIVE_SECONDS || 10);
// Fixes in flight at most (the sender's connections): a fix due while they are all busy is
// skipped and counted, so the offered rate stays honest when the server cannot keep up.
const MAX_INFLIGHT = Number(process.env.LIVE_INFLIGHT || 32);
const SCENARIOS = (process.env.SCENARIOS || 'default,city').split(',').filter(Boolean);
const W = 1280;
const H = 800;
const seed = JSON.parse(fs.readFileSync(path.join(OUT, 'seed.json'), 'utf8'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => {
  const v = xs.filter((x) => x != null && !Number.isNaN(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};

// Runs in the page before its scripts: long tasks, resource timing for every request, frame
// gaps, the sign-in's submit time, Leaflet's map (through L.Map's init hook), and a sampler that
// records (once a frame) what the map draws whenever it changes.
function instrument(savedView) {
  if (savedView && !sessionStorage.getItem('waymark.console.view')) sessionStorage.setItem('waymark.console.view', JSON.stringify(savedView));
  performance.setResourceTimingBufferSize(1000000);
  window.__lt = [];
  try {
    new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__lt.push([e.startTime, e.duration]); })
      .observe({ type: 'longtask', buffered: true });
  } catch (_) { /* no long task timing */ }
  // Long animation frames (Chromium 123+): where a long frame's time went — scripts (with their
  // forced style and layout), then the frame's own style, layout and paint.
  window.__loaf = [];
  try {
    new PerformanceObserver((l) => {
      for (const e of l.getEntries()) {
        if (e.duration < 200) continue;
        const end = e.startTime + e.duration;
        const scripts = (e.scripts || []).map((x) => ({
          dur: Math.round(x.duration), forced: Math.round(x.forcedStyleAndLayoutDuration || 0),
          src: `${(x.sourceURL || '').split('/').pop()}:${x.sourceFunctionName || x.invoker || ''}`,
        })).sort((a, b) => b.dur - a.dur).slice(0, 3);
        window.__loaf.push({
          start: Math.round(e.startTime), dur: Math.round(e.duration),
          script: Math.round((e.scripts || []).reduce((m, x) => m + x.duration, 0)),
          forced: Math.round((e.scripts || []).reduce((m, x) => m + (x.forcedStyleAndLayoutDuration || 0), 0)),
          styleLayout: e.styleAndLayoutStart ? Math.round(end - e.styleAndLayoutStart) : 0,
          render: e.renderStart ? Math.round(end - e.renderStart) : 0,
          scripts,
        });
      }
    }).observe({ type: 'long-animation-frame', buffered: true });
  } catch (_) { /* no LoAF */ }
  // Requests in flight (resource timing lists a request only once it has ended).
  window.__pending = 0;
  window.__lastNet = 0;
  const realFetch = window.fetch;
  window.fetch = function (...args) {
    window.__pending++;
    window.__lastNet = performance.now();
    const done = () => { window.__pending--; window.__lastNet = performance.now(); };
    const p = realFetch.apply(this, args);
    p.then(done, done);
    return p;
  };
  window.__marks = {};
  document.addEventListener('submit', (e) => { if (e.target && e.target.id === 'signin-form') window.__marks.submit = performance.now(); }, true);
  let realL;
  Object.defineProperty(window, 'L', {
    configurable: true,
    get() { return realL; },
    set(v) {
      realL = v;
      try { if (v && v.Map && !v.__hooked) { v.__hooked = true; v.Map.addInitHook(function () { window.__wmMap = this; }); } } catch (_) { /* leave it */ }
    },
  });
  window.__samples = [];
  window.__gaps = []; // [frame start, gap ms] for gaps over 50 ms
  let last = '';
  let prevFrame = 0;
  const byClass = (c) => document.getElementsByClassName(c);
  let users; let clusters; let fences; let fenceLabels;
  const clusterGroup = () => {
    const m = window.__wmMap;
    if (!m) return null;
    if (window.__cluster) return window.__cluster;
    for (const l of Object.values(m._layers || {})) if (realL.MarkerClusterGroup && l instanceof realL.MarkerClusterGroup) { window.__cluster = l; return l; }
    return null;
  };
  function tick(t) {
    if (prevFrame && t - prevFrame > 50) window.__gaps.push([prevFrame, t - prevFrame]);
    prevFrame = t;
    if (!users) { users = byClass('wm-user'); clusters = byClass('wm-cluster'); fences = byClass('wm-fence'); fenceLabels = byClass('wm-fence-label'); }
    const list = document.getElementById('inview');
    const listed = list ? list.getElementsByTagName('button').length : 0;
    const cg = clusterGroup();
    const loaded = cg && cg._topClusterLevel ? cg._topClusterLevel._childCount : 0;
    const notice = document.getElementById('map-notice');
    const noticeText = notice && !notice.hidden ? notice.textContent : '';
    const unnamed = listed && list ? /User [0-9a-f]{6}…/.test(list.textContent) : true;
    const s = [users.length, clusters.length, listed, fences.length, loaded, unnamed ? 0 : 1, noticeText].join('|');
    if (s !== last) {
      last = s;
      window.__samples.push({ t, users: users.length, clusters: clusters.length, listed, fences: fences.length, labels: fenceLabels.length, loaded, named: !unnamed, notice: noticeText });
    }
    requestAnimationFrame(tick);
  }
  requestAnimationFrame(tick);
}

function kind(url) {
  const u = new URL(url);
  const p = u.pathname;
  if (p.startsWith('/console/assets/')) return 'assets';
  if (p === '/console/' || p === '/console') return 'page';
  if (p.startsWith('/v1/api/console/sessions')) return 'session';
  if (p.startsWith('/v1/api/streams/')) return 'stream token';
  if (p.startsWith('/v1/api/users/positions')) return 'positions';
  if (p.startsWith('/v1/api/search/geofences')) return 'fence search';
  if (p.startsWith('/v1/api/geofences/in-view')) return 'fences in view';
  if (p === '/v1/api/user/' && u.searchParams.get('user_id')) return 'user lookups';
  if (p === '/v1/api/user/') return 'user list';
  if (p === '/v1/api/geofence/') return 'fence list';
  return p;
}

function summarize(resources, from, to) {
  const sel = resources.filter((r) => r.startTime >= from && r.startTime <= to);
  const by = {};
  for (const r of sel) {
    const k = kind(r.name);
    const b = by[k] || (by[k] = { n: 0, bytes: 0, body: 0, start: Infinity, end: 0, sum: 0, max: 0, maxUrl: '' });
    b.n++;
    b.bytes += r.transferSize || 0;
    b.body += r.decodedBodySize || 0;
    b.start = Math.min(b.start, r.startTime);
    b.end = Math.max(b.end, r.responseEnd);
    b.sum += r.duration;
    if (r.duration > b.max) { b.max = r.duration; b.maxUrl = r.name.replace(BASE, ''); }
  }
  return { n: sel.length, bytes: sel.reduce((s, r) => s + (r.transferSize || 0), 0), by };
}

async function state(page) {
  return page.evaluate(() => ({
    now: performance.now(),
    samples: window.__samples,
    lt: window.__lt,
    loaf: window.__loaf,
    gaps: window.__gaps,
    marks: window.__marks,
    nav: (() => { const n = performance.getEntriesByType('navigation')[0]; return n ? { dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd } : null; })(),
    resources: performance.getEntriesByType('resource').map((r) => ({
      name: r.name, startTime: r.startTime, responseEnd: r.responseEnd, duration: r.duration,
      ttfb: r.responseStart - r.requestStart, transferSize: r.transferSize, decodedBodySize: r.decodedBodySize,
    })),
    view: window.__wmMap ? (() => {
      const m = window.__wmMap; const c = m.getCenter(); const b = m.getBounds(); const s = m.getSize();
      return { lat: c.lat, lng: c.lng, zoom: m.getZoom(), bounds: [b.getWest(), b.getSouth(), b.getEast(), b.getNorth()], size: [s.x, s.y], corner: c.distanceTo(b.getNorthEast()) };
    })() : null,
  }));
}

// Waits until no request started or ended for `quietMs`, the drawn state did not change for as
// long, and `since` (page clock) is as long ago (at most `maxMs`).
async function quiet(page, since = 0, quietMs = 2000, maxMs = 90000) {
  const end = Date.now() + maxMs;
  while (Date.now() < end) {
    const q = await page.evaluate((since) => {
      const r = performance.getEntriesByType('resource');
      let lastReq = 0;
      for (const e of r) lastReq = Math.max(lastReq, e.responseEnd || e.startTime, e.startTime);
      const s = window.__samples;
      return { now: performance.now(), pending: window.__pending, lastReq: Math.max(lastReq, since, window.__lastNet), lastSample: s.length ? s[s.length - 1].t : 0 };
    }, since);
    if (!q.pending && q.now - Math.max(q.lastReq, q.lastSample) >= quietMs) return true;
    await sleep(250);
  }
  return false;
}

// When the page could next answer input after `t`: the end of any long task (chain) running at
// `t` or starting within a frame of it. The sampler's frame time is taken before that frame's
// style, layout and paint, which is where thousands of new fence labels cost their time.
function responsiveAfter(lt, t) {
  if (t == null) return null;
  let cur = t;
  for (const [start, dur] of lt.slice().sort((a, b) => a[0] - b[0])) {
    if (start <= cur + 20 && start + dur > cur) cur = start + dur;
  }
  return cur;
}

const usersShown = (s) => (s.users + s.clusters > 0 && s.listed > 0) || /Zoom in to load users/.test(s.notice);

function analyseLoad(st, from) {
  const S = st.samples.filter((s) => s.t >= from);
  const tUsers = (S.find(usersShown) || {}).t;
  const tFences = (S.find((s) => s.fences > 0) || {}).t;
  const tReady = tUsers != null && tFences != null ? Math.max(tUsers, tFences) : null;
  const lastDraw = (() => {
    let t = null; let prev = null;
    for (const s of S) {
      const k = [s.users, s.clusters, s.fences, s.loaded].join('|');
      if (k !== prev) { t = s.t; prev = k; }
    }
    return t;
  })();
  const named = S.find((s) => s.named && s.listed > 0);
  const end = S.length ? S[S.length - 1] : {};
  const longest = (a, b) => st.lt.filter(([t]) => t >= a && t <= b).reduce((m, [, d]) => Math.max(m, d), 0);
  const gaps = (a, b) => st.gaps.filter(([t]) => t >= a && t <= b).reduce((m, [, d]) => Math.max(m, d), 0);
  const tResponsive = responsiveAfter(st.lt, tReady);
  const tSettledResponsive = responsiveAfter(st.lt, lastDraw);
  return { tUsers, tFences, tReady, tResponsive, tSettled: lastDraw, tSettledResponsive, tNamed: named ? named.t : null, end, longest, gaps };
}

function pointIn(b, lng, lat) { return lng >= b[0] && lng <= b[2] && lat >= b[1] && lat <= b[3]; }
function meters(lat1, lng1, lat2, lng2) {
  const dx = (lng2 - lng1) * 111320 * Math.cos(lat1 * Math.PI / 180);
  const dy = (lat2 - lat1) * 110540;
  return Math.hypot(dx, dy);
}

// The zoom at which the seeded box fits a map of `size` (Web Mercator, 256 px tiles).
function fitZoom(size) {
  const [w, s, e, n] = seed.box;
  const y = (lat) => { const k = Math.sin(lat * Math.PI / 180); return 0.5 - Math.log((1 + k) / (1 - k)) / (4 * Math.PI); };
  const zx = Math.log2(size[0] / ((e - w) / 360 * 256));
  const zy = Math.log2(size[1] / ((y(s) - y(n)) * 256));
  return Math.floor(Math.min(zx, zy));
}

async function liveSend(users, rate, seconds) {
  const order = users.slice();
  let k = 0;
  const lastSent = new Map();
  const stats = { sent: 0, ok: 0, failed: 0, skipped: 0, lat: [] };
  const inflight = new Set();
  const started = Date.now();
  const tick = 50;
  const perTick = rate * tick / 1000;
  let due = 0;
  for (let i = 0; Date.now() - started < seconds * 1000; i++) {
    const target = started + i * tick;
    const wait = target - Date.now();
    if (wait > 0) await sleep(wait);
    due += perTick;
    while (due >= 1) {
      due -= 1;
      if (inflight.size >= MAX_INFLIGHT) { stats.skipped++; continue; }
      const [id, lng0, lat0] = order[k % order.length];
      const round = Math.floor(k / order.length) + 1;
      k++;
      const lng = +(lng0 + 0.0003 * round).toFixed(7);
      const lat = +(lat0 + 0.0001 * round).toFixed(7);
      lastSent.set(id, [lng, lat]);
      stats.sent++;
      const t0 = Date.now();
      const p = fetch(BASE + '/v1/api/location/', {
        method: 'POST', headers: { 'Content-Type': 'application/json', 'Api-Key': PK },
        body: JSON.stringify({ user_id: id, locations: [{ coordinates: [lng, lat], recorded_at: new Date().toISOString(), accuracy: 5 }] }),
      }).then(async (r) => { await r.arrayBuffer(); if (r.ok) { stats.ok++; stats.lat.push(Date.now() - t0); } else stats.failed++; })
        .catch(() => { stats.failed++; })
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
  }
  const sendEnd = Date.now();
  await Promise.all([...inflight]);
  stats.seconds = (sendEnd - started) / 1000;
  stats.drainMs = Date.now() - sendEnd;
  stats.lat.sort((a, b) => a - b);
  stats.p50 = stats.lat[Math.floor(stats.lat.length * 0.5)];
  stats.p99 = stats.lat[Math.floor(stats.lat.length * 0.99)];
  delete stats.lat;
  return { stats, lastSent };
}

async function oneRun(browser, scenario, run, cityZoom) {
  const ctx = await browser.newContext({ viewport: { width: W, height: H }, timezoneId: 'Europe/Berlin' });
  const saved = scenario === 'default' ? null : { lat: seed.center[1], lng: seed.center[0], zoom: cityZoom };
  await ctx.addInitScript(instrument, saved);
  const page = await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  let wsUpdates = 0;
  page.on('websocket', (ws) => ws.on('framereceived', (f) => {
    if (typeof f.payload === 'string' && f.payload.includes('"location.updated"')) wsUpdates++;
  }));
  const r = { scenario, run, load: fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ') };

  // (a) the first view
  await page.goto(BASE + '/console/', { waitUntil: 'load' });
  await page.fill('#signin-key', SK);
  await page.click('#signin-submit');
  await page.waitForSelector('#nav:not([hidden])');
  const done = await quiet(page);
  let st = await state(page);
  const a = analyseLoad(st, 0);
  r.view = st.view;
  r.nav = st.nav;
  r.submit = st.marks.submit;
  r.first = {
    users: a.tUsers, fences: a.tFences, ready: a.tReady, responsive: a.tResponsive, settled: a.tSettled, settledResponsive: a.tSettledResponsive, named: a.tNamed, quiet: done,
    fromSubmitReady: a.tReady != null && st.marks.submit != null ? a.tReady - st.marks.submit : null,
    fromSubmitResponsive: a.tResponsive != null && st.marks.submit != null ? a.tResponsive - st.marks.submit : null,
    longestTask: a.longest(0, st.now), longestGap: a.gaps(0, st.now),
    drawn: a.end,
    longTasks: st.lt.map(([t, d]) => [Math.round(t), Math.round(d)]),
    loaf: longestLoaf(st.loaf, 0, st.now),
    untilReady: summarize(st.resources, 0, a.tReady == null ? st.now : a.tReady),
    untilQuiet: summarize(st.resources, 0, st.now),
  };
  // What the view holds: seeded users in its box, fences within the search radius of its centre.
  if (st.view) {
    const v = st.view;
    r.first.usersInView = seed.users.filter(([, lng, lat]) => pointIn(v.bounds, lng, lat)).length;
    const radius = Math.min(10000, Math.ceil(v.corner));
    r.first.fencesInRadius = seed.fences ? seed.fences.filter(([lng, lat, rad]) => meters(v.lat, v.lng, lat, lng) <= radius + rad).length : null;
    r.first.fencesInView = seed.fences ? seed.fences.filter(([lng, lat]) => pointIn(v.bounds, lng, lat)).length : null;
  }
  await page.screenshot({ path: path.join(OUT, `console-${scenario}-${run}.png`) });

  // (b) a pan of half a screen (drag the map west: the view moves east)
  const box = await page.locator('#map').boundingBox();
  const cx = box.x + box.width * 0.75;
  const cy = box.y + box.height / 2;
  await page.mouse.move(cx, cy);
  const t0 = await page.evaluate(() => performance.now());
  await page.mouse.down();
  for (let i = 1; i <= 12; i++) await page.mouse.move(cx - (box.width / 2) * i / 12, cy);
  await page.mouse.up();
  const t1 = await page.evaluate(() => performance.now());
  await quiet(page, t1);
  st = await state(page);
  const p = analyseLoad(st, t0);
  const apiAfter = st.resources.filter((x) => x.startTime >= t0 && /positions|search\/geofences|geofences\/in-view/.test(x.name));
  const dataEnd = apiAfter.reduce((m, x) => Math.max(m, x.responseEnd), 0);
  const drawnEnd = p.tSettled != null ? p.tSettled : dataEnd;
  r.pan = {
    dragMs: t1 - t0,
    t1,
    data: dataEnd ? dataEnd - t1 : null,
    drawn: drawnEnd ? Math.max(drawnEnd, dataEnd) - t1 : null,
    responsive: drawnEnd ? responsiveAfter(st.lt, Math.max(drawnEnd, dataEnd)) - t1 : null,
    loaf: longestLoaf(st.loaf, t0, st.now),
    longTaskMs: st.lt.filter(([t]) => t >= t0).reduce((m, [, d]) => m + d, 0),
    longestTask: p.longest(t0, st.now),
    longestGap: p.gaps(t0, st.now),
    requests: summarize(st.resources, t0, st.now),
    drawnState: p.end,
  };
  r.view2 = st.view;

  // (c) live: fixes to users in view while the page draws them
  if (LIVE && scenario === 'default') {
    await page.waitForSelector('#live-state[data-state="live"]', { timeout: 15000 }).catch(() => {});
    const b = st.view.bounds;
    const inView = seed.users.filter(([, lng, lat]) => pointIn(b, lng, lat));
    wsUpdates = 0;
    const l0 = await page.evaluate(() => performance.now());
    const { stats, lastSent } = await liveSend(inView, LIVE_RATE, LIVE_SECONDS);
    const l1 = await page.evaluate(() => performance.now());
    const want = [...lastSent.values()].map(([lng, lat]) => `${lat.toFixed(6)},${lng.toFixed(6)}`);
    // Until every user sent to shows at its latest fix (markers in the cluster), at most 15 s.
    let atLatest = 0;
    let caughtUp = null;
    const waitEnd = Date.now() + 15000;
    while (Date.now() < waitEnd) {
      atLatest = await page.evaluate((w) => {
        const c = window.__cluster;
        if (!c) return 0;
        const set = new Set(w);
        let n = 0;
        for (const m of c.getLayers()) { const ll = m.getLatLng(); if (set.has(`${ll.lat.toFixed(6)},${ll.lng.toFixed(6)}`)) n++; }
        return n;
      }, want);
      if (atLatest >= want.length) { caughtUp = (await page.evaluate(() => performance.now())) - l1; break; }
      await sleep(200);
    }
    await sleep(500);
    st = await state(page);
    r.live = {
      usersInView: inView.length, ...stats, rate: stats.ok / stats.seconds,
      received: wsUpdates, usersSent: want.length, atLatest, caughtUpMs: caughtUp,
      longestTask: st.lt.filter(([t]) => t >= l0 && t <= st.now).reduce((m, [, d]) => Math.max(m, d), 0),
      longTasks: st.lt.filter(([t]) => t >= l0 && t <= st.now).length,
      longestGap: st.gaps.filter(([t]) => t >= l0 && t <= st.now).reduce((m, [, d]) => Math.max(m, d), 0),
      requestsDuring: st.resources.filter((x) => x.startTime >= l0 && x.startTime <= l1).length,
      loaf: longestLoaf(st.loaf, l0, st.now),
    };
  }
  r.errors = errors;
  await ctx.close();
  return r;
}

const longestLoaf = (loaf, a, b) => (loaf || []).filter((e) => e.start >= a && e.start <= b).sort((x, y) => y.dur - x.dur)[0] || null;
const loafText = (e) => `${e.dur} ms at ${e.start} ms: scripts ${e.script} ms (forced style/layout ${e.forced} ms), then style/layout/paint ${e.styleLayout} ms; ` +
  e.scripts.map((x) => `${x.src} ${x.dur} ms (forced ${x.forced})`).join(', ');
const ms = (x) => (x == null ? '–' : `${Math.round(x).toLocaleString('en')} ms`);
const kb = (x) => (x == null ? '–' : `${(x / 1024).toLocaleString('en', { maximumFractionDigits: 0 })} KB`);

async function main() {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const results = [];
  let cityZoom = 12;
  for (const scenario of SCENARIOS) {
    const runs = scenario === 'cityfit' ? 1 : RUNS;
    for (let run = 1; run <= runs; run++) {
      const z = scenario === 'cityfit' ? (results[0] && results[0].view ? fitZoom(results[0].view.size) : 11) : cityZoom;
      const r = await oneRun(browser, scenario, run, z);
      results.push(r);
      const f = r.first;
      console.log(`${scenario} #${run} (load ${r.load}): view z${r.view && r.view.zoom} at ${r.view && r.view.lat.toFixed(4)},${r.view && r.view.lng.toFixed(4)} ` +
        `(${r.view && r.view.size.join('x')} px); users ${ms(f.users)}, fences ${ms(f.fences)}, ready ${ms(f.ready)} (${ms(f.fromSubmitReady)} from submit; responsive again ${ms(f.responsive)}), submit at ${ms(r.submit)}, ` +
        `settled ${ms(f.settled)}, named ${ms(f.named)}; ${f.untilReady.n} requests / ${kb(f.untilReady.bytes)} until ready, ${f.untilQuiet.n} / ${kb(f.untilQuiet.bytes)} until quiet; ` +
        `drawn ${f.drawn.loaded} markers (${f.drawn.users} + ${f.drawn.clusters} clusters shown), ${f.drawn.fences} fences of ${f.fencesInRadius} in the search circle (${f.fencesInView} in the box), ` +
        `${f.usersInView} seeded users in view; notice "${f.drawn.notice}"; longest task ${ms(f.longestTask)}`);
      if (f.loaf) console.log(`    longest frame: ${loafText(f.loaf)}`);
      for (const [k, b] of Object.entries(f.untilQuiet.by)) {
        console.log(`    ${k}: ${b.n} req, ${kb(b.bytes)}, ${ms(b.start)}..${ms(b.end)}, longest ${ms(b.max)} ${b.maxUrl.slice(0, 110)}`);
      }
      console.log(`  pan: data ${ms(r.pan.data)}, drawn ${ms(r.pan.drawn)}, responsive again ${ms(r.pan.responsive)} after release; longest task ${ms(r.pan.longestTask)}, longest frame gap ${ms(r.pan.longestGap)}; ` +
        `${r.pan.requests.n} requests / ${kb(r.pan.requests.bytes)}; drawn ${r.pan.drawnState.loaded} markers, ${r.pan.drawnState.fences} fences`);
      if (r.pan.loaf) console.log(`    longest frame: ${loafText(r.pan.loaf)}`);
      for (const [k, b] of Object.entries(r.pan.requests.by)) {
        console.log(`    ${k}: ${b.n} req, ${kb(b.bytes)}, ${ms(b.start - r.pan.t1)}..${ms(b.end - r.pan.t1)} after release, longest ${ms(b.max)} ${b.maxUrl.slice(0, 110)}`);
      }
      if (r.live) {
        const l = r.live;
        console.log(`  live: ${l.ok}/${l.sent} fixes in ${l.seconds.toFixed(1)} s (${l.rate.toFixed(0)}/s of ${LIVE_RATE}/s offered: ${l.skipped} skipped with ${MAX_INFLIGHT} in flight; p50 ${l.p50} ms, p99 ${l.p99} ms, failed ${l.failed}) to ${l.usersSent} of ${l.usersInView} users in view; ` +
          `received ${l.received} location.updated; ${l.atLatest}/${l.usersSent} markers at their latest fix (caught up ${ms(l.caughtUpMs)} after the last send); ` +
          `longest task ${ms(l.longestTask)} (${l.longTasks} long tasks), longest frame gap ${ms(l.longestGap)}; ${l.requestsDuring} page requests meanwhile`);
      }
      if (r.live && r.live.loaf) console.log(`    longest frame: ${loafText(r.live.loaf)}`);
      if (r.errors.length) console.log('  page errors: ' + r.errors.join('; '));
    }
  }
  await browser.close();
  fs.writeFileSync(path.join(OUT, 'results.json'), JSON.stringify(results, null, 1));

  // The table: medians per scenario.
  const rows = [];
  for (const scenario of SCENARIOS) {
    const rs = results.filter((r) => r.scenario === scenario);
    const m = (f) => median(rs.map(f));
    const v = rs[0].view;
    const label = scenario === 'default' ? `console's first view (z${v.zoom})` : `city, z${v.zoom}`;
    rows.push([`${label}: nav → users drawn and listed`, ms(m((r) => r.first.users))]);
    rows.push([`${label}: nav → fences drawn`, ms(m((r) => r.first.fences))]);
    rows.push([`${label}: **nav → ready** (both; goal 2 s)`, `**${ms(m((r) => r.first.ready))}**`]);
    rows.push([`${label}: nav → page ready for sign-in (load event) / sign-in submitted`, `${ms(m((r) => r.nav && r.nav.load))} / ${ms(m((r) => r.submit))}`]);
    rows.push([`${label}: sign-in submit → ready (drawn in the DOM)`, ms(m((r) => r.first.fromSubmitReady))]);
    rows.push([`${label}: **sign-in submit → responsive** (the long task drawing it ended)`, `**${ms(m((r) => r.first.fromSubmitResponsive))}**`]);
    rows.push([`${label}: nav → all drawn (settled)`, ms(m((r) => r.first.settled))]);
    rows.push([`${label}: nav → listed users named`, ms(m((r) => r.first.named))]);
    rows.push([`${label}: requests / bytes until ready`, `${m((r) => r.first.untilReady.n)} / ${kb(m((r) => r.first.untilReady.bytes))}`]);
    rows.push([`${label}: requests / bytes until quiet`, `${m((r) => r.first.untilQuiet.n)} / ${kb(m((r) => r.first.untilQuiet.bytes))}`]);
    rows.push([`${label}: longest task, first view`, ms(m((r) => r.first.longestTask))]);
    rows.push([`${label}: markers loaded / fences drawn (of in radius)`, `${m((r) => r.first.drawn.loaded)} / ${m((r) => r.first.drawn.fences)} (of ${m((r) => r.first.fencesInRadius)})`]);
    rows.push([`${label}: pan ½ screen → data loaded`, ms(m((r) => r.pan.data))]);
    rows.push([`${label}: pan ½ screen → drawn / responsive again`, `${ms(m((r) => r.pan.drawn))} / ${ms(m((r) => r.pan.responsive))}`]);
    rows.push([`${label}: pan, longest task / frame gap`, `${ms(m((r) => r.pan.longestTask))} / ${ms(m((r) => r.pan.longestGap))}`]);
    if (rs[0].live) {
      rows.push([`live: fixes stored a second (${LIVE_RATE}/s offered, ${MAX_INFLIGHT} in flight)`, `${Math.round(m((r) => r.live.rate))}/s (p50 ${m((r) => r.live.p50)} ms, p99 ${m((r) => r.live.p99)} ms)`]);
      rows.push([`live: location.updated received / fixes sent`, `${m((r) => r.live.received)} / ${m((r) => r.live.ok)}`]);
      rows.push([`live: markers at latest fix / users sent to`, `${m((r) => r.live.atLatest)} / ${m((r) => r.live.usersSent)}`]);
      rows.push([`live: caught up after the last send`, ms(m((r) => r.live.caughtUpMs))]);
      rows.push([`live: longest task / frame gap`, `${ms(m((r) => r.live.longestTask))} / ${ms(m((r) => r.live.longestGap))}`]);
    }
  }
  console.log(`\n| What (median of ${RUNS} runs; ${seed.users.length.toLocaleString('en')} users, ${(seed.fences ? seed.fences.length : 0).toLocaleString('en')} fences, 1280 x 800) | Figure |`);
  console.log('|---|---|');
  for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
}

main().catch((e) => { console.error(e); process.exit(1); });
