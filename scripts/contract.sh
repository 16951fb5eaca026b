#!/usr/bin/env bash
# The contract from outside: schemathesis' conformance checks (every status an operation answers
# is one openapi.yaml lists for it, every answer's body valid under its schema, its content type
# and headers the documented ones; CONTRACT_CHECKS to choose others) over every operation,
# against `waymark serve --memory` on a free port. The server is seeded first (a user, v1 and v2 trips, a geofence, a moving
# geofence, a webhook) and generated ids are those real ones most of the time, so operations are
# exercised past their 404s. At most CONTRACT_EXAMPLES (default 10) generated cases per operation
# and phase, seeded (CONTRACT_SEED, default 1): about two minutes on two cores. Installs
# schemathesis (pinned) into .tools/schemathesis on its first run. Exits non-zero on a failure.
#
#   scripts/contract.sh            # builds the waymark binary into $CARGO_TARGET_DIR (or ./target)
#   WAYMARK_BIN=path scripts/contract.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

ST_VERSION="${SCHEMATHESIS_VERSION:-4.32.5}"
venv="$root/.tools/schemathesis"
if [ ! -x "$venv/bin/st" ] || ! "$venv/bin/st" --version 2>/dev/null | grep -q "$ST_VERSION"; then
  echo "installing schemathesis $ST_VERSION into .tools/schemathesis" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$ST_VERSION" >&2
fi

bin="${WAYMARK_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --quiet --bin waymark
  bin="${CARGO_TARGET_DIR:-$root/target}/debug/waymark"
fi

work="$(mktemp -d)"
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
export WAYMARK_API_KEY="wm_sk_contract_secret_key_0001"
export WAYMARK_PUBLISHABLE_KEY="wm_pk_contract_publishable_01"
export WAYMARK_ACCESS_TOKEN="wm_at_contract_access_token_01"
# No rate limit: schemathesis sends thousands of requests with one key.
WAYMARK_RATE_LIMIT=0 WAYMARK_TRACKING_BASE_URL="$base/track" \
  "$bin" serve --memory --port "$port" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  curl -s -o /dev/null "$base/track/assets/track.css" && break
  sleep 0.1
done

# Seed: real ids for the generated requests to use.
call() { # curl arguments -> the body; a failed call stops the script, saying which
  local out
  out=$(curl -s -w '\n%{http_code}' -H 'Content-Type: application/json' "$@")
  case "${out##*$'\n'}" in
    2*) printf '%s' "${out%$'\n'*}" ;;
    *) echo "contract: seeding failed: $* -> $out" >&2; return 1 ;;
  esac
}
api() { call -X "$1" "$base$2" -H "Api-Key: $WAYMARK_API_KEY" ${3:+-d "$3"}; }
field() { python3 -c "import json,sys; v=json.load(sys.stdin); print(eval('v' + sys.argv[1]))" "$1"; }
user=$(api POST /v1/api/user/ '{"app_type": 1, "device_token": "contract", "description": "contract"}' | field '["data"]["user_id"]')
api POST /v1/api/location/ "{\"user_id\": \"$user\", \"locations\": [{\"coordinates\": [13.40, 52.52], \"recorded_at\": \"2024-05-01T10:00:00.000\", \"accuracy\": 5}]}" >/dev/null
trip=$(api POST /v1/api/trips/ "{\"user_id\": \"$user\", \"origins\": [[13.40, 52.52]], \"destinations\": [[13.41, 52.52]]}" | field '["data"][0]["id"]')
token=$(api GET "/v1/api/trips/?trip_id=$trip" | field '["data"][0]["trip_tracking_url"].rsplit("/", 1)[1]')
trip2=$(call -X POST "$base/v2/trips/" -H "Authorization: Bearer $WAYMARK_ACCESS_TOKEN" \
  -d "{\"user_id\": \"$user\", \"name\": \"contract\"}" | field '["trip"]["id"]')
fence=$(api POST /v1/api/geofence/ '{"coordinates": [13.40, 52.52], "geometry_radius": 100, "description": "contract"}' | field '["data"]["geofence_id"]')
moving=$(api POST /v1/api/moving-geofence/ "{\"users\": [\"$user\"], \"geometry_radius\": 100}" | field '["data"]["id"]')
hook=$(api POST /v1/api/webhooks/ '{"url": "https://example.com/hook", "events": ["*"]}' | field '["data"]["webhook_id"]')

# Each id as the generated value most of the time (0.8), a generated one otherwise.
cat >"$work/schemathesis.toml" <<EOF
[dictionaries.user]
values = ["$user"]
[dictionaries.trip]
values = ["$trip", "$trip2"]
[dictionaries.v2trip]
values = ["$trip2"]
[dictionaries.fence]
values = ["$fence", "$moving"]
[dictionaries.hook]
values = ["$hook"]
[dictionaries.token]
values = ["$token"]

[parameters]
"query.user_id" = { dictionary = "user", probability = 0.8 }
"body.user_id" = { dictionary = "user", probability = 0.8 }
"query.trip_id" = { dictionary = "trip", probability = 0.8 }
"body.trip_id" = { dictionary = "trip", probability = 0.8 }
"path.id" = { dictionary = "v2trip", probability = 0.8 }
"query.geofence_id" = { dictionary = "fence", probability = 0.8 }
"body.geofence_id" = { dictionary = "fence", probability = 0.8 }
"query.webhook_id" = { dictionary = "hook", probability = 0.8 }
"body.webhook_id" = { dictionary = "hook", probability = 0.8 }
"path.token" = { dictionary = "token", probability = 0.8 }
EOF

run() {
  "$venv/bin/st" --config-file "$work/schemathesis.toml" run openapi.yaml --url "$base" \
    --checks "${CONTRACT_CHECKS:-status_code_conformance,response_schema_conformance,content_type_conformance,response_headers_conformance}" --max-examples "${CONTRACT_EXAMPLES:-10}" --seed "${CONTRACT_SEED:-1}" \
    --phases examples,coverage,fuzzing --workers 1 --no-color --generation-database none \
    -H "Api-Key: $WAYMARK_API_KEY" -H "Authorization: Bearer $WAYMARK_ACCESS_TOKEN" "$@"
}
# Revoking a key last: generated key ids could revoke the key every other request uses. The
# streams are left out: an accepted one never ends (tests/api/streams.rs and stream_clients.rs
# hold them to docs/streams.md).
status=0
run --exclude-operation-id revokeKey --exclude-operation-id streamSse --exclude-operation-id streamWebSocket || status=$?
run --include-operation-id revokeKey || status=$?
if [ "$status" != 0 ]; then
  echo "contract: schemathesis found answers openapi.yaml does not describe (server log: last lines below)" >&2
  tail -20 "$work/server.log" >&2
fi
exit "$status"
