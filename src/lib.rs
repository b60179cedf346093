//! askdb answers plain-English questions about a PostgreSQL or SQLite database.
//!
//! The library holds everything; `src/main.rs` is a thin CLI over it. The path of a
//! question runs through these modules, and every route to a database goes through
//! [`gate`]. ARCHITECTURE.md states the layering (which module may use which) and
//! `tests/architecture.rs` enforces it.
//!
//! - primitives: [`sql_text`] (dialects, quoting), [`calendar`], [`rng`], [`words`]
//!   (the tokeniser and the token estimate), [`text`] (error chains, redaction, cutting),
//!   [`home`] (where askdb keeps its files), [`text_table`].
//! - [`schema`]: introspected table descriptions and the notes that go with them
//!   (descriptions, conventions, restricted columns, hidden tables).
//! - [`gate`]: the four functions every caller uses (list_tables, describe_table,
//!   sample_rows, run_query), the parser guard, the error taxonomy and the read-only
//!   executors.
//! - [`demo`]: the deterministic generator of the embedded demo database.
//! - [`database`]: a user's database URL (`demo` included) resolved and opened as a gate.
//! - [`admin`]: `askdb db setup`, which loads the demo into PostgreSQL and creates and
//!   proves the read-only and log roles (administration, outside the gate).
//! - [`llm`]: the model providers (Anthropic, OpenAI-compatible, scripted) behind one
//!   recording call, with retries, key failover, the spend ledger and the reply cache.
//! - [`linking`]: schema cards and schema selection: the whole schema when it fits the
//!   token budget, else lexical + value-index + glossary ranking with foreign-key
//!   bridges, and the model-free linking evaluation.
//! - [`examples`]: verified examples, question and SQL pairs a person confirmed, kept
//!   per database, checked by the gate when saved and after drift, and ranked for a
//!   question by a pure lexical retrieval.
//! - [`agent`]: the state machine that turns a question into an answer: ambiguity
//!   rules, generation, guard, execution, taxonomy-driven repair, the empty-result
//!   diagnostic, honest give-up, and the checked answer with its chart.
//! - [`telemetry`]: one OpenTelemetry trace per question, built from the agent's step
//!   events and exported over OTLP/HTTP in the background (off when no endpoint is set).
//! - [`eval`]: golden sets and external benchmarks.
//! - [`mcp`]: `askdb mcp`, the gate's four functions as tools of an MCP server over
//!   stdio, for any MCP client (no second route to the database).
//! - [`server`]: `askdb serve`, the HTTP API (ask, sql, schema, eval, checked health,
//!   OpenAPI) and the one-page web UI embedded in the binary.
//! - [`cli`]: the command line's arguments, resolved configuration and reports.

pub mod admin;
pub mod agent;
pub mod calendar;
pub mod cli;
pub mod compare;
pub mod conversation;
pub mod database;
pub mod demo;
pub mod drift;
pub mod eval;
pub mod examples;
pub mod gate;
pub mod home;
pub mod linking;
pub mod llm;
pub mod local_model;
pub mod mcp;
pub mod querylog;
pub mod rng;
pub mod schema;
pub mod server;
pub mod sql_text;
pub mod state;
pub mod telemetry;
pub mod text;
pub mod text_table;
pub mod users;
pub mod words;

// The test helpers shared with the integration tests (one file each, in tests/support).
#[cfg(test)]
#[path = "../tests/support/ci.rs"]
mod ci;
#[cfg(test)]
#[path = "../tests/support/mysql_setup.rs"]
mod mysql_setup;
#[cfg(test)]
#[path = "../tests/support/scratch.rs"]
mod scratch;
