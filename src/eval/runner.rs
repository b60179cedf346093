//! The evaluation runner: asks every question of a set through the agent (agent mode,
//! baseline mode or both), grades each answer by execution against the gold query on
//! the same read-only gate, and writes the run under its own timestamped folder:
//!
//! - `manifest.json`: set, modes, model, settings, start time;
//! - `questions.jsonl`: one record per question and mode, appended as soon as it is
//!   graded (every attempt's SQL, error and tokens), so a crash or Ctrl-C loses at most
//!   the question in flight and `--resume` carries on;
//! - `summary.json` and `report.md`: the metrics per mode and the paired difference.
//!
//! Grading runs gold and prediction on the same gate with a row cap far above every
//! result size, so the cap never decides a grade. Infrastructure failures (the model
//! could not be asked) are recorded apart and never scored as wrong.

mod examples;
mod folder;
mod process;
mod report;
mod sets;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::agent::strategy::Strategy;
use crate::agent::{Agent, AgentError, AgentResult, AskOptions, Decision, FailedAttempt, Mode};
use crate::calendar::utc_now;
use crate::compare::{gold_orders, results_match, CompareOptions, ResultSet, Verdict};
use crate::database::{open_gate, DatabaseUrl};
use crate::eval::metrics::{
    self, Expected, PairedDifference, QuestionOutcome, RunOutcome, Summary,
};
use crate::gate::{Gate, GateOptions, QueryOutcome};
use crate::linking::SelectOptions;
use crate::llm::{ModelClient, ResponseCache};
use crate::telemetry::Telemetry;

pub use examples::{compare_runs, render_comparison, ExampleFigures, ExampleSource, RunComparison};
use folder::database_hashes;
pub(crate) use folder::warm_up;
pub(crate) use folder::{
    append_record, create_folder, open_records, read_lines, read_manifest_of, run_folder_name,
    sqlite_file_hash,
};
pub use folder::{read_manifest, read_records, read_warm_ups, WarmUp};
pub use process::AskPath;
pub use report::{rate_text, render_report, strategy_text};
pub use sets::{load_set, seeded_sample, Sampling};

/// The row cap of evaluation gates: far above any benchmark result, so a forced LIMIT
/// never decides a grade.
pub const EVAL_ROW_CAP: u64 = 100_000;

/// Bootstrap resamples and seed of the paired difference.
pub const BOOTSTRAP_RESAMPLES: u32 = 2_000;
pub const BOOTSTRAP_SEED: u64 = 20_261_129;

/// The sets the runner knows.
pub const SETS: [&str; 4] = ["demo", "chinook", "spider", "defog"];

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("unknown set {0:?}: use demo, chinook, spider, defog or file:PATH")]
    UnknownSet(String),
    #[error("{0}")]
    Data(String),
    #[error("cannot write {path}: {error}")]
    Write { path: String, error: std::io::Error },
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("cannot open the database for {db}: {error}")]
    Database { db: String, error: String },
    #[error("the run folder {0} holds no manifest.json: is it a run?")]
    NotARun(String),
}

pub(crate) fn write_error(path: &Path, error: std::io::Error) -> EvalError {
    EvalError::Write {
        path: path.display().to_string(),
        error,
    }
}

/// One question to ask, with where to ask it and what counts as right.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalItem {
    pub id: String,
    pub question: String,
    pub category: String,
    pub expected: Expected,
    /// Alternative gold queries in the database's dialect; any one matching is right.
    pub golds: Vec<String>,
    /// The question asks for an order the comparison must respect.
    pub ordered: bool,
    /// The database, as a URL askdb accepts.
    pub db: String,
}

/// How a run was set up; written to the manifest and the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub set: String,
    pub modes: Vec<Mode>,
    pub limit: Option<usize>,
    pub sample: Option<usize>,
    pub seed: u64,
    /// Questions of the seeded shuffle skipped before the sample is taken.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sample_offset: usize,
    pub db: Option<String>,
    pub row_cap: u64,
    pub budget_tokens: usize,
    pub k: usize,
    pub temperature: f32,
    pub explain: bool,
    pub max_attempts: u32,
    /// With both modes, the baseline's one call replays the agent's first reply from a
    /// cache in the run folder, so the two modes start from the same reply and differ
    /// by the loop alone (a local server's prompt cache can otherwise change a reply to
    /// an identical request). The baseline's latency is then not measured.
    #[serde(default)]
    pub shared_first_reply: bool,
    /// How the agent asked (`reply=sql,n=5,...`, see `agent::strategy`); empty in runs
    /// made before strategies were recorded (the JSON action reply, one candidate).
    #[serde(default)]
    pub strategy: String,
    /// Where questions find verified examples (none in runs made before examples).
    #[serde(default, skip_serializing_if = "ExampleSource::is_none")]
    pub examples: ExampleSource,
    /// Where the agent's questions were asked: inside the harness, or one `askdb ask`
    /// process each (runs before this setting were asked in the harness).
    #[serde(default, skip_serializing_if = "AskPath::is_harness")]
    pub ask_path: AskPath,
}

/// The model a run used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub provider: String,
    pub model: String,
    pub endpoint: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub settings: RunSettings,
    /// SHA-256 of each SQLite database file when the run started.
    #[serde(default)]
    pub database_hashes: BTreeMap<String, String>,
    pub model: ModelInfo,
    pub started_at: String,
    pub askdb_version: String,
    pub items: usize,
}

/// One graded question in one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionRecord {
    pub id: String,
    pub mode: Mode,
    pub question: String,
    pub category: String,
    pub expected: Expected,
    pub db: String,
    /// The question asks for an order the comparison must respect.
    #[serde(default)]
    pub ordered: bool,
    pub decision: RunOutcome,
    pub correct: bool,
    /// Why the answer did not match the gold, when it did not.
    pub verdict: Option<String>,
    pub first_attempt_correct: Option<bool>,
    pub first_attempt_failed: bool,
    pub attempts: u32,
    pub sql: Option<String>,
    pub first_sql: Option<String>,
    pub history: Vec<FailedAttempt>,
    pub reason: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub latency_ms: u64,
    /// The infrastructure error, when the model could not be asked.
    pub error: Option<String>,
    pub golds: Vec<String>,
    /// The question's trace, when the run exported traces (its verdict is on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The rule checks the answer was shown with (`[]`: it passed them); absent in
    /// records written before the checks existed. Not part of the grade: what
    /// `askdb eval flags` counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<crate::agent::plausibility::Finding>>,
    /// The verified examples the question used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<i64>,
    /// Their retrieval scores, in the same order: what a floor on them would have kept
    /// (absent in records written before they were kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub example_scores: Vec<f64>,
    /// The verified example whose SQL answered without the model, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_from_example: Option<i64>,
    /// The model server's clock summed over the question's calls, where it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<crate::llm::ServerTimings>,
}

impl QuestionRecord {
    pub fn outcome(&self) -> QuestionOutcome {
        QuestionOutcome {
            id: self.id.clone(),
            category: self.category.clone(),
            expected: self.expected,
            decision: self.decision,
            correct: self.correct,
            first_attempt_correct: self.first_attempt_correct,
            first_attempt_failed: self.first_attempt_failed,
            attempts: self.attempts,
            latency_ms: self.latency_ms,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cost_usd: self.cost_usd,
            server_timings: self.server_timings,
        }
    }
}

/// What `summary.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub set: String,
    pub generated_at: String,
    pub askdb_version: String,
    pub model: ModelInfo,
    pub settings: RunSettings,
    pub run: String,
    /// Questions the run was set up to ask; fewer were asked when it was interrupted.
    #[serde(default)]
    pub items: usize,
    pub modes: BTreeMap<String, Summary>,
    /// Agent minus baseline on the same questions, when both modes ran.
    pub paired: Option<PairedDifference>,
    /// Agent minus plain on the same questions, when both ran (its `baseline_*` fields
    /// are the plain prompt's).
    #[serde(default)]
    pub paired_plain: Option<PairedDifference>,
    /// Failures of the agent mode, by the error type of their last attempt.
    pub agent_failures_by_type: BTreeMap<String, u64>,
    /// SHA-256 of each SQLite database file at the start and at the end of the run:
    /// equal pairs show that nothing the run did changed the database.
    #[serde(default)]
    pub database_hashes: BTreeMap<String, (String, Option<String>)>,
    /// How the rule checks of an answer did, by mode: wrong answers flagged, right ones
    /// wrongly flagged ([`crate::eval::flags`]); empty for runs made before the checks.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flags: BTreeMap<String, crate::eval::flags::FlagFigures>,
    /// The prompt prefixes read into the model server's cache before each database's
    /// first question (not part of any question's latency); None for runs made before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_ups: Option<WarmUpFigures>,
    /// What verified examples did, when the run offered them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examples: Option<ExampleFigures>,
}

/// The warm-ups of a run, in sum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmUpFigures {
    pub prefixes: usize,
    /// Restored from the model server's saved copies instead of read.
    #[serde(default)]
    pub restored: usize,
    pub failed: usize,
    pub total_ms: u64,
    pub longest_ms: u64,
}

impl WarmUpFigures {
    fn of(warm_ups: &[WarmUp]) -> Option<WarmUpFigures> {
        (!warm_ups.is_empty()).then(|| WarmUpFigures {
            prefixes: warm_ups.len(),
            restored: warm_ups
                .iter()
                .filter(|warm| warm.how == "restored")
                .count(),
            failed: warm_ups.iter().filter(|warm| warm.error.is_some()).count(),
            total_ms: warm_ups.iter().map(|warm| warm.ms).sum(),
            longest_ms: warm_ups.iter().map(|warm| warm.ms).max().unwrap_or(0),
        })
    }
}

fn is_zero(value: &usize) -> bool {
    *value == 0
}

/// Grades predicted rows against every gold alternative on the same gate.
pub(crate) async fn grade_rows(
    gate: &Gate,
    item: &EvalItem,
    predicted: &ResultSet,
    gold_cache: &mut HashMap<String, Option<ResultSet>>,
) -> (bool, Option<String>) {
    let mut last_reason = None;
    for gold in &item.golds {
        if !gold_cache.contains_key(gold) {
            let rows = match gate.run_query(gold).await {
                QueryOutcome::Rows(result) => Some(ResultSet::from(&result)),
                QueryOutcome::Failed(_) => None,
            };
            gold_cache.insert(gold.clone(), rows);
        }
        let Some(Some(gold_rows)) = gold_cache.get(gold) else {
            last_reason = Some("the gold query itself failed".to_string());
            continue;
        };
        let options = CompareOptions {
            ordered: item.ordered || gold_orders(gold, gate.dialect()),
            ..CompareOptions::default()
        };
        match results_match(gold_rows, predicted, &options) {
            Verdict::Match => return (true, None),
            mismatch => last_reason = Some(mismatch.to_string()),
        }
    }
    (false, last_reason)
}

/// Grades one agent result.
async fn grade(
    gate: &Gate,
    item: &EvalItem,
    result: &AgentResult,
    gold_cache: &mut HashMap<String, Option<ResultSet>>,
) -> (bool, Option<String>, Option<bool>) {
    let mut correct = false;
    let mut verdict = None;
    if result.decision == Decision::Answer && item.expected == Expected::Answer {
        let predicted = ResultSet {
            columns: result.columns.clone(),
            rows: result.rows.clone(),
        };
        let (matched, reason) = grade_rows(gate, item, &predicted, gold_cache).await;
        correct = matched;
        verdict = reason;
    }
    let first_correct = match (result.first_attempt_ok, &result.first_sql) {
        (Some(true), Some(first)) if Some(first) == result.sql.as_ref() => Some(correct),
        (Some(true), Some(first)) if item.expected == Expected::Answer => {
            match gate.run_query(first).await {
                QueryOutcome::Rows(rows) => {
                    let predicted = ResultSet::from(&rows);
                    Some(grade_rows(gate, item, &predicted, gold_cache).await.0)
                }
                QueryOutcome::Failed(_) => Some(false),
            }
        }
        (Some(false), _) => Some(false),
        _ => None,
    };
    (correct, verdict, first_correct)
}

fn record_of(
    item: &EvalItem,
    mode: Mode,
    result: &AgentResult,
    correct: bool,
    verdict: Option<String>,
    first_correct: Option<bool>,
) -> QuestionRecord {
    QuestionRecord {
        correct,
        verdict,
        first_attempt_correct: first_correct,
        first_attempt_failed: result.first_attempt_ok == Some(false),
        attempts: result.attempts,
        sql: result.sql.clone(),
        first_sql: result.first_sql.clone(),
        history: result.history.clone(),
        reason: result.reason.clone(),
        input_tokens: result.tokens.input,
        output_tokens: result.tokens.output,
        cost_usd: result.cost_usd,
        latency_ms: result.latency_ms,
        trace_id: result.trace_id.clone(),
        warnings: Some(result.warnings.clone()),
        examples: result.examples.iter().map(|example| example.id).collect(),
        example_scores: result
            .examples
            .iter()
            .map(|example| example.score)
            .collect(),
        answered_from_example: result.answered_from_example,
        server_timings: result.server_timings(),
        ..error_record(item, mode, RunOutcome::Decided(result.decision), None, 0)
    }
}

/// Why a graded question counts as correct or not, in a sentence a trace backend can
/// filter on: the rows' verdict, or the decision against the expected one.
fn verdict_reason(record: &QuestionRecord, success: bool) -> Option<String> {
    let decided = record.decision.as_str();
    let expected = serde_json::to_value(record.expected)
        .ok()
        .and_then(|value| value.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{:?}", record.expected));
    match (&record.verdict, success) {
        (Some(verdict), false) => Some(format!("incorrect: {verdict}")),
        (None, false)
            if record.expected == Expected::Answer && record.decision == Decision::Answer =>
        {
            Some("incorrect: the rows differ from the gold query's".to_string())
        }
        (None, false) => Some(format!(
            "incorrect: expected {expected}, the agent decided {decided}"
        )),
        (_, true) if record.expected == Expected::Answer => {
            Some("correct: the rows match the gold query's".to_string())
        }
        (_, true) => Some(format!(
            "correct: expected {expected}, the agent decided {decided}"
        )),
    }
}

/// The record of a question with nothing but its decision: the base of every record,
/// and on its own a question that ended in an error instead of a decision (`decision`
/// says whose failure it was: the model's service, or askdb's own).
fn error_record(
    item: &EvalItem,
    mode: Mode,
    decision: RunOutcome,
    error: Option<&str>,
    latency_ms: u64,
) -> QuestionRecord {
    QuestionRecord {
        id: item.id.clone(),
        mode,
        question: item.question.clone(),
        category: item.category.clone(),
        expected: item.expected,
        db: item.db.clone(),
        ordered: item.ordered,
        decision,
        correct: false,
        verdict: None,
        first_attempt_correct: None,
        first_attempt_failed: false,
        attempts: 0,
        sql: None,
        first_sql: None,
        history: Vec::new(),
        reason: None,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: 0.0,
        latency_ms,
        error: error.map(str::to_string),
        golds: item.golds.clone(),
        trace_id: None,
        warnings: None,
        examples: Vec::new(),
        example_scores: Vec::new(),
        answered_from_example: None,
        server_timings: None,
    }
}

/// Who asks a question: the harness's agent, a process, or a running server.
enum Asker<'a> {
    Harness,
    Process(&'a Path),
    Serve(&'a process::ServeProcess),
}

/// Why a question gave no answer record: the agent's error in the harness, or a
/// question's `askdb ask` process that ended without one.
enum AskFailure {
    Agent(AgentError),
    Process(process::ProcessFailure),
}

/// Progress on stderr: a bar, the count, the last question's outcome.
fn progress(done: usize, total: usize, last: &str) {
    let width = 30;
    let filled = (done * width)
        .checked_div(total)
        .unwrap_or(width)
        .min(width);
    eprint!(
        "\r[{}{}] {done}/{total} {last:<60.60}",
        "#".repeat(filled),
        "-".repeat(width - filled)
    );
    let _ = std::io::stderr().flush();
}

/// Runs (or resumes) a set. Returns the run folder. Each question is traced with
/// `telemetry`, its verdict (correct or not, and why) on its root span; evaluation runs
/// never write the query log.
pub async fn run(
    settings: RunSettings,
    client: ModelClient,
    runs_root: &Path,
    resume: Option<PathBuf>,
    telemetry: &Telemetry,
) -> Result<PathBuf, EvalError> {
    // A resumed run keeps the settings it started with.
    let mut settings = match &resume {
        Some(dir) => read_manifest(dir)?.settings,
        None => settings,
    };
    // Written out in full, so every path (the harness, `askdb ask` processes) asks with
    // the strategy the run recorded, not today's defaults.
    if !settings.strategy.is_empty() {
        settings.strategy = Strategy::recorded(&settings.strategy)
            .map_err(|error| EvalError::Data(error.to_string()))?
            .to_string();
    }
    let db_override = match &settings.db {
        Some(text) => Some(
            text.parse::<DatabaseUrl>()
                .map_err(|error| EvalError::Data(error.to_string()))?,
        ),
        None => None,
    };
    let items = load_set(
        &settings.set,
        db_override.as_ref(),
        Sampling {
            size: settings.sample,
            seed: settings.seed,
            offset: settings.sample_offset,
        },
        settings.limit,
    )?;
    let run_dir = match resume {
        Some(dir) => dir,
        None => {
            let (now, stamp) = utc_now();
            let dir = runs_root.join(run_folder_name(&settings.set)).join(&stamp);
            let manifest = Manifest {
                database_hashes: database_hashes(&items),
                settings: settings.clone(),
                model: model_info(&client),
                started_at: now,
                askdb_version: env!("CARGO_PKG_VERSION").to_string(),
                items: items.len(),
            };
            create_folder(&dir, &manifest)?;
            dir
        }
    };
    let client = if settings.shared_first_reply && !client.has_cache() {
        let replies = run_dir.join("replies");
        let cache = ResponseCache::open(&replies)
            .map_err(|error| EvalError::Data(format!("reply cache: {error}")))?;
        client.with_cache(cache)
    } else {
        client
    };
    let records_path = run_dir.join("questions.jsonl");
    let mut records_file = open_records(&records_path)?;
    let done: BTreeSet<(String, Mode)> = read_records(&run_dir)?
        .into_iter()
        .map(|record| (record.id, record.mode))
        .collect();

    // Leave-one-out examples come from every question of the set, sampled or not.
    let example_pool = match settings.examples {
        ExampleSource::None => Vec::new(),
        ExampleSource::LeaveOneOut => load_set(
            &settings.set,
            db_override.as_ref(),
            Sampling {
                size: None,
                seed: settings.seed,
                offset: 0,
            },
            None,
        )?,
    };
    let mut leave_one_out: HashMap<String, examples::LeaveOneOut> = HashMap::new();
    let mut agents: HashMap<String, Agent> = HashMap::new();
    let mut gold_caches: HashMap<String, HashMap<String, Option<ResultSet>>> = HashMap::new();
    let total = items.len() * settings.modes.len();
    let several_prefixes = settings.modes.contains(&Mode::Plain)
        && settings.modes.iter().any(|mode| *mode != Mode::Plain);
    let mut finished = done.len().min(total);
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let askdb = match settings.ask_path {
        AskPath::Harness => None,
        AskPath::Process | AskPath::Serve => Some(std::env::current_exe().map_err(|error| {
            EvalError::Data(format!("the askdb binary to ask through: {error}"))
        })?),
    };
    // Off the harness's path the harness warms only the plain prompt: the agent's
    // processes meet the model server's cache as a user's would, and a server warms its
    // own.
    let warmed_modes: Vec<Mode> = settings
        .modes
        .iter()
        .copied()
        .filter(|mode| settings.ask_path.is_harness() || *mode == Mode::Plain)
        .collect();
    let mut serving: Option<process::ServeProcess> = None;
    let order = process::asking_order(&items, &settings.modes, settings.ask_path, |item| {
        item.db.as_str()
    });
    'questions: for (item, mode) in order {
        let mode = &mode;
        {
            if done.contains(&(item.id.clone(), *mode)) {
                continue;
            }
            if !agents.contains_key(&item.db) {
                let gate = open_eval_gate(&item.db, settings.row_cap).await?;
                // A run recorded before strategies were asked with the JSON actions.
                let strategy = if settings.strategy.is_empty() {
                    Strategy::json_actions()
                } else {
                    settings
                        .strategy
                        .parse::<Strategy>()
                        .map_err(|error| EvalError::Data(error.to_string()))?
                };
                let mut agent = open_eval_agent(gate.clone(), &client, strategy, &item.db).await?;
                if settings.examples == ExampleSource::LeaveOneOut {
                    let of_database: Vec<&EvalItem> = example_pool
                        .iter()
                        .filter(|other| other.db == item.db)
                        .collect();
                    let pool = examples::LeaveOneOut::prepare(&gate, &of_database).await;
                    agent = agent.with_examples(pool.store());
                    leave_one_out.insert(item.db.clone(), pool);
                }
                warm_up(&agent, &item.db, &warmed_modes, &run_dir).await?;
                agents.insert(item.db.clone(), agent);
            }
            let Some(agent) = agents.get(&item.db) else {
                continue;
            };
            let options = AskOptions {
                mode: *mode,
                explain: settings.explain,
                select: SelectOptions {
                    budget_tokens: settings.budget_tokens,
                    k: settings.k,
                    ..SelectOptions::default()
                },
                ..AskOptions::default()
            };
            // The agent's and the plain prompt asked in turn would push each other out of
            // the model server's cache; each question's prefix is put back from the
            // server's saved copy first (outside its latency), as a server answering one
            // prompt keeps it cached. A baseline replaying the agent's reply asks nothing.
            if let Some(pool) = leave_one_out.get(&item.db) {
                pool.offer(agent.gate(), item).await?;
            }
            let replayed = *mode == Mode::Baseline && settings.shared_first_reply;
            if let (AskPath::Serve, Mode::Agent, Some(askdb)) =
                (settings.ask_path, *mode, askdb.as_deref())
            {
                if serving.as_ref().map(process::ServeProcess::db) != Some(item.db.as_str()) {
                    // One server at a time: the previous one stops as it is dropped.
                    drop(serving.take());
                    let server = process::ServeProcess::start(askdb, &item.db, settings.row_cap)
                        .await
                        .map_err(|failure| EvalError::Data(failure.message))?;
                    serving = Some(server);
                }
            }
            let asker = match (settings.ask_path, *mode, askdb.as_deref(), serving.as_ref()) {
                (AskPath::Process, Mode::Agent, Some(askdb), _) => Asker::Process(askdb),
                (AskPath::Serve, Mode::Agent, _, Some(server)) => Asker::Serve(server),
                _ => Asker::Harness,
            };
            if several_prefixes && !replayed && matches!(asker, Asker::Harness) {
                agent.restore_prefix(*mode == Mode::Plain).await;
            }
            let started = Instant::now();
            let trace = telemetry.question(&item.question, mode.as_str());
            let asked = async {
                match asker {
                    Asker::Process(askdb) => process::ask(
                        askdb,
                        &item.db,
                        &settings.strategy,
                        settings.row_cap,
                        &item.question,
                    )
                    .await
                    .map_err(AskFailure::Process),
                    Asker::Serve(server) => server
                        .ask(&item.question)
                        .await
                        .map_err(AskFailure::Process),
                    Asker::Harness => agent
                        .ask_observed(&item.question, &options, &trace)
                        .await
                        .map_err(AskFailure::Agent),
                }
            };
            let outcome = tokio::select! {
                outcome = asked => outcome,
                _ = &mut interrupted => {
                    eprintln!("\ninterrupted: resume with --resume {}", run_dir.display());
                    break 'questions;
                }
            };
            let gold_cache = gold_caches.entry(item.db.clone()).or_default();
            let record = match outcome {
                Ok(mut result) => {
                    let (correct, verdict, first) =
                        grade(agent.gate(), item, &result, gold_cache).await;
                    result.trace_id = trace.trace_id();
                    let record = record_of(item, *mode, &result, correct, verdict, first);
                    let success = metrics::is_success(&record.outcome());
                    trace.verdict(
                        &item.id,
                        success,
                        verdict_reason(&record, success).as_deref(),
                    );
                    trace.finish(&result);
                    record
                }
                Err(failure) => {
                    // The model's own message for an outage; askdb's error as it says it.
                    let (ended, message) = match &failure {
                        AskFailure::Agent(AgentError::Model(model)) => {
                            (RunOutcome::InfrastructureFailure, model.to_string())
                        }
                        AskFailure::Agent(other) => (RunOutcome::AgentError, other.to_string()),
                        AskFailure::Process(failed) => {
                            (RunOutcome::AgentError, failed.message.clone())
                        }
                    };
                    trace.fail(&message);
                    error_record(
                        item,
                        *mode,
                        ended,
                        Some(&message),
                        started.elapsed().as_millis() as u64,
                    )
                }
            };
            append_record(&mut records_file, &records_path, &record)?;
            finished += 1;
            let mark = if record.decision == RunOutcome::InfrastructureFailure {
                "infra"
            } else if metrics::is_success(&record.outcome()) {
                "ok"
            } else {
                "wrong"
            };
            progress(
                finished,
                total,
                &format!(
                    "{} {:?} {:?} {mark}",
                    record.id, record.mode, record.decision
                ),
            );
        }
    }
    eprintln!();
    write_summary(&run_dir)?;
    Ok(run_dir)
}

pub(crate) fn model_info(client: &ModelClient) -> ModelInfo {
    let provider = client.provider();
    ModelInfo {
        provider: provider.name().to_string(),
        model: provider.model().to_string(),
        endpoint: crate::text::redact_password(provider.endpoint()),
    }
}

/// Computes and writes `summary.json` and `report.md` from the run's records.
pub fn write_summary(run_dir: &Path) -> Result<RunSummary, EvalError> {
    let manifest = read_manifest(run_dir)?;
    let records = read_records(run_dir)?;
    let summary = summarize_records(&manifest, &records, run_dir);
    let path = run_dir.join("summary.json");
    let text = serde_json::to_string_pretty(&summary)
        .map_err(|error| EvalError::Data(error.to_string()))?;
    std::fs::write(&path, text + "\n").map_err(|error| write_error(&path, error))?;
    let report_path = run_dir.join("report.md");
    std::fs::write(&report_path, render_report(&summary))
        .map_err(|error| write_error(&report_path, error))?;
    Ok(summary)
}

/// The summary of a run's records (pure: used by regrade and by the identity test).
pub fn summarize_records(
    manifest: &Manifest,
    records: &[QuestionRecord],
    run_dir: &Path,
) -> RunSummary {
    let mut modes = BTreeMap::new();
    let mut by_mode: BTreeMap<Mode, Vec<QuestionOutcome>> = BTreeMap::new();
    for record in records {
        by_mode
            .entry(record.mode)
            .or_default()
            .push(record.outcome());
    }
    for (mode, outcomes) in &by_mode {
        modes.insert(mode.as_str().to_string(), metrics::summarize(outcomes));
    }
    let paired_with = |other: Mode| match (by_mode.get(&Mode::Agent), by_mode.get(&other)) {
        (Some(agent), Some(other)) => Some(metrics::paired_difference(
            agent,
            other,
            BOOTSTRAP_RESAMPLES,
            BOOTSTRAP_SEED,
        )),
        _ => None,
    };
    let paired = paired_with(Mode::Baseline);
    let paired_plain = paired_with(Mode::Plain);
    let mut agent_failures_by_type = BTreeMap::new();
    for record in records.iter().filter(|record| record.mode == Mode::Agent) {
        if !metrics::is_success(&record.outcome())
            && record.decision != RunOutcome::InfrastructureFailure
        {
            let kind = match (record.decision.decision(), record.history.last()) {
                (Some(Decision::Answer), _) => "wrong_result".to_string(),
                (Some(Decision::GiveUp), Some(last)) => format!("gave_up_{}", last.error_type),
                // The names summaries have always used (`agenterror`, `giveup`).
                _ => format!("{:?}", record.decision).to_lowercase(),
            };
            *agent_failures_by_type.entry(kind).or_insert(0) += 1;
        }
    }
    RunSummary {
        set: manifest.settings.set.clone(),
        generated_at: utc_now().0,
        askdb_version: env!("CARGO_PKG_VERSION").to_string(),
        model: manifest.model.clone(),
        settings: manifest.settings.clone(),
        run: run_dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
        items: manifest.items,
        modes,
        paired,
        paired_plain,
        agent_failures_by_type,
        flags: crate::eval::flags::figures(records),
        warm_ups: WarmUpFigures::of(&read_warm_ups(run_dir)),
        examples: (!manifest.settings.examples.is_none())
            .then(|| examples::example_figures(manifest.settings.examples, records)),
        database_hashes: manifest
            .database_hashes
            .iter()
            .map(|(db, before)| (db.clone(), (before.clone(), sqlite_file_hash(db))))
            .collect(),
    }
}

/// The gate an evaluation asks or grades through: the item's database (`demo`, a path or
/// a URL, as the set names it) with the run's row cap.
pub(crate) async fn open_eval_gate(db: &str, row_cap: u64) -> Result<Gate, EvalError> {
    let url: DatabaseUrl = db.parse().map_err(|error| database_error(db, error))?;
    let options = GateOptions {
        row_cap,
        ..GateOptions::default()
    };
    open_gate(&url, options)
        .await
        .map_err(|error| database_error(db, error))
}

/// The agent an evaluation asks through, over a gate of the item's database (`db`).
pub(crate) async fn open_eval_agent(
    gate: Gate,
    client: &ModelClient,
    strategy: Strategy,
    db: &str,
) -> Result<Agent, EvalError> {
    Agent::with_strategy(gate, client.clone(), strategy)
        .await
        .map_err(|error| database_error(db, error))
}

fn database_error(db: &str, error: impl std::fmt::Display) -> EvalError {
    EvalError::Database {
        db: db.to_string(),
        error: error.to_string(),
    }
}

/// Re-grades a finished run without calling the model: every recorded SQL is run
/// again against the gold on a fresh gate, then the summary is rewritten.
pub async fn regrade(run_dir: &Path) -> Result<RunSummary, EvalError> {
    let manifest = read_manifest(run_dir)?;
    let records = read_records(run_dir)?;
    let mut gates: HashMap<String, Gate> = HashMap::new();
    let mut caches: HashMap<String, HashMap<String, Option<ResultSet>>> = HashMap::new();
    let mut regraded = Vec::with_capacity(records.len());
    for mut record in records {
        if record.decision == Decision::Answer && record.expected == Expected::Answer {
            if !gates.contains_key(&record.db) {
                let gate = open_eval_gate(&record.db, manifest.settings.row_cap).await?;
                gates.insert(record.db.clone(), gate);
            }
            if let (Some(gate), Some(sql)) = (gates.get(&record.db), record.sql.clone()) {
                let item = EvalItem {
                    id: record.id.clone(),
                    question: record.question.clone(),
                    category: record.category.clone(),
                    expected: record.expected,
                    golds: record.golds.clone(),
                    ordered: record.ordered,
                    db: record.db.clone(),
                };
                let cache = caches.entry(record.db.clone()).or_default();
                let predicted = match gate.run_query(&sql).await {
                    QueryOutcome::Rows(rows) => Some(ResultSet::from(&rows)),
                    QueryOutcome::Failed(_) => None,
                };
                match predicted {
                    Some(predicted) => {
                        let (correct, verdict) = grade_rows(gate, &item, &predicted, cache).await;
                        record.correct = correct;
                        record.verdict = verdict;
                    }
                    None => {
                        record.correct = false;
                        record.verdict = Some("the predicted SQL fails on regrade".to_string());
                    }
                }
            }
        }
        regraded.push(record);
    }
    let path = run_dir.join("questions.jsonl");
    let mut text = String::new();
    for record in &regraded {
        text.push_str(
            &serde_json::to_string(record).map_err(|error| EvalError::Data(error.to_string()))?,
        );
        text.push('\n');
    }
    std::fs::write(&path, text).map_err(|error| write_error(&path, error))?;
    write_summary(run_dir)
}

#[cfg(test)]
mod tests;
