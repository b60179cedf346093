//! Where verified examples are kept: the [`ExampleStore`] trait, small enough that a
//! store shared by several replicas (PostgreSQL, in askdb's own schema) is one more
//! implementation (`examples::postgres`), and [`SqliteExampleStore`], one SQLite file in askdb's data directory
//! for a single process (beside the query log's file), and [`MemoryExampleStore`] for an
//! evaluation that keeps nothing. Every method is keyed by the
//! database's identity, so one store holds the examples of many databases.
//!
//! The store only keeps what it is given: the checks belong to `examples::save` and
//! `examples::recheck`, which are the only writers of examples. Beside the examples, a
//! store keeps the answers people marked wrong (`examples::wrong`), written only by
//! `wrong::mark`.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use super::wrong::{CheckedMark, WrongMark};
use super::{CheckedExample, Example, ExampleError};
use crate::drift::SnapshotTable;

/// The SQLite store's file name in askdb's data directory.
pub const SQLITE_EXAMPLES_FILE: &str = "examples.sqlite";

/// The table the SQLite store keeps examples in.
const TABLE: &str = "askdb_examples";

/// The table the SQLite store keeps answers marked wrong in; `examples` is a JSON array
/// of ids.
const WRONG_TABLE: &str = "askdb_wrong_marks";

/// How long a write waits for another process holding the file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What a store's method returns: a future, so a networked store can wait on its server.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ExampleError>> + Send + 'a>>;

/// A place verified examples are kept.
pub trait ExampleStore: Send + Sync {
    /// Where the store is, for messages (no password).
    fn describe(&self) -> String;

    /// Every example of one database, set-aside ones included, oldest first.
    fn list<'a>(&'a self, database: &'a str) -> StoreFuture<'a, Vec<Example>>;

    /// Stores `examples` (their ids ignored) and removes the examples `replacing` names,
    /// all in one transaction; the new ids in order. Only checked examples can be
    /// given: the gate's checks come before any store.
    fn write<'a>(
        &'a self,
        database: &'a str,
        examples: &'a [CheckedExample],
        replacing: &'a [i64],
    ) -> StoreFuture<'a, Vec<i64>>;

    /// Removes one example; false when the database has no example of that id.
    fn remove<'a>(&'a self, database: &'a str, id: i64) -> StoreFuture<'a, bool>;

    /// Marks one example as no longer used, with the reason.
    fn set_aside<'a>(&'a self, database: &'a str, id: i64, reason: &'a str) -> StoreFuture<'a, ()>;

    /// Records one answer a person marked wrong (its id ignored); the new id. Only a
    /// checked mark can be given (`wrong::prepare`).
    fn record_wrong<'a>(&'a self, database: &'a str, mark: &'a CheckedMark)
        -> StoreFuture<'a, i64>;

    /// Every answer of one database marked wrong, oldest first.
    fn wrong_marks<'a>(&'a self, database: &'a str) -> StoreFuture<'a, Vec<WrongMark>>;
}

/// Examples in one SQLite file (askdb's data directory by default).
#[derive(Debug, Clone)]
pub struct SqliteExampleStore {
    path: PathBuf,
}

impl SqliteExampleStore {
    pub fn new(path: impl Into<PathBuf>) -> SqliteExampleStore {
        SqliteExampleStore { path: path.into() }
    }

    /// The store in askdb's data directory.
    pub fn in_data_dir() -> SqliteExampleStore {
        SqliteExampleStore::new(crate::home::data_dir().join(SQLITE_EXAMPLES_FILE))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn fail(&self, error: impl std::fmt::Display) -> ExampleError {
        ExampleError::Store {
            store: self.describe(),
            error: error.to_string(),
        }
    }

    fn open(&self) -> Result<rusqlite::Connection, ExampleError> {
        if let Some(parent) = self
            .path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|error| self.fail(error))?;
        }
        let connection =
            rusqlite::Connection::open(&self.path).map_err(|error| self.fail(error))?;
        connection
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|error| self.fail(error))?;
        connection
            .execute(
                &format!(
                    "CREATE TABLE IF NOT EXISTS {TABLE} (\
                     id INTEGER PRIMARY KEY AUTOINCREMENT, database TEXT NOT NULL, \
                     question TEXT NOT NULL, sql TEXT NOT NULL, verified_by TEXT NOT NULL, \
                     verified_at TEXT NOT NULL, schema_fingerprint TEXT NOT NULL, \
                     tables TEXT NOT NULL, verified_against TEXT NOT NULL, notes TEXT, \
                     set_aside TEXT)"
                ),
                [],
            )
            .map_err(|error| self.fail(error))?;
        connection
            .execute(
                &format!(
                    "CREATE TABLE IF NOT EXISTS {WRONG_TABLE} (\
                     id INTEGER PRIMARY KEY AUTOINCREMENT, database TEXT NOT NULL, \
                     question TEXT NOT NULL, sql TEXT, examples TEXT NOT NULL, \
                     marked_by TEXT NOT NULL, marked_at TEXT NOT NULL)"
                ),
                [],
            )
            .map_err(|error| self.fail(error))?;
        Ok(connection)
    }

    /// Runs `work` on a fresh connection off the async runtime's threads.
    fn blocking<'a, T: Send + 'static>(
        &'a self,
        work: impl FnOnce(&SqliteExampleStore, &mut rusqlite::Connection) -> Result<T, ExampleError>
            + Send
            + 'static,
    ) -> StoreFuture<'a, T> {
        let store = self.clone();
        Box::pin(async move {
            let describe = store.describe();
            tokio::task::spawn_blocking(move || {
                let mut connection = store.open()?;
                work(&store, &mut connection)
            })
            .await
            .map_err(|error| ExampleError::Store {
                store: describe,
                error: error.to_string(),
            })?
        })
    }
}

fn read_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(Example, String, String)> {
    Ok((
        Example {
            id: row.get(0)?,
            database: row.get(1)?,
            question: row.get(2)?,
            sql: row.get(3)?,
            verified_by: row.get(4)?,
            verified_at: row.get(5)?,
            schema_fingerprint: row.get(6)?,
            tables: Vec::new(),
            notes: row.get(9)?,
            set_aside: row.get(10)?,
            verified_against: Vec::new(),
        },
        row.get(7)?,
        row.get(8)?,
    ))
}

/// The example with its two lists read from the JSON a store keeps them as (its tables,
/// and the schema it was verified against); the error says which example and list.
pub(crate) fn with_lists(
    mut example: Example,
    tables: &str,
    against: &str,
) -> Result<Example, String> {
    example.tables = serde_json::from_str(tables)
        .map_err(|error| format!("example {}: unreadable tables: {error}", example.id))?;
    example.verified_against =
        serde_json::from_str::<Vec<SnapshotTable>>(against).map_err(|error| {
            format!(
                "example {}: unreadable schema it was verified against: {error}",
                example.id
            )
        })?;
    Ok(example)
}

/// The example's two lists as the JSON a store keeps them as.
pub(crate) fn lists_of(example: &Example) -> Result<(String, String), String> {
    let tables = serde_json::to_string(&example.tables).map_err(|error| error.to_string())?;
    let against =
        serde_json::to_string(&example.verified_against).map_err(|error| error.to_string())?;
    Ok((tables, against))
}

impl ExampleStore for SqliteExampleStore {
    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn list<'a>(&'a self, database: &'a str) -> StoreFuture<'a, Vec<Example>> {
        // Reading never creates the file: a question asked where no one saved an
        // example leaves nothing behind.
        if !self.path.exists() {
            return Box::pin(async { Ok(Vec::new()) });
        }
        let database = database.to_string();
        self.blocking(move |store, connection| {
            let mut statement = connection
                .prepare(&format!(
                    "SELECT id, database, question, sql, verified_by, verified_at, \
                     schema_fingerprint, tables, verified_against, notes, set_aside \
                     FROM {TABLE} WHERE database = ?1 ORDER BY id"
                ))
                .map_err(|error| store.fail(error))?;
            let rows = statement
                .query_map([&database], read_row)
                .map_err(|error| store.fail(error))?;
            let mut examples = Vec::new();
            for row in rows {
                let (example, tables, against) = row.map_err(|error| store.fail(error))?;
                examples.push(
                    with_lists(example, &tables, &against).map_err(|error| store.fail(error))?,
                );
            }
            Ok(examples)
        })
    }

    fn write<'a>(
        &'a self,
        database: &'a str,
        examples: &'a [CheckedExample],
        replacing: &'a [i64],
    ) -> StoreFuture<'a, Vec<i64>> {
        let database = database.to_string();
        let examples: Vec<Example> = examples
            .iter()
            .map(|checked| checked.example().clone())
            .collect();
        let replacing = replacing.to_vec();
        self.blocking(move |store, connection| {
            let transaction = connection
                .transaction()
                .map_err(|error| store.fail(error))?;
            for id in &replacing {
                transaction
                    .execute(
                        &format!("DELETE FROM {TABLE} WHERE database = ?1 AND id = ?2"),
                        rusqlite::params![database, id],
                    )
                    .map_err(|error| store.fail(error))?;
            }
            let mut ids = Vec::with_capacity(examples.len());
            for example in &examples {
                let (tables, against) = lists_of(example).map_err(|error| store.fail(error))?;
                transaction
                    .execute(
                        &format!(
                            "INSERT INTO {TABLE} (database, question, sql, verified_by, \
                             verified_at, schema_fingerprint, tables, verified_against, notes, \
                             set_aside) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                        ),
                        rusqlite::params![
                            database,
                            example.question,
                            example.sql,
                            example.verified_by,
                            example.verified_at,
                            example.schema_fingerprint,
                            tables,
                            against,
                            example.notes,
                            example.set_aside,
                        ],
                    )
                    .map_err(|error| store.fail(error))?;
                ids.push(transaction.last_insert_rowid());
            }
            transaction.commit().map_err(|error| store.fail(error))?;
            Ok(ids)
        })
    }

    fn remove<'a>(&'a self, database: &'a str, id: i64) -> StoreFuture<'a, bool> {
        if !self.path.exists() {
            return Box::pin(async { Ok(false) });
        }
        let database = database.to_string();
        self.blocking(move |store, connection| {
            connection
                .execute(
                    &format!("DELETE FROM {TABLE} WHERE database = ?1 AND id = ?2"),
                    rusqlite::params![database, id],
                )
                .map(|changed| changed > 0)
                .map_err(|error| store.fail(error))
        })
    }

    fn set_aside<'a>(&'a self, database: &'a str, id: i64, reason: &'a str) -> StoreFuture<'a, ()> {
        let database = database.to_string();
        let reason = reason.to_string();
        self.blocking(move |store, connection| {
            connection
                .execute(
                    &format!("UPDATE {TABLE} SET set_aside = ?3 WHERE database = ?1 AND id = ?2"),
                    rusqlite::params![database, id, reason],
                )
                .map(|_| ())
                .map_err(|error| store.fail(error))
        })
    }
    fn record_wrong<'a>(
        &'a self,
        database: &'a str,
        mark: &'a CheckedMark,
    ) -> StoreFuture<'a, i64> {
        let database = database.to_string();
        let mark = mark.mark().clone();
        self.blocking(move |store, connection| {
            let examples =
                serde_json::to_string(&mark.examples).map_err(|error| store.fail(error))?;
            connection
                .execute(
                    &format!(
                        "INSERT INTO {WRONG_TABLE} (database, question, sql, examples, \
                         marked_by, marked_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
                    ),
                    rusqlite::params![
                        database,
                        mark.question,
                        mark.sql,
                        examples,
                        mark.marked_by,
                        mark.marked_at,
                    ],
                )
                .map_err(|error| store.fail(error))?;
            Ok(connection.last_insert_rowid())
        })
    }

    fn wrong_marks<'a>(&'a self, database: &'a str) -> StoreFuture<'a, Vec<WrongMark>> {
        // Reading never creates the file, as for the examples.
        if !self.path.exists() {
            return Box::pin(async { Ok(Vec::new()) });
        }
        let database = database.to_string();
        self.blocking(move |store, connection| {
            let mut statement = connection
                .prepare(&format!(
                    "SELECT id, database, question, sql, examples, marked_by, marked_at \
                     FROM {WRONG_TABLE} WHERE database = ?1 ORDER BY id"
                ))
                .map_err(|error| store.fail(error))?;
            let rows = statement
                .query_map([&database], |row| {
                    Ok((
                        WrongMark {
                            id: row.get(0)?,
                            database: row.get(1)?,
                            question: row.get(2)?,
                            sql: row.get(3)?,
                            examples: Vec::new(),
                            marked_by: row.get(5)?,
                            marked_at: row.get(6)?,
                        },
                        row.get::<_, String>(4)?,
                    ))
                })
                .map_err(|error| store.fail(error))?;
            let mut marks = Vec::new();
            for row in rows {
                let (mut mark, examples) = row.map_err(|error| store.fail(error))?;
                mark.examples = serde_json::from_str(&examples).map_err(|error| {
                    store.fail(format!(
                        "wrong mark {}: unreadable examples: {error}",
                        mark.id
                    ))
                })?;
                marks.push(mark);
            }
            Ok(marks)
        })
    }
}

/// Examples held in memory, for one process that keeps none on disk: the evaluation's
/// leave-one-out, which offers each question the others of its database.
#[derive(Debug, Default)]
pub struct MemoryExampleStore {
    state: std::sync::Mutex<MemoryState>,
}

#[derive(Debug, Default)]
struct MemoryState {
    next_id: i64,
    examples: Vec<Example>,
    marks: Vec<WrongMark>,
}

impl MemoryExampleStore {
    fn with_state<T>(&self, work: impl FnOnce(&mut MemoryState) -> T) -> T {
        match self.state.lock() {
            Ok(mut state) => work(&mut state),
            Err(poisoned) => work(&mut poisoned.into_inner()),
        }
    }

    /// Removes every example of one database.
    pub fn clear(&self, database: &str) {
        self.with_state(|state| state.examples.retain(|e| e.database != database));
    }
}

impl ExampleStore for MemoryExampleStore {
    fn describe(&self) -> String {
        "memory".to_string()
    }

    fn list<'a>(&'a self, database: &'a str) -> StoreFuture<'a, Vec<Example>> {
        let examples = self.with_state(|state| {
            state
                .examples
                .iter()
                .filter(|example| example.database == database)
                .cloned()
                .collect()
        });
        Box::pin(async move { Ok(examples) })
    }

    fn write<'a>(
        &'a self,
        database: &'a str,
        examples: &'a [CheckedExample],
        replacing: &'a [i64],
    ) -> StoreFuture<'a, Vec<i64>> {
        let ids = self.with_state(|state| {
            state
                .examples
                .retain(|e| !(e.database == database && replacing.contains(&e.id)));
            examples
                .iter()
                .map(|checked| {
                    state.next_id += 1;
                    let mut example = checked.example().clone();
                    example.id = state.next_id;
                    example.database = database.to_string();
                    state.examples.push(example);
                    state.next_id
                })
                .collect()
        });
        Box::pin(async move { Ok(ids) })
    }

    fn remove<'a>(&'a self, database: &'a str, id: i64) -> StoreFuture<'a, bool> {
        let removed = self.with_state(|state| {
            let before = state.examples.len();
            state
                .examples
                .retain(|e| !(e.database == database && e.id == id));
            state.examples.len() < before
        });
        Box::pin(async move { Ok(removed) })
    }

    fn set_aside<'a>(&'a self, database: &'a str, id: i64, reason: &'a str) -> StoreFuture<'a, ()> {
        self.with_state(|state| {
            for example in &mut state.examples {
                if example.database == database && example.id == id {
                    example.set_aside = Some(reason.to_string());
                }
            }
        });
        Box::pin(async { Ok(()) })
    }
    fn record_wrong<'a>(
        &'a self,
        database: &'a str,
        mark: &'a CheckedMark,
    ) -> StoreFuture<'a, i64> {
        let id = self.with_state(|state| {
            let id = state.marks.len() as i64 + 1;
            let mut mark = mark.mark().clone();
            mark.id = id;
            mark.database = database.to_string();
            state.marks.push(mark);
            id
        });
        Box::pin(async move { Ok(id) })
    }

    fn wrong_marks<'a>(&'a self, database: &'a str) -> StoreFuture<'a, Vec<WrongMark>> {
        let marks = self.with_state(|state| {
            state
                .marks
                .iter()
                .filter(|mark| mark.database == database)
                .cloned()
                .collect()
        });
        Box::pin(async move { Ok(marks) })
    }
}
