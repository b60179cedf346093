//! The MySQL/MariaDB executor against a real server (never a mock): the read-only
//! transaction and the pinned session each hold with the guard switched off, the server's
//! statement limit fires, results stop at the row and byte caps, errors arrive with the
//! taxonomy's types, a bad URL or password is an error, not a panic, and the SQL askdb
//! writes for its own checks is MySQL's.
//!
//! Each test creates its own uniquely named database as root and drops it when it ends.
//! The server is `ASKDB_TEST_MYSQL_URL` (default `mysql://root@127.0.0.1:3306/`); when it
//! cannot be reached a test says SKIPPED and passes, except under CI, where it fails.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use serde_json::json;

use super::executor::mysql::MysqlExecutor;
use super::executor::{ExecLimits, Stage, DEFAULT_RESULT_BYTE_CAP};
use super::taxonomy::ErrorType;
use crate::ci::skip_or_fail;

fn server_url() -> String {
    std::env::var("ASKDB_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/".to_string())
}

/// A database of its own for one test, dropped when the test ends, pass or fail.
struct ScratchMysql {
    database: String,
    admin: String,
}

impl ScratchMysql {
    async fn new(test: &str) -> Option<ScratchMysql> {
        let admin = server_url();
        let database = format!(
            "askdb_t_{}_{}_{}",
            test.chars()
                .filter(char::is_ascii_alphanumeric)
                .take(20)
                .collect::<String>(),
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|since| since.subsec_nanos())
                .unwrap_or(0)
        );
        let mut conn = match mysql_async::Conn::from_url(admin.as_str()).await {
            Ok(conn) => conn,
            Err(error) => {
                skip_or_fail(test, &format!("no MySQL server at {admin}: {error}"));
                return None;
            }
        };
        for statement in [
            format!("CREATE DATABASE `{database}`"),
            format!("CREATE TABLE `{database}`.bills (bill_id INT PRIMARY KEY, status VARCHAR(10), total DECIMAL(10,2), issued DATE)"),
            format!("INSERT INTO `{database}`.bills VALUES (1, 'PAID', 10.50, '2025-01-31'), (2, 'VOID', 3.00, '2025-02-01'), (3, 'PAID', 7.25, NULL)"),
            format!("CREATE TABLE `{database}`.askdb_query_log (id INT, question TEXT)"),
            format!("CREATE TABLE `{database}`.customers (cust_id INT PRIMARY KEY, cust_name VARCHAR(20), phone VARCHAR(20), address VARCHAR(40))"),
            format!("INSERT INTO `{database}`.customers VALUES (1, 'Asha', '555-1', 'Lane 1')"),
        ] {
            conn.query_drop(statement).await.expect("scratch database set up");
        }
        let _ = conn.disconnect().await;
        Some(ScratchMysql { database, admin })
    }

    fn url(&self) -> String {
        format!("{}{}", self.admin, self.database)
    }

    async fn executor(&self) -> MysqlExecutor {
        MysqlExecutor::connect(&self.url())
            .await
            .unwrap_or_else(|failure| panic!("executor connects: {}", failure.message))
    }

    async fn count_bills(&self) -> i64 {
        let mut conn = mysql_async::Conn::from_url(self.admin.as_str())
            .await
            .expect("admin connects");
        let count: Option<i64> = conn
            .exec_first(
                format!("SELECT COUNT(*) FROM `{}`.bills", self.database),
                (),
            )
            .await
            .expect("count");
        let _ = conn.disconnect().await;
        count.unwrap_or(-1)
    }

    async fn tables(&self) -> Vec<String> {
        let mut conn = mysql_async::Conn::from_url(self.admin.as_str())
            .await
            .expect("admin connects");
        let tables: Vec<String> = conn
            .exec(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY 1",
                (self.database.as_str(),),
            )
            .await
            .expect("tables listed");
        let _ = conn.disconnect().await;
        tables
    }
}

impl Drop for ScratchMysql {
    fn drop(&mut self) {
        let admin = self.admin.clone();
        let database = self.database.clone();
        // The drop runs on a thread of its own: a test's runtime may be shutting down.
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                if let Ok(mut conn) = mysql_async::Conn::from_url(admin.as_str()).await {
                    let _ = conn
                        .query_drop(format!("DROP DATABASE IF EXISTS `{database}`"))
                        .await;
                    let _ = conn.disconnect().await;
                }
            });
        })
        .join();
    }
}

fn limits() -> ExecLimits {
    ExecLimits {
        row_cap: 200,
        statement_timeout: Duration::from_secs(5),
        byte_cap: DEFAULT_RESULT_BYTE_CAP,
    }
}

#[tokio::test]
async fn mysql_rows_come_back_as_json_in_the_pinned_session() {
    let Some(scratch) = ScratchMysql::new("mysql_rows").await else {
        return;
    };
    let executor = scratch.executor().await;
    let rows = executor
        .execute(
            "SELECT bill_id, status, total, issued FROM bills ORDER BY bill_id",
            limits(),
            None,
            Stage::Execute,
        )
        .await
        .unwrap_or_else(|failure| panic!("{}", failure.message));
    assert_eq!(rows.columns, ["bill_id", "status", "total", "issued"]);
    assert_eq!(
        rows.rows[0],
        vec![json!(1), json!("PAID"), json!("10.50"), json!("2025-01-31")]
    );
    assert_eq!(rows.rows[2][3], json!(null));
    assert!(!rows.truncated);
    // The session reads text as the guard does: || concatenates, a backslash is a
    // plain character, and every transaction is read-only.
    let session = executor
        .execute(
            "SELECT @@sql_mode, 'a' || 'b', LENGTH('\\n'), @@tx_read_only, @@in_transaction",
            limits(),
            None,
            Stage::Execute,
        )
        .await
        .unwrap_or_else(|failure| panic!("{}", failure.message));
    let mode = session.rows[0][0].as_str().unwrap_or_default().to_string();
    for wanted in crate::gate::guard::MYSQL_SQL_MODE.split(',') {
        assert!(
            mode.split(',').any(|set| set == wanted),
            "{wanted} not in {mode}"
        );
    }
    assert_eq!(session.rows[0][1], json!("ab"));
    assert_eq!(session.rows[0][2], json!(2));
    assert_eq!(session.rows[0][3], json!(1));
    assert_eq!(session.rows[0][4], json!(1));
}

/// The read-only transaction alone, with the guard switched off: writes, DDL (which
/// commits a plain READ ONLY transaction implicitly) and multiple statements all fail,
/// and the data is as it was.
#[tokio::test]
async fn mysql_read_only_transaction_alone_refuses_every_write() {
    let Some(scratch) = ScratchMysql::new("mysql_read_only").await else {
        return;
    };
    let executor = scratch.executor().await;
    for (sql, expected) in [
        (
            "INSERT INTO bills VALUES (9, 'X', 1, NULL)",
            ErrorType::ReadOnlyViolation,
        ),
        (
            "UPDATE bills SET status = 'X'",
            ErrorType::ReadOnlyViolation,
        ),
        ("DELETE FROM bills", ErrorType::ReadOnlyViolation),
        ("CREATE TABLE planted (a INT)", ErrorType::ReadOnlyViolation),
        ("DROP TABLE bills", ErrorType::ReadOnlyViolation),
        (
            "CREATE TEMPORARY TABLE planted (a INT)",
            ErrorType::ReadOnlyViolation,
        ),
        // Prepared statements take one statement: the second is a syntax error.
        ("SELECT 1; DELETE FROM bills", ErrorType::SyntaxError),
    ] {
        match executor.execute(sql, limits(), None, Stage::Execute).await {
            Ok(rows) => panic!("{sql} ran: {rows:?}"),
            Err(failure) => assert_eq!(failure.error_type, expected, "{sql}: {}", failure.message),
        }
    }
    // LOAD DATA cannot be prepared, and the client has no LOCAL INFILE handler anyway.
    let load = executor
        .execute(
            "LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE bills",
            limits(),
            None,
            Stage::Execute,
        )
        .await;
    assert!(load.is_err(), "{load:?}");
    assert_eq!(scratch.count_bills().await, 3);
    assert_eq!(
        scratch.tables().await,
        ["askdb_query_log", "bills", "customers"]
    );
}

#[tokio::test]
async fn mysql_statement_limit_fires_on_the_server_and_caps_cut_the_result() {
    let Some(scratch) = ScratchMysql::new("mysql_limits").await else {
        return;
    };
    let executor = scratch.executor().await;
    let short = ExecLimits {
        statement_timeout: Duration::from_millis(500),
        ..limits()
    };
    let started = Instant::now();
    let slow = executor
        .execute(
            "SELECT COUNT(*) FROM seq_1_to_100000 a, seq_1_to_100000 b",
            short,
            None,
            Stage::Execute,
        )
        .await;
    let elapsed = started.elapsed();
    match slow {
        Ok(rows) => panic!("the cross join finished: {rows:?}"),
        Err(failure) => assert_eq!(
            failure.error_type,
            ErrorType::Timeout,
            "{}",
            failure.message
        ),
    }
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    // The pool still answers after a statement was interrupted.
    let after = executor
        .execute("SELECT 1", limits(), None, Stage::Execute)
        .await;
    assert!(after.is_ok(), "{after:?}");

    let capped = executor
        .execute(
            "SELECT seq FROM seq_1_to_1000",
            ExecLimits {
                row_cap: 10,
                ..limits()
            },
            None,
            Stage::Execute,
        )
        .await
        .unwrap_or_else(|failure| panic!("{}", failure.message));
    assert_eq!(capped.rows.len(), 10);
    assert!(capped.truncated);
    let bytes = executor
        .execute(
            "SELECT REPEAT('x', 1000) FROM seq_1_to_100",
            ExecLimits {
                byte_cap: 5_000,
                ..limits()
            },
            None,
            Stage::Execute,
        )
        .await
        .unwrap_or_else(|failure| panic!("{}", failure.message));
    assert_eq!(bytes.rows.len(), 5);
    assert!(bytes.truncated);
}

#[tokio::test]
async fn mysql_errors_arrive_typed_and_bad_logins_are_errors() {
    let Some(scratch) = ScratchMysql::new("mysql_errors").await else {
        return;
    };
    let executor = scratch.executor().await;
    for (sql, expected) in [
        ("SELEC 1", ErrorType::SyntaxError),
        ("SELECT nope FROM bills", ErrorType::UnknownColumn),
        ("SELECT 1 FROM nope", ErrorType::UnknownTable),
        ("SELECT nofn(1)", ErrorType::UnknownFunction),
        (
            "SELECT bill_id FROM bills WHERE bill_id = (SELECT bill_id FROM bills)",
            ErrorType::CardinalityViolation,
        ),
    ] {
        match executor.execute(sql, limits(), None, Stage::Execute).await {
            Ok(rows) => panic!("{sql} ran: {rows:?}"),
            Err(failure) => {
                assert_eq!(failure.error_type, expected, "{sql}: {}", failure.message);
                assert!(failure.sqlstate.is_some(), "{sql}");
            }
        }
    }
    for url in [
        "postgres://root@127.0.0.1:3306/x".to_string(),
        format!(
            "mysql://root:wrong-password@127.0.0.1:3306/{}",
            scratch.database
        ),
        "mysql://root@127.0.0.1:1/x".to_string(),
    ] {
        match MysqlExecutor::connect(&url).await {
            Ok(_) => panic!("{url} connected"),
            Err(failure) => assert!(!failure.message.is_empty()),
        }
    }
}

/// The whole gate on MySQL: the URL opens, the schema is read, a question's query passes
/// the guard and the server's plan and runs, samples quote names as MySQL reads them, a
/// catalog read is refused before the server sees it, and the health probe finds the
/// connection read-only.
#[tokio::test]
async fn mysql_gate_opens_reads_and_refuses() {
    let Some(scratch) = ScratchMysql::new("mysql_gate").await else {
        return;
    };
    let url: crate::database::DatabaseUrl = scratch
        .url()
        .replacen("mysql://", "mariadb://", 1)
        .parse()
        .expect("a MySQL URL parses");
    let gate = crate::database::open_gate(&url, super::GateOptions::default())
        .await
        .unwrap_or_else(|error| panic!("the gate opens: {error}"));
    assert_eq!(gate.dialect(), super::SqlDialect::Mysql);
    let tables: Vec<String> = gate.list_tables().into_iter().map(|t| t.name).collect();
    assert_eq!(tables, ["bills", "customers"]);
    let described = gate.describe_table("bills").expect("bills is described");
    assert!(
        described.create_table.contains("bill_id"),
        "{}",
        described.create_table
    );
    match gate
        .run_query("SELECT status, SUM(total) AS total FROM bills GROUP BY status ORDER BY status")
        .await
    {
        super::QueryOutcome::Rows(rows) => {
            assert_eq!(
                rows.rows,
                vec![
                    vec![json!("PAID"), json!("17.75")],
                    vec![json!("VOID"), json!("3.00")]
                ]
            );
            assert!(rows.sql.ends_with("LIMIT 200"), "{}", rows.sql);
        }
        super::QueryOutcome::Failed(error) => panic!("{error}"),
    }
    let sample = gate.sample_rows("bills", 2).await.expect("samples");
    assert_eq!(sample.rows.len(), 2);
    assert!(sample.sql.contains("`bills`"), "{}", sample.sql);
    for hostile in [
        "SELECT table_name FROM information_schema.tables",
        "SELECT /*! SLEEP(5), */ status FROM bills",
        "SELECT @@version",
        "SELECT status FROM bills INTO OUTFILE '/tmp/askdb'",
    ] {
        match gate.run_query(hostile).await {
            super::QueryOutcome::Rows(rows) => panic!("{hostile} ran: {rows:?}"),
            super::QueryOutcome::Failed(error) => {
                assert_eq!(error.error_type, ErrorType::Rejected, "{hostile}: {error}")
            }
        }
    }
    match gate.run_query("SELECT nope FROM bills").await {
        super::QueryOutcome::Failed(error) => {
            assert_eq!(error.error_type, ErrorType::UnknownColumn, "{error}")
        }
        super::QueryOutcome::Rows(rows) => panic!("an unknown column ran: {rows:?}"),
    }
    assert_eq!(gate.probe_read_only().await.ok(), Some(true));
}

/// The database check alone, with the parser check switched off: the server's plan of
/// the text names the hidden log, and the guard refuses it in the words of a missing
/// table before anything runs; a plan over visible tables passes.
#[tokio::test]
async fn mysql_database_check_alone_refuses_a_hidden_table_the_plan_scans() {
    let Some(scratch) = ScratchMysql::new("mysql_plan_check").await else {
        return;
    };
    let url: crate::database::DatabaseUrl = scratch.url().parse().expect("a MySQL URL parses");
    let gate = crate::database::open_gate(&url, super::GateOptions::default())
        .await
        .unwrap_or_else(|error| panic!("the gate opens: {error}"));
    let policy = std::sync::Arc::new(gate.policy().clone());
    for sql in [
        "SELECT * FROM askdb_query_log",
        "SELECT b.status FROM bills b WHERE b.bill_id IN (SELECT id FROM askdb_query_log)",
        "SELECT x.question FROM (SELECT question FROM askdb_query_log UNION SELECT status FROM bills) x",
    ] {
        match gate
            .execute_with(sql, Some(std::sync::Arc::clone(&policy)), Stage::Execute)
            .await
        {
            Ok(rows) => panic!("{sql} ran: {rows:?}"),
            Err(failure) => {
                let refusal = failure
                    .refusal
                    .unwrap_or_else(|| panic!("{sql}: not refused: {}", failure.message));
                assert_eq!(refusal.reason, super::RefusalReason::UnknownTable, "{sql}");
                assert!(!refusal.repairable, "{sql}");
            }
        }
    }
    // A name the statement does not declare is judged, whatever it is: a catalog or
    // another database's table is refused as the plan names it.
    for sql in [
        "SELECT user FROM mysql.user",
        "SELECT table_name FROM information_schema.tables",
    ] {
        let refused = gate
            .execute_with(sql, Some(std::sync::Arc::clone(&policy)), Stage::Execute)
            .await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|failure| failure.refusal.is_some()),
            "{sql}: {refused:?}"
        );
    }
    // MariaDB's plan names an aliased table by its alias: an alias is not a missing
    // table.
    for sql in [
        "SELECT status FROM bills WHERE bill_id IN (SELECT bill_id FROM bills)",
        "SELECT b.status, c.cust_name FROM bills b LEFT JOIN customers c ON c.cust_id = b.bill_id",
        "SELECT x.n FROM (SELECT COUNT(*) AS n FROM bills) x",
    ] {
        let fine = gate
            .execute_with(sql, Some(std::sync::Arc::clone(&policy)), Stage::Execute)
            .await;
        assert!(fine.is_ok(), "{sql}: {fine:?}");
    }
}

/// The client's deadline: `KILL QUERY` from a connection of its own stops a statement
/// running on another (here a SLEEP the server's limit would not end for 20 s).
#[tokio::test]
async fn mysql_kill_query_stops_a_statement_on_another_connection() {
    let Some(scratch) = ScratchMysql::new("mysql_kill").await else {
        return;
    };
    let executor = scratch.executor().await;
    let mut victim = mysql_async::Conn::from_url(scratch.url().as_str())
        .await
        .expect("a second connection");
    let victim_id = victim.id();
    let started = Instant::now();
    let sleeping = tokio::spawn(async move {
        let slept: Result<Option<i64>, _> = victim.exec_first("SELECT SLEEP(20)", ()).await;
        let _ = victim.disconnect().await;
        slept
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    executor.kill_query(victim_id).await;
    let slept = tokio::time::timeout(Duration::from_secs(5), sleeping)
        .await
        .expect("the killed statement returns")
        .expect("the task ends");
    // MariaDB ends a killed SLEEP early with 1 (interrupted) or with error 1317.
    match slept {
        Ok(value) => assert_eq!(value, Some(1)),
        Err(mysql_async::Error::Server(error)) => assert_eq!(error.code, 1317),
        Err(other) => panic!("{other}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// The guard alone: a root connection with the read-only session and transaction switched
/// off, so nothing but the guard (the parser check and the plan check) stands between
/// the MySQL hostile lines and the server. Each is refused with its reason, and the
/// data and tables are as they were.
#[tokio::test]
async fn mysql_guard_alone_refuses_every_mysql_hostile_line_as_root() {
    let Some(scratch) = ScratchMysql::new("mysql_guard_alone").await else {
        return;
    };
    let url: crate::database::DatabaseUrl = scratch.url().parse().expect("a MySQL URL parses");
    let notes = crate::schema::SchemaNotes {
        restricted_columns: vec![
            "customers.phone".to_string(),
            "customers.address".to_string(),
        ],
        ..Default::default()
    };
    let options = super::GateOptions {
        notes: Some(notes),
        ..super::GateOptions::default()
    };
    let gate = crate::database::open_gate(&url, options)
        .await
        .unwrap_or_else(|error| panic!("the gate opens: {error}"));
    let super::Backend::Mysql(executor) = &gate.inner.backend else {
        panic!("not a MySQL gate");
    };
    executor.set_read_only_for_tests(false);
    // With the read-only layer off, a write reaches the server: the hook is real.
    let written = gate
        .execute("CREATE TEMPORARY TABLE askdb_hook_check (a INT)")
        .await;
    assert!(written.is_ok(), "{written:?}");
    let lines: Vec<_> = super::tests::load_corpus("hostile_sql.jsonl")
        .into_iter()
        .filter(|entry| entry.dialect == "mysql")
        .collect();
    assert!(lines.len() >= 30, "{} lines", lines.len());
    let mut wrong = Vec::new();
    for entry in &lines {
        match gate.run_query(&entry.sql).await {
            super::QueryOutcome::Rows(rows) => {
                wrong.push(format!("{} ran: {:?}", entry.id, rows.rows))
            }
            super::QueryOutcome::Failed(error)
                if error.reason != entry.reason_in(super::SqlDialect::Mysql) =>
            {
                wrong.push(format!(
                    "{} refused as {:?}, expected {:?}: {}",
                    entry.id, error.reason, entry.reason, error.message
                ))
            }
            super::QueryOutcome::Failed(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(scratch.count_bills().await, 3);
    assert_eq!(
        scratch.tables().await,
        ["askdb_query_log", "bills", "customers"]
    );
}

/// The SQL askdb writes for its own checks runs on MySQL: the empty-result probe and
/// the stored-spelling lookup (text cast to CHAR, names in backticks), the value index's
/// reads, and a join the rules rewrite on its foreign key. Each is written once for
/// every engine; a double-quoted name or `CAST(x AS TEXT)` fails here without a word
/// (the repairs they feed never happen), so each is run for real.
#[tokio::test]
async fn mysql_runs_the_sql_askdb_writes_for_its_own_checks() {
    let Some(scratch) = ScratchMysql::new("mysql_own_sql").await else {
        return;
    };
    let mut admin = mysql_async::Conn::from_url(scratch.admin.as_str())
        .await
        .expect("admin connects");
    admin
        .query_drop(format!("USE `{}`", scratch.database))
        .await
        .expect("use");
    for statement in [
        "CREATE TABLE Breeds (BreedCode VARCHAR(10) COLLATE utf8mb4_bin PRIMARY KEY, BreedName VARCHAR(20) COLLATE utf8mb4_bin)",
        "INSERT INTO Breeds VALUES ('ESK', 'Eskimo'), ('HUS', 'Husky')",
        "CREATE TABLE Dogs (DogId INT PRIMARY KEY, BreedCode VARCHAR(10) COLLATE utf8mb4_bin, FOREIGN KEY (BreedCode) REFERENCES Breeds (BreedCode))",
        "INSERT INTO Dogs VALUES (1, 'ESK'), (2, 'HUS'), (3, 'HUS')",
    ] {
        admin.query_drop(statement).await.expect("set up");
    }
    let _ = admin.disconnect().await;
    let url: crate::database::DatabaseUrl = scratch.url().parse().expect("a MySQL URL parses");
    let gate = crate::database::open_gate(&url, super::GateOptions::default())
        .await
        .unwrap_or_else(|error| panic!("the gate opens: {error}"));

    // An empty answer whose filter is spelled in another case (the column compares
    // bytes): the probe finds the row and the lookup names the stored spelling.
    let empty = match gate
        .run_query("SELECT b.BreedCode FROM Breeds b WHERE b.BreedName = 'eskimo '")
        .await
    {
        super::QueryOutcome::Rows(rows) => rows,
        super::QueryOutcome::Failed(error) => panic!("{error}"),
    };
    assert!(empty.rows.is_empty(), "{:?}", empty.rows);
    let no_lookup = |_: &str| Vec::new();
    let (diagnosis, probe) = crate::agent::empty::diagnose(&gate, &empty, &no_lookup).await;
    match diagnosis {
        crate::agent::empty::Diagnosis::CaseMismatch { findings, .. } => assert!(
            findings.iter().any(|finding| finding.contains("'Eskimo'")),
            "{findings:?}"
        ),
        other => panic!("{other:?} (probe {probe:?})"),
    }

    // The value index reads every short text column.
    let cards = crate::linking::cards::build_cards(&gate)
        .await
        .expect("cards");
    let chosen: Vec<_> = cards.iter().collect();
    let values = crate::linking::values::collect(&gate, &chosen)
        .await
        .expect("values");
    assert!(
        values
            .iter()
            .any(|column| column.column == "breedname"
                && column.values.contains(&"Husky".to_string())),
        "{values:?}"
    );

    // A value compared with a column that does not hold it, in any case: the probe
    // (cast to CHAR) finds nothing, and the value index names the column that does.
    let index = crate::linking::values::ValueIndex::new(values);
    let holders = |value: &str| index.columns_holding(value);
    let zero = match gate
        .run_query("SELECT count(*) FROM Dogs d WHERE d.BreedCode = 'Husky'")
        .await
    {
        super::QueryOutcome::Rows(rows) => rows,
        super::QueryOutcome::Failed(error) => panic!("{error}"),
    };
    assert_eq!(zero.rows, vec![vec![json!(0)]]);
    match crate::agent::empty::diagnose(&gate, &zero, &holders).await {
        (crate::agent::empty::Diagnosis::ValueElsewhere { findings }, Some(_)) => assert!(
            findings
                .iter()
                // The index keeps names in lower case; the fact spells them as the
                // schema does.
                .any(|finding| finding.contains("stored in Breeds.BreedName")),
            "{findings:?}"
        ),
        other => panic!("{other:?}"),
    }

    // A join on a column its table lacks, rewritten on the key: the names it writes
    // are MySQL's, and the statement runs.
    let rejoined = crate::agent::repair_facts::join_on_foreign_key(
        "SELECT count(*) FROM Dogs d JOIN Breeds b ON d.DogId = b.BreedId WHERE b.BreedName = 'Husky'",
        super::SqlDialect::Mysql,
        gate.schema(),
    )
    .expect("the join is rewritten on its key");
    match gate.run_query(&rejoined).await {
        super::QueryOutcome::Rows(rows) => {
            assert_eq!(rows.rows, vec![vec![json!(2)]], "{rejoined}")
        }
        super::QueryOutcome::Failed(error) => panic!("{rejoined}: {error}"),
    }

    // What a model writes in SQLite's habits fails here as written, and runs as MySQL
    // reads it: a table and an alias in another case (where the server compares table
    // names by case, as Linux servers do by default), a LIMIT inside IN or ANY, or in one
    // branch of a UNION inside IN.
    let mut admin = mysql_async::Conn::from_url(scratch.admin.as_str())
        .await
        .expect("admin connects");
    let names_by_case: Option<i64> = admin
        .query_first("SELECT @@lower_case_table_names")
        .await
        .expect("the setting is read");
    let _ = admin.disconnect().await;
    let mut habits = vec![
        (
            "SELECT b.BreedName FROM Breeds b WHERE b.BreedCode IN \
             (SELECT BreedCode FROM Dogs GROUP BY BreedCode ORDER BY count(*) DESC LIMIT 1)",
            ErrorType::SyntaxError,
            vec![vec![json!("Husky")]],
        ),
        (
            "SELECT b.BreedName FROM Breeds b WHERE b.BreedCode = ANY \
             (SELECT BreedCode FROM Dogs GROUP BY BreedCode ORDER BY count(*) DESC LIMIT 1)",
            ErrorType::SyntaxError,
            vec![vec![json!("Husky")]],
        ),
        (
            "SELECT b.BreedName FROM Breeds b WHERE b.BreedCode IN \
             (SELECT BreedCode FROM Dogs WHERE DogId = 1 UNION \
             (SELECT BreedCode FROM Dogs GROUP BY BreedCode ORDER BY count(*) DESC LIMIT 1)) \
             ORDER BY b.BreedName",
            ErrorType::SyntaxError,
            vec![vec![json!("Eskimo")], vec![json!("Husky")]],
        ),
    ];
    if names_by_case == Some(0) {
        habits.push((
            "SELECT count(*) FROM dogs AS D WHERE d.BreedCode = 'HUS'",
            ErrorType::UnknownTable,
            vec![vec![json!(2)]],
        ));
    }
    for (written, expected_error, expected) in habits {
        match gate.run_query(written).await {
            super::QueryOutcome::Failed(error) => {
                assert_eq!(error.error_type, expected_error, "{written}: {error}")
            }
            super::QueryOutcome::Rows(rows) => panic!("{written} ran as written: {rows:?}"),
        }
        let (read, notes) = crate::agent::as_mysql_reads(
            written.to_string(),
            super::SqlDialect::Mysql,
            gate.schema(),
        );
        assert!(!notes.is_empty(), "{written}");
        match gate.run_query(&read).await {
            super::QueryOutcome::Rows(rows) => assert_eq!(rows.rows, expected, "{read}"),
            super::QueryOutcome::Failed(error) => panic!("{read}: {error}"),
        }
    }
}
