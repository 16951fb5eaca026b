#!/usr/bin/env bash
# The web console at scale (issue 58, item 6): a project of USERS users (one fix each) and FENCES
# circle geofences over a 20 km x 20 km box around Berlin, on `waymark serve --memory`, opened in
# headless Chromium at 1280 x 800 by scripts/bench/console_view.cjs, which times
#   (a) the first view after sign-in (the console's own default view, then the whole city):
#       navigation and sign-in to users drawn and listed and fences drawn, with the requests and
#       bytes it made and which request dominated;
#   (b) a pan of half a screen: until the new view's data is loaded and drawn, and the longest
#       main-thread long task meanwhile;
#   (c) live: LIVE_RATE fixes a second for LIVE_SECONDS seconds to users in view: stream messages
#       received, markers at their latest fix, the longest long task;
# each the median of RUNS runs (a fresh browser context each: a first visit). A benchmark, not a
# test: the 2 s goal is reported against, never asserted. Prints a Markdown table; everything
# (seed.json, results.json, server.log, browser.log, screenshots) is kept in $OUT.
#
# Usage: scripts/bench/console.sh
# Env: WAYMARK_BIN (default ~/.cache/waymark-target/debug/waymark; no build is run),
#      USERS (10000), FENCES (100000), RUNS (3), LIVE (1; 0 skips (c)), LIVE_RATE (200),
#      LIVE_SECONDS (10), THREADS (seeding concurrency, 8), OUT (default a new /tmp/consolebench.*).
# Needs: python3, node, Chromium and playwright-core (scripts/browser-tools.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
BIN="${WAYMARK_BIN:-$HOME/.cache/waymark-target/debug/waymark}"
export USERS="${USERS:-10000}" FENCES="${FENCES:-100000}" RUNS="${RUNS:-3}" LIVE="${LIVE:-1}"
export LIVE_RATE="${LIVE_RATE:-200}" LIVE_SECONDS="${LIVE_SECONDS:-10}" THREADS="${THREADS:-8}"
OUT="${OUT:-$(mktemp -d /tmp/consolebench.XXXXXX)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
[ -x "$BIN" ] || { echo "no waymark binary at $BIN (set WAYMARK_BIN)" >&2; exit 1; }

export WM_SK="wm_sk_console_bench_secret_key" WM_PK="wm_pk_console_bench_publishable" WM_AT="wm_at_console_bench_access_token"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

playwright="$(bash scripts/browser-tools.sh)"

server=""
cleanup() { if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi; }
trap cleanup EXIT

port="$(free_port)"
base="http://127.0.0.1:$port"
WAYMARK_API_KEY="$WM_SK" WAYMARK_PUBLISHABLE_KEY="$WM_PK" WAYMARK_ACCESS_TOKEN="$WM_AT" \
  WAYMARK_TRACKING_BASE_URL="$base/track" \
  env -u WAYMARK_TILE_URL -u WAYMARK_STREAM_URL -u AWS_ENDPOINT_URL_DYNAMODB \
  "$BIN" serve --memory --port "$port" >/dev/null 2>"$OUT/server.log" &
server=$!
for _ in $(seq 1 300); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  kill -0 "$server" 2>/dev/null || { echo "waymark serve exited:" >&2; tail -20 "$OUT/server.log" >&2; exit 1; }
  sleep 0.2
done

{
  echo "binary: $BIN (built $(date -u -r "$BIN" +%FT%TZ)$(case "$BIN" in */debug/*) echo ', a debug build';; esac))"
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GB", $2/1048576}' /proc/meminfo); load before seeding: $(load)"
  echo "other work: $(pgrep -f scripts/test.sh >/dev/null && echo 'scripts/test.sh is RUNNING (figures are not clean)' || echo 'no scripts/test.sh running')"
  echo "busiest processes: $(ps -eo pcpu=,comm= --sort=-pcpu | head -4 | awk '{printf "%s %s%%; ", $2, $1}')"
} | tee "$OUT/machine.txt"
echo "seeding $USERS users and $FENCES fences on $base (memory store) ..."
python3 scripts/bench/console_seed.py "$base" "$OUT" | tee "$OUT/seed.txt"
echo "load after seeding: $(load)" | tee -a "$OUT/machine.txt"

WAYMARK_BASE="$base" PLAYWRIGHT_CORE="$playwright" OUT="$OUT" \
  node scripts/bench/console_view.cjs 2>&1 | tee "$OUT/browser.log"
echo "load at the end: $(load); busiest: $(ps -eo pcpu=,comm= --sort=-pcpu | head -4 | awk '{printf "%s %s%%; ", $2, $1}')" | tee -a "$OUT/machine.txt"
echo "results in $OUT"
