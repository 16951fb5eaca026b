#!/usr/bin/env python3
"""The load for scripts/bench/heat.sh: drives `waymark serve --dynamodb` through its REST API
while scripts/ddb_proxy.py prices every DynamoDB call, then prints capacity units a fix per
partition pattern and the ingest rate at which the hottest key of each would pass DynamoDB's
per-partition limits (1,000 WCU/s, 3,000 RCU/s). Standard library only.

    heat.py --load city|sparse --base URL --keys default-project.json --proxy URL [--out FILE]
    heat.py --report /tmp/heat-city.json      # the table of a saved run again

Loads (300 users, a third on started trips, batches of 10 fixes 1 s of recorded time apart,
~10 m/s): `city`, 2,000 circles of 50-150 m in 5 km x 5 km, three quarters along a street grid
the users drive (1.25 km apart, as shops line the roads couriers take: about 0.5-1 geofence
events a fix) and a 1 km "depot" circle at the centre every user starts in and leaves;
`sparse`, 50 circles over 50 km x 50 km, users wandering anywhere in it (few events).
Env: FIXES (measured fixes, 24000), WARM (fixes before the measurement, one batch a user),
USERS (300), THREADS (16), SEED (47), WRU_PRICE / RRU_PRICE ($ a million units, us-east-1
on-demand: 0.625 / 0.125), SETTLE_S (seconds without new deliveries or writes that count as
settled, 8).
"""
import argparse, http.client, json, math, os, random, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

ENV = os.environ.get
FIXES, USERS, THREADS = int(ENV("FIXES", 24000)), int(ENV("USERS", 300)), int(ENV("THREADS", 16))
WARM = int(ENV("WARM", USERS * 10))
SEED, SETTLE_S = int(ENV("SEED", 47)), float(ENV("SETTLE_S", 8))
WRU, RRU = float(ENV("WRU_PRICE", 0.625)), float(ENV("RRU_PRICE", 0.125))
LAT0, LNG0 = 52.45, 13.30  # the square's south-west corner (Berlin)
CITY, GRID, DEPOT_R = 5000.0, 1250.0, 1000


def lnglat(x, y):
    return [round(LNG0 + x / (111320 * math.cos(math.radians(LAT0))), 7), round(LAT0 + y / 110540, 7)]


class Api:
    """One kept-alive connection a thread; every answer that is not 2xx is counted, not hidden."""
    bad, lock = {}, threading.Lock()

    def __init__(self, base, key):
        self.u, self.key, self.c = urlsplit(base), key, None

    def call(self, method, path, body=None, key=None):
        for attempt in range(3):
            try:
                if self.c is None:
                    self.c = http.client.HTTPConnection(self.u.hostname, self.u.port, timeout=120)
                self.c.request(method, path, json.dumps(body) if body is not None else None,
                               {"Api-Key": key or self.key, "Content-Type": "application/json"})
                r = self.c.getresponse()
                data = r.read()
                break
            except (http.client.HTTPException, OSError):
                self.c.close()
                self.c = None
                if attempt == 2:
                    raise
        if not 200 <= r.status < 300:
            with Api.lock:
                Api.bad[f"{method} {path.split('?')[0]} {r.status}"] = Api.bad.get(f"{method} {path.split('?')[0]} {r.status}", 0) + 1
                if sum(Api.bad.values()) <= 5:
                    print(f"  {method} {path} -> {r.status}: {data[:300]!r}", file=sys.stderr)
            return None
        return json.loads(data)


class Receiver(BaseHTTPRequestHandler):
    """The webhook endpoint: answers 200, counts each event once (receivers dedupe on webhook-id)."""
    protocol_version = "HTTP/1.1"
    seen, types, lock = set(), {}, threading.Lock()

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with Receiver.lock:
            wid = self.headers.get("webhook-id")
            if wid not in Receiver.seen:
                Receiver.seen.add(wid)
                t = json.loads(body).get("type", "?")
                Receiver.types[t] = Receiver.types.get(t, 0) + 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    @classmethod
    def counts(cls):
        with cls.lock:
            return dict(cls.types)


class Walker:
    """A user moving about 10 m a second of recorded time: in `city` along the street grid
    (straight on, left or right at each crossing), in `sparse` anywhere, turning gently."""

    def __init__(self, rng, load, t0):
        self.rng, self.load, self.t, self.v = rng, load, t0, rng.uniform(8, 12)
        if load == "city":  # out of the depot along one of its four streets
            self.dx, self.dy = rng.choice([(1, 0), (-1, 0), (0, 1), (0, -1)])
            d = rng.uniform(0, 900)
            self.x, self.y = CITY / 2 + d * self.dx, CITY / 2 + d * self.dy
        else:
            self.x, self.y, self.h = rng.uniform(0, 50000), rng.uniform(0, 50000), rng.uniform(0, 2 * math.pi)

    def step(self):
        if self.load == "city":
            left = self.v
            while left > 0:  # on a street: walk to the next crossing, choose there, go on
                d = self.dx or self.dy
                at = self.x if self.dx else self.y
                nxt = (math.floor(at / GRID) + 1) * GRID if d > 0 else (math.ceil(at / GRID) - 1) * GRID
                go = min(left, abs(nxt - at))
                self.x, self.y, left = self.x + self.dx * go, self.y + self.dy * go, left - go
                if left > 0:
                    self.x, self.y = (nxt, self.y) if self.dx else (self.x, nxt)
                    ways = [(self.dx, self.dy)] * 2 + [(self.dy, -self.dx), (-self.dy, self.dx)]
                    ways = [w for w in ways if 0 <= self.x + w[0] * GRID <= CITY and 0 <= self.y + w[1] * GRID <= CITY]
                    self.dx, self.dy = self.rng.choice(ways or [(-self.dx, -self.dy)])
        else:
            self.h += self.rng.uniform(-0.15, 0.15)
            x, y = self.x + self.v * math.sin(self.h), self.y + self.v * math.cos(self.h)
            if 0 <= x <= 50000 and 0 <= y <= 50000:
                self.x, self.y = x, y
            else:
                self.h += math.pi
        self.t += 1
        return {"coordinates": lnglat(self.x, self.y), "accuracy": 5.0, "speed": round(self.v, 1),
                "recorded_at": datetime.fromtimestamp(self.t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")}


def fences(rng, load):
    def fence(i, x, y, r, desc):
        return {"coordinates": lnglat(x, y), "geometry_type": "circle", "geometry_radius": r, "is_enabled": True,
                "description": desc or f"customer site {i}", "tag": rng.choice(["shop", "depot", "customer", "site"]),
                "metadata": {"customer_id": f"C{rng.randrange(10**6):06d}", "site": i,
                             "opening_hours": "07:00-19:00", "priority": rng.randrange(5)}}
    if load == "sparse":
        return [fence(i, rng.uniform(0, 50000), rng.uniform(0, 50000), rng.randint(50, 150), None) for i in range(50)]
    out = [fence(0, CITY / 2, CITY / 2, DEPOT_R, "Depot")]
    for i in range(1, 2001):
        r = rng.randint(50, 150)
        if rng.random() < 0.75:  # on a street: the centre within half a radius of it
            line, along, off = rng.randrange(5) * GRID, rng.uniform(0, CITY), rng.uniform(-r / 2, r / 2)
            x, y = (along, line + off) if rng.random() < 0.5 else (line + off, along)
            out.append(fence(i, min(max(x, 0), CITY), min(max(y, 0), CITY), r, None))
        else:
            out.append(fence(i, rng.uniform(0, CITY), rng.uniform(0, CITY), r, None))
    return out


def brief(proxy):
    u = urlsplit(proxy)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("GET", "/__proxy/stats?brief=1")
    return json.loads(c.getresponse().read())


def proxy_call(proxy, method, path):
    u = urlsplit(proxy)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request(method, path, b"{}" if method == "POST" else None)
    return json.loads(c.getresponse().read())


def settle(proxy, limit=600):
    """Waits until the server's derived work is done: no new webhook delivery and no write to
    DynamoDB for SETTLE_S (the idle sweep only reads). Polling the events list instead would
    add its own reads to what is measured."""
    t0, last, since = time.monotonic(), None, time.monotonic()
    while time.monotonic() - t0 < limit:
        now = (sum(Receiver.counts().values()), brief(proxy)["totals"]["wcu"])
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= SETTLE_S:
            return time.monotonic() - t0
        time.sleep(1)
    print(f"  not settled after {limit} s", file=sys.stderr)
    return time.monotonic() - t0


def drive(base, pub, walkers, n_fixes, out):
    """n_fixes in batches of 10, dealt to users in turn; one thread owns each user, so a
    user's batches go in recorded order (an older batch fires no events)."""
    batches = n_fixes // 10
    share = [batches // len(walkers) + (u < batches % len(walkers)) for u in range(len(walkers))]

    def run(j):
        api, mine = Api(base, pub), range(j, len(walkers), THREADS)
        for rnd in range(max(share)):
            for u in mine:
                if share[u] > rnd:
                    w = walkers[u]
                    r = api.call("POST", "/v1/api/location/", {"user_id": w.id, "locations": [w.step() for _ in range(10)]})
                    with Api.lock:
                        out["batches"] += 1
                        out["not_processed"] += bool(r) and not r["data"].get("processed", True)
                        out["rejected"] += len(r["data"].get("rejected") or []) if r else 0
    t = time.monotonic()
    with ThreadPoolExecutor(THREADS) as ex:
        list(ex.map(run, range(THREADS)))
    return time.monotonic() - t


def table(load, res):
    s, f = res["stats"], res["fixes"]
    lines = [f"### {load}: {f:,} fixes measured ({res['users']} users, {res['fences']} fences)", "",
             "| Partition (table: pattern) | Write units a fix (of them, the list's own count items `~…`) | Read units a fix | Project ingest before it passes DynamoDB's limit (fixes/s) |",
             "|---|---|---|---|"]
    for p in s["patterns"]:
        if not (p["wcu"] or p["rcu"]):
            continue
        hw, hr = p["hottest_write"]["wcu"] / f, p["hottest_read"]["rcu"] / f
        ceil = min(1000 / hw if hw else math.inf, 3000 / hr if hr else math.inf)
        cell = "—" if ceil == math.inf else f"{ceil:,.0f}"
        if p["keys"] > 1 and ceil != math.inf:
            cell += f" (its hottest of {p['keys']:,} keys)"
        name = p["table"].removeprefix("waymark-") + ": `" + p["pattern"] + "`"
        counts = p.get("wcu_counts") or 0  # saved runs before the split have none
        w = f"{p['wcu'] / f:.3g}" + (f" ({counts / f:.2g})" if counts else "")
        lines.append(f"| {name} | {w} | {p['rcu'] / f:.3g} | {cell} |")
    t, ev = s["totals"], res["events"]
    w, r = t["wcu"] / f, t["rcu"] / f
    geo = sum(v for k, v in ev.items() if k.startswith("geofence."))
    ops = ", ".join(f"{k} {v['calls'] / f:.2f}" for k, v in sorted(s["ops"].items(), key=lambda kv: -kv[1]["calls"]))
    lines += ["",
              f"- events a fix: {geo / f:.3f} geofence ({', '.join(f'{k} {v}' for k, v in sorted(ev.items()))}: "
              f"{sum(ev.values()) / f:.3f} webhook deliveries a fix); events listed by the API over the whole run: {res['events_listed']:,}",
              f"- units a fix: write {w:.2f}, read {r:.2f}; ${w * WRU + r * RRU:.2f} a million fixes at ${WRU} / ${RRU} "
              "a million write / read request units (us-east-1 on-demand)",
              f"- DynamoDB calls a fix: {t['calls'] / f:.2f} ({ops})",
              f"- transactions: {t['transactions']:,} ({t['transactions'] / f:.2f} a fix), cancelled {t['cancelled']:,} {t['cancel_reasons'] or ''}; "
              f"conditional writes refused (billed): {t['condition_failed']:,}"
              + "".join(f"; {k} {v:,}" for k, v in sorted(t.get("condition_failed_by", {}).items(), key=lambda kv: -kv[1])[:4]),
              f"- measured over {res['drive_s']:.0f} s of driving ({f / res['drive_s']:.1f} fixes/s) + {res['settle_s']:.0f} s settling; "
              f"idle afterwards: {res['idle']['calls_s']:.1f} calls/s, {res['idle']['rcu_s']:.1f} RCU/s, {res['idle']['wcu_s']:.2f} WCU/s "
              f"(included above: about {res['idle']['rcu_s'] * (res['drive_s'] + res['settle_s']) / f:.3f} read units a fix)"
              + ("; idle by pattern: " + ", ".join(f"`{p['pattern']}` {p['wcu_s']:.1f} W/s {p['rcu_s']:.1f} R/s"
                                                  for p in res["idle"].get("patterns", []) if p["wcu_s"] or p["rcu_s"])
                 if res["idle"].get("patterns") else ""),
              f"- answers not 2xx: {res['bad'] or 'none'}; batches answered processed=false: {res['not_processed']}, fixes rejected: {res['rejected']}",
              f"- per-user partitions (a user's history, `#GS#`, `#PW#`, …) grow with users, not with the project's rate: their "
              f"ceiling is {res['users']} users' share; a per-project key (`<project>#E`, `#WL#` of one endpoint) is the real cap"]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--load", choices=["city", "sparse"])
    ap.add_argument("--base")
    ap.add_argument("--keys")
    ap.add_argument("--proxy")
    ap.add_argument("--out")
    ap.add_argument("--report", help="print the table of a saved stats file and stop")
    a = ap.parse_args()
    if a.report:
        res = json.load(open(a.report))
        return print(table(res["load"], res))
    if not (a.load and a.base and a.keys and a.proxy):
        ap.error("--load, --base, --keys and --proxy are needed (or --report)")
    rng = random.Random(SEED)
    for _ in range(300):
        try:
            keys = json.load(open(a.keys))
            if Api(a.base, keys["api_key"]).call("GET", "/v1/api/webhooks/") is not None:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    api = Api(a.base, keys["api_key"])
    rx = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=rx.serve_forever, daemon=True).start()
    api.call("POST", "/v1/api/webhooks/", {"url": f"http://127.0.0.1:{rx.server_address[1]}/hook", "events": ["*"]})
    t = time.monotonic()
    fs = fences(rng, a.load)
    with ThreadPoolExecutor(THREADS) as ex:
        ok = list(ex.map(lambda f: Api(a.base, keys["api_key"]).call("POST", "/v1/api/geofence/", f) is not None, fs))
    print(f"{a.load}: {sum(ok)} fences in {time.monotonic() - t:.0f} s", file=sys.stderr)
    per_user = -(-(WARM + FIXES) // (10 * USERS)) * 10
    t0 = int(time.time()) - per_user - 900  # recorded time ends well before the server's clock
    walkers = [Walker(random.Random(rng.random()), a.load, t0) for _ in range(USERS)]

    def setup(iw):
        """Each call tried up to 5 times (under injected faults setup calls fail too; every failure
        is counted); a user whose setup still fails is left out of the load."""
        i, w = iw
        c = Api(a.base, keys["api_key"])

        def must(*args, **kw):
            for _ in range(5):
                r = c.call(*args, **kw)
                if r is not None:
                    return r
            raise RuntimeError(f"{args[0]} {args[1]} failed 5 times")
        pub = keys["publishable_key"]
        try:
            w.id = must("POST", "/v1/api/user/", {"app_type": 1, "device_token": f"heat-{i}", "description": f"courier {i}"},
                        key=pub)["data"]["user_id"]
            must("PUT", "/v1/api/user/", {"user_id": w.id, "geofence_events": True}, key=pub)
            if i % 3 == 0:  # a third on started trips, from where they are to 3 km away
                tr = must("POST", "/v1/api/trips/", {"user_id": w.id, "origins": [lnglat(w.x, w.y)],
                                                    "destinations": [lnglat(w.x + 2000, w.y + 2000)]})
                start = datetime.fromtimestamp(t0 - 60, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
                must("POST", "/v1/api/trips/controls/", {"trip_id": tr["data"][0]["id"], "action": "start", "started_at": start})
            return w
        except RuntimeError as e:
            print(f"  user {i} left out: {e}", file=sys.stderr)
    with ThreadPoolExecutor(THREADS) as ex:
        walkers = [w for w in ex.map(setup, enumerate(walkers)) if w is not None]
    print(f"{a.load}: {len(walkers)} users ready at {time.monotonic() - t:.0f} s; warm-up {WARM} fixes", file=sys.stderr)
    out = dict(batches=0, not_processed=0, rejected=0)
    drive(a.base, keys["publishable_key"], walkers, WARM, out)
    settle(a.proxy)
    proxy_call(a.proxy, "POST", "/__proxy/reset")
    with Receiver.lock:
        Receiver.types.clear()
    bad_before = dict(Api.bad)
    out = dict(batches=0, not_processed=0, rejected=0)
    print(f"{a.load}: measuring {FIXES} fixes", file=sys.stderr)
    drive_s = drive(a.base, keys["publishable_key"], walkers, FIXES, out)
    settle_s = settle(a.proxy)
    stats = proxy_call(a.proxy, "GET", "/__proxy/stats")
    events = Receiver.counts()
    b0 = brief(a.proxy)
    time.sleep(10)
    b1 = brief(a.proxy)
    dt = b1["seconds"] - b0["seconds"]
    idle = {k + "_s": (b1["totals"][k] - b0["totals"][k]) / dt for k in ("calls", "wcu", "rcu")}
    # Who reads and writes while nothing is sent: the patterns' units over the idle seconds.
    after = proxy_call(a.proxy, "GET", "/__proxy/stats")
    was = {(p["table"], p["pattern"]): p for p in stats["patterns"]}
    idle["patterns"] = sorted(
        ({"pattern": p["pattern"], "wcu_s": (p["wcu"] - was.get((p["table"], p["pattern"]), {}).get("wcu", 0)) / dt,
          "rcu_s": (p["rcu"] - was.get((p["table"], p["pattern"]), {}).get("rcu", 0)) / dt} for p in after["patterns"]),
        key=lambda x: -(x["wcu_s"] * 5 + x["rcu_s"]))[:6]
    day = datetime.fromtimestamp(t0, timezone.utc)
    q = f"/v1/api/event/?start_date={(day - timedelta(days=1)):%Y-%m-%d}&end_date={(day + timedelta(days=2)):%Y-%m-%d}"
    first = api.call("GET", q) or {"data": {"pages": 0}}
    pages = first["data"].get("pages") or 0
    last = api.call("GET", q + f"&page_number={pages}") if pages > 1 else first
    listed = (pages - 1) * 10 + len(last["data"]["events"]) if pages else 0
    bad = {k: v - bad_before.get(k, 0) for k, v in Api.bad.items() if v - bad_before.get(k, 0)}
    res = dict(load=a.load, fixes=FIXES, users=len(walkers), fences=len(fs), warm=WARM, seed=SEED, drive_s=drive_s,
               settle_s=settle_s, events=events, events_listed=listed, idle=idle, bad=bad, bad_setup=bad_before,
               not_processed=out["not_processed"], rejected=out["rejected"], stats=stats)
    path = a.out or f"/tmp/heat-{a.load}.json"
    with open(path, "w") as fh:
        json.dump(res, fh, indent=1)
    print(table(a.load, res))
    print(f"\n(stats saved in {path})")
    rx.shutdown()


if __name__ == "__main__":
    main()
