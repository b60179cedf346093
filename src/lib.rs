//! askdb answers plain-English questions about a PostgreSQL or SQLite database.
//!
//! The library holds everything; `src/main.rs` is a thin CLI over it. The path of a
//! question runs through these modules, and every route to a database goes through
//! [`gate`]:
//!
//! - [`gate`]: the four functions every caller uses (list_tables, describe_table,
//!   sample_rows, run_query), the parser guard, the error taxonomy and the read-only
//!   executors.
//! - [`schema`]: introspected table descriptions and the notes that go with them
//!   (descriptions, conventions, restricted columns, hidden tables).
//! - [`demo`]: the deterministic generator of the embedded demo database.
//! - [`eval`]: golden sets and external benchmarks.
//! - [`home`]: where askdb keeps its files.
//! - [`text_table`]: rows as plain-text tables for the terminal.

pub mod demo;
pub mod eval;
pub mod gate;
pub mod home;
pub mod schema;
pub mod text_table;
