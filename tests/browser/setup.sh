#!/usr/bin/env bash
# What the browser test (tests/browser.rs) needs: Debian's chromium and Node.js, and
# playwright-core from npm at the version in package-lock.json (it drives the system
# chromium; no browser is downloaded). Under CI (CI set) missing system packages are
# installed with apt-get; elsewhere they are named and the script exits 3, so the test
# can skip loudly. Messages go to stderr.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
command -v "${CHROMIUM:-chromium}" >/dev/null 2>&1 || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ -z "${CI:-}" ]; then
    echo "browser test: missing ${missing[*]}: apt-get install -y ${missing[*]} (CI installs them itself)" >&2
    exit 3
  fi
  echo "browser test: installing ${missing[*]} with apt-get" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" fonts-dejavu-core >&2
fi

if [ ! -f node_modules/playwright-core/package.json ]; then
  echo "browser test: npm ci (playwright-core)" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
fi
