//! Gate tests over the real demo database: the hostile and benign corpora, each
//! read-only layer of the SQLite executor with the guard switched off, the timeout,
//! hidden tables and restricted columns end to end.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::*;

#[derive(Debug, Deserialize)]
pub(crate) struct CorpusEntry {
    pub id: String,
    pub dialect: String,
    pub sql: String,
    #[serde(default)]
    pub reason: Option<RefusalReason>,
    #[serde(default)]
    pub writes: bool,
    /// Which of the guard's two checks refuses it, for the lines written for the
    /// database check: the parser check alone, or only the database's own resolution.
    #[serde(default)]
    pub checked_by: Option<CheckStage>,
    /// For a line written for every dialect that MySQL's refuses, or refuses for
    /// another reason: double-quoted text is a string or a name by the server's mode,
    /// so the MySQL dialect refuses it (`parse_error`), and PostgreSQL's `FILTER` is not
    /// MySQL's.
    #[serde(default)]
    pub mysql_reason: Option<RefusalReason>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CheckStage {
    Parser,
    Database,
}

impl CorpusEntry {
    pub fn applies_to(&self, dialect: SqlDialect) -> bool {
        self.dialect == "any" || self.dialect == dialect.as_str()
    }

    /// Why the guard refuses this line in a dialect: None for a line it accepts.
    pub fn reason_in(&self, dialect: SqlDialect) -> Option<RefusalReason> {
        match (dialect, self.mysql_reason) {
            (SqlDialect::Mysql, Some(reason)) => Some(reason),
            _ => self.reason,
        }
    }
}

pub(crate) fn load_corpus(name: &str) -> Vec<CorpusEntry> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("evals")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("bad corpus line in {name}: {error}: {line}"))
        })
        .collect()
}

fn file_sha256(path: &Path) -> String {
    let bytes = std::fs::read(path).expect("database file is readable");
    format!("{:x}", Sha256::digest(bytes))
}

struct DemoCopy {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn demo_copy() -> DemoCopy {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("demo.sqlite");
    crate::demo::write_sqlite(&path).expect("demo database builds");
    DemoCopy { _dir: dir, path }
}

async fn open(path: &Path, options: GateOptions) -> Gate {
    crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(path.to_path_buf()),
        options,
    )
    .await
    .expect("demo database opens")
}

fn policy_for(gate: &Gate, dialect: SqlDialect) -> Arc<GuardPolicy> {
    let mut policy = gate.policy().clone();
    policy.dialect = dialect;
    Arc::new(policy)
}

#[tokio::test]
async fn hostile_corpus_is_refused_with_its_reason_in_every_dialect() {
    let demo = demo_copy();
    let gate = open(&demo.path, GateOptions::default()).await;
    let corpus = load_corpus("hostile_sql.jsonl");
    assert!(
        corpus.len() >= 80,
        "the hostile corpus has {} statements",
        corpus.len()
    );
    let mut checked = 0;
    let mut wrong = Vec::new();
    for dialect in [SqlDialect::Postgres, SqlDialect::Sqlite, SqlDialect::Mysql] {
        let policy = policy_for(&gate, dialect);
        let parser_checked = corpus.iter().filter(|entry| {
            entry.applies_to(dialect) && entry.checked_by != Some(CheckStage::Database)
        });
        for entry in parser_checked {
            checked += 1;
            let expected = entry
                .reason_in(dialect)
                .expect("hostile entries name their reason");
            match guard::check(&entry.sql, &policy) {
                Ok(passed) => wrong.push(format!(
                    "{} ({dialect:?}) PASSED as {}",
                    entry.id,
                    passed.sql()
                )),
                Err(refusal) if refusal.reason != expected => wrong.push(format!(
                    "{} ({dialect:?}) refused as {:?}, expected {expected:?}: {}",
                    entry.id, refusal.reason, refusal.message
                )),
                Err(_) => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {checked} verdicts wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The guard's rendering of every benign statement, one line each, as committed in
/// `evals/benign_rendered.txt`: what runs for a benign query is a reviewed fact, so a
/// change in it (a parser upgrade, a new rewrite) shows as a diff here. Rewrite the file
/// with `ASKDB_UPDATE_SNAPSHOTS=1 cargo test --lib benign_renderings`.
#[tokio::test]
async fn benign_renderings_match_the_committed_snapshot() {
    let demo = demo_copy();
    let gate = open(&demo.path, GateOptions::default()).await;
    let mut rendered = String::from(
        "# What the guard runs for each benign statement (evals/benign_sql.jsonl): id, dialect, rendering.\n",
    );
    for entry in load_corpus("benign_sql.jsonl") {
        for dialect in [SqlDialect::Postgres, SqlDialect::Sqlite, SqlDialect::Mysql] {
            if !entry.applies_to(dialect) {
                continue;
            }
            let verdict = match guard::check(&entry.sql, &policy_for(&gate, dialect)) {
                Ok(checked) => checked.sql().to_string(),
                Err(refusal) => format!("REFUSED {refusal}"),
            };
            rendered.push_str(&format!("{} {}: {verdict}\n", entry.id, dialect.as_str()));
        }
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("evals/benign_rendered.txt");
    if std::env::var("ASKDB_UPDATE_SNAPSHOTS").is_ok_and(|value| value == "1") {
        std::fs::write(&path, &rendered).expect("snapshot written");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let changed: Vec<String> = rendered
        .lines()
        .zip(committed.lines().chain(std::iter::repeat("<missing>")))
        .filter(|(now, then)| now != then)
        .map(|(now, then)| format!("- {then}\n+ {now}"))
        .collect();
    assert!(
        changed.is_empty() && rendered.lines().count() == committed.lines().count(),
        "the guard renders benign statements differently from evals/benign_rendered.txt \
         (review, then ASKDB_UPDATE_SNAPSHOTS=1):\n{}",
        changed.join("\n")
    );
}

#[tokio::test]
async fn benign_corpus_is_accepted_and_sqlite_ones_run() {
    let demo = demo_copy();
    let gate = open(&demo.path, GateOptions::default()).await;
    let corpus = load_corpus("benign_sql.jsonl");
    assert!(
        corpus.len() >= 40,
        "the benign corpus has {} statements",
        corpus.len()
    );
    let mut wrong = Vec::new();
    for dialect in [SqlDialect::Postgres, SqlDialect::Sqlite, SqlDialect::Mysql] {
        let policy = policy_for(&gate, dialect);
        for entry in corpus.iter().filter(|entry| entry.applies_to(dialect)) {
            match (guard::check(&entry.sql, &policy), entry.reason_in(dialect)) {
                (Err(refusal), None) => {
                    wrong.push(format!("{} ({dialect:?}) refused: {refusal}", entry.id))
                }
                (Err(refusal), Some(expected)) if refusal.reason != expected => {
                    wrong.push(format!(
                        "{} ({dialect:?}) refused as {refusal}, expected {expected:?}",
                        entry.id
                    ))
                }
                (Ok(checked), Some(expected)) => wrong.push(format!(
                    "{} ({dialect:?}) passed as {}, expected {expected:?}",
                    entry.id,
                    checked.sql()
                )),
                _ => {}
            }
        }
    }
    for entry in corpus
        .iter()
        .filter(|entry| entry.applies_to(SqlDialect::Sqlite))
    {
        let checked = match gate.run_query(&entry.sql).await {
            QueryOutcome::Failed(error) => {
                wrong.push(format!("{} failed on SQLite: {error}", entry.id));
                continue;
            }
            QueryOutcome::Rows(rows) => rows,
        };
        // What the guard ran returns the rows the original text returns (below the
        // guard), all of them when they fit under the cap, else a cap's worth of them.
        let original = match gate.execute(&entry.sql).await {
            Ok(raw) => raw,
            Err(failure) => {
                wrong.push(format!("{} original failed: {}", entry.id, failure.message));
                continue;
            }
        };
        let key = |row: &Vec<JsonValue>| serde_json::to_string(row).unwrap_or_default();
        let mut remaining: Vec<String> = original.rows.iter().map(key).collect();
        let mut missing = 0;
        for row in checked.rows.iter().map(key) {
            match remaining.iter().position(|candidate| candidate == &row) {
                Some(index) => {
                    remaining.swap_remove(index);
                }
                None => missing += 1,
            }
        }
        let expected = original.rows.len().min(guard::DEFAULT_ROW_CAP as usize);
        if missing > 0 || checked.rows.len() != expected {
            wrong.push(format!(
                "{}: {} rows ran, {} expected, {missing} not in the original's rows",
                entry.id,
                checked.rows.len(),
                expected
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn sqlite_connection_alone_refuses_every_write_and_the_file_is_unchanged() {
    let demo = demo_copy();
    let before = file_sha256(&demo.path);
    let gate = open(&demo.path, GateOptions::default()).await;
    let attached = demo.path.with_file_name("attached.db");
    let mut statements: Vec<String> = load_corpus("hostile_sql.jsonl")
        .into_iter()
        .filter(|entry| entry.writes && entry.applies_to(SqlDialect::Sqlite))
        .map(|entry| entry.sql)
        .collect();
    assert!(
        statements.len() >= 30,
        "only {} SQLite writes in the corpus",
        statements.len()
    );
    statements.push(format!(
        "ATTACH DATABASE '{}' AS planted",
        attached.display()
    ));
    statements.push(format!("VACUUM INTO '{}'", attached.display()));
    let mut executed = Vec::new();
    for sql in &statements {
        if let Ok(rows) = gate.execute(sql).await {
            // A statement the engine runs must at least have changed nothing: the
            // layers below decide, and any success here is reported.
            executed.push(format!("{sql} -> {} rows", rows.rows.len()));
        }
    }
    assert!(
        executed.is_empty(),
        "the connection ran writes:\n{}",
        executed.join("\n")
    );
    assert!(
        !attached.exists(),
        "ATTACH or VACUUM INTO created {}",
        attached.display()
    );
    drop(gate);
    assert_eq!(before, file_sha256(&demo.path), "the database file changed");
}

#[tokio::test]
async fn each_sqlite_layer_reports_writes_as_permission_or_read_only() {
    let demo = demo_copy();
    let gate = open(&demo.path, GateOptions::default()).await;
    for sql in [
        "DELETE FROM bills",
        "UPDATE bills SET status = 'VOID'",
        "CREATE TABLE planted (x INTEGER)",
        "PRAGMA query_only = 0",
        "BEGIN",
        "SELECT sql FROM sqlite_master",
        "SELECT load_extension('/tmp/x')",
        "SELECT phone FROM customers",
        "SELECT * FROM customers",
    ] {
        let failure = gate
            .execute(sql)
            .await
            .expect_err("the executor refuses it without the guard");
        assert!(
            matches!(
                failure.error_type,
                ErrorType::PermissionDenied | ErrorType::ReadOnlyViolation
            ),
            "{sql}: {failure:?}"
        );
        assert!(!failure.error_type.repairable());
    }
}

#[tokio::test]
async fn a_runaway_query_is_stopped_by_the_timeout() {
    let demo = demo_copy();
    let timeout = Duration::from_millis(1_000);
    let gate = open(
        &demo.path,
        GateOptions {
            statement_timeout: timeout,
            ..GateOptions::default()
        },
    )
    .await;
    for sql in [
        "WITH RECURSIVE forever(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM forever) SELECT count(*) FROM forever",
        "SELECT count(*) FROM bill_items a, bill_items b, bill_items c",
    ] {
        let started = Instant::now();
        let outcome = gate.run_query(sql).await;
        let elapsed = started.elapsed();
        match outcome {
            QueryOutcome::Failed(error) => assert_eq!(error.error_type, ErrorType::Timeout, "{sql}"),
            QueryOutcome::Rows(rows) => panic!("{sql} finished: {:?}", rows.rows),
        }
        assert!(elapsed < timeout + Duration::from_secs(1), "{sql} took {elapsed:?}");
    }
    // The connection is usable afterwards.
    assert!(gate.run_query("SELECT 1").await.is_ok());
}

#[tokio::test]
async fn run_query_counts_the_demo_bills() {
    let demo = demo_copy();
    let gate = open(&demo.path, GateOptions::default()).await;
    match gate.run_query("SELECT count(*) FROM bills").await {
        QueryOutcome::Rows(result) => {
            assert_eq!(result.rows, vec![vec![serde_json::json!(1400)]]);
            assert_eq!(result.sql, "SELECT count(*) FROM bills LIMIT 200");
            assert!(!result.truncated);
        }
        QueryOutcome::Failed(error) => panic!("{error}"),
    }
}

#[tokio::test]
async fn the_row_cap_truncates_and_says_so() {
    let demo = demo_copy();
    let gate = open(&demo.path, GateOptions::default()).await;
    let QueryOutcome::Rows(result) = gate.run_query("SELECT bill_no FROM bills").await else {
        panic!("query failed");
    };
    assert_eq!(result.row_count, 200);
    assert!(result.truncated);
    let QueryOutcome::Rows(small) = gate.run_query("SELECT bill_no FROM bills LIMIT 7").await
    else {
        panic!("query failed");
    };
    assert_eq!(small.row_count, 7);
    assert!(!small.truncated);
}

#[tokio::test]
async fn structured_errors_carry_type_and_sql_never_a_trace() {
    let demo = demo_copy();
    let gate = open(&demo.path, GateOptions::default()).await;
    let QueryOutcome::Failed(error) = gate.run_query("SELECT cust_nme FROM customers").await else {
        panic!("should fail");
    };
    assert_eq!(error.error_type, ErrorType::UnknownColumn);
    assert!(error.repairable);
    assert_eq!(error.sql, "SELECT cust_nme FROM customers LIMIT 200");
    let json = serde_json::to_value(&error).expect("serialises");
    assert_eq!(json["ok"], serde_json::json!(false));
    assert_eq!(json["error_type"], serde_json::json!("unknown_column"));

    let QueryOutcome::Failed(refused) = gate.run_query("DELETE FROM bills").await else {
        panic!("should be refused");
    };
    assert_eq!(refused.error_type, ErrorType::Rejected);
    assert_eq!(refused.reason, Some(RefusalReason::NotAQuery));
    assert!(!refused.repairable);
}

#[tokio::test]
async fn restricted_columns_never_leave_the_gate() {
    let demo = demo_copy();
    let gate = open(&demo.path, GateOptions::default()).await;
    let customers = gate.describe_table("customers").expect("customers exists");
    let names: Vec<&str> = customers.columns.iter().map(|c| c.name.as_str()).collect();
    assert!(
        !names.contains(&"phone") && !names.contains(&"address"),
        "{names:?}"
    );
    assert!(!customers.create_table.contains("phone"));
    let sample = gate.sample_rows("customers", 5).await.expect("sample");
    assert!(!sample
        .columns
        .iter()
        .any(|c| c == "phone" || c == "address"));
    assert_eq!(sample.row_count, 5);
    let suppliers = gate.sample_rows("suppliers", 3).await.expect("sample");
    assert!(!suppliers.columns.iter().any(|c| c == "phone"));
    for row in sample.rows.iter().chain(suppliers.rows.iter()) {
        for value in row {
            if let serde_json::Value::String(text) = value {
                assert!(text.chars().count() <= SAMPLE_TEXT_CHARS, "{text}");
            }
        }
    }
    assert!(matches!(
        gate.run_query("SELECT phone FROM customers").await,
        QueryOutcome::Failed(QueryError {
            reason: Some(RefusalReason::RestrictedColumn),
            ..
        })
    ));
    assert!(gate
        .run_query("SELECT count(*) FROM customers")
        .await
        .is_ok());
}

/// A restricted column that is part of a table's primary key is not named by the key
/// the gate describes, and the samples are not ordered by it (the guard would refuse
/// that order, and the order itself would tell its values' ranks).
#[tokio::test]
async fn a_restricted_key_column_is_left_out_of_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("keys.sqlite");
    rusqlite::Connection::open(&path)
        .expect("a SQLite file")
        .execute_batch(
            "CREATE TABLE badges (holder TEXT, badge_no INTEGER, colour TEXT, \
               PRIMARY KEY (holder, badge_no));
             INSERT INTO badges VALUES ('zed', 2, 'red'), ('amy', 1, 'blue');",
        )
        .expect("a table keyed on a restricted column");
    let notes: crate::schema::SchemaNotes =
        toml::from_str("restricted_columns = [\"badges.holder\"]").expect("notes parse");
    let gate = open(
        &path,
        GateOptions {
            notes: Some(notes),
            ..GateOptions::default()
        },
    )
    .await;
    let badges = gate.describe_table("badges").expect("badges");
    assert_eq!(badges.primary_key, vec!["badge_no"]);
    assert!(
        !badges.create_table.contains("holder"),
        "{}",
        badges.create_table
    );
    let sample = gate.sample_rows("badges", 5).await.expect("samples");
    assert_eq!(sample.columns, vec!["badge_no", "colour"]);
    assert_eq!(
        sample.rows,
        vec![
            vec![serde_json::json!(1), serde_json::json!("blue")],
            vec![serde_json::json!(2), serde_json::json!("red")]
        ]
    );
}

#[tokio::test]
async fn hidden_tables_are_never_listed_described_or_read() {
    let demo = demo_copy();
    {
        let connection = rusqlite::Connection::open(&demo.path).expect("writable copy");
        connection
            .execute_batch(
                "CREATE TABLE askdb_query_log (id INTEGER PRIMARY KEY, question TEXT);
                 INSERT INTO askdb_query_log (question) VALUES ('secret');",
            )
            .expect("log table created");
    }
    let gate = open(&demo.path, GateOptions::default()).await;
    let tables: Vec<String> = gate.list_tables().into_iter().map(|t| t.name).collect();
    assert_eq!(tables.len(), 15, "{tables:?}");
    assert!(!tables.iter().any(|t| t == QUERY_LOG_TABLE));
    assert!(matches!(
        gate.describe_table(QUERY_LOG_TABLE),
        Err(GateError::UnknownTable(_))
    ));
    assert!(gate.sample_rows(QUERY_LOG_TABLE, 3).await.is_err());
    let QueryOutcome::Failed(error) = gate.run_query("SELECT * FROM askdb_query_log").await else {
        panic!("the hidden table was read");
    };
    assert_eq!(error.reason, Some(RefusalReason::UnknownTable));
    assert!(!error.repairable);
}

/// The lines written for the database check, through the whole guard on a copy whose
/// hidden log table exists and holds a row: each is refused with its reason, and by the
/// guard (a refusal reason), never left to the read-only connection's authorizer.
#[tokio::test]
async fn the_guard_refuses_every_database_checked_line_on_sqlite() {
    let demo = demo_copy();
    {
        let connection = rusqlite::Connection::open(&demo.path).expect("writable copy");
        connection
            .execute_batch(
                "CREATE TABLE askdb_query_log (id INTEGER PRIMARY KEY, question TEXT);
                 INSERT INTO askdb_query_log (question) VALUES ('x');",
            )
            .expect("log table created");
    }
    let gate = open(&demo.path, GateOptions::default()).await;
    let lines: Vec<CorpusEntry> = load_corpus("hostile_sql.jsonl")
        .into_iter()
        .filter(|entry| entry.checked_by.is_some() && entry.applies_to(SqlDialect::Sqlite))
        .collect();
    assert!(lines.len() >= 5, "{} lines", lines.len());
    let mut wrong = Vec::new();
    for entry in &lines {
        match gate.run_query(&entry.sql).await {
            QueryOutcome::Rows(rows) => {
                wrong.push(format!("{} ran: {:?}", entry.id, rows.rows));
            }
            QueryOutcome::Failed(error) if error.reason != entry.reason => wrong.push(format!(
                "{} refused as {:?}, expected {:?}: {}",
                entry.id, error.reason, entry.reason, error.message
            )),
            QueryOutcome::Failed(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let counts = database_check_counts();
    assert!(counts.disagreements >= 1, "{counts:?}");
}

/// A table SQLite does not know, named where the parser check does not look
/// (`x IN table`), is refused in the words of any unknown table, not with SQLite's own
/// error, so a hidden table and a missing one read the same.
#[tokio::test]
async fn an_unknown_table_after_in_is_refused_like_any_unknown_table() {
    let demo = demo_copy();
    let gate = open(&demo.path, GateOptions::default()).await;
    let QueryOutcome::Failed(error) = gate.run_query("SELECT 1 IN no_such_table").await else {
        panic!("ran");
    };
    assert_eq!(error.reason, Some(RefusalReason::UnknownTable), "{error:?}");
    assert!(
        error.message.contains("\"no_such_table\" does not exist"),
        "{error:?}"
    );
}

/// A table dropped after the gate opened is the schema changing under it (drift): the
/// database's own error, repairable, not a refusal that would count as the parser
/// check missing a name.
#[tokio::test]
async fn a_table_dropped_under_an_open_gate_is_the_databases_error_not_a_refusal() {
    let demo = demo_copy();
    let gate = open(&demo.path, GateOptions::default()).await;
    rusqlite::Connection::open(&demo.path)
        .and_then(|connection| connection.execute_batch("DROP TABLE stock_adjustments"))
        .expect("drop");
    let QueryOutcome::Failed(error) = gate
        .run_query("SELECT count(*) FROM stock_adjustments")
        .await
    else {
        panic!("ran");
    };
    assert_eq!(error.reason, None, "{error:?}");
    assert_eq!(error.error_type, ErrorType::UnknownTable, "{error:?}");
    assert!(error.repairable, "{error:?}");
}

#[tokio::test]
async fn a_missing_or_bogus_file_fails_clearly_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("nope.sqlite");
    let error = crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(missing.clone()),
        GateOptions::default(),
    )
    .await
    .err()
    .expect("missing file fails");
    assert!(
        error.to_string().contains("no SQLite database file"),
        "{error}"
    );
    assert!(!missing.exists());
    let bogus = dir.path().join("bogus.sqlite");
    std::fs::write(&bogus, "this is not a database").expect("write");
    let error = crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(bogus),
        GateOptions::default(),
    )
    .await
    .err()
    .expect("bogus file fails");
    assert!(
        error.to_string().contains("not a readable SQLite database"),
        "{error}"
    );
}
