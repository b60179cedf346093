#!/usr/bin/env python3
"""How long a question answered from a verified example takes, over the database's own
time, on the paths users take: `POST /api/ask` on `askdb serve` and an `askdb ask --json`
process, each beside the same statement through `POST /api/sql` and `askdb sql run`, and
the database itself (Python's sqlite3, read-only, prepare + step).

The demo database (SQLite) is built fresh in a temporary data directory, one example is
confirmed with `askdb examples add`, and the server runs with a scripted model that has
no reply: a question that reached the model would fail, so every answered question is
the example's re-run (each answer is also checked to name the example).

    scripts/bench-rerun.py [--write]      (--write: benches/results/rerun.md)

ASKDB_BIN: the askdb binary (default target/release/askdb). ASKDB_RERUN_N: sequential
requests per HTTP figure (default 300); ASKDB_RERUN_PROCESSES: processes per process
figure (default 30).
"""

import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

QUESTION = "How many bills were voided in 2025?"
SQL = (
    "SELECT count(*) AS voided_bills FROM bills "
    "WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2025'"
)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("ASKDB_BIN", os.path.join(ROOT, "target", "release", "askdb"))
HTTP_N = int(os.environ.get("ASKDB_RERUN_N", "300"))
PROCESSES = int(os.environ.get("ASKDB_RERUN_PROCESSES", "30"))
OUT = os.path.join(ROOT, "benches", "results", "rerun.md")


def p50_ms(times):
    return statistics.median(times) * 1000.0


def timed(n, step):
    times = []
    for _ in range(n):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return times


def post(url, body):
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def machine():
    cores = os.cpu_count()
    try:
        with open("/proc/meminfo") as meminfo:
            kib = int(meminfo.readline().split()[1])
        memory = f"{kib / 1024 / 1024:.0f} GiB"
    except OSError:
        memory = "unknown memory"
    return f"{cores} cores, {memory}, {platform.system()} {platform.release()}"


def main():
    home = tempfile.mkdtemp(prefix="askdb-rerun-")
    try:
        measure(home, "--write" in sys.argv[1:])
    finally:
        shutil.rmtree(home, ignore_errors=True)


def measure(home, write):
    if not os.path.exists(BIN):
        sys.exit(f"no askdb binary at {BIN} (cargo build --release, or set ASKDB_BIN)")
    demo = os.path.join(home, "demo.sqlite")
    subprocess.run([BIN, "demo", "build", "--out", demo], check=True, capture_output=True)
    script = os.path.join(home, "script.jsonl")
    open(script, "w").close()
    env = dict(
        os.environ,
        ASKDB_HOME=home,
        ASKDB_DATABASE_URL=f"sqlite:{demo}",
        ASKDB_PROVIDER="scripted",
        ASKDB_SCRIPT=script,
    )
    added = subprocess.run(
        [BIN, "examples", "add", QUESTION, SQL, "--verified-by", "bench"],
        env=env,
        capture_output=True,
        text=True,
    )
    if added.returncode != 0:
        sys.exit(f"askdb examples add failed: {added.stdout}{added.stderr}")

    log = open(os.path.join(home, "serve.log"), "w")
    server = subprocess.Popen(
        [BIN, "serve", "--addr", "127.0.0.1:0", "--asks-per-minute", "0", "--explain", "false",
         "--warm-up", "false"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        url = None
        for line in server.stdout:
            if line.startswith("askdb serve: listening on "):
                url = line.split("listening on ", 1)[1].strip().rstrip("/")
                break
        if url is None:
            sys.exit(f"askdb serve printed no address; see {log.name}")

        def ask():
            status, body = post(f"{url}/api/ask", {"question": QUESTION})
            if status != 200 or not isinstance(body, dict) or body.get("answered_from_example") is None:
                sys.exit(f"the question was not answered from the example: {status} {body}")
            return body

        def sql():
            status, body = post(f"{url}/api/sql", {"sql": SQL})
            if status != 200 or not isinstance(body, dict) or body.get("row_count") != 1:
                sys.exit(f"POST /api/sql failed: {status} {body}")

        answer = ask()
        for _ in range(20):
            ask()
            sql()
        connection = sqlite3.connect(f"file:{demo}?mode=ro", uri=True)

        def direct():
            rows = connection.execute(SQL).fetchall()
            assert rows

        direct_times = timed(HTTP_N, direct)
        sql_times = timed(HTTP_N, sql)
        ask_times = timed(HTTP_N, ask)
    finally:
        server.terminate()
        server.wait()
        log.close()

    def process(args):
        def step():
            done = subprocess.run([BIN, *args], env=env, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"askdb {' '.join(args)} failed: {done.stderr}")
            return done

        return step

    asked = subprocess.run(
        [BIN, "ask", "--json", "--no-explain", QUESTION], env=env, capture_output=True, text=True
    )
    if asked.returncode != 0 or json.loads(asked.stdout).get("answered_from_example") is None:
        sys.exit(f"askdb ask did not answer from the example: {asked.stdout} {asked.stderr}")
    process_sql = timed(PROCESSES, process(["sql", "run", SQL]))
    process_ask = timed(PROCESSES, process(["ask", "--json", "--no-explain", QUESTION]))

    direct, via_sql, via_ask = p50_ms(direct_times), p50_ms(sql_times), p50_ms(ask_times)
    proc_sql, proc_ask = p50_ms(process_sql), p50_ms(process_ask)
    shown_bin = os.path.relpath(BIN, ROOT) if BIN.startswith(ROOT) else BIN
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    version = subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout.strip()
    report = f"""# A question answered from a verified example

Run {stamp} UTC on {machine()}, load average {os.getloadavg()[0]:.2f}. Settings: {version} (`{shown_bin}`), the demo database (SQLite) built fresh, one example confirmed with `askdb examples add` ("{QUESTION}" -> `{SQL}`), `askdb serve` with a scripted model that has no reply (every answer checked to name the example: no model was asked); {HTTP_N} sequential requests per HTTP figure after 20 of each to warm up, {PROCESSES} processes per process figure; p50.

| path | the question, re-run from the example | the same statement | over the statement | over the database itself ({direct:.3f} ms) |
|---|---|---|---|---|
| `askdb serve` (`POST /api/ask` / `POST /api/sql`) | {via_ask:.3f} ms | {via_sql:.3f} ms | +{via_ask - via_sql:.3f} ms | +{via_ask - direct:.3f} ms |
| a process (`askdb ask --json --no-explain` / `askdb sql run`) | {proc_ask:.1f} ms | {proc_sql:.1f} ms | +{proc_ask - proc_sql:.1f} ms | +{proc_ask - direct:.1f} ms |

The database itself: Python's sqlite3 on the same file, read-only, prepare + step. The HTTP figures include the round trip over loopback and the JSON on both sides; the process figures include starting the process and opening the database. Answered from example {answer.get('answered_from_example')}.
"""
    print(report)
    if write:
        with open(OUT, "w") as out:
            out.write(report)
        print(f"wrote {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
