#!/usr/bin/env bash
# Tools the tests use that are not Rust crates: Prometheus's own checker, `promtool`
# (Debian's prometheus package), which tests/observability.rs runs on GET /metrics.
# Under CI (CI set) a missing tool is installed with apt-get; elsewhere it is named and
# the script exits 3, so the test can skip loudly. Messages go to stderr.
set -euo pipefail

missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if [ -z "${CI:-}" ]; then
  echo "test tools: missing ${missing[*]}: apt-get install -y --no-install-recommends ${missing[*]} (CI installs them itself)" >&2
  exit 3
fi
echo "test tools: installing ${missing[*]} with apt-get" >&2
apt-get update -qq >&2
# Only the package's files are wanted (promtool); its service is not started here.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
command -v promtool >/dev/null 2>&1 || { echo "test tools: promtool still missing" >&2; exit 1; }
