#!/usr/bin/env bash
# Arize Phoenix, an OpenTelemetry trace collector and viewer, on this machine: the
# collector askdb's trace tests export to and read back from.
#
#   scripts/install-phoenix.sh            install it once (idempotent), then say how to start it
#   scripts/install-phoenix.sh install    the same
#   scripts/install-phoenix.sh start      install what is missing, start `phoenix serve` on
#                                         127.0.0.1, wait until it answers, print
#                                         `export NAME=value` lines for askdb
#                                         (eval "$(scripts/install-phoenix.sh start)")
#   scripts/install-phoenix.sh stop       stop the server this script started
#   scripts/install-phoenix.sh status     say whether it runs (exit 0) or not (exit 3)
#   scripts/install-phoenix.sh env        print the export lines of the running server (exit 3 if none)
#   scripts/install-phoenix.sh bin        print the path of the installed `phoenix` command
#                                         (exit 3 if it is not installed)
#
# Everything lives in askdb's data directory (the rule of src/home.rs: $ASKDB_HOME, else
# $XDG_DATA_HOME/askdb, else ~/.local/share/askdb), under phoenix/: the venv, the working
# directory of the server `start` runs (its SQLite database of spans), its pid and its log.
# Messages go to stderr; only the export lines go to stdout.
#
# Settings (environment):
#   ASKDB_PHOENIX_VERSION        the arize-phoenix version to install (default below)
#   ASKDB_PHOENIX_PORT           port for `start` (default 6006)
#   ASKDB_PHOENIX_START_TIMEOUT  seconds to wait for the server to answer (default 180)
#   ASKDB_PYTHON                 the Python 3 to build the venv with (default python3)
#
# The tests start their own server from this venv (with a scratch working directory); this
# script only needs to have installed it.
set -euo pipefail

PHOENIX_VERSION="${ASKDB_PHOENIX_VERSION:-20.26.1}"
PORT="${ASKDB_PHOENIX_PORT:-6006}"
START_TIMEOUT="${ASKDB_PHOENIX_START_TIMEOUT:-180}"
PYTHON="${ASKDB_PYTHON:-python3}"

if [ -n "${ASKDB_HOME:-}" ]; then
  DATA_DIR="$ASKDB_HOME"
elif [ -n "${XDG_DATA_HOME:-}" ]; then
  DATA_DIR="$XDG_DATA_HOME/askdb"
elif [ -n "${HOME:-}" ]; then
  DATA_DIR="$HOME/.local/share/askdb"
else
  DATA_DIR=".askdb-home"
fi
STATE_DIR="$DATA_DIR/phoenix"
VENV="$STATE_DIR/venv"
VENV_PYTHON="$VENV/bin/python"
PHOENIX_BIN="$VENV/bin/phoenix"
INSTALLED="$STATE_DIR/installed-version"
WORK_DIR="$STATE_DIR/work"
PID_FILE="$STATE_DIR/server.pid"
LOG_FILE="$STATE_DIR/server.log"

say() { echo "phoenix: $*" >&2; }
fail() {
  say "$*"
  exit 1
}

installed() {
  [ -x "$PHOENIX_BIN" ] && [ -f "$INSTALLED" ] && [ "$(cat "$INSTALLED")" = "$PHOENIX_VERSION" ] &&
    "$VENV_PYTHON" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('arize-phoenix') == '$PHOENIX_VERSION' else 1)" 2>/dev/null
}

install() {
  mkdir -p "$STATE_DIR"
  if installed; then
    say "arize-phoenix $PHOENIX_VERSION already installed in $VENV"
    return
  fi
  # One install at a time: CI and parallel test binaries may all ask for it.
  if command -v flock >/dev/null 2>&1; then
    exec 8>"$STATE_DIR/install.lock"
    flock -w 3600 8 || fail "another install still holds $STATE_DIR/install.lock after an hour"
    if installed; then
      say "arize-phoenix $PHOENIX_VERSION installed meanwhile in $VENV"
      exec 8>&-
      return
    fi
  fi
  command -v "$PYTHON" >/dev/null 2>&1 || fail "Python 3 ($PYTHON) not found: install python3 with the venv module and pip"
  local began=$SECONDS
  if [ ! -x "$VENV_PYTHON" ]; then
    say "creating the venv in $VENV"
    "$PYTHON" -m venv "$VENV" || fail "cannot create a venv with $PYTHON (is the venv module installed?)"
  fi
  say "installing arize-phoenix==$PHOENIX_VERSION (many packages; this can take a long while)"
  "$VENV_PYTHON" -m pip install --disable-pip-version-check --progress-bar off \
    "arize-phoenix==$PHOENIX_VERSION" >&2 || fail "cannot install arize-phoenix==$PHOENIX_VERSION"
  "$PHOENIX_BIN" --help >/dev/null 2>&1 || fail "arize-phoenix installed but '$PHOENIX_BIN --help' fails"
  echo "$PHOENIX_VERSION" >"$INSTALLED"
  say "installed arize-phoenix $PHOENIX_VERSION in $((SECONDS - began))s"
  exec 8>&- 2>/dev/null || true
}

how_to_start() {
  cat >&2 <<EOF
phoenix: to run it:
  bash scripts/install-phoenix.sh start    # 127.0.0.1:$PORT, data in $WORK_DIR
  or by hand:
  PHOENIX_HOST=127.0.0.1 PHOENIX_PORT=$PORT PHOENIX_WORKING_DIR=/some/dir $PHOENIX_BIN serve
then point askdb at it:
  export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$PORT
EOF
}

running_pid() {
  [ -f "$PID_FILE" ] || return 1
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  case "$pid" in '' | *[!0-9]*) return 1 ;; esac
  kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/cmdline" ] && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'phoenix'; then
    return 1
  fi
  echo "$pid"
}

healthy() {
  "$VENV_PYTHON" - "$PORT" <<'PY' >/dev/null 2>&1
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/projects", timeout=5) as response:
    sys.exit(0 if response.status == 200 else 1)
PY
}

print_env() {
  echo "export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$PORT"
}

start() {
  install
  if pid="$(running_pid)" && healthy; then
    say "already running (pid $pid) on 127.0.0.1:$PORT"
    print_env
    return
  fi
  mkdir -p "$WORK_DIR"
  say "starting phoenix serve on 127.0.0.1:$PORT; log in $LOG_FILE"
  PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$PORT" PHOENIX_WORKING_DIR="$WORK_DIR" \
    PHOENIX_TELEMETRY_ENABLED=false \
    nohup "$PHOENIX_BIN" serve >"$LOG_FILE" 2>&1 </dev/null 8>&- &
  local launched=$!
  echo "$launched" >"$PID_FILE"
  local began=$SECONDS
  until healthy; do
    if ! kill -0 "$launched" 2>/dev/null; then
      tail -n 30 "$LOG_FILE" >&2 || true
      fail "phoenix exited during start (log above)"
    fi
    if [ $((SECONDS - began)) -ge "$START_TIMEOUT" ]; then
      kill "$launched" 2>/dev/null || true
      fail "phoenix did not answer within ${START_TIMEOUT}s (log in $LOG_FILE)"
    fi
    sleep 0.5
  done
  say "ready on 127.0.0.1:$PORT (pid $launched) after $((SECONDS - began))s"
  print_env
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then
    say "not running"
    rm -f "$PID_FILE"
    return
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge 100 ]; then
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  rm -f "$PID_FILE"
  say "stopped (pid $pid)"
}

case "${1:-install}" in
  install)
    install
    how_to_start
    ;;
  start) start ;;
  stop) stop ;;
  status)
    if pid="$(running_pid)" && healthy; then
      echo "running: pid $pid on 127.0.0.1:$PORT"
    elif installed; then
      echo "installed ($PHOENIX_VERSION in $VENV), not running"
      exit 3
    else
      echo "not installed (wanted $PHOENIX_VERSION in $VENV)"
      exit 3
    fi
    ;;
  bin)
    if installed; then echo "$PHOENIX_BIN"; else
      say "arize-phoenix $PHOENIX_VERSION is not installed in $VENV (run $0 install)"
      exit 3
    fi
    ;;
  env)
    if running_pid >/dev/null; then print_env; else
      say "not running"
      exit 3
    fi
    ;;
  *)
    echo "usage: $0 [install|start|stop|status|env|bin]" >&2
    exit 2
    ;;
esac
