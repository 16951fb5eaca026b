#!/usr/bin/env python3
"""Webhook cost and latency on `waymark serve` (standard library only).

Usage: scripts/bench/webhooks.py [path/to/waymark] [batches] [rounds]

Starts `waymark serve --memory` and a receiver on loopback, then measures in the same run:
- ingest throughput (4 users in parallel, 100-location batches) with no webhook endpoint and
  with one endpoint subscribed to every event type (`location.updated` for every batch), in
  alternating rounds (the endpoint disabled, then enabled), medians;
- latency from an ingest response to the receipt of its `location.updated` at the endpoint
  (one-location batches sent one after another), p50 and p99.
"""
import asyncio, json, os, socket, statistics, subprocess, sys, threading, time, urllib.request
from datetime import datetime, timedelta, timezone

BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/waymark-target/debug/waymark")
BATCHES = int(sys.argv[2]) if len(sys.argv) > 2 else 100
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
KEY = "wm_sk_bench_bench_bench_bench_0001"

received = []  # (monotonic time, webhook-id)
lock = threading.Lock()

async def hook(reader, writer):
    """A lean HTTP/1.1 receiver (keep-alive, 204): the endpoint should cost the shared cores as
    little as a real one elsewhere would."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length, wid = 0, None
            for line in head.split(b"\r\n"):
                k, _, v = line.partition(b":")
                k = k.strip().lower()
                if k == b"content-length":
                    length = int(v)
                elif k == b"webhook-id":
                    wid = v.strip().decode()
            await reader.readexactly(length)
            with lock:
                received.append((time.monotonic(), wid))
            writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

def start_receiver():
    ready = threading.Event()
    port = []
    def run():
        loop = asyncio.new_event_loop()
        server = loop.run_until_complete(asyncio.start_server(hook, "127.0.0.1", 0))
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        loop.run_forever()
    threading.Thread(target=run, daemon=True).start()
    ready.wait()
    return port[0]

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def call(base, method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Api-Key": KEY, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())

def batch(start, n):
    return [{"coordinates": [13.4 + (start + i) * 1e-5, 52.5], "recorded_at": (datetime(2024, 5, 1, tzinfo=timezone.utc)
             + timedelta(seconds=start + i)).strftime("%Y-%m-%dT%H:%M:%S.000"), "accuracy": 5.0} for i in range(n)]

def throughput(base, users, offset):
    def run(u, out):
        for b in range(BATCHES):
            call(base, "POST", "/v1/api/location/", {"user_id": u, "locations": batch(offset + b * 100, 100)})
        out.append(1)
    done = []
    t = time.monotonic()
    ths = [threading.Thread(target=run, args=(u, done)) for u in users]
    [x.start() for x in ths]; [x.join() for x in ths]
    return len(users) * BATCHES * 100 / (time.monotonic() - t)

def main():
    rx_port = start_receiver()
    port = free_port()
    env = dict(os.environ, WAYMARK_WEBHOOK_ALLOW_PRIVATE="1", WAYMARK_API_KEY=KEY, RUST_LOG="warn",
               WAYMARK_RATE_LIMIT="0")
    env.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
    srv = subprocess.Popen([BIN, "serve", "--memory", "--port", str(port)], env=env, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                call(base, "GET", "/v1/api/user/"); break
            except Exception:
                time.sleep(0.1)
        mk = lambda: call(base, "POST", "/v1/api/user/", {"app_type": 1, "device_token": "t"})["data"]["user_id"]
        hook_id = call(base, "POST", "/v1/api/webhooks/", {"url": f"http://127.0.0.1:{rx_port}/hook", "events": ["*"],
                                                          "enabled": False})["data"]["webhook_id"]
        users = [mk() for _ in range(4)]
        # Rounds alternate (endpoint disabled, enabled) on the same users, so neither side
        # gets a smaller store or a cooler machine.
        none, one = [], []
        for r in range(ROUNDS):
            for enabled, out in ((False, none), (True, one)):
                call(base, "PUT", "/v1/api/webhooks/", {"webhook_id": hook_id, "enabled": enabled})
                out.append(throughput(base, users, (2 * r + enabled) * BATCHES * 100))
                time.sleep(1)
        none_m, one_m = statistics.median(none), statistics.median(one)
        print(f"ingest, 4 users x {BATCHES} batches x 100 locations, {ROUNDS} alternating rounds (median): "
              f"no endpoint {none_m:,.0f} loc/s, one endpoint {one_m:,.0f} loc/s ({100 * one_m / none_m:.0f}%)")
        time.sleep(3)
        u = mk()
        lat = []
        for i in range(200):
            with lock:
                before = len(received)
            call(base, "POST", "/v1/api/location/", {"user_id": u, "locations": batch(10**6 + i, 1)})
            t = time.monotonic()
            while True:
                with lock:
                    if len(received) > before:
                        lat.append((received[before][0] - t) * 1000); break
                time.sleep(0.0005)
        lat.sort()
        print(f"ingest response -> receipt of location.updated, 200 sequential: p50 {statistics.median(lat):.1f} ms, "
              f"p99 {lat[int(len(lat) * 0.99) - 1]:.1f} ms, max {lat[-1]:.1f} ms")
    finally:
        srv.kill()

if __name__ == "__main__":
    main()
