"""Seed `waymark serve` for scripts/bench/console.sh: USERS users, each with one fix, and FENCES
circle geofences (radius 50..200 m), all spread uniformly (seeded) over a 20 km x 20 km box
around Berlin (13.40, 52.52). Requests go 8 at a time (a thread pool, one keep-alive connection a
thread). Prints the seeding rates and writes OUT/seed.json ({box, users: [[id, lng, lat], ...], fences: [[lng, lat, radius], ...]})
for console_view.cjs, which sends the live fixes to the users in view.

Usage: console_seed.py BASE_URL OUT_DIR   (env: USERS, FENCES, WM_SK, WM_PK, THREADS)
Standard library only.
"""
import concurrent.futures
import datetime
import http.client
import json
import math
import os
import random
import sys
import threading
import time
import urllib.parse

base = urllib.parse.urlparse(sys.argv[1])
out = sys.argv[2]
USERS = int(os.environ.get("USERS", "10000"))
FENCES = int(os.environ.get("FENCES", "100000"))
THREADS = int(os.environ.get("THREADS", "8"))
SK = os.environ["WM_SK"]
PK = os.environ["WM_PK"]

LNG, LAT = 13.40, 52.52
HALF_M = 10_000  # the box is 2 x HALF_M metres a side
DLAT = HALF_M / 110_540
DLNG = HALF_M / (111_320 * math.cos(math.radians(LAT)))
BOX = [LNG - DLNG, LAT - DLAT, LNG + DLNG, LAT + DLAT]  # west, south, east, north

local = threading.local()


def call(method, path, body, key):
    data = json.dumps(body).encode()
    for attempt in range(5):
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(base.hostname, base.port, timeout=120)
        try:
            conn.request(method, path, body=data, headers={"Api-Key": key, "Content-Type": "application/json"})
            r = conn.getresponse()
            text = r.read()
        except (OSError, http.client.HTTPException):
            conn.close()
            local.conn = None
            time.sleep(0.2 * (attempt + 1))
            continue
        if r.status in (429, 503):
            time.sleep(0.2 * (attempt + 1))
            continue
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {text[:300]!r}")
        return json.loads(text)
    raise RuntimeError(f"{method} {path}: gave up after 5 attempts")


def run(what, n, fn):
    started = time.monotonic()
    done = 0
    results = [None] * n
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        for i, res in zip(range(n), pool.map(fn, range(n), chunksize=64)):
            results[i] = res
            done += 1
            if done % 10_000 == 0:
                el = time.monotonic() - started
                print(f"  {what}: {done:,}/{n:,} ({done / el:,.0f}/s)", file=sys.stderr, flush=True)
    el = time.monotonic() - started
    rate = n / el if el > 0 else 0.0
    print(f"seeded {n:,} {what} in {el:.1f} s: {rate:,.0f} a second ({THREADS} at a time)", flush=True)
    return results, {"what": what, "n": n, "seconds": round(el, 2), "per_second": round(rate, 1)}


rng = random.Random(58)
user_pos = [(rng.uniform(BOX[0], BOX[2]), rng.uniform(BOX[1], BOX[3])) for _ in range(USERS)]
fence_spec = [(rng.uniform(BOX[0], BOX[2]), rng.uniform(BOX[1], BOX[3]), rng.randint(50, 200)) for _ in range(FENCES)]
# Fixes recorded 10 minutes ago: the live fixes of the view's measurement are newer.
seen_at = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=10)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_user(i):
    uid = call("POST", "/v1/api/user/", {"app_type": 1, "device_token": f"bench-{i}", "description": f"Courier {i:05d}"}, PK)["data"]["user_id"]
    return uid


def fix_user(i):
    lng, lat = user_pos[i]
    call("POST", "/v1/api/location/", {"user_id": ids[i], "locations": [{"coordinates": [lng, lat], "recorded_at": seen_at, "accuracy": 5}]}, PK)


def make_fence(i):
    lng, lat, r = fence_spec[i]
    call("POST", "/v1/api/geofence/", {"coordinates": [lng, lat], "geometry_type": "circle", "geometry_radius": r,
                                       "description": f"Fence {i:06d}", "is_enabled": True}, SK)


rates = []
ids, r = run("users", USERS, make_user)
rates.append(r)
_, r = run("fixes (one a user)", USERS, fix_user)
rates.append(r)
_, r = run("circle geofences", FENCES, make_fence)
rates.append(r)

with open(os.path.join(out, "seed.json"), "w") as f:
    json.dump({"box": BOX, "center": [LNG, LAT], "rates": rates,
               "users": [[ids[i], round(user_pos[i][0], 7), round(user_pos[i][1], 7)] for i in range(USERS)],
               "fences": [[round(lng, 7), round(lat, 7), r] for lng, lat, r in fence_spec]}, f)
