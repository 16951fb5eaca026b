// End-to-end check of the trip tracking page in headless Chromium (driven by playwright-core).
// Run by functions/local/tests/browser.rs, which starts `waymark serve --memory` and sets:
// WAYMARK_BASE, WAYMARK_API_KEY, WAYMARK_PUBLISHABLE_KEY, PLAYWRIGHT_CORE,
// ARTIFACTS (screenshot folder). Exits non-zero on the first failed check.
'use strict';
const fs = require('fs');
const path = require('path');
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const AXE = fs.readFileSync(path.join(process.env.PLAYWRIGHT_CORE, '..', 'axe-core', 'axe.min.js'), 'utf8');

const BASE = process.env.WAYMARK_BASE;
const ART = process.env.ARTIFACTS;
const SK = process.env.WAYMARK_API_KEY;
const PK = process.env.WAYMARK_PUBLISHABLE_KEY;

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
  console.log('ok - ' + what);
}

async function api(method, p, body, headers) {
  const res = await fetch(BASE + p, {
    method,
    headers: Object.assign({ 'Content-Type': 'application/json' }, headers),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch (_) { /* not JSON */ }
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return json;
}
const secret = { 'Api-Key': SK };

// A drive through Berlin: depot -> customer (a stop of a few minutes) -> drop-off.
const M = 111320;
const depot = [13.37700, 52.51630];
const customer = [13.39900, 52.51630];
const dropoff = [13.39900, 52.52650];
function dist(a, b) {
  const dx = (b[0] - a[0]) * M * Math.cos(a[1] * Math.PI / 180);
  const dy = (b[1] - a[1]) * M;
  return Math.hypot(dx, dy);
}
function iso(ms) { return new Date(ms).toISOString().replace('Z', ''); }
function drive(fixes, from, to, speed, step, t) {
  const n = Math.max(1, Math.round(dist(from, to) / (speed * step)));
  for (let i = 1; i <= n; i++) {
    const f = i / n;
    t += step * 1000;
    fixes.push({ coordinates: [from[0] + (to[0] - from[0]) * f, from[1] + (to[1] - from[1]) * f],
      recorded_at: iso(t), accuracy: 5 });
  }
  return t;
}
function stay(fixes, at, seconds, step, t) {
  for (let s = step; s <= seconds; s += step) {
    t += step * 1000;
    const j = (s % 3) - 1;
    fixes.push({ coordinates: [at[0] + j * 0.00002, at[1] + j * 0.00001], recorded_at: iso(t), accuracy: 5 });
  }
  return t;
}
async function ingest(user, fixes) {
  for (let i = 0; i < fixes.length; i += 40) {
    await api('POST', '/v1/api/location/', { user_id: user, locations: fixes.slice(i, i + 40) }, { 'Api-Key': PK });
  }
}

async function main() {
  fs.mkdirSync(ART, { recursive: true });
  // Recent enough that the latest fix is fresh (an ETA needs a fix under 10 minutes old).
  const t0 = Date.now() - 12 * 60 * 1000;
  const batch1 = [];
  let t = stay(batch1, depot, 60, 10, t0);
  t = drive(batch1, depot, customer, 10, 10, t);
  t = stay(batch1, customer, 240, 10, t);
  const mid = [customer[0], (customer[1] + dropoff[1]) / 2];
  t = drive(batch1, customer, mid, 10, 10, t);
  const batch2 = [];
  t = drive(batch2, mid, dropoff, 10, 10, t);
  t = stay(batch2, dropoff, 120, 10, t);

  // A user and a v3 trip (an origin and two destinations), started, the first batch in.
  const user = (await api('POST', '/v1/api/user/', { app_type: 1, device_token: 't', metadata: { secret: 'hidden-meta' } }, secret)).data.user_id;
  const created = await api('POST', '/v3/api/trips/', {
    user_id: user, origins: [depot], destinations: [customer, dropoff], metadata: { order: 'hidden-order-42' },
  }, secret);
  const trip = created.data[0];
  const url = trip.trip_tracking_url;
  check(/\/track\/[0-9a-f]{32}$/.test(url) && url.startsWith(BASE), 'trip_tracking_url is ' + url);
  const control = (body) => api('POST', '/v3/api/trips/controls/', Object.assign({ trip_id: trip.id }, body), secret);
  await control({ action: 'start', started_at: iso(t0) });
  await ingest(user, batch1);

  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const problems = [];
  const dataRequests = [];
  async function open(width, height, mobile, extra) {
    const ctx = await browser.newContext(Object.assign({ viewport: { width, height }, isMobile: mobile, hasTouch: mobile,
      deviceScaleFactor: mobile ? 2 : 1 }, extra || {}));
    const page = await ctx.newPage();
    page.on('console', (m) => { if (m.type() === 'error') problems.push(`console (${width}px): ${m.text()}`); });
    page.on('pageerror', (e) => problems.push(`page error (${width}px): ${e.message}`));
    page.on('request', (r) => {
      if (!r.url().startsWith(BASE + '/') && !r.url().startsWith('data:')) problems.push('request off the server: ' + r.url());
      if (r.url().endsWith('/data')) dataRequests.push({ width, at: Date.now() });
    });
    const res = await page.goto(url, { waitUntil: 'load' });
    return { ctx, page, res, width };
  }

  // axe-core in the page (evaluated over the DevTools protocol, which the page's CSP does not
  // govern): every rule axe runs by default, WCAG 2.x A/AA and best practices.
  async function axe(page, name) {
    await page.evaluate(AXE);
    const r = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
    const v = r.violations.map((x) => `${x.id} (${x.impact}): ${x.nodes.map((n) => n.target.join(' ')).join(', ')}`);
    fs.writeFileSync(path.join(ART, `axe-${name}.json`), JSON.stringify(r.violations, null, 2));
    console.log(`axe ${name}: ${r.violations.length} violations, ${r.passes.length} rules passed`);
    check(r.violations.length === 0, `${name}: axe-core reports no violations: ${v.join('; ')}`);
  }

  // Bytes transferred on the first load (cache empty: a fresh context) and time to first render.
  async function weight(page) {
    return page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      const res = performance.getEntriesByType('resource');
      const fcp = performance.getEntriesByName('first-contentful-paint')[0];
      return {
        bytes: nav.transferSize + res.reduce((a, r) => a + r.transferSize, 0),
        requests: 1 + res.length,
        first_contentful_paint_ms: fcp ? Math.round(fcp.startTime) : null,
        dom_content_loaded_ms: Math.round(nav.domContentLoadedEventEnd),
        load_ms: Math.round(nav.loadEventEnd),
      };
    });
  }

  async function figures(page) {
    return page.evaluate(() => ({
      state: document.getElementById('state').getAttribute('data-state'),
      stateText: document.getElementById('state').textContent,
      distance: document.getElementById('distance').textContent,
      duration: document.getElementById('duration').textContent,
      lastSeen: document.getElementById('last-seen').textContent,
      updates: Number(document.getElementById('app').getAttribute('data-updates')),
      routeD: (document.querySelector('path.wm-route') || { getAttribute: () => '' }).getAttribute('d') || '',
      latest: !!document.querySelector('path.wm-latest'),
      latestD: (document.querySelector('path.wm-latest') || { getAttribute: () => '' }).getAttribute('d') || '',
      markers: document.querySelectorAll('path.wm-wp').length,
      centres: Array.from(document.querySelectorAll('path.wm-wp, path.wm-latest')).map((p) => {
        const b = p.getBBox();
        return { cls: p.getAttribute('class'), x: b.x + b.width / 2, y: b.y + b.height / 2 };
      }),
      routeEnd: (() => {
        const p = document.querySelector('path.wm-route');
        if (!p) return null;
        const e = p.getPointAtLength(p.getTotalLength());
        return { x: e.x, y: e.y };
      })(),
      reachedMarkers: document.querySelectorAll('path.wm-wp-reached.wm-wp').length,
      pins: Array.from(document.querySelectorAll('.wm-num')).map((p) => ({ n: p.textContent, reached: p.classList.contains('reached') })),
      tips: Array.from(document.querySelectorAll('.wm-tip')).map((t) => t.textContent),
      eta: document.getElementById('eta').hidden ? '' : document.getElementById('eta').textContent,
      ended: document.getElementById('ended').textContent,
      scale: !!document.querySelector('.leaflet-control-scale-line'),
      items: Array.from(document.querySelectorAll('#waypoints li')).map((li) => ({
        text: li.textContent, reached: li.getAttribute('data-reached'), left: li.getAttribute('data-left') })),
      body: document.body.innerText,
      scrollWidth: document.documentElement.scrollWidth,
      map: document.getElementById('map').getBoundingClientRect().toJSON(),
      panel: document.querySelector('.panel').getBoundingClientRect().toJSON(),
    }));
  }
  const px = (a, b) => Math.hypot(a.x - b.x, a.y - b.y);
  const latestOf = (f) => f.centres.find((c) => c.cls.includes('wm-latest'));
  const dropoffOf = (f) => f.centres.filter((c) => c.cls.includes('wm-wp '))[2];
  const points = (d) => (d.match(/[ML]/g) || []).length;

  // Every text the live region says, with its time (an observer in the page).
  async function listen(page) {
    await page.evaluate(() => {
      const el = document.getElementById('live');
      window.__said = [];
      new MutationObserver(() => window.__said.push({ at: Date.now(), text: el.textContent }))
        .observe(el, { childList: true, characterData: true, subtree: true });
      // And when the page showed each distance.
      const d = document.getElementById('distance');
      window.__shown = {};
      new MutationObserver(() => { window.__shown[d.textContent] = window.__shown[d.textContent] || Date.now(); })
        .observe(d, { childList: true, characterData: true, subtree: true });
    });
  }
  const said = (page) => page.evaluate(() => window.__said);

  // WCAG contrast of two [r, g, b] colours.
  function contrast(a, b) {
    const lum = (c) => {
      const [r, g, bl] = c.map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
      return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
    };
    const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  }
  // For each place number on the map: the lowest contrast between its text colour and what is on
  // screen under its glyphs (the text made transparent, the glyphs' box captured, every pixel
  // compared), whatever marker or dot lies beneath.
  const decoder = await browser.newPage();
  async function numberContrast(page) {
    const boxes = await page.evaluate(() => Array.from(document.querySelectorAll('.wm-num')).map((el) => {
      const range = document.createRange();
      range.selectNodeContents(el);
      const b = range.getBoundingClientRect();
      const color = getComputedStyle(el).color.match(/\d+/g).slice(0, 3).map(Number);
      return { n: el.textContent, color, x: b.x + window.scrollX, y: b.y + window.scrollY, width: b.width, height: b.height };
    }));
    await page.evaluate(() => document.querySelectorAll('.wm-num').forEach((el) => { el.style.color = 'transparent'; }));
    const shots = [];
    for (const b of boxes) {
      const clip = { x: b.x, y: b.y, width: b.width, height: b.height };
      shots.push((await page.screenshot({ clip, fullPage: true })).toString('base64'));
    }
    await page.evaluate(() => document.querySelectorAll('.wm-num').forEach((el) => { el.style.color = ''; }));
    const under = await decoder.evaluate(async (pngs) => Promise.all(pngs.map(async (b64) => {
      const img = new Image();
      img.src = 'data:image/png;base64,' + b64;
      await img.decode();
      const c = document.createElement('canvas');
      c.width = img.width;
      c.height = img.height;
      const g = c.getContext('2d');
      g.drawImage(img, 0, 0);
      const px = g.getImageData(0, 0, c.width, c.height).data;
      const seen = {};
      for (let i = 0; i < px.length; i += 4) seen[px[i] + ',' + px[i + 1] + ',' + px[i + 2]] = 1;
      return Object.keys(seen).map((k) => k.split(',').map(Number));
    })), shots);
    return boxes.map((b, i) => {
      let worst = Infinity, at = null;
      for (const p of under[i]) { const c = contrast(b.color, p); if (c < worst) { worst = c; at = p; } }
      return { n: b.n, contrast: Math.round(worst * 100) / 100, under: at && 'rgb(' + at.join(',') + ')' };
    });
  }

  const phone = await open(375, 812, true);
  const w = await weight(phone.page);
  console.log(`first load (phone, empty cache): ${w.bytes} bytes in ${w.requests} requests; first contentful paint ${w.first_contentful_paint_ms} ms; DOMContentLoaded ${w.dom_content_loaded_ms} ms; load ${w.load_ms} ms`);
  fs.writeFileSync(path.join(ART, 'first-load.json'), JSON.stringify(w, null, 2));
  check(w.bytes > 0 && w.bytes < 400000, `first load under 400 kB (${w.bytes} bytes)`);

  // Scripts off: the server's first view alone tells the state, the ETA and the places.
  const still = await open(375, 812, true, { javaScriptEnabled: false });
  const plain = await still.page.evaluate(() => document.body.innerText);
  check(/On the way/.test(plain) && /Arriving (around \d\d:\d\d UTC|now)/.test(plain) && /Distance so far\s+\d/.test(plain) &&
    /Origin\s+Arrived \d\d:\d\d UTC, departed/.test(plain) && /Not reached yet/.test(plain),
    'scripts off: state, ETA, figures and places are on the page: ' + plain.replace(/\s+/g, ' '));
  await still.page.screenshot({ path: path.join(ART, 'tracking-phone-noscript.png'), fullPage: true });
  await still.ctx.close();
  const desk = await open(1280, 800, false);
  for (const [name, v, width] of [['phone', phone, 375], ['desktop', desk, 1280]]) {
    const h = v.res.headers();
    check(v.res.status() === 200, `${name}: page is 200`);
    check((h['content-security-policy'] || '').includes("default-src 'none'") &&
      (h['content-security-policy'] || '').includes("script-src 'self'"), `${name}: CSP ${h['content-security-policy']}`);
    check(h['referrer-policy'] === 'no-referrer', `${name}: Referrer-Policy no-referrer`);
    check(h['cache-control'] === 'no-store', `${name}: Cache-Control no-store`);
    await v.page.waitForSelector('path.wm-route');
    const f = await figures(v.page);
    check(f.state === 'started' && f.stateText === 'On the way', `${name}: state ${f.state} (${f.stateText})`);
    check(points(f.routeD) >= 3, `${name}: route drawn with ${points(f.routeD)} points`);
    check(px(f.routeEnd, latestOf(f)) < 2, `${name}: latest position marker at the end of the route`);
    check(px(latestOf(f), dropoffOf(f)) > 30, `${name}: latest position not yet at the drop-off`);
    check(f.latest, `${name}: latest position marker`);
    check(f.markers === 3, `${name}: origin and destination markers (${f.markers})`);
    check(f.reachedMarkers === 2, `${name}: two places reached on the map (${f.reachedMarkers})`);
    check(f.scale, `${name}: scale bar`);
    check(f.pins.map((p) => p.n).join() === '1,2,3' && f.pins.filter((p) => p.reached).length === 2,
      `${name}: pins numbered 1-3 as the list, two reached: ${JSON.stringify(f.pins)}`);
    check(/^Arriving (around \d|now)/.test(f.eta), `${name}: ETA ${f.eta}`);
    if (name === 'desktop') {
      check(f.tips.length === 3 && /^1\. Origin \(departed\)$/.test(f.tips[0]) && /^3\. Destination \(not reached yet\)$/.test(f.tips[2]),
        `desktop: places named on the map with their state: ${JSON.stringify(f.tips)}`);
      // A refresh that changes no place keeps the same labels (they would fade out and in).
      await v.page.evaluate(() => document.querySelectorAll('.wm-tip').forEach((t) => t.setAttribute('data-seen', '1')));
      // On its stream the page reads its data only when something changed: two reads on demand.
      for (let i = 0; i < 2; i++) {
        await v.page.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
        await v.page.waitForTimeout(300);
      }
      await v.page.waitForFunction((n) => Number(document.getElementById('app').getAttribute('data-updates')) > n + 1, f.updates, { timeout: 10000 });
      const kept = await v.page.evaluate(() => Array.from(document.querySelectorAll('.wm-tip')).map((t) => t.getAttribute('data-seen')));
      check(kept.length === 3 && kept.every((k) => k === '1'), `desktop: labels kept across refreshes: ${JSON.stringify(kept)}`);
    }
    check(/^\d+(\.\d+)? k?m$/.test(f.distance) && f.distance !== '0 m', `${name}: distance ${f.distance}`);
    check(/min|h/.test(f.duration), `${name}: duration ${f.duration}`);
    check(/ago|just now/.test(f.lastSeen), `${name}: last position ${f.lastSeen}`);
    check(f.items.length === 3, `${name}: three planned places listed`);
    check(f.items[0].reached === 'true' && f.items[0].left === 'true' && /Arrived .* departed /.test(f.items[0].text),
      `${name}: origin arrived and departed: ${f.items[0].text}`);
    check(f.items[1].reached === 'true' && f.items[1].left === 'true', `${name}: customer arrived and departed: ${f.items[1].text}`);
    check(f.items[2].reached === 'false' && /Not reached yet/.test(f.items[2].text), `${name}: drop-off not reached: ${f.items[2].text}`);
    check(!/hidden-meta|hidden-order/.test(f.body) && !f.body.includes(user) && !f.body.includes(trip.id),
      `${name}: no user id, trip id, name or metadata on the page`);
    check(f.scrollWidth <= width, `${name}: no horizontal scrolling (${f.scrollWidth} px)`);
    if (name === 'phone') {
      check(f.map.width >= 370 && f.panel.top >= f.map.bottom - 1, 'phone: full-width map above the figures');
    } else {
      check(f.panel.left >= f.map.right - 1 && f.map.width > 800, 'desktop: figures panel beside the map');
    }
    await v.page.screenshot({ path: path.join(ART, `tracking-${name}.png`), fullPage: name === 'phone' });
    await axe(v.page, name);
    await listen(v.page);
    v.before = f;
  }
  const html = await (await fetch(url)).text();
  check(!html.includes(user) && !html.includes(trip.id) && !html.includes('hidden-order') && !html.includes(SK) &&
    !html.includes(PK), 'page source has no ids, keys or metadata');

  // Both pages follow the trip's stream (docs/streams.md): while it is open and nothing happens,
  // not one data request (polling asked every second).
  for (const [name, v] of [['phone', phone], ['desktop', desk]]) {
    await v.page.waitForFunction(() => document.getElementById('app').getAttribute('data-stream') === 'open', null, { timeout: 10000 })
      .catch(() => check(false, `${name}: the trip's stream opened`));
  }
  const quietFrom = dataRequests.length;
  await new Promise((r) => setTimeout(r, 3500));
  check(dataRequests.length === quietFrom, `stream open: no data requests in 3.5 s of quiet (${dataRequests.length - quietFrom}; polling would have made 7)`);
  // The stream refused (the WebSocket blocked): the page falls back to polling.
  const blockedCtx = await browser.newContext({ viewport: { width: 375, height: 812 } });
  const blocked = await blockedCtx.newPage();
  await blocked.routeWebSocket(/\/streams\/ws\//, (ws) => ws.close());
  let blockedPolls = 0;
  blocked.on('request', (r) => { if (r.url().endsWith('/data')) blockedPolls += 1; });
  await blocked.goto(url, { waitUntil: 'load' });
  await blocked.waitForFunction(() => document.getElementById('app').getAttribute('data-stream') === 'closed', null, { timeout: 10000 })
    .catch(() => {});
  const pollsFrom = blockedPolls;
  await new Promise((r) => setTimeout(r, 3500));
  check(blockedPolls - pollsFrom >= 2, `stream refused: the page polls instead (${blockedPolls - pollsFrom} data requests in 3.5 s)`);
  await blockedCtx.close();

  // Part of the second batch: the courier drives on. The live region says the new distance (state,
  // ETA and distance as on the page): at once when nothing was said since the page opened, else
  // when its quiet interval (10 s) ends. The ETA moves with the clock, so an ETA-only change may
  // be said too (just before the drive on, which then waits its interval): up to 20 s, and the
  // new distance said exactly once.
  const onTheWay = (page) => page.evaluate(() => {
    const eta = document.getElementById('eta');
    return [document.getElementById('state').textContent].concat(eta.hidden ? [] : [eta.textContent])
      .concat(['Distance so far ' + document.getElementById('distance').textContent]).join('. ') + '.';
  });
  const saying = (all, distance) => all.filter((x) => x.text.endsWith(`Distance so far ${distance}.`));
  await ingest(user, batch2.slice(0, 3));
  for (const [name, v] of [['phone', phone], ['desktop', desk]]) {
    await v.page.waitForFunction((d) => document.getElementById('distance').textContent !== d, v.before.distance, { timeout: 10000 });
    const distance = await v.page.textContent('#distance');
    await v.page.waitForFunction((t) => window.__said.some((x) => x.text.endsWith(t)), `Distance so far ${distance}.`, { timeout: 20000 })
      .catch(() => {});
    const all = await said(v.page);
    const now = await onTheWay(v.page);
    const first = saying(all, distance);
    check(first.length === 1 && first[0].text === now && all.every((x) => x.text.startsWith('On the way.')),
      `${name}: the live region says the drive on: ${JSON.stringify(all)} (page: ${now})`);
    v.driveOn = first[0] || { at: 0 };
  }
  // The rest reaches the drop-off within seconds: both pages show it at the next poll, the live
  // region says it only once its quiet interval is over (10 s after the last), with the latest figures.
  await ingest(user, batch2.slice(3));
  for (const [name, v] of [['phone', phone], ['desktop', desk]]) {
    await v.page.waitForFunction((n) => {
      const li = document.querySelectorAll('#waypoints li')[2];
      return Number(document.getElementById('app').getAttribute('data-updates')) > n && li && li.getAttribute('data-reached') === 'true';
    }, v.before.updates, { timeout: 20000 });
    const f = await figures(v.page);
    check(f.routeD !== v.before.routeD && px(f.routeEnd, latestOf(f)) < 2, `${name}: route redrawn, ending at the latest position`);
    check(px(latestOf(f), dropoffOf(f)) < 10, `${name}: latest position now at the drop-off`);
    check(parseFloat(f.distance) * (f.distance.endsWith('km') ? 1000 : 1) >
      parseFloat(v.before.distance) * (v.before.distance.endsWith('km') ? 1000 : 1), `${name}: distance grew (${v.before.distance} -> ${f.distance})`);
    check(f.latestD !== v.before.latestD, `${name}: latest position moved`);
    check(/Arrived/.test(f.items[2].text), `${name}: drop-off arrived: ${f.items[2].text}`);
    check(f.eta === 'Arrived', `${name}: ETA says arrived (${f.eta})`);
    check(f.pins.every((p) => p.reached), `${name}: every pin reached`);
    const shownAt = await v.page.evaluate((t) => window.__shown[t], f.distance);
    const heard = `On the way. Arrived. Distance so far ${f.distance}.`;
    await v.page.waitForFunction((t) => document.getElementById('live').textContent === t, heard, { timeout: 15000 })
      .catch(() => {});
    const all = await said(v.page);
    const last = all[all.length - 1];
    const after = all.filter((x) => x.at > v.driveOn.at);
    check(after.length === 1 && last.text === heard && last.at - v.driveOn.at >= 9900 && last.at - shownAt >= 2000,
      `${name}: the arrival is said ${last.at - v.driveOn.at} ms after the drive on, ${last.at - shownAt} ms after the page showed it: ${JSON.stringify(all)}`);
    await v.page.screenshot({ path: path.join(ART, `tracking-${name}-updated.png`), fullPage: name === 'phone' });
  }

  // Ending the trip: the pages say so (the live region at once: a new state) and stop polling.
  await control({ action: 'end' });
  const endAt = Date.now();
  const endData = await (await fetch(url + '/data')).json();
  check(endData.active === false && endData.refresh_seconds === null, `ended: refresh_seconds is null (${endData.refresh_seconds})`);
  for (const [name, v] of [['phone', phone], ['desktop', desk]]) {
    await v.page.waitForFunction(() => document.getElementById('state').getAttribute('data-state') === 'ended', null, { timeout: 20000 });
    const endedAt = Date.now();
    check(/trip ended, final figures/.test(await v.page.textContent('.updated')), `${name}: ended, final figures`);
    const f = await figures(v.page);
    check(/\(ended (just now|\d+ min ago)\)$/.test(f.ended) && f.distance !== '–' && /min|s$/.test(f.duration),
      `${name}: final figures and "ended x ago": ${f.ended}, ${f.distance}, ${f.duration}`);
    check(f.eta === '', `${name}: no ETA once ended`);
    const heard = `Ended. Distance so far ${f.distance}.`;
    await v.page.waitForFunction((t) => document.getElementById('live').textContent === t, heard, { timeout: 2000 })
      .catch(() => {});
    const live = await v.page.textContent('#live');
    check(live === heard, `${name}: live region says "${heard}" at once (it says "${live}", ${Date.now() - endedAt} ms)`);
    // Polite, not at every poll: the same state is said again only after the quiet interval
    // (10 s here, where the page polls every second), and far less often than the page polled.
    const all = await said(v.page);
    const polls = dataRequests.filter((r) => r.width === v.width).length;
    const state = (t) => t.split('.')[0];
    const tooSoon = all.filter((x, i) => i > 0 && state(x.text) === state(all[i - 1].text) && x.at - all[i - 1].at < 9900);
    // Drive on, arrival, end; an ETA-only change before the drive on may add one.
    const expected = all.length === 3 || (all.length === 4 && all[0].text.startsWith('On the way.'));
    // On the stream the page reads on news only, so announcements are not held to fewer than reads.
    check(expected && tooSoon.length === 0,
      `${name}: ${all.length} announcements over ${polls} polls, none sooner than 10 s after the last of the same state: ${JSON.stringify(all.map((x) => x.text))}`);
  }
  const settled = dataRequests.length;
  // Stable now (no more polls): every place number is legible, the drop-off's too, where the
  // latest position's dot lies on the pin.
  for (const [name, v] of [['phone', phone], ['desktop', desk]]) {
    const c = await numberContrast(v.page);
    check(c.length === 3 && c.every((x) => x.contrast >= 4.5), `${name}: place numbers at 4.5:1 or more over whatever lies beneath: ${JSON.stringify(c)}`);
  }
  await desk.page.screenshot({ path: path.join(ART, 'tracking-desktop-ended.png') });
  // The old page checked an ended trip every 10 intervals (10 s here): 11 s with no request.
  await new Promise((r) => setTimeout(r, Math.max(0, 11000 - (Date.now() - endAt))));
  check(dataRequests.length === settled, `ended: no more polling (${dataRequests.length - settled} requests in ${Date.now() - endAt} ms)`);

  check(problems.length === 0, 'no console errors, CSP violations or requests off the server: ' + JSON.stringify(problems));

  // A second trip under way, its page open at both sizes; the trip is deleted: within one
  // refresh the pages say so and the route and places are gone.
  const second = (await api('POST', '/v2/trips/', { user_id: user, name: 'Second', stops: [
    { name: 'Depot', geometry: { type: 'Point', coordinates: depot }, geometry_radius: 50 },
    { name: 'Drop-off', geometry: { type: 'Point', coordinates: dropoff }, geometry_radius: 50 }] },
    { Authorization: 'Bearer ' + process.env.WAYMARK_ACCESS_TOKEN })).trip;
  check(/\/track\/[0-9a-f]{32}$/.test(second.trip_tracking_url), 'v2 trip has a trip_tracking_url: ' + second.trip_tracking_url);
  await api('POST', `/v2/trips/${second.id}/controls`, { action: 'start', started_at: iso(t0) },
    { Authorization: 'Bearer ' + process.env.WAYMARK_ACCESS_TOKEN });
  for (const [name, v] of [['phone', phone], ['desktop', desk]]) {
    await v.page.goto(second.trip_tracking_url, { waitUntil: 'load' });
    await v.page.waitForSelector('path.wm-route');
    check((await figures(v.page)).pins.length === 2, `${name}: second trip drawn`);
  }
  await api('DELETE', `/v2/trips/${second.id}`, undefined, { Authorization: 'Bearer ' + process.env.WAYMARK_ACCESS_TOKEN });
  const deletedAt = Date.now();
  for (const [name, v] of [['phone', phone], ['desktop', desk]]) {
    await v.page.waitForFunction(() => document.getElementById('app').getAttribute('data-gone') === 'true', null, { timeout: 5000 });
    const f = await figures(v.page);
    check(/This trip is no longer available/.test(f.body) && f.state === 'gone' && points(f.routeD) <= 1 && f.pins.length === 0 &&
      f.items.length === 0 && !f.latest, `${name}: deleted trip: "no longer available", route and places dropped (${Date.now() - deletedAt} ms)`);
    await v.page.screenshot({ path: path.join(ART, `tracking-${name}-gone.png`), fullPage: name === 'phone' });
    await axe(v.page, `${name}-gone`);
  }

  // Revoking the first trip's link: the open link is a 404 at once, the new one works.
  const revoked = await api('POST', '/v1/api/trips/revoke-link/', { trip_id: trip.id }, secret);
  const fresh = revoked.data.trip_tracking_url;
  check(fresh !== url && (await fetch(url + '/data')).status === 404 && (await fetch(fresh + '/data')).status === 200,
    'revoked: old link 404 at once, new link works');
  // Unknown and malformed tokens, then the deleted trip: the same plain 404 page.
  const page = phone.page;
  for (const bad of ['0'.repeat(32), 'not-a-token', url.split('/').pop().toUpperCase().replace(/.$/, 'X'), url.split('/').pop()]) {
    const res = await page.goto(`${BASE}/track/${bad}`);
    check(res.status() === 404 && /This trip is no longer available/.test(await page.textContent('h1')), `404 page for /track/${bad}`);
    check(res.headers()['referrer-policy'] === 'no-referrer' && res.headers()['cache-control'] === 'no-store', '404 page headers');
  }
  const dataRes = await fetch(fresh + '/data');
  check(dataRes.status === 200 && dataRes.headers.get('cache-control') === 'no-store', 'data endpoint: 200, no-store');
  const data = await dataRes.json();
  check(!JSON.stringify(data).includes(user) && !JSON.stringify(data).includes(trip.id) && !('metadata' in data),
    'data has no ids or metadata');
  await api('DELETE', `/v3/api/trips/?trip_id=${trip.id}`, undefined, secret);
  const gone = await page.goto(fresh);
  check(gone.status() === 404, 'deleted trip: its link is a 404');
  check((await fetch(fresh + '/data')).status === 404, 'deleted trip: its data is a 404');
  await axe(page, '404');
  await page.screenshot({ path: path.join(ART, 'tracking-404.png') });

  await browser.close();
  // The 404s above are logged by the browser as failed loads; nothing else may be.
  const other = problems.filter((p) => !/status of 404/.test(p));
  check(other.length === 0, 'no other console errors or requests off the server: ' + JSON.stringify(other));
}

main().catch((e) => { console.error(e && e.stack || e); process.exit(1); });
