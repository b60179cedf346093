#!/usr/bin/env bash
# How long the first question waits after `askdb serve` starts on the demo database with
# the local model: starts the server, asks one question as soon as it listens (the
# warm-up runs in the background meanwhile), and writes the figure with its date and
# settings to benches/results/first-question.json.
#
#   scripts/first-question.sh [QUESTION]
#
# ASKDB_BIN: the askdb binary (default target/release/askdb). The local model must be
# running (scripts/local-model.sh start) and nothing else should use it.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${ASKDB_BIN:-target/release/askdb}"
QUESTION="${1:-How many bills were voided in 2025?}"
eval "$(bash scripts/local-model.sh env)"
home=$(mktemp -d)
log="$home/serve.log"
trap 'kill "$server" 2>/dev/null || true; rm -rf "$home"' EXIT
started=$(date +%s.%N)
ASKDB_HOME="$home" "$BIN" serve --addr 127.0.0.1:0 --explain false > "$home/out" 2> "$log" &
server=$!
for _ in $(seq 1 600); do
  url=$(sed -n 's#^askdb serve: listening on \(http://[^ ]*\)/$#\1#p' "$home/out")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "first-question: the server did not start" >&2; cat "$log" >&2; exit 1; }
listening=$(date +%s.%N)
body=$(printf '{"question": "%s"}' "$QUESTION")
answer=$(curl -s -m 600 -H 'content-type: application/json' -d "$body" "$url/api/ask")
answered=$(date +%s.%N)
decision=$(printf '%s' "$answer" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("decision"))')
python3 - "$started" "$listening" "$answered" "$decision" "$QUESTION" "$ASKDB_MODEL" <<'PY'
import json, sys, datetime
started, listening, answered = map(float, sys.argv[1:4])
figure = {
    "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    "model": sys.argv[6],
    "database": "demo",
    "question": sys.argv[5],
    "decision": sys.argv[4],
    "start_to_listening_s": round(listening - started, 2),
    "first_answer_after_listening_s": round(answered - listening, 2),
    "settings": "askdb serve --explain false, warm-up on (background), local model already running",
}
with open("benches/results/first-question.json", "w") as file:
    json.dump(figure, file, indent=2)
    file.write("\n")
print(json.dumps(figure, indent=2))
PY
