//! Shared helpers for integration tests that need the real local model: find Python,
//! start the server with the repository's script (or reuse a running one), read its
//! `export` lines, and stop it afterwards only if this test started it.

#![allow(dead_code)]

pub mod ci;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join("local-model.sh")
}

pub use ci::in_ci;

pub fn python() -> String {
    std::env::var("ASKDB_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

pub fn python_available() -> bool {
    Command::new(python())
        .args([
            "-c",
            "import venv, sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)",
        ])
        .output()
        .is_ok_and(|output| output.status.success())
}

pub fn run_script(command: &str) -> std::process::Output {
    Command::new("bash")
        .arg(script())
        .arg(command)
        // Generous: the machine is shared and slow, and the first start downloads the model.
        .env("ASKDB_MODEL_START_TIMEOUT", "900")
        .output()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", script().display()))
}

/// Stops the server when the test ends, pass or fail, unless it was running before.
pub struct StopWhenDone {
    stop: bool,
}

impl StopWhenDone {
    pub fn new(stop: bool) -> Self {
        StopWhenDone { stop }
    }
}

impl Drop for StopWhenDone {
    fn drop(&mut self) {
        if self.stop {
            let output = run_script("stop");
            eprintln!(
                "local model: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
    }
}

/// `export NAME=value` lines as a map.
pub fn exports(stdout: &str) -> HashMap<String, String> {
    stdout
        .lines()
        .filter_map(|line| line.trim().strip_prefix("export "))
        .filter_map(|assignment| assignment.split_once('='))
        .map(|(name, value)| (name.to_string(), value.trim_matches('"').to_string()))
        .collect()
}

/// Starts (or reuses) the local model. None means "skip": no usable Python outside CI
/// (said on stderr). In CI a missing Python or a failed start fails the test.
pub fn local_model(test: &str) -> Option<(HashMap<String, String>, StopWhenDone)> {
    if !ci::wants_external(test, "the local model (a 1.1 GB download the first time)") {
        return None;
    }
    if !python_available() {
        assert!(
            !in_ci(),
            "CI: {test} needs Python 3.10+ with venv ({} not usable)",
            python()
        );
        eprintln!(
            "SKIPPED {test}: no usable Python 3.10+ ({}); install python3 with venv and pip to run it",
            python()
        );
        return None;
    }
    let was_running = run_script("status").status.success();
    let stop = StopWhenDone { stop: !was_running };
    let start = run_script("start");
    let stderr = String::from_utf8_lossy(&start.stderr).to_string();
    eprintln!("{stderr}");
    assert!(
        start.status.success(),
        "the local model did not start ({}): {stderr}",
        start.status
    );
    let mut variables = exports(&String::from_utf8_lossy(&start.stdout));
    assert_eq!(
        variables.get("ASKDB_PROVIDER").map(String::as_str),
        Some("openai")
    );
    variables.insert("ASKDB_MODEL_TIMEOUT_SECS".into(), "600".into());
    variables.insert("ASKDB_MODEL_MAX_ATTEMPTS".into(), "2".into());
    Some((variables, stop))
}
