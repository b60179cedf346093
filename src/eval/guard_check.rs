//! Guard equivalence on other people's SQL: every gold query of the external
//! benchmarks must pass the guard, and the guard's re-rendered text must return
//! exactly what the original returns. A guard that refuses real analytics SQL, or
//! changes its meaning while re-rendering, fails here.
//!
//! Both texts run on the same gate and the same read-only executor: the re-rendered
//! one through `run_query`, the original with the guard switched off (benchmark gold
//! text, never model output). The row cap is raised so the forced LIMIT never cuts a
//! result and the comparison sees whole results.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::eval::external::{self, ExternalDialect, ExternalQuery};
use crate::eval::runner::EvalError;
use crate::gate::{Database, Gate, GateOptions, QueryOutcome};

/// The cap used for the comparison: above every benchmark result size.
const COMPARISON_ROW_CAP: u64 = 1_000_000;

/// One gold variant the guard refused or whose result changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Discrepancy {
    pub id: String,
    pub db_name: String,
    pub sql: String,
    pub problem: String,
}

/// The outcome over one benchmark set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EquivalenceReport {
    pub set: String,
    pub dialect: String,
    /// Questions in the set.
    pub questions: usize,
    /// Concrete gold queries checked (alternatives and column-subset variants).
    pub gold_queries: usize,
    pub accepted: usize,
    /// Accepted, run both ways, identical results (rows in order, values exact).
    pub same_result: usize,
    /// The original itself fails on its database (a benchmark defect, not the guard's):
    /// counted as the same when the re-rendered text fails with the same error type.
    pub original_fails: usize,
    /// Accepted with the very text submitted (or with only the comparison's row cap
    /// appended, above the result's size), yet the two runs returned different rows:
    /// the engine chose differently among rows an ORDER BY leaves tied (MySQL and
    /// MariaDB may, between a text and a prepared statement, or once an outer `LIMIT`
    /// changes the plan of a subquery's `ORDER BY ... LIMIT 1`). Not the guard's doing,
    /// so not a discrepancy; counted apart.
    #[serde(default)]
    pub same_text_rows_differ: usize,
    pub discrepancies: Vec<Discrepancy>,
    /// Mean time for the guard alone, in microseconds per query.
    pub guard_mean_us: f64,
    /// Mean time of the guard's database check of an accepted query the first time it is
    /// seen (PostgreSQL plans it, SQLite prepares it), in microseconds.
    #[serde(default)]
    pub database_check_mean_us: f64,
    /// Mean time of the same check when the statement is asked again (accepted from
    /// memory), in microseconds.
    #[serde(default)]
    pub database_check_repeat_mean_us: f64,
}

/// Runs the check over a list of questions whose databases are SQLite files.
pub async fn check_sqlite_set(
    set: &str,
    queries: &[ExternalQuery],
    database_path: impl Fn(&str) -> std::path::PathBuf,
) -> Result<EquivalenceReport, EvalError> {
    let mut gates = BTreeMap::new();
    for query in queries {
        if gates.contains_key(&query.db_name) {
            continue;
        }
        let url = Database::Sqlite(database_path(&query.db_name));
        let gate = open_comparison_gate(&url)
            .await
            .map_err(|error| EvalError::Database {
                db: query.db_name.clone(),
                error: error.to_string(),
            })?;
        gates.insert(query.db_name.clone(), gate);
    }
    Ok(compare_on_gates(set, "sqlite", queries, &gates).await)
}

async fn open_comparison_gate(url: &Database) -> Result<Gate, crate::gate::GateError> {
    let options = GateOptions {
        row_cap: COMPARISON_ROW_CAP,
        ..GateOptions::default()
    };
    Gate::open(url, options).await
}

/// Checks every concrete gold of `queries` on the gate of its database.
pub async fn compare_on_gates(
    set: &str,
    dialect: &str,
    queries: &[ExternalQuery],
    gates: &BTreeMap<String, Gate>,
) -> EquivalenceReport {
    let mut report = EquivalenceReport {
        set: set.to_string(),
        dialect: dialect.to_string(),
        questions: queries.len(),
        gold_queries: 0,
        accepted: 0,
        same_result: 0,
        original_fails: 0,
        same_text_rows_differ: 0,
        discrepancies: Vec::new(),
        guard_mean_us: 0.0,
        database_check_mean_us: 0.0,
        database_check_repeat_mean_us: 0.0,
    };
    let mut guard_time = std::time::Duration::ZERO;
    let mut check_time = std::time::Duration::ZERO;
    let mut repeat_time = std::time::Duration::ZERO;
    let mut verified = 0u32;
    for question in queries {
        let db_name = question.db_name.as_str();
        let Some(gate) = gates.get(db_name) else {
            report.discrepancies.push(Discrepancy {
                id: question.id.clone(),
                db_name: db_name.to_string(),
                sql: String::new(),
                problem: "no database for this question".to_string(),
            });
            continue;
        };
        for sql in external::concrete_golds(question) {
            report.gold_queries += 1;
            let started = Instant::now();
            let checked = gate.check(&sql);
            guard_time += started.elapsed();
            let discrepancy = |problem: String| Discrepancy {
                id: question.id.clone(),
                db_name: db_name.to_string(),
                sql: sql.clone(),
                problem,
            };
            let checked = match checked {
                Ok(checked) => checked,
                Err(refusal) => {
                    report
                        .discrepancies
                        .push(discrepancy(format!("refused: {refusal}")));
                    continue;
                }
            };
            report.accepted += 1;
            // The database check timed on its own, first and again: the run below then
            // finds it accepted (a refusal shows as the run's error).
            let started = Instant::now();
            let verdict = gate.verify(&checked).await;
            check_time += started.elapsed();
            if verdict.is_ok() {
                let started = Instant::now();
                let _ = gate.verify(&checked).await;
                repeat_time += started.elapsed();
                verified += 1;
            }
            let original = gate.run_benchmark_gold_as_written(&sql).await;
            let rendered = gate.run(&checked).await;
            match (original, rendered) {
                (Ok(original), QueryOutcome::Rows(rendered)) => {
                    if original.rows == rendered.rows && original.truncated == rendered.truncated {
                        report.same_result += 1;
                    } else if checked.sql() == sql.trim()
                        || (only_the_row_cap_added(&sql, checked.sql())
                            && !original.truncated
                            && !rendered.truncated)
                    {
                        report.same_text_rows_differ += 1;
                    } else {
                        report.discrepancies.push(discrepancy(format!(
                            "different result: original {} rows, re-rendered {} rows ({})",
                            original.rows.len(),
                            rendered.rows.len(),
                            checked.sql()
                        )));
                    }
                }
                (Err(original), QueryOutcome::Failed(rendered))
                    if original.error_type == rendered.error_type =>
                {
                    report.original_fails += 1;
                    report.same_result += 1;
                }
                (original, rendered) => {
                    let describe_original = match original {
                        Ok(rows) => format!("{} rows", rows.rows.len()),
                        Err(failure) => format!("error {}", failure.message),
                    };
                    let describe_rendered = match rendered {
                        QueryOutcome::Rows(rows) => format!("{} rows", rows.row_count),
                        QueryOutcome::Failed(error) => format!("error {error}"),
                    };
                    report.discrepancies.push(discrepancy(format!(
                        "original gave {describe_original}, re-rendered gave {describe_rendered} ({})",
                        checked.sql()
                    )));
                }
            }
        }
    }
    if report.gold_queries > 0 {
        report.guard_mean_us = guard_time.as_secs_f64() * 1e6 / report.gold_queries as f64;
    }
    if report.accepted > 0 {
        report.database_check_mean_us = check_time.as_secs_f64() * 1e6 / report.accepted as f64;
    }
    if verified > 0 {
        report.database_check_repeat_mean_us =
            repeat_time.as_secs_f64() * 1e6 / f64::from(verified);
    }
    report
}

/// Whether the guard's text is the original with nothing but the comparison's row cap
/// appended. A cap above the result's size selects nothing away, so the statement means
/// what the original means, and rows that still differ are the engine's choice among
/// rows an ORDER BY leaves tied: their order, or, before a `LIMIT` in a subquery, which
/// of them (MariaDB may choose differently once the outer `LIMIT` changes the plan).
fn only_the_row_cap_added(original: &str, rendered: &str) -> bool {
    let original = original.trim().trim_end_matches(';').trim_end();
    rendered == format!("{original} LIMIT {COMPARISON_ROW_CAP}")
}

/// defog's PostgreSQL gold over its own dumps, each loaded into a scratch database
/// on the server at `admin_url` (dropped afterwards, also after a failure).
pub async fn check_defog_postgres(
    data_dir: &Path,
    admin_url: &str,
) -> Result<EquivalenceReport, EvalError> {
    let queries = external::load_defog(data_dir, ExternalDialect::Postgres)
        .map_err(|error| EvalError::Data(error.to_string()))?;
    let names: std::collections::BTreeSet<String> =
        queries.iter().map(|query| query.db_name.clone()).collect();
    let suffix = format!("{}_{}", std::process::id(), crate::calendar::unix_millis());
    let mut created = Vec::new();
    let mut gates = BTreeMap::new();
    let mut failure = None;
    for name in &names {
        let scratch = format!("askdb_guard_{name}_{suffix}");
        let dump_path = external::defog_postgres_dump(data_dir, name);
        let dump = match std::fs::read_to_string(&dump_path) {
            Ok(dump) => dump,
            Err(error) => {
                failure = Some(format!("cannot read {}: {error}", dump_path.display()));
                break;
            }
        };
        created.push(scratch.clone());
        match crate::admin::load_dump_into_database(admin_url, &scratch, &dump).await {
            Ok(url) => match open_comparison_gate(&Database::Postgres(url)).await {
                Ok(gate) => {
                    gates.insert(name.clone(), gate);
                }
                Err(error) => {
                    failure = Some(format!("{name}: {error}"));
                    break;
                }
            },
            Err(error) => {
                failure = Some(format!("{name}: {error}"));
                break;
            }
        }
    }
    let report = match failure {
        None => Some(compare_on_gates("defog", "postgres", &queries, &gates).await),
        Some(_) => None,
    };
    drop(gates);
    for scratch in created {
        let _ = crate::admin::drop_database(admin_url, &scratch).await;
    }
    match (report, failure) {
        (Some(report), _) => Ok(report),
        (None, Some(failure)) => Err(EvalError::Data(failure)),
        (None, None) => Err(EvalError::Data("no report".to_string())),
    }
}

/// Spider's MySQL-style gold on MySQL or MariaDB: each dev database copied from its
/// SQLite file into a scratch database on the server at `admin_url`
/// ([`crate::admin::copy_sqlite_into_mysql`]), checked with the guard's MySQL dialect,
/// and dropped afterwards, also after a failure.
pub async fn check_spider_mysql(
    data_dir: &Path,
    admin_url: &str,
) -> Result<EquivalenceReport, EvalError> {
    let queries =
        external::load_spiderman(data_dir).map_err(|error| EvalError::Data(error.to_string()))?;
    let names: std::collections::BTreeSet<String> =
        queries.iter().map(|query| query.db_name.clone()).collect();
    let suffix = format!("{}_{}", std::process::id(), crate::calendar::unix_millis());
    let mut created = Vec::new();
    let mut gates = BTreeMap::new();
    let mut failure = None;
    for name in &names {
        let scratch = format!("askdb_guard_{name}_{suffix}");
        created.push(scratch.clone());
        let source = external::spiderman_db_path(data_dir, name);
        if let Err(error) = crate::admin::copy_sqlite_into_mysql(&source, admin_url, &scratch).await
        {
            failure = Some(format!("{name}: {error}"));
            break;
        }
        let url = crate::admin::url_with_database(admin_url, &scratch);
        match open_comparison_gate(&Database::Mysql(url)).await {
            Ok(gate) => {
                gates.insert(name.clone(), gate);
            }
            Err(error) => {
                failure = Some(format!("{name}: {error}"));
                break;
            }
        }
    }
    let report = match failure {
        None => Some(compare_on_gates("spider", "mysql", &queries, &gates).await),
        Some(_) => None,
    };
    drop(gates);
    for scratch in created {
        let _ = crate::admin::drop_mysql_database(admin_url, &scratch).await;
    }
    match (report, failure) {
        (Some(report), _) => Ok(report),
        (None, Some(failure)) => Err(EvalError::Data(failure)),
        (None, None) => Err(EvalError::Data("no report".to_string())),
    }
}

/// The MySQL or MariaDB server the model-free MySQL checks use: `ASKDB_MYSQL_ADMIN_URL`,
/// else the development and CI server.
pub fn mysql_admin_url() -> String {
    std::env::var("ASKDB_MYSQL_ADMIN_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| "mysql://root@127.0.0.1:3306/".to_string())
}

/// The PostgreSQL server the model-free PostgreSQL checks use: `ASKDB_ADMIN_URL`, else
/// the development and CI server.
pub fn admin_url() -> String {
    std::env::var("ASKDB_ADMIN_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

/// Spider dev (spiderman's SQLite rebuild) and defog's SQLite gold.
pub async fn check_external_sqlite(data_dir: &Path) -> Result<Vec<EquivalenceReport>, EvalError> {
    let spider =
        external::load_spiderman(data_dir).map_err(|error| EvalError::Data(error.to_string()))?;
    let defog = external::load_defog(data_dir, ExternalDialect::Sqlite)
        .map_err(|error| EvalError::Data(error.to_string()))?;
    let spider_report = check_sqlite_set("spider", &spider, |db| {
        external::spiderman_db_path(data_dir, db)
    })
    .await?;
    let defog_report = check_sqlite_set("defog", &defog, |db| {
        external::defog_sqlite_path(data_dir, db)
    })
    .await?;
    Ok(vec![spider_report, defog_report])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_appended_cap_passes_as_the_engines_choice_among_ties() {
        let original = "SELECT a FROM t GROUP BY a ORDER BY COUNT(*) ASC;";
        assert!(only_the_row_cap_added(
            original,
            &format!("SELECT a FROM t GROUP BY a ORDER BY COUNT(*) ASC LIMIT {COMPARISON_ROW_CAP}")
        ));
        assert!(!only_the_row_cap_added(
            original,
            &format!(
                "SELECT a FROM t GROUP BY a ORDER BY COUNT(*) DESC LIMIT {COMPARISON_ROW_CAP}"
            )
        ));
        assert!(!only_the_row_cap_added(
            original,
            "SELECT a FROM t GROUP BY a ORDER BY COUNT(*) ASC LIMIT 5"
        ));
    }

    /// The first twenty discrepancies, enough to see what broke.
    fn first_discrepancies(report: &EquivalenceReport) -> String {
        let shown: Vec<String> = report
            .discrepancies
            .iter()
            .take(20)
            .map(|d| format!("{} [{}] {}\n    {}", d.id, d.db_name, d.problem, d.sql))
            .collect();
        shown.join("\n")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_external_sqlite_gold_query_passes_and_keeps_its_result() {
        let data_dir = crate::home::shared_data_dir().unwrap_or_else(|message| panic!("{message}"));
        let reports = check_external_sqlite(&data_dir)
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        for report in &reports {
            eprintln!(
                "{}: {} questions, {} gold queries, {} accepted, {} same result ({} where the original itself fails), guard {:.1} us/query",
                report.set,
                report.questions,
                report.gold_queries,
                report.accepted,
                report.same_result,
                report.original_fails,
                report.guard_mean_us
            );
            assert!(
                report.discrepancies.is_empty(),
                "{}: {} discrepancies:\n{}",
                report.set,
                report.discrepancies.len(),
                first_discrepancies(report)
            );
            assert!(report.gold_queries >= report.questions);
        }
        assert_eq!(reports[0].questions, 1034);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_defog_postgres_gold_query_passes_and_keeps_its_result() {
        let data_dir = crate::home::shared_data_dir().unwrap_or_else(|message| panic!("{message}"));
        let url = admin_url();
        if let Err(error) = crate::admin::url_reachable(&url).await {
            crate::ci::skip_or_fail(
                "defog PostgreSQL equivalence",
                &format!("PostgreSQL is not reachable: {error}"),
            );
            return;
        }
        let report = check_defog_postgres(&data_dir, &url)
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        eprintln!(
            "defog (postgres): {} questions, {} gold queries, {} accepted, {} same result",
            report.questions, report.gold_queries, report.accepted, report.same_result
        );
        assert!(
            report.discrepancies.is_empty(),
            "{}",
            first_discrepancies(&report)
        );
        assert_eq!(report.questions, 314);
        assert!(report.gold_queries >= 480);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_spider_gold_query_passes_on_mariadb_and_keeps_its_result() {
        let data_dir = crate::home::shared_data_dir().unwrap_or_else(|message| panic!("{message}"));
        let url = mysql_admin_url();
        if let Err(error) = crate::admin::mysql_reachable(&url).await {
            crate::ci::skip_or_fail(
                "Spider MySQL equivalence",
                &format!("MySQL is not reachable: {error}"),
            );
            return;
        }
        let report = check_spider_mysql(&data_dir, &url)
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        eprintln!(
            "spider (mysql): {} questions, {} gold queries, {} accepted, {} same result ({} where the original itself fails), guard {:.1} us/query",
            report.questions,
            report.gold_queries,
            report.accepted,
            report.same_result,
            report.original_fails,
            report.guard_mean_us
        );
        assert!(
            report.discrepancies.is_empty(),
            "{} discrepancies:\n{}",
            report.discrepancies.len(),
            first_discrepancies(&report)
        );
        assert_eq!(report.questions, 1034);
        assert_eq!(
            report.same_result + report.same_text_rows_differ,
            report.gold_queries
        );
    }
}
