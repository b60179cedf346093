//! A SQLite file copied into a MySQL or MariaDB database, for external benchmarks whose
//! databases ship as SQLite files (Spider's dev databases): the same tables, columns,
//! rows, primary keys and foreign keys, so the same questions can be asked on both
//! engines and paired.
//!
//! SQLite keeps any value in any column; MySQL needs one type per column. Each column's
//! type is read off the values it holds, not its declaration, so no value is coerced:
//! only integers gives `BIGINT`, integers and reals `DOUBLE`, anything else text (and the
//! odd number among text is written as SQLite shows it). A declaration decides only for an
//! empty column. Keys are added after the rows with foreign key checks off, as
//! benchmark data does not always satisfy its own keys; a key the server cannot build
//! (duplicate values, mismatched types) is left out and counted, never fatal. Text
//! compares with the binary collation, as on SQLite and in `askdb db setup`.
//!
//! Only the administrator's fixed statements and the file's own names (quoted) run;
//! every value travels as a parameter.

use std::collections::BTreeMap;
use std::path::Path;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value as MysqlValue};
use rusqlite::types::Value as SqliteValue;

use super::mysql::{connect_mysql, mysql_step_error, quote_name};
use super::SetupError;

/// MySQL's limit on placeholders in one prepared statement.
const MAX_PLACEHOLDERS: usize = 65_535;

/// Rows per INSERT at most (a statement stays well under the packet limit).
const MAX_ROWS_PER_INSERT: usize = 500;

/// The longest text kept in a `VARCHAR` (which can be a key); longer goes to `LONGTEXT`.
const MAX_VARCHAR: usize = 255;

/// What a copy did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CopyReport {
    /// Each table with its row count, in the file's order.
    pub tables: Vec<(String, usize)>,
    /// Primary and foreign keys created.
    pub keys: usize,
    /// Keys the server refused (duplicate values or mismatched column types), by the
    /// statement's description.
    pub keys_left_out: Vec<String>,
}

/// A column's MySQL type, read off its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnType {
    Integer,
    Real,
    /// Text of at most this many characters.
    Varchar(usize),
    LongText,
    Blob,
}

impl ColumnType {
    fn sql(self) -> String {
        match self {
            ColumnType::Integer => "BIGINT".to_string(),
            ColumnType::Real => "DOUBLE".to_string(),
            ColumnType::Varchar(length) => format!("VARCHAR({})", length.max(1)),
            ColumnType::LongText => "LONGTEXT".to_string(),
            ColumnType::Blob => "LONGBLOB".to_string(),
        }
    }

    /// Whether the column can be part of a key without a prefix length.
    fn can_be_key(self) -> bool {
        !matches!(self, ColumnType::LongText | ColumnType::Blob)
    }

    /// The type an empty column gets from its declaration (SQLite's affinity rules).
    fn declared(declaration: &str) -> ColumnType {
        let upper = declaration.to_ascii_uppercase();
        if upper.contains("INT") {
            ColumnType::Integer
        } else if ["REAL", "FLOA", "DOUB", "NUM", "DEC"]
            .iter()
            .any(|word| upper.contains(word))
        {
            ColumnType::Real
        } else if upper.contains("BLOB") {
            ColumnType::Blob
        } else {
            ColumnType::Varchar(MAX_VARCHAR)
        }
    }

    /// The narrowest type that holds every value.
    fn of_values<'a>(
        declaration: &str,
        values: impl Iterator<Item = &'a SqliteValue>,
    ) -> ColumnType {
        let (mut integers, mut reals, mut texts, mut blobs) = (0, 0, 0, 0);
        let mut longest = 0usize;
        for value in values {
            match value {
                SqliteValue::Null => {}
                SqliteValue::Integer(number) => {
                    integers += 1;
                    longest = longest.max(number.to_string().len());
                }
                SqliteValue::Real(number) => {
                    reals += 1;
                    longest = longest.max(number.to_string().len());
                }
                SqliteValue::Text(text) => {
                    texts += 1;
                    longest = longest.max(text.chars().count());
                }
                SqliteValue::Blob(_) => blobs += 1,
            }
        }
        if blobs > 0 {
            ColumnType::Blob
        } else if texts > 0 {
            if longest <= MAX_VARCHAR {
                ColumnType::Varchar(MAX_VARCHAR)
            } else {
                ColumnType::LongText
            }
        } else if reals > 0 {
            ColumnType::Real
        } else if integers > 0 {
            ColumnType::Integer
        } else {
            ColumnType::declared(declaration)
        }
    }
}

/// One table read from the file.
struct SourceTable {
    name: String,
    columns: Vec<(String, String)>,
    /// Primary key columns, in key order.
    primary_key: Vec<String>,
    /// Foreign keys: (columns, referenced table as written, referenced columns; empty
    /// means the referenced table's primary key).
    foreign_keys: Vec<(Vec<String>, String, Vec<String>)>,
    rows: Vec<Vec<SqliteValue>>,
}

fn read_error(path: &Path, error: rusqlite::Error) -> SetupError {
    SetupError::Step {
        step: format!("read {}", path.display()),
        sqlstate: None,
        message: error.to_string(),
    }
}

fn read_sqlite(path: &Path) -> Result<Vec<SourceTable>, SetupError> {
    let connection =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|error| read_error(path, error))?;
    let read = |error| read_error(path, error);
    let names: Vec<String> = connection
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid",
        )
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get::<_, String>(0))?
                .collect()
        })
        .map_err(read)?;
    let mut tables = Vec::with_capacity(names.len());
    for name in names {
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        let mut columns = Vec::new();
        let mut keyed: Vec<(i64, String)> = Vec::new();
        let mut statement = connection
            .prepare(&format!("PRAGMA table_info({quoted})"))
            .map_err(read)?;
        let mut info = statement.query([]).map_err(read)?;
        while let Some(row) = info.next().map_err(read)? {
            let column: String = row.get(1).map_err(read)?;
            let declared: Option<String> = row.get(2).map_err(read)?;
            let key_position: i64 = row.get(5).map_err(read)?;
            if key_position > 0 {
                keyed.push((key_position, column.clone()));
            }
            columns.push((column, declared.unwrap_or_default()));
        }
        drop(info);
        drop(statement);
        keyed.sort();
        let mut grouped: BTreeMap<i64, (String, Vec<String>, Vec<String>)> = BTreeMap::new();
        let mut statement = connection
            .prepare(&format!("PRAGMA foreign_key_list({quoted})"))
            .map_err(read)?;
        let mut keys = statement.query([]).map_err(read)?;
        while let Some(row) = keys.next().map_err(read)? {
            let id: i64 = row.get(0).map_err(read)?;
            let parent: String = row.get(2).map_err(read)?;
            let from: String = row.get(3).map_err(read)?;
            let to: Option<String> = row.get(4).map_err(read)?;
            let entry = grouped
                .entry(id)
                .or_insert_with(|| (parent, Vec::new(), Vec::new()));
            entry.1.push(from);
            if let Some(to) = to {
                entry.2.push(to);
            }
        }
        drop(keys);
        drop(statement);
        let mut statement = connection
            .prepare(&format!("SELECT * FROM {quoted}"))
            .map_err(read)?;
        let width = columns.len();
        let rows: Vec<Vec<SqliteValue>> = statement
            .query_map([], |row| {
                (0..width)
                    .map(|index| row.get::<_, SqliteValue>(index))
                    .collect()
            })
            .map_err(read)?
            .collect::<Result<_, _>>()
            .map_err(read)?;
        tables.push(SourceTable {
            name,
            columns,
            primary_key: keyed.into_iter().map(|(_, column)| column).collect(),
            foreign_keys: grouped
                .into_values()
                .map(|(parent, from, to)| (from, parent, to))
                .collect(),
            rows,
        });
    }
    Ok(tables)
}

/// A SQLite value as a parameter for a column of `column_type`.
fn parameter(value: &SqliteValue, column_type: ColumnType) -> MysqlValue {
    match (value, column_type) {
        (SqliteValue::Null, _) => MysqlValue::NULL,
        (SqliteValue::Integer(number), ColumnType::Integer) => MysqlValue::Int(*number),
        (SqliteValue::Integer(number), ColumnType::Real) => MysqlValue::Double(*number as f64),
        (SqliteValue::Real(number), _) if column_type == ColumnType::Real => {
            MysqlValue::Double(*number)
        }
        (SqliteValue::Integer(number), _) => MysqlValue::Bytes(number.to_string().into_bytes()),
        (SqliteValue::Real(number), _) => MysqlValue::Bytes(sqlite_real_text(*number).into_bytes()),
        (SqliteValue::Text(text), _) => MysqlValue::Bytes(text.clone().into_bytes()),
        (SqliteValue::Blob(bytes), _) => MysqlValue::Bytes(bytes.clone()),
    }
}

/// A real as SQLite prints it: a whole number keeps its `.0`.
fn sqlite_real_text(number: f64) -> String {
    if number.is_finite() && number.fract() == 0.0 && number.abs() < 1e15 {
        format!("{number:.1}")
    } else {
        number.to_string()
    }
}

async fn run(conn: &mut Conn, step: &str, sql: &str) -> Result<(), SetupError> {
    conn.query_drop(sql)
        .await
        .map_err(|error| mysql_step_error(step, &error))
}

/// Copies every table of the SQLite file at `sqlite` into `database` on the server at
/// `admin_url` (created when missing; tables of the same names dropped first).
pub async fn copy_sqlite_into_mysql(
    sqlite: &Path,
    admin_url: &str,
    database: &str,
) -> Result<CopyReport, SetupError> {
    let tables = read_sqlite(sqlite)?;
    let mut conn = connect_mysql(admin_url, None).await?;
    let db = quote_name(database);
    run(
        &mut conn,
        "create the database",
        &format!(
            "CREATE DATABASE IF NOT EXISTS {db} CHARACTER SET utf8mb4 COLLATE {}",
            super::mysql::COLLATION
        ),
    )
    .await?;
    run(&mut conn, "use the database", &format!("USE {db}")).await?;
    // Strict, so a value that does not fit its column fails the copy instead of being
    // changed; keys come after the rows, unchecked.
    run(
        &mut conn,
        "set the session",
        &format!(
            "SET SESSION sql_mode = '{}', SESSION foreign_key_checks = 0",
            super::mysql::LOAD_SQL_MODE
        ),
    )
    .await?;
    let actual_name: BTreeMap<String, String> = tables
        .iter()
        .map(|table| (table.name.to_lowercase(), table.name.clone()))
        .collect();
    let mut report = CopyReport::default();
    let mut types_of: BTreeMap<String, BTreeMap<String, ColumnType>> = BTreeMap::new();
    for table in &tables {
        let name = quote_name(&table.name);
        let types: Vec<ColumnType> = (0..table.columns.len())
            .map(|index| {
                ColumnType::of_values(
                    &table.columns[index].1,
                    table.rows.iter().map(|row| &row[index]),
                )
            })
            .collect();
        let definitions: Vec<String> = table
            .columns
            .iter()
            .zip(&types)
            .map(|((column, _), column_type)| {
                format!("{} {}", quote_name(column), column_type.sql())
            })
            .collect();
        run(
            &mut conn,
            &format!("drop table {}", table.name),
            &format!("DROP TABLE IF EXISTS {name}"),
        )
        .await?;
        run(
            &mut conn,
            &format!("create table {}", table.name),
            &format!(
                "CREATE TABLE {name} ({}) ENGINE=InnoDB",
                definitions.join(", ")
            ),
        )
        .await?;
        let width = table.columns.len().max(1);
        let rows_per_insert = (MAX_PLACEHOLDERS / width).clamp(1, MAX_ROWS_PER_INSERT);
        let placeholders = format!("({})", vec!["?"; table.columns.len()].join(", "));
        let step = format!("load table {}", table.name);
        run(&mut conn, &step, "START TRANSACTION").await?;
        for chunk in table.rows.chunks(rows_per_insert) {
            let statement = format!(
                "INSERT INTO {name} VALUES {}",
                vec![placeholders.as_str(); chunk.len()].join(", ")
            );
            let parameters: Vec<MysqlValue> = chunk
                .iter()
                .flat_map(|row| {
                    row.iter()
                        .zip(&types)
                        .map(|(value, t)| parameter(value, *t))
                })
                .collect();
            if let Err(error) = conn.exec_drop(statement, parameters).await {
                let _ = conn.query_drop("ROLLBACK").await;
                return Err(mysql_step_error(&step, &error));
            }
        }
        run(&mut conn, &step, "COMMIT").await?;
        report.tables.push((table.name.clone(), table.rows.len()));
        types_of.insert(
            table.name.clone(),
            table
                .columns
                .iter()
                .map(|(column, _)| column.clone())
                .zip(types)
                .collect(),
        );
    }
    let can_key = |table: &str, columns: &[String]| {
        types_of.get(table).is_some_and(|types| {
            columns
                .iter()
                .all(|column| types.get(column).is_some_and(|t| t.can_be_key()))
        })
    };
    let mut key_statements = Vec::new();
    for table in &tables {
        if !table.primary_key.is_empty() && can_key(&table.name, &table.primary_key) {
            key_statements.push((
                format!("primary key of {}", table.name),
                format!(
                    "ALTER TABLE {} ADD PRIMARY KEY ({})",
                    quote_name(&table.name),
                    quoted_list(&table.primary_key)
                ),
            ));
        }
    }
    for table in &tables {
        for (from, parent, to) in &table.foreign_keys {
            let description = format!("{}({}) -> {parent}", table.name, from.join(", "));
            let Some(parent_table) = actual_name.get(&parent.to_lowercase()) else {
                report.keys_left_out.push(description);
                continue;
            };
            let to = if to.is_empty() {
                tables
                    .iter()
                    .find(|candidate| &candidate.name == parent_table)
                    .map(|candidate| candidate.primary_key.clone())
                    .unwrap_or_default()
            } else {
                to.clone()
            };
            if to.len() != from.len() || !can_key(&table.name, from) || !can_key(parent_table, &to)
            {
                report.keys_left_out.push(description);
                continue;
            }
            // MySQL wants the referenced columns indexed; an index of their own makes
            // that true whatever the parent's primary key turned out to be.
            key_statements.push((
                format!("index for {description}"),
                format!(
                    "ALTER TABLE {} ADD INDEX ({})",
                    quote_name(parent_table),
                    quoted_list(&to)
                ),
            ));
            key_statements.push((
                description,
                format!(
                    "ALTER TABLE {} ADD FOREIGN KEY ({}) REFERENCES {} ({})",
                    quote_name(&table.name),
                    quoted_list(from),
                    quote_name(parent_table),
                    quoted_list(&to)
                ),
            ));
        }
    }
    for (description, statement) in key_statements {
        let is_index = description.starts_with("index for ");
        match conn.query_drop(&statement).await {
            Ok(()) if !is_index => report.keys += 1,
            Ok(()) => {}
            Err(_) if is_index => {}
            Err(_) => report.keys_left_out.push(description),
        }
    }
    let names: Vec<String> = tables.iter().map(|table| quote_name(&table.name)).collect();
    if !names.is_empty() {
        conn.query_drop(format!("ANALYZE TABLE {}", names.join(", ")))
            .await
            .map_err(|error| mysql_step_error("analyse the tables", &error))?;
    }
    let _ = conn.disconnect().await;
    Ok(report)
}

/// Drops a database on the server at `admin_url` (a scratch copy's end).
pub async fn drop_mysql_database(admin_url: &str, database: &str) -> Result<(), SetupError> {
    let mut conn = connect_mysql(admin_url, None).await?;
    let dropped = run(
        &mut conn,
        "drop the scratch database",
        &format!("DROP DATABASE IF EXISTS {}", quote_name(database)),
    )
    .await;
    let _ = conn.disconnect().await;
    dropped
}

fn quoted_list(columns: &[String]) -> String {
    columns
        .iter()
        .map(|column| quote_name(column))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_takes_the_narrowest_type_that_holds_every_value() {
        let integers = [SqliteValue::Integer(3), SqliteValue::Null];
        assert_eq!(
            ColumnType::of_values("text", integers.iter()),
            ColumnType::Integer
        );
        let mixed = [SqliteValue::Integer(3), SqliteValue::Real(2.5)];
        assert_eq!(ColumnType::of_values("int", mixed.iter()), ColumnType::Real);
        let texts = [SqliteValue::Integer(3), SqliteValue::Text("n/a".into())];
        assert_eq!(
            ColumnType::of_values("int", texts.iter()),
            ColumnType::Varchar(MAX_VARCHAR)
        );
        let long = [SqliteValue::Text("x".repeat(MAX_VARCHAR + 1))];
        assert_eq!(
            ColumnType::of_values("varchar(10)", long.iter()),
            ColumnType::LongText
        );
        let empty: [SqliteValue; 0] = [];
        assert_eq!(
            ColumnType::of_values("NUMBER", empty.iter()),
            ColumnType::Real
        );
        assert_eq!(
            ColumnType::of_values("bigint", empty.iter()),
            ColumnType::Integer
        );
        assert_eq!(
            ColumnType::of_values("", empty.iter()),
            ColumnType::Varchar(MAX_VARCHAR)
        );
    }

    #[test]
    fn a_number_among_text_keeps_the_digits_sqlite_shows() {
        assert_eq!(
            parameter(&SqliteValue::Integer(42), ColumnType::Varchar(9)),
            MysqlValue::Bytes(b"42".to_vec())
        );
        assert_eq!(
            parameter(&SqliteValue::Integer(42), ColumnType::Real),
            MysqlValue::Double(42.0)
        );
        assert_eq!(
            parameter(&SqliteValue::Real(2.0), ColumnType::Varchar(9)),
            MysqlValue::Bytes(b"2.0".to_vec())
        );
    }
}
