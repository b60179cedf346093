//! The guard's differential fuzzer (a stable stand-in for cargo fuzz, outside the timed
//! tests). It owns the run: seeds from the hostile and benign corpora and the external
//! gold (Spider on spiderman's SQLite files, defog for both dialects), one dialect per
//! process, a deterministic generator (`support/fuzz_gen.rs`), and for every generated
//! statement the properties: no panic (a panic hook sees the guard's own thread too,
//! and a supervising parent process records a crash with the statement that caused it);
//! if accepted, the rendering re-parses to the original's tree up to the documented
//! rewrites and the guard accepts it again with the identical rendering
//! (`support/fuzz_props.rs`); an independent walker finds no refused construct in it;
//! on SQLite, the original and the rendered text return the same rows under the cap
//! (`support/fuzz_rows.rs`), and the whole gate (`Gate::run`, whose database check
//! prepares the statement under SQLite's authorizer and judges what SQLite resolved)
//! does not refuse what the parser check accepted: such a refusal (`parser_vs_database`)
//! is a hole in the parser check or a false refusal by the database check. The
//! PostgreSQL mode has the same property on askdb's demo, loaded by `db setup` into a
//! scratch database of the run's own on the development server
//! (`support/fuzz_postgres.rs`, dropped with its roles when the run ends) and gated with
//! the superuser URL, so the database check reads PostgreSQL's own plan; the defog
//! databases are checked against their SQLite files' schemas, by the parser alone. When
//! no server answers, the PostgreSQL mode says so and runs without the property.
//! Findings are deduplicated by signature, minimised by token deletion, printed and
//! written to `target/guard-fuzz/findings-<dialect>.jsonl`.
//!
//! Run it with `scripts/fuzz-guard.sh MINUTES [postgres|sqlite|both] [--write]`, or
//! `cargo bench --bench guard_fuzz -- --dialect sqlite --minutes 2 --seed 1`;
//! `--no-database-check` leaves the gate out, to see what the database check costs.

#[path = "support/fuzz_gen.rs"]
mod fuzz_gen;
#[path = "support/fuzz_postgres.rs"]
mod fuzz_postgres;
#[path = "support/fuzz_props.rs"]
mod fuzz_props;
#[path = "support/fuzz_rows.rs"]
mod fuzz_rows;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use askdb::eval::external::{self, ExternalDialect};
use askdb::gate::{guard, Gate, GateOptions, GuardPolicy, QueryError, QueryOutcome, SqlDialect};
use serde_json::{json, Value as JsonValue};
use sqlparser::tokenizer::{Token, Tokenizer};

use fuzz_gen::{Case, Generator, Names, Seed};
use fuzz_props::{CapFact, Knowledge, Violation, Walker};
use fuzz_rows::{Expect, Run, Runner};

/// A statement over this is skipped (not comparable) on SQLite.
const STATEMENT_TIMEOUT: Duration = Duration::from_millis(1_500);
/// The most rows read from the original before the comparison is skipped.
const MAX_ROWS: usize = 20_000;
/// The most evaluations spent minimising one finding.
const MINIMISE_BUDGET: usize = 300;
/// The most time spent minimising one finding.
const MINIMISE_TIME: Duration = Duration::from_secs(10);
/// The stack of the thread that generates and checks.
const WORKER_STACK_BYTES: usize = 512 * 1024 * 1024;

static PANIC: Mutex<Option<(String, String)>> = Mutex::new(None);
/// The running worker's process id (0 when none), for the supervisor's signal handler.
static WORKER_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// Set by the signal handler: the worker it ends is not a crash, and none is restarted.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[derive(Debug, Clone)]
struct Args {
    dialect: SqlDialect,
    seconds: u64,
    seed: u64,
    out: PathBuf,
    worker: bool,
    report: Option<PathBuf>,
    /// `--one SQL --db LABEL`: evaluate one statement and print what each check says.
    one: Option<String>,
    db: String,
    /// Whether accepted statements also go through the whole gate.
    database_check: bool,
    /// The PostgreSQL mode's scratch database, made by the supervisor for its workers.
    postgres_database: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        dialect: SqlDialect::Sqlite,
        seconds: 60,
        seed: 1,
        out: default_out(),
        worker: false,
        report: None,
        one: None,
        db: "demo".to_string(),
        database_check: true,
        postgres_database: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--dialect" => {
                args.dialect = match it.next().as_deref() {
                    Some("postgres") => SqlDialect::Postgres,
                    Some("sqlite") => SqlDialect::Sqlite,
                    other => panic!("--dialect takes postgres or sqlite, not {other:?}"),
                }
            }
            "--minutes" => {
                let minutes: f64 = it
                    .next()
                    .and_then(|m| m.parse().ok())
                    .expect("--minutes takes a number");
                args.seconds = (minutes * 60.0).round() as u64;
            }
            "--seconds" => {
                args.seconds = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--seconds takes a number")
            }
            "--seed" => {
                args.seed = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--seed takes a number")
            }
            "--out" => args.out = PathBuf::from(it.next().expect("--out takes a folder")),
            "--worker" => args.worker = true,
            "--one" => args.one = Some(it.next().expect("--one takes a statement")),
            "--db" => args.db = it.next().expect("--db takes a database label"),
            "--no-database-check" => args.database_check = false,
            "--postgres-database" => {
                args.postgres_database = Some(
                    it.next()
                        .expect("--postgres-database takes a database name"),
                )
            }
            "--report" => {
                args.report = Some(PathBuf::from(
                    it.next().expect("--report takes the file to write"),
                ))
            }
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => panic!("unknown argument {other:?}"),
        }
    }
    args
}

fn default_out() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("guard-fuzz")
}

fn dialect_name(dialect: SqlDialect) -> &'static str {
    dialect.as_str()
}

// ---------------------------------------------------------------------------------
// Setup: databases, policies, knowledge, seeds.
// ---------------------------------------------------------------------------------

struct Database {
    label: String,
    policy: std::sync::Arc<GuardPolicy>,
    know: Knowledge,
    runner: Option<Runner>,
    /// The gate over the database the statement would run on, for the
    /// parser-vs-database property: SQLite's copy, or the PostgreSQL demo on the server.
    gate: Option<Gate>,
    /// Plans statements on the PostgreSQL server (`EXPLAIN`), as `runner` prepares them
    /// on SQLite: whether the database compiles what the database check refused.
    compiler: Option<fuzz_postgres::Compiler>,
}

impl Database {
    /// The database's own error compiling the statement, None when it compiles.
    fn compile_error(&self, runtime: &tokio::runtime::Runtime, sql: &str) -> Option<String> {
        if let Some(runner) = &self.runner {
            return runner.compile_error(sql);
        }
        self.compiler
            .as_ref()
            .and_then(|compiler| compiler.compile_error(runtime, sql))
    }
}

struct Setup {
    databases: Vec<Database>,
    names: Vec<Names>,
    seeds: Vec<Seed>,
    /// Runs the gates' async doors from the fuzzer's own thread.
    runtime: tokio::runtime::Runtime,
    _scratch: tempfile::TempDir,
}

fn knowledge(gate: &Gate, dialect: SqlDialect) -> Knowledge {
    let notes = gate.notes();
    let mut restricted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in &notes.restricted_columns {
        if let Some((table, column)) = entry.to_lowercase().rsplit_once('.') {
            restricted
                .entry(table.to_string())
                .or_default()
                .insert(column.to_string());
        }
    }
    let mut tables = BTreeMap::new();
    for table in gate.schema() {
        let name = table.name.to_lowercase();
        let mut columns: BTreeSet<String> = table
            .columns
            .iter()
            .map(|c| c.name.to_lowercase())
            .collect();
        if let Some(hidden_columns) = restricted.get(&name) {
            columns.extend(hidden_columns.iter().cloned());
        }
        tables.insert(name, columns);
    }
    restricted.retain(|table, _| tables.contains_key(table));
    let mut hidden: BTreeSet<String> = notes
        .hidden_tables
        .iter()
        .map(|t| t.to_lowercase())
        .collect();
    hidden.insert(askdb::gate::QUERY_LOG_TABLE.to_string());
    let (mut functions, types) = fuzz_props::allow_list(dialect);
    functions.extend(notes.allowed_functions.iter().map(|f| f.to_lowercase()));
    Knowledge {
        dialect,
        tables,
        restricted,
        hidden,
        functions,
        types,
    }
}

fn names_of(know: &Knowledge) -> Names {
    Names {
        tables: know.tables.keys().cloned().collect(),
        columns: know
            .tables
            .values()
            .flatten()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        restricted: know
            .restricted
            .iter()
            .flat_map(|(t, cs)| cs.iter().map(move |c| (t.clone(), c.clone())))
            .collect(),
        hidden: know.hidden.iter().cloned().collect(),
    }
}

fn load_corpus(name: &str) -> Vec<(String, String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("evals")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("the corpus is readable");
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let value: JsonValue = serde_json::from_str(line).expect("a corpus line is JSON");
            let field = |key: &str| {
                value
                    .get(key)
                    .and_then(JsonValue::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            (field("id"), field("dialect"), field("sql"))
        })
        .collect()
}

/// The PostgreSQL demo in the scratch database, gated with the superuser URL: the
/// policy, the names and the notes are the ones the gate read from the server.
fn open_postgres_demo(runtime: &tokio::runtime::Runtime, database: &str) -> Database {
    let url = fuzz_postgres::database_url(database);
    let gate = runtime
        .block_on(askdb::database::open_gate(
            &askdb::database::DatabaseUrl::Postgres(url.clone()),
            GateOptions {
                // As on SQLite: a statement the database check accepts is also run, and a
                // slow one is not a finding.
                statement_timeout: STATEMENT_TIMEOUT,
                label: Some("demo".to_string()),
                ..GateOptions::default()
            },
        ))
        .unwrap_or_else(|error| panic!("the PostgreSQL demo {database} opens: {error}"));
    let compiler = fuzz_postgres::Compiler::connect(runtime, &url, STATEMENT_TIMEOUT)
        .unwrap_or_else(|error| panic!("a compiling connection to {database}: {error}"));
    Database {
        label: "demo".to_string(),
        policy: std::sync::Arc::new(gate.policy().clone()),
        know: knowledge(&gate, SqlDialect::Postgres),
        runner: None,
        gate: Some(gate),
        compiler: Some(compiler),
    }
}

/// `postgres_database`: the PostgreSQL mode's scratch database with the demo, if the
/// run has one; without it the demo is the SQLite file's schema, checked by the parser.
fn setup(dialect: SqlDialect, postgres_database: Option<&str>) -> Setup {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let data_dir = askdb::home::shared_data_dir().expect("the external data at ../shared/data");
    let mut databases = Vec::new();
    let mut seeds = Vec::new();
    let open = |label: String, path: &Path, databases: &mut Vec<Database>| -> usize {
        let copy = scratch.path().join(format!("{}.sqlite", databases.len()));
        std::fs::copy(path, &copy).expect("the database copies");
        let gate = runtime
            .block_on(askdb::database::open_gate(
                &askdb::database::DatabaseUrl::Sqlite(copy.clone()),
                GateOptions {
                    // The same bound as the fuzzer's own runs: a statement the database
                    // check accepts is also run, and a slow one is not a finding.
                    statement_timeout: STATEMENT_TIMEOUT,
                    ..GateOptions::default()
                },
            ))
            .expect("the database opens");
        let mut policy = gate.policy().clone();
        policy.dialect = dialect;
        let know = knowledge(&gate, dialect);
        let runner = (dialect == SqlDialect::Sqlite).then(|| {
            Runner::open(&copy, STATEMENT_TIMEOUT, MAX_ROWS).expect("a read-only connection")
        });
        databases.push(Database {
            label,
            policy: std::sync::Arc::new(policy),
            know,
            runner,
            gate: (dialect == SqlDialect::Sqlite).then_some(gate),
            compiler: None,
        });
        databases.len() - 1
    };
    let demo = match (dialect, postgres_database) {
        (SqlDialect::Postgres, Some(database)) => {
            databases.push(open_postgres_demo(&runtime, database));
            databases.len() - 1
        }
        _ => {
            let demo_path = scratch.path().join("demo-source.sqlite");
            askdb::demo::write_sqlite(&demo_path).expect("the demo database builds");
            open("demo".to_string(), &demo_path, &mut databases)
        }
    };
    for file in ["hostile_sql.jsonl", "benign_sql.jsonl"] {
        for (id, applies, sql) in load_corpus(file) {
            if applies == "any" || applies == dialect_name(dialect) {
                seeds.push(Seed { id, sql, db: demo });
            }
        }
    }
    let mut by_path: BTreeMap<PathBuf, usize> = BTreeMap::new();
    let mut db_for =
        |label: String, path: PathBuf, databases: &mut Vec<Database>| -> Option<usize> {
            if let Some(index) = by_path.get(&path) {
                return Some(*index);
            }
            if !path.exists() {
                return None;
            }
            let index = open(label, &path, databases);
            by_path.insert(path, index);
            Some(index)
        };
    if dialect == SqlDialect::Sqlite {
        for query in external::load_spiderman(&data_dir).expect("spiderman's queries load") {
            let path = external::spiderman_db_path(&data_dir, &query.db_name);
            if let Some(db) = db_for(format!("spider/{}", query.db_name), path, &mut databases) {
                for sql in external::concrete_golds(&query) {
                    seeds.push(Seed {
                        id: query.id.clone(),
                        sql,
                        db,
                    });
                }
            }
        }
    }
    // defog's gold is written for PostgreSQL and SQLite only.
    let defog_dialect = match dialect {
        SqlDialect::Postgres => Some(ExternalDialect::Postgres),
        SqlDialect::Sqlite => Some(ExternalDialect::Sqlite),
        SqlDialect::Mysql => None,
    };
    let defog = match defog_dialect {
        Some(defog_dialect) => {
            external::load_defog(&data_dir, defog_dialect).expect("defog's queries load")
        }
        None => Vec::new(),
    };
    for query in defog {
        // The PostgreSQL gold is checked against the schema of the same database's
        // SQLite file (the same tables and columns).
        let path = external::defog_sqlite_path(&data_dir, &query.db_name);
        if let Some(db) = db_for(format!("defog/{}", query.db_name), path, &mut databases) {
            for sql in external::concrete_golds(&query) {
                seeds.push(Seed {
                    id: query.id.clone(),
                    sql,
                    db,
                });
            }
        }
    }
    let names = databases.iter().map(|d| names_of(&d.know)).collect();
    Setup {
        databases,
        names,
        seeds,
        runtime,
        _scratch: scratch,
    }
}

// ---------------------------------------------------------------------------------
// Evaluation of one statement.
// ---------------------------------------------------------------------------------

#[derive(Debug, Default, Clone)]
struct Stats {
    executions: u64,
    accepted: u64,
    refused: u64,
    rows_compared: u64,
    rows_skipped: u64,
    findings: u64,
    /// Accepted statements run through the whole gate.
    database_checked: u64,
    /// Of those, refused by the database check (each a `parser_vs_database` violation).
    database_refused: u64,
    /// Of those, failed in the database for another reason (an error, the timeout).
    database_failed: u64,
    /// Time spent in the gate, so the property's cost is seen beside the rate.
    database_nanos: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Accepted,
    Refused,
}

/// The literal and quoting forms a statement uses: part of a finding's signature, so
/// one bug seen through many statements is one finding, and two bugs are two.
fn features(sql: &str, dialect: SqlDialect) -> String {
    let d = dialect.parser_dialect();
    let Ok(tokens) = Tokenizer::new(d.as_ref(), sql)
        .with_unescape(false)
        .tokenize()
    else {
        return "untokenized".to_string();
    };
    let mut found = BTreeSet::new();
    for token in tokens {
        let feature = match token {
            Token::SingleQuotedString(s) if s.contains('\\') => "backslash-string",
            Token::SingleQuotedString(s) if s.contains('\'') => "doubled-quote-string",
            Token::EscapedStringLiteral(_) => "E-string",
            Token::DollarQuotedString(_) => "dollar-string",
            Token::UnicodeStringLiteral(_) => "unicode-string",
            Token::HexStringLiteral(_) => "hex",
            Token::NationalStringLiteral(_) => "national-string",
            Token::DoubleQuotedString(s) if s.contains(['"', '\\', '`']) => "odd-quoted-name",
            Token::Word(w)
                if w.quote_style.is_some() && w.value.contains(['"', '\\', '`', ']']) =>
            {
                "odd-quoted-name"
            }
            Token::Placeholder(_) => "placeholder",
            Token::Whitespace(sqlparser::tokenizer::Whitespace::MultiLineComment(_)) => {
                "block-comment"
            }
            Token::Whitespace(sqlparser::tokenizer::Whitespace::SingleLineComment { .. }) => {
                "line-comment"
            }
            _ => continue,
        };
        found.insert(feature);
    }
    found.into_iter().collect::<Vec<_>>().join(",")
}

struct Context<'a> {
    dialect: SqlDialect,
    databases: &'a [Database],
    runtime: &'a tokio::runtime::Runtime,
    database_check: bool,
    current: std::fs::File,
}

impl Context<'_> {
    fn remember_current(&mut self, sql: &str) {
        // What a crash (a stack overflow aborts the process) leaves for the supervisor.
        let _ = self.current.seek(SeekFrom::Start(0));
        let _ = self.current.set_len(0);
        let _ = self.current.write_all(sql.as_bytes());
    }

    fn evaluate(&mut self, sql: &str, db: usize, stats: &mut Stats) -> (Verdict, Vec<Violation>) {
        self.remember_current(sql);
        let database = &self.databases[db];
        let dialect = self.dialect;
        let mut found = Vec::new();
        if let Ok(mut slot) = PANIC.lock() {
            *slot = None;
        }
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            guard::check(sql, &database.policy)
        }));
        let panicked = PANIC.lock().ok().and_then(|mut slot| slot.take());
        if let Some((location, message)) = panicked {
            found.push(Violation {
                kind: "panic",
                key: location.clone(),
                detail: format!("{message} at {location}"),
            });
        }
        let checked = match outcome {
            Err(_) => return (Verdict::Refused, found),
            Ok(Err(_)) => {
                stats.refused += 1;
                return (Verdict::Refused, found);
            }
            Ok(Ok(checked)) => checked,
        };
        stats.accepted += 1;
        let rendered = checked.sql().to_string();
        let cap = database.policy.row_cap;
        let facts = match fuzz_props::check_rendering(sql, &rendered, dialect, cap) {
            Ok((tree, facts)) => {
                found.extend(Walker::walk(&database.know, &tree));
                Some(facts)
            }
            Err(violation) => {
                found.push(violation);
                if let Ok(tree) = fuzz_props::parse_one(&rendered, dialect) {
                    found.extend(Walker::walk(&database.know, &tree));
                }
                None
            }
        };
        match guard::check(&rendered, &database.policy) {
            Ok(again) if again.sql() == rendered => {}
            Ok(again) => found.push(Violation {
                kind: "not_idempotent",
                key: "rendering".to_string(),
                detail: format!("the rendering is rendered again as {}", again.sql()),
            }),
            Err(refusal) => found.push(Violation {
                kind: "not_idempotent",
                key: refusal.reason.as_str().to_string(),
                detail: format!("the rendering is refused: {refusal}"),
            }),
        }
        if let Some(runner) = &database.runner {
            let expect = Expect {
                cap: usize::try_from(cap).unwrap_or(usize::MAX),
                ordered: facts.as_ref().is_some_and(|f| f.ordered),
                same_tree: facts.as_ref().is_some_and(|f| f.cap == CapFact::Kept),
                wrapped: facts.as_ref().is_some_and(|f| f.cap == CapFact::Wrapped),
            };
            let cap_key = facts.as_ref().map_or("unknown".to_string(), |f| {
                format!("{:?}", f.cap).to_lowercase()
            });
            match (runner.run(sql), runner.run(&rendered)) {
                (Run::Skipped(_), _) | (_, Run::Skipped(_)) => stats.rows_skipped += 1,
                (Run::Writes, _) | (_, Run::Writes) => found.push(Violation {
                    kind: "sqlite_reads_a_write",
                    key: "writes".to_string(),
                    detail: "SQLite reads the original or the rendering as a statement that writes"
                        .to_string(),
                }),
                (Run::Rows(original), Run::Rows(after)) => {
                    stats.rows_compared += 1;
                    if let Err(difference) = fuzz_rows::compare(&original, &after, &expect) {
                        // A statement that differs from itself (random(), now) is not a finding.
                        let deterministic =
                            matches!(runner.run(sql), Run::Rows(again) if again == original);
                        if deterministic {
                            found.push(Violation {
                                kind: "rows_differ",
                                key: cap_key,
                                detail: difference,
                            });
                        } else {
                            stats.rows_skipped += 1;
                        }
                    }
                }
                // The original need not be SQLite's syntax: sqlparser reads forms SQLite
                // does not (FETCH FIRST, OFFSET before or without LIMIT, LIMIT ALL,
                // `(*)`), and the rendering is the checked tree (property b) in SQLite's
                // words. A limit SQLite cannot read as an integer (9223372036854775808)
                // replaced by the cap is the cap doing its job.
                (Run::Error(error), Run::Rows(_))
                    if facts.is_some()
                        && (error.contains("syntax error")
                            || (error.contains("datatype mismatch")
                                && facts.as_ref().is_some_and(|f| f.cap == CapFact::Capped))) =>
                {
                    stats.rows_skipped += 1
                }
                (Run::Error(error), Run::Rows(_)) => found.push(Violation {
                    kind: "rendering_runs_where_original_fails",
                    key: cap_key,
                    detail: error,
                }),
                (Run::Rows(_), Run::Error(error)) => found.push(Violation {
                    kind: "rendering_fails_where_original_runs",
                    key: cap_key,
                    detail: error,
                }),
                (Run::Error(_), Run::Error(_)) => stats.rows_compared += 1,
            }
        }
        if let (Some(gate), true) = (&database.gate, self.database_check) {
            let started = Instant::now();
            let outcome = self.runtime.block_on(gate.run(&checked));
            stats.database_nanos = stats
                .database_nanos
                .saturating_add(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
            stats.database_checked += 1;
            match outcome {
                QueryOutcome::Rows(_) => {}
                QueryOutcome::Failed(QueryError {
                    reason: Some(reason),
                    message,
                    ..
                }) => {
                    stats.database_refused += 1;
                    let subject = message.split(';').next().unwrap_or_default();
                    let subject = fold_column_name(subject, &database.know);
                    let compile_error = database.compile_error(self.runtime, &rendered);
                    let (engine, engine_name) = match dialect {
                        SqlDialect::Sqlite => ("sqlite", "SQLite"),
                        SqlDialect::Postgres => ("postgres", "PostgreSQL"),
                        SqlDialect::Mysql => ("mysql", "MySQL"),
                    };
                    // The message names the table, column or function refused: one
                    // finding per thing the two checks disagree on, told apart by whether
                    // the database compiles the statement at all. A refusal of a statement
                    // the database compiles is a hole in the parser check or a false
                    // refusal; one of a statement that fails anyway only words the failure
                    // (but an error that depends on a hidden table is an oracle, so it
                    // stays a finding of its own). A table the database does not have,
                    // which the gate words as a refusal, is one finding whatever its name.
                    let key = match &compile_error {
                        None => format!("{}:{subject}", reason.as_str()),
                        Some(error)
                            if error.contains("no such table")
                                || (error.starts_with("relation ")
                                    && error.ends_with("does not exist")) =>
                        {
                            format!("{engine}_has_no_such_table")
                        }
                        Some(_) => format!("fails_in_{engine}:{}:{subject}", reason.as_str()),
                    };
                    found.push(Violation {
                        kind: "parser_vs_database",
                        key,
                        detail: format!(
                            "the parser check accepted it; the database check refused {rendered}: {message} ({engine_name} alone: {})",
                            compile_error.as_deref().unwrap_or("compiles")
                        ),
                    });
                }
                QueryOutcome::Failed(_) => stats.database_failed += 1,
            }
        }
        (Verdict::Accepted, found)
    }
}

/// PostgreSQL's own system columns: each a thing of its own when the checks disagree.
const SYSTEM_COLUMNS: [&str; 6] = ["xmin", "xmax", "cmin", "cmax", "ctid", "tableoid"];

/// A refusal's subject with the column name left out when the table has no such
/// column and it is not a system column: a column-alias list names a table's columns
/// anything, so each generated name and table would otherwise be a finding of its own.
fn fold_column_name(subject: &str, know: &Knowledge) -> String {
    let folded = subject.split_once(' ').and_then(|(name, rest)| {
        let (table, column) = name.rsplit_once('.')?;
        let columns = know.tables.get(table)?;
        let unknown =
            !columns.contains(column) && !SYSTEM_COLUMNS.contains(&column.to_lowercase().as_str());
        unknown.then(|| format!("<not a column of the table> {rest}"))
    });
    folded.unwrap_or_else(|| subject.to_string())
}

fn signature(dialect: SqlDialect, violation: &Violation, sql: &str) -> String {
    let shape = match violation.kind {
        // Named constructs are their own signature; the rest are told apart by the
        // literal forms that reach them.
        "walker_function"
        | "walker_catalog"
        | "walker_hidden"
        | "walker_type"
        | "walker_restricted"
        | "walker_unknown_table"
        | "parser_vs_database"
        | "panic" => String::new(),
        _ => features(sql, dialect),
    };
    format!(
        "{}:{}:{}:{shape}",
        dialect_name(dialect),
        violation.kind,
        violation.key
    )
}

/// Greedy token deletion that keeps the finding's signature.
fn minimise(ctx: &mut Context, sql: &str, db: usize, wanted: &str) -> String {
    let dialect = ctx.dialect;
    let mut best = sql.to_string();
    let mut budget = MINIMISE_BUDGET;
    let mut stats = Stats::default();
    let mut progress = true;
    let started = Instant::now();
    while progress && budget > 0 && started.elapsed() < MINIMISE_TIME {
        progress = false;
        let d = dialect.parser_dialect();
        let Ok(tokens) = Tokenizer::new(d.as_ref(), &best)
            .with_unescape(false)
            .tokenize()
        else {
            break;
        };
        let texts: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
        if texts.concat() != best {
            // The token display is not the source text here: do not minimise.
            break;
        }
        for index in (0..texts.len()).rev() {
            if budget == 0 {
                break;
            }
            if matches!(tokens[index], Token::Whitespace(_) | Token::EOF) {
                continue;
            }
            budget -= 1;
            let mut candidate = String::with_capacity(best.len());
            for (i, text) in texts.iter().enumerate() {
                if i != index {
                    candidate.push_str(text);
                }
            }
            let (_, found) = ctx.evaluate(&candidate, db, &mut stats);
            if found
                .iter()
                .any(|v| signature(dialect, v, &candidate) == wanted)
            {
                best = candidate;
                progress = true;
                break;
            }
        }
    }
    best
}

fn record(path: &Path, line: &JsonValue) {
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

fn known_signatures(path: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<JsonValue>(line).ok())
        .filter_map(|value| {
            value
                .get("signature")
                .and_then(JsonValue::as_str)
                .map(str::to_string)
        })
        .collect()
}

fn stats_json(stats: &Stats, seconds: f64) -> JsonValue {
    // The gate's own process-wide counts (what /metrics shows), beside the fuzzer's: its
    // disagreements also count the statements tried while minimising.
    let counts = askdb::gate::database_check_counts();
    json!({
        "executions": stats.executions,
        "accepted": stats.accepted,
        "refused": stats.refused,
        "rows_compared": stats.rows_compared,
        "rows_skipped": stats.rows_skipped,
        "findings": stats.findings,
        "database_checked": stats.database_checked,
        "database_refused": stats.database_refused,
        "database_failed": stats.database_failed,
        "database_nanos": stats.database_nanos,
        "gate_checked": counts.checked,
        "gate_remembered": counts.remembered,
        "gate_disagreements": counts.disagreements,
        "seconds": seconds,
    })
}

fn worker(args: &Args) {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_guard = std::thread::current().name() == Some("askdb-guard");
        if !in_guard {
            // The fuzzer's own code: say so, as usual.
            default_hook(info);
        }
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        if let Ok(mut slot) = PANIC.lock() {
            *slot = Some((location, message));
        }
    }));
    let dialect = args.dialect;
    let name = dialect_name(dialect);
    let findings_path = args.out.join(format!("findings-{name}.jsonl"));
    let stats_path = args.out.join(format!("worker-{name}-{}.json", args.seed));
    let _ = std::fs::remove_file(args.out.join(format!("current-{name}.sql")));
    let setup = setup(dialect, args.postgres_database.as_deref());
    let current = std::fs::File::create(args.out.join(format!("current-{name}.sql")))
        .expect("the current-statement file");
    let mut known = known_signatures(&findings_path);
    let mut generator = Generator::new(dialect, &setup.seeds, &setup.names, args.seed);
    let mut ctx = Context {
        dialect,
        databases: &setup.databases,
        runtime: &setup.runtime,
        database_check: args.database_check,
        current,
    };
    eprintln!(
        "guard fuzz ({name}, seed {}): {} seeds over {} databases, {} s",
        args.seed,
        setup.seeds.len(),
        setup.databases.len(),
        args.seconds
    );
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let mut stats = Stats::default();
    let mut last_write = Instant::now();
    while Instant::now() < deadline {
        let Case { sql, db, seed, ops } = generator.next_case();
        stats.executions += 1;
        let (verdict, found) = ctx.evaluate(&sql, db, &mut stats);
        if verdict == Verdict::Accepted && found.is_empty() {
            generator.remember(&sql, db);
        }
        for violation in found {
            let sig = signature(dialect, &violation, &sql);
            if !known.insert(sig.clone()) {
                continue;
            }
            stats.findings += 1;
            let minimal = minimise(&mut ctx, &sql, db, &sig);
            let rendered = guard::check(&minimal, &setup.databases[db].policy)
                .map(|c| c.sql().to_string())
                .unwrap_or_else(|r| format!("REFUSED {r}"));
            let line = json!({
                "signature": sig,
                "kind": violation.kind,
                "dialect": name,
                "database": setup.databases[db].label,
                "seed": seed,
                "ops": ops,
                "detail": violation.detail,
                "sql": sql,
                "minimal": minimal,
                "minimal_rendered": rendered,
            });
            println!("FINDING {line}");
            record(&findings_path, &line);
        }
        if last_write.elapsed() > Duration::from_secs(2) {
            last_write = Instant::now();
            let _ = std::fs::write(
                &stats_path,
                stats_json(&stats, started.elapsed().as_secs_f64()).to_string(),
            );
        }
    }
    let _ = std::fs::write(
        &stats_path,
        stats_json(&stats, started.elapsed().as_secs_f64()).to_string(),
    );
}

/// Evaluates one statement and prints the verdict and every violation.
fn one(args: &Args, sql: &str) {
    // A scratch database of its own, dropped when this returns or unwinds.
    let server = postgres_server(args);
    let setup = setup(
        args.dialect,
        server.as_ref().map(|scratch| scratch.database.as_str()),
    );
    let db = setup
        .databases
        .iter()
        .position(|d| d.label == args.db)
        .expect("--db names a database of the run (demo, spider/NAME, defog/NAME)");
    std::fs::create_dir_all(&args.out).expect("the output folder");
    let current = std::fs::File::create(args.out.join("current-one.sql"))
        .expect("the current-statement file");
    let mut ctx = Context {
        dialect: args.dialect,
        databases: &setup.databases,
        runtime: &setup.runtime,
        database_check: args.database_check,
        current,
    };
    match guard::check(sql, &setup.databases[db].policy) {
        Ok(checked) => println!("accepted as {}", checked.sql()),
        Err(refusal) => println!("refused: {refusal}"),
    }
    let (verdict, found) = ctx.evaluate(sql, db, &mut Stats::default());
    println!("{verdict:?}");
    for violation in found {
        println!(
            "{}: {}",
            signature(args.dialect, &violation, sql),
            violation.detail
        );
    }
}

/// The PostgreSQL mode's scratch database with the demo, when the run checks the
/// database: None for SQLite and with `--no-database-check`, and when no server answers
/// or setup fails (said on the output: the run goes on without the property).
fn postgres_server(args: &Args) -> Option<fuzz_postgres::Scratch> {
    if args.dialect != SqlDialect::Postgres || !args.database_check {
        return None;
    }
    match fuzz_postgres::Scratch::create() {
        Ok(scratch) => {
            eprintln!(
                "guard fuzz postgres: the demo is in the scratch database {}",
                scratch.database
            );
            Some(scratch)
        }
        Err(why) => {
            println!("guard fuzz postgres: {why}; running without the parser-vs-database property");
            None
        }
    }
}

/// Drops the scratch database when the supervisor ends, also by a panic (the signal
/// handler's thread holds the slot too, so the slot alone would not drop it).
struct DropServer(std::sync::Arc<Mutex<Option<fuzz_postgres::Scratch>>>);

impl Drop for DropServer {
    fn drop(&mut self) {
        let scratch = match self.0.lock() {
            Ok(mut slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        drop(scratch);
    }
}

/// Runs workers until the time is up, restarting after a crash (recorded as a finding
/// with the statement that caused it), and writes the dialect's summary.
fn supervise(args: &Args) {
    let name = dialect_name(args.dialect);
    std::fs::create_dir_all(&args.out).expect("the output folder");
    let server = postgres_server(args);
    let postgres_database = server.as_ref().map(|scratch| scratch.database.clone());
    let no_server =
        args.dialect == SqlDialect::Postgres && args.database_check && postgres_database.is_none();
    let server = DropServer(std::sync::Arc::new(Mutex::new(server)));
    if postgres_database.is_some() {
        fuzz_postgres::drop_on_signal(std::sync::Arc::clone(&server.0), || {
            // The worker would go on against a dropped database until its own time is
            // up (a script's background jobs ignore the interrupt).
            STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
            let pid = WORKER_PID.load(std::sync::atomic::Ordering::SeqCst);
            if pid != 0 {
                let _ = std::process::Command::new("kill")
                    .arg(pid.to_string())
                    .status();
            }
        });
    }
    let findings_path = args.out.join(format!("findings-{name}.jsonl"));
    let _ = std::fs::remove_file(&findings_path);
    let exe = std::env::current_exe().expect("the bench's own path");
    let started = Instant::now();
    let total = Duration::from_secs(args.seconds);
    let mut seed = args.seed;
    let mut seeds_used = Vec::new();
    let mut crashes = 0u64;
    let mut totals = Stats::default();
    let mut gate_disagreements = 0u64;
    let mut known = BTreeSet::new();
    while started.elapsed() < total {
        let remaining = total.saturating_sub(started.elapsed()).as_secs().max(1);
        seeds_used.push(seed);
        let stats_path = args.out.join(format!("worker-{name}-{seed}.json"));
        let _ = std::fs::remove_file(&stats_path);
        let mut worker = std::process::Command::new(&exe);
        if !args.database_check {
            worker.arg("--no-database-check");
        }
        if let Some(database) = &postgres_database {
            worker.args(["--postgres-database", database]);
        }
        let mut child = worker
            .arg("--worker")
            .args(["--dialect", name])
            .args(["--seconds", &remaining.to_string()])
            .args(["--seed", &seed.to_string()])
            .arg("--out")
            .arg(&args.out)
            .spawn()
            .expect("the worker starts");
        WORKER_PID.store(child.id(), std::sync::atomic::Ordering::SeqCst);
        let status = child.wait().expect("the worker is waited for");
        WORKER_PID.store(0, std::sync::atomic::Ordering::SeqCst);
        while STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
            // The signal handler drops the database and ends the process.
            std::thread::park();
        }
        let stats: JsonValue = std::fs::read_to_string(&stats_path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(JsonValue::Null);
        let field = |key: &str| stats.get(key).and_then(JsonValue::as_u64).unwrap_or(0);
        totals.executions += field("executions");
        totals.accepted += field("accepted");
        totals.refused += field("refused");
        totals.rows_compared += field("rows_compared");
        totals.rows_skipped += field("rows_skipped");
        totals.database_checked += field("database_checked");
        totals.database_refused += field("database_refused");
        totals.database_failed += field("database_failed");
        totals.database_nanos += field("database_nanos");
        gate_disagreements += field("gate_disagreements");
        if !status.success() {
            crashes += 1;
            let sql = std::fs::read_to_string(args.out.join(format!("current-{name}.sql")))
                .unwrap_or_default();
            if stats.is_null() && sql.is_empty() {
                eprintln!("the worker failed before its first statement ({status}); stopping");
                drop(server);
                std::process::exit(1);
            }
            let signature = format!("{name}:crash:{}:{}", status, features(&sql, args.dialect));
            if known.insert(signature.clone()) {
                let line = json!({
                    "signature": signature,
                    "kind": "crash",
                    "dialect": name,
                    "detail": format!("the worker ended with {status}"),
                    "sql": sql,
                });
                println!("FINDING {line}");
                record(&findings_path, &line);
            }
            totals.executions += 1;
        }
        if status.success() {
            break;
        }
        seed += 1_000;
    }
    drop(server);
    let findings: Vec<JsonValue> = std::fs::read_to_string(&findings_path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<JsonValue>(line).ok())
        .collect();
    let seconds = started.elapsed().as_secs_f64();
    let database_seconds = totals.database_nanos as f64 / 1e9;
    let database_check = match (args.database_check, args.dialect) {
        (true, SqlDialect::Sqlite) => {
            "on: every accepted statement through Gate::run (SQLite authorizer)"
        }
        (false, _) => "off (--no-database-check)",
        (true, SqlDialect::Mysql) => "none: the fuzzer has no MySQL database check",
        (true, SqlDialect::Postgres) if no_server => {
            "none: PostgreSQL was not reachable (or db setup failed)"
        }
        // The defog databases have no server of their own in this mode.
        (true, SqlDialect::Postgres) => {
            "on: every accepted statement on the demo through Gate::run (PostgreSQL EXPLAIN, superuser, a scratch database loaded by db setup); the defog databases by the parser alone"
        }
    };
    let summary = json!({
        "dialect": name,
        // A debug build checks far fewer statements a minute than a release build.
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "minutes": (args.seconds as f64 / 60.0 * 100.0).round() / 100.0,
        "seconds": (seconds * 10.0).round() / 10.0,
        "seed": args.seed,
        "worker_seeds": seeds_used,
        "executions": totals.executions,
        "executions_per_second": (totals.executions as f64 / seconds.max(0.001)).round(),
        "accepted": totals.accepted,
        "refused": totals.refused,
        "sqlite_rows_compared": totals.rows_compared,
        "sqlite_rows_skipped": totals.rows_skipped,
        "crashes": crashes,
        // The executions per second above are with this property on or off, as it says.
        "database_check": database_check,
        "database_checked": totals.database_checked,
        "database_refused": totals.database_refused,
        "database_failed": totals.database_failed,
        "database_check_seconds": (database_seconds * 10.0).round() / 10.0,
        "gate_disagreements": gate_disagreements,
        "findings": findings.len(),
        "finding_signatures": findings.iter().filter_map(|f| f.get("signature").cloned()).collect::<Vec<_>>(),
    });
    println!(
        "guard fuzz {name}: {} executions in {:.0} s ({} per second), {} accepted, {} refused, {} row comparisons ({} skipped), {} findings",
        totals.executions,
        seconds,
        summary["executions_per_second"],
        totals.accepted,
        totals.refused,
        totals.rows_compared,
        totals.rows_skipped,
        findings.len()
    );
    println!(
        "guard fuzz {name}: database check {database_check}; {} statements through the gate in {:.0} s ({:.0}% of the run), {} refused by the database check (the gate counted {} disagreements, minimising included), {} failed otherwise",
        totals.database_checked,
        database_seconds,
        database_seconds / seconds.max(0.001) * 100.0,
        totals.database_refused,
        gate_disagreements,
        totals.database_failed,
    );
    std::fs::write(
        args.out.join(format!("summary-{name}.json")),
        format!("{summary:#}\n"),
    )
    .expect("the summary is written");
}

/// Writes the committed figures from the dialects' summaries in the output folder.
fn report(args: &Args, path: &Path) {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let machine = format!("{cores} cores ({cpu})");
    // This run's dialects replace their earlier figures; the other dialect's stay.
    let earlier: JsonValue = std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(JsonValue::Null);
    let mut runs: BTreeMap<String, JsonValue> = earlier
        .get("runs")
        .and_then(JsonValue::as_array)
        .into_iter()
        .flatten()
        .filter_map(|run| Some((run.get("dialect")?.as_str()?.to_string(), run.clone())))
        .collect();
    for name in ["postgres", "sqlite"] {
        let summary_path = args.out.join(format!("summary-{name}.json"));
        let Ok(text) = std::fs::read_to_string(&summary_path) else {
            continue;
        };
        // When the run ended (its summary is written last), not when the figures are
        // copied here, which can be much later.
        let ended = std::fs::metadata(&summary_path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or_else(askdb::calendar::unix_seconds, |d| d.as_secs());
        let days = i64::try_from(ended / 86_400).unwrap_or(0);
        let now =
            askdb::calendar::format_timestamp(days, u32::try_from(ended % 86_400).unwrap_or(0));
        let Ok(mut value) = serde_json::from_str::<JsonValue>(&text) else {
            continue;
        };
        if let Some(object) = value.as_object_mut() {
            object.insert("measured_at".to_string(), json!(format!("{now} UTC")));
            object.insert("commit".to_string(), json!(commit));
            object.insert("machine".to_string(), json!(machine));
        }
        runs.insert(name.to_string(), value);
    }
    let figures = json!({
        "generated_by": "scripts/fuzz-guard.sh --write (cargo bench --bench guard_fuzz)",
        "runs": runs.into_values().collect::<Vec<_>>(),
    });
    std::fs::write(path, format!("{figures:#}\n")).expect("the figures are written");
    println!("written to {}", path.display());
}

fn main() {
    let args = parse_args();
    if let Some(path) = &args.report {
        report(&args, path);
    } else if let Some(sql) = &args.one {
        let (sql, args) = (sql.clone(), args.clone());
        std::thread::Builder::new()
            .stack_size(WORKER_STACK_BYTES)
            .spawn(move || one(&args, &sql))
            .expect("the thread starts")
            .join()
            .expect("the thread ends");
    } else if args.worker {
        // The generator and the checks parse, print and drop trees as deep as the
        // guard's (which has a 64 MB stack of its own): give them room too.
        let worker_args = args.clone();
        std::thread::Builder::new()
            .name("guard-fuzz".to_string())
            .stack_size(WORKER_STACK_BYTES)
            .spawn(move || worker(&worker_args))
            .expect("the worker thread starts")
            .join()
            .expect("the worker thread ends");
    } else {
        supervise(&args);
    }
}
