#!/usr/bin/env bash
# Run every test: the whole workspace, with the API suite on both the embedded store and a
# DynamoDB Local this script starts (and stops) itself. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# One target dir outside the clone, so CI runs and sessions share the build.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/waymark-target}"

source scripts/dynamodb-local.sh
cargo test --workspace --all-targets "$@"
