//! The statistics over hand-made rows, and the SQLite log written, probed and read back.

use super::stats::{compute, render, LogRow, LogSource};
use super::*;

fn row(at: &str, decision: &str, attempts: i64, errors: &[&str], rows: i64) -> LogRow {
    LogRow {
        asked_at: at.to_string(),
        decision: decision.to_string(),
        attempts: Some(attempts),
        error_types: errors.iter().map(|e| e.to_string()).collect(),
        row_count: Some(rows),
    }
}

#[test]
fn statistics_count_errors_rates_attempts_and_zero_row_runs() {
    let rows = vec![
        row("2026-12-01 10:00:00", "answer", 1, &[], 3),
        row("2026-12-01 10:01:00", "answer", 2, &["unknown_column"], 0),
        row(
            "2026-12-01 10:02:00",
            "answer",
            3,
            &["unknown_column", "syntax_error"],
            0,
        ),
        row(
            "2026-12-01 10:03:00",
            "give_up",
            3,
            &["unknown_column"; 3],
            0,
        ),
        row("2026-12-01 10:04:00", "answer", 1, &[], 0),
        row("2026-12-02 09:00:00", "decline", 0, &[], 0),
        row("2026-12-02 09:01:00", "answer", 1, &[], 5),
        row("2026-12-02 09:02:00", "proof", 0, &[], 0),
    ];
    let stats = compute(&rows);
    assert_eq!(stats.questions, 7, "the proof row is not a question");
    assert_eq!(stats.error_types[0].error_type, "unknown_column");
    assert_eq!(stats.error_types[0].count, 5);
    assert_eq!(stats.error_types[1].count, 1);
    assert!((stats.give_up_rate - 1.0 / 7.0).abs() < 1e-9);
    assert!((stats.refusal_rate - 1.0 / 7.0).abs() < 1e-9);
    assert_eq!(stats.attempts_per_success_by_day.len(), 2);
    assert!((stats.attempts_per_success_by_day[0].mean_attempts - 7.0 / 4.0).abs() < 1e-9);
    assert!((stats.attempts_per_success_by_day[1].mean_attempts - 1.0).abs() < 1e-9);
    // The give-up between them does not break the run: only answers count.
    assert_eq!(stats.zero_row_answers, 3);
    assert_eq!(stats.zero_row_runs.len(), 1);
    assert_eq!(stats.zero_row_runs[0].answers, 3);
    let text = render(&stats);
    assert!(text.contains("give-up rate: 14.3%"), "{text}");
    assert!(text.contains("2026-12-01  1.75 over 4 answer(s)"), "{text}");
}

fn record(question: &str, rows: u64) -> LogRecord {
    LogRecord {
        question: question.to_string(),
        asked_at: SystemTime::now(),
        sql: Some("SELECT 1".to_string()),
        attempts: 2,
        error_types: vec!["unknown_column".to_string()],
        decision: "answer".to_string(),
        row_count: rows,
        latency_ms: 12,
        input_tokens: 100,
        output_tokens: 10,
        cost_usd: 0.001,
        model: Some("scripted".to_string()),
        trace_id: None,
        mode: "agent".to_string(),
        conversation_id: None,
        turn: None,
        examples: Vec::new(),
        rerun_example: None,
        user: None,
    }
}

#[tokio::test]
async fn the_sqlite_log_is_written_in_the_background_probed_without_a_row_and_read_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nested").join(SQLITE_LOG_FILE);
    let log = QueryLog::start(LogTarget::Sqlite {
        path: path.clone(),
        database: "demo".to_string(),
    });
    log.probe().await.expect("the probe writes and rolls back");
    for (i, rows) in [0u64, 0, 4].into_iter().enumerate() {
        log.record(record(&format!("question {i}"), rows));
    }
    let started = std::time::Instant::now();
    while log.counters().written() < 3 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(log.counters().written(), 3);
    assert_eq!(log.counters().failed(), 0);
    let rows = stats::read(&LogSource::Sqlite(path.clone()), None)
        .await
        .expect("read");
    assert_eq!(rows.len(), 3, "the probe left no row");
    let stats = compute(&rows);
    assert_eq!(stats.zero_row_runs[0].answers, 2);
    assert_eq!(stats.error_types[0].count, 3);
}

#[tokio::test]
async fn a_log_that_cannot_be_written_is_counted_not_raised() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A directory where the file should be: SQLite cannot open it.
    let path = dir.path().join("is_a_dir");
    std::fs::create_dir_all(&path).expect("dir");
    let log = QueryLog::start(LogTarget::Sqlite {
        path,
        database: "demo".to_string(),
    });
    log.record(record("q", 1));
    let started = std::time::Instant::now();
    while log.counters().failed() < 1 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(log.counters().failed(), 1);
    assert!(log.counters().last_error().is_some());
    assert!(log.probe().await.is_err());
}

/// A log file made by an older askdb keeps its rows and gains every later column
/// (conversation and turn, the user, the verified examples used), each recorded.
#[tokio::test]
async fn an_older_sqlite_log_gains_the_later_columns_and_keeps_its_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(SQLITE_LOG_FILE);
    {
        let old = rusqlite::Connection::open(&path).expect("creates");
        old.execute_batch(&format!(
            "CREATE TABLE {QUERY_LOG_TABLE} (id INTEGER PRIMARY KEY AUTOINCREMENT, \
             asked_at TEXT NOT NULL, question TEXT, sql TEXT, decision TEXT, error_type TEXT, \
             latency_ms INTEGER, attempts INTEGER, error_types TEXT, row_count INTEGER, \
             input_tokens INTEGER, output_tokens INTEGER, cost_usd REAL, model TEXT, \
             trace_id TEXT, mode TEXT, database TEXT); \
             INSERT INTO {QUERY_LOG_TABLE} (asked_at, question) VALUES ('2026-01-01T00:00:00Z', 'old');"
        ))
        .expect("an older log");
    }
    let log = QueryLog::start(LogTarget::Sqlite {
        path: path.clone(),
        database: "demo".to_string(),
    });
    log.record(LogRecord {
        conversation_id: Some("0123456789abcdef0123456789abcdef".to_string()),
        turn: Some(2),
        user: Some("ana".to_string()),
        examples: vec![3, 7],
        rerun_example: Some(3),
        ..record("and in 2024?", 1)
    });
    let started = std::time::Instant::now();
    while log.counters().written() + log.counters().failed() < 1
        && started.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        log.counters().written(),
        1,
        "{:?}",
        log.counters().last_error()
    );
    let read = rusqlite::Connection::open(&path).expect("opens");
    // question, conversation_id, turn, user_name, examples, rerun_example
    type Logged = (
        String,
        Option<String>,
        Option<i64>,
        Option<String>,
        Option<String>,
        Option<i64>,
    );
    let rows: Vec<Logged> = read
        .prepare(&format!(
            "SELECT question, conversation_id, turn, user_name, examples, rerun_example \
             FROM {QUERY_LOG_TABLE} ORDER BY id"
        ))
        .expect("prepares")
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
            ))
        })
        .expect("reads")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    assert_eq!(
        rows,
        vec![
            ("old".to_string(), None, None, None, None, None),
            (
                "and in 2024?".to_string(),
                Some("0123456789abcdef0123456789abcdef".to_string()),
                Some(2),
                Some("ana".to_string()),
                Some("3,7".to_string()),
                Some(3)
            ),
        ]
    );
}

/// The log on MariaDB, for real: `askdb db setup` makes the table and the insert-only
/// `askdb_log` user; rows queued are written in the background as that user with every
/// column, the probe leaves none, and the read-only user's URL as a log is refused by
/// the server and counted, never raised.
#[tokio::test]
async fn the_mysql_log_is_written_as_the_log_user_probed_without_a_row_and_refused_to_others() {
    use mysql_async::prelude::Queryable;
    let test = "the_mysql_log_is_written_as_the_log_user";
    let Some(setup) = crate::mysql_setup::MysqlSetup::new(test).await else {
        return;
    };
    let report = crate::admin::setup(&setup.options(None))
        .await
        .unwrap_or_else(|error| panic!("db setup failed: {error}"));
    let target = LogTarget::for_url(report.log.connection_url().replacen(
        "mysql://",
        "mariadb://",
        1,
    ));
    assert!(matches!(target, LogTarget::Mysql(_)), "{target:?}");
    assert!(!target.describe().contains(report.log.password.expose()));
    let log = QueryLog::start(target);
    log.probe().await.expect("the probe inserts and rolls back");
    log.record(LogRecord {
        conversation_id: Some("c0ffee".to_string()),
        turn: Some(2),
        user: Some("ana".to_string()),
        examples: vec![3, 7],
        rerun_example: Some(3),
        question: "What's \\ the 'total'?".to_string(),
        ..record("unused", 4)
    });
    log.record(record("second", 0));
    let started = std::time::Instant::now();
    while log.counters().written() + log.counters().failed() < 2
        && started.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        log.counters().written(),
        2,
        "{:?}",
        log.counters().last_error()
    );
    let mut admin = setup.admin().await;
    type Logged = (
        String,
        Option<String>,
        String,
        Option<String>,
        Option<String>,
        Option<u32>,
        Option<String>,
        Option<String>,
        Option<i64>,
        Option<i64>,
    );
    let rows: Vec<Logged> = admin
        .query(format!(
            "SELECT question, `sql`, decision, error_types, conversation_id, turn, user_name, \
             examples, rerun_example, row_count FROM {QUERY_LOG_TABLE} \
             WHERE decision <> 'proof' ORDER BY id"
        ))
        .await
        .expect("the log reads as root");
    assert_eq!(rows.len(), 2, "the probe left a row: {rows:?}");
    assert_eq!(
        rows[0],
        (
            "What's \\ the 'total'?".to_string(),
            Some("SELECT 1".to_string()),
            "answer".to_string(),
            Some("unknown_column".to_string()),
            Some("c0ffee".to_string()),
            Some(2),
            Some("ana".to_string()),
            Some("3,7".to_string()),
            Some(3),
            Some(4),
        )
    );
    assert_eq!(rows[1].0, "second");
    let asked: Option<String> = admin
        .query_first(format!(
            "SELECT CAST(MAX(asked_at) AS CHAR) FROM {QUERY_LOG_TABLE} WHERE decision <> 'proof'"
        ))
        .await
        .expect("asked_at");
    assert_eq!(
        asked.map(|at| at[..10].to_string()),
        Some(format_utc(SystemTime::now())[..10].to_string())
    );
    let _ = admin.disconnect().await;
    // `askdb log stats` and `examples list --unused-days` read it with a URL that may.
    let source = LogSource::Mysql(format!("{}{}", setup.admin, setup.database));
    let read = stats::read(&source, None).await.expect("log stats reads");
    assert_eq!(read.len(), 2, "{read:?}");
    assert_eq!(read[0].error_types, ["unknown_column"]);
    assert_eq!(compute(&read).questions, 2);
    // One user's questions alone (`log stats --user`): ana asked the first.
    let anas = stats::read(&source, Some("ana")).await.expect("ana's rows");
    assert_eq!(anas.len(), 1, "{anas:?}");
    assert_eq!(anas[0].error_types, ["unknown_column"]);
    let nobodys = stats::read(&source, Some("ana' OR '1'='1"))
        .await
        .expect("read");
    assert!(nobodys.is_empty(), "the name is a parameter: {nobodys:?}");
    let since = format_utc(SystemTime::now() - Duration::from_secs(86_400));
    let used = usage::examples_used_since(&source, &since)
        .await
        .expect("examples read");
    assert_eq!(used.into_iter().collect::<Vec<_>>(), [3, 7]);

    // The read-only user may not write the log: refused by the server, counted.
    let wrong = QueryLog::start(LogTarget::Mysql(
        report.read_only.connection_url().to_string(),
    ));
    wrong.record(record("not allowed", 1));
    let started = std::time::Instant::now();
    while wrong.counters().failed() < 1 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(wrong.counters().failed(), 1);
    let error = wrong.counters().last_error().unwrap_or_default();
    assert!(error.contains("INSERT command denied"), "{error}");
    assert!(wrong.probe().await.is_err());
}
