// What the console's browser checks share (console.cjs, tiles.cjs): checks that stop at the first
// failure, generous waits, the API as a client, Chromium's launch and the axe-core run.
'use strict';
const fs = require('fs');
const path = require('path');
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const AXE = fs.readFileSync(path.join(process.env.PLAYWRIGHT_CORE, '..', 'axe-core', 'axe.min.js'), 'utf8');

const BASE = process.env.WAYMARK_BASE;
const SK = process.env.WAYMARK_API_KEY;
const PK = process.env.WAYMARK_PUBLISHABLE_KEY;

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
  console.log('ok - ' + what);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Waits are generous: a 2-core machine running the rest of the suite beside a browser is slow.
async function until(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    await sleep(150);
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})`);
}

// The API, as a client of it: with the secret key unless headers are given.
async function raw(method, p, body, headers) {
  const res = await fetch(BASE + p, {
    method,
    headers: Object.assign({ 'Content-Type': 'application/json' }, headers),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch (_) { /* not JSON */ }
  return { status: res.status, json, text };
}
async function api(method, p, body, headers) {
  const r = await raw(method, p, body, headers || { 'Api-Key': SK });
  if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${r.text}`);
  return r.json;
}
const iso = (ms) => new Date(ms).toISOString();
async function fix(user, lng, lat, extra) {
  return api('POST', '/v1/api/location/', {
    user_id: user, locations: [Object.assign({ coordinates: [lng, lat], recorded_at: iso(Date.now() - 1000), accuracy: 5 }, extra)],
  }, { 'Api-Key': PK });
}

// Debian's Chromium, headless, with nothing of its own on the network (updates, sync, QUIC).
const launch = () => chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

// axe-core in the page: no WCAG 2.2 A/AA violation; the violations are written to `art`.
async function axe(page, name, art) {
  await page.evaluate(AXE);
  const r = await page.evaluate(() => window.axe.run(document, {
    runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'] }, resultTypes: ['violations'],
  }));
  // WCAG 2.5.8's "equivalent" exception: a marker or cluster on the map (which may overlap
  // another as markers move) has its equal in the "Users in view" list of buttons, each well
  // over 24 px. Only target-size, only inside the map's marker pane, is set aside; the list
  // itself is checked with everything else.
  r.violations = r.violations
    .map((x) => x.id !== 'target-size' ? x
      : { ...x, nodes: x.nodes.filter((n) => !n.target.join(' ').match(/leaflet-marker|wm-cluster|wm-user/)) })
    .filter((x) => x.nodes.length > 0);
  const v = r.violations.map((x) => `${x.id} (${x.impact}): ${x.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  fs.writeFileSync(path.join(art, `axe-${name}.json`), JSON.stringify(r.violations, null, 2));
  check(r.violations.length === 0, `${name}: axe-core reports no WCAG 2.2 A/AA violations ${v.join('; ')}`);
}

module.exports = { check, sleep, until, launch, axe, raw, api, iso, fix };
