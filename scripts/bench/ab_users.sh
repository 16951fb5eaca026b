#!/usr/bin/env bash
# Two waymark builds side by side: 25 users each, GET /v1/api/user/ (a page of 10) on each in turn,
# three rounds of wrk -d4s -t2 -c32 after 1 s of warm-up: a before/after that shares the load.
# Usage: scripts/bench/ab_users.sh OLD_WAYMARK NEW_WAYMARK
set -euo pipefail
old="$(realpath "$1")" new="$(realpath "$2")"
cd "$(dirname "$0")/../.."
export WM_KEY="wm_sk_bench_key_000000000000000000"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
start() { # bin port dir
  env -u AWS_ENDPOINT_URL_DYNAMODB WAYMARK_API_KEY="$WM_KEY" WAYMARK_RATE_LIMIT=0 RUST_LOG=warn "$1" serve --port "$2" --data-dir "$3" >/dev/null 2>&1 & pids+=($!)
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && break; sleep 0.1; done
  for i in $(seq 25); do curl -sf -X POST "http://127.0.0.1:$2/v1/api/user/" -H "Api-Key: $WM_KEY" -H 'Content-Type: application/json' -d "{\"app_type\":1,\"device_token\":\"bench-$i\"}" >/dev/null; done
}

start "$old" 18471 "$(mktemp -d)"
start "$new" 18472 "$(mktemp -d)"
cmp <(curl -sf "http://127.0.0.1:18471/v1/api/user/" -H "Api-Key: $WM_KEY" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sorted(d["data"]["users"][0].keys()))') \
    <(curl -sf "http://127.0.0.1:18472/v1/api/user/" -H "Api-Key: $WM_KEY" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sorted(d["data"]["users"][0].keys()))') && echo same-keys
for r in 1 2 3; do
  for port in 18471 18472; do
    wrk -d1s -t2 -c32 -s scripts/bench/get.lua "http://127.0.0.1:$port/v1/api/user/" >/dev/null
    printf '%s ' "$port"; wrk -d4s -t2 -c32 -s scripts/bench/get.lua "http://127.0.0.1:$port/v1/api/user/" | grep Requests/sec
  done
done
