#!/usr/bin/env bash
# Spider's 20 dev databases copied from their SQLite files (../shared/data/spiderman/sqlite)
# onto a MySQL or MariaDB server as databases spider_<name>, replaced when present, so
# Spider can be asked there and paired with its SQLite run:
#
#   scripts/load-spider-mariadb.sh [mysql://root@127.0.0.1:3306/]
#   askdb --db mysql://root@127.0.0.1:3306/ eval run --set spider --sample 150 --seed 7 --mode agent
#
# Column types come from the values each column holds; primary and foreign keys are
# added after the rows (see src/admin/mysql_copy.rs). Uses the askdb on PATH, else the
# release build.
set -euo pipefail
cd "$(dirname "$0")/.."
server="${1:-mysql://root@127.0.0.1:3306/}"
askdb="$(command -v askdb || echo target/release/askdb)"
if [ ! -x "$askdb" ]; then
  cargo build --release --quiet
  askdb=target/release/askdb
fi
"$askdb" eval copy-spider --to "$server"
