"""Seed `waymark serve` for the read endpoints all.sh measures, then print one `name path` line
per endpoint (GET, secret key).

A user of its own (the ingest run's user stays as it was) gets a drive of 200 fixes through 50
circular fences (so it has history and events) and 10 trips; the paths are what a dashboard
asks for.

Usage: seed_reads.py BASE_URL   (key from WM_KEY)
"""
import datetime
import json
import os
import sys
import urllib.request

base = sys.argv[1]
key = os.environ["WM_KEY"]


def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Api-Key": key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


LNG, LAT = 13.40, 52.50
user = call("POST", "/v1/api/user/", {"app_type": 1, "device_token": "bench-reads"})["data"]["user_id"]
call("PUT", "/v1/api/user/", {"user_id": user, "geofence_events": True, "location_events": True})
for k in range(50):
    call("POST", "/v1/api/geofence/", {"coordinates": [LNG + k * 0.002, LAT], "geometry_type": "circle",
                                      "geometry_radius": 100, "is_enabled": True, "description": f"fence {k}"})
start = datetime.datetime(2024, 5, 1, 8, 0, 0)
fixes = [{"coordinates": [LNG + k * 0.0005, LAT], "accuracy": 5, "speed": 8,
          "recorded_at": (start + datetime.timedelta(seconds=4 * k)).isoformat(timespec="milliseconds")}
         for k in range(200)]
call("POST", "/v1/api/location/", {"user_id": user, "locations": fixes})
trip = None
for _ in range(10):
    trip = call("POST", "/v1/api/trips/", {"user_id": user, "origins": [[LNG, LAT]]})["data"][0]["id"]

for name, path in [
    ("locations", f"/v1/api/location/?user_id={user}"),
    ("geofences", "/v1/api/geofence/"),
    ("trips", f"/v1/api/trips/?user_id={user}"),
    ("trip", f"/v1/api/trips/?trip_id={trip}"),
    ("events", f"/v1/api/event/?user_id={user}&start_date=2024-05-01&end_date=2024-05-02"),
    ("search", f"/v1/api/search/geofences/?location={LAT},{LNG + 0.02}&radius=1000"),
    ("insights", f"/v1/api/insights/home/?user_id={user}"),
    ("settings", "/v1/api/project/settings/"),
]:
    print(name, path)
