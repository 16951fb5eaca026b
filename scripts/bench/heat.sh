#!/usr/bin/env bash
# Heat: DynamoDB capacity units a fix, per partition pattern, and the project ingest rate at
# which the hottest key of each pattern would pass DynamoDB's per-partition limits.
#
# Usage: scripts/bench/heat.sh [city|sparse|both]    (default both)
#
# For each load, a fresh stack: DynamoDB Local (scripts/dynamodb-local.sh), scripts/ddb_proxy.py
# in front of it (prices every call by AWS's rules, per table and partition key),
# `waymark serve --dynamodb` talking to the proxy (temporary data dir), and a webhook receiver
# (in heat.py) registered for every event type. heat.py then creates the fences, users and trips,
# sends a warm-up, resets the proxy's counters, sends the measured fixes, waits until webhook
# deliveries and writes stop, and prints the table. DynamoDB Local does tens of fixes a second,
# so the load is thousands of fixes: units a fix hardly depend on the count.
#
# Env: WAYMARK_BIN (a built binary; else `cargo build --release --bin waymark` into
#      ${CARGO_TARGET_DIR:-target}), OUT (the JSON stats file; default /tmp/heat-<load>.json,
#      with both loads "-<load>" goes before its extension), FIXES (24000), WARM, USERS,
#      THREADS, SEED, SETTLE_S (see heat.py), PROXY_FAULTS (a fault config for the proxy, JSON;
#      none by default), RUST_LOG (the server's, default warn; its log is kept in the work dir).
set -euo pipefail
cd "$(dirname "$0")/../.."
loads="${1:-both}"
case "$loads" in
  city|sparse) ;;
  both) loads="city sparse" ;;
  *) echo "usage: $0 [city|sparse|both]" >&2; exit 2 ;;
esac

if [ -z "${WAYMARK_BIN:-}" ]; then
  cargo build --release --bin waymark >&2
  WAYMARK_BIN="${CARGO_TARGET_DIR:-target}/release/waymark"
fi
WAYMARK_BIN="$(realpath "$WAYMARK_BIN")"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# One load, in a subshell: its DynamoDB Local, proxy and server stop when it ends, by their PIDs.
run_load() (
  load="$1" out="$2"
  # shellcheck source=../dynamodb-local.sh
  source scripts/dynamodb-local.sh
  pids=()
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; kill "$DYNAMODB_LOCAL_PID" 2>/dev/null || true' EXIT
  work="$(mktemp -d /tmp/heat-"$load".XXXXXX)"
  faults="${PROXY_FAULTS:-}"
  python3 scripts/ddb_proxy.py --upstream "$AWS_ENDPOINT_URL_DYNAMODB" --faults "${faults:-"{}"}" \
    >"$work/proxy.out" 2>"$work/proxy.err" &
  pids+=($!)
  for _ in $(seq 100); do grep -q '^PORT ' "$work/proxy.out" 2>/dev/null && break; sleep 0.1; done
  proxy_port="$(awk '/^PORT /{print $2}' "$work/proxy.out")"
  [ -n "$proxy_port" ] || { echo "the proxy did not start:" >&2; cat "$work/proxy.err" >&2; exit 1; }
  port="$(free_port)"
  AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$proxy_port" WAYMARK_WEBHOOK_ALLOW_PRIVATE=1 WAYMARK_RATE_LIMIT=0 \
    RUST_LOG="${RUST_LOG:-warn}" "$WAYMARK_BIN" serve --dynamodb --port "$port" --data-dir "$work/data" \
    >"$work/serve.log" 2>&1 &
  pids+=($!)
  echo "$load: DynamoDB Local $AWS_ENDPOINT_URL_DYNAMODB, proxy :$proxy_port, waymark :$port, logs in $work" >&2
  # The key file appears once the server has ensured the default project; heat.py waits for it.
  python3 scripts/bench/heat.py --load "$load" --base "http://127.0.0.1:$port" \
    --keys "$work/data/default-project.json" --proxy "http://127.0.0.1:$proxy_port" --out "$out"
  [ ! -s "$work/proxy.err" ] || { echo "proxy stderr:" >&2; tail -20 "$work/proxy.err" >&2; }
)

for load in $loads; do
  out="${OUT:-/tmp/heat-$load.json}"
  if [ -n "${OUT:-}" ] && [ "$loads" != "$load" ]; then out="${OUT%.json}-$load.json"; fi
  run_load "$load" "$out"
  echo
done
