#!/usr/bin/env python3
"""City-layout search, the client side of scripts/bench/city_search.sh (issue 47).

  city_search.py http URL KEY EXPORT_DIR RADIUS LIMIT
      GET /v1/api/search/geofences/ at every point of EXPORT_DIR/queries.csv, one at a time on one
      kept-alive connection (5 warm-up requests first); writes EXPORT_DIR/http_<radius>.txt
      ("qid total id:distance ..." of the first page, total from `pages` and the last page's
      length is not known: pages * LIMIT is written as `pages:N`) and prints one JSON line.
  city_search.py pg PSQL_ARGS_JSON EXPORT_DIR RADIUS LIMIT
      The same page and total from PostGIS: one prepared statement over TCP (psql, client-side
      \\timing), every point in turn after 5 warm-up executions; writes EXPORT_DIR/pg_<radius>.txt.
  city_search.py same EXPORT_DIR_A EXPORT_DIR_B RADIUS LIMIT
      Whether two runs (say before and after a change) answered the in-process searches alike:
      fences named by their creation order (ids differ between runs), distances to the millimetre.
  city_search.py compare EXPORT_DIR RADIUS LIMIT
      Compares in-process (answers_), HTTP (http_) and PostGIS (pg_) answers: the same ids in the
      same order, distances within 0.005 m (HTTP shows centimetres: 0.006), the same `pages`.
"""
import http.client
import json
import re
import subprocess
import sys
import time
import urllib.parse

WARM = 5


def points(d):
    with open(f"{d}/queries.csv") as f:
        next(f)
        return [tuple(map(float, line.strip().split(",")[1:])) for line in f if line.strip()]


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, round(p / 100 * (len(v) - 1)))] if v else float("nan")


def over_http(url, key, d, radius, limit):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    pts = points(d)
    ms, lines = [], []
    for i, (lng, lat) in enumerate(pts[:WARM] + pts):
        path = f"/v1/api/search/geofences/?location={lat:.9f},{lng:.9f}&radius={radius:g}&page_limit={limit}"
        t = time.perf_counter()
        conn.request("GET", path, headers={"Api-Key": key})
        r = conn.getresponse()
        body = r.read()
        el = (time.perf_counter() - t) * 1000
        if r.status != 200:
            sys.exit(f"HTTP {r.status}: {body[:300]!r}")
        if i < WARM:
            continue
        ms.append(el)
        data = json.loads(body)["data"]
        page = " ".join(f"{g['id']}:{g['distance']:.3f}" for g in data["geofences"])
        lines.append(f"{i - WARM} pages:{data['pages']} {page}".rstrip())
    with open(f"{d}/http_{radius:g}.txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(json.dumps({"kind": "search_http", "radius_m": radius, "limit": limit, "queries": len(ms),
                      "p50_ms": pct(ms, 50), "p99_ms": pct(ms, 99)}))


# The first page (nearest first, ties by id) and the total, as the endpoint answers them: each
# candidate's distance computed once (of the forms tried, the fastest: about half the time of
# counting and ordering in two subqueries, and of a window count).
PREPARE = """PREPARE page(float8, float8, float8, int) AS
WITH q AS (SELECT ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography AS pt),
h AS MATERIALIZED (
  SELECT id, greatest(ST_Distance(geog, pt) - radius_m, 0) AS d FROM circles, q
    WHERE ST_DWithin(geog, pt, $3 + 1000)
  UNION ALL
  SELECT id, ST_Distance(geog, pt) FROM polygons, q WHERE ST_DWithin(geog, pt, $3))
SELECT (SELECT count(*) FROM h WHERE d <= $3),
       (SELECT string_agg(id || ':' || to_char(d, 'FM999990.000'), ' ' ORDER BY d, id) FROM (
          SELECT id, d FROM h WHERE d <= $3 ORDER BY d, id LIMIT $4) s);
"""


def pg(psql_args, d, radius, limit):
    pts = points(d)
    script = ["\\pset format unaligned", "\\pset tuples_only on", PREPARE, "\\timing on"]
    for lng, lat in pts[:WARM] + pts:
        script.append(f"EXECUTE page({lng:.9f}, {lat:.9f}, {radius:g}, {limit});")
    out = subprocess.run(json.loads(psql_args) + ["-v", "ON_ERROR_STOP=1"], input="\n".join(script) + "\n",
                         capture_output=True, text=True, check=True).stdout.splitlines()
    rows, ms = [], []
    for line in out:
        m = re.match(r"Time: ([0-9.]+) ms", line)
        if m:
            ms.append(float(m.group(1)))
        elif "|" in line:
            rows.append(line)
    # The PREPARE's own time comes first.
    ms = ms[-len(rows):]
    rows, ms = rows[WARM:], ms[WARM:]
    lines = []
    for i, row in enumerate(rows):
        total, page = row.split("|", 1)
        lines.append(f"{i} {total} {page}".rstrip())
    with open(f"{d}/pg_{radius:g}.txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(json.dumps({"kind": "search_pg", "radius_m": radius, "limit": limit, "queries": len(ms),
                      "p50_ms": pct(ms, 50), "p99_ms": pct(ms, 99)}))


def read_answers(path, limit):
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            qid, total = int(parts[0]), parts[1]
            pages = int(total[6:]) if total.startswith("pages:") else -(-int(total) // limit)
            hits = [(h.rsplit(":", 1)[0], float(h.rsplit(":", 1)[1])) for h in parts[2:]]
            out[qid] = (pages, hits, None if total.startswith("pages:") else int(total))
    return out


def compare(d, radius, limit):
    pg_ = read_answers(f"{d}/pg_{radius:g}.txt", limit)
    report = {"kind": "search_compare", "radius_m": radius, "queries": len(pg_)}
    for name, tol in (("answers", 0.005), ("http", 0.006)):
        try:
            mine = read_answers(f"{d}/{name}_{radius:g}.txt", limit)
        except FileNotFoundError:
            continue
        bad, worst = [], 0.0
        for qid, (pages, hits, total) in pg_.items():
            m = mine.get(qid)
            ok = m is not None and m[0] == pages and [h[0] for h in m[1]] == [h[0] for h in hits]
            ok = ok and (m[2] is None or m[2] == total)
            if ok:
                diff = max((abs(a[1] - b[1]) for a, b in zip(m[1], hits)), default=0.0)
                worst = max(worst, diff)
                ok = diff <= tol
            if not ok:
                bad.append(qid)
        report[name] = {"differing": len(bad), "first_differing": bad[:5], "max_distance_diff_m": round(worst, 4)}
    print(json.dumps(report))
    return report


def same(a, b, radius, limit):
    def rows(d):
        with open(f"{d}/fences.csv") as f:
            next(f)
            order = {line.split(",", 1)[0]: i for i, line in enumerate(f)}
        ans = read_answers(f"{d}/answers_{radius:g}.txt", limit)
        return {q: (t, [(order[i], round(x, 3)) for i, x in hits]) for q, (_, hits, t) in ans.items()}
    ra, rb = rows(a), rows(b)
    bad = [q for q in ra if ra[q] != rb.get(q)]
    print(json.dumps({"kind": "search_same", "radius_m": radius, "queries": len(ra), "differing": len(bad),
                      "first_differing": bad[:5]}))
    return not bad and len(ra) == len(rb)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "http":
        over_http(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), int(sys.argv[6]))
    elif cmd == "pg":
        pg(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "same":
        sys.exit(0 if same(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])) else 1)
    elif cmd == "compare":
        r = compare(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
        if any(v["differing"] for k, v in r.items() if isinstance(v, dict)):
            sys.exit(1)
    else:
        sys.exit(__doc__)
