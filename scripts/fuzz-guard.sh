#!/usr/bin/env bash
# The guard's differential fuzzer (benches/guard_fuzz.rs) for a given number of minutes
# per dialect: builds the bench in release, runs one process per dialect (both at once
# with `both`), and prints executions, executions per second, accepted and refused
# counts and the findings. Each finding is also in target/guard-fuzz/findings-DIALECT.jsonl
# with the statement, a minimised one and what the guard renders for it; every real
# finding becomes a line of evals/hostile_sql.jsonl or evals/benign_sql.jsonl. With
# --write the figures go to benches/results/guard_fuzz.json (date in UTC, commit, minutes,
# dialect, executions, accepted, findings, seed), written by the bench, never by hand.
#
#   scripts/fuzz-guard.sh MINUTES [postgres|sqlite|both] [--write] [--seed N] [--debug]
#                         [--no-database-check]
#
# Every statement the parser check accepts also goes through the whole gate, whose
# database check judges what the database resolved; a refusal there is a finding
# (parser_vs_database), and the time it takes is printed beside the rate. On SQLite the
# gate is over a copy of each database; on PostgreSQL over askdb's demo, loaded by
# `db setup` into a scratch database of the run's own on the server at
# ASKDB_TEST_POSTGRES_URL (else postgres://postgres@127.0.0.1:5432/postgres, as the
# tests use) and gated as the superuser; the database and its roles are dropped when
# the run ends, also when it fails or is interrupted. The defog databases are checked
# by the parser alone in that mode. When no server answers, the PostgreSQL mode says so
# and runs without the property. --no-database-check leaves it out, to measure the rate
# without it.
#
# --debug runs the debug build (`cargo test --bench guard_fuzz --no-run`, which a
# `cargo build --all-targets` has usually made already) instead of building a release one:
# fewer statements a minute, no release build to wait for; the figures say which build.
#
# Needs the external data at ../shared/data. Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/fuzz-guard.sh MINUTES [postgres|sqlite|both] [--write] [--seed N] [--debug] [--no-database-check]" >&2; exit 2; }
[ $# -ge 1 ] || usage
minutes="$1"; shift
[[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]] || usage
which="both"
write=0
seed=1
extra=()
build=(cargo bench --bench guard_fuzz --no-run)
while [ $# -gt 0 ]; do
  case "$1" in
    postgres|sqlite|both) which="$1" ;;
    --write) write=1 ;;
    --debug) build=(cargo test --bench guard_fuzz --no-run) ;;
    --no-database-check) extra+=(--no-database-check) ;;
    --seed) shift; seed="${1:-}"; [[ "$seed" =~ ^[0-9]+$ ]] || usage ;;
    *) usage ;;
  esac
  shift
done
case "$which" in
  both) dialects=(postgres sqlite) ;;
  *) dialects=("$which") ;;
esac

target="${CARGO_TARGET_DIR:-$(pwd)/target}"
out="$target/guard-fuzz"
mkdir -p "$out"
rm -f "$out"/summary-*.json

build_log=$(mktemp)
trap 'rm -f "$build_log"' EXIT
"${build[@]}" >"$build_log" 2>&1 || { cat "$build_log" >&2; exit 1; }
bench=$(sed -n 's/.*Executable benches\/guard_fuzz.rs (\(.*\))$/\1/p' "$build_log" | tail -n 1)
[ -x "$bench" ] || { echo "cannot find the built bench in:" >&2; cat "$build_log" >&2; exit 1; }

pids=()
for dialect in "${dialects[@]}"; do
  "$bench" --dialect "$dialect" --minutes "$minutes" --seed "$seed" --out "$out" ${extra[@]+"${extra[@]}"} \
    >"$out/run-$dialect.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done

for dialect in "${dialects[@]}"; do
  grep -E "^(FINDING|guard fuzz)" "$out/run-$dialect.log" | cut -c1-2000 || true
done
[ "$status" = 0 ] || { echo "a fuzzer run failed; see $out/run-*.log" >&2; exit 1; }

for dialect in "${dialects[@]}"; do
  if [ -s "$out/findings-$dialect.jsonl" ]; then
    echo "findings of $dialect: $out/findings-$dialect.jsonl"
  fi
done

if [ "$write" = 1 ]; then
  mkdir -p benches/results
  "$bench" --out "$out" --report benches/results/guard_fuzz.json
fi
