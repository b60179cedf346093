//! The local model as askdb's own process: `askdb serve --local-model` (or the page's
//! banner button) starts it, shows the one-time install and download and the model load
//! as they happen, watches that it keeps running and stops it when askdb stops.
//!
//! The work is done by scripts/local-model.sh, carried inside the binary ([`SCRIPT`]) so
//! an installed askdb needs no source tree, and run with askdb's data directory
//! ([`crate::home::data_dir`]) as `ASKDB_HOME`: one implementation of installing,
//! downloading, checking and starting, whether a developer runs the script or askdb
//! does. This module only reads the script's `local-model: progress ...` lines into a
//! [`LocalModelStatus`], and passes its own pid as `ASKDB_MODEL_OWNER_PID`, so the
//! model server ends within seconds of askdb however askdb ended. A model that was
//! already running (started by the script by hand) is used but never stopped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;

/// scripts/local-model.sh, as built into this binary.
pub const SCRIPT: &str = include_str!("../scripts/local-model.sh");

/// How often a running model is checked for being alive.
const WATCH_EVERY: Duration = Duration::from_secs(5);

/// Lines of the script's output kept for a failure message.
const KEPT_LINES: usize = 12;

/// Where a start stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Nothing asked for it yet.
    NotStarted,
    /// The script runs and checks what is already installed.
    Starting,
    /// Creating the Python environment and installing llama.cpp's server (once).
    Installing,
    /// Downloading the model file (once, about 1.1 GB).
    Downloading,
    /// Joining the downloaded chunks and checking their SHA-256.
    Verifying,
    /// The server reads the model into memory.
    Loading,
    /// The model answers.
    Ready,
    /// The start failed; `error` says why.
    Failed,
    /// The model was ready and its process has ended since.
    Exited,
}

impl Phase {
    /// Whether a start is under way (a second start request waits for it).
    pub fn is_starting(self) -> bool {
        matches!(
            self,
            Phase::Starting
                | Phase::Installing
                | Phase::Downloading
                | Phase::Verifying
                | Phase::Loading
        )
    }
}

/// What the page and the CLI show about the local model.
#[derive(Debug, Clone, Serialize)]
pub struct LocalModelStatus {
    pub phase: Phase,
    /// One sentence for a person: what is happening now.
    pub message: String,
    /// The download so far, while and after downloading.
    pub downloaded_bytes: Option<u64>,
    pub total_bytes: Option<u64>,
    /// The download's average rate since it began.
    pub bytes_per_second: Option<f64>,
    /// Seconds in the current phase (the load's time while loading).
    pub phase_seconds: f64,
    /// Seconds since the start was asked for.
    pub total_seconds: Option<f64>,
    /// The OpenAI-compatible endpoint and model name, once ready.
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// Whether askdb started the process (and so stops it); false for a model that
    /// was already running.
    pub started_by_askdb: bool,
    /// Why the start failed or the process ended: the script's last lines.
    pub error: Option<String>,
}

/// A progress line of scripts/local-model.sh.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    Install,
    Download {
        done: u64,
        total: u64,
    },
    Verify,
    Load,
    /// `started`: this start launched the server; `existing`: it was already running.
    Ready {
        started: bool,
    },
}

/// Reads one line of the script's stderr: Some for a `local-model: progress ...` line.
pub fn parse_progress(line: &str) -> Option<Progress> {
    let rest = line.trim().strip_prefix("local-model: progress ")?;
    let mut words = rest.split_whitespace();
    match words.next()? {
        "install" => Some(Progress::Install),
        "download" => {
            let done = words.next()?.parse().ok()?;
            let total = words.next()?.parse().ok()?;
            Some(Progress::Download { done, total })
        }
        "verify" => Some(Progress::Verify),
        "load" => Some(Progress::Load),
        "ready" => Some(Progress::Ready {
            started: words.next() != Some("existing"),
        }),
        _ => None,
    }
}

/// The endpoint and model the script printed as `export NAME=value` lines.
pub fn parse_exports(stdout: &str) -> Option<(String, String)> {
    let mut base_url = None;
    let mut model = None;
    for line in stdout.lines() {
        let Some((name, value)) = line
            .trim()
            .strip_prefix("export ")
            .and_then(|a| a.split_once('='))
        else {
            continue;
        };
        let value = value.trim().trim_matches('"').to_string();
        match name {
            "ASKDB_BASE_URL" => base_url = Some(value),
            "ASKDB_MODEL" => model = Some(value),
            _ => {}
        }
    }
    Some((base_url?, model?))
}

/// Bytes as a person reads them: `1.1 GB`, `412.3 MB`, `900 B`.
pub fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 4] = ["B", "KB", "MB", "GB"];
    let mut value = bytes.max(0.0);
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[derive(Debug)]
struct State {
    phase: Phase,
    phase_began: Instant,
    asked_at: Option<Instant>,
    download_began: Option<Instant>,
    downloaded: Option<u64>,
    total: Option<u64>,
    base_url: Option<String>,
    model: Option<String>,
    started_by_askdb: bool,
    error: Option<String>,
    /// The newest lines the script wrote, for a failure message.
    last_lines: Vec<String>,
}

impl State {
    fn enter(&mut self, phase: Phase) {
        if self.phase != phase {
            self.phase = phase;
            self.phase_began = Instant::now();
        }
    }

    fn apply(&mut self, progress: &Progress) {
        match progress {
            Progress::Install => self.enter(Phase::Installing),
            Progress::Download { done, total } => {
                self.enter(Phase::Downloading);
                self.download_began.get_or_insert_with(Instant::now);
                // pip's temporary folder may briefly hold more than the model.
                self.downloaded = Some((*done).min(*total));
                self.total = Some(*total);
            }
            Progress::Verify => self.enter(Phase::Verifying),
            Progress::Load => self.enter(Phase::Loading),
            Progress::Ready { started } => {
                self.started_by_askdb = *started;
                self.enter(Phase::Ready);
            }
        }
    }

    fn snapshot(&self) -> LocalModelStatus {
        let phase_seconds = self.phase_began.elapsed().as_secs_f64();
        let bytes_per_second = match (self.download_began, self.downloaded) {
            (Some(began), Some(done)) if done > 0 && began.elapsed().as_secs_f64() > 0.5 => {
                Some(done as f64 / began.elapsed().as_secs_f64())
            }
            _ => None,
        };
        let message = match self.phase {
            Phase::NotStarted => "The local model is not started.".to_string(),
            Phase::Starting => "Checking what the local model needs.".to_string(),
            Phase::Installing => format!(
                "Installing llama.cpp's server into askdb's data directory (once; {phase_seconds:.0} s so far)."
            ),
            Phase::Downloading => {
                let done = self.downloaded.unwrap_or(0) as f64;
                let total = self.total.unwrap_or(0) as f64;
                let rate = bytes_per_second
                    .map(|rate| format!(" at {}/s", human_bytes(rate)))
                    .unwrap_or_default();
                format!(
                    "Downloading the model (once): {} of {}{rate}.",
                    human_bytes(done),
                    human_bytes(total)
                )
            }
            Phase::Verifying => "Checking the downloaded model's SHA-256.".to_string(),
            Phase::Loading => format!("Loading the model into memory ({phase_seconds:.0} s)."),
            Phase::Ready => format!(
                "The local model {} is ready.",
                self.model.as_deref().unwrap_or("")
            ),
            Phase::Failed => format!(
                "The local model could not start: {}",
                self.error.as_deref().unwrap_or("no reason given")
            ),
            Phase::Exited => format!(
                "The local model stopped running: {}",
                self.error.as_deref().unwrap_or("no reason given")
            ),
        };
        LocalModelStatus {
            phase: self.phase,
            message,
            downloaded_bytes: self.downloaded,
            total_bytes: self.total,
            bytes_per_second,
            phase_seconds,
            total_seconds: self.asked_at.map(|at| at.elapsed().as_secs_f64()),
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            started_by_askdb: self.started_by_askdb,
            error: self.error.clone(),
        }
    }

    fn keep_line(&mut self, line: &str) {
        self.last_lines.push(line.to_string());
        if self.last_lines.len() > KEPT_LINES {
            self.last_lines.remove(0);
        }
    }

    /// The script's own words, without the progress lines.
    fn failure_text(&self, fallback: &str) -> String {
        let lines: Vec<&str> = self
            .last_lines
            .iter()
            .map(|line| line.trim())
            .filter(|line| !line.is_empty() && parse_progress(line).is_none())
            .collect();
        if lines.is_empty() {
            fallback.to_string()
        } else {
            lines[lines.len().saturating_sub(4)..].join(" | ")
        }
    }
}

/// The local model of one askdb process. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct LocalModel {
    data_dir: PathBuf,
    state: Mutex<State>,
    /// Serialises starts: a second request waits for the first and sees its outcome.
    start_lock: tokio::sync::Mutex<()>,
    /// Settings for the script beyond the process's environment (tests only).
    script_env: Vec<(String, String)>,
}

/// What a finished start gives: where the model answers.
#[derive(Debug, Clone)]
pub struct ReadyModel {
    pub base_url: String,
    pub model: String,
}

impl LocalModel {
    /// The local model kept in `data_dir` (askdb's data directory).
    pub fn new(data_dir: impl Into<PathBuf>) -> Arc<LocalModel> {
        LocalModel::with_script_env(data_dir, Vec::new())
    }

    /// [`LocalModel::new`] with settings for the script beyond the environment (tests
    /// use it to make a start fail without a download).
    #[doc(hidden)]
    pub fn with_script_env(
        data_dir: impl Into<PathBuf>,
        script_env: Vec<(String, String)>,
    ) -> Arc<LocalModel> {
        Arc::new(LocalModel {
            data_dir: data_dir.into(),
            state: Mutex::new(State {
                phase: Phase::NotStarted,
                phase_began: Instant::now(),
                asked_at: None,
                download_began: None,
                downloaded: None,
                total: None,
                base_url: None,
                model: None,
                started_by_askdb: false,
                error: None,
                last_lines: Vec::new(),
            }),
            start_lock: tokio::sync::Mutex::new(()),
            script_env,
        })
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn status(&self) -> LocalModelStatus {
        self.with_state(|state| state.snapshot())
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        match self.state.lock() {
            Ok(mut state) => f(&mut state),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    fn script(&self, command: &str) -> Command {
        let mut script = Command::new("bash");
        script
            .arg("-c")
            .arg(SCRIPT)
            .arg("local-model.sh")
            .arg(command)
            .env("ASKDB_HOME", &self.data_dir)
            .env("ASKDB_MODEL_OWNER_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .envs(self.script_env.iter().map(|(name, value)| (name, value)))
            .kill_on_drop(false);
        script
    }

    /// Starts the model (installing and downloading what is missing) and waits until it
    /// answers; a start already under way is waited for, a ready model returned at once.
    /// Progress is in [`LocalModel::status`] meanwhile.
    pub async fn start(self: &Arc<Self>) -> Result<ReadyModel, String> {
        let _one_at_a_time = self.start_lock.lock().await;
        if let Some(ready) =
            self.with_state(|state| match (state.phase, &state.base_url, &state.model) {
                (Phase::Ready, Some(base_url), Some(model)) => Some(ReadyModel {
                    base_url: base_url.clone(),
                    model: model.clone(),
                }),
                _ => None,
            })
        {
            return Ok(ready);
        }
        self.with_state(|state| {
            state.asked_at = Some(Instant::now());
            state.download_began = None;
            state.downloaded = None;
            state.total = None;
            state.error = None;
            state.last_lines.clear();
            state.phase = Phase::NotStarted;
            state.enter(Phase::Starting);
        });
        let outcome = self.run_start().await;
        match &outcome {
            Ok(ready) => self.with_state(|state| {
                state.base_url = Some(ready.base_url.clone());
                state.model = Some(ready.model.clone());
                state.enter(Phase::Ready);
            }),
            Err(error) => self.with_state(|state| {
                state.error = Some(error.clone());
                state.enter(Phase::Failed);
            }),
        }
        if outcome.is_ok() {
            self.watch();
        }
        outcome
    }

    async fn run_start(self: &Arc<Self>) -> Result<ReadyModel, String> {
        let mut child = self
            .script("start")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| format!("cannot run bash for scripts/local-model.sh: {error}"))?;
        let mut stdout = child
            .stdout
            .take()
            .ok_or("the start script's output was not captured")?;
        let stderr = child
            .stderr
            .take()
            .ok_or("the start script's messages were not captured")?;
        let reader = {
            let model = Arc::clone(self);
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    model.with_state(|state| {
                        if let Some(progress) = parse_progress(&line) {
                            state.apply(&progress);
                        }
                        state.keep_line(&line);
                    });
                }
            })
        };
        let mut printed = String::new();
        let read = stdout.read_to_string(&mut printed).await;
        let status = child
            .wait()
            .await
            .map_err(|error| format!("the start script could not be waited for: {error}"))?;
        // Every message is read before the outcome is judged.
        let _ = reader.await;
        if let Err(error) = read {
            return Err(format!(
                "the start script's output could not be read: {error}"
            ));
        }
        if !status.success() {
            let fallback = format!("scripts/local-model.sh start failed ({status})");
            return Err(self.with_state(|state| state.failure_text(&fallback)));
        }
        let (base_url, model) = parse_exports(&printed).ok_or_else(|| {
            "scripts/local-model.sh start succeeded but printed no ASKDB_BASE_URL and ASKDB_MODEL"
                .to_string()
        })?;
        Ok(ReadyModel { base_url, model })
    }

    /// Checks every few seconds that the model still runs; when it does not, the status
    /// says so (with the log's last lines) and a new start is possible.
    fn watch(self: &Arc<Self>) {
        let model = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(WATCH_EVERY).await;
                let Some(model) = model.upgrade() else { return };
                if model.status().phase != Phase::Ready {
                    return;
                }
                let alive = model
                    .script("status")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .await
                    .map(|status| status.success())
                    // Cannot tell: say nothing rather than report a death not seen.
                    .unwrap_or(true);
                if !alive {
                    let log = model.log_tail();
                    model.with_state(|state| {
                        state.error = Some(format!("its process is gone; {log}"));
                        state.enter(Phase::Exited);
                    });
                    return;
                }
            }
        });
    }

    /// The model server's last log lines, or where the log is.
    fn log_tail(&self) -> String {
        let log = self.data_dir.join("local-model").join("server.log");
        match std::fs::read_to_string(&log) {
            Ok(text) => {
                let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
                format!(
                    "the last lines of {}: {}",
                    log.display(),
                    lines[lines.len().saturating_sub(3)..].join(" | ")
                )
            }
            Err(_) => format!("no log at {}", log.display()),
        }
    }

    /// Stops the model if askdb started it (a model that was already running is left
    /// alone). Waits for the script, which ends the process within seconds.
    pub async fn stop(&self) {
        if !self.with_state(|state| state.started_by_askdb && state.phase == Phase::Ready) {
            return;
        }
        let stopped = self
            .script("stop")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .await;
        let message = match stopped {
            Ok(output) if output.status.success() => {
                "the local model askdb started is stopped".to_string()
            }
            Ok(output) => format!(
                "stopping the local model failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
            Err(error) => format!("stopping the local model failed: {error}"),
        };
        self.with_state(|state| {
            state.error = Some(message);
            state.enter(Phase::Exited);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_are_read_and_other_lines_are_not() {
        assert_eq!(
            parse_progress("local-model: progress download 5000 1117320768"),
            Some(Progress::Download {
                done: 5000,
                total: 1_117_320_768
            })
        );
        assert_eq!(
            parse_progress("local-model: progress install"),
            Some(Progress::Install)
        );
        assert_eq!(
            parse_progress("local-model: progress verify"),
            Some(Progress::Verify)
        );
        assert_eq!(
            parse_progress("local-model: progress load"),
            Some(Progress::Load)
        );
        assert_eq!(
            parse_progress("local-model: progress ready started"),
            Some(Progress::Ready { started: true })
        );
        assert_eq!(
            parse_progress("local-model: progress ready existing"),
            Some(Progress::Ready { started: false })
        );
        assert_eq!(
            parse_progress("local-model: progress download many 10"),
            None
        );
        assert_eq!(parse_progress("local-model: progress dance"), None);
        assert_eq!(parse_progress("local-model: downloading the model"), None);
    }

    #[test]
    fn the_script_announces_every_phase_this_module_reads() {
        for line in [
            "progress install",
            "progress download 0",
            "progress download \"$MODEL_BYTES\" \"$MODEL_BYTES\"",
            "progress verify",
            "progress load",
            "progress ready started",
            "progress ready existing",
            "ASKDB_MODEL_OWNER_PID",
        ] {
            assert!(
                SCRIPT.contains(line),
                "scripts/local-model.sh lacks {line:?}"
            );
        }
    }

    #[test]
    fn a_download_reports_bytes_rate_and_never_more_than_the_total() {
        let model = LocalModel::new("/nonexistent");
        model.with_state(|state| {
            state.apply(&Progress::Install);
            assert_eq!(state.snapshot().phase, Phase::Installing);
            state.apply(&Progress::Download {
                done: 0,
                total: 1_000_000_000,
            });
            // As if the download had begun two seconds ago.
            state.download_began = Some(Instant::now() - Duration::from_secs(2));
            // Nothing has arrived yet (pip still reads the index): no rate to show.
            assert_eq!(state.snapshot().bytes_per_second, None);
            state.apply(&Progress::Download {
                done: 400_000_000,
                total: 1_000_000_000,
            });
        });
        let status = model.status();
        assert_eq!(status.phase, Phase::Downloading);
        assert_eq!(status.downloaded_bytes, Some(400_000_000));
        let rate = status.bytes_per_second.expect("a rate after two seconds");
        assert!((150e6..=200e6).contains(&rate), "rate {rate}");
        assert!(
            status.message.contains("400.0 MB of 1.0 GB at"),
            "{}",
            status.message
        );
        model.with_state(|state| {
            state.apply(&Progress::Download {
                done: 1_200_000_000,
                total: 1_000_000_000,
            })
        });
        assert_eq!(model.status().downloaded_bytes, Some(1_000_000_000));
        model.with_state(|state| state.apply(&Progress::Load));
        assert!(model.status().message.starts_with("Loading the model"));
    }

    #[test]
    fn a_failure_names_the_scripts_last_words_not_its_progress_lines() {
        let model = LocalModel::new("/nonexistent");
        model.with_state(|state| {
            state.keep_line("local-model: progress install");
            state.keep_line("local-model: Python 3 (python3) not found: install python3");
            assert_eq!(
                state.failure_text("fallback"),
                "local-model: Python 3 (python3) not found: install python3"
            );
        });
    }

    #[test]
    fn exports_give_the_endpoint_and_model() {
        let printed = "export ASKDB_PROVIDER=openai\nexport ASKDB_BASE_URL=http://127.0.0.1:4000/v1\nexport ASKDB_MODEL=qwen\n";
        let (url, model) = parse_exports(printed).expect("both");
        assert_eq!(url, "http://127.0.0.1:4000/v1");
        assert_eq!(model, "qwen");
        assert!(parse_exports("export ASKDB_MODEL=qwen\n").is_none());
    }

    #[test]
    fn bytes_read_as_people_read_them() {
        assert_eq!(human_bytes(900.0), "900 B");
        assert_eq!(human_bytes(412_300_000.0), "412.3 MB");
        assert_eq!(human_bytes(1_117_320_768.0), "1.1 GB");
    }

    /// A model askdb believes ready in `home`, where no server runs.
    fn ready_without_a_process(home: &Path) -> Arc<LocalModel> {
        let model = LocalModel::new(home);
        model.with_state(|state| {
            state.base_url = Some("http://127.0.0.1:9/v1".to_string());
            state.model = Some("qwen".to_string());
            state.apply(&Progress::Ready { started: true });
        });
        model
    }

    #[tokio::test]
    async fn the_watch_notices_a_model_process_that_is_gone() {
        let home = tempfile::tempdir().expect("temp dir");
        let model = ready_without_a_process(home.path());
        model.watch();
        let mut phase = model.status().phase;
        for _ in 0..100 {
            phase = model.status().phase;
            if phase == Phase::Exited {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(phase, Phase::Exited);
        let status = model.status();
        assert!(
            status.message.contains("stopped running"),
            "{}",
            status.message
        );
        assert!(
            status.message.contains("process is gone"),
            "{}",
            status.message
        );
    }

    #[tokio::test]
    async fn stop_ends_only_a_model_askdb_started() {
        let home = tempfile::tempdir().expect("temp dir");
        let started = ready_without_a_process(home.path());
        started.stop().await;
        assert_eq!(started.status().phase, Phase::Exited);
        let found = ready_without_a_process(home.path());
        found.with_state(|state| state.started_by_askdb = false);
        found.stop().await;
        assert_eq!(
            found.status().phase,
            Phase::Ready,
            "a model found running is left alone"
        );
    }

    #[tokio::test]
    async fn a_start_that_cannot_find_python_fails_with_the_scripts_reason() {
        let home = tempfile::tempdir().expect("temp dir");
        // The script's own message when the Python it is told to use is missing.
        let model = LocalModel::with_script_env(
            home.path(),
            vec![(
                "ASKDB_PYTHON".to_string(),
                "/nonexistent/python3".to_string(),
            )],
        );
        let outcome = model.start().await;
        let error = outcome.expect_err("no Python, no model");
        assert!(error.contains("not found"), "{error}");
        let status = model.status();
        assert_eq!(status.phase, Phase::Failed);
        assert!(
            status.message.contains("could not start"),
            "{}",
            status.message
        );
    }
}
