//! The golden sets across engines: every demo and Chinook gold query gives the same
//! result on SQLite and on PostgreSQL (compared by the evaluation's own comparator), and
//! Chinook's PostgreSQL script loads and is usable through the gate; every demo gold
//! query gives the same result on MariaDB as on SQLite, through the gate as the
//! `askdb_ro` user `askdb db setup` made. Each run loads its own uniquely named scratch
//! databases (and, on MariaDB, users) on 127.0.0.1 and drops them afterwards.

#[path = "support/ci.rs"]
mod ci;

use std::collections::BTreeMap;

use askdb::compare::{gold_orders, results_match, CompareOptions, ResultSet};
use askdb::demo::{self, DdlDialect};
use askdb::eval::golden::{self, GoldenItem};
use askdb::gate::{Gate, GateOptions, QueryOutcome, SqlDialect};

fn admin_url() -> String {
    askdb::eval::guard_check::admin_url()
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}_{}_{nanos}", std::process::id())
}

/// The demo as one PostgreSQL script, from the same generator as the SQLite file.
fn demo_postgres_script() -> String {
    let mut script = String::new();
    for table in demo::generate() {
        script.push_str(&demo::create_table_sql(&table.def, DdlDialect::Postgres));
        script.push_str(";\n");
        for insert in demo::insert_values_sql(&table, DdlDialect::Postgres, 500) {
            script.push_str(&insert);
            script.push_str(";\n");
        }
        if let Some(reset) = demo::sequence_reset_sql(&table.def, DdlDialect::Postgres) {
            script.push_str(&reset);
            script.push_str(";\n");
        }
    }
    script
}

async fn rows(gate: &Gate, sql: &str) -> Result<ResultSet, String> {
    match gate.run_query(sql).await {
        QueryOutcome::Rows(result) => Ok(ResultSet::from(&result)),
        QueryOutcome::Failed(error) => Err(format!("{error} in {sql}")),
    }
}

/// Each gold query on SQLite and on `other` (PostgreSQL or MySQL), compared; the
/// problems found.
async fn compare_golden(items: &[GoldenItem], sqlite: &Gate, other: &Gate) -> Vec<String> {
    let mut problems = Vec::new();
    for item in items {
        let Some(gold) = &item.gold_sql else { continue };
        let lite_sql = gold.for_dialect(SqlDialect::Sqlite);
        let pg_sql = gold.for_dialect(other.dialect());
        let (lite, pg) = match (rows(sqlite, lite_sql).await, rows(other, pg_sql).await) {
            (Ok(lite), Ok(pg)) => (lite, pg),
            (lite, pg) => {
                problems.push(format!(
                    "{}: sqlite {:?} / {} {:?}",
                    item.id,
                    lite.err(),
                    other.dialect().as_str(),
                    pg.err()
                ));
                continue;
            }
        };
        let options = CompareOptions {
            ordered: item.ordered || gold_orders(lite_sql, SqlDialect::Sqlite),
            ..CompareOptions::default()
        };
        let verdict = results_match(&lite, &pg, &options);
        if !verdict.is_match() {
            problems.push(format!("{}: {verdict}", item.id));
        }
    }
    problems
}

#[test]
fn golden_sets_give_the_same_results_on_sqlite_and_postgresql() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let admin = admin_url();
        if let Err(error) = askdb::admin::url_reachable(&admin).await {
            ci::skip_or_fail(
                "golden cross-dialect test",
                &format!("PostgreSQL is not reachable: {error}"),
            );
            return;
        }
        let data_dir = askdb::home::shared_data_dir().unwrap_or_else(|message| panic!("{message}"));
        let chinook_script =
            std::fs::read_to_string(data_dir.join("chinook/Chinook_PostgreSql.sql"))
                .expect("the Chinook PostgreSQL script");
        // The script drops and recreates a database named chinook, then connects to it:
        // load only what follows the connect line, into our own scratch database.
        let (_, chinook_body) = chinook_script
            .split_once("\\c chinook;")
            .expect("the script connects to chinook");

        let scratch: BTreeMap<&str, String> = [
            ("demo", unique("askdb_golden_demo")),
            ("chinook", unique("askdb_golden_chinook")),
        ]
        .into_iter()
        .collect();
        let mut problems = Vec::new();
        let outcome = async {
            let demo_url = askdb::admin::load_dump_into_database(
                &admin,
                &scratch["demo"],
                &demo_postgres_script(),
            )
            .await
            .map_err(|error| error.to_string())?;
            let chinook_url =
                askdb::admin::load_dump_into_database(&admin, &scratch["chinook"], chinook_body)
                    .await
                    .map_err(|error| error.to_string())?;
            let options = || GateOptions {
                row_cap: 100_000,
                ..GateOptions::default()
            };
            let dir = tempfile::tempdir().map_err(|error| error.to_string())?;
            let demo_file = dir.path().join("demo.sqlite");
            demo::write_sqlite(&demo_file).map_err(|error| error.to_string())?;
            let gates = [
                (
                    "demo",
                    askdb::database::open_gate(
                        &askdb::database::DatabaseUrl::Sqlite(demo_file),
                        options(),
                    )
                    .await,
                    askdb::database::open_gate(
                        &askdb::database::DatabaseUrl::Postgres(demo_url),
                        options(),
                    )
                    .await,
                ),
                (
                    "chinook",
                    askdb::database::open_gate(
                        &askdb::database::DatabaseUrl::Sqlite(golden::chinook_sqlite_path(
                            &data_dir,
                        )),
                        options(),
                    )
                    .await,
                    askdb::database::open_gate(
                        &askdb::database::DatabaseUrl::Postgres(chinook_url),
                        options(),
                    )
                    .await,
                ),
            ];
            for (set, sqlite, postgres) in gates {
                let sqlite = sqlite.map_err(|error| format!("{set} sqlite: {error}"))?;
                let postgres = postgres.map_err(|error| format!("{set} postgres: {error}"))?;
                // Chinook's PostgreSQL tables are usable through the gate.
                assert!(
                    postgres.list_tables().len() >= 11,
                    "{set}: {:?}",
                    postgres.list_tables()
                );
                let items = golden::builtin(set).map_err(|error| error.to_string())?;
                let answerable = items.iter().filter(|item| item.gold_sql.is_some()).count();
                let found = compare_golden(&items, &sqlite, &postgres).await;
                eprintln!(
                    "{set}: {answerable} gold queries compared, {} differ",
                    found.len()
                );
                problems.extend(found);
            }
            Ok::<(), String>(())
        }
        .await;
        for database in scratch.values() {
            let _ = askdb::admin::drop_database(&admin, database).await;
        }
        if let Err(error) = outcome {
            panic!("{error}");
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    });
}

fn mysql_admin_url() -> String {
    std::env::var("ASKDB_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/".to_string())
}

/// The demo set on MariaDB: loaded by `askdb db setup` (the same generator as the SQLite
/// file), every gold query run through the gate as `askdb_ro` (the parser check, the
/// server's plan and the column grants all on), each result compared with SQLite's by
/// the evaluation's comparator. SQLite's equal PostgreSQL's (the test above), so the
/// three engines agree.
///
/// What the engines legitimately differ on is normalised by the comparator, not here:
/// a DECIMAL comes back as its exact text (PostgreSQL's NUMERIC too) where SQLite gives a
/// REAL, and numbers are compared by value; a BOOLEAN is TINYINT(1), read back as 0/1 as
/// SQLite's is, and compared with PostgreSQL's true/false by value. Text compares as
/// on the other two because setup makes the database's collation binary.
#[test]
fn demo_golden_set_gives_the_same_results_on_mariadb_through_the_gate() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let admin = mysql_admin_url();
        let tag = unique("g");
        let database = format!("askdb_golden_{tag}");
        let users = [format!("askdb_ro_{tag}"), format!("askdb_log_{tag}")];
        let options = askdb::admin::SetupOptions {
            admin_url: admin.clone(),
            database: database.clone(),
            read_only_role: askdb::admin::RoleSpec::new(&users[0]),
            log_role: askdb::admin::RoleSpec::new(&users[1]),
            example_rls: Vec::new(),
        };
        let report = match askdb::admin::setup(&options).await {
            Ok(report) => report,
            Err(askdb::admin::SetupError::Connect { message, .. }) => {
                ci::skip_or_fail(
                    "golden MariaDB test",
                    &format!("MariaDB is not reachable: {message}"),
                );
                return;
            }
            Err(error) => {
                let names: Vec<&str> = users.iter().map(String::as_str).collect();
                let _ = askdb::admin::remove_mysql_setup(&admin, &database, &names).await;
                panic!("db setup on MariaDB failed: {error}");
            }
        };
        let outcome = async {
            let options = || GateOptions {
                row_cap: 100_000,
                ..GateOptions::default()
            };
            let dir = tempfile::tempdir().map_err(|error| error.to_string())?;
            let demo_file = dir.path().join("demo.sqlite");
            demo::write_sqlite(&demo_file).map_err(|error| error.to_string())?;
            let sqlite = askdb::database::open_gate(
                &askdb::database::DatabaseUrl::Sqlite(demo_file),
                options(),
            )
            .await
            .map_err(|error| format!("sqlite: {error}"))?;
            let url: askdb::database::DatabaseUrl = report
                .read_only
                .connection_url()
                .parse()
                .map_err(|error| format!("{error}"))?;
            let mariadb = askdb::database::open_gate(&url, options())
                .await
                .map_err(|error| format!("mariadb: {error}"))?;
            assert_eq!(mariadb.dialect(), SqlDialect::Mysql);
            let items = golden::builtin("demo").map_err(|error| error.to_string())?;
            let answerable = items.iter().filter(|item| item.gold_sql.is_some()).count();
            assert!(answerable >= 30, "{answerable} gold queries");
            let found = compare_golden(&items, &sqlite, &mariadb).await;
            eprintln!(
                "demo on MariaDB: {answerable} gold queries compared, {} differ",
                found.len()
            );
            Ok::<Vec<String>, String>(found)
        }
        .await;
        let names: Vec<&str> = users.iter().map(String::as_str).collect();
        let dropped = askdb::admin::remove_mysql_setup(&admin, &database, &names).await;
        let problems = outcome.unwrap_or_else(|error| panic!("{error}"));
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        dropped.unwrap_or_else(|error| panic!("the scratch database stays: {error}"));
    });
}
