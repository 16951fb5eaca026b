// Trip tracking page: draws the trip from the embedded data, then follows the trip while it has
// not ended (its data then says `refresh_seconds: null`): through the trip's stream when the data
// offers one (`stream`: a WebSocket and a token for it; docs/streams.md), reading the data again
// only when the stream says something changed; by polling the data URL while there is no stream
// or it failed twice in a row. Everything from the server is set as text (never as HTML).
(function () {
  'use strict';
  var app = document.getElementById('app');
  var dataUrl = app.getAttribute('data-data-url');
  var tileUrl = app.getAttribute('data-tile-url');
  var tileAttribution = app.getAttribute('data-tile-attribution');
  var $ = function (id) { return document.getElementById(id); };

  var map = L.map('map', { attributionControl: !!tileUrl, zoomControl: true, worldCopyJump: true });
  if (tileUrl) {
    L.tileLayer(tileUrl, { maxZoom: 19, attribution: escapeHtml(tileAttribution || '') }).addTo(map);
    map.attributionControl.setPrefix(false);
  } else {
    $('map').classList.add('blank');
  }
  L.control.scale({ metric: true, imperial: true, position: 'bottomleft' }).addTo(map);
  map.setView([20, 0], 2);

  var routeLine = L.polyline([], { className: 'wm-route', interactive: false }).addTo(map);
  var wpLayer = L.layerGroup().addTo(map);
  var latestMarker = null;
  var follow = true;
  var fitted = false;
  var updates = 0;
  // What the places on the map and in the list were drawn from: a refresh that changes none of
  // them leaves them alone, so permanent labels do not fade out and back in every few seconds.
  var placesDrawn = null;
  var timer = null;
  var failures = 0;
  var gone = false;
  // What the live region last said (null: nothing yet; the page itself is the first reading).
  var live = { text: null, state: null, at: 0, timer: null, count: 0 };

  var Recenter = L.Control.extend({
    options: { position: 'topright' },
    onAdd: function () {
      var b = L.DomUtil.create('button', 'recenter leaflet-bar');
      b.type = 'button';
      b.textContent = 'Recenter';
      L.DomEvent.disableClickPropagation(b);
      L.DomEvent.on(b, 'click', function () { follow = true; fit(lastData); });
      return b;
    }
  });
  new Recenter().addTo(map);
  map.on('dragstart', function () { follow = false; });

  function escapeHtml(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }
  function ll(c) { return [c[1], c[0]]; }
  function fmtDistance(m) {
    if (m == null) return '–';
    return m < 1000 ? Math.round(m) + ' m' : (m / 1000).toFixed(m < 10000 ? 2 : 1) + ' km';
  }
  function fmtDuration(s) {
    if (!s) return '0 min';
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return h ? h + ' h ' + m + ' min' : (m ? m + ' min' : s + ' s');
  }
  function fmtTime(iso) {
    if (!iso) return '–';
    var d = new Date(iso);
    var sameDay = d.toDateString() === new Date().toDateString();
    var opts = sameDay ? { hour: '2-digit', minute: '2-digit' }
      : { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' };
    return d.toLocaleString(undefined, opts);
  }
  function ago(iso) {
    var s = Math.max(0, Math.round((Date.now() - new Date(iso).getTime()) / 1000));
    if (s < 60) return 'just now';
    if (s < 3600) return Math.round(s / 60) + ' min ago';
    if (s < 86400) return Math.round(s / 3600) + ' h ago';
    return Math.round(s / 86400) + ' d ago';
  }
  var labels = { origin: 'Origin', destination: 'Destination', stop: 'Stop' };
  var stateText = {
    created: 'Not started', started: 'On the way', resumed: 'On the way', paused: 'Paused', ended: 'Ended',
    gone: 'Unavailable'
  };
  function etaLine(e) {
    if (!e) return ['', ''];
    var place = e.name ? ' at ' + e.name : '';
    if (e.arrived) return ['arrived', 'Arrived' + place];
    if (new Date(e.arrival_at).getTime() - Date.now() < 60000) return ['now', 'Arriving now' + place];
    var t = new Date(e.arrival_at).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
    return ['around', 'Arriving around ' + t + place];
  }
  // Relative times ("5 min ago", "ended 2 h ago", "Arriving now") move on without new data, so
  // a page left open after the end, or between polls, never shows a frozen age.
  function relative(d) {
    if (!d) return;
    $('last-seen').textContent = d.latest
      ? fmtTime(d.latest.recorded_at) + ' (' + ago(d.latest.recorded_at) + ')' : 'No position yet';
    $('ended').textContent = d.ended_at ? fmtTime(d.ended_at) + ' (ended ' + ago(d.ended_at) + ')' : '–';
    var e = etaLine(d.eta), el = $('eta');
    el.hidden = !e[0];
    el.textContent = e[1];
    el.setAttribute('data-eta', e[0]);
  }
  setInterval(function () { if (!gone) relative(lastData); }, 30000);

  // Screen readers hear what changed, politely and not at every poll: the state, the ETA line
  // and the distance (not the ever-growing duration or ages). A new state is said at once; any
  // other change only when the text differs from what was last said, and at most once per quiet
  // interval (twice the polling interval, at least 10 s): the latest text is said at its end.
  function speech(d) {
    var parts = [stateText[d.state] || d.state];
    var e = etaLine(d.eta)[1];
    if (e) parts.push(e);
    if (d.started_at) parts.push('Distance so far ' + fmtDistance(d.distance_m));
    return parts.join('. ') + '.';
  }
  function say(text) {
    clearTimeout(live.timer);
    live.timer = null;
    live.text = text;
    live.at = Date.now();
    live.count += 1;
    $('live').textContent = text;
    app.setAttribute('data-announcements', String(live.count));
  }
  function announce(d) {
    var text = speech(d);
    var newState = live.state !== null && d.state !== live.state;
    live.state = d.state;
    if (live.text === null) { live.text = text; return; }
    clearTimeout(live.timer);
    live.timer = null;
    if (text === live.text) return;
    var quiet = Math.max(10, 2 * (d.refresh_seconds || 0)) * 1000;
    var wait = newState ? 0 : live.at + quiet - Date.now();
    if (wait <= 0) say(text);
    else live.timer = setTimeout(function () { say(text); }, wait);
  }

  var lastData = null;
  function fit(d) {
    if (!d) return;
    var pts = d.route.map(ll).concat(d.waypoints.map(function (w) { return ll(w.coordinates); }));
    if (d.latest) pts.push(ll(d.latest.coordinates));
    if (pts.length === 1) map.setView(pts[0], 16);
    else if (pts.length > 1) map.fitBounds(L.latLngBounds(pts), { padding: [30, 30], maxZoom: 17 });
  }

  function drawPlaces(d, permanent) {
    wpLayer.clearLayers();
    var list = $('waypoints');
    list.textContent = '';
    d.waypoints.forEach(function (w, i) {
      var n = i + 1;
      var state = w.reached_at ? (w.left_at ? 'departed' : 'arrived') : 'not reached yet';
      var label = labels[w.kind];
      var cls = 'wm-wp wm-wp-' + w.kind + (w.reached_at ? ' wm-wp-reached' : '');
      L.circle(ll(w.coordinates), { radius: w.radius_m, className: 'wm-radius wm-wp-' + w.kind, interactive: false })
        .addTo(wpLayer);
      var tip = document.createElement('span');
      tip.textContent = n + '. ' + (w.name || label) + ' (' + state + ')';
      L.circleMarker(ll(w.coordinates), { radius: 10, weight: 3, className: cls })
        .bindTooltip(tip, { permanent: permanent, direction: 'auto', offset: [10, 0], className: 'wm-tip' })
        .addTo(wpLayer);
      // The number's tag sits just above the pin (its bottom 1 px above the pin's ring), so the
      // latest position's dot on the pin hides neither.
      var wide = Math.max(18, 6 + 7 * String(n).length);
      L.marker(ll(w.coordinates), {
        interactive: false, keyboard: false,
        icon: L.divIcon({ className: 'wm-num' + (w.reached_at ? ' reached' : ''), html: String(n),
          iconSize: [wide, 18], iconAnchor: [wide / 2, 31] })
      }).addTo(wpLayer);
      var li = document.createElement('li');
      li.className = w.kind;
      var nm = document.createElement('div');
      nm.className = 'wp-name';
      nm.textContent = w.name ? label + ' · ' + w.name : label;
      var t = document.createElement('div');
      t.className = 'wp-times';
      var parts = [];
      parts.push(w.reached_at ? 'Arrived ' + fmtTime(w.reached_at) : 'Not reached yet');
      if (w.left_at) parts.push('departed ' + fmtTime(w.left_at));
      t.textContent = parts.join(', ');
      li.appendChild(nm);
      li.appendChild(t);
      li.setAttribute('data-kind', w.kind);
      li.setAttribute('data-reached', w.reached_at ? 'true' : 'false');
      li.setAttribute('data-left', w.left_at ? 'true' : 'false');
      list.appendChild(li);
    });
    if (!d.waypoints.length) {
      var e = document.createElement('li');
      e.className = 'empty';
      e.textContent = 'No planned places';
      list.appendChild(e);
    }
  }

  function render(d) {
    lastData = d;
    updates += 1;
    app.setAttribute('data-updates', String(updates));
    var st = $('state');
    st.textContent = stateText[d.state] || d.state;
    st.setAttribute('data-state', d.state);
    $('distance').textContent = fmtDistance(d.distance_m);
    $('duration').textContent = d.started_at ? fmtDuration(d.duration_s) : '–';
    $('started').textContent = d.started_at ? fmtTime(d.started_at) : 'Not yet';
    $('ended-row').hidden = !d.ended_at;
    relative(d);
    announce(d);
    $('updated').textContent = fmtTime(d.generated_at);
    $('refresh-note').textContent = !d.active ? ' · trip ended, final figures'
      : streamOpen ? ' · live' : ' · refreshes every ' + d.refresh_seconds + ' s';

    routeLine.setLatLngs(d.route.map(ll));
    // Pins carry the number of the place in the list, its name and whether it is reached; names
    // stay on screen on wide screens when there are few places.
    var permanent = d.waypoints.length <= 10 && window.innerWidth >= 760;
    var places = JSON.stringify([permanent, d.waypoints]);
    if (places !== placesDrawn) { placesDrawn = places; drawPlaces(d, permanent); }
    if (d.latest) {
      if (!latestMarker) {
        latestMarker = L.circleMarker(ll(d.latest.coordinates), { radius: 9, className: 'wm-latest' }).addTo(map);
        latestMarker.bindTooltip(document.createTextNode('Latest position'));
      } else {
        latestMarker.setLatLng(ll(d.latest.coordinates));
      }
      latestMarker.bringToFront();
    } else if (latestMarker) {
      map.removeLayer(latestMarker);
      latestMarker = null;
    }
    if (follow || !fitted) { fit(d); fitted = true; }
  }

  // Deleted, revoked or expired: say so, and drop the route, places and figures at once.
  function goneNow() {
    gone = true;
    closeStream();
    clearTimeout(timer);
    clearTimeout(live.timer);
    notice('This trip is no longer available');
    app.setAttribute('data-gone', 'true');
    var st = $('state');
    st.textContent = stateText.gone;
    st.setAttribute('data-state', 'gone');
    routeLine.setLatLngs([]);
    wpLayer.clearLayers();
    placesDrawn = null;
    if (latestMarker) { map.removeLayer(latestMarker); latestMarker = null; }
    ['distance', 'duration', 'last-seen', 'started', 'ended'].forEach(function (id) { $(id).textContent = '–'; });
    $('eta').hidden = true;
    $('waypoints').textContent = '';
    $('refresh-note').textContent = ' · no longer refreshing';
    lastData = null;
  }

  function notice(text) {
    var n = $('notice');
    n.hidden = !text;
    n.textContent = text || '';
  }

  // No interval (null): nothing more to ask for. While the stream is open it says when to ask.
  function schedule(seconds) {
    clearTimeout(timer);
    timer = seconds && !streamOpen ? setTimeout(poll, seconds * 1000) : null;
  }

  // The trip's stream: one subscription to the token's own filter (the trip's events and its
  // user's locations). Each message means new data: read it once, a moment later, so a batch's
  // messages cost one read.
  var stream = null, streamOpen = false, streamFails = 0, streamTried = 0, reading = null;
  function openStream(s) {
    if (!s || !window.WebSocket || gone) return;
    var url = s.url.charAt(0) === '/'
      ? (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + s.url : s.url;
    var ws;
    streamTried = Date.now();
    try {
      ws = new WebSocket(url + (url.indexOf('?') < 0 ? '?' : '&') + 'token=' + encodeURIComponent(s.token));
    } catch (e) {
      streamFails += 1;
      return;
    }
    stream = ws;
    ws.onopen = function () { ws.send(JSON.stringify({ action: 'subscribe', id: 'trip' })); };
    ws.onmessage = function (ev) {
      var f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (f.subscribed) {
        streamOpen = true;
        streamFails = 0;
        app.setAttribute('data-stream', 'open');
        schedule(null);
        changed();
      } else if (f.message) {
        changed();
      } else if (f.closed || f.error) {
        ws.close();
      }
    };
    ws.onclose = function () {
      if (stream !== ws) return;
      stream = null;
      var wasOpen = streamOpen;
      streamOpen = false;
      app.setAttribute('data-stream', 'closed');
      if (gone || !lastData || !lastData.active) return;
      streamFails += wasOpen ? 0 : 1;
      // Closed after it worked (a token past its hour, a restart): a new token at once. Failing
      // to open twice in a row: poll, and try the stream again now and then.
      if (streamFails < 2) poll(true);
      else schedule(next(lastData));
    };
  }
  function closeStream() {
    var ws = stream;
    stream = null;
    streamOpen = false;
    if (ws) ws.close();
  }
  function changed() {
    if (reading) return;
    reading = setTimeout(function () { reading = null; poll(); }, 250);
  }

  // `withStream`: also ask for a stream token (the data then carries `stream`).
  function poll(withStream) {
    if (!stream && lastData && lastData.active && streamFails >= 2 && Date.now() - streamTried > 60000) withStream = true;
    fetch(withStream ? dataUrl + '?stream=1' : dataUrl, { cache: 'no-store', credentials: 'omit', headers: { Accept: 'application/json' } })
      .then(function (res) {
        if (res.status === 404) {
          goneNow();
          return null;
        }
        if (!res.ok) throw new Error('HTTP ' + res.status);
        return res.json();
      })
      .then(function (d) {
        if (!d) return;
        failures = 0;
        notice('');
        render(d);
        if (!d.active) closeStream();
        else if (d.stream && !stream) openStream(d.stream);
        schedule(next(d));
      })
      .catch(function () {
        failures += 1;
        notice('Connection lost; trying again…');
        var base = (lastData && lastData.refresh_seconds) || 15;
        schedule(Math.min(300, base * Math.pow(2, Math.min(failures, 5))));
      });
  }

  // An ended trip's figures are final: its data says `refresh_seconds: null` and the page stops
  // asking (a link revoked later shows "no longer available" at the next load).
  function next(d) { return d.active ? d.refresh_seconds : null; }

  var initial = JSON.parse($('initial').textContent);
  render(initial);
  if (initial.active && initial.stream) openStream(initial.stream);
  schedule(next(initial));
  document.addEventListener('visibilitychange', function () {
    if (!document.hidden && lastData && next(lastData)) poll();
  });
})();
