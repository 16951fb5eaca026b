#!/usr/bin/env bash
# DynamoDB's faults, the long run (issue 57): scripts/faults.py against `waymark serve --dynamodb`
# on DynamoDB Local behind scripts/ddb_proxy.py, 32 users x 200 fixes crossing 50 fences per
# phase, every fault alone and all mixed; prints the table fault x outcome (docs/measurements.md).
# CI runs the short version from scripts/test.sh.
#   env: WAYMARK_BIN=path (default: a debug build into $CARGO_TARGET_DIR or ./target),
#        SEED=57, PHASES="throttling,all together" (default every phase), OUT=file.json
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${WAYMARK_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --quiet --bin waymark
  bin="${CARGO_TARGET_DIR:-$PWD/target}/debug/waymark"
fi
source scripts/dynamodb-local.sh
python3 scripts/faults.py --bin "$bin" --seed "${SEED:-57}" --phases "${PHASES:-}" ${OUT:+--json "$OUT"}
