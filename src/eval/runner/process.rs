//! Asking a question the way users do: one `askdb ask --json` process per question,
//! timed from spawn to exit, or `POST /api/ask` on a running `askdb serve`, timed from
//! request to response. The harness's own path keeps one agent per database warm in
//! memory; a user's process starts cold, reads its schema, opens its connection and meets
//! whatever the model server has cached, and a server warms its schema prompt once and
//! answers over HTTP. Every path is graded by the same code; only the asking differs.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::agent::AgentResult;

/// Where the agent's questions are asked in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum AskPath {
    /// Inside the harness: one agent per database, its schema read once, its prompt
    /// prefix warmed before the database's first question (outside any latency).
    #[default]
    Harness,
    /// One `askdb ask --json --no-explain` process per question, as a user or a script
    /// runs it; the latency is the process's, from spawn to exit.
    Process,
    /// `POST /api/ask` (no explanation) on an `askdb serve` started for the database,
    /// once its warm-up ended, as a person who opened the page asks; the latency is
    /// the request's, from send to the whole response.
    Serve,
}

impl AskPath {
    pub fn is_harness(&self) -> bool {
        *self == AskPath::Harness
    }
}

/// How long a question's process may take before it is stopped and recorded as
/// askdb's failure: far past any budget, so only a hung process meets it.
const PROCESS_DEADLINE: Duration = Duration::from_secs(600);

/// A question's process that did not give an answer record.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessFailure {
    pub message: String,
    pub latency_ms: u64,
}

/// Asks one question through a new `askdb ask` process on `db` with `strategy`,
/// inheriting this process's environment (the model's settings, askdb's data
/// directory). The answer record is the process's `--json` output; its latency is
/// replaced by the process's wall time, which is what the person waited.
pub async fn ask(
    askdb: &Path,
    db: &str,
    strategy: &str,
    row_cap: u64,
    question: &str,
) -> Result<AgentResult, ProcessFailure> {
    let started = Instant::now();
    let elapsed = |started: Instant| started.elapsed().as_millis() as u64;
    let child = tokio::process::Command::new(askdb)
        .arg("--db")
        .arg(db)
        .arg("--json")
        .arg("--row-cap")
        .arg(row_cap.to_string())
        .arg("ask")
        .arg("--no-explain")
        .arg("--quiet")
        .arg("--strategy")
        .arg(strategy)
        .arg("--")
        .arg(question)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| ProcessFailure {
            message: format!("could not start {}: {error}", askdb.display()),
            latency_ms: elapsed(started),
        })?;
    let output = match tokio::time::timeout(PROCESS_DEADLINE, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => {
            return Err(ProcessFailure {
                message: format!("askdb ask: {error}"),
                latency_ms: elapsed(started),
            })
        }
        Err(_) => {
            return Err(ProcessFailure {
                message: format!(
                    "askdb ask did not end within {} s",
                    PROCESS_DEADLINE.as_secs()
                ),
                latency_ms: elapsed(started),
            })
        }
    };
    let latency_ms = elapsed(started);
    match serde_json::from_slice::<AgentResult>(&output.stdout) {
        Ok(mut result) => {
            result.latency_ms = latency_ms;
            Ok(result)
        }
        Err(error) => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let last_line = stderr.lines().last().unwrap_or("").trim();
            Err(ProcessFailure {
                message: format!(
                    "askdb ask exited with {} and no answer record ({error}): {last_line}",
                    output.status
                ),
                latency_ms,
            })
        }
    }
}

/// How long a server may take to listen and to end its warm-up: a first read of a
/// large schema on two cores takes a minute or more.
const SERVE_READY_DEADLINE: Duration = Duration::from_secs(300);

/// An `askdb serve` on one database, for the serve path; stopped when dropped.
pub struct ServeProcess {
    db: String,
    base_url: String,
    http: reqwest::Client,
    // Held so the server lives as long as this value (killed on drop).
    _child: tokio::process::Child,
}

impl ServeProcess {
    /// Starts `askdb serve` on `db` on a free loopback port with no rate limit, no query
    /// log and the default strategy, and waits until it listens and its warm-up ended.
    pub async fn start(
        askdb: &Path,
        db: &str,
        row_cap: u64,
    ) -> Result<ServeProcess, ProcessFailure> {
        use tokio::io::AsyncBufReadExt;
        let started = Instant::now();
        let failure = |message: String| ProcessFailure {
            message,
            latency_ms: started.elapsed().as_millis() as u64,
        };
        let mut child = tokio::process::Command::new(askdb)
            .arg("--db")
            .arg(db)
            .arg("--row-cap")
            .arg(row_cap.to_string())
            .args(["serve", "--addr", "127.0.0.1:0", "--asks-per-minute", "0"])
            .args(["--query-log", "false", "--explain", "false"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| failure(format!("could not start {}: {error}", askdb.display())))?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(failure("askdb serve gave no output pipes".to_string()));
        };
        let mut stdout = tokio::io::BufReader::new(stdout).lines();
        let mut stderr = tokio::io::BufReader::new(stderr).lines();
        let warm_up_line = format!("askdb serve: {}", crate::llm::WARM_UP_LOG_PREFIX);
        let ready = async {
            let mut base_url = None;
            let mut warmed = false;
            let mut last_error = String::new();
            while base_url.is_none() || !warmed {
                tokio::select! {
                    line = stdout.next_line(), if base_url.is_none() => match line {
                        Ok(Some(line)) => {
                            if let Some(url) = line.strip_prefix("askdb serve: listening on ") {
                                base_url = Some(url.trim().trim_end_matches('/').to_string());
                            }
                        }
                        _ => return Err(format!("askdb serve ended before it listened: {last_error}")),
                    },
                    line = stderr.next_line() => match line {
                        Ok(Some(line)) => {
                            warmed |= line.starts_with(&warm_up_line);
                            last_error = line;
                        }
                        _ => return Err(format!("askdb serve ended: {last_error}")),
                    },
                }
            }
            Ok(base_url)
        };
        let base_url = match tokio::time::timeout(SERVE_READY_DEADLINE, ready).await {
            Ok(Ok(Some(url))) => url,
            Ok(Ok(None)) => return Err(failure("askdb serve printed no address".to_string())),
            Ok(Err(message)) => return Err(failure(message)),
            Err(_) => {
                return Err(failure(format!(
                    "askdb serve was not ready within {} s",
                    SERVE_READY_DEADLINE.as_secs()
                )))
            }
        };
        // The server's later log lines are drained so its pipe never fills.
        tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
        let http = reqwest::Client::builder()
            .timeout(PROCESS_DEADLINE)
            .build()
            .map_err(|error| failure(format!("HTTP client: {error}")))?;
        Ok(ServeProcess {
            db: db.to_string(),
            base_url,
            http,
            _child: child,
        })
    }

    /// The database this server answers on.
    pub fn db(&self) -> &str {
        &self.db
    }

    /// Asks one question with `POST /api/ask`; the latency is the request's wall time.
    pub async fn ask(&self, question: &str) -> Result<AgentResult, ProcessFailure> {
        let started = Instant::now();
        let failure = |message: String| ProcessFailure {
            message,
            latency_ms: started.elapsed().as_millis() as u64,
        };
        let response = self
            .http
            .post(format!("{}/api/ask", self.base_url))
            .json(&serde_json::json!({ "question": question, "mode": "agent", "explain": false }))
            .send()
            .await
            .map_err(|error| failure(format!("POST /api/ask: {error}")))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|error| failure(format!("POST /api/ask: {error}")))?;
        let latency_ms = started.elapsed().as_millis() as u64;
        match serde_json::from_slice::<AgentResult>(&body) {
            Ok(mut result) if status.is_success() => {
                result.latency_ms = latency_ms;
                Ok(result)
            }
            _ => Err(ProcessFailure {
                message: format!(
                    "POST /api/ask answered {status}: {}",
                    String::from_utf8_lossy(&body)
                        .chars()
                        .take(300)
                        .collect::<String>()
                ),
                latency_ms,
            }),
        }
    }
}

/// The order a run asks its (question, mode) pairs in. In the harness, each question in
/// every mode before the next (the modes meet the same cache state). Through processes,
/// mode by mode, and within a mode database by database in the sample's order: the
/// agent's questions are asked as a user at one database asks them, one after another,
/// with no other prompt pushed between them into the model server's cache.
pub fn asking_order<'a, T>(
    items: &'a [T],
    modes: &[crate::agent::Mode],
    path: AskPath,
    database_of: impl Fn(&T) -> &str,
) -> Vec<(&'a T, crate::agent::Mode)> {
    match path {
        AskPath::Harness => items
            .iter()
            .flat_map(|item| modes.iter().map(move |mode| (item, *mode)))
            .collect(),
        AskPath::Process | AskPath::Serve => {
            let mut databases: Vec<&str> = Vec::new();
            for item in items {
                let db = database_of(item);
                if !databases.contains(&db) {
                    databases.push(db);
                }
            }
            let mut order = Vec::with_capacity(items.len() * modes.len());
            for mode in modes {
                for db in &databases {
                    for item in items.iter().filter(|item| database_of(item) == *db) {
                        order.push((item, *mode));
                    }
                }
            }
            order
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Mode;

    #[test]
    fn the_harness_asks_each_question_in_every_mode_before_the_next() {
        let items = [("q1", "a"), ("q2", "b")];
        let order = asking_order(&items, &[Mode::Agent, Mode::Plain], AskPath::Harness, |i| {
            i.1
        });
        let asked: Vec<(&str, Mode)> = order.iter().map(|(item, mode)| (item.0, *mode)).collect();
        assert_eq!(
            asked,
            [
                ("q1", Mode::Agent),
                ("q1", Mode::Plain),
                ("q2", Mode::Agent),
                ("q2", Mode::Plain)
            ]
        );
    }

    #[test]
    fn processes_ask_mode_by_mode_and_database_by_database() {
        let items = [("q1", "a"), ("q2", "b"), ("q3", "a")];
        let order = asking_order(&items, &[Mode::Agent, Mode::Plain], AskPath::Process, |i| {
            i.1
        });
        let asked: Vec<(&str, Mode)> = order.iter().map(|(item, mode)| (item.0, *mode)).collect();
        assert_eq!(
            asked,
            [
                ("q1", Mode::Agent),
                ("q3", Mode::Agent),
                ("q2", Mode::Agent),
                ("q1", Mode::Plain),
                ("q3", Mode::Plain),
                ("q2", Mode::Plain)
            ]
        );
    }

    #[tokio::test]
    async fn a_process_that_gives_no_answer_record_is_a_failure_with_its_message() {
        // `false` prints nothing and exits 1: no record, and the failure says so.
        let failure = ask(Path::new("false"), "x.db", "", 10, "q")
            .await
            .expect_err("no record");
        assert!(failure.message.contains("no answer record"), "{failure:?}");
        let missing = ask(Path::new("/nonexistent/askdb"), "x.db", "", 10, "q")
            .await
            .expect_err("cannot start");
        assert!(missing.message.contains("could not start"), "{missing:?}");
    }
}
