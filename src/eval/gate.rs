//! The evaluation gate used by CI: a finished run passes when (1) every SQLite database
//! it read has the same SHA-256 after the run as before, (2) every statement the run
//! executed still passes the guard (nothing unsafe ran), and (3) its accuracy is not below
//! the committed baseline's minus the tolerance stated in `evals/gate.toml`, a reviewed
//! file. Infrastructure failures fail the gate too: a smoke run that could not reach the
//! model measured nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::database::{open_gate, DatabaseUrl};
use crate::eval::runner::{self, EvalError, RunSummary};
use crate::gate::{Gate, GateOptions};

#[derive(Debug, thiserror::Error)]
pub enum EvalGateError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid: {source}")]
    Config {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error(transparent)]
    Run(#[from] EvalError),
}

/// `evals/gate.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateConfig {
    pub baseline_summary: String,
    pub mode: String,
    pub tolerance_points: f64,
}

/// One check of the gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateCheck {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

pub fn load_config(path: &Path) -> Result<GateConfig, EvalGateError> {
    let text = std::fs::read_to_string(path).map_err(|source| EvalGateError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|source| EvalGateError::Config {
        path: path.to_path_buf(),
        source,
    })
}

/// Applies the gate to a finished run. `project` is the folder the config's
/// `baseline_summary` path is relative to (the repository's root).
pub async fn check_run(
    run: &Path,
    config: &GateConfig,
    project: &Path,
) -> Result<Vec<GateCheck>, EvalGateError> {
    let summary = runner::write_summary(run)?;
    let records = runner::read_records(run)?;
    let mut checks = Vec::new();

    let changed: Vec<String> = summary
        .database_hashes
        .iter()
        .filter(|(_, (before, after))| after.as_ref() != Some(before))
        .map(|(db, _)| db.clone())
        .collect();
    checks.push(GateCheck {
        name: "database unchanged".to_string(),
        passed: changed.is_empty() && !summary.database_hashes.is_empty(),
        detail: if summary.database_hashes.is_empty() {
            "no SQLite database hash was recorded".to_string()
        } else if changed.is_empty() {
            format!(
                "{} database file(s) hash the same before and after",
                summary.database_hashes.len()
            )
        } else {
            format!("changed: {}", changed.join(", "))
        },
    });

    // A statement that cannot be re-checked (its database does not parse or open) counts
    // against the gate: "nothing unsafe ran" must hold for every record, not for the
    // records that happen to be checkable.
    let mut unsafe_ran = Vec::new();
    let mut executed = 0;
    let mut gates: BTreeMap<String, Result<Gate, String>> = BTreeMap::new();
    for record in &records {
        if !gates.contains_key(&record.db) {
            let opened = match record.db.parse::<DatabaseUrl>() {
                Ok(url) => open_gate(&url, GateOptions::default())
                    .await
                    .map_err(|error| error.to_string()),
                Err(error) => Err(error.to_string()),
            };
            gates.insert(record.db.clone(), opened);
        }
        let ran: Vec<&String> = record
            .sql
            .iter()
            .chain(
                record
                    .history
                    .iter()
                    .filter(|attempt| attempt.was_executed())
                    .map(|attempt| &attempt.sql),
            )
            .collect();
        match gates.get(&record.db) {
            Some(Ok(gate)) => {
                for sql in ran {
                    executed += 1;
                    if gate.check(sql).is_err() {
                        unsafe_ran.push(format!("{}: {sql}", record.id));
                    }
                }
            }
            Some(Err(error)) if !ran.is_empty() => {
                unsafe_ran.push(format!(
                    "{}: {} statement(s) could not be re-checked ({error})",
                    record.id,
                    ran.len()
                ));
            }
            Some(Err(_)) => {}
            None => {}
        }
    }
    checks.push(GateCheck {
        name: "every executed statement passes the guard".to_string(),
        passed: unsafe_ran.is_empty(),
        detail: if unsafe_ran.is_empty() {
            format!("{executed} executed statement(s) re-checked")
        } else {
            unsafe_ran.join("; ")
        },
    });

    let mode = summary.modes.get(&config.mode);
    let infrastructure = mode.map(|m| m.infrastructure_failures).unwrap_or(0);
    checks.push(GateCheck {
        name: "model reachable".to_string(),
        passed: mode.is_some() && infrastructure == 0,
        detail: format!(
            "{infrastructure} infrastructure failure(s) in {} mode",
            config.mode
        ),
    });

    let baseline_path = project.join(&config.baseline_summary);
    let baseline: Option<RunSummary> = std::fs::read_to_string(&baseline_path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    let accuracy = mode.and_then(|m| m.accuracy.rate);
    let committed = baseline
        .as_ref()
        .and_then(|b| b.modes.get(&config.mode))
        .and_then(|m| m.accuracy.rate);
    let (passed, detail) = match (accuracy, committed) {
        (Some(accuracy), Some(committed)) => {
            let floor = committed - config.tolerance_points / 100.0;
            (
                accuracy >= floor,
                format!(
                    "{:.1}% against a floor of {:.1}% (committed {:.1}% minus {} points)",
                    accuracy * 100.0,
                    floor * 100.0,
                    committed * 100.0,
                    config.tolerance_points
                ),
            )
        }
        (None, _) => (false, "the run has no scored question".to_string()),
        (_, None) => (
            false,
            format!("no committed baseline at {}", baseline_path.display()),
        ),
    };
    checks.push(GateCheck {
        name: "accuracy not below the committed baseline minus the tolerance".to_string(),
        passed,
        detail,
    });
    Ok(checks)
}
