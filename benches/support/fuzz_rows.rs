//! The guard fuzzer's row comparison on SQLite: runs a statement on a read-only
//! connection with a time limit, and decides whether the rows of the guard's rendered
//! text are the rows the original text returns, given how the guard applied its row cap.
//!
//! The rule ([`compare`]), exact for what the cap may and may not do:
//! - the same number of columns; a column the original names plainly (`cust_name`, an
//!   alias) has the same name in the rendering, case aside, and a repeated name read
//!   through the cap's wrapper may carry SQLite's `:N` suffix (other names are SQLite's
//!   copy of the expression's text, which re-rendering respaces);
//! - never more rows than the cap;
//! - when the original returns at most `cap` rows, the cap cuts nothing: the rendering
//!   returns the same multiset of rows, in the same order when the original orders its
//!   outermost result and the guard kept the statement's own limit (the very same tree,
//!   so the very same plan);
//! - when the original returns more, the rendering returns exactly `cap` rows, each one
//!   a row of the original (multiset inclusion: which `cap` rows is the database's choice
//!   when the order has ties or there is none).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

/// One cell, compared exactly (a real by its bits).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cell {
    Null,
    Integer(i64),
    Real(u64),
    Text(String),
    Blob(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

/// What one statement did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Run {
    Rows(Rows),
    /// The database refused or failed it (its message).
    Error(String),
    /// SQLite itself reads the statement as one that writes.
    Writes,
    /// Not comparable: over the time limit or over the row bound.
    Skipped(&'static str),
}

/// How the guard applied its cap, as the comparison needs it.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    pub cap: usize,
    /// The original orders its outermost result.
    pub ordered: bool,
    /// The guard kept the statement's own limit: the rendering is the same tree.
    pub same_tree: bool,
    /// The guard wrapped the statement in `SELECT * FROM (...) AS askdb_capped`.
    pub wrapped: bool,
}

/// A read-only SQLite connection with a per-statement time limit.
pub struct Runner {
    conn: Connection,
    base: Instant,
    deadline_nanos: Arc<AtomicU64>,
    timeout: Duration,
    max_rows: usize,
}

impl Runner {
    pub fn open(
        path: &std::path::Path,
        timeout: Duration,
        max_rows: usize,
    ) -> rusqlite::Result<Self> {
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, 10_000_000)?;
        let base = Instant::now();
        let deadline_nanos = Arc::new(AtomicU64::new(u64::MAX));
        let deadline = Arc::clone(&deadline_nanos);
        conn.progress_handler(
            1_000,
            Some(move || {
                let now = u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX);
                now > deadline.load(Ordering::Relaxed)
            }),
        )?;
        Ok(Runner {
            conn,
            base,
            deadline_nanos,
            timeout,
            max_rows,
        })
    }

    /// Runs one statement: its rows, its error, or why it was skipped.
    pub fn run(&self, sql: &str) -> Run {
        let deadline = self.base.elapsed() + self.timeout;
        self.deadline_nanos.store(
            u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        let result = self.run_inner(sql);
        self.deadline_nanos.store(u64::MAX, Ordering::Relaxed);
        result
    }

    /// Whether SQLite compiles the statement (prepared, never stepped): its error if not.
    pub fn compile_error(&self, sql: &str) -> Option<String> {
        self.conn.prepare(sql).err().map(|error| error.to_string())
    }

    fn run_inner(&self, sql: &str) -> Run {
        let timed_out = |error: &rusqlite::Error| {
            matches!(error, rusqlite::Error::SqliteFailure(failure, _)
                if failure.code == rusqlite::ErrorCode::OperationInterrupted)
        };
        let mut statement = match self.conn.prepare(sql) {
            Ok(statement) => statement,
            Err(error) if timed_out(&error) => return Run::Skipped("timeout"),
            Err(error) => return Run::Error(error.to_string()),
        };
        if !statement.readonly() {
            return Run::Writes;
        }
        let columns: Vec<String> = statement.column_names().map(str::to_string).collect();
        let width = columns.len();
        let mut rows = Vec::new();
        let mut cursor = match statement.query([]) {
            Ok(cursor) => cursor,
            Err(error) if timed_out(&error) => return Run::Skipped("timeout"),
            Err(error) => return Run::Error(error.to_string()),
        };
        loop {
            match cursor.next() {
                Ok(Some(row)) => {
                    if rows.len() >= self.max_rows {
                        return Run::Skipped("rows");
                    }
                    let mut cells = Vec::with_capacity(width);
                    for index in 0..width {
                        let cell = match row.get_ref(index) {
                            Ok(ValueRef::Null) => Cell::Null,
                            Ok(ValueRef::Integer(value)) => Cell::Integer(value),
                            Ok(ValueRef::Real(value)) => Cell::Real(value.to_bits()),
                            Ok(ValueRef::Text(bytes)) => {
                                Cell::Text(String::from_utf8_lossy(bytes).into_owned())
                            }
                            Ok(ValueRef::Blob(bytes)) => Cell::Blob(bytes.to_vec()),
                            Err(error) => return Run::Error(error.to_string()),
                        };
                        cells.push(cell);
                    }
                    rows.push(cells);
                }
                Ok(None) => break,
                Err(error) if timed_out(&error) => return Run::Skipped("timeout"),
                Err(error) => return Run::Error(error.to_string()),
            }
        }
        Run::Rows(Rows { columns, rows })
    }
}

/// A name SQLite took from a plain column or an alias, not from expression text.
fn is_plain_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn counts(rows: &[Vec<Cell>]) -> BTreeMap<&Vec<Cell>, usize> {
    let mut counts = BTreeMap::new();
    for row in rows {
        *counts.entry(row).or_insert(0) += 1;
    }
    counts
}

/// Whether the rendering's rows are the original's under the cap (see the module doc);
/// the error says what differs.
pub fn compare(original: &Rows, rendered: &Rows, expect: &Expect) -> Result<(), String> {
    if original.columns.len() != rendered.columns.len() {
        return Err(format!(
            "{} columns from the original, {} from the rendering",
            original.columns.len(),
            rendered.columns.len()
        ));
    }
    for (before, after) in original.columns.iter().zip(&rendered.columns) {
        // Case aside: SQLite names a table's column by its declared spelling, the same
        // column read through a subquery (the cap's wrapper) by the select list's.
        // Read through the wrapper, a repeated name gets SQLite's `:N` suffix.
        let renamed_duplicate = expect.wrapped
            && after.rsplit_once(':').is_some_and(|(name, n)| {
                name.eq_ignore_ascii_case(before) && n.parse::<u32>().is_ok()
            });
        if is_plain_name(before) && !before.eq_ignore_ascii_case(after) && !renamed_duplicate {
            return Err(format!(
                "column {before:?} is named {after:?} in the rendering"
            ));
        }
    }
    if rendered.rows.len() > expect.cap {
        return Err(format!(
            "the rendering returned {} rows, over the cap of {}",
            rendered.rows.len(),
            expect.cap
        ));
    }
    if original.rows.len() <= expect.cap {
        if expect.ordered && expect.same_tree {
            if original.rows != rendered.rows {
                return Err(format!(
                    "the rows differ in value or order ({} original, {} rendered)",
                    original.rows.len(),
                    rendered.rows.len()
                ));
            }
            return Ok(());
        }
        if counts(&original.rows) != counts(&rendered.rows) {
            return Err(format!(
                "the rows differ ({} original, {} rendered)",
                original.rows.len(),
                rendered.rows.len()
            ));
        }
        return Ok(());
    }
    if rendered.rows.len() != expect.cap {
        return Err(format!(
            "the original returned {} rows; the rendering {} instead of the cap {}",
            original.rows.len(),
            rendered.rows.len(),
            expect.cap
        ));
    }
    let available = counts(&original.rows);
    for (row, count) in counts(&rendered.rows) {
        if available.get(row).copied().unwrap_or(0) < count {
            return Err(format!(
                "the rendering returned a row the original does not: {row:?}"
            ));
        }
    }
    Ok(())
}
