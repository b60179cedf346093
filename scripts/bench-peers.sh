#!/usr/bin/env bash
# askdb side by side with its peers, in one run: installs sqlglot (PyPI, into a venv)
# and the reference PostgreSQL MCP server and DBHub (npm) once into askdb's data
# directory, then runs `cargo bench --bench peers` (the guard vs a sqlglot guard of the
# same checks; askdb mcp vs both servers on one scratch PostgreSQL database; askdb's
# overhead over the database itself) and prints the table. With --write the table is
# also written to benches/results/peers.md, the committed figures.
#
#   scripts/bench-peers.sh [--write]
#
# Needs Python 3 with venv, Node.js with npm, PostgreSQL (ASKDB_TEST_POSTGRES_URL, by
# default postgres://postgres@127.0.0.1:5432/postgres, where a uniquely named scratch
# database and roles are created and dropped) and the external data at ../shared/data.
# ASKDB_PEERS_DIR overrides where the peers are installed.
set -euo pipefail
cd "$(dirname "$0")/.."

write=0
if [ "${1:-}" = "--write" ]; then write=1; fi

data_home="${ASKDB_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/askdb}"
peers="${ASKDB_PEERS_DIR:-$data_home/peers}"
mkdir -p "$peers/npm"

# Versions are pinned so that a later run measures the same programs.
sqlglot_version="30.31.0"
reference_version="0.6.2"
dbhub_version="0.21.2"

if ! "$peers/venv/bin/python" -c "import sqlglot, sys; sys.exit(sqlglot.__version__ != '$sqlglot_version')" 2>/dev/null; then
  echo "installing sqlglot $sqlglot_version into $peers/venv" >&2
  python3 -m venv "$peers/venv"
  "$peers/venv/bin/pip" install --quiet "sqlglot==$sqlglot_version"
fi

installed() { # package version
  node -e "process.exit(require('$peers/npm/node_modules/$1/package.json').version === '$2' ? 0 : 1)" 2>/dev/null
}
if ! installed @modelcontextprotocol/server-postgres "$reference_version" || ! installed @bytebase/dbhub "$dbhub_version"; then
  echo "installing the MCP servers into $peers/npm" >&2
  npm install --silent --no-audit --no-fund --prefix "$peers/npm" \
    "@modelcontextprotocol/server-postgres@$reference_version" "@bytebase/dbhub@$dbhub_version"
fi

out=""
if [ "$write" = 1 ]; then
  mkdir -p benches/results
  out="$(pwd)/benches/results/peers.md"
fi

ASKDB_PEERS_PYTHON="$peers/venv/bin/python" \
ASKDB_PEERS_NODE_MODULES="$peers/npm" \
ASKDB_PEERS_OUT="$out" \
  cargo bench --bench peers
