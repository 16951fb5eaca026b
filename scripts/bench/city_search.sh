#!/usr/bin/env bash
# Nearby search at city density (issue 47): city_bench's layout (100,000 circles over 30 km ×
# 30 km, seed 47) on the embedded file store, then at each radius the first page and `pages`
#   - in process (geofences' search as the endpoint calls it, the page's fences rendered),
#   - over HTTP on `waymark serve` (that store; one request at a time, kept-alive connection),
#   - from PostGIS on the same fences and points (GiST, ST_DWithin, one prepared statement over
#     TCP, psql's client-side timing), in the same run;
# and every answer compared with PostGIS's (ids in order, distances, pages).
# Usage: scripts/bench/city_search.sh
# Env: QUERIES (200), RADII (1000,5000), LIMIT (10), SEED (47), FENCES (100000), OUT (a new
#      /tmp/citysearch.*; PostGIS reads the CSVs there, so it must be readable by user postgres),
#      REUSE (the store, export and in-process figures of an earlier run in OUT),
#      BIN_DIR (waymark and examples/city_bench from there, e.g. an earlier build), SKIP_BUILD,
#      SKIP_HTTP, SKIP_PG. Installs PostgreSQL 15's PostGIS 3 with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
QUERIES="${QUERIES:-200}" RADII="${RADII:-1000,5000}" LIMIT="${LIMIT:-10}" SEED="${SEED:-47}" FENCES="${FENCES:-100000}"
OUT="${OUT:-$(mktemp -d /tmp/citysearch.XXXXXX)}"
mkdir -p "$OUT"
chmod 755 "$OUT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
bin="${BIN_DIR:-$CARGO_TARGET_DIR/release}"
key="wm_sk_city_search_key_000000000000"
log() { printf '### %s\n' "$*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pids=()
pg_stop=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$pg_stop" ]; then eval "$pg_stop" || true; fi
}
trap cleanup EXIT

if [ -z "${SKIP_BUILD:-}" ]; then
  log "building (release): waymark, examples/city_bench"
  cargo build --release -q -p local --bin waymark --example city_bench
fi

log "city layout: $FENCES fences (seed $SEED) into a file store, $QUERIES searches per radius ($RADII), in process"
uptime >&2
if [ -n "${REUSE:-}" ] && [ -f "$OUT/export/queries.csv" ]; then
  log "reusing the store and export in $OUT (REUSE)"
  grep -v '"search_' "$OUT/results.jsonl" >"$OUT/results.kept" || true
  mv "$OUT/results.kept" "$OUT/results.jsonl"
else
  rm -rf "$OUT/data" "$OUT/export"
  "$bin/examples/city_bench" --store file --data-dir "$OUT/data" --api-key "$key" --fences "$FENCES" --seed "$SEED" \
    --rounds 0 --users 1 --queries "$QUERIES" --radii "$RADII" --limit "$LIMIT" --export "$OUT/export" |
    tee "$OUT/results.jsonl"
fi

if [ -z "${SKIP_HTTP:-}" ]; then
  port="$(free_port)"
  env -u AWS_ENDPOINT_URL_DYNAMODB WAYMARK_API_KEY="$key" WAYMARK_RATE_LIMIT=0 RUST_LOG=warn \
    "$bin/waymark" serve --port "$port" --data-dir "$OUT/data" >"$OUT/serve.log" 2>&1 &
  serve_pid=$!
  pids+=("$serve_pid")
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  for r in ${RADII//,/ }; do
    log "HTTP: GET /v1/api/search/geofences/ radius $r, page_limit $LIMIT"
    python3 scripts/bench/city_search.py http "http://127.0.0.1:$port" "$key" "$OUT/export" "$r" "$LIMIT" |
      tee -a "$OUT/results.jsonl"
  done
  kill "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
fi

if [ -z "${SKIP_PG:-}" ]; then
  source scripts/bench/postgis.sh
  pg_start "$OUT/pg" 127.0.0.1
  log "PostGIS: cluster in $pgdir, TCP port $pgport"
  chmod -R a+rX "$OUT/export"
  psql -X -q -h "$pgdir" -p "$pgport" -U postgres -d postgres -v dir="$OUT/export" -f scripts/bench/geofences_pg.sql >/dev/null
  tcp="[\"psql\", \"-X\", \"-q\", \"-h\", \"127.0.0.1\", \"-p\", \"$pgport\", \"-U\", \"postgres\", \"-d\", \"postgres\"]"
  for r in ${RADII//,/ }; do
    log "PostGIS: the same page and total, radius $r"
    python3 scripts/bench/city_search.py pg "$tcp" "$OUT/export" "$r" "$LIMIT" | tee -a "$OUT/results.jsonl"
  done
  eval "$pg_stop"
  pg_stop=""
  for r in ${RADII//,/ }; do
    python3 scripts/bench/city_search.py compare "$OUT/export" "$r" "$LIMIT" | tee -a "$OUT/results.jsonl" || differ=1
  done
fi
uptime >&2
log "results in $OUT/results.jsonl"
[ -z "${differ:-}" ] || { log "answers differ from PostGIS's"; exit 1; }
