#!/usr/bin/env python3
"""Live streams measured from outside (issue 45; docs/streams.md), on `waymark serve` (file store,
release build) in its own process:

  1. latency from the ingest answer to receipt by a subscriber (p50, p99), with 1 subscriber and
     with N subscribers of the same user (SSE; each batch's location.updated, matched by its fix);
  2. ingest throughput (wrk, scripts/bench/ingest.lua: 100 locations a request, -t2 -c8) with no
     subscriber (the better of a run before and one after) against N idle ones (subscribed to another user: every message still reaches
     their queues and is filtered there), as a ratio (goal >= 0.8);
  3. memory per idle subscriber: the server's resident memory (VmRSS) before and after N idle
     SSE streams and N idle WebSocket subscriptions (the `websockets` package, as
     scripts/python-env.sh installs it), divided by N.

Usage: scripts/bench/streams.py [--bin DIR] [--subscribers N] [--duration S] [--batches B]
Builds nothing: run `cargo build --release -p local` first (scripts/bench/all.sh does). Prints a
markdown table; JSON with --json.
"""

import argparse
import asyncio
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

KEY = "wm_sk_" + secrets.token_hex(16)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def call(base, method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Api-Key": KEY, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def sse_open(port, user):
    """An SSE stream of `user`, read up to its `: subscribed` comment."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write((f"GET /v1/api/streams/sse/?user_id={user} HTTP/1.1\r\nHost: x\r\nApi-Key: {KEY}\r\n"
             "Accept: text/event-stream\r\n\r\n").encode())
    await w.drain()
    status = await r.readline()
    assert b" 200 " in status, status
    while (await r.readline()).strip() != b": subscribed":
        pass
    return r, w


async def ws_open(port, user):
    from websockets.asyncio.client import connect
    ws = await connect(f"ws://127.0.0.1:{port}/v1/api/streams/ws/", additional_headers={"Api-Key": KEY},
                       ping_interval=None)
    await ws.send(json.dumps({"action": "subscribe", "id": "s", "filter": {"user_id": user}}))
    f = json.loads(await ws.recv())
    assert f.get("subscribed"), f
    return ws


async def receive(r, got, n):
    """Read `n` messages of a stream; record (recorded_at of its fix -> receipt time)."""
    seen = 0
    while seen < n:
        line = await r.readline()
        if not line:
            return
        if line.startswith(b"data: "):
            body = json.loads(line[6:])
            got.append((body["data"]["location"]["recorded_at"], time.monotonic()))
            seen += 1


def post_batch(port, user, i):
    """One fix a batch, its time unique; returns (recorded_at as sent, answer time)."""
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_600_000_000 + i))
    body = json.dumps({"user_id": user, "locations": [
        {"coordinates": [13.4 + i * 1e-5, 52.5], "recorded_at": at + ".000", "accuracy": 5}]}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall((f"POST /v1/api/location/ HTTP/1.1\r\nHost: x\r\nApi-Key: {KEY}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    answered = time.monotonic()
    s.close()
    assert b" 201 " in data.split(b"\r\n", 1)[0] or b" 200 " in data.split(b"\r\n", 1)[0], data[:200]
    return at, answered


async def latency(port, user, subscribers, batches, offset):
    streams = [await sse_open(port, user) for _ in range(subscribers)]
    got = [[] for _ in streams]
    readers = [asyncio.create_task(receive(r, g, batches)) for (r, _), g in zip(streams, got)]
    answers = {}
    loop = asyncio.get_running_loop()
    for i in range(batches):
        at, answered = await loop.run_in_executor(None, post_batch, port, user, offset + i)
        answers[at] = answered
        await asyncio.sleep(0.05)
    await asyncio.wait_for(asyncio.gather(*readers), 60)
    lat = []
    for g in got:
        for at, t in g:
            key = at[:19]
            lat.extend((t - v) * 1000 for k, v in answers.items() if k.startswith(key))
    for _, w in streams:
        w.close()
    return lat, sum(len(g) for g in got)


def wrk(url, user, duration):
    env = dict(os.environ, WM_KEY=KEY, WM_USER=user)
    subprocess.run(["wrk", "-d2s", "-t2", "-c8", "-s", "scripts/bench/ingest.lua", url + "/v1/api/location/"],
                   env=env, check=True, capture_output=True)
    out = subprocess.run(["wrk", f"-d{duration}s", "-t2", "-c8", "-s", "scripts/bench/ingest.lua", url + "/v1/api/location/"],
                         env=env, check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rps * 100


class Server:
    """`waymark serve` on a new file store, with three users."""

    def __init__(self, bindir, n):
        self.bindir, self.n = bindir, n

    async def __aenter__(self):
        self.port = free_port()
        self.data = tempfile.mkdtemp()
        env = dict(os.environ, WAYMARK_API_KEY=KEY, WAYMARK_RATE_LIMIT="0",
                   WAYMARK_MAX_CONNECTIONS=str(3 * self.n + 64), RUST_LOG="warn")
        env.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
        self.proc = subprocess.Popen([os.path.join(self.bindir, "waymark"), "serve", "--port", str(self.port),
                                      "--data-dir", self.data], env=env, stdout=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port)).close()
                break
            except OSError:
                time.sleep(0.1)
        self.users = [call(self.base, "POST", "/v1/api/user/", {"app_type": 1, "device_token": f"s{i}"})["data"]["user_id"]
                      for i in range(3)]
        return self

    async def __aexit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.data, ignore_errors=True)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release"))
    ap.add_argument("--subscribers", type=int, default=1000)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is needed (scripts/bench/all.sh installs it)")
    n = a.subscribers
    res = {"subscribers": n, "machine_load": os.getloadavg()[0]}

    # Latency and ingest throughput.
    async with Server(a.bin, n) as srv:
        live, idle, ingest = srv.users
        lat1, got1 = await latency(srv.port, live, 1, a.batches, 0)
        latn, gotn = await latency(srv.port, live, n, a.batches // 4, 10_000)
        res.update(latency_1={"p50_ms": pct(lat1, 50), "p99_ms": pct(lat1, 99), "messages": got1},
                   latency_n={"p50_ms": pct(latn, 50), "p99_ms": pct(latn, 99), "messages": gotn})
        # None, then idle subscribers, then none again (the store grows as it goes: the ratio is
        # against the better of the two runs without subscribers).
        first = wrk(srv.base, ingest, a.duration)
        idle_sse = [await sse_open(srv.port, idle) for _ in range(n)]
        with_idle = wrk(srv.base, ingest, a.duration)
        for _, w in idle_sse:
            w.close()
        await asyncio.sleep(1)
        none = max(first, wrk(srv.base, ingest, a.duration))
        res.update(ingest_none=none, ingest_idle=with_idle, ingest_ratio=with_idle / none)

    # Memory, on a server that did nothing else (ingest grows its caches).
    async with Server(a.bin, n) as srv:
        idle = srv.users[1]
        await asyncio.sleep(1)
        rss0 = rss_kb(srv.proc.pid)
        idle_sse = [await sse_open(srv.port, idle) for _ in range(n)]
        await asyncio.sleep(1)
        rss1 = rss_kb(srv.proc.pid)
        ws_kb = None
        try:
            idle_ws = [await ws_open(srv.port, idle) for _ in range(n)]
            await asyncio.sleep(1)
            ws_kb = (rss_kb(srv.proc.pid) - rss1) / n
            for ws in idle_ws:
                await ws.close()
        except ImportError:
            pass
        res.update(sse_kb_per_subscriber=(rss1 - rss0) / n, ws_kb_per_subscriber=ws_kb)
        for _, w in idle_sse:
            w.close()
    if a.json:
        print(json.dumps(res))
        return
    l1, ln = res["latency_1"], res["latency_n"]
    print(f"| Live streams (load {res['machine_load']:.2f}) | Figure | Goal |")
    print("|---|---|---|")
    print(f"| ingest answer to receipt, 1 subscriber (SSE) | p50 {l1['p50_ms']:.2f} ms, p99 {l1['p99_ms']:.2f} ms ({l1['messages']} messages) | |")
    print(f"| ingest answer to receipt, {n} subscribers of one user (SSE) | p50 {ln['p50_ms']:.2f} ms, p99 {ln['p99_ms']:.2f} ms ({ln['messages']} receipts) | |")
    print(f"| ingest, {n} idle subscribers / none | {res['ingest_idle']:.0f} / {res['ingest_none']:.0f} loc/s = {res['ingest_ratio']:.2f} | >= 0.80 |")
    ws = f", WebSocket {res['ws_kb_per_subscriber']:.1f} KB" if res["ws_kb_per_subscriber"] is not None else ""
    print(f"| memory per idle subscriber | SSE {res['sse_kb_per_subscriber']:.1f} KB{ws} | |")


if __name__ == "__main__":
    asyncio.run(main())
