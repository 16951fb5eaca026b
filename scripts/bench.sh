#!/usr/bin/env bash
# Measure: release binary sizes, Lambda start-to-ready time, and requests/s + latency of
# GET /v1/api/user/ and of a 100-location ingest on `waymark serve` (file store), with wrk.
# Needs wrk (apt-get install wrk). Usage: scripts/bench.sh [DURATION, default 20s]
set -euo pipefail
cd "$(dirname "$0")/.."
dur="${1:-20s}"
export CARGO_TARGET_DIR="${CARGO_RELEASE_TARGET_DIR:-$HOME/.cache/waymark-release}"
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --workspace --bins -q
bin="$CARGO_TARGET_DIR/release"

echo "== release binary sizes"
for b in users locations groups trips trips-v2 waymark; do printf '%-10s %s bytes\n' "$b" "$(stat -c %s "$bin/$b")"; done

echo "== Lambda function start to ready"
for b in users locations groups trips trips-v2; do python3 scripts/bench/coldstart.py "$bin/$b" 10; done

echo "== waymark serve (file store)"
data="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export WM_KEY="wm_sk_bench_key_000000000000000000"
env -u AWS_ENDPOINT_URL_DYNAMODB WAYMARK_API_KEY="$WM_KEY" WAYMARK_RATE_LIMIT=0 RUST_LOG=warn "$bin/waymark" serve --port "$port" --data-dir "$data" >/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
url="http://127.0.0.1:$port"
for i in $(seq 25); do
  curl -sf -X POST "$url/v1/api/user/" -H "Api-Key: $WM_KEY" -H 'Content-Type: application/json' \
    -d "{\"app_type\":1,\"device_token\":\"bench-$i\"}" >/dev/null
done
export WM_USER="$(curl -sf "$url/v1/api/user/" -H "Api-Key: $WM_KEY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["users"][0]["id"])')"

echo "-- GET /v1/api/user/ (25 users, page 1): wrk -t2 -c32 -d$dur --latency"
wrk -t2 -c32 -d"$dur" --latency -s scripts/bench/get.lua "$url/v1/api/user/" | grep -E 'Requests/sec|Latency|50%|99%|requests in'
echo "-- POST /v1/api/location/ (100 new locations per request): wrk -t2 -c8 -d$dur --latency"
wrk -t2 -c8 -d"$dur" --latency -s scripts/bench/ingest.lua "$url/v1/api/location/" | grep -E 'Requests/sec|Latency|50%|99%|requests in'
