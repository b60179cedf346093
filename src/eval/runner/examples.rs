//! Verified examples in an evaluation (`askdb eval run --examples leave-one-out`): each
//! question is asked with the other questions of its database, and their gold SQL, as
//! its verified examples, kept in memory. Examples whose gold is the held-out
//! question's (after the guard's rendering) are left out, so a copy is not counted as
//! learning. The examples pass the gate like any example; a gold the guard refuses is
//! never offered. What the examples did is counted in the summary ([`ExampleFigures`]),
//! and `askdb eval compare` pairs a run with examples against one without
//! ([`compare_runs`]).

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{
    read_records, EvalError, EvalItem, QuestionRecord, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED,
};
use crate::agent::Mode;
use crate::eval::metrics::{self, PairedDifference, QuestionOutcome};
use crate::examples::{self, CheckedExample, Draft, MemoryExampleStore};
use crate::gate::Gate;

/// Where a run's questions find verified examples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExampleSource {
    /// None: the agent as a database nobody verified anything on.
    #[default]
    None,
    /// The other questions of the held-out one's database.
    LeaveOneOut,
}

impl ExampleSource {
    pub const ALL: [ExampleSource; 2] = [ExampleSource::None, ExampleSource::LeaveOneOut];

    pub fn as_str(self) -> &'static str {
        match self {
            ExampleSource::None => "none",
            ExampleSource::LeaveOneOut => "leave-one-out",
        }
    }

    pub fn is_none(&self) -> bool {
        *self == ExampleSource::None
    }
}

/// One database's questions as checked examples, and the store its agent reads.
pub struct LeaveOneOut {
    store: Arc<MemoryExampleStore>,
    database: String,
    /// (item id, the example its gold makes).
    pool: Vec<(String, CheckedExample)>,
}

impl LeaveOneOut {
    /// Checks the first gold of every item of the database behind `gate` as an example.
    pub async fn prepare(gate: &Gate, items: &[&EvalItem]) -> LeaveOneOut {
        let mut pool = Vec::new();
        for item in items {
            let Some(gold) = item.golds.first() else {
                continue;
            };
            let draft = Draft {
                question: item.question.clone(),
                sql: gold.clone(),
                verified_by: "gold".to_string(),
                notes: None,
            };
            if let Ok(checked) = examples::prepare(gate, &draft).await {
                pool.push((item.id.clone(), checked));
            }
        }
        LeaveOneOut {
            store: Arc::new(MemoryExampleStore::default()),
            database: examples::database_identity(gate.label()),
            pool,
        }
    }

    /// The store the agent of this database reads.
    pub fn store(&self) -> Arc<MemoryExampleStore> {
        Arc::clone(&self.store)
    }

    /// Makes the store hold every other question's example but copies of `held`'s
    /// gold; how many.
    pub async fn offer(&self, gate: &Gate, held: &EvalItem) -> Result<usize, EvalError> {
        let held_sql = self
            .pool
            .iter()
            .find(|(id, _)| *id == held.id)
            .map(|(_, checked)| checked.example().sql.clone());
        let offered: Vec<CheckedExample> = self
            .pool
            .iter()
            .filter(|(id, checked)| {
                *id != held.id && Some(&checked.example().sql) != held_sql.as_ref()
            })
            .map(|(_, checked)| checked.clone())
            .collect();
        self.store.clear(&self.database);
        let saved = examples::save_checked(gate, self.store.as_ref(), offered)
            .await
            .map_err(|error| EvalError::Data(format!("leave-one-out examples: {error}")))?;
        Ok(saved.len())
    }
}

/// What verified examples did in a run's agent mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExampleFigures {
    pub source: ExampleSource,
    /// Agent-mode questions asked.
    pub asked: usize,
    /// Of those, asked with at least one example (shown or re-run).
    pub with_examples: usize,
    /// Answered by re-running a verified example's SQL, without the model.
    pub reruns: usize,
    /// Of those, right.
    pub reruns_right: usize,
    /// The median latency of a re-run answer, in ms (the database's time included).
    pub rerun_median_ms: Option<u64>,
}

/// The example figures of a run's agent records.
pub fn example_figures(source: ExampleSource, records: &[QuestionRecord]) -> ExampleFigures {
    let agent: Vec<&QuestionRecord> = records
        .iter()
        .filter(|record| record.mode == Mode::Agent)
        .collect();
    let reruns: Vec<&&QuestionRecord> = agent
        .iter()
        .filter(|record| record.answered_from_example.is_some())
        .collect();
    let mut latencies: Vec<u64> = reruns.iter().map(|record| record.latency_ms).collect();
    latencies.sort_unstable();
    ExampleFigures {
        source,
        asked: agent.len(),
        with_examples: agent
            .iter()
            .filter(|record| !record.examples.is_empty())
            .count(),
        reruns: reruns.len(),
        reruns_right: reruns
            .iter()
            .filter(|record| metrics::is_success(&record.outcome()))
            .count(),
        rerun_median_ms: latencies.get(latencies.len() / 2).copied(),
    }
}

/// One mode of a run (the agent unless asked otherwise) against the same mode of
/// another, on the questions both asked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunComparison {
    pub run: String,
    pub other: String,
    /// The mode whose records were paired.
    pub mode: Mode,
    /// How each run was asked (settings, model, when), so a committed comparison says
    /// what it compared without its run folders.
    pub run_manifest: super::Manifest,
    pub other_manifest: super::Manifest,
    /// `agent_*` fields are `run`'s `mode`, `baseline_*` fields `other`'s.
    pub paired: PairedDifference,
    /// The questions only `run` got right, and those only `other` did, by id:
    /// what a later look at the differences starts from once the run folders are gone.
    pub run_only_right: Vec<String>,
    pub other_only_right: Vec<String>,
}

/// Pairs the records of one mode of two run folders by question id: the agent's, or
/// the first attempt's alone (`Mode::Baseline`), whose greedy reply makes two runs of
/// the same code agree question by question, so a knob of the first attempt is read
/// without the sampled rounds' noise.
pub fn compare_runs(run: &Path, other: &Path, mode: Mode) -> Result<RunComparison, EvalError> {
    let outcomes = |dir: &Path| -> Result<Vec<QuestionOutcome>, EvalError> {
        Ok(read_records(dir)?
            .iter()
            .filter(|record| record.mode == mode)
            .map(QuestionRecord::outcome)
            .collect())
    };
    let (ours, theirs) = (outcomes(run)?, outcomes(other)?);
    let (run_only_right, other_only_right) = metrics::only_wins(&ours, &theirs);
    Ok(RunComparison {
        run: run.display().to_string(),
        other: other.display().to_string(),
        mode,
        run_manifest: super::read_manifest(run)?,
        other_manifest: super::read_manifest(other)?,
        paired: metrics::paired_difference(&ours, &theirs, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED),
        run_only_right,
        other_only_right,
    })
}

fn share(value: Option<f64>) -> String {
    value.map_or_else(
        || "n/a".to_string(),
        |v| format!("{:+.1} points", 100.0 * v),
    )
}

/// A comparison as text.
pub fn render_comparison(comparison: &RunComparison) -> String {
    let paired = &comparison.paired;
    let interval = paired.bootstrap95.as_ref().map_or_else(
        || "n/a".to_string(),
        |interval| {
            format!(
                "[{}, {}]",
                share(Some(interval.lower)),
                share(Some(interval.upper))
            )
        },
    );
    format!(
        "{} against {}: {} questions paired ({} unpaired, {} left out for infrastructure)\n\
         {} accuracy {} against {}; difference {} (95% bootstrap {interval}); wins {} to {}\n",
        comparison.run,
        comparison.other,
        paired.paired,
        paired.unpaired,
        paired.excluded_infrastructure,
        comparison.mode,
        paired
            .agent_accuracy
            .map_or_else(|| "n/a".to_string(), |v| format!("{:.1}%", 100.0 * v)),
        paired
            .baseline_accuracy
            .map_or_else(|| "n/a".to_string(), |v| format!("{:.1}%", 100.0 * v)),
        share(paired.mean_difference),
        paired.agent_only_wins,
        paired.baseline_only_wins,
    )
}
