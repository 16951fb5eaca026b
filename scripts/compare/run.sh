#!/usr/bin/env bash
# Waymark's insights next to trackintel's (PyPI trackintel 1.4.2) on the synthetic lives of
# tests/api/insights_life.rs. Usage: bash scripts/compare/run.sh [export dir]
# Installs trackintel into .tools/trackintel (a virtualenv) once; exports the lives through the
# embedded-store tests; prints a Markdown table (see trackintel_compare.py for the settings).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
out="${1:-$root/.tools/lives}"
venv="${TRACKINTEL_VENV:-$root/.tools/trackintel}"
if ! "$venv/bin/python" -c 'import trackintel' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q trackintel==1.4.2
fi
rm -rf "$out" && mkdir -p "$out"
WAYMARK_LIFE_EXPORT="$out" cargo test -q -p waymark-tests --test api -- insights_life:: --skip dynamodb >&2
"$venv/bin/python" scripts/compare/trackintel_compare.py "$out"
