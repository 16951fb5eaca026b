#!/usr/bin/env python3
"""DynamoDB's faults against `waymark serve --dynamodb`, measured from outside.

    python3 scripts/faults.py --bin target/debug/waymark [--short] [--seed 57] [--phases a,b]

Needs `AWS_ENDPOINT_URL_DYNAMODB` (DynamoDB Local; scripts/dynamodb-local.sh starts one). Puts
scripts/ddb_proxy.py in front of it and, per phase, starts a server on fresh tables behind the
proxy with one fault config: none (the reference), throttling per partition key at limits scaled
to this load, transaction conflicts, internal errors and answers lost after the write,
unprocessed batch items with slow answers, and all of them mixed. In each phase, at once:
ingest threads send every user's batches (re-sent on 503/429 or a dropped connection, as an SDK
does), CRUD threads create users, create, update and delete geofences and run trips, and a reader
pages through the lists. Then the faults stop, the server settles, and the phase is checked:

- every answer 2xx, or 503/429 with `Retry-After`, or 409: never a 500;
- every fix stored once: each user's history, paged by `page_number`, lists every fix sent, and
  `pages` agrees; a batch answered on its first send reports no duplicates (a lost DynamoDB
  answer must not turn a stored fix into a "duplicate");
- every geofence event as in the reference phase (none lost, none twice), each delivered to the
  webhook receiver once (no crash here, so no duplicate is explained);
- the users and geofences lists count what was created and not deleted.

Prints a markdown table, fault x outcome. `--check` exits 1 if a phase broke a rule (CI runs
`--short --check`; the long run is a benchmark). Standard library only.
"""
import argparse, datetime, http.client, http.server, json, math, os, random, subprocess, sys, tempfile, threading, time
from collections import Counter

API_KEY = "wm_sk_faults_test_key_0123456789"
PUB_KEY = "wm_pk_faults_test_key_0123456789"
TOKEN = "wm_at_faults_test_token_0123456789"
ORIGIN = (13.40, 52.52)
DAY = "start_date=2024-05-01&end_date=2024-05-02"
HERE = os.path.dirname(os.path.abspath(__file__))


def phases(seed, scale):
    """Fault configs. Limits are AWS's (1,000 WCU/s, 3,000 RCU/s a key) scaled to this load."""
    w, r = 12 * scale, 36 * scale
    throttle = {"write_per_pk": w, "read_per_pk": r, "burst_s": 1.0}
    return [
        ("none", {}),
        ("throttling", {"seed": seed, "throttle": throttle}),
        ("conflicts", {"seed": seed, "conflict": True, "conflict_rate": 0.1}),
        ("errors and lost answers", {"seed": seed, "internal_error_rate": 0.04, "lost_answer_rate": 0.04}),
        ("unprocessed and slow", {"seed": seed, "unprocessed_rate": 0.3, "slow_rate": 0.05, "slow_ms": 400}),
        ("all together", {"seed": seed, "throttle": throttle, "conflict": True, "conflict_rate": 0.05,
                          "internal_error_rate": 0.03, "lost_answer_rate": 0.03, "unprocessed_rate": 0.2,
                          "slow_rate": 0.03, "slow_ms": 400}),
    ]


def offset(p, dx, dy):
    lat = p[1] + dy / 111_320.0
    return (p[0] + dx / (111_320.0 * math.cos(math.radians(p[1]))), lat)


def ts(s):
    return (datetime.datetime(2024, 5, 1, 10) + datetime.timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S.000")


class Api:
    """One keep-alive connection per thread; answers (status, headers, json, seconds)."""

    def __init__(self, port):
        self.port, self.local = port, threading.local()
        self.lock, self.log = threading.Lock(), []

    def call(self, method, path, body=None, key=API_KEY):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Api-Key": key, "Content-Type": "application/json"}
        t0 = time.monotonic()
        for _ in range(2):  # once more on a stale kept-alive connection
            conn = getattr(self.local, "conn", None) or http.client.HTTPConnection("127.0.0.1", self.port, timeout=40)
            self.local.conn = conn
            try:
                conn.request(method, path, data, headers)
                r = conn.getresponse()
                raw = r.read()
                out = (r.status, dict((k.lower(), v) for k, v in r.getheaders()), json.loads(raw or b"null"))
                break
            except (OSError, http.client.HTTPException, ValueError):
                conn.close()
                self.local.conn = None
                out = (0, {}, None)
        dt = time.monotonic() - t0
        with self.lock:
            self.log.append((method, path.split("?")[0], out[0], "retry-after" in out[1], dt))
        return out + (dt,)

    def until_ok(self, method, path, body=None, key=API_KEY, tries=60):
        """Sent until 2xx, waiting out 503/429 as `Retry-After` asks (shortened: this is a test)."""
        for i in range(tries):
            st, hd, js, _ = self.call(method, path, body, key)
            if 200 <= st < 300:
                return st, js, i + 1
            if st not in (0, 409, 429, 500, 503):  # an SDK re-sends what failed
                return st, js, i + 1
            time.sleep(min(float(hd.get("retry-after", 0.2)), 0.3) * random.random() + 0.05)
        return st, js, tries


class Receiver(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        self.ids, self.lock = Counter(), threading.Lock()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                with outer.lock:
                    outer.ids[self.headers.get("webhook-id", "")] += 1
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        super().__init__(("127.0.0.1", 0), H)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def start_proxy(upstream):
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "ddb_proxy.py"), "--upstream", upstream, "--port", "0"],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    assert line and line[0] == "PORT", f"proxy did not start: {line}"
    # The server logs to stdout: kept with its stderr, so a 500 can be traced.
    threading.Thread(target=lambda: [log.write(line) for line in p.stdout], daemon=True).start()
    return p, int(line[1])


def proxy_call(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, None if body is None else json.dumps(body))
    r = c.getresponse()
    out = json.loads(r.read() or b"null")
    c.close()
    return out


def start_serve(binary, proxy_port, prefix, data_dir, log):
    port = free_port()
    env = dict(os.environ, AWS_ENDPOINT_URL_DYNAMODB=f"http://127.0.0.1:{proxy_port}",
               WAYMARK_MAIN_TABLE=prefix + "main", WAYMARK_LOCATIONS_TABLE=prefix + "locations",
               WAYMARK_API_KEY=API_KEY, WAYMARK_PUBLISHABLE_KEY=PUB_KEY, WAYMARK_ACCESS_TOKEN=TOKEN,
               WAYMARK_WEBHOOK_ALLOW_PRIVATE="1", WAYMARK_WEBHOOK_RETRY_SCHEDULE="0.2,0.2,0.5,1,1")
    p = subprocess.Popen([binary, "serve", "--dynamodb", "--port", str(port), "--data-dir", data_dir],
                         stdout=subprocess.PIPE, stderr=log, env=env, text=True)
    printed = ""
    while not printed.rstrip().endswith("}"):
        line = p.stdout.readline()
        assert line, f"serve did not start: {printed}"
        printed += line
    # The server logs to stdout: kept with its stderr, so a 500 can be traced.
    threading.Thread(target=lambda: [log.write(line) for line in p.stdout], daemon=True).start()
    return p, port


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    n = s.getsockname()[1]
    s.close()
    return n


def user_batches(u, fixes, batch):
    """User u walks east at 5 m/s through the fence row, a fix every 5 s, in batches."""
    dy = (u % 5) * 30.0 - 60.0
    pts = []
    for i in range(fixes):
        p = offset(ORIGIN, -300.0 + 25.0 * i, dy)
        pts.append({"coordinates": [round(p[0], 7), round(p[1], 7)], "recorded_at": ts(u * 7 + 5 * i),
                    "accuracy": 5.0})
    return [pts[i:i + batch] for i in range(0, len(pts), batch)]


def run_phase(args, name, faults, proxy_port, reference):
    prefix = f"faults-{os.getpid()}-{int(time.time() * 1000) % 10**9}-"
    data_dir = tempfile.mkdtemp(prefix="waymark-faults-")
    log = open(os.path.join(data_dir, "server.log"), "w")
    proxy_call(proxy_port, "POST", "/__proxy/faults", {})
    server, port = start_serve(args.bin, proxy_port, prefix, data_dir, log)
    api, rx = Api(port), Receiver()
    try:
        return drive(args, name, faults, proxy_port, api, rx, reference, data_dir)
    finally:
        server.kill()
        server.wait()
        rx.shutdown()
        log.close()


def drive(args, name, faults, proxy_port, api, rx, reference, data_dir):
    users_n, fixes_n, fences_n = (8, 60, 8) if args.short else (32, 200, 50)
    fences = []
    for i in range(fences_n):
        c = offset(ORIGIN, 250.0 * i, 0.0)
        st, js, _ = api.until_ok("POST", "/v1/api/geofence/", {
            "geometry_type": "circle", "coordinates": list(c), "geometry_radius": 80, "is_enabled": True,
            "description": f"fence {i}"})
        assert st == 201, (st, js)
        fences.append(js["data"].get("id") or js["data"]["geofence_id"])
    st, js, _ = api.until_ok("POST", "/v1/api/webhooks/", {
        "url": f"http://127.0.0.1:{rx.server_address[1]}/hook", "events": ["geofence.entry", "geofence.exit"]})
    assert st == 201, (st, js)
    users = []
    for _ in range(users_n):
        st, js, _ = api.until_ok("POST", "/v1/api/user/", {"app_type": 1, "device_token": "t"}, PUB_KEY)
        u = js["data"]["user_id"]
        api.until_ok("PUT", "/v1/api/user/", {"user_id": u, "geofence_events": True})
        users.append(u)
    api.log.clear()
    proxy_call(proxy_port, "POST", "/__proxy/reset")
    proxy_call(proxy_port, "POST", "/__proxy/faults", faults)

    lock = threading.Lock()
    out = Counter()
    made = {"users": len(users), "fences": len(fences)}
    maybe = {"users": 0, "fences": 0}
    sent = {u: user_batches(i, fixes_n, 10) for i, u in enumerate(users)}
    todo = list(users)
    done = threading.Event()

    def ingest():
        while True:
            with lock:
                if not todo:
                    return
                u = todo.pop()
            for b in sent[u]:
                st, js, tries = api.until_ok("POST", "/v1/api/location/", {"user_id": u, "locations": b}, PUB_KEY)
                with lock:
                    if not 200 <= st < 300:
                        out["batches never stored"] += 1
                    elif tries == 1 and js["data"].get("duplicates", 0):
                        out["false duplicates"] += js["data"]["duplicates"]

    def crud(k):
        rnd = random.Random(args.seed * 10 + k)
        while not done.is_set():
            st, js, tries = api.until_ok("POST", "/v1/api/user/", {"app_type": 1, "device_token": "c"}, PUB_KEY)
            with lock:
                # A create answered 503/500 may still have been applied (an unknown outcome):
                # the lists may hold one more for each create sent again.
                maybe["users"] += tries - 1
            if st == 201:
                with lock:
                    made["users"] += 1
                uid = js["data"]["user_id"]
            else:
                continue
            far = offset(ORIGIN, rnd.uniform(-20000, 20000), rnd.uniform(30000, 40000))
            st, js, tries = api.until_ok("POST", "/v1/api/geofence/", {
                "geometry_type": "circle", "coordinates": list(far), "geometry_radius": 50, "description": "crud"})
            with lock:
                maybe["fences"] += tries - 1
            if st == 201:
                fid = js["data"].get("id") or js["data"]["geofence_id"]
                with lock:
                    made["fences"] += 1
                api.until_ok("PUT", "/v1/api/geofence/", {"geofence_id": fid, "description": "crud renamed"})
                if rnd.random() < 0.5:
                    st, _, tries = api.until_ok("DELETE", f"/v1/api/geofence/?geofence_id={fid}")
                    # A 404 after a try that failed: that try deleted it.
                    if 200 <= st < 300 or (st == 404 and tries > 1):
                        with lock:
                            made["fences"] -= 1
            st, js, _ = api.until_ok("POST", "/v1/api/trips/", {"user_id": uid, "origins": [list(far)]})
            if st == 201:
                tid = js["data"][0]["id"]
                for action in ("start", "end"):
                    api.until_ok("POST", "/v1/api/trips/controls/", {"trip_id": tid, "action": action})

    def reader():
        while not done.is_set():
            for path in ("/v1/api/user/?page_number=2", "/v1/api/geofence/?page_number=1",
                         f"/v1/api/event/?{DAY}&page_number=1"):
                api.call("GET", path)
            time.sleep(0.05)

    t0 = time.monotonic()
    workers = [threading.Thread(target=ingest) for _ in range(8)]
    side = [threading.Thread(target=crud, args=(k,)) for k in range(3)] + [threading.Thread(target=reader)]
    for t in workers + side:
        t.start()
    for t in workers:
        t.join()
    done.set()
    for t in side:
        t.join()
    ingest_s = time.monotonic() - t0
    injected = proxy_call(proxy_port, "GET", "/__proxy/stats?brief=1").get("faults", {})
    proxy_call(proxy_port, "POST", "/__proxy/faults", {})

    # Settle: events listed and webhooks received, stable for 5 s (at most 90 s).
    def snapshot():
        evs = {}
        for i, u in enumerate(users):
            evs[i] = paged(api, f"/v1/api/event/?{DAY}&user_id={u}", "events")
        with rx.lock:
            return evs, sum(rx.ids.values())

    last, stable_since, deadline = None, time.monotonic(), time.monotonic() + 90
    while time.monotonic() < deadline:
        snap = snapshot()
        key = (sum(len(v) for v in snap[0].values()), snap[1])
        if key != last:
            last, stable_since = key, time.monotonic()
        elif time.monotonic() - stable_since > 5 and key[1] >= key[0]:
            break
        time.sleep(0.5)
    settled_s = time.monotonic() - t0 - ingest_s
    evs, _ = snapshot()

    # Fixes: every page of each user's history.
    for i, u in enumerate(users):
        listed, pages, visited = 0, None, 0
        for page in range(1, 1000):
            st, _, js, _ = api.call("GET", f"/v1/api/location/?user_id={u}&{DAY}&page_number={page}")
            if st != 200:
                out["list errors"] += 1
                break
            d = js["data"]
            pages = d["pages"] if pages is None else pages
            if not d["locations"]:
                break
            listed += len(d["locations"])
            visited += 1
        expect = sum(len(b) for b in sent[u])
        out["fixes lost"] += max(0, expect - listed)
        out["fixes twice"] += max(0, listed - expect)
        if pages != visited:
            out["list mismatches"] += 1

    summary = {i: sorted((e["event_type"], fences.index(e["geofence_id"]) if e["geofence_id"] in fences else -1,
                          e["recorded_at"]) for e in v) for i, v in evs.items()}
    all_events = [e for v in evs.values() for e in v]
    if reference is not None:
        for i in summary:
            want, got = Counter(reference[i]), Counter(summary[i])
            out["events lost"] += sum((want - got).values())
            out["events twice"] += sum((got - want).values())
            if want != got:
                ids = Counter(e["id"] for e in evs[i])
                print(f"{name}: user {i} ({users[i]}): missing {sorted((want - got).elements())}, extra "
                      f"{sorted((got - want).elements())}, ids listed twice {[k for k, n in ids.items() if n > 1]}",
                      file=sys.stderr)
    project = paged(api, f"/v1/api/event/?{DAY}", "events")
    if sorted(e["id"] for e in project) != sorted(e["id"] for e in all_events):
        out["list mismatches"] += 1
    with rx.lock:
        ids = Counter(rx.ids)
    out["deliveries missing"] = sum(1 for e in all_events if ids.get(e["id"], 0) == 0)
    dup = sum(n - 1 for n in ids.values() if n > 1)
    for path, key, n, extra in (("/v1/api/user/", "users", made["users"], maybe["users"]),
                                ("/v1/api/geofence/", "geofences", made["fences"], maybe["fences"])):
        items = paged(api, path, key)
        distinct = len({x.get("user_id") or x.get("id") or x.get("geofence_id") for x in items})
        if not n <= len(items) <= n + extra or distinct != len(items):
            out["list mismatches"] += 1

    lat = sorted(x[4] for x in api.log)
    codes = Counter(x[2] for x in api.log)
    for x in api.log:
        if x[2] >= 500 and x[2] != 503:
            print(f"{name}: {x[0]} {x[1]} answered {x[2]} after {x[4]:.1f} s", file=sys.stderr, flush=True)
    row = {
        "phase": name, "requests": len(api.log), "faults injected": sum(injected.values()) if injected else 0,
        "503/429": codes[503] + codes[429], "503 without Retry-After": sum(1 for x in api.log if x[2] == 503 and not x[3]),
        "409": codes[409], "500": sum(n for c, n in codes.items() if c >= 500 and c != 503),
        "dropped": codes[0], "fixes lost": out["fixes lost"], "fixes twice": out["fixes twice"],
        "false duplicates": out["false duplicates"], "batches never stored": out["batches never stored"],
        "events": len(all_events), "events lost": out["events lost"], "events twice": out["events twice"],
        "deliveries missing": out["deliveries missing"],
        "duplicate deliveries per 1,000": round(1000 * dup / max(1, len(all_events)), 1),
        "list mismatches": out["list mismatches"] + out["list errors"],
        "p50 ms": round(1000 * lat[len(lat) // 2]) if lat else 0,
        "p99 ms": round(1000 * lat[int(len(lat) * 0.99)]) if lat else 0,
        "ingest s": round(ingest_s, 1), "settled s": round(settled_s, 1), "log": os.path.join(data_dir, "server.log"),
    }
    return row, summary


def paged(api, path, key):
    items = []
    sep = "&" if "?" in path else "?"
    for page in range(1, 10_000):
        st, _, js, _ = api.call("GET", f"{path}{sep}page_number={page}")
        if st != 200 or not js["data"][key]:
            break
        items.extend(js["data"][key])
    return items


BROKEN = ("500", "503 without Retry-After", "dropped", "fixes lost", "fixes twice", "false duplicates",
          "batches never stored", "events lost", "events twice", "deliveries missing", "list mismatches")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the waymark binary")
    ap.add_argument("--short", action="store_true", help="the small seeded load CI runs")
    ap.add_argument("--check", action="store_true", help="exit 1 when a phase breaks a rule")
    ap.add_argument("--seed", type=int, default=57)
    ap.add_argument("--phases", default="", help="comma-separated phase names (default all)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    upstream = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    assert upstream, "AWS_ENDPOINT_URL_DYNAMODB must point at DynamoDB Local"
    random.seed(args.seed)
    proxy, proxy_port = start_proxy(upstream)
    rows, reference, bad = [], None, []
    try:
        wanted = [p.strip() for p in args.phases.split(",") if p.strip()]
        for name, faults in phases(args.seed, 1):
            if wanted and name not in wanted and name != "none":
                continue
            row, summary = run_phase(args, name, faults, proxy_port, reference)
            broke = [k for k in BROKEN if row[k]]
            if args.check and broke and set(broke) <= {"events lost", "events twice"}:
                # Seen in about one of ten short runs of the errors phase until 4b32d35 (a pass
                # racing a batch being stored: an entry one fix late; docs/measurements.md). CI
                # still runs such a phase again once, so a break that repeats fails; both rows
                # are printed.
                print(f"{name}: derived events differ from the reference ({broke}); running it again",
                      file=sys.stderr, flush=True)
                rows.append(dict(row, phase=name + " (first run)"))
                row, summary = run_phase(args, name, faults, proxy_port, reference)
            if name == "none":
                reference = summary
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            bad += [f"{name}: {k} = {row[k]}" for k in BROKEN if row[k]]
            if name != "none" and row["duplicate deliveries per 1,000"]:
                bad.append(f"{name}: duplicate deliveries {row['duplicate deliveries per 1,000']} per 1,000")
    finally:
        proxy.kill()
    cols = [c for c in rows[0] if c != "log"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if bad:
        print("\n".join(["broken:"] + bad), file=sys.stderr)
        if args.check:
            sys.exit(1)


if __name__ == "__main__":
    main()
