// The console with map tiles (issue 58: tiles from the configured tile URL, no other external
// request, a strict CSP). Run by functions/local/tests/console_browser.rs against a
// `waymark serve --memory` whose WAYMARK_TILE_URL is the test's own tile server, on another
// loopback port (so another origin than the console's); it sets what console.cjs gets and
// TILE_ORIGIN (that server's origin) and TILE_ATTRIBUTION. A short pass: sign in, the map at
// 1280 px and 375 px, tiles loaded (and again after a zoom), the policy, axe-core, no request
// elsewhere. Exits non-zero on the first failed check.
'use strict';
const fs = require('fs');
const path = require('path');
const { check, until, launch, axe, api, fix } = require('./common.cjs');

const BASE = process.env.WAYMARK_BASE;
const ART = process.env.ARTIFACTS;
const SK = process.env.WAYMARK_API_KEY;
const PK = process.env.WAYMARK_PUBLISHABLE_KEY;
const TILE = process.env.TILE_ORIGIN;
const ATTRIBUTION = process.env.TILE_ATTRIBUTION;
const WS_BASE = BASE.replace(/^http/, 'ws');

// The policy's directives: name → its sources.
function directives(csp) {
  const m = new Map();
  for (const d of csp.split(';').map((x) => x.trim()).filter(Boolean)) {
    const [name, ...sources] = d.split(/\s+/);
    m.set(name, sources);
  }
  return m;
}

// The map's tile images: where each came from and whether it loaded (a 1 × 1 PNG stretched).
const tiles = (page) => page.evaluate(() => [...document.querySelectorAll('#map img.leaflet-tile')].map((t) => ({
  src: t.src, z: Number(new URL(t.src).pathname.split('/')[1]),
  loaded: t.classList.contains('leaflet-tile-loaded') && t.complete && t.naturalWidth === 1,
})));

async function main() {
  fs.mkdirSync(ART, { recursive: true });
  check(/^http:\/\/127\.0\.0\.1:\d+$/.test(TILE) && !TILE.startsWith(BASE), `the tile server ${TILE} is another origin than the console's ${BASE}`);
  // Something to centre the map on (zoom 14): a user's fix and a fence beside it.
  const user = (await api('POST', '/v1/api/user/', { app_type: 1, device_token: 't', description: 'Tile courier' }, { 'Api-Key': PK })).data.user_id;
  await fix(user, 13.405, 52.52);
  await api('POST', '/v1/api/geofence/', { coordinates: [13.401, 52.52], geometry_radius: 200, description: 'Depot', is_enabled: true });

  const browser = await launch();
  const problems = [];
  const offOrigin = [];
  const tileRequests = [];
  const tileFailures = [];
  async function open(name, width, height, mobile) {
    const ctx = await browser.newContext({ viewport: { width, height }, isMobile: mobile, hasTouch: mobile, deviceScaleFactor: mobile ? 2 : 1 });
    const page = await ctx.newPage();
    // CSP violations are counted in the page too, not only from Chromium's console messages.
    await page.addInitScript(() => {
      window.__csp = [];
      document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    page.on('console', (m) => {
      if (m.type() !== 'error') return;
      const url = (m.location() || {}).url || '';
      // The first view is the world (zoom 2), too wide to read users at once: an expected 400.
      if (/Failed to load resource/.test(m.text()) && /\/users\/positions\//.test(url)) return;
      problems.push(`console (${name}): ${m.text()} ${url}`);
    });
    page.on('pageerror', (e) => problems.push(`page error (${name}): ${e.message}`));
    page.on('request', (r) => {
      const u = r.url();
      if (u.startsWith(TILE + '/')) tileRequests.push(u);
      else if (!u.startsWith(BASE + '/') && !u.startsWith('data:')) offOrigin.push(u);
    });
    // A tile of a view left before it loaded is cancelled by Leaflet (ERR_ABORTED): not a failure.
    page.on('requestfailed', (r) => {
      const why = r.failure().errorText;
      if (r.url().startsWith(TILE + '/') && !/ERR_ABORTED/.test(why)) tileFailures.push(`${r.url()}: ${why}`);
    });
    page.on('response', (r) => { if (r.url().startsWith(TILE + '/') && r.status() !== 200) tileFailures.push(`${r.url()}: ${r.status()}`); });
    page.on('websocket', (ws) => { if (!ws.url().startsWith(WS_BASE + '/')) offOrigin.push(ws.url()); });
    const res = await page.goto(BASE + '/console/', { waitUntil: 'load' });
    return { ctx, page, res };
  }
  async function signIn(page) {
    await page.fill('#signin-key', SK);
    await page.click('#signin-submit');
    await page.waitForSelector('#nav:not([hidden])');
    await page.waitForSelector('#live-state[data-state="live"]', { timeout: 10000 });
  }
  // Tiles of zoom `z` or more cover the map, every one loaded from the tile server.
  const loadedAt = (page, z) => until(`tiles of zoom ${z} loaded`, async () => {
    const t = (await tiles(page)).filter((x) => x.z >= z);
    return t.length >= 4 && t.every((x) => x.loaded) ? t : null;
  });

  // ---- desktop: the policy, the config, the map with tiles ----
  const d = await open('desktop', 1280, 800, false);
  const page = d.page;
  const csp = d.res.headers()['content-security-policy'] || '';
  const dirs = directives(csp);
  check((dirs.get('img-src') || []).join(' ') === `'self' data: ${TILE}`, 'the policy\'s img-src names the tile origin and nothing else external: ' + csp);
  check(dirs.get('default-src').join(' ') === "'none'" && dirs.get('script-src').join(' ') === "'self'"
    && dirs.get('style-src').join(' ') === "'self'" && dirs.get('connect-src').join(' ') === "'self'"
    && dirs.get('frame-ancestors').join(' ') === "'none'", 'scripts, styles and connections stay on the server\'s origin');
  const external = [...dirs].filter(([n]) => n !== 'img-src').flatMap(([, s]) => s).filter((s) => s !== "'self'" && s !== "'none'");
  check(external.length === 0, 'no other directive names a source beyond \'self\' or \'none\': ' + external.join(' '));
  const config = await page.evaluate(() => JSON.parse(document.getElementById('config').textContent));
  check(config.tile_url === `${TILE}/{z}/{x}/{y}.png`, 'the page is configured with the tile URL: ' + config.tile_url);
  check(tileRequests.length === 0, 'no tile is asked for before sign-in');

  await signIn(page);
  const first = await loadedAt(page, 14);
  check(first.every((t) => t.src.startsWith(TILE + '/')), `${first.length} tiles of zoom 14 loaded from the tile server`);
  check(!(await page.getAttribute('#map', 'class')).split(' ').includes('blank'), 'with tiles the map is not the blank grid');
  check(await page.locator('#map .leaflet-control-scale').count() === 1, 'the scale bar is still shown');
  // The attribution is the server's text, set as text: its markup shows as written.
  const attribution = (await page.textContent('#map .leaflet-control-attribution')).trim();
  check(attribution === ATTRIBUTION && await page.locator('#map .leaflet-control-attribution b').count() === 0,
    'the tile attribution is shown as text: ' + attribution);
  await page.click('#map .leaflet-control-zoom-in');
  const zoomed = await loadedAt(page, 15);
  check(zoomed.length >= 4, `zoomed in, ${zoomed.length} tiles of zoom 15 loaded`);
  await until('the fence and the user drawn', async () => (await page.locator('.wm-fence-label').count()) > 0
    && (await page.locator(`.wm-user[data-user-id="${user}"]`).count()) > 0);
  await axe(page, 'map-tiles-desktop', ART);
  await page.screenshot({ path: path.join(ART, 'console-map-tiles-desktop.png') });

  // ---- phone: the map with tiles fits and passes axe too ----
  const p = await open('phone', 375, 740, true);
  await signIn(p.page);
  await loadedAt(p.page, 14);
  const wide = await p.page.evaluate(() => document.documentElement.scrollWidth);
  check(wide <= 375, `the map with tiles fits the 375 px phone (scroll width ${wide})`);
  await axe(p.page, 'map-tiles-phone', ART);
  await p.page.screenshot({ path: path.join(ART, 'console-map-tiles-phone.png'), fullPage: true });

  const violations = [...await page.evaluate(() => window.__csp), ...await p.page.evaluate(() => window.__csp)];
  check(violations.length === 0, 'no CSP violation in the page: ' + violations.join(', '));
  check(tileFailures.length === 0, `every tile request answered 200 (${tileRequests.length} requests): ` + tileFailures.join(', '));
  check(offOrigin.length === 0, 'no request went anywhere but the server and the tile server: ' + offOrigin.join(', '));
  check(problems.length === 0, 'no console errors, CSP violations or page errors: ' + problems.join(' | '));
  await browser.close();
  console.log(`info - the browser asked the tile server for ${tileRequests.length} tiles`);
}

main().then(() => { console.log('all tile checks passed'); process.exit(0); }, (e) => { console.error(e); process.exit(1); });
