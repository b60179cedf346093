#!/usr/bin/env bash
# What the statements that once went past every bound cost askdb serve now: each is posted
# to POST /api/sql of a running `askdb serve` (the demo on SQLite, and the demo loaded into
# a scratch PostgreSQL database as a superuser, so the guard is the only barrier), and the
# script records each answer (ok, refusal reason or error type), how long it took, and the
# server's peak resident memory (VmHWM) after it; then, on PostgreSQL, whether any backend
# of the scratch database is still running one second after the statement timeout.
# The same statements then go to `askdb mcp` over stdio as an MCP client's run_query
# calls. Prints the figures and, with --write, writes them to
# benches/results/attack-memory.json.
#
#   scripts/attack-memory.sh [--write] [--binary PATH]
#
# Needs PostgreSQL at 127.0.0.1:5432 (user postgres, trust) for the PostgreSQL half.
# Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

write=0
binary=target/release/askdb
[ -x "$binary" ] || binary=target/debug/askdb
while [ $# -gt 0 ]; do
  case "$1" in
    --write) write=1 ;;
    --binary) binary="$2"; shift ;;
    *) echo "usage: scripts/attack-memory.sh [--write] [--binary PATH]" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$binary" ] || { echo "no askdb binary at $binary (cargo build --release)" >&2; exit 1; }

home=$(mktemp -d)
database="askdb_attack_$$"
timeout_ms=5000
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  psql -h 127.0.0.1 -U postgres -qAtc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$home"
}
trap cleanup EXIT

# One column of 1 MB of text turned into 4 MB, 120 times over: 480 MB in one row.
wide_sqlite=$(python3 -c "print('SELECT ' + ', '.join(\"replace(hex(zeroblob(1000000)), '0', 'aa') AS c%d\" % i for i in range(120)))")
sixty_four=$(printf 'y%.0s' $(seq 1 64))

sqlite_statements=(
  "$wide_sqlite"
  "SELECT ltrim(printf('%.*c', 1000000, 'x'), printf('%.*c', 1000, 'y'))"
  "SELECT length(rtrim(replace(hex(zeroblob(500000)), '0', 'x'), '$sixty_four'))"
  "SELECT length(group_concat(printf('%.*c', 1000000, 'x'))) FROM bills"
)
postgres_statements=(
  "SELECT replace(repeat('x', 1000000), 'x', repeat('y', 300))"
  "SELECT replace(repeat('x', 1000000), 'x', '$sixty_four')"
  "SELECT translate(repeat('x', 1000000), repeat('y', 1000), 'z')"
  "SELECT length(translate(repeat('x', 1000000), '$sixty_four', 'z'))"
  "SELECT ltrim(repeat('x', 1000000) || 'a', repeat('y', 1000) || 'x')"
  "SELECT repeat('x', 1000000) AS c1, repeat('x', 1000000) AS c2, repeat('x', 1000000) AS c3, repeat('x', 1000000) AS c4, repeat('x', 1000000) AS c5, repeat('x', 1000000) AS c6, repeat('x', 1000000) AS c7, repeat('x', 1000000) AS c8, repeat('x', 1000000) AS c9"
)

port_of() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_server() {
  local port="$1"; shift
  ASKDB_HOME="$home" "$binary" serve --addr "127.0.0.1:$port" --timeout-ms "$timeout_ms" "$@" \
    >"$home/serve.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$port/api/schema" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "askdb serve did not start:" >&2; cat "$home/serve.log" >&2; exit 1
}

peak_kib() { awk '/VmHWM/ {print $2}' "/proc/$server_pid/status"; }

results="$home/results.jsonl"
: >"$results"
run_set() {
  local engine="$1" port="$2"; shift 2
  for sql in "$@"; do
    local started ended
    started=$(date +%s%N)
    curl -s -X POST "http://127.0.0.1:$port/api/sql" -H 'content-type: application/json' \
      --data "$(python3 -c 'import json,sys; print(json.dumps({"sql": sys.argv[1]}))' "$sql")" \
      --max-time 60 -o "$home/body.json" || true
    ended=$(date +%s%N)
    local lingering="null"
    if [ "$engine" = postgres ]; then
      sleep 1
      lingering=$(psql -h 127.0.0.1 -U postgres -qAtc \
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '$database' AND state = 'active' AND pid <> pg_backend_pid() AND now() - query_start > interval '$((timeout_ms + 1000)) milliseconds'")
    fi
    python3 - "$engine" "$sql" "$home/body.json" "$(( (ended - started) / 1000000 ))" "$(peak_kib)" "$lingering" >>"$results" <<'PY'
import json, sys
engine, sql, body, ms, peak, lingering = sys.argv[1:]
try:
    answer = json.load(open(body))
except (OSError, ValueError):
    answer = {"ok": None, "error_type": "no JSON answer"}
print(json.dumps({
    "engine": engine,
    "sql": sql if len(sql) < 200 else sql[:200] + "...",
    "ok": answer.get("ok"),
    "reason": answer.get("reason") or answer.get("error_type"),
    "truncated": answer.get("truncated"),
    "elapsed_ms": int(ms),
    "server_peak_mib": round(int(peak) / 1024, 1),
    "backends_running_past_timeout": None if lingering == "null" else int(lingering),
}))
PY
  done
}

port=$(port_of)
start_server "$port"
run_set sqlite "$port" "${sqlite_statements[@]}"
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""

if pg_isready -q -h 127.0.0.1 -p 5432; then
  # The demo and its tables; askdb_ro and askdb_log are refreshed as `db setup` always
  # does, and left in place (other databases of the cluster may use them).
  ASKDB_HOME="$home" "$binary" db setup \
    --admin-url postgres://postgres@127.0.0.1:5432/postgres --database "$database" >/dev/null
  port=$(port_of)
  start_server "$port" --db "postgres://postgres@127.0.0.1:5432/$database"
  run_set postgres "$port" "${postgres_statements[@]}"
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
else
  echo "PostgreSQL is not reachable at 127.0.0.1:5432: the PostgreSQL half was not run" >&2
fi

# The same statements to `askdb mcp` over stdio, as an MCP client calls run_query: one
# process per engine, its peak memory read after each answer.
run_mcp() {
  local engine="$1" database_url="$2"; shift 2
  printf '%s\n' "$@" >"$home/statements.txt"
  ASKDB_HOME="$home" python3 - "$binary" "$engine" "$database_url" "$timeout_ms" \
    "$home/statements.txt" >>"$results" <<'PY'
import json, subprocess, sys, time
binary, engine, database_url, timeout_ms, statements = sys.argv[1:]
command = [binary, "mcp", "--timeout-ms", timeout_ms]
if database_url:
    command += ["--db", database_url]
server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, bufsize=1)
def send(message):
    server.stdin.write(json.dumps(message) + "\n")
    server.stdin.flush()
def reply(wanted):
    while True:
        line = server.stdout.readline()
        if not line:
            return None
        message = json.loads(line)
        if message.get("id") == wanted:
            return message
def peak_mib():
    for line in open(f"/proc/{server.pid}/status"):
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None
send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2024-11-05", "capabilities": {},
    "clientInfo": {"name": "attack-memory", "version": "1"}}})
reply(0)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
for number, sql in enumerate(open(statements).read().splitlines(), start=1):
    started = time.monotonic()
    send({"jsonrpc": "2.0", "id": number, "method": "tools/call",
          "params": {"name": "run_query", "arguments": {"sql": sql}}})
    answer = reply(number) or {}
    structured = (answer.get("result") or {}).get("structuredContent") or {}
    print(json.dumps({
        "engine": engine + " (mcp)",
        "sql": sql if len(sql) < 200 else sql[:200] + "...",
        "ok": structured.get("ok"),
        "reason": structured.get("reason") or structured.get("error_type"),
        "truncated": structured.get("truncated"),
        "elapsed_ms": int((time.monotonic() - started) * 1000),
        "server_peak_mib": peak_mib(),
        "backends_running_past_timeout": None,
    }))
server.stdin.close()
server.wait(timeout=30)
PY
}

run_mcp sqlite "" "${sqlite_statements[@]}"
if pg_isready -q -h 127.0.0.1 -p 5432; then
  run_mcp postgres "postgres://postgres@127.0.0.1:5432/$database" "${postgres_statements[@]}"
fi

python3 - "$results" "$binary" "$timeout_ms" "$write" <<'PY'
import json, subprocess, sys, datetime
path, binary, timeout_ms, write = sys.argv[1:]
rows = [json.loads(line) for line in open(path)]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
report = {
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    "commit": commit,
    "binary": binary,
    "statement_timeout_ms": int(timeout_ms),
    "statements": rows,
    "server_peak_mib": max((row["server_peak_mib"] or 0 for row in rows), default=0),
}
for row in rows:
    print(f"{row['engine']:<15} {str(row['ok']):<5} {str(row['reason']):<22} {row['elapsed_ms']:>6} ms  peak {row['server_peak_mib']:>6} MiB  past timeout {row['backends_running_past_timeout']}  {row['sql'][:70]}")
print(f"server peak {report['server_peak_mib']} MiB")
if write == "1":
    with open("benches/results/attack-memory.json", "w") as out:
        json.dump(report, out, indent=2)
        out.write("\n")
    print("wrote benches/results/attack-memory.json")
PY
