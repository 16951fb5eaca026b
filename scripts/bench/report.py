"""The markdown table of scripts/bench/all.sh: each figure next to its peer from the same run.

Usage: report.py OUT_DIR DURATION RUNS (OUT_DIR holds all.sh's wrk reports, coldstart.json, sizes)
"""
import json
import os
import re
import subprocess
import sys
import time

out, dur, runs = sys.argv[1], sys.argv[2], sys.argv[3]
UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def wrk(name):
    """(requests/s, p99 ms, problems) from a wrk --latency report."""
    text = open(os.path.join(out, name)).read()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", text).groups()
    problems = re.findall(r"(Non-2xx or 3xx responses: \d+|Socket errors: .*)", text)
    return rps, float(value) * UNITS[unit], problems


def verdict(ok):
    return "yes" if ok else "**no**"


rows = []
notes = []
h_rps, h_p99, h_bad = wrk("hello_get")
w_rps, w_p99, w_bad = wrk("waymark_get")
o_rps, o_p99, o_bad = wrk("waymark_get_one")
i_rps, i_p99, i_bad = wrk("waymark_ingest")
for what, bad in (("hello-world axum", h_bad), ("GET /v1/api/user/", w_bad), ("GET one user", o_bad),
                  ("ingest", i_bad)):
    if bad:
        notes.append(f"{what}: {'; '.join(bad)}")
rows.append(("`GET /v1/api/user/` (page of 10) requests/s (wrk -t2 -c32)", f"{w_rps:,.0f}", f"{h_rps:,.0f} (axum)",
             f"{w_rps / h_rps:.0%}", "≥ 50%", verdict(w_rps >= 0.5 * h_rps)))
rows.append(("`GET /v1/api/user/` p99", f"{w_p99:.2f} ms", f"{h_p99:.2f} ms (axum)", f"{w_p99 / h_p99:.1f}×",
             "≤ 5 ms", verdict(w_p99 <= 5)))
rows.append(("`GET /v1/api/user/?user_id=` requests/s (wrk -t2 -c32)", f"{o_rps:,.0f}", f"{h_rps:,.0f} (axum)",
             f"{o_rps / h_rps:.0%}", "≥ 50%", verdict(o_rps >= 0.5 * h_rps)))
rows.append(("`GET /v1/api/user/?user_id=` p99", f"{o_p99:.2f} ms", f"{h_p99:.2f} ms (axum)",
             f"{o_p99 / h_p99:.1f}×", "≤ 5 ms", verdict(o_p99 <= 5)))
for line in open(os.path.join(out, "reads")):
    name, path = line.split()
    r_rps, r_p99, r_bad = wrk(f"read_{name}")
    # The peer measured right before this read (all.sh).
    p_rps, _, p_bad = wrk(f"peer_{name}")
    for what, bad in ((path, r_bad), (f"hello-world axum before {name}", p_bad)):
        if bad:
            notes.append(f"{what}: {'; '.join(bad)}")
    rows.append((f"`GET {path.split('?')[0]}` ({name}) requests/s", f"{r_rps:,.0f} (p99 {r_p99:.2f} ms)",
                 f"{p_rps:,.0f} (axum)", f"{r_rps / p_rps:.0%}", "≥ 30%", verdict(r_rps >= 0.3 * p_rps)))
locs = i_rps * 100
rows.append(("`POST /v1/api/location/` locations/s (100 a request, wrk -t2 -c8)", f"{locs:,.0f}", "60,000 (target)",
             f"{locs / 60000:.0%}", "≥ 100%", verdict(locs >= 60000)))

cold = json.load(open(os.path.join(out, "coldstart.json")))
floor = cold.pop("hello-lambda")["median"]
for name, c in sorted(cold.items()):
    ratio = c["median"] / floor
    rows.append((f"cold start `{name}` (median)", f"{c['median']:.1f} ms", f"{floor:.1f} ms (lambda_http)",
                 f"{ratio:.2f}×", "≤ 1.5×", verdict(ratio <= 1.5)))

sizes = dict(line.split() for line in open(os.path.join(out, "sizes")))
sizes = {k: int(v) for k, v in sizes.items()}
hello = sizes.pop("hello-lambda")
sizes.pop("hello-axum")
mb = lambda b: f"{b / 1e6:.1f} MB"  # noqa: E731
for name, size in sorted(sizes.items()):
    limit = name != "waymark"  # the local server is not deployed; shown for information
    rows.append((f"size `{name}` (stripped)", mb(size), f"{mb(hello)} (lambda_http)", f"{size / hello:.1f}×",
                 "≤ 8 MB" if limit else "—", verdict(size <= 8e6) if limit else "—"))

# The city layout's search (city_search.sh): Waymark over HTTP against PostGIS's same page and
# total, prepared over TCP, in the same run; answers compared.
city = os.path.join(out, "city", "results.jsonl")
if os.path.exists(city):
    res = [json.loads(line) for line in open(city) if line.startswith("{")]
    by = {(r["kind"], r.get("radius_m")): r for r in res}
    for r in sorted({r["radius_m"] for r in res if r["kind"] == "search_pg"}):
        w, g, c = by.get(("search_http", r)), by[("search_pg", r)], by.get(("search_compare", r), {})
        found = by.get(("search", r), {}).get("found_p50")
        same = all(v.get("differing") == 0 for k, v in c.items() if isinstance(v, dict))
        if w is None:
            continue
        ratio = w["p50_ms"] / g["p50_ms"]
        rows.append((f"city search {r:g} m, first page + `pages` (median {found:,.0f} found), p50 over HTTP",
                     f"{w['p50_ms']:.1f} ms", f"{g['p50_ms']:.1f} ms (PostGIS, prepared, TCP)", f"{ratio:.2f}×",
                     "≤ 1×, same answers", verdict(ratio <= 1 and same)))
        if not same:
            notes.append(f"city search {r:g} m: answers differ from PostGIS's: {c}")
elif os.path.exists(os.path.join(out, "city.log")):
    notes.append("city search did not finish: " + open(os.path.join(out, "city.log")).read()[-300:])

commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
load = open("/proc/loadavg").read().split()[:3]
print(f"Run {time.strftime('%Y-%m-%d %H:%M')} at {commit}, {os.cpu_count()} cores, load average "
      f"{' '.join(load)} (after the run); wrk {dur} per server after a 2 s warm-up, {runs} cold starts "
      "per binary in turns.\n")
print("| Figure | Waymark | Peer, same run | Ratio | Target | Met |")
print("|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")

# Each read against the same bytes served with no work (all.sh's same-bytes): the share of a
# read's cost that is its answer's sending alone, and what is left to the handler.
names = [line.split()[0] for line in open(os.path.join(out, "reads"))]
alone = [("users", "waymark_get", "same_users")] + [(n, f"read_{n}", f"same_{n}") for n in names]
print("\n| Read | Waymark, requests/s | The same bytes, no work | Waymark ÷ same bytes | Answer, bytes |")
print("|---|---|---|---|---|")
for name, read, served in alone:
    r_rps, s_rps = wrk(read)[0], wrk(served)[0]
    size = os.path.getsize(os.path.join(out, "bodies", name))
    print(f"| {name} | {r_rps:,.0f} | {s_rps:,.0f} | {r_rps / s_rps:.0%} | {size:,} |")
for n in notes:
    print(f"\nProblem: {n}")
