# Source me: a Python environment with the stream clients' dependencies
# (tests/clients/requirements.txt) in a venv outside the clone, made once and reused, and
# WAYMARK_PYTHON pointing at its interpreter (tests/api/stream_clients.rs runs it).
_venv="${WAYMARK_PY_ENV:-$HOME/.cache/waymark-py}"
_req="$(dirname "${BASH_SOURCE[0]}")/../tests/clients/requirements.txt"
if ! cmp -s "$_req" "$_venv/requirements.txt" 2>/dev/null; then
  python3 -m venv "$_venv"
  "$_venv/bin/pip" install --quiet --disable-pip-version-check -r "$_req"
  cp "$_req" "$_venv/requirements.txt"
fi
export WAYMARK_PYTHON="$_venv/bin/python"
unset _venv _req
