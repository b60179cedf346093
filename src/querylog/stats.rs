//! `askdb log stats`: what to watch in the query log, computed from its rows: error
//! types by frequency, give-up and refusal rates, mean attempts per success by day, and
//! runs of zero-row answers (an answer with no rows, several times in a row, is the
//! commonest sign that the data or the schema moved under the notes). `--user NAME`
//! computes them over one signed-in user's questions ([`read`]'s filter).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use super::{connect_postgres, LogError};
use crate::gate::QUERY_LOG_TABLE;

/// Where `askdb log stats` reads: a PostgreSQL or MySQL URL that may read the log (not
/// the log role, which may only insert), or askdb's SQLite log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogSource {
    Postgres(String),
    /// A `mysql://` or `mariadb://` URL.
    Mysql(String),
    Sqlite(PathBuf),
}

/// One row as the statistics need it.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRow {
    /// `YYYY-MM-DD HH:MM:SS`, UTC.
    pub asked_at: String,
    pub decision: String,
    pub attempts: Option<i64>,
    pub error_types: Vec<String>,
    pub row_count: Option<i64>,
}

/// How often one error type occurred.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorCount {
    pub error_type: String,
    pub count: u64,
}

/// One day's answers and their mean attempts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayAttempts {
    pub day: String,
    pub answers: u64,
    pub mean_attempts: f64,
}

/// Consecutive answers that returned no rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ZeroRowRun {
    pub first_at: String,
    pub last_at: String,
    pub answers: u64,
}

/// What `askdb log stats` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogStats {
    /// The one user whose questions these are (`--user`); None: everyone's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    pub questions: u64,
    pub decisions: BTreeMap<String, u64>,
    /// Given up / questions.
    pub give_up_rate: f64,
    /// Declined / questions.
    pub refusal_rate: f64,
    pub clarify_rate: f64,
    /// Every failed attempt's type, commonest first.
    pub error_types: Vec<ErrorCount>,
    pub attempts_per_success_by_day: Vec<DayAttempts>,
    /// Runs of at least two consecutive zero-row answers, longest first.
    pub zero_row_runs: Vec<ZeroRowRun>,
    /// Answers that returned no rows, of all answers.
    pub zero_row_answers: u64,
}

/// The decisions a question can end with, as the log's rows spell them; other rows (the
/// setup's proof) are skipped. The query log sits below the agent, so it cannot name
/// `agent::Decision`; `server::monitor`, which writes the rows with
/// `Decision::as_str`, holds this list equal to `Decision::ALL` in a test.
pub const DECISIONS: [&str; 4] = ["answer", "clarify", "decline", "give_up"];

// The names of [`DECISIONS`] the figures are computed from.
const ANSWER: &str = DECISIONS[0];
const CLARIFY: &str = DECISIONS[1];
const DECLINE: &str = DECISIONS[2];
const GIVE_UP: &str = DECISIONS[3];

/// The shortest run of zero-row answers reported.
pub const MIN_ZERO_RUN: u64 = 2;

fn rate(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The figures over rows in the order they were asked.
pub fn compute(rows: &[LogRow]) -> LogStats {
    let rows: Vec<&LogRow> = rows
        .iter()
        .filter(|row| DECISIONS.contains(&row.decision.as_str()))
        .collect();
    let questions = rows.len() as u64;
    let mut decisions: BTreeMap<String, u64> = BTreeMap::new();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut days: BTreeMap<String, (u64, i64)> = BTreeMap::new();
    let mut runs: Vec<ZeroRowRun> = Vec::new();
    let mut current: Option<ZeroRowRun> = None;
    let mut zero_row_answers = 0;
    for row in &rows {
        *decisions.entry(row.decision.clone()).or_default() += 1;
        for error in &row.error_types {
            *errors.entry(error.clone()).or_default() += 1;
        }
        if row.decision != ANSWER {
            continue;
        }
        let day: String = row.asked_at.chars().take(10).collect();
        let entry = days.entry(day).or_default();
        entry.0 += 1;
        entry.1 += row.attempts.unwrap_or(1);
        if row.row_count == Some(0) {
            zero_row_answers += 1;
            match current.as_mut() {
                Some(run) => {
                    run.answers += 1;
                    run.last_at = row.asked_at.clone();
                }
                None => {
                    current = Some(ZeroRowRun {
                        first_at: row.asked_at.clone(),
                        last_at: row.asked_at.clone(),
                        answers: 1,
                    })
                }
            }
        } else if let Some(run) = current.take() {
            runs.push(run);
        }
    }
    runs.extend(current);
    runs.retain(|run| run.answers >= MIN_ZERO_RUN);
    runs.sort_by(|a, b| b.answers.cmp(&a.answers).then(a.first_at.cmp(&b.first_at)));
    let mut error_types: Vec<ErrorCount> = errors
        .into_iter()
        .map(|(error_type, count)| ErrorCount { error_type, count })
        .collect();
    error_types.sort_by(|a, b| b.count.cmp(&a.count).then(a.error_type.cmp(&b.error_type)));
    let count = |decision: &str| decisions.get(decision).copied().unwrap_or(0);
    let (give_up_rate, refusal_rate, clarify_rate) = (
        rate(count(GIVE_UP), questions),
        rate(count(DECLINE), questions),
        rate(count(CLARIFY), questions),
    );
    LogStats {
        user: None,
        questions,
        give_up_rate,
        refusal_rate,
        clarify_rate,
        decisions,
        error_types,
        attempts_per_success_by_day: days
            .into_iter()
            .map(|(day, (answers, attempts))| DayAttempts {
                day,
                answers,
                mean_attempts: rate(u64::try_from(attempts).unwrap_or(0), answers),
            })
            .collect(),
        zero_row_runs: runs,
        zero_row_answers,
    }
}

/// The figures as text.
pub fn render(stats: &LogStats) -> String {
    let mut out = String::new();
    match &stats.user {
        Some(user) => {
            let _ = writeln!(out, "questions asked by {user}: {}", stats.questions);
        }
        None => {
            let _ = writeln!(out, "questions: {}", stats.questions);
        }
    }
    let decisions: Vec<String> = stats
        .decisions
        .iter()
        .map(|(decision, count)| format!("{decision} {count}"))
        .collect();
    let _ = writeln!(out, "decisions: {}", decisions.join(", "));
    let _ = writeln!(
        out,
        "give-up rate: {:.1}%\nrefusal rate: {:.1}%\nclarify rate: {:.1}%",
        stats.give_up_rate * 100.0,
        stats.refusal_rate * 100.0,
        stats.clarify_rate * 100.0
    );
    let _ = writeln!(out, "error types by frequency:");
    if stats.error_types.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for error in &stats.error_types {
        let _ = writeln!(out, "  {:<24} {}", error.error_type, error.count);
    }
    let _ = writeln!(out, "mean attempts per success, by day (UTC):");
    if stats.attempts_per_success_by_day.is_empty() {
        let _ = writeln!(out, "  (no answers)");
    }
    for day in &stats.attempts_per_success_by_day {
        let _ = writeln!(
            out,
            "  {}  {:.2} over {} answer(s)",
            day.day, day.mean_attempts, day.answers
        );
    }
    let _ = writeln!(
        out,
        "zero-row answers: {} (runs of {MIN_ZERO_RUN} or more in a row: {})",
        stats.zero_row_answers,
        stats.zero_row_runs.len()
    );
    for run in &stats.zero_row_runs {
        let _ = writeln!(
            out,
            "  {} answers in a row, {} .. {}",
            run.answers, run.first_at, run.last_at
        );
    }
    out
}

pub(super) fn split_error_types(text: Option<String>) -> Vec<String> {
    text.map(|text| {
        text.split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// Every row of the log, oldest first; only `user`'s questions when one is named (the
/// name is a bound parameter, never SQL text).
pub async fn read(source: &LogSource, user: Option<&str>) -> Result<Vec<LogRow>, LogError> {
    match source {
        LogSource::Postgres(url) => {
            let client = connect_postgres(url).await?;
            let only_user = if user.is_some() {
                "WHERE user_name = $1 "
            } else {
                ""
            };
            let sql = format!(
                "SELECT to_char(asked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), \
                 coalesce(decision, ''), attempts::bigint, coalesce(error_types, error_type), \
                 row_count FROM {QUERY_LOG_TABLE} {only_user}ORDER BY asked_at, id"
            );
            let fail =
                |error: tokio_postgres::Error| LogError::Read(crate::text::error_chain(&error));
            let mut rows = Vec::new();
            let found = match user {
                Some(user) => client.query(sql.as_str(), &[&user]).await,
                None => client.query(sql.as_str(), &[]).await,
            };
            for row in found.map_err(fail)? {
                rows.push(LogRow {
                    asked_at: row.try_get(0).map_err(fail)?,
                    decision: row.try_get(1).map_err(fail)?,
                    attempts: row.try_get(2).map_err(fail)?,
                    error_types: split_error_types(row.try_get(3).map_err(fail)?),
                    row_count: row.try_get(4).map_err(fail)?,
                });
            }
            Ok(rows)
        }
        LogSource::Mysql(url) => super::mysql::read_rows(url, user).await,
        LogSource::Sqlite(path) => {
            let path = path.clone();
            let user = user.map(str::to_string);
            tokio::task::spawn_blocking(move || read_sqlite(&path, user.as_deref()))
                .await
                .map_err(|error| LogError::Read(error.to_string()))?
        }
    }
}

fn read_sqlite(path: &std::path::Path, user: Option<&str>) -> Result<Vec<LogRow>, LogError> {
    let fail = |error: rusqlite::Error| LogError::Read(format!("{}: {error}", path.display()));
    let connection =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(fail)?;
    let only_user = if user.is_some() {
        "WHERE user_name = ?1 "
    } else {
        ""
    };
    let sql = format!(
        "SELECT asked_at, coalesce(decision, ''), attempts, coalesce(error_types, error_type), \
         row_count FROM {QUERY_LOG_TABLE} {only_user}ORDER BY asked_at, id"
    );
    let mut statement = connection.prepare(&sql).map_err(fail)?;
    let parameters: Vec<&dyn rusqlite::ToSql> = match &user {
        Some(user) => vec![user as &dyn rusqlite::ToSql],
        None => Vec::new(),
    };
    let rows = statement
        .query_map(parameters.as_slice(), |row| {
            Ok(LogRow {
                asked_at: row.get(0)?,
                decision: row.get(1)?,
                attempts: row.get(2)?,
                error_types: split_error_types(row.get(3)?),
                row_count: row.get(4)?,
            })
        })
        .map_err(fail)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(fail)
}
