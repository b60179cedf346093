//! Answers a person marked wrong, and the verified examples those answers used: what
//! `askdb examples list --caused-wrong` counts, so a bad example can be found from the
//! wrong answers it led to and removed (decision 0084).
//!
//! A mark is kept beside the examples, in the same store ([`super::ExampleStore`]):
//! askdb's own SQLite file for one process, `askdb_state.wrong_marks` for replicas;
//! never in the database being asked about. Marking never saves, changes or sets aside
//! an example: it only records what a person said about one answer. The examples a mark
//! names must be examples of the database, visible through the marking user's gate, so
//! a made-up id cannot be blamed and a policy's hidden example cannot be probed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{bounded, database_identity, recheck, Example, ExampleError, ExampleStore};
use super::{MAX_QUESTION_CHARS, MAX_VERIFIER_CHARS};
use crate::gate::Gate;

/// The most examples one mark may name: a question uses at most a few (the three best
/// and a re-run), so a longer list is not an answer's.
pub const MAX_EXAMPLES_PER_MARK: usize = 16;

/// The longest SQL a mark may carry: the guard's own bound on a statement's size, since
/// an answer's SQL passed it.
pub const MAX_MARK_SQL_CHARS: usize = crate::gate::guard::MAX_SQL_BYTES;

/// One answer a person marked wrong, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrongMark {
    pub id: i64,
    /// The identity of the database it was asked about ([`database_identity`]).
    pub database: String,
    /// The question as the answer understood it.
    pub question: String,
    /// The SQL the answer ran, when the page sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
    /// The verified examples the answer used (shown to the model or run again).
    pub examples: Vec<i64>,
    /// Who marked it.
    pub marked_by: String,
    /// `YYYY-MM-DD HH:MM:SS` UTC.
    pub marked_at: String,
}

/// What a person submits when they mark an answer wrong: the body of `POST
/// /api/answers/wrong` as it is read (a field it does not know is refused) and what
/// `askdb examples` builds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WrongDraft {
    /// The question as the answer understood it.
    pub question: String,
    /// The SQL the answer ran.
    #[serde(default)]
    pub sql: Option<String>,
    /// The ids of the verified examples the answer used (its `examples`).
    #[serde(default)]
    pub examples: Vec<i64>,
    /// The person marking it: required, so no mark is made without one.
    pub marked_by: String,
}

/// A mark whose fields were bounded and whose examples were found: only [`prepare`]
/// makes one (its field is private), and a store records only these.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedMark {
    mark: WrongMark,
}

impl CheckedMark {
    pub fn mark(&self) -> &WrongMark {
        &self.mark
    }
}

/// One example that answers marked wrong used: how many, and the latest of them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CausedWrong {
    pub example: Example,
    /// How many answers marked wrong used it.
    pub wrong_answers: usize,
    /// The latest of those answers' question, who marked it and when.
    pub latest_question: String,
    pub latest_marked_by: String,
    pub latest_marked_at: String,
}

/// A draft checked against `gate`'s database and the examples `store` holds for it
/// (not stored yet). An id that is not an example of this database, or whose SQL
/// `gate` refuses (a narrower policy's hidden example), is refused by its number.
pub async fn prepare(
    gate: &Gate,
    store: &dyn ExampleStore,
    draft: &WrongDraft,
) -> Result<CheckedMark, ExampleError> {
    let question = bounded("question", &draft.question, MAX_QUESTION_CHARS)?;
    let marked_by = bounded("marked_by", &draft.marked_by, MAX_VERIFIER_CHARS)?;
    let sql = match draft.sql.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(sql) => Some(bounded("sql", sql, MAX_MARK_SQL_CHARS)?),
    };
    let mut examples = draft.examples.clone();
    examples.sort_unstable();
    examples.dedup();
    if examples.len() > MAX_EXAMPLES_PER_MARK {
        return Err(ExampleError::TooManyExamples {
            count: examples.len(),
            limit: MAX_EXAMPLES_PER_MARK,
        });
    }
    let database = database_identity(gate.label());
    if !examples.is_empty() {
        let known = store.list(&database).await?;
        let unknown: Vec<i64> = examples
            .iter()
            .copied()
            .filter(|id| {
                !known
                    .iter()
                    .any(|example| example.id == *id && gate.check(&example.sql).is_ok())
            })
            .collect();
        if !unknown.is_empty() {
            return Err(ExampleError::UnknownExamples(unknown));
        }
    }
    Ok(CheckedMark {
        mark: WrongMark {
            id: 0,
            database,
            question,
            sql,
            examples,
            marked_by,
            marked_at: crate::calendar::utc_now().0,
        },
    })
}

/// Records that a person marked an answer wrong: checked ([`prepare`]), then stored.
/// Nothing about any example changes.
pub async fn mark(
    gate: &Gate,
    store: &dyn ExampleStore,
    draft: &WrongDraft,
) -> Result<WrongMark, ExampleError> {
    let checked = prepare(gate, store, draft).await?;
    let database = checked.mark.database.clone();
    let id = store.record_wrong(&database, &checked).await?;
    let mut mark = checked.mark;
    mark.id = id;
    Ok(mark)
}

/// The examples of `gate`'s database that answers marked wrong used, the most often
/// blamed first (then the most recently): each with its count and latest question.
/// Examples removed since are left out (there is nothing left to prune); set-aside ones
/// are kept, with their reason, since they still hold a place in the store.
pub async fn caused_wrong(
    gate: &Gate,
    store: &dyn ExampleStore,
) -> Result<Vec<CausedWrong>, ExampleError> {
    let database = database_identity(gate.label());
    let marks = store.wrong_marks(&database).await?;
    // Per example: the count and the latest mark, by time and then by id (a second's
    // resolution cannot order two clicks in one second).
    let mut blamed: BTreeMap<i64, (usize, &WrongMark)> = BTreeMap::new();
    for mark in &marks {
        for id in &mark.examples {
            let entry = blamed.entry(*id).or_insert((0, mark));
            entry.0 += 1;
            if (mark.marked_at.as_str(), mark.id) > (entry.1.marked_at.as_str(), entry.1.id) {
                entry.1 = mark;
            }
        }
    }
    if blamed.is_empty() {
        return Ok(Vec::new());
    }
    let mut listed: Vec<CausedWrong> = recheck(gate, store)
        .await?
        .into_iter()
        .filter_map(|example| {
            let (count, latest) = blamed.get(&example.id)?;
            Some(CausedWrong {
                wrong_answers: *count,
                latest_question: latest.question.clone(),
                latest_marked_by: latest.marked_by.clone(),
                latest_marked_at: latest.marked_at.clone(),
                example,
            })
        })
        .collect();
    listed.sort_by(|a, b| {
        b.wrong_answers
            .cmp(&a.wrong_answers)
            .then_with(|| b.latest_marked_at.cmp(&a.latest_marked_at))
            .then_with(|| a.example.id.cmp(&b.example.id))
    });
    Ok(listed)
}

#[cfg(test)]
mod tests;
