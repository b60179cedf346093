//! SParC (Yu et al. 2019), the multi-turn set over Spider's databases: each interaction
//! is a few questions asked in a row, each with its gold SQL. `askdb eval run --set
//! sparc` asks every turn of the sampled interactions in three modes side by side and
//! grades each by execution with the comparator ([`crate::compare`]):
//!
//! | mode | how a turn is asked |
//! |---|---|
//! | `agent` | the agent with the conversation: the earlier turns' questions, SQL and shape ([`crate::agent::Agent::ask_in_conversation`]) |
//! | `plain` | the plain reference prompt with the earlier questions of the interaction before the question, one attempt |
//! | `alone` | the agent given each turn with no history |
//!
//! The figures: question-level accuracy, first-turn and follow-up-turn (turn 2 and
//! later) accuracy, and interaction-level accuracy (every graded turn right), each with
//! its Wilson interval; paired bootstrap intervals of agent − plain over every turn and
//! agent − alone over the follow-ups and over the first turns. A gold query that fails or
//! returns no rows on the spiderman SQLite files leaves its turn ungraded (it is still
//! asked, so the conversation goes on); the count is reported.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::external::spiderman_db_path;
use super::metrics::{model_speed, Expected, ModelSpeed, QuestionOutcome, RunOutcome};
use super::metrics::{paired_difference, PairedDifference};
use super::metrics::{percentile_nearest_rank, wilson_interval, Interval};
use super::runner::{
    append_record, model_info, open_eval_agent, open_eval_gate, open_records, read_lines,
    sqlite_file_hash, warm_up, write_error, EvalError, ModelInfo,
};
use crate::agent::conversation::{Context, Turn};
use crate::agent::events::NoObserver;
use crate::agent::strategy::Strategy;
use crate::agent::{Agent, AgentError, AskOptions, Decision, Mode, ModelStep};
use crate::compare::{gold_orders, results_match, CompareOptions, ResultSet, Verdict};
use crate::gate::{Gate, QueryOutcome};
use crate::llm::ModelClient;

/// SParC's dev set below the external data folder.
pub const SPARC_DEV: &str = "sparc/dev.json";

/// Bootstrap resamples of each paired difference, and their seed.
const RESAMPLES: u32 = 2_000;
const BOOTSTRAP_SEED: u64 = 20_260_101;

#[derive(Debug, Deserialize)]
struct RawInteraction {
    database_id: String,
    /// `interaction` in the upstream file, `turns` in a copy reduced to the fields read.
    #[serde(alias = "interaction")]
    turns: Vec<RawTurn>,
}

#[derive(Debug, Deserialize)]
struct RawTurn {
    utterance: String,
    query: String,
}

/// One interaction: its questions in order, each with its gold SQL.
#[derive(Debug, Clone, PartialEq)]
pub struct Interaction {
    /// `<index in the file>-<database>`, stable across samples.
    pub id: String,
    pub db_name: String,
    pub turns: Vec<SparcTurn>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SparcTurn {
    pub question: String,
    /// The gold as the comparator runs it ([`gold_text`]).
    pub gold: String,
}

/// Reads SParC's JSON (a list of `{database_id, interaction: [{utterance, query, ...}],
/// final}`; `turns` for `interaction` too).
pub fn parse_sparc(text: &str) -> Result<Vec<Interaction>, EvalError> {
    let raw: Vec<RawInteraction> = serde_json::from_str(text)
        .map_err(|error| EvalError::Data(format!("{SPARC_DEV}: {error}")))?;
    Ok(raw
        .into_iter()
        .enumerate()
        .filter(|(_, interaction)| !interaction.turns.is_empty())
        .map(|(index, interaction)| Interaction {
            id: format!("{index:03}-{}", interaction.database_id),
            turns: interaction
                .turns
                .into_iter()
                .map(|turn| SparcTurn {
                    question: turn.utterance.trim().to_string(),
                    gold: gold_text(&turn.query),
                })
                .collect(),
            db_name: interaction.database_id,
        })
        .collect())
}

/// SParC's dev set from the external data folder.
pub fn load_sparc(data_dir: &Path) -> Result<Vec<Interaction>, EvalError> {
    let path = data_dir.join(SPARC_DEV);
    let text = std::fs::read_to_string(&path).map_err(|error| {
        EvalError::Data(format!(
            "cannot read {}: {error} (scripts/fetch-data.sh fetches it)",
            path.display()
        ))
    })?;
    parse_sparc(&text)
}

/// A gold query with its double-quoted strings as SQL string literals: Spider's and
/// SParC's gold write `Airline = "JetBlue Airways"`, which SQLite reads as a string only
/// when no column has that name, and the guard reads as the identifier it is in SQL.
/// Spider's `! =` is read as `!=`.
pub fn gold_text(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                out.push(c);
                while let Some(inner) = chars.next() {
                    out.push(inner);
                    if inner == '\'' {
                        if chars.peek() == Some(&'\'') {
                            out.push('\'');
                            chars.next();
                        } else {
                            break;
                        }
                    }
                }
            }
            '"' => {
                out.push('\'');
                for inner in chars.by_ref() {
                    match inner {
                        '"' => break,
                        '\'' => out.push_str("''"),
                        other => out.push(other),
                    }
                }
                out.push('\'');
            }
            other => out.push(other),
        }
    }
    // Spider writes `! =` for `!=` in a few golds; no SQL reads it.
    out.replace("! =", "!=")
        .trim()
        .trim_end_matches(';')
        .trim()
        .to_string()
}

/// `size` interactions (all when None) from a shuffle seeded with `seed`, back in
/// database order so each database's agent is built once.
pub fn sample(
    interactions: Vec<Interaction>,
    size: Option<usize>,
    offset: usize,
    seed: u64,
) -> Vec<Interaction> {
    let Some(size) = size else {
        return interactions;
    };
    let mut random = crate::rng::SplitMix64::new(seed);
    let mut indices: Vec<usize> = (0..interactions.len()).collect();
    for index in (1..indices.len()).rev() {
        let other = random.index(index + 1);
        indices.swap(index, other);
    }
    let mut chosen: Vec<usize> = indices.into_iter().skip(offset).take(size).collect();
    chosen.sort_by(|a, b| {
        interactions[*a]
            .db_name
            .cmp(&interactions[*b].db_name)
            .then(a.cmp(b))
    });
    chosen
        .into_iter()
        .map(|index| interactions[index].clone())
        .collect()
}

/// How a turn is asked (table in the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SparcMode {
    Agent,
    Plain,
    Alone,
}

impl SparcMode {
    pub const ALL: [SparcMode; 3] = [SparcMode::Agent, SparcMode::Plain, SparcMode::Alone];

    pub fn as_str(self) -> &'static str {
        match self {
            SparcMode::Agent => "agent",
            SparcMode::Plain => "plain",
            SparcMode::Alone => "alone",
        }
    }
}

/// One turn asked in one mode, graded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub interaction: String,
    /// 1 for the interaction's first question.
    pub turn: u32,
    pub db: String,
    pub mode: SparcMode,
    pub question: String,
    /// How it ended; None when the ask failed before a decision (`error` says why).
    pub decision: Option<Decision>,
    /// The model could not be asked: not scored.
    #[serde(default)]
    pub infrastructure: bool,
    pub sql: Option<String>,
    pub understood_as: Option<String>,
    /// The gold returned rows, so the turn is graded.
    pub graded: bool,
    pub correct: bool,
    pub latency_ms: u64,
    pub error: Option<String>,
    /// Generation rounds the turn took (a repair is a round).
    #[serde(default)]
    pub attempts: u32,
    /// Every model call the turn made, in order: where its time went.
    #[serde(default)]
    pub model_calls: Vec<ModelStep>,
}

/// Gold rows per turn, None where the gold failed or returned nothing.
async fn gold_rows(gate: &Gate, interaction: &Interaction) -> Vec<Option<ResultSet>> {
    let mut rows = Vec::new();
    for turn in &interaction.turns {
        rows.push(match gate.run_query(&turn.gold).await {
            QueryOutcome::Rows(result) if !result.rows.is_empty() => Some(ResultSet::from(&result)),
            _ => None,
        });
    }
    rows
}

/// Asks every turn of one interaction in one mode, carrying the conversation where the
/// mode has one, and grades each against its gold rows.
pub async fn ask_interaction(
    agent: &Agent,
    interaction: &Interaction,
    mode: SparcMode,
    golds: &[Option<ResultSet>],
) -> Vec<TurnRecord> {
    let mut turns: Vec<Turn> = Vec::new();
    let mut records = Vec::new();
    for (index, turn) in interaction.turns.iter().enumerate() {
        let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let (context, agent_mode) = match mode {
            SparcMode::Agent => (Context::new(turns.clone()), Mode::Agent),
            SparcMode::Plain => (Context::new(turns.clone()), Mode::Plain),
            SparcMode::Alone => (Context::default(), Mode::Agent),
        };
        let options = AskOptions {
            mode: agent_mode,
            ..AskOptions::default()
        };
        let started = Instant::now();
        let asked = agent
            .ask_in_conversation(&turn.question, &context, &options, &NoObserver)
            .await;
        let gold = golds.get(index).cloned().flatten();
        let mut record = TurnRecord {
            interaction: interaction.id.clone(),
            turn: number,
            db: interaction.db_name.clone(),
            mode,
            question: turn.question.clone(),
            decision: None,
            infrastructure: false,
            sql: None,
            understood_as: None,
            graded: gold.is_some(),
            correct: false,
            latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            error: None,
            attempts: 0,
            model_calls: Vec::new(),
        };
        match asked {
            Ok(result) => {
                if let (Some(gold), Decision::Answer) = (&gold, result.decision) {
                    let predicted = ResultSet {
                        columns: result.columns.clone(),
                        rows: result.rows.clone(),
                    };
                    let options = CompareOptions {
                        ordered: gold_orders(&turn.gold, agent.gate().dialect()),
                        ..CompareOptions::default()
                    };
                    record.correct = results_match(gold, &predicted, &options) == Verdict::Match;
                }
                record.decision = Some(result.decision);
                record.sql = result.sql.clone();
                record.understood_as = result.understood_as.clone();
                record.attempts = result.attempts;
                record.model_calls = result.model_calls.clone();
                turns.push(Turn::from_result(number, &result));
            }
            Err(error) => {
                record.infrastructure = matches!(error, AgentError::Model(_));
                record.error = Some(error.to_string());
                // The conversation goes on with the question unanswered.
                let mut failed =
                    crate::agent::conversation::Turn::unanswered(number, &turn.question);
                failed.reason = record.error.clone();
                turns.push(failed);
            }
        }
        records.push(record);
    }
    records
}

/// A rate with its Wilson interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    pub successes: u64,
    pub total: u64,
    pub accuracy: Option<f64>,
    pub wilson95: Option<Interval>,
}

impl Rate {
    fn of(successes: u64, total: u64) -> Rate {
        Rate {
            successes,
            total,
            accuracy: (total > 0).then(|| successes as f64 / total as f64),
            wilson95: wilson_interval(successes, total),
        }
    }
}

/// One mode's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeFigures {
    pub mode: SparcMode,
    pub questions: Rate,
    pub first_turns: Rate,
    pub follow_ups: Rate,
    pub interactions: Rate,
    /// Median seconds-to-answer of first turns and of follow-ups (every turn asked,
    /// graded or not): a follow-up should take no longer than a first question.
    pub first_turn_p50_ms: Option<u64>,
    pub follow_up_p50_ms: Option<u64>,
    /// Median prompt tokens a turn's model calls made the server read (not from its
    /// prompt cache), first turns and follow-ups: how much of a follow-up's prompt was a
    /// prefix the server already held. None where no turn recorded its calls.
    #[serde(default)]
    pub first_turn_new_prompt_tokens_p50: Option<u64>,
    #[serde(default)]
    pub follow_up_new_prompt_tokens_p50: Option<u64>,
    /// Median tokens a turn's model calls generated, first turns and follow-ups: the
    /// other half of where a turn's time goes (a follow-up's reply opens with its
    /// restatement; a turn that sampled candidates counts each). None where no turn
    /// recorded its calls.
    #[serde(default)]
    pub first_turn_generated_tokens_p50: Option<u64>,
    #[serde(default)]
    pub follow_up_generated_tokens_p50: Option<u64>,
    /// The model server's own speed over the mode's turns (None where it timed none):
    /// with the token counts above, it splits a turn's time into reading and writing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_speed: Option<ModelSpeed>,
}

/// What a SParC run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SparcSummary {
    pub interactions: usize,
    pub turns: usize,
    /// Turns whose gold failed or returned nothing on these files: asked, not graded.
    pub ungraded_gold_turns: usize,
    pub modes: Vec<ModeFigures>,
    pub agent_minus_plain: PairedDifference,
    pub agent_minus_alone_follow_ups: PairedDifference,
    pub agent_minus_alone_first_turns: PairedDifference,
}

fn outcome_of(id: String, record: &TurnRecord, correct: bool) -> QuestionOutcome {
    QuestionOutcome {
        id,
        category: record.db.clone(),
        expected: Expected::Answer,
        decision: match record.decision {
            Some(decision) => RunOutcome::Decided(decision),
            None if record.infrastructure => RunOutcome::InfrastructureFailure,
            None => RunOutcome::AgentError,
        },
        correct,
        first_attempt_correct: None,
        first_attempt_failed: false,
        attempts: 0,
        latency_ms: record.latency_ms,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: 0.0,
        server_timings: ModelStep::server_timings_of(&record.model_calls),
    }
}

/// The graded turns of one mode (`which` keeps first turns, follow-ups or both) as
/// outcomes keyed `interaction#turn`, infrastructure failures left out.
fn turn_outcomes(
    records: &[TurnRecord],
    mode: SparcMode,
    which: impl Fn(u32) -> bool,
) -> Vec<QuestionOutcome> {
    records
        .iter()
        .filter(|record| record.mode == mode && record.graded && which(record.turn))
        .map(|record| {
            outcome_of(
                format!("{}#{}", record.interaction, record.turn),
                record,
                record.correct,
            )
        })
        .collect()
}

fn rate_of(outcomes: &[QuestionOutcome]) -> Rate {
    let scored: Vec<&QuestionOutcome> = outcomes
        .iter()
        .filter(|outcome| super::metrics::is_scored(outcome))
        .collect();
    let successes = scored
        .iter()
        .filter(|outcome| super::metrics::is_success(outcome))
        .count();
    Rate::of(successes as u64, scored.len() as u64)
}

/// The median of `value` over one mode's turns that `which` keeps, infrastructure
/// failures left out, and turns `value` has nothing for.
fn median_of(
    records: &[TurnRecord],
    mode: SparcMode,
    which: fn(u32) -> bool,
    value: fn(&TurnRecord) -> Option<u64>,
) -> Option<u64> {
    let mut values: Vec<u64> = records
        .iter()
        .filter(|record| record.mode == mode && !record.infrastructure && which(record.turn))
        .filter_map(value)
        .collect();
    values.sort_unstable();
    percentile_nearest_rank(&values, 50)
}

fn latency(record: &TurnRecord) -> Option<u64> {
    Some(record.latency_ms)
}

/// The prompt tokens a turn's model calls made the server read, not from its cache;
/// None for a turn that recorded no call.
fn new_prompt_tokens(record: &TurnRecord) -> Option<u64> {
    (!record.model_calls.is_empty()).then(|| {
        record
            .model_calls
            .iter()
            .map(|call| call.input_tokens.saturating_sub(call.cache_read_tokens))
            .sum()
    })
}

/// The tokens a turn's model calls generated, every sampled candidate counted (they are
/// decoded side by side, so a sampling call's count overstates its time); None for a
/// turn that recorded no call.
fn generated_tokens(record: &TurnRecord) -> Option<u64> {
    (!record.model_calls.is_empty()).then(|| {
        record
            .model_calls
            .iter()
            .map(|call| call.output_tokens)
            .sum()
    })
}

/// The figures of a run's records.
pub fn summarize(records: &[TurnRecord]) -> SparcSummary {
    let mut interactions: Vec<&str> = records.iter().map(|r| r.interaction.as_str()).collect();
    interactions.sort_unstable();
    interactions.dedup();
    let mut turns: Vec<(&str, u32, bool)> = records
        .iter()
        .map(|r| (r.interaction.as_str(), r.turn, r.graded))
        .collect();
    turns.sort_unstable();
    turns.dedup();
    let modes = SparcMode::ALL
        .into_iter()
        .map(|mode| {
            let mut per_interaction: HashMap<&str, (bool, bool)> = HashMap::new();
            for record in records
                .iter()
                .filter(|record| record.mode == mode && record.graded && !record.infrastructure)
            {
                let entry = per_interaction
                    .entry(record.interaction.as_str())
                    .or_insert((true, false));
                entry.0 &= record.correct;
                entry.1 = true;
            }
            let graded = per_interaction.values().filter(|(_, any)| *any).count();
            let all_right = per_interaction
                .values()
                .filter(|(right, any)| *any && *right)
                .count();
            ModeFigures {
                mode,
                questions: rate_of(&turn_outcomes(records, mode, |_| true)),
                first_turns: rate_of(&turn_outcomes(records, mode, |turn| turn == 1)),
                follow_ups: rate_of(&turn_outcomes(records, mode, |turn| turn > 1)),
                interactions: Rate::of(all_right as u64, graded as u64),
                first_turn_p50_ms: median_of(records, mode, |turn| turn == 1, latency),
                follow_up_p50_ms: median_of(records, mode, |turn| turn > 1, latency),
                first_turn_new_prompt_tokens_p50: median_of(
                    records,
                    mode,
                    |turn| turn == 1,
                    new_prompt_tokens,
                ),
                follow_up_new_prompt_tokens_p50: median_of(
                    records,
                    mode,
                    |turn| turn > 1,
                    new_prompt_tokens,
                ),
                first_turn_generated_tokens_p50: median_of(
                    records,
                    mode,
                    |turn| turn == 1,
                    generated_tokens,
                ),
                follow_up_generated_tokens_p50: median_of(
                    records,
                    mode,
                    |turn| turn > 1,
                    generated_tokens,
                ),
                model_speed: model_speed(&turn_outcomes(records, mode, |_| true)),
            }
        })
        .collect();
    let paired = |which: fn(u32) -> bool, other: SparcMode| {
        paired_difference(
            &turn_outcomes(records, SparcMode::Agent, which),
            &turn_outcomes(records, other, which),
            RESAMPLES,
            BOOTSTRAP_SEED,
        )
    };
    SparcSummary {
        interactions: interactions.len(),
        turns: turns.len(),
        ungraded_gold_turns: turns.iter().filter(|(_, _, graded)| !graded).count(),
        modes,
        agent_minus_plain: paired(|_| true, SparcMode::Plain),
        agent_minus_alone_follow_ups: paired(|turn| turn > 1, SparcMode::Alone),
        agent_minus_alone_first_turns: paired(|turn| turn == 1, SparcMode::Alone),
    }
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |value| format!("{:.1}%", value * 100.0))
}

fn rate_text(rate: &Rate) -> String {
    match rate.wilson95 {
        Some(interval) => format!(
            "{} ({}/{}; {:.1}-{:.1})",
            percent(rate.accuracy),
            rate.successes,
            rate.total,
            interval.lower * 100.0,
            interval.upper * 100.0
        ),
        None => "-".to_string(),
    }
}

/// The server's ms a token written and read, or "-" where it timed nothing.
fn speed_text(speed: Option<ModelSpeed>) -> String {
    speed.map_or_else(
        || "-".to_string(),
        |speed| {
            format!(
                "{} / {}",
                ModelSpeed::ms_text(speed.ms_per_generated_token),
                ModelSpeed::ms_text(speed.ms_per_prompt_token)
            )
        },
    )
}

fn difference_text(name: &str, difference: &PairedDifference) -> String {
    let points = |value: f64| format!("{:+.1}", value * 100.0);
    format!(
        "{name}: {} points over {} pairs (95% bootstrap {})\n",
        difference
            .mean_difference
            .map_or_else(|| "-".to_string(), points),
        difference.paired,
        difference.bootstrap95.map_or_else(
            || "-".to_string(),
            |interval| format!("{} to {}", points(interval.lower), points(interval.upper))
        )
    )
}

/// The summary as text.
pub fn render(summary: &SparcSummary) -> String {
    let mut text = format!(
        "SParC: {} interactions, {} turns; {} turn(s) left ungraded (their gold fails or returns no rows on these files)\n\n\
         | mode | questions | first turns | follow-ups | interactions | median ms, first / follow-up | median uncached prompt tokens, first / follow-up | median generated tokens, first / follow-up | server ms a token written / read |\n|---|---|---|---|---|---|---|---|---|\n",
        summary.interactions, summary.turns, summary.ungraded_gold_turns
    );
    for figures in &summary.modes {
        let ms = |value: Option<u64>| value.map_or_else(|| "-".to_string(), |ms| ms.to_string());
        text.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} / {} | {} / {} | {} / {} | {} |\n",
            figures.mode.as_str(),
            rate_text(&figures.questions),
            rate_text(&figures.first_turns),
            rate_text(&figures.follow_ups),
            rate_text(&figures.interactions),
            ms(figures.first_turn_p50_ms),
            ms(figures.follow_up_p50_ms),
            ms(figures.first_turn_new_prompt_tokens_p50),
            ms(figures.follow_up_new_prompt_tokens_p50),
            ms(figures.first_turn_generated_tokens_p50),
            ms(figures.follow_up_generated_tokens_p50),
            speed_text(figures.model_speed)
        ));
    }
    text.push('\n');
    text.push_str(&difference_text(
        "agent - plain, every turn",
        &summary.agent_minus_plain,
    ));
    text.push_str(&difference_text(
        "agent - alone, follow-ups",
        &summary.agent_minus_alone_follow_ups,
    ));
    text.push_str(&difference_text(
        "agent - alone, first turns",
        &summary.agent_minus_alone_first_turns,
    ));
    text
}

/// Each asked turn's record, one JSON line each, in a run folder.
pub const TURNS_FILE: &str = "turns.jsonl";

/// A finished SParC run as its folder's `summary.json` holds it and `askdb eval publish`
/// commits it: the figures with when, with which model and how they were asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SparcReport {
    pub finished_at: String,
    pub askdb_version: String,
    pub model: ModelInfo,
    pub settings: SparcSettings,
    pub summary: SparcSummary,
    /// SHA-256 of each database file the run asked, when it started and when it ended:
    /// equal pairs show that nothing any turn ran changed a database.
    #[serde(default)]
    pub database_hashes: BTreeMap<String, (String, Option<String>)>,
}

/// The run folder's record of the database files' hashes taken when the run began
/// (kept so a resumed run compares against the first start, not its own).
pub const DATABASES_BEFORE_FILE: &str = "databases-before.json";

/// One line on the database files: all unchanged, or which changed.
pub fn databases_text(hashes: &BTreeMap<String, (String, Option<String>)>) -> String {
    let changed: Vec<&str> = hashes
        .iter()
        .filter(|(_, (before, after))| after.as_deref() != Some(before.as_str()))
        .map(|(db, _)| db.as_str())
        .collect();
    if hashes.is_empty() {
        "No database file's hash was recorded.".to_string()
    } else if changed.is_empty() {
        format!(
            "All {} database files hash the same before and after the run.",
            hashes.len()
        )
    } else {
        format!("Changed by the run: {}.", changed.join(", "))
    }
}

/// The SHA-256 of each database file of `interactions`, by database name.
fn hash_databases(data_dir: &Path, interactions: &[Interaction]) -> BTreeMap<String, String> {
    let mut hashes = BTreeMap::new();
    for interaction in interactions {
        if hashes.contains_key(&interaction.db_name) {
            continue;
        }
        let db = format!(
            "sqlite:{}",
            spiderman_db_path(data_dir, &interaction.db_name).display()
        );
        if let Some(hash) = sqlite_file_hash(&db) {
            hashes.insert(interaction.db_name.clone(), hash);
        }
    }
    hashes
}

/// The published run as the README's SParC block: settings, the three modes and the
/// paired differences.
pub fn report_block(report: &SparcReport) -> String {
    let sample = match (report.settings.sample, report.settings.sample_offset) {
        (Some(size), 0) => format!(
            "{size} interactions sampled with seed {}",
            report.settings.seed
        ),
        (Some(size), offset) => format!(
            "{size} interactions sampled with seed {} after the first {offset}",
            report.settings.seed
        ),
        (None, _) => "every interaction".to_string(),
    };
    format!(
        "Generated from `evals/results/sparc.json` ({} UTC, askdb {}, {} `{}`, {sample}).\n\n{}\n{}\n",
        report.finished_at,
        report.askdb_version,
        report.model.provider,
        report.model.model,
        render(&report.summary),
        databases_text(&report.database_hashes)
    )
}

/// What a SParC run asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SparcSettings {
    /// Interactions sampled (all when None), by a shuffle seeded with `seed`.
    pub sample: Option<usize>,
    /// Interactions of the shuffle skipped before the sample is taken: a sample at
    /// offset N shares no interaction with one of N or fewer at offset 0 (a tuning
    /// sample beside the published one).
    #[serde(default)]
    pub sample_offset: usize,
    pub seed: u64,
    /// At most this many interactions of the sample.
    pub limit: Option<usize>,
    pub strategy: String,
    pub row_cap: u64,
}

/// Asks the sampled interactions from `data_dir` in every mode, writing each turn's
/// record to `turns.jsonl` and the figures to `summary.json` in a new folder below
/// `runs_root/sparc/` (or, with `resume`, in that folder, with its own settings, asking
/// only what it lacks). An interaction's turns in one mode are written together once
/// all are asked, so a run stopped (Ctrl-C, a crash) resumes at a whole interaction.
/// Returns the folder and the report written to its `summary.json`.
pub async fn run(
    settings: &SparcSettings,
    client: &ModelClient,
    data_dir: &Path,
    runs_root: &Path,
    resume: Option<&Path>,
) -> Result<(PathBuf, SparcReport), EvalError> {
    let (dir, settings) = match resume {
        Some(dir) => {
            let path = dir.join("settings.json");
            let text = std::fs::read_to_string(&path).map_err(|error| EvalError::Read {
                path: path.display().to_string(),
                error,
            })?;
            let settings: SparcSettings = serde_json::from_str(&text)
                .map_err(|error| EvalError::Data(format!("{}: {error}", path.display())))?;
            (dir.to_path_buf(), settings)
        }
        None => {
            let (_, stamp) = crate::calendar::utc_now();
            let dir = runs_root.join("sparc").join(stamp);
            std::fs::create_dir_all(&dir).map_err(|error| write_error(&dir, error))?;
            let path = dir.join("settings.json");
            let text = serde_json::to_vec_pretty(settings)
                .map_err(|error| EvalError::Data(error.to_string()))?;
            std::fs::write(&path, text).map_err(|error| write_error(&path, error))?;
            (dir, settings.clone())
        }
    };
    let mut interactions = sample(
        load_sparc(data_dir)?,
        settings.sample,
        settings.sample_offset,
        settings.seed,
    );
    if let Some(limit) = settings.limit {
        interactions.truncate(limit);
    }
    let strategy = Strategy::recorded(&settings.strategy)
        .map_err(|error| EvalError::Data(error.to_string()))?;
    let before_path = dir.join(DATABASES_BEFORE_FILE);
    let before: BTreeMap<String, String> = match std::fs::read_to_string(&before_path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|error| EvalError::Data(format!("{}: {error}", before_path.display())))?,
        Err(_) => {
            let hashes = hash_databases(data_dir, &interactions);
            let text = serde_json::to_vec_pretty(&hashes)
                .map_err(|error| EvalError::Data(error.to_string()))?;
            std::fs::write(&before_path, text).map_err(|error| write_error(&before_path, error))?;
            hashes
        }
    };
    let records_path = dir.join(TURNS_FILE);
    let mut records = whole_groups(&records_path, &interactions)?;
    let mut file = open_records(&records_path)?;
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let mut agents: HashMap<String, Agent> = HashMap::new();
    'interactions: for interaction in &interactions {
        let done: Vec<SparcMode> = SparcMode::ALL
            .into_iter()
            .filter(|mode| {
                records
                    .iter()
                    .any(|record| record.interaction == interaction.id && record.mode == *mode)
            })
            .collect();
        if done.len() == SparcMode::ALL.len() {
            continue;
        }
        if !agents.contains_key(&interaction.db_name) {
            let db = format!(
                "sqlite:{}",
                spiderman_db_path(data_dir, &interaction.db_name).display()
            );
            let gate = open_eval_gate(&db, settings.row_cap).await?;
            let agent = open_eval_agent(gate, client, strategy, &db).await?;
            // Both prompts' prefixes read once per database, outside every latency.
            warm_up(&agent, &db, &[Mode::Agent, Mode::Plain], &dir).await?;
            agents.insert(interaction.db_name.clone(), agent);
        }
        let Some(agent) = agents.get(&interaction.db_name) else {
            continue;
        };
        let golds = gold_rows(agent.gate(), interaction).await;
        for mode in SparcMode::ALL {
            if done.contains(&mode) {
                continue;
            }
            // The agent's and the plain prompt take turns: each interaction's prefix is
            // put back from the server's saved copy first, as a server answering one
            // prompt keeps it cached (a no-op where the provider saves none).
            agent.restore_prefix(mode == SparcMode::Plain).await;
            let asked = tokio::select! {
                asked = ask_interaction(agent, interaction, mode, &golds) => asked,
                _ = &mut interrupted => {
                    eprintln!("\ninterrupted: resume with --resume {}", dir.display());
                    break 'interactions;
                }
            };
            for record in asked {
                append_record(&mut file, &records_path, &record)?;
                records.push(record);
            }
        }
        eprint!(".");
    }
    eprintln!();
    let summary = summarize(&records);
    let after = hash_databases(data_dir, &interactions);
    let summary_path = dir.join("summary.json");
    let report = SparcReport {
        finished_at: crate::calendar::utc_now().0,
        askdb_version: env!("CARGO_PKG_VERSION").to_string(),
        model: model_info(client),
        settings,
        summary,
        database_hashes: before
            .into_iter()
            .map(|(db, hash)| {
                let now = after.get(&db).cloned();
                (db, (hash, now))
            })
            .collect(),
    };
    let text =
        serde_json::to_vec_pretty(&report).map_err(|error| EvalError::Data(error.to_string()))?;
    std::fs::write(&summary_path, text).map_err(|error| write_error(&summary_path, error))?;
    Ok((dir, report))
}

/// The records of a run folder whose interaction was asked whole in its mode; the file
/// is rewritten without any other (a stop between an interaction's turns).
fn whole_groups(path: &Path, interactions: &[Interaction]) -> Result<Vec<TurnRecord>, EvalError> {
    let read: Vec<TurnRecord> = read_lines(path)?;
    let turns: HashMap<&str, usize> = interactions
        .iter()
        .map(|interaction| (interaction.id.as_str(), interaction.turns.len()))
        .collect();
    let mut counts: HashMap<(&str, SparcMode), usize> = HashMap::new();
    for record in &read {
        *counts
            .entry((record.interaction.as_str(), record.mode))
            .or_default() += 1;
    }
    let whole = |record: &TurnRecord| {
        counts
            .get(&(record.interaction.as_str(), record.mode))
            .copied()
            == turns.get(record.interaction.as_str()).copied()
    };
    let kept: Vec<TurnRecord> = read
        .iter()
        .filter(|record| whole(record))
        .cloned()
        .collect();
    if kept.len() != read.len() {
        let mut text = String::new();
        for record in &kept {
            let line = serde_json::to_string(record)
                .map_err(|error| EvalError::Data(error.to_string()))?;
            text.push_str(&line);
            text.push('\n');
        }
        std::fs::write(path, text).map_err(|error| write_error(path, error))?;
    }
    Ok(kept)
}

#[cfg(test)]
mod tests;
