//! Verified examples: questions about one database that a person confirmed, each with
//! the SQL that answered it. They are askdb's own state, kept beside the query log and
//! never in the database being asked about, and keyed by a stable identity of that
//! database ([`database_identity`]).
//!
//! An example only enters through [`save`], which a person's action calls (`askdb
//! examples add|import`, the HTTP route); nothing saves an example because it ran. Its
//! SQL passes the gate's parser check and database check when it is saved, and again
//! whenever the examples are read for use ([`recheck`]): an example the guard now
//! refuses, or whose tables changed since it was verified (the drift snapshot's
//! comparison), is set aside with the reason, kept for a person to see, and never
//! returned by [`usable`]. Storage is behind [`store::ExampleStore`]; retrieval is the
//! pure [`retrieval::rank`]; reading JSONL and CSV files is [`import`]. Answers a person
//! marked wrong, with the examples they used, are kept beside the examples ([`wrong`]).

pub mod import;
pub mod postgres;
pub mod retrieval;
pub mod store;
pub mod wrong;

use serde::{Deserialize, Serialize};

use crate::drift::{self, Snapshot, SnapshotTable};
use crate::gate::{Gate, Refusal, RefusalReason};
use crate::schema::SchemaNotes;
pub use postgres::PostgresExampleStore;
pub use store::{ExampleStore, MemoryExampleStore, SqliteExampleStore, StoreFuture};
pub use wrong::{CausedWrong, CheckedMark, WrongDraft, WrongMark};

/// The longest question an example may hold: the agent's own limit
/// (`agent::MAX_QUESTION_CHARS`), since a longer one could never be asked.
pub const MAX_QUESTION_CHARS: usize = 2_000;

/// The longest note an example may carry.
pub const MAX_NOTES_CHARS: usize = 1_000;

/// The longest name of the person who verified an example.
pub const MAX_VERIFIER_CHARS: usize = 200;

/// One verified example as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    pub id: i64,
    /// The identity of the database it answers ([`database_identity`]).
    pub database: String,
    pub question: String,
    /// The SQL as the gate checked and rendered it (the text that runs, LIMIT included).
    pub sql: String,
    /// Who confirmed it.
    pub verified_by: String,
    /// `YYYY-MM-DD HH:MM:SS` UTC.
    pub verified_at: String,
    /// The drift snapshot's fingerprint of the whole schema when it was verified.
    pub schema_fingerprint: String,
    /// The tables its SQL reads, as the guard found them.
    pub tables: Vec<String>,
    /// What a reader should know ("revenue excludes refunds").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Why it is no longer used, when it was set aside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_aside: Option<String>,
    /// Its tables as the drift snapshot saw them when it was verified: what a later
    /// schema is compared with.
    #[serde(skip)]
    pub verified_against: Vec<SnapshotTable>,
}

/// What a person submits as an example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Draft {
    pub question: String,
    pub sql: String,
    pub verified_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

/// An example whose SQL the gate has just checked: only [`prepare`] makes one (its field
/// is private), and a store writes only these, so nothing reaches a store unchecked.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedExample {
    example: Example,
}

impl CheckedExample {
    pub fn example(&self) -> &Example {
        &self.example
    }
}

/// A saved example and the earlier examples of the same question it replaced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Saved {
    pub example: Example,
    pub replaced: Vec<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    #[error("the example's {0} is empty")]
    Empty(&'static str),
    #[error("the example's {field} is {length} characters long; the limit is {limit}")]
    TooLong {
        field: &'static str,
        length: usize,
        limit: usize,
    },
    /// The gate refused the example's SQL: a restricted column, a hidden table, a write.
    #[error("the guard refused the example's SQL: {0}")]
    Refused(Refusal),
    #[error("no example {0} for this database")]
    NotFound(i64),
    /// A wrong mark named examples this database does not have (or that the user's
    /// policy hides).
    #[error("no example {} for this database", ids_text(.0))]
    UnknownExamples(Vec<i64>),
    #[error("an answer uses at most {limit} examples; {count} were named")]
    TooManyExamples { count: usize, limit: usize },
    #[error("the examples store {store}: {error}")]
    Store { store: String, error: String },
}

impl ExampleError {
    /// The guard's reason, when the gate refused the SQL.
    pub fn refusal_reason(&self) -> Option<RefusalReason> {
        match self {
            ExampleError::Refused(refusal) => Some(refusal.reason),
            _ => None,
        }
    }
}

/// Ids as a person reads them: `3, 7`.
fn ids_text(ids: &[i64]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A stable identity of the database behind a gate's label, the same for every process
/// and replica that opens it: `demo`; `sqlite:` and the file's canonical path; a
/// PostgreSQL URL's host, port and database, without user, password or parameters (two
/// roles reading one database share its examples).
pub fn database_identity(label: &str) -> String {
    if let Some(path) = label.strip_prefix("sqlite:") {
        let canonical = std::fs::canonicalize(path)
            .map(|path| path.display().to_string())
            .unwrap_or_else(|_| path.to_string());
        return format!("sqlite:{canonical}");
    }
    let Some((scheme, rest)) = label.split_once("://") else {
        return label.to_string();
    };
    let scheme = if scheme == "postgresql" {
        "postgres"
    } else {
        scheme
    };
    let without_query = rest.split(['?', '#']).next().unwrap_or(rest);
    let (authority, path) = match without_query.find('/') {
        Some(index) => without_query.split_at(index),
        None => (without_query, ""),
    };
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}{path}")
}

/// The words of a question as two examples are told apart: lower-cased, split on
/// anything not a letter or digit.
pub fn normalise_question(question: &str) -> String {
    crate::words::words(question, crate::words::Split::Identifier).join(" ")
}

fn bounded(field: &'static str, text: &str, limit: usize) -> Result<String, ExampleError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ExampleError::Empty(field));
    }
    let length = text.chars().count();
    if length > limit {
        return Err(ExampleError::TooLong {
            field,
            length,
            limit,
        });
    }
    Ok(text.to_string())
}

/// The gate's two checks of an example's SQL: the parser check, then the database's own
/// resolution judged by the guard. Nothing runs.
async fn gate_checked(gate: &Gate, sql: &str) -> Result<crate::gate::CheckedQuery, Refusal> {
    let checked = gate.check(sql)?;
    gate.verify(&checked).await?;
    Ok(checked)
}

/// A draft checked and made into an example of `gate`'s database (not stored yet).
pub async fn prepare(gate: &Gate, draft: &Draft) -> Result<CheckedExample, ExampleError> {
    let question = bounded("question", &draft.question, MAX_QUESTION_CHARS)?;
    let verified_by = bounded("verified_by", &draft.verified_by, MAX_VERIFIER_CHARS)?;
    let notes = match draft.notes.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(notes) => Some(bounded("notes", notes, MAX_NOTES_CHARS)?),
    };
    if draft.sql.trim().is_empty() {
        return Err(ExampleError::Empty("sql"));
    }
    let checked = gate_checked(gate, &draft.sql)
        .await
        .map_err(ExampleError::Refused)?;
    let live = drift::snapshot(gate);
    let tables = checked.tables().to_vec();
    let example = Example {
        id: 0,
        database: database_identity(gate.label()),
        question,
        sql: checked.sql().to_string(),
        verified_by,
        verified_at: crate::calendar::utc_now().0,
        schema_fingerprint: drift::fingerprint(&live.tables),
        verified_against: drift::tables_named(&live, &tables),
        tables,
        notes,
        set_aside: None,
    };
    Ok(CheckedExample { example })
}

/// Saves one example a person confirmed: checked by the gate ([`prepare`]), then stored;
/// an earlier example of the same question (same words) is replaced, since the newer
/// confirmation is the one to follow.
pub async fn save(
    gate: &Gate,
    store: &dyn ExampleStore,
    draft: &Draft,
) -> Result<Saved, ExampleError> {
    let mut saved = save_all(gate, store, std::slice::from_ref(draft)).await?;
    saved.pop().ok_or_else(|| ExampleError::Store {
        store: store.describe(),
        error: "the store saved nothing".to_string(),
    })
}

/// Saves several examples at once, all or none: every draft is checked first, and the
/// first refusal saves nothing. Within the drafts, a later one of the same question
/// wins.
pub async fn save_all(
    gate: &Gate,
    store: &dyn ExampleStore,
    drafts: &[Draft],
) -> Result<Vec<Saved>, ExampleError> {
    let mut prepared = Vec::with_capacity(drafts.len());
    for draft in drafts {
        prepared.push(prepare(gate, draft).await?);
    }
    save_checked(gate, store, prepared).await
}

/// Stores examples the gate checked ([`prepare`]) in one write, each replacing the
/// earlier examples of its question.
pub async fn save_checked(
    gate: &Gate,
    store: &dyn ExampleStore,
    prepared: Vec<CheckedExample>,
) -> Result<Vec<Saved>, ExampleError> {
    // A later confirmation of the same question in one batch is the one kept.
    let keys: Vec<String> = prepared
        .iter()
        .map(|checked| normalise_question(&checked.example.question))
        .collect();
    let prepared: Vec<CheckedExample> = prepared
        .into_iter()
        .enumerate()
        .filter(|(index, _)| !keys[index + 1..].contains(&keys[*index]))
        .map(|(_, checked)| checked)
        .collect();
    let database = database_identity(gate.label());
    let existing = store.list(&database).await?;
    let mut replacing = Vec::new();
    let mut replaced_by: Vec<Vec<i64>> = Vec::with_capacity(prepared.len());
    for checked in &prepared {
        let key = normalise_question(&checked.example.question);
        // Only what the saving gate may see is replaced: a user under a narrower
        // policy cannot overwrite (or learn of) an example whose SQL their guard
        // refuses. One already set aside is replaced by the new confirmation.
        let ids: Vec<i64> = existing
            .iter()
            .filter(|old| normalise_question(&old.question) == key)
            .filter(|old| old.set_aside.is_some() || gate.check(&old.sql).is_ok())
            .map(|old| old.id)
            .collect();
        replacing.extend(ids.iter().copied());
        replaced_by.push(ids);
    }
    let ids = store.write(&database, &prepared, &replacing).await?;
    Ok(prepared
        .into_iter()
        .zip(ids)
        .zip(replaced_by)
        .map(|((checked, id), replaced)| {
            let mut example = checked.example;
            example.id = id;
            Saved { example, replaced }
        })
        .collect())
}

/// Why an example can no longer be used on the schema behind `gate` (`live`, whose
/// fingerprint is `live_fingerprint`), or None.
async fn reason_to_set_aside(
    gate: &Gate,
    live: &Snapshot,
    live_fingerprint: &str,
    example: &Example,
) -> Option<String> {
    if let Err(refusal) = gate_checked(gate, &example.sql).await {
        return Some(format!("the guard now refuses its SQL: {refusal}"));
    }
    if live_fingerprint == example.schema_fingerprint {
        return None;
    }
    let saved = Snapshot {
        tables: example.verified_against.clone(),
        ..live.clone()
    };
    // Only the example's own tables are compared: a change elsewhere cannot make its
    // SQL wrong. The notes' columns are drift of the notes, not of the example.
    let differences = drift::compare(&saved, live, &SchemaNotes::default(), |_, _| false);
    (!differences.is_empty()).then(|| {
        let what: Vec<String> = differences.iter().map(ToString::to_string).collect();
        format!(
            "its tables changed since it was verified: {}",
            what.join("; ")
        )
    })
}

/// Every example of `gate`'s database, each in-use one checked again against today's
/// gate and schema: those that fail are set aside in the store with their reason.
pub async fn recheck(gate: &Gate, store: &dyn ExampleStore) -> Result<Vec<Example>, ExampleError> {
    let database = database_identity(gate.label());
    let mut examples = store.list(&database).await?;
    if examples.iter().all(|example| example.set_aside.is_some()) {
        return Ok(examples);
    }
    let live = drift::snapshot(gate);
    let live_fingerprint = drift::fingerprint(&live.tables);
    for example in &mut examples {
        if example.set_aside.is_some() {
            continue;
        }
        if let Some(reason) = reason_to_set_aside(gate, &live, &live_fingerprint, example).await {
            store.set_aside(&database, example.id, &reason).await?;
            example.set_aside = Some(reason);
        }
    }
    Ok(examples)
}

/// The examples that may be used for questions on `gate`'s database now: [`recheck`]ed,
/// set-aside ones left out.
pub async fn usable(gate: &Gate, store: &dyn ExampleStore) -> Result<Vec<Example>, ExampleError> {
    Ok(recheck(gate, store)
        .await?
        .into_iter()
        .filter(|example| example.set_aside.is_none())
        .collect())
}

/// Removes one example of `gate`'s database. An example whose SQL `gate` refuses (one a
/// narrower policy hides) is not found, as an unknown id is: a user cannot remove, or
/// learn of, what their guard does not let them see.
pub async fn remove(gate: &Gate, store: &dyn ExampleStore, id: i64) -> Result<(), ExampleError> {
    let database = database_identity(gate.label());
    let hidden = store
        .list(&database)
        .await?
        .iter()
        .any(|example| example.id == id && gate.check(&example.sql).is_err());
    if hidden {
        return Err(ExampleError::NotFound(id));
    }
    if store.remove(&database, id).await? {
        Ok(())
    } else {
        Err(ExampleError::NotFound(id))
    }
}

#[cfg(test)]
mod tests;
