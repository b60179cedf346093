//! The query log on MySQL and MariaDB: the table `askdb db setup` creates there, and the
//! one fixed INSERT with bound parameters the log user (`askdb_log`, INSERT on this
//! table only) sends over a connection of its own.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Params, Value};

use super::stats::{split_error_types, LogRow};
use super::{
    format_utc, joined_error_types, joined_examples, saturating_i64, LogError, LogRecord,
    INSERT_COLUMNS, POSTGRES_LOG_COLUMNS, WRITE_TIMEOUT,
};
use crate::gate::QUERY_LOG_TABLE;

/// `CREATE TABLE IF NOT EXISTS askdb_query_log (...)` for MySQL: PostgreSQL's columns in
/// MySQL's types (`asked_at` a UTC DATETIME; `sql` in backticks, a reserved word there).
pub fn mysql_create_sql() -> String {
    let later: Vec<String> = POSTGRES_LOG_COLUMNS
        .iter()
        .map(|(column, data_type)| format!("`{column}` {}", mysql_type(data_type)))
        .collect();
    format!(
        "CREATE TABLE IF NOT EXISTS `{QUERY_LOG_TABLE}` (\
         `id` BIGINT AUTO_INCREMENT PRIMARY KEY, \
         `asked_at` DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, \
         `question` TEXT, `sql` MEDIUMTEXT, `decision` TEXT, `error_type` TEXT, \
         `latency_ms` INT, {}) ENGINE=InnoDB CHARACTER SET utf8mb4",
        later.join(", ")
    )
}

/// PostgreSQL's type names of the log's columns in MySQL's words.
fn mysql_type(postgres: &str) -> &'static str {
    match postgres {
        "integer" => "INT",
        "bigint" => "BIGINT",
        "double precision" => "DOUBLE",
        _ => "TEXT",
    }
}

fn insert_sql() -> String {
    let columns: Vec<String> = INSERT_COLUMNS
        .split(',')
        .map(|column| format!("`{}`", column.trim()))
        .collect();
    let placeholders = vec!["?"; columns.len()];
    format!(
        "INSERT INTO `{QUERY_LOG_TABLE}` ({}) VALUES ({})",
        columns.join(", "),
        placeholders.join(", ")
    )
}

/// The client's options for the log user's URL (`mariadb://` read as `mysql://`).
fn opts(url: &str) -> Result<Opts, LogError> {
    let normalised = crate::text::mysql_url(url).unwrap_or_else(|| url.to_string());
    Opts::from_url(&normalised).map_err(|error| LogError::BadUrl(error.to_string()))
}

pub(super) async fn connect(url: &str) -> Result<Conn, LogError> {
    let opts = opts(url)?;
    match tokio::time::timeout(WRITE_TIMEOUT, Conn::new(opts)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(error)) => Err(LogError::Connect(error.to_string())),
        Err(_) => Err(LogError::Timeout),
    }
}

/// The record's values in `INSERT_COLUMNS` order.
fn params(record: &LogRecord) -> Params {
    let values: Vec<Value> = vec![
        format_utc(record.asked_at).into(),
        record.question.clone().into(),
        record.sql.clone().into(),
        record.decision.clone().into(),
        record.error_types.last().cloned().into(),
        saturating_i64(record.latency_ms).into(),
        record.attempts.into(),
        joined_error_types(record).into(),
        saturating_i64(record.row_count).into(),
        saturating_i64(record.input_tokens).into(),
        saturating_i64(record.output_tokens).into(),
        record.cost_usd.into(),
        record.model.clone().into(),
        record.trace_id.clone().into(),
        record.mode.clone().into(),
        record.conversation_id.clone().into(),
        record.turn.into(),
        joined_examples(record).into(),
        record.rerun_example.into(),
        record.user.clone().into(),
    ];
    Params::Positional(values)
}

pub(super) async fn insert(conn: &mut Conn, record: &LogRecord) -> Result<(), LogError> {
    conn.exec_drop(insert_sql(), params(record))
        .await
        .map_err(|error| LogError::Write(error.to_string()))
}

/// One insert in a transaction that is rolled back: the log gains nothing.
pub(super) async fn probe(url: &str, record: &LogRecord) -> Result<(), LogError> {
    let mut conn = connect(url).await?;
    let write = |error: mysql_async::Error| LogError::Write(error.to_string());
    conn.query_drop("START TRANSACTION").await.map_err(write)?;
    let inserted = insert(&mut conn, record).await;
    let rolled_back = conn.query_drop("ROLLBACK").await.map_err(write);
    let _ = conn.disconnect().await;
    inserted?;
    rolled_back
}

fn read_error(error: mysql_async::Error) -> LogError {
    LogError::Read(error.to_string())
}

/// The rows `askdb log stats` needs, oldest first, with a URL that may read the log.
pub(super) async fn read_rows(url: &str, user: Option<&str>) -> Result<Vec<LogRow>, LogError> {
    let mut conn = connect(url).await?;
    type Row = (String, String, Option<i64>, Option<String>, Option<i64>);
    // The user is a bound parameter, never SQL text; no user reads every row.
    let sql = format!(
        "SELECT DATE_FORMAT(asked_at, '%Y-%m-%d %H:%i:%s'), COALESCE(decision, ''), \
         CAST(attempts AS SIGNED), COALESCE(error_types, error_type), row_count \
         FROM `{QUERY_LOG_TABLE}` WHERE (? IS NULL OR user_name = ?) ORDER BY asked_at, id"
    );
    let rows: Vec<Row> = conn.exec(sql, (user, user)).await.map_err(read_error)?;
    let _ = conn.disconnect().await;
    Ok(rows
        .into_iter()
        .map(|(asked_at, decision, attempts, errors, row_count)| LogRow {
            asked_at,
            decision,
            attempts,
            error_types: split_error_types(errors),
            row_count,
        })
        .collect())
}

/// The `examples` text of every row logged at or after `since` (UTC, as written).
pub(super) async fn examples_since(url: &str, since: &str) -> Result<Vec<String>, LogError> {
    let mut conn = connect(url).await?;
    let rows: Vec<String> = conn
        .exec(
            format!(
                "SELECT examples FROM `{QUERY_LOG_TABLE}` \
                 WHERE examples IS NOT NULL AND asked_at >= ?"
            ),
            (since,),
        )
        .await
        .map_err(read_error)?;
    let _ = conn.disconnect().await;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_insert_names_every_column_once_with_one_placeholder_each() {
        let sql = insert_sql();
        assert!(sql.contains("`sql`"), "{sql}");
        assert_eq!(sql.matches('?').count(), INSERT_COLUMNS.split(',').count());
        let Params::Positional(values) = params(&super::super::probe_record()) else {
            panic!("positional parameters");
        };
        assert_eq!(values.len(), INSERT_COLUMNS.split(',').count());
        let create = mysql_create_sql();
        for column in INSERT_COLUMNS.split(',') {
            assert!(
                create.contains(&format!("`{}` ", column.trim())),
                "{column} missing from {create}"
            );
        }
        assert!(matches!(
            opts("postgres://x@h/db"),
            Err(LogError::BadUrl(_))
        ));
        assert!(opts("mariadb://askdb_log:pw@127.0.0.1:3306/db").is_ok());
    }
}
