#!/usr/bin/env bash
# Run every test: the whole workspace, with the API suite on both the embedded store and a
# DynamoDB Local this script starts (and stops) itself. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# Builds where `cargo run` does: `$CARGO_TARGET_DIR` when set (as .ci/run sets it), else ./target.

source scripts/dynamodb-local.sh
source scripts/python-env.sh
cargo test --workspace --all-targets "$@"
