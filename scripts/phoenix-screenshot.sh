#!/usr/bin/env bash
# The README's picture of a repaired question's trace in Phoenix: starts Phoenix (from the
# venv scripts/install-phoenix.sh made) with a scratch working directory and `askdb serve`
# (the scripted model: a question that fails once and is repaired) sending it traces, asks
# the question, and has Debian's chromium (tests/browser/setup.sh installs it and
# playwright-core) photograph the trace with the failed execute-sql selected.
#
#   scripts/phoenix-screenshot.sh [OUT.png]     (default docs/phoenix-trace.png)
#
# ASKDB_BIN is the askdb binary (default target/debug/askdb). Everything it starts is
# stopped when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-docs/phoenix-trace.png}"
ASKDB_BIN="${ASKDB_BIN:-target/debug/askdb}"
PHOENIX_BIN="$(bash scripts/install-phoenix.sh bin)"
bash tests/browser/setup.sh

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

port="$(free_port)"
PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$port" PHOENIX_GRPC_PORT="$(free_port)" \
  PHOENIX_WORKING_DIR="$work/phoenix" PHOENIX_TELEMETRY_ENABLED=false \
  "$PHOENIX_BIN" serve >"$work/phoenix.log" 2>&1 &
pids+=($!)
phoenix="http://127.0.0.1:$port"
for _ in $(seq 1 240); do
  python3 -c "import urllib.request,sys; urllib.request.urlopen('$phoenix/v1/projects', timeout=2)" 2>/dev/null && break
  sleep 1
done

question="How many bills does each customer have?"
cat >"$work/script.jsonl" <<JSONL
{"question": "*", "purpose": "check", "reply": "ok"}
{"question": "$question", "purpose": "write_sql", "reply": {"sql": "SELECT c.customer_name AS customer, count(*) AS bills FROM bills b LEFT JOIN customers c ON c.cust_id = b.cust_id GROUP BY 1 ORDER BY bills DESC LIMIT 6", "assumptions": ["walk-in bills (no customer) are counted together"]}}
{"question": "$question", "purpose": "repair_sql", "reply": {"sql": "SELECT c.cust_name AS customer, count(*) AS bills FROM bills b LEFT JOIN customers c ON c.cust_id = b.cust_id GROUP BY c.cust_name ORDER BY bills DESC LIMIT 6"}}
{"question": "$question", "purpose": "write_answer", "reply": "Walk-in sales without a customer account make up 980 bills; among named customers, Sharma Constructions has the most with 15."}
JSONL
mkdir -p "$work/home"
ASKDB_HOME="$work/home" ASKDB_PROVIDER=scripted ASKDB_SCRIPT="$work/script.jsonl" \
  OTEL_EXPORTER_OTLP_ENDPOINT="$phoenix" \
  "$ASKDB_BIN" serve --addr 127.0.0.1:0 --warm-up false >"$work/serve.out" 2>"$work/serve.err" &
pids+=($!)
for _ in $(seq 1 120); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.5; done
askdb="$(sed -n 's/^askdb serve: listening on \(.*\)\/$/\1/p' "$work/serve.out")"

python3 - "$askdb" "$phoenix" "$question" >"$work/ids" <<'PY'
import json, sys, time, urllib.request
askdb, phoenix, question = sys.argv[1:4]
request = urllib.request.Request(askdb + "/api/ask", data=json.dumps({"question": question}).encode(),
                                 headers={"content-type": "application/json"})
answer = json.load(urllib.request.urlopen(request, timeout=60))
trace = answer["trace_id"]
for _ in range(120):
    spans = json.load(urllib.request.urlopen(f"{phoenix}/v1/projects/default/spans?trace_id={trace}", timeout=10))["data"]
    if len(spans) >= 9:
        break
    time.sleep(0.5)
failed = [s for s in spans if s["name"] == "execute-sql" and s["status_code"] == "ERROR"]
print(trace, len(spans), len(failed))
PY
read -r trace spans failed <"$work/ids"
echo "trace $trace: $spans spans, $failed failed execute-sql" >&2
PHOENIX_URL="$phoenix" TRACE_ID="$trace" SELECT_SPAN=execute-sql OUT="$(pwd)/$OUT" \
  node tests/browser/phoenix-trace.mjs
