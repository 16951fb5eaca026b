#!/usr/bin/env bash
# Run every test: the whole workspace, with the API suite on both the embedded store and a
# DynamoDB Local this script starts (and stops) itself. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# Builds where `cargo run` does: `$CARGO_TARGET_DIR` when set (as .ci/run sets it), else ./target.

source scripts/dynamodb-local.sh
source scripts/python-env.sh
cargo test --workspace --all-targets "$@"
# DynamoDB's faults from outside (throttling, conflicts, errors, lost answers, unprocessed items,
# slow answers; seeded, short, each alone and all of them mixed): nothing lost or doubled, no 500 (scripts/faults.py; the long run
# is scripts/bench/faults.sh). The binary cargo test built above.
python3 scripts/faults.py --bin "${CARGO_TARGET_DIR:-target}/debug/waymark" --short --check
