// The project's live stream over WebSocket (docs/streams.md, "WebSocket protocol"): one
// subscription to the whole project, its messages published on the bus by type. A stream token
// is minted with the session (a browser cannot send headers on `new WebSocket`). When the
// connection drops it reconnects with backoff and resumes from the last id, so nothing is
// missed; when resuming is impossible (410) the views reload what they show.

import { api } from './api.js';
import { bus } from './ui.js';

const SEEN = 512; // ids remembered to drop a message delivered twice (docs/streams.md, AWS)

export function createStream(streamUrl) {
  let ws = null;
  let stopped = true;
  let failures = 0;
  let timer = 0;
  let lastId = null;
  let everLive = false;
  const seen = [];
  const seenSet = new Set();

  function absolute(u) {
    if (/^wss?:\/\//.test(u)) return u;
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return `${scheme}//${location.host}${u.startsWith('/') ? '' : '/'}${u}`;
  }

  function state(s) { bus.emit('stream.state', s); }

  async function connect() {
    clearTimeout(timer);
    if (stopped) return;
    state(failures ? 'reconnecting' : 'connecting');
    let token;
    try {
      // A fresh token each time: the last one may have expired or been revoked.
      token = (await api('POST', '/v1/api/streams/tokens/', { body: { ttl_seconds: 3600 }, retries: 0 })).token;
    } catch (e) {
      if (e.status === 401) return; // the session ended; the page goes back to sign-in
      return retry();
    }
    if (stopped) return;
    const url = new URL(absolute(streamUrl));
    url.searchParams.set('token', token);
    const sock = new WebSocket(url.toString());
    ws = sock;
    sock.addEventListener('open', () => {
      const sub = { action: 'subscribe', id: 'console' };
      if (lastId) sub.since = lastId;
      sock.send(JSON.stringify(sub));
    });
    sock.addEventListener('message', (ev) => {
      let frame;
      try { frame = JSON.parse(ev.data); } catch (_) { return; }
      if (frame.subscribed) {
        const resumed = everLive;
        failures = 0;
        everLive = true;
        state('live');
        if (resumed) bus.emit('stream.resumed', {});
      } else if (frame.message) {
        deliver(frame.message);
      } else if (frame.error) {
        if (frame.error.status === 410 || frame.error.status === 400) {
          // The resume point is gone (retention) or unreadable: start afresh and reload views.
          lastId = null;
          sock.send(JSON.stringify({ action: 'subscribe', id: `console-${Date.now()}` }));
          bus.emit('stream.resumed', { gap: true });
        } else {
          sock.close();
        }
      } else if (frame.closed) {
        if (frame.closed.last_event_id) lastId = frame.closed.last_event_id;
        sock.close(); // reconnect (a lagging or revoked subscription resumes from lastId)
      }
    });
    sock.addEventListener('close', () => {
      if (ws !== sock) return;
      ws = null;
      retry();
    });
    sock.addEventListener('error', () => { /* followed by close */ });
  }

  function retry() {
    if (stopped) return;
    failures++;
    const delay = Math.min(30000, 1000 * 2 ** Math.min(failures - 1, 5)) * (0.8 + Math.random() * 0.4);
    state('reconnecting');
    clearTimeout(timer);
    timer = setTimeout(connect, delay);
  }

  function deliver(msg) {
    if (!msg || !msg.id) return;
    if (seenSet.has(msg.id)) return;
    seen.push(msg.id);
    seenSet.add(msg.id);
    if (seen.length > SEEN) seenSet.delete(seen.shift());
    if (!lastId || msg.id > lastId) lastId = msg.id;
    bus.emit(msg.type, msg);
  }

  // Back online: try at once instead of waiting out the backoff.
  window.addEventListener('online', () => {
    if (!stopped && !ws) { failures = Math.min(failures, 1); connect(); }
  });

  return {
    start() {
      if (!stopped) return;
      stopped = false;
      connect();
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      if (ws) { const s = ws; ws = null; s.close(); }
      state('off');
    },
  };
}
