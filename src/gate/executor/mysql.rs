//! The MySQL and MariaDB executor: the second safety layer on that engine. Every
//! statement gets a session pinned to the guard's reading (`guard::MYSQL_SQL_MODE`) and a
//! statement time limit the server enforces (`max_statement_time` on MariaDB,
//! `MAX_EXECUTION_TIME` on MySQL), runs inside `START TRANSACTION READ ONLY` that is
//! always rolled back, in a session whose every transaction is read-only (`SET SESSION
//! TRANSACTION READ ONLY`: DDL commits the open transaction implicitly and would run
//! outside it otherwise; MariaDB 10.11 created a table that way), and is sent as a prepared statement: mysql_async announces
//! multi-statement support on every connection, and only the binary protocol's prepare
//! takes exactly one statement. A client deadline (the limit plus a second) kills the
//! query from a connection of its own (`KILL QUERY`) should the server's limit not fire,
//! and the interrupted connection is closed, never reused. Rows stop at the cap plus one
//! and before the row whose values would pass the byte cap, its size read from the wire's
//! values before any is turned into JSON. No LOCAL INFILE handler is
//! installed, so the client refuses the server's request to read a local file.
//!
//! The database check: inside the same READ ONLY transaction the server compiles the
//! exact text (`EXPLAIN FORMAT=JSON`, prepared), and every table its plan scans is judged
//! by the guard. MariaDB's plan does not list the columns read (decision 0033), so the
//! column layers are the parser check and the role's column grants.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Pool, Row, Value};
use serde_json::Value as JsonValue;

use super::{ExecFailure, ExecLimits, RawRows, Stage};
use crate::gate::guard::resolution::{self, Resolution};
use crate::gate::guard::{GuardPolicy, MYSQL_SQL_MODE};
use crate::gate::taxonomy::{from_mysql, ErrorType};
use crate::schema::{ColumnSchema, ForeignKey, TableSchema};

/// How long past the server's own limit the client waits before it kills the query.
const CLIENT_GRACE: Duration = Duration::from_secs(1);

/// A pool of connections to one MySQL or MariaDB database.
pub(crate) struct MysqlExecutor {
    pool: Pool,
    opts: Opts,
    /// MariaDB names its statement limit `max_statement_time` (seconds); MySQL
    /// `MAX_EXECUTION_TIME` (milliseconds, SELECT only).
    mariadb: bool,
    /// Whether the session and its transactions are read-only. Always true in the
    /// product; the layer tests switch it off to show the guard holding on its own.
    #[cfg(test)]
    read_only: std::sync::atomic::AtomicBool,
}

fn failure_from(error: mysql_async::Error) -> ExecFailure {
    match error {
        mysql_async::Error::Server(server) => {
            let mut failure = ExecFailure::new(from_mysql(server.code), server.message);
            failure.sqlstate = Some(server.state);
            failure
        }
        other => ExecFailure::new(
            ErrorType::ConnectionError,
            format!("the MySQL connection failed: {other}"),
        ),
    }
}

impl MysqlExecutor {
    /// Connects with a `mysql://USER:PASS@HOST:PORT/DB` URL and asks the server what it
    /// is. A bad URL, an unreachable server or a refused login is an error here.
    pub(crate) async fn connect(url: &str) -> Result<Self, ExecFailure> {
        let opts = Opts::from_url(url).map_err(|error| {
            ExecFailure::new(
                ErrorType::ConnectionError,
                format!("not a MySQL URL ({error}); write mysql://USER:PASS@HOST:PORT/DB"),
            )
        })?;
        let pool = Pool::new(opts.clone());
        let mut conn = pool.get_conn().await.map_err(failure_from)?;
        let version: Option<String> = conn
            .exec_first("SELECT VERSION()", ())
            .await
            .map_err(failure_from)?;
        drop(conn);
        Ok(MysqlExecutor {
            pool,
            opts,
            mariadb: version.is_some_and(|version| version.contains("MariaDB")),
            #[cfg(test)]
            read_only: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// Switches the read-only session and transaction off (layer tests only).
    #[cfg(test)]
    pub(in crate::gate) fn set_read_only_for_tests(&self, read_only: bool) {
        self.read_only
            .store(read_only, std::sync::atomic::Ordering::SeqCst);
    }

    #[cfg(test)]
    fn read_only_on(&self) -> bool {
        self.read_only.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[cfg(not(test))]
    fn read_only_on(&self) -> bool {
        true
    }

    /// The session settings sent before every statement: the pool resets a connection
    /// between uses, so nothing set once can be relied on.
    fn session_settings(&self, limits: ExecLimits) -> String {
        let limit = if self.mariadb {
            format!(
                "SESSION max_statement_time = {:.3}",
                limits.statement_timeout.as_secs_f64()
            )
        } else {
            format!(
                "SESSION MAX_EXECUTION_TIME = {}",
                limits.statement_timeout.as_millis()
            )
        };
        format!("SET SESSION sql_mode = '{MYSQL_SQL_MODE}', {limit}")
    }

    /// Runs one statement read-only and returns at most `row_cap` rows; with `verify`,
    /// the server first plans it and the guard judges the plan, and nothing runs on a
    /// refusal. At `Stage::Verdict` nothing runs at all.
    pub(crate) async fn execute(
        &self,
        sql: &str,
        limits: ExecLimits,
        verify: Option<&GuardPolicy>,
        stage: Stage,
    ) -> Result<RawRows, ExecFailure> {
        let mut conn = self.pool.get_conn().await.map_err(failure_from)?;
        let connection_id = conn.id();
        let deadline = limits.statement_timeout + CLIENT_GRACE;
        let outcome = tokio::time::timeout(
            deadline,
            self.read_only(&mut conn, sql, limits, verify, stage),
        )
        .await;
        match outcome {
            Ok(result) => {
                if result.is_err() {
                    // A failed statement may leave the transaction open: close the
                    // connection rather than hand it back.
                    let _ = tokio::time::timeout(CLIENT_GRACE, conn.disconnect()).await;
                }
                result
            }
            Err(_) => {
                self.kill_query(connection_id).await;
                let _ = tokio::time::timeout(CLIENT_GRACE, conn.disconnect()).await;
                Err(ExecFailure::new(
                    ErrorType::Timeout,
                    format!(
                        "the statement ran past {} s and was cancelled",
                        limits.statement_timeout.as_secs_f64()
                    ),
                ))
            }
        }
    }

    /// The pinned session, the READ ONLY transaction, the statement, and the rollback on
    /// every path. The rollback's text is fixed; the statement goes by prepare only.
    async fn read_only(
        &self,
        conn: &mut Conn,
        sql: &str,
        limits: ExecLimits,
        verify: Option<&GuardPolicy>,
        stage: Stage,
    ) -> Result<RawRows, ExecFailure> {
        conn.query_drop(self.session_settings(limits))
            .await
            .map_err(failure_from)?;
        let (session, transaction) = if self.read_only_on() {
            (
                "SET SESSION TRANSACTION READ ONLY",
                "START TRANSACTION READ ONLY",
            )
        } else {
            ("SET SESSION TRANSACTION READ WRITE", "START TRANSACTION")
        };
        conn.query_drop(session).await.map_err(failure_from)?;
        conn.query_drop(transaction).await.map_err(failure_from)?;
        let rows = match verify {
            Some(policy) => verdict(conn, sql, policy).await,
            None => Ok(()),
        };
        let rows = match (rows, stage) {
            (Err(failure), _) => Err(failure),
            (Ok(()), Stage::Verdict) => Ok(RawRows::default()),
            (Ok(()), Stage::Execute) => read_rows(conn, sql, limits).await,
        };
        let rolled_back = conn.query_drop("ROLLBACK").await.map_err(failure_from);
        let rows = rows?;
        rolled_back?;
        Ok(rows)
    }

    /// Stops the statement running on `connection_id`, from a connection of its own (the
    /// pool's may all be in use). Best effort: the caller closes the connection anyway.
    pub(in crate::gate) async fn kill_query(&self, connection_id: u32) {
        let kill = async {
            let mut killer = Conn::new(self.opts.clone()).await?;
            killer
                .query_drop(format!("KILL QUERY {connection_id}"))
                .await?;
            killer.disconnect().await
        };
        let _ = tokio::time::timeout(CLIENT_GRACE, kill).await;
    }
}

/// The database check: the server's plan of the exact text, every table it scans judged
/// by the guard. Names in angle brackets (`<derived2>`, `<union2,3>`, `<subquery4>`) are
/// the plan's own steps, not tables.
async fn verdict(conn: &mut Conn, sql: &str, policy: &GuardPolicy) -> Result<(), ExecFailure> {
    let plan: Option<String> = conn
        .exec_first(format!("EXPLAIN FORMAT=JSON {sql}"), ())
        .await
        .map_err(failure_from)?;
    let plan: JsonValue = plan
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok())
        .ok_or_else(|| {
            ExecFailure::refused(crate::gate::guard::Refusal::unreadable_resolution(
                "the server's plan is not JSON",
            ))
        })?;
    let mut resolution = Resolution::default();
    collect_tables(&plan, &mut resolution);
    // The plan names a table by its alias when it has one (`FROM bills b` is `b`): a
    // name the statement declares as an alias (or a CTE) and that is no table of the
    // policy is left out; every other name is judged, so a catalog, another schema's
    // table or anything the policy does not know is refused. A hidden table behind an
    // alias is the parser check's to refuse (decision 0033).
    let declared = crate::gate::guard::declared_relation_names(sql, policy).ok_or_else(|| {
        ExecFailure::refused(crate::gate::guard::Refusal::unreadable_resolution(
            "the statement's own names could not be read",
        ))
    })?;
    resolution.relations.retain(|(_, name)| {
        !declared.contains(name) || policy.is_visible(name) || policy.is_hidden(name)
    });
    resolution::verdict(&resolution, policy, "").map_err(ExecFailure::refused)
}

fn collect_tables(plan: &JsonValue, resolution: &mut Resolution) {
    match plan {
        JsonValue::Object(fields) => {
            for (key, value) in fields {
                match (key.as_str(), value) {
                    ("table_name", JsonValue::String(name)) if !name.starts_with('<') => {
                        resolution
                            .relations
                            .insert((String::new(), name.to_lowercase()));
                    }
                    _ => collect_tables(value, resolution),
                }
            }
        }
        JsonValue::Array(items) => {
            for item in items {
                collect_tables(item, resolution);
            }
        }
        _ => {}
    }
}

impl MysqlExecutor {
    /// The tables of the connected database: columns, keys and approximate row counts,
    /// from `information_schema` (askdb's own fixed statements, never a caller's).
    pub(crate) async fn introspect(&self) -> Result<Vec<TableSchema>, ExecFailure> {
        let mut conn = self.pool.get_conn().await.map_err(failure_from)?;
        let tables: Vec<(String, Option<u64>)> = conn
            .exec(
                "SELECT table_name, table_rows FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY table_name",
                (),
            )
            .await
            .map_err(failure_from)?;
        let columns: Vec<(String, String, String, String)> = conn
            .exec(
                "SELECT table_name, column_name, column_type, is_nullable FROM information_schema.columns \
                 WHERE table_schema = DATABASE() ORDER BY table_name, ordinal_position",
                (),
            )
            .await
            .map_err(failure_from)?;
        let keys: Vec<KeyColumn> = conn
            .exec(
                "SELECT k.table_name, k.constraint_name, k.column_name, k.referenced_table_name, k.referenced_column_name \
                 FROM information_schema.key_column_usage k \
                 WHERE k.table_schema = DATABASE() ORDER BY k.table_name, k.constraint_name, k.ordinal_position",
                (),
            )
            .await
            .map_err(failure_from)?;
        let unique: Vec<(String, String, String)> = conn
            .exec(
                "SELECT table_name, index_name, column_name FROM information_schema.statistics \
                 WHERE table_schema = DATABASE() AND non_unique = 0 AND index_name <> 'PRIMARY' \
                 ORDER BY table_name, index_name, seq_in_index",
                (),
            )
            .await
            .map_err(failure_from)?;
        drop(conn);
        Ok(tables
            .into_iter()
            .map(|(name, rows)| {
                let mut table = TableSchema {
                    name: name.clone(),
                    columns: columns
                        .iter()
                        .filter(|column| column.0 == name)
                        .map(|(_, column, data_type, nullable)| ColumnSchema {
                            name: column.clone(),
                            data_type: crate::schema::without_display_width(data_type),
                            nullable: nullable == "YES",
                        })
                        .collect(),
                    primary_key: Vec::new(),
                    unique: Vec::new(),
                    foreign_keys: Vec::new(),
                    row_count: rows.and_then(|rows| i64::try_from(rows).ok()),
                };
                for (_, constraint, column, referenced_table, referenced_column) in
                    keys.iter().filter(|key| key.0 == name)
                {
                    if constraint == "PRIMARY" {
                        table.primary_key.push(column.clone());
                    } else if let (Some(referenced_table), Some(referenced_column)) =
                        (referenced_table, referenced_column)
                    {
                        match table.foreign_keys.iter_mut().find(|key| {
                            key.references_table == *referenced_table
                                && key.columns.len() == key.references_columns.len()
                                && constraint_of(&keys, &name, key) == Some(constraint.as_str())
                        }) {
                            Some(key) => {
                                key.columns.push(column.clone());
                                key.references_columns.push(referenced_column.clone());
                            }
                            None => table.foreign_keys.push(ForeignKey {
                                columns: vec![column.clone()],
                                references_table: referenced_table.clone(),
                                references_columns: vec![referenced_column.clone()],
                            }),
                        }
                    }
                }
                let mut index: Option<&str> = None;
                for (_, index_name, column) in unique.iter().filter(|row| row.0 == name) {
                    if index != Some(index_name.as_str()) {
                        table.unique.push(Vec::new());
                        index = Some(index_name.as_str());
                    }
                    if let Some(last) = table.unique.last_mut() {
                        last.push(column.clone());
                    }
                }
                table
            })
            .collect())
    }
}

/// One column of a key: table, constraint, column, and for a foreign key the table and
/// column it references.
type KeyColumn = (String, String, String, Option<String>, Option<String>);

/// The constraint a foreign key found so far belongs to (by its first column).
fn constraint_of<'a>(keys: &'a [KeyColumn], table: &str, key: &ForeignKey) -> Option<&'a str> {
    let first = key.columns.first()?;
    keys.iter()
        .find(|row| {
            row.0 == table
                && &row.2 == first
                && row.3.as_deref() == Some(key.references_table.as_str())
        })
        .map(|row| row.1.as_str())
}

/// Reads at most `row_cap` rows (one more to know whether there were more), stopping
/// before the row whose values would pass the byte cap.
async fn read_rows(conn: &mut Conn, sql: &str, limits: ExecLimits) -> Result<RawRows, ExecFailure> {
    let mut result = conn.exec_iter(sql, ()).await.map_err(failure_from)?;
    let columns: Vec<String> = result
        .columns_ref()
        .iter()
        .map(|column| column.name_str().into_owned())
        .collect();
    let mut rows = Vec::new();
    let mut bytes = 0u64;
    let mut truncated = false;
    while let Some(row) = result.next().await.map_err(failure_from)? {
        if rows.len() as u64 >= limits.row_cap {
            truncated = true;
            break;
        }
        // The row's size is read from the values as they came off the wire, so a row
        // past the cap is never turned into JSON.
        let size: u64 = (0..row.len())
            .map(|index| row.as_ref(index).map_or(8, raw_bytes))
            .sum();
        if bytes + size > limits.byte_cap {
            truncated = true;
            break;
        }
        bytes += size;
        rows.push(decode_row(row));
    }
    result.drop_result().await.map_err(failure_from)?;
    Ok(RawRows {
        columns,
        rows,
        truncated,
    })
}

/// What a value will cost against the byte cap once decoded (`value_bytes` of
/// `decode_value`), computed without decoding it: text its length (bytes that are not
/// UTF-8 at most three times theirs, each possibly a replacement character), dates and
/// times the length of their ISO text, anything else eight.
fn raw_bytes(value: &Value) -> u64 {
    match value {
        Value::Bytes(bytes) => {
            let length = bytes.len() as u64;
            if std::str::from_utf8(bytes).is_ok() {
                length
            } else {
                length * 3
            }
        }
        Value::Date(_, _, _, hour, minute, second, micros) => {
            if *hour == 0 && *minute == 0 && *second == 0 && *micros == 0 {
                10
            } else if *micros == 0 {
                19
            } else {
                26
            }
        }
        Value::Time(negative, days, hours, _, _, micros) => {
            let hours = u64::from(*days) * 24 + u64::from(*hours);
            let digits = hours.checked_ilog10().map_or(1, |log| u64::from(log) + 1);
            u64::from(*negative) + digits.max(2) + 6 + if *micros == 0 { 0 } else { 7 }
        }
        Value::NULL | Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Double(_) => 8,
    }
}

/// A row's values as JSON: integers and floats as numbers; DECIMAL, as PostgreSQL's
/// NUMERIC, as its exact decimal text; dates and times as ISO text; other bytes as text
/// (lossy for binary data).
fn decode_row(row: Row) -> Vec<JsonValue> {
    (0..row.len())
        .map(|index| decode_value(row.as_ref(index).cloned().unwrap_or(Value::NULL)))
        .collect()
}

fn decode_value(value: Value) -> JsonValue {
    match value {
        Value::NULL => JsonValue::Null,
        Value::Int(number) => JsonValue::from(number),
        Value::UInt(number) => JsonValue::from(number),
        Value::Float(number) => serde_json::Number::from_f64(f64::from(number))
            .map_or(JsonValue::Null, JsonValue::Number),
        Value::Double(number) => {
            serde_json::Number::from_f64(number).map_or(JsonValue::Null, JsonValue::Number)
        }
        Value::Bytes(bytes) => JsonValue::String(String::from_utf8_lossy(&bytes).into_owned()),
        Value::Date(year, month, day, hour, minute, second, micros) => {
            let date = format!("{year:04}-{month:02}-{day:02}");
            if (hour, minute, second, micros) == (0, 0, 0, 0) {
                JsonValue::String(date)
            } else if micros == 0 {
                JsonValue::String(format!("{date} {hour:02}:{minute:02}:{second:02}"))
            } else {
                JsonValue::String(format!(
                    "{date} {hour:02}:{minute:02}:{second:02}.{micros:06}"
                ))
            }
        }
        Value::Time(negative, days, hours, minutes, seconds, micros) => {
            let sign = if negative { "-" } else { "" };
            let hours = u64::from(days) * 24 + u64::from(hours);
            let fraction = if micros == 0 {
                String::new()
            } else {
                format!(".{micros:06}")
            };
            JsonValue::String(format!(
                "{sign}{hours:02}:{minutes:02}:{seconds:02}{fraction}"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::value_bytes;
    use super::*;

    #[test]
    fn a_values_size_is_known_before_it_is_decoded() {
        for value in [
            Value::NULL,
            Value::Int(-7),
            Value::UInt(7),
            Value::Double(1.5),
            Value::Bytes(b"12.50".to_vec()),
            Value::Bytes("\u{20b9} 100".as_bytes().to_vec()),
            Value::Bytes(Vec::new()),
            Value::Date(2025, 1, 31, 0, 0, 0, 0),
            Value::Date(2025, 1, 31, 10, 5, 0, 0),
            Value::Date(2025, 1, 31, 10, 5, 0, 120),
            Value::Time(false, 0, 3, 4, 5, 0),
            Value::Time(true, 34, 23, 59, 59, 1),
            Value::Time(false, 0, 0, 0, 0, 0),
        ] {
            assert_eq!(
                raw_bytes(&value),
                value_bytes(&decode_value(value.clone())),
                "{value:?}"
            );
        }
        // Bytes that are not UTF-8 never cost less than their decoded text.
        let invalid = Value::Bytes(vec![0xff, 0xfe, b'a']);
        assert!(raw_bytes(&invalid) >= value_bytes(&decode_value(invalid.clone())));
    }
}
