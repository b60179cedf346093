//! A run folder's files: the manifest written and read back, records appended one line
//! each and read back (a record cut short by a crash is dropped), the warm-ups of the
//! prompt prefixes, and the hashes of the SQLite files a run asked, so a report says
//! when a database changed under it. A pool's folder is kept the same way.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::agent::{Agent, Mode};
use crate::database::DatabaseUrl;

use super::{write_error, EvalError, EvalItem, Manifest, QuestionRecord};

/// The folder a set's runs go in, under the runs directory: the set's name, or for a
/// custom set (`file:PATH`) the file's stem, so `--questions /tmp/mine.jsonl` runs in
/// `evals/runs/mine/...` rather than in folders named after every part of the path.
pub(crate) fn run_folder_name(set: &str) -> String {
    match set.strip_prefix("file:") {
        Some(path) => Path::new(path)
            .file_stem()
            .and_then(|stem| stem.to_str())
            .filter(|stem| !stem.is_empty())
            .unwrap_or("questions")
            .to_string(),
        None => set.to_string(),
    }
}

/// A file of the folder, None when the run has not written it yet.
fn read_if_present(path: &Path) -> Result<Option<String>, EvalError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(EvalError::Read {
            path: path.display().to_string(),
            error,
        }),
    }
}

/// Cuts a record that a crash left half-written off the end of the file, so records
/// appended on resume start on a line of their own.
fn drop_partial_last_line(path: &Path) -> Result<(), EvalError> {
    let Some(text) = read_if_present(path)? else {
        return Ok(());
    };
    if text.is_empty() || text.ends_with('\n') {
        return Ok(());
    }
    let keep = text.rfind('\n').map_or(0, |index| index + 1);
    std::fs::write(path, &text[..keep]).map_err(|error| write_error(path, error))
}

/// Creates a run's folder with its `manifest.json`.
pub(crate) fn create_folder<T: Serialize>(dir: &Path, manifest: &T) -> Result<(), EvalError> {
    std::fs::create_dir_all(dir).map_err(|error| write_error(dir, error))?;
    let path = dir.join("manifest.json");
    let text = serde_json::to_string_pretty(manifest)
        .map_err(|error| EvalError::Data(error.to_string()))?;
    std::fs::write(&path, text).map_err(|error| write_error(&path, error))
}

/// A folder's `manifest.json`; a folder without one is not a run.
pub(crate) fn read_manifest_of<T: DeserializeOwned>(dir: &Path) -> Result<T, EvalError> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|_| EvalError::NotARun(dir.display().to_string()))?;
    serde_json::from_str(&text)
        .map_err(|error| EvalError::Data(format!("{}: {error}", path.display())))
}

pub fn read_manifest(run: &Path) -> Result<Manifest, EvalError> {
    read_manifest_of(run)
}

/// Opens a folder's record file for appending, after cutting off a record a crash left
/// half-written, so that what was done is read back before anything is added.
pub(crate) fn open_records(path: &Path) -> Result<std::fs::File, EvalError> {
    drop_partial_last_line(path)?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| write_error(path, error))
}

/// Appends one record as a line, flushed at once: a crash loses at most the question in
/// flight.
pub(crate) fn append_record<T: Serialize>(
    file: &mut std::fs::File,
    path: &Path,
    record: &T,
) -> Result<(), EvalError> {
    let line = serde_json::to_string(record).map_err(|error| EvalError::Data(error.to_string()))?;
    writeln!(file, "{line}").map_err(|error| write_error(path, error))?;
    file.flush().map_err(|error| write_error(path, error))
}

/// The records of a JSON-lines file; none when it does not exist yet.
pub(crate) fn read_lines<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, EvalError> {
    let Some(text) = read_if_present(path)? else {
        return Ok(Vec::new());
    };
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    let mut records = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        match serde_json::from_str::<T>(line) {
            Ok(record) => records.push(record),
            // The last line cut short by a crash or Ctrl-C: its question is asked again
            // on resume. A bad line anywhere else is damage, and is reported.
            Err(_) if index + 1 == lines.len() && !text.ends_with('\n') => {}
            Err(error) => {
                return Err(EvalError::Data(format!(
                    "{}, record {}: {error}",
                    path.display(),
                    index + 1
                )))
            }
        }
    }
    Ok(records)
}

/// Reads the records of a run folder.
pub fn read_records(run: &Path) -> Result<Vec<QuestionRecord>, EvalError> {
    read_lines(&run.join("questions.jsonl"))
}

/// One warm-up of a prompt prefix, as `warm-ups.jsonl` of a run folder records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmUp {
    pub db: String,
    /// `agent` (the agent's and the baseline's prefix) or `plain`.
    pub prefix: String,
    pub ms: u64,
    /// `restored` (from the copy the server saved earlier), `read` or `read, saved`;
    /// `linked` when the agent's prompt differs per question and nothing was read.
    #[serde(default)]
    pub how: String,
    /// Why it failed, when it did (the questions still run, on a cold prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Reads each prompt prefix a run's modes use into the model server's cache before the
/// database's first question, as `askdb serve` does when it opens a database, so a
/// question's latency is the wait of a user of a running server, not of the first one
/// after a start. Each warm-up's time is recorded in `warm-ups.jsonl` and reported.
pub(crate) async fn warm_up(
    agent: &Agent,
    db: &str,
    modes: &[Mode],
    run_dir: &Path,
) -> Result<(), EvalError> {
    fn how(warmed: Option<crate::llm::Warmed>) -> String {
        match warmed {
            None => "linked",
            Some(crate::llm::Warmed::Restored) => "restored",
            Some(crate::llm::Warmed::Read { saved: true }) => "read, saved",
            Some(crate::llm::Warmed::Read { saved: false }) => "read",
        }
        .to_string()
    }
    let mut warm_ups = Vec::new();
    if modes.iter().any(|mode| *mode != Mode::Plain) {
        let started = Instant::now();
        let outcome = agent.warm_up().await.map(how);
        warm_ups.push(("agent", started.elapsed(), outcome));
    }
    if modes.contains(&Mode::Plain) {
        let started = Instant::now();
        let outcome = agent.warm_up_plain().await.map(|warmed| how(Some(warmed)));
        warm_ups.push(("plain", started.elapsed(), outcome));
    }
    let path = run_dir.join("warm-ups.jsonl");
    let mut file = open_records(&path)?;
    for (prefix, took, outcome) in warm_ups {
        let (how, error) = match outcome {
            Ok(how) => (how, None),
            Err(error) => (String::new(), Some(error.to_string())),
        };
        let record = WarmUp {
            db: db.to_string(),
            prefix: prefix.to_string(),
            ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            how,
            error,
        };
        append_record(&mut file, &path, &record)?;
    }
    Ok(())
}

/// The warm-ups a run folder recorded (none for runs made before they were).
pub fn read_warm_ups(run_dir: &Path) -> Vec<WarmUp> {
    std::fs::read_to_string(run_dir.join("warm-ups.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The SQLite file behind a database URL, if it is one (the demo resolves to its file).
fn sqlite_file(db: &str) -> Option<PathBuf> {
    db.parse::<DatabaseUrl>().ok()?.sqlite_file()
}

pub(crate) fn sqlite_file_hash(db: &str) -> Option<String> {
    use sha2::{Digest, Sha256};
    let path = sqlite_file(db)?;
    let bytes = std::fs::read(path).ok()?;
    Some(format!("{:x}", Sha256::digest(bytes)))
}

pub(super) fn database_hashes(items: &[EvalItem]) -> BTreeMap<String, String> {
    let mut hashes = BTreeMap::new();
    for item in items {
        if hashes.contains_key(&item.db) {
            continue;
        }
        if item.db == "demo" {
            // Build the demo now, so the hash taken is the file the run will read.
            let _ = crate::demo::ensure_demo_sqlite();
        }
        if let Some(hash) = sqlite_file_hash(&item.db) {
            hashes.insert(item.db.clone(), hash);
        }
    }
    hashes
}
