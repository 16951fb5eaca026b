#!/usr/bin/env python3
"""Print the table of scripts/bench/geofences.sh from its output folder, and compare Waymark's
search results with PostGIS's for every query point.

Inputs (all optional but the first): embedded.jsonl, cities.jsonl and dynamo.jsonl
(examples/geofence_bench.rs), http_search_<r>_<conf>.json and ingest_<on|off>_<round>.json (wrk's
JSON line), ingest_events.json and ingest_events_warm.json (the project's events after the rounds and
after the warm-up before them),
pg_timings.csv (radius_m,qid,ms,n,hits), export/results_<r>.csv (qid,id:dist ...)."""

import csv
import json
import os
import statistics
import sys

out = sys.argv[1]
p = lambda *a: os.path.join(out, *a)


def jsonl(name):
    try:
        with open(p(name)) as f:
            return [json.loads(l) for l in f if l.strip().startswith("{")]
    except FileNotFoundError:
        return []


def wrk(name):
    try:
        with open(p(name)) as f:
            for l in f:
                if l.startswith("JSON "):
                    return json.loads(l[5:])
    except FileNotFoundError:
        pass
    return None


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, round(q / 100 * (len(v) - 1)))] if v else float("nan")


def fmt(x, d=2):
    if x is None:
        return "-"
    if isinstance(x, float) and x != x:
        return "-"
    return f"{x:,.{d}f}" if isinstance(x, float) else f"{x:,}"


rows = []
emb = jsonl("embedded.jsonl")
emb += jsonl("cities.jsonl")
ddb = jsonl("dynamo.jsonl")
ins = {r["store"]: r for r in emb + ddb if r["kind"] == "insert"}

print("\n== Fences and index")
for s, r in ins.items():
    cpf = ", ".join(f"{k} {v['mean']:.1f} (max {v['max']})" for k, v in sorted(r["cells_per_fence"].items()))
    wcu = ""
    if r.get("write_capacity_units") is not None:
        cells = sum(v["mean"] for v in r["cells_per_fence"].values()) / len(r["cells_per_fence"])
        wcu = (f"; DynamoDB Local reports {r['write_capacity_units'] / r['fences']:.1f} WCU/fence "
               f"(a transaction of 1 + {cells:.1f} puts of <1 KB items would bill {2 * (1 + cells):.1f} on DynamoDB)")
    print(
        f"{s}: {r['fences']:,} fences in {r['seconds']:.0f} s ({r['per_second']:.0f}/s, {r['concurrency']} in flight{wcu}); "
        f"{r['index_items']:,} index items in {r['cells']:,} cells; cells per fence: {cpf}; "
        f"item JSON {r['item_json_bytes_mean']:.0f} B mean, {r['item_json_bytes_max']:.0f} B max; "
        f"fences per cell p50 {r['cell_fences_p50']:.0f}, p99 {r['cell_fences_p99']:.0f}, max {r['cell_fences_max']:.0f} "
        f"(hottest {r['hottest_cell'][0]})"
    )
    if r.get("redb_bytes"):
        print(f"  redb file after creating them: {r['redb_bytes'] / 1e6:,.0f} MB")

print("\n== Nearby search (one query at a time unless noted)")
hdr = ["setup", "fences", "radius", "queries", "p50 ms", "p99 ms", "q/s", "cells",
       "hits mean", "hits max", "RCU mean", "RCU p99"]
table = []
for r in emb + ddb:
    if r["kind"] != "search":
        continue
    table.append([f"{r['store']}, in-process", fmt(r["fences"]), f"{r['radius_m']:.0f} m", fmt(r["queries"]),
                  fmt(r["p50_ms"], 3), fmt(r["p99_ms"], 3), fmt(r["queries_per_s"], 0), fmt(r["cells_mean"], 0),
                  fmt(r["hits_mean"], 1), fmt(r["hits_max"], 0),
                  fmt(r.get("capacity_units_mean"), 1), fmt(r.get("capacity_units_p99"), 1)])
http = sorted(f for f in os.listdir(out) if f.startswith("http_search_"))
for f in http:
    w = wrk(f)
    if not w:
        continue
    _, _, radius, conf = f[:-5].split("_", 3)
    table.append([f"waymark serve (file), HTTP wrk {conf}", fmt(ins.get("embedded (file)", {}).get("fences")),
                  f"{radius} m", fmt(w["requests"]), fmt(w["p50_ms"], 3), fmt(w["p99_ms"], 3),
                  fmt(w["requests_per_s"], 0), "", "", "", "", ""])
pg = {}
try:
    with open(p("pg_timings.csv")) as f:
        for r in csv.DictReader(f):
            pg.setdefault(float(r["radius_m"]), []).append(r)
except FileNotFoundError:
    pass
for radius, rs in sorted(pg.items()):
    ms = [float(r["ms"]) for r in rs]
    n = [int(r["n"]) for r in rs]
    table.append(["PostGIS 3 (GiST), server-side", fmt(next(iter(ins.values()), {}).get("fences")),
                  f"{radius:.0f} m", fmt(len(ms)), fmt(pct(ms, 50), 3), fmt(pct(ms, 99), 3),
                  fmt(len(ms) / (sum(ms) / 1000), 0), "", "", "", fmt(statistics.mean(n), 1), fmt(max(n), 0), "", "", ""])
widths = [max(len(str(x)) for x in col) for col in zip(hdr, *table)]
line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
print(line(hdr))
print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
for t in table:
    print(line(t))

inproc = [r for r in emb if r["kind"] == "ingest"]
if inproc:
    print("\n== Ingest in-process (examples/geofence_bench.rs), 100 locations per batch, users alternating")
    for r in inproc:
        print(f"{r['store']}, geofence_events {'on' if r['geofence_events'] else 'off':>3}: "
              f"{r['locations_per_s']:,.0f} locations/s over {r['batches']:,} batches; per batch p50 {r['batch_p50_ms']:.2f} ms, "
              f"p99 {r['batch_p99_ms']:.2f} ms (store p50 {r['store_p50_ms']:.2f} / p99 {r['store_p99_ms']:.2f}; "
              f"ingest hook p50 {r['hook_p50_ms']:.2f} / p99 {r['hook_p99_ms']:.2f} / mean {r['hook_mean_ms']:.2f}); "
              f"events ~{r['events_about']:,}")

print("\n== Ingest on waymark serve (file store), 100 locations per request")
ev = warm = None
try:
    with open(p("ingest_events.json")) as f:
        ev = json.load(f)
    with open(p("ingest_events_warm.json")) as f:
        warm = json.load(f)
except FileNotFoundError:
    pass
runs = sorted(f for f in os.listdir(out) if f.startswith("ingest_o"))
agg = {}
for f in runs:
    _, flag, rnd = f[:-5].split("_")
    w = wrk(f)
    if w:
        agg.setdefault(flag, []).append(w)
        print(f"round {rnd}, geofence_events {flag:>3}: {w['locations_per_s']:,.0f} locations/s ({w['requests_per_s']:.1f} req/s), "
              f"p50 {w['p50_ms']:.1f} ms, p99 {w['p99_ms']:.1f} ms, max {w['max_ms']:.1f} ms, non-2xx {w['non_2xx']}")
for flag in ["off", "on"]:
    ws = agg.get(flag)
    if ws:
        extra = ""
        if flag == "on" and ev:
            # Before the rounds: the in-process run's, then the warm-up's (counted after it).
            before = warm["events"] if warm else sum(r["events_about"] for r in inproc)
            extra = f"; events fired in all 'on' rounds ~{ev['events'] - before:,} (project total less what came before them)"
        print(f"mean, geofence_events {flag:>3}: {statistics.mean(w['locations_per_s'] for w in ws):,.0f} locations/s, "
              f"p99 {statistics.mean(w['p99_ms'] for w in ws):.1f} ms{extra}")

if pg:
    print("\n== Waymark vs PostGIS result sets (every query point)")
    for radius, rs in sorted(pg.items()):
        try:
            with open(p("export", f"results_{radius:g}.csv")) as f:
                wm = {int(l.split(",", 1)[0]): l.rstrip("\n").split(",", 1)[1] for l in f}
        except FileNotFoundError:
            continue
        parse = lambda s: dict((h.split(":")[0], float(h.split(":")[1])) for h in s.split() if h)
        same = 0
        diffs = []
        dist_err = 0.0
        order_diff = 0
        for r in rs:
            q = int(r["qid"])
            a, b = parse(wm.get(q, "")), parse(r["hits"] or "")
            if a.keys() == b.keys():
                same += 1
                for k in a:
                    dist_err = max(dist_err, abs(a[k] - b[k]))
                if list(a) != list(b):
                    order_diff += 1
            else:
                for k in a.keys() - b.keys():
                    diffs.append((q, k, "Waymark only", a[k]))
                for k in b.keys() - a.keys():
                    diffs.append((q, k, "PostGIS only", b[k]))
        print(f"radius {radius:.0f} m: {same}/{len(rs)} queries return the same fence set; "
              f"largest distance difference on shared hits {dist_err:.3f} m; "
              f"{order_diff} with a different order (ties/rounding)")
        for q, k, side, d in diffs[:20]:
            print(f"  query {q}: fence {k} {side}, distance {d:.3f} m (radius {radius:.0f} m)")
        if len(diffs) > 20:
            print(f"  ... {len(diffs) - 20} more")
