#!/usr/bin/env bash
# How long the first question waits after `askdb serve` starts on the demo database with
# the local model, twice: at the first start ever (the model server has never read the
# demo's prompt: askdb reads it in the background, and the server saves it to disk), and
# at a later start (the model server restarted, so nothing is in its memory: askdb
# restores the saved prompt instead of reading it). Each time the server starts, one
# question is asked as soon as it listens, and the figures go with their date and
# settings to benches/results/first-question.json.
#
#   scripts/first-question.sh [QUESTION]
#
# ASKDB_BIN: the askdb binary (default target/release/askdb). The script restarts the
# local model (scripts/local-model.sh) and removes its saved prompts; nothing else should
# use the model meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${ASKDB_BIN:-target/release/askdb}"
QUESTION="${1:-How many bills were voided in 2025?}"
data_dir=$(python3 -c 'import os; print(os.environ.get("ASKDB_HOME") or os.path.join(os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "askdb"))')
saved="$data_dir/local-model/prompt-cache"
results=$(mktemp)
trap 'rm -f "$results"' EXIT

restart_model() {
  bash scripts/local-model.sh stop >/dev/null 2>&1 || true
  eval "$(bash scripts/local-model.sh start)"
}

# One start of `askdb serve` on a fresh demo, one question as soon as it listens; prints
# a JSON object of the figures.
ask_once() {
  local home log out server url started listening answered answer shown body
  home=$(mktemp -d)
  log="$home/serve.log"
  out="$home/out"
  started=$(date +%s.%N)
  ASKDB_HOME="$home" "$BIN" serve --addr 127.0.0.1:0 --explain false > "$out" 2> "$log" &
  server=$!
  url=""
  for _ in $(seq 1 600); do
    url=$(sed -n 's#^askdb serve: listening on \(http://[^ ]*\)/$#\1#p' "$out")
    [ -n "$url" ] && break
    sleep 0.1
  done
  if [ -z "$url" ]; then
    echo "first-question: the server did not start" >&2
    cat "$log" >&2
    kill "$server" 2>/dev/null || true
    return 1
  fi
  listening=$(date +%s.%N)
  body=$(printf '{"question": "%s"}' "$QUESTION")
  answer=$(curl -s -m 600 -H 'content-type: application/json' -d "$body" "$url/api/ask")
  answered=$(date +%s.%N)
  # A question asked while the schema is first read does not wait for the read, which
  # goes on after it: the server stays up until the read ends and its copy is saved.
  for _ in $(seq 1 600); do
    grep -q -E 'the model (restored|has read)|warming the model failed' "$log" && break
    sleep 0.5
  done
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  # The answer as the user saw it: the decision, the SQL that ran, its rows, the attempts.
  shown=$(printf '%s' "$answer" | python3 -c 'import json,sys; a=json.load(sys.stdin); print(json.dumps({k: a.get(k) for k in ("decision", "sql", "rows", "attempts")}))')
  warm=$(grep -m1 -E 'the model (restored|has read)' "$log" | sed 's/^askdb serve: //' || true)
  rm -rf "$home"
  python3 -c 'import json,sys; print(json.dumps({"answer": json.loads(sys.argv[4]), "start_to_listening_s": round(float(sys.argv[2]) - float(sys.argv[1]), 2), "first_answer_after_listening_s": round(float(sys.argv[3]) - float(sys.argv[2]), 2), "warm_up_log": sys.argv[5]}))' \
    "$started" "$listening" "$answered" "$shown" "$warm"
}

echo "first-question: first start (no saved prompt)" >&2
restart_model
rm -f "$saved"/askdb-prefix-*.bin
ask_once >> "$results"
echo "first-question: later start (model restarted, saved prompt on disk)" >&2
restart_model
ask_once >> "$results"

python3 - "$results" "$QUESTION" "$ASKDB_MODEL" <<'PY'
import json, sys, datetime
with open(sys.argv[1]) as file:
    first, later = (json.loads(line) for line in file if line.strip())
figure = {
    "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    "model": sys.argv[3],
    "database": "demo",
    "question": sys.argv[2],
    "first_start": first,
    "later_start": later,
    "settings": "askdb serve --explain false, warm-up on (background); the local model "
    "restarted before each start, its saved prompts removed before the first",
}
with open("benches/results/first-question.json", "w") as file:
    json.dump(figure, file, indent=2)
    file.write("\n")
print(json.dumps(figure, indent=2))
PY
