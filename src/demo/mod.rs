//! The embedded demo database: a hardware store after a few years of hurried changes
//! (spec: demo-database.md). This module owns its fifteen table definitions, the
//! deterministic generator of its rows, DDL for SQLite and PostgreSQL, the SQLite writer
//! and the built-in schema notes. The mess in the data is deliberate; do not tidy it.
//!
//! Rows are dialect-free ([`DemoValue`]) so one generator feeds both backends with
//! identical data. A loader needs, per table of [`generate`] in order:
//! [`create_table_sql`], then either [`insert_sql`] with bound values or
//! [`insert_values_sql`] with literals, then [`sequence_reset_sql`] (PostgreSQL).

mod catalog;
mod ddl;
mod generate;
mod notes;
mod rng;
mod sqlite;
mod tables;
mod value;

#[cfg(test)]
mod tests;

use std::io;
use std::path::PathBuf;

pub use catalog::INJECTION;
pub use ddl::{
    check_row, create_table_sql, insert_sql, insert_values_sql, sequence_reset_sql, type_sql,
    DdlDialect,
};
pub use generate::{
    generate, ARCHIVE_BILL_COUNT, ARCHIVE_FROM, ARCHIVE_TO, BILLS_FROM, BILLS_TO, BILL_COUNT,
};
pub use notes::{demo_notes, HIDDEN_TABLES, RESTRICTED_COLUMNS, USER_CITY_FUNCTION};
pub use rng::DEMO_SEED;
pub use sqlite::{ensure_demo_sqlite, fingerprint, sqlite_value, write_sqlite, DEMO_FILE_NAME};
pub use tables::{table_defs, ColumnDef, ColumnType, TableDef};
pub use value::DemoValue;

/// One demo table: its definition and its rows, each row one value per column in
/// definition order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoTable {
    pub def: TableDef,
    pub rows: Vec<Vec<DemoValue>>,
}

/// Why the demo database could not be written. Every variant names the path involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    #[error("cannot create the directory {} for the demo database: {source}", .path.display())]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("cannot build the demo database in {}: {source}", .path.display())]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "cannot move the built demo database from {} to {}: {source}",
        .from.display(),
        .path.display()
    )]
    Rename {
        from: PathBuf,
        path: PathBuf,
        source: io::Error,
    },
}
