#!/usr/bin/env bash
# One benchmark command: builds the workspace and the hello-world peers (scripts/bench/peers) once
# in release, then measures each figure next to its peer in the same run and prints a markdown
# table of ratios (docs/measurements.md keeps it):
#   - GET /v1/api/user/ on `waymark serve` (file store, 25 users; the first page of 10, and one
#     user by user_id) against a hello-world axum server: wrk -t2 -c32, requests/s and p99;
#   - the other read endpoints (locations, geofences, trips, one trip, events, search, insights,
#     settings; scripts/bench/seed_reads.py), each against the axum server measured right before it;
#   - each of those reads' answers served whole by an axum handler doing nothing else (the peers'
#     same-bytes), right after the read: the cost of sending that answer alone (a second table);
#   - POST /v1/api/location/ (100 new locations a request, wrk -t2 -c8) against the issue's target;
#   - start to ready of every Lambda function binary against a hello-world lambda_http binary
#     (coldstart.py, runs interleaved);
#   - stripped binary sizes against the hello-world lambda_http binary and the 8 MB limit;
#   - nearby search in the city layout (issue 47: 100,000 circles over 30 km × 30 km, seed 47;
#     scripts/bench/city_search.sh), first page and `pages` at 1000 and 5000 m over HTTP, against
#     PostGIS's same page and total in the same run, every answer compared.
# Installs wrk from Debian's packages when missing.
# Usage: scripts/bench/all.sh
#   env: DURATION=10s (wrk), READ_DURATION=5s (each other read), RUNS=20 (cold starts per binary), SKIP_BUILD=1 (reuse the build),
#   BIN_DIR=dir (measure binaries saved there, e.g. an earlier build), FUNCTIONS="users ..." (a subset),
#   SKIP_CITY=1 (no city-layout search; it takes 3 to 5 minutes), CITY_QUERIES=200 (points per radius)
set -euo pipefail
cd "$(dirname "$0")/../.."
dur="${DURATION:-10s}"
runs="${RUNS:-20}"
read_dur="${READ_DURATION:-5s}"
# The target dir `cargo run` and scripts/test.sh use (`$CARGO_TARGET_DIR`, else ./target), so one
# build serves all (release lands in release/). Named here because the peers are their own
# workspace: without it they would build into scripts/bench/peers/target.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
peers=scripts/bench/peers
bin="${BIN_DIR:-$CARGO_TARGET_DIR/release}"

if ! command -v wrk >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi

# The peers are only a floor if they are built the way the workspace ships its binaries.
python3 - "$peers/Cargo.toml" <<'PY'
import sys, tomllib
# (Per-package settings aside: they name crates the peers do not use.)
root = tomllib.load(open("Cargo.toml", "rb"))["profile"]["release"]
root.pop("package", None)
peer = tomllib.load(open(sys.argv[1], "rb"))["profile"]["release"]
if root != peer:
    sys.exit(f"release profiles differ: workspace {root}, peers {peer}")
PY
if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --release --workspace --bins -q
  [ -n "${SKIP_CITY:-}" ] || cargo build --release -p local --example city_bench -q
  cargo build --release --manifest-path "$peers/Cargo.toml" --locked -q
fi

out="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$out"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }
# wrk NAME ARGS...: a 2 s warm-up, then the measured run; its report goes to $out/NAME.
run_wrk() {
  local name="$1"; shift
  wrk -d2s "$@" >/dev/null
  wrk -d"$dur" --latency "$@" >"$out/$name"
}

# Function binaries: every bin target of the workspace but the local server.
functions=${FUNCTIONS:-$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    for t in p["targets"]:
        if "bin" in t["kind"] and t["name"] != "waymark":
            print(t["name"])' | sort)}

echo "measuring: wrk ${dur} per server, ${runs} cold starts per binary" >&2
export WM_KEY="wm_sk_bench_key_000000000000000000"

# Hello-world axum, then waymark serve, same wrk arguments. The peer stays up (idle between its
# runs) and is measured again right before each other read: on a shared machine its figure
# drifts by a sixth between runs minutes apart, so each read is set against its own neighbour.
hport=$(free_port)
"$bin/hello-axum" "$hport" & pids+=($!)
wait_port "$hport"
run_wrk hello_get -t2 -c32 "http://127.0.0.1:$hport/v1/api/user/"

port=$(free_port)
env -u AWS_ENDPOINT_URL_DYNAMODB WAYMARK_API_KEY="$WM_KEY" WAYMARK_RATE_LIMIT=0 RUST_LOG=warn \
  "$bin/waymark" serve --port "$port" --data-dir "$out/data" >/dev/null & pids+=($!)
wait_port "$port"
url="http://127.0.0.1:$port"
for i in $(seq 25); do
  curl -sf -X POST "$url/v1/api/user/" -H "Api-Key: $WM_KEY" -H 'Content-Type: application/json' \
    -d "{\"app_type\":1,\"device_token\":\"bench-$i\"}" >/dev/null
done
WM_USER="$(curl -sf "$url/v1/api/user/" -H "Api-Key: $WM_KEY" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["users"][0]["id"])')"
export WM_USER
run_wrk waymark_get -t2 -c32 -s scripts/bench/get.lua "$url/v1/api/user/"
run_wrk waymark_get_one -t2 -c32 -s scripts/bench/get.lua "$url/v1/api/user/?user_id=$WM_USER"
# Each read's answer, fetched once and served whole by an axum handler that does nothing else
# (the peers' same-bytes), measured right after the read: what sending that answer costs alone.
mkdir "$out/bodies"
curl -sf "$url/v1/api/user/" -H "Api-Key: $WM_KEY" >"$out/bodies/users"
python3 scripts/bench/seed_reads.py "$url" >"$out/reads"
while read -r name path; do curl -sf "$url$path" -H "Api-Key: $WM_KEY" >"$out/bodies/$name"; done <"$out/reads"
sport=$(free_port)
"$bin/same-bytes" "$sport" "$out/bodies" & pids+=($!)
wait_port "$sport"
run_wrk same_users -t2 -c32 -s scripts/bench/get.lua "http://127.0.0.1:$sport/users"
# Every other kind of read, on seeded data, for the same time each (READ_DURATION).
while read -r name path; do
  wrk -d"$read_dur" --latency -t2 -c32 "http://127.0.0.1:$hport/v1/api/user/" >"$out/peer_$name"
  wrk -d1s -t2 -c32 -s scripts/bench/get.lua "$url$path" >/dev/null
  wrk -d"$read_dur" --latency -t2 -c32 -s scripts/bench/get.lua "$url$path" >"$out/read_$name"
  wrk -d"$read_dur" --latency -t2 -c32 -s scripts/bench/get.lua "http://127.0.0.1:$sport/$name" >"$out/same_$name"
done <"$out/reads"
run_wrk waymark_ingest -t2 -c8 -s scripts/bench/ingest.lua "$url/v1/api/location/"
kill "${pids[@]}"

# The city layout's search against PostGIS (its own server, store and cluster; see its header).
if [ -z "${SKIP_CITY:-}" ]; then
  chmod 755 "$out" # PostGIS (user postgres) reads the exported fences and keeps its cluster there
  OUT="$out/city" SKIP_BUILD=1 QUERIES="${CITY_QUERIES:-200}" RADII=1000,5000 \
    scripts/bench/city_search.sh >"$out/city.log" 2>&1 || echo "city search: see $out/city.log" >&2
fi

# shellcheck disable=SC2086
python3 scripts/bench/coldstart.py --json --runs "$runs" "$bin/hello-lambda" $(for f in $functions; do echo "$bin/$f"; done) \
  >"$out/coldstart.json"
for f in hello-lambda hello-axum waymark $functions; do echo "$f $(stat -c %s "$bin/$f")"; done >"$out/sizes"

python3 scripts/bench/report.py "$out" "$dur" "$runs"
