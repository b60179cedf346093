//! Three `askdb serve` replicas on one machine sharing one PostgreSQL state
//! (`--state-url`, decision 0079), with a priced scripted model: `ASKDB_REPLICAS_ASKS`
//! questions (2,000) at concurrency `ASKDB_REPLICAS_CONCURRENCY` (32) spread round-robin
//! over them, the third replica killed (SIGKILL) half way. It reports the total spend
//! against the cap (the shared ledger's totals), answers by status (503
//! `spend_cap_reached` once the cap is reached is by design; so are refused connections
//! to the killed replica), whether every answer of a live replica has its settled ledger
//! row and what the killed replica left reserved, how long a revocation takes to be
//! refused by another replica, each replica's resident memory at start and end, and
//! whether a conversation begun on one replica continues on another (decision 0080),
//! asked before the load spends the cap.
//!
//! `cargo bench --bench replicas --profile dev` (the dev build is enough: the figures
//! are about sharing, not speed). PostgreSQL at `ASKDB_TEST_POSTGRES_URL` (default
//! postgres://postgres@127.0.0.1:5432/postgres) gets a uniquely named scratch database
//! holding the state schema, dropped at the end. `ASKDB_REPLICAS_OUT=FILE` also writes
//! the report as Markdown.

#[path = "../tests/support/ci.rs"]
mod ci;
#[path = "support/mcp_client.rs"]
mod mcp_client;
#[path = "../tests/support/scratch.rs"]
mod scratch;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_client::{machine, proc_kib, utc_now};
use serde_json::{json, Value};

const QUESTION: &str = "How many bills are there per status?";
const SQL: &str = "SELECT status, count(*) AS bills FROM bills GROUP BY status ORDER BY status";
/// $10 per million tokens in and out: each scripted reply (1,000 in, 100 out) is $0.011.
const PRICES: &str = "prices_as_of = \"2026-01-01\"\n[[model]]\nprovider = \"scripted\"\nprefix = \"scripted\"\ninput = 10.0\noutput = 10.0\n";
const COST_PER_ANSWER: f64 = 0.011;
const CAP_USD: f64 = 10.0;
const ASK_TIMEOUT_SECS: u64 = 30;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

struct Replica {
    child: Child,
    url: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn askdb(bin: &str, home: &std::path::Path) -> Command {
    let mut command = Command::new(bin);
    command
        .env("ASKDB_HOME", home)
        .env("ASKDB_DATABASE_URL", "demo")
        .env("ASKDB_PROVIDER", "scripted")
        .env("ASKDB_MODEL_METERED", "true")
        .env("ASKDB_PRICES", home.join("prices.toml"))
        .env("ASKDB_SPEND_CAP_USD", CAP_USD.to_string())
        .env("ASKDB_SCRIPT", home.join("script.jsonl"));
    command
}

fn start(bin: &str, home: &std::path::Path, state_url: &str) -> Replica {
    let log = std::fs::File::create(home.join("serve.log")).expect("log file");
    let mut child = askdb(bin, home)
        .args(["serve", "--addr", "127.0.0.1:0", "--asks-per-minute", "0"])
        .args(["--max-concurrent-asks", "32", "--explain", "false"])
        .args(["--ask-timeout-secs", &ASK_TIMEOUT_SECS.to_string()])
        .args(["--state-url", state_url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("askdb serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(url) = line.strip_prefix("askdb serve: listening on ") {
                    break url.trim().trim_end_matches('/').to_string();
                }
            }
            _ => panic!(
                "askdb serve printed no address; see {}",
                home.join("serve.log").display()
            ),
        }
    };
    Replica { child, url }
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` does not, and this starts
    // three servers for a minute: it is no test.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("replicas: run with `cargo bench --bench replicas --profile dev`");
        return;
    }
    let asks = env_usize("ASKDB_REPLICAS_ASKS", 2000);
    let concurrency = env_usize("ASKDB_REPLICAS_CONCURRENCY", 32);
    let bin = env!("CARGO_BIN_EXE_askdb");
    askdb::llm::install_tls_provider();
    let names = scratch::Scratch::new("replicas bench", "replicas")
        .expect("the replicas bench needs PostgreSQL (ASKDB_TEST_POSTGRES_URL)");
    let admin = scratch::pg_connect(&names.admin_url).await.expect("admin");
    admin
        .execute(
            format!("CREATE DATABASE \"{}\"", names.database).as_str(),
            &[],
        )
        .await
        .expect("scratch database");
    let state_url = askdb::admin::url_with_database(&names.admin_url, &names.database);
    let state_db = scratch::pg_connect(&state_url)
        .await
        .expect("state database");
    askdb::state::apply_schema(&state_db)
        .await
        .expect("state schema");

    let root = tempfile::tempdir().expect("temp dir");
    let line = format!(
        "{{\"question\": \"*\", \"purpose\": \"write_sql\", \"reply\": {{\"sql\": \"{SQL}\"}}, \"input_tokens\": 1000, \"output_tokens\": 100, \"delay_ms\": 50}}\n"
    );
    let script = format!(
        "{}{}",
        // Two more for the conversation asked before the load.
        line.repeat(asks + 2),
        "{\"question\": \"*\", \"purpose\": \"check\", \"reply\": \"ok\"}\n".repeat(20)
    );
    let mut homes = Vec::new();
    for n in 0..3 {
        let home = root.path().join(format!("replica{n}"));
        std::fs::create_dir_all(&home).expect("home");
        std::fs::write(home.join("prices.toml"), PRICES).expect("prices");
        std::fs::write(home.join("script.jsonl"), &script).expect("script");
        homes.push(home);
    }
    // One user, in the state every replica shares (decision 0083): added once, on one
    // replica's machine.
    let added = askdb(bin, &homes[0])
        .args(["--json", "users", "--state-url", &state_url, "add", "ana"])
        .output()
        .expect("users add");
    let token = serde_json::from_slice::<Value>(&added.stdout).expect("json")["token"]
        .as_str()
        .expect("token")
        .to_string();
    let replicas: Vec<Replica> = homes
        .iter()
        .map(|home| start(bin, home, &state_url))
        .collect();
    let pids: Vec<u32> = replicas.iter().map(|replica| replica.child.id()).collect();
    let rss_start: Vec<u64> = pids
        .iter()
        .map(|pid| proc_kib(*pid, "VmRSS:").unwrap_or(0))
        .collect();

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(ASK_TIMEOUT_SECS + 5))
        .pool_max_idle_per_host(concurrency)
        .build()
        .expect("client");
    let urls: Arc<Vec<String>> =
        Arc::new(replicas.iter().map(|replica| replica.url.clone()).collect());
    let answered_by = Arc::new(std::sync::Mutex::new(vec![0usize; 3]));
    let paid = Arc::new(std::sync::Mutex::new(0.0f64));

    // A conversation begun on replica 0 and continued on replica 1, before the load
    // spends the cap: the second ask names the first's conversation.
    let mut conversation_turns = Vec::new();
    let mut conversation_id: Option<String> = None;
    for replica in [0usize, 1] {
        let mut body = json!({"question": QUESTION, "mode": "baseline"});
        if let Some(id) = &conversation_id {
            body["conversation_id"] = json!(id);
        }
        let response = http
            .post(format!("{}/api/ask", urls[replica]))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .expect("conversation ask");
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        if status == 200 {
            answered_by.lock().expect("lock")[replica] += 1;
            *paid.lock().expect("lock") += answer["cost_usd"].as_f64().unwrap_or(0.0);
        }
        conversation_id = answer["conversation_id"].as_str().map(str::to_string);
        conversation_turns.push(format!(
            "replica {replica}: status {status}, turn {}",
            answer["turn"]
                .as_u64()
                .map_or("none".to_string(), |turn| turn.to_string())
        ));
    }
    let conversation_continued = conversation_turns
        == [
            "replica 0: status 200, turn 1",
            "replica 1: status 200, turn 2",
        ];
    let next = Arc::new(AtomicUsize::new(0));
    let killed_at = asks / 2;
    let statuses = Arc::new(std::sync::Mutex::new(BTreeMap::<String, usize>::new()));
    let started = Instant::now();
    let mut workers = Vec::new();
    let killer = {
        let next = Arc::clone(&next);
        let pid = pids[2];
        tokio::spawn(async move {
            while next.load(Ordering::SeqCst) < killed_at {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            Instant::now()
        })
    };
    for _ in 0..concurrency {
        let (http, urls, next, statuses, answered_by, paid, token) = (
            http.clone(),
            Arc::clone(&urls),
            Arc::clone(&next),
            Arc::clone(&statuses),
            Arc::clone(&answered_by),
            Arc::clone(&paid),
            token.clone(),
        );
        workers.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                if n >= asks {
                    break;
                }
                // Round-robin; once the third replica is killed, the balancer's health
                // check would take it out: the rest go to the two left.
                let replica = if n < killed_at { n % 3 } else { n % 2 };
                let outcome = http
                    .post(format!("{}/api/ask", urls[replica]))
                    .bearer_auth(&token)
                    .json(&json!({"question": QUESTION, "mode": "baseline"}))
                    .send()
                    .await;
                let key = match outcome {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let body: Value = response.json().await.unwrap_or(Value::Null);
                        if status == 200 {
                            answered_by.lock().expect("lock")[replica] += 1;
                            *paid.lock().expect("lock") += body["cost_usd"].as_f64().unwrap_or(0.0);
                            "200".to_string()
                        } else {
                            format!("{status} {}", body["error"].as_str().unwrap_or(""))
                        }
                    }
                    Err(_) if replica == 2 => "no response (replica killed)".to_string(),
                    Err(error) => format!("no response: {error}"),
                };
                *statuses.lock().expect("lock").entry(key).or_default() += 1;
            }
        }));
    }
    for worker in workers {
        worker.await.expect("worker");
    }
    let took = started.elapsed();
    let _ = killer.await;
    let rss_end: Vec<Option<u64>> = pids.iter().map(|pid| proc_kib(*pid, "VmRSS:")).collect();

    // The revocation: written on replica 0's machine, refused by replica 1.
    let revoked = Instant::now();
    let status = askdb(bin, &homes[0])
        .args(["users", "--state-url", &state_url, "revoke", "ana"])
        .status()
        .expect("users revoke");
    assert!(status.success(), "askdb users revoke failed");
    let revocation_delay = loop {
        let response = http
            .get(format!("{}/api/schema", urls[1]))
            .bearer_auth(&token)
            .send()
            .await
            .expect("replica 1 answers");
        if response.status() == 401 {
            break revoked.elapsed();
        }
        assert!(revoked.elapsed() < Duration::from_secs(30), "never refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    // The ledger as every replica sees it.
    let totals = state_db
        .query_one(
            "SELECT spent_usd::float8, reserved_usd::float8, calls FROM askdb_state.spend_total",
            &[],
        )
        .await
        .expect("totals");
    let (spent, reserved, calls): (f64, f64, i64) = (totals.get(0), totals.get(1), totals.get(2));
    let mut rows_by_replica = BTreeMap::new();
    for row in state_db
        .query(
            "SELECT replica, status, count(*), coalesce(sum(coalesce(cost_usd, estimate_usd)), 0)::float8 FROM askdb_state.spend_entries GROUP BY 1, 2 ORDER BY 1, 2",
            &[],
        )
        .await
        .expect("entries")
    {
        let replica: String = row.get(0);
        let pid: u32 = replica.rsplit(':').next().and_then(|pid| pid.parse().ok()).unwrap_or(0);
        let index = pids.iter().position(|p| *p == pid).map_or(9, |i| i);
        let status: String = row.get(1);
        rows_by_replica.insert((index, status), (row.get::<_, i64>(2), row.get::<_, f64>(3)));
    }
    let answered = answered_by.lock().expect("lock").clone();
    let paid = *paid.lock().expect("lock");
    let statuses = statuses.lock().expect("lock").clone();
    let settled = |index: usize| {
        rows_by_replica
            .get(&(index, "settled".to_string()))
            .map_or(0, |v| v.0)
    };
    let lost: Vec<String> = (0..2)
        .filter(|index| settled(*index) != answered[*index] as i64)
        .map(|index| {
            format!(
                "replica {index}: {} answers, {} settled rows",
                answered[index],
                settled(index)
            )
        })
        .collect();
    let five_xx: usize = statuses
        .iter()
        .filter(|(key, _)| key.starts_with('5') && !key.contains("spend_cap_reached"))
        .map(|(_, count)| count)
        .sum();

    let mut report = String::new();
    report.push_str("# Three askdb serve replicas over one shared state\n\n");
    report.push_str(&format!(
        "Run {} on {}. Settings: dev build (`cargo bench --bench replicas --profile dev`); three `askdb serve --state-url` replicas on 127.0.0.1 (`--asks-per-minute 0 --max-concurrent-asks 32 --explain false --ask-timeout-secs {ASK_TIMEOUT_SECS}`), the demo database (SQLite) each, one PostgreSQL state schema on the same machine; scripted model metered at $10 per million tokens (each reply 1,000 in, 100 out: ${COST_PER_ANSWER}, 50 ms); spend cap ${CAP_USD:.2} on every replica; {asks} asks (`mode: baseline`, one model call each) at concurrency {concurrency} round-robin, one user's bearer token; replica 2 killed with SIGKILL after {killed_at} asks were sent, the rest spread over replicas 0 and 1. Took {:.1} s.\n\n",
        utc_now(),
        machine(),
        took.as_secs_f64()
    ));
    report.push_str("| figure | value |\n|---|---|\n");
    report.push_str(&format!("| spend cap (each replica) | ${CAP_USD:.2} |\n"));
    report.push_str(&format!(
        "| spent, shared ledger (settled + expired) | ${spent:.4} |\n"
    ));
    report.push_str(&format!("| still reserved (calls in flight when replica 2 was killed; they expire as spent at their worst case) | ${reserved:.4} |\n"));
    report.push_str(&format!(
        "| spent + reserved, against the cap | ${:.4} of ${CAP_USD:.2} |\n",
        spent + reserved
    ));
    report.push_str(&format!("| settled calls | {calls} |\n"));
    report.push_str(&format!(
        "| answers received, and their cost | {} (${paid:.4}) |\n",
        answered.iter().sum::<usize>()
    ));
    report.push_str(&format!("| answers by replica | {answered:?} |\n"));
    report.push_str(&format!(
        "| live replicas' answers without a settled ledger row | {} |\n",
        if lost.is_empty() {
            "none".to_string()
        } else {
            lost.join("; ")
        }
    ));
    for ((index, status), (count, usd)) in &rows_by_replica {
        report.push_str(&format!(
            "| ledger rows of replica {index}, {status} | {count} (${usd:.4}) |\n"
        ));
    }
    for (status, count) in &statuses {
        report.push_str(&format!("| status {status} | {count} |\n"));
    }
    report.push_str(&format!(
        "| 5xx other than the designed spend_cap_reached | {five_xx} |\n"
    ));
    report.push_str(&format!(
        "| revocation (`askdb users --state-url ... revoke`) until replica 1 answers 401 | {} ms |\n",
        revocation_delay.as_millis()
    ));
    for (index, pid) in pids.iter().enumerate() {
        let end = rss_end[index].map_or("killed".to_string(), |kib| format!("{} MiB", kib / 1024));
        report.push_str(&format!(
            "| replica {index} (pid {pid}) VmRSS at start / end | {} MiB / {end} |\n",
            rss_start[index] / 1024
        ));
    }
    report.push_str(&format!(
        "| a conversation begun on one replica continued on another (asked before the load: its two answers are in the answers, ledger rows and spend above, not in the load's statuses) | {}: {} |\n",
        if conversation_continued { "yes" } else { "NO" },
        conversation_turns.join("; ")
    ));
    println!("{report}");
    if let Ok(path) = std::env::var("ASKDB_REPLICAS_OUT") {
        std::fs::write(&path, &report).expect("report written");
    }
    drop(replicas);
    let held = spent <= CAP_USD + 1e-9 && lost.is_empty() && five_xx == 0 && conversation_continued;
    drop(state_db);
    drop(admin);
    drop(names);
    if !held {
        eprintln!("FAILED: the cap, the ledger or the statuses did not hold");
        std::process::exit(1);
    }
}
