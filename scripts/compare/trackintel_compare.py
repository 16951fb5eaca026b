#!/usr/bin/env python3
"""Compare Waymark's stays, home and work with trackintel's on the same synthetic histories.

Input: a directory written by the insights tests with WAYMARK_LIFE_EXPORT=<dir> (see run.sh):
per case `<case>.csv` (the fixes: tracked_at UTC, longitude, latitude, accuracy, zone) and
`<case>.json` (the truth and Waymark's answer and stays).

trackintel 1.4.2, its documented defaults: staypoints by the sliding method (100 m, 5 min, gaps
up to 15 min), locations by DBSCAN (100 m, 1 sample), home and work by OSNA (home: most time at
rest hours 22:00-07:00 local; work: most time in work hours on weekdays; Ochoa et al.), with
the times in each case's local zone. A second run with `gap_threshold` of 16 h (Waymark's
MAX_GAP) shows what the gap rule alone changes.

Output: one line per case and method, as Markdown table rows, on stdout.
"""
import json
import math
import sys
import warnings
from datetime import timedelta, timezone
from pathlib import Path

import geopandas as gpd
import pandas as pd
import trackintel as ti

warnings.filterwarnings("ignore")


def meters(a, b):
    """Haversine distance (m) between (lng, lat) pairs."""
    if a is None or b is None:
        return None
    (x1, y1), (x2, y2) = a, b
    p1, p2 = math.radians(y1), math.radians(y2)
    dp, dl = p2 - p1, math.radians(x2 - x1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371008.8 * math.asin(math.sqrt(h))


def zone_of(z):
    z = str(z)
    if z[:1] in "+-":
        d = z.replace(":", "")
        s = 1 if z[0] == "+" else -1
        return timezone(s * timedelta(hours=int(d[1:3]), minutes=int(d[3:5])))
    return z


def run_trackintel(csv, gap_minutes):
    df = pd.read_csv(csv)
    zone = zone_of(df["zone"].iloc[0])
    df["tracked_at"] = pd.to_datetime(df["tracked_at"], utc=True).dt.tz_convert(zone)
    df["user_id"] = 0
    gdf = gpd.GeoDataFrame(df, geometry=gpd.points_from_xy(df.longitude, df.latitude), crs="EPSG:4326")
    pfs = ti.io.read_positionfixes_gpd(gdf, tracked_at="tracked_at", user_id="user_id")
    pfs, sp = pfs.generate_staypoints(gap_threshold=gap_minutes, include_last=True)
    if len(sp) == 0:
        return sp, None, None, None
    sp = sp.create_activity_flag(time_threshold=15)
    sp, locs = sp.generate_locations()
    sp = ti.analysis.location_identifier(sp, method="OSNA", pre_filter=False)
    centre = {}
    for purpose in ("home", "work"):
        ids = sp.loc[sp["purpose"] == purpose, "location_id"].dropna().unique()
        if len(ids):
            c = locs.loc[int(ids[0]), "center"]
            centre[purpose] = (c.x, c.y)
    return sp, locs, centre.get("home"), centre.get("work")


def stay_agreement(wm_stays, sp):
    """Share of each side's stays that the other has: overlapping in time, centres within 100 m."""
    if sp is None or len(sp) == 0 or not wm_stays:
        return 0.0, 0.0
    ti_stays = [
        (s.tz_convert("UTC"), e.tz_convert("UTC"), (g.x, g.y))
        for s, e, g in zip(sp["started_at"], sp["finished_at"], sp.geometry)
    ]
    wm = [
        (pd.Timestamp(s["start"], tz="UTC"), pd.Timestamp(s["end"], tz="UTC"), tuple(s["centre"]))
        for s in wm_stays
    ]

    def matched(a, others):
        return any(s < e2 and s2 < e and meters(c, c2) < 100 for (s2, e2, c2) in others for (s, e, c) in [a])

    return (
        sum(matched(a, ti_stays) for a in wm) / len(wm),
        sum(matched(b, wm) for b in ti_stays) / len(ti_stays),
    )


def fmt(x):
    return "-" if x is None else f"{x:.0f}"


def main(folder):
    print("| case | trackintel gap | Waymark stays | trackintel staypoints | Waymark stays trackintel has | "
          "trackintel staypoints Waymark has | home: Waymark / trackintel off truth (m) | "
          "home Waymark-trackintel (m) | work: Waymark / trackintel off truth (m) | work Waymark-trackintel (m) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for js in sorted(Path(folder).glob("*.json")):
        case = js.stem
        data = json.loads(js.read_text())
        truth, wm = data["truth"], data["waymark"]
        for gap in (15.0, 16 * 60.0):
            sp, locs, home, work = run_trackintel(js.with_suffix(".csv"), gap)
            a, b = stay_agreement(wm["stays"], sp)
            print(
                f"| {case} | {gap:.0f} min | {len(wm['stays'])} | {0 if sp is None else len(sp)} | {a:.0%} | {b:.0%} "
                f"| {fmt(meters(wm['home'], truth['home']))} / {fmt(meters(home, truth['home']))} "
                f"| {fmt(meters(wm['home'], home))} "
                f"| {fmt(meters(wm['work'], truth['work']))} / {fmt(meters(work, truth['work']))} "
                f"| {fmt(meters(wm['work'], work))} |",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target/lives")
