#!/usr/bin/env bash
# Install (once) what the browser test needs: Debian's Chromium (/usr/bin/chromium),
# playwright-core (drives it; no browser download) and axe-core (the accessibility check run in
# the page) into .tools/playwright. Prints the path of playwright-core's package folder (axe-core
# is beside it). Idempotent and quiet when everything is already there.
set -euo pipefail

PLAYWRIGHT_VERSION="${PLAYWRIGHT_VERSION:-1.65.1}"
AXE_VERSION="${AXE_VERSION:-4.14.1}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools/playwright"

if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian's chromium (apt-get)" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2; then
      apt-get update -q >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2
    fi
  else
    echo "Chromium is needed at /usr/bin/chromium: apt-get install chromium (as root)" >&2
    exit 1
  fi
fi

command -v node >/dev/null || { echo "Node.js is needed for the browser test (apt-get install nodejs npm)" >&2; exit 1; }
if [ ! -f "$tools/node_modules/playwright-core/package.json" ] ||
   ! grep -q "\"version\": \"$PLAYWRIGHT_VERSION\"" "$tools/node_modules/playwright-core/package.json"; then
  echo "installing playwright-core@$PLAYWRIGHT_VERSION into .tools/playwright" >&2
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-audit --no-fund --loglevel=error "playwright-core@$PLAYWRIGHT_VERSION" >&2
fi
if [ ! -f "$tools/node_modules/axe-core/package.json" ] ||
   ! grep -q "\"version\": \"$AXE_VERSION\"" "$tools/node_modules/axe-core/package.json"; then
  echo "installing axe-core@$AXE_VERSION into .tools/playwright" >&2
  npm install --prefix "$tools" --no-audit --no-fund --loglevel=error "axe-core@$AXE_VERSION" >&2
fi
echo "$tools/node_modules/playwright-core"
