//! A SQLite file copied into a MySQL or MariaDB database, for external benchmarks whose
//! databases ship as SQLite files (Spider's dev databases): the same tables, columns,
//! rows, primary keys and foreign keys, so the same questions can be asked on both
//! engines and paired.
//!
//! SQLite keeps any value in any column; MySQL needs one type per column. Each column's
//! storage is read off the values it holds, not its declaration, so no value is coerced:
//! only integers gives `BIGINT`, integers and reals `DOUBLE`, anything else text (and the
//! odd number among text is written as SQLite shows it). A declaration decides only for an
//! empty column, and names the type where every value fits it (`INT`, `TEXT`,
//! `VARCHAR(20)`), so the copy's schema reads as the file's does. Keys are added after the rows with foreign key checks off, as
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

/// The file's own declaration written for MySQL, where the type read off the values
/// holds every value under it: `INT`, `TEXT`, `VARCHAR(20)` where the file says so,
/// so a copy's schema reads to a model as the file's does (MariaDB shows `bigint(20)`
/// and `varchar(255)` for the types read off the values). None keeps the type read
/// off the values. Text in a key stays `VARCHAR`, as MySQL keys no `TEXT` whole; reals
/// stay `DOUBLE` and dates stay text, so no value prints differently from the file.
fn kept_declaration<'a>(
    declaration: &str,
    column_type: ColumnType,
    values: impl Iterator<Item = &'a SqliteValue> + Clone,
    in_key: bool,
) -> Option<String> {
    let declaration = declaration.trim().to_ascii_lowercase();
    let (base, arguments) = match declaration.split_once('(') {
        Some((base, rest)) => (base.trim(), rest.trim_end().strip_suffix(')')?.trim()),
        None => (declaration.as_str(), ""),
    };
    let length = || {
        arguments
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_VARCHAR).contains(n))
    };
    let texts = values.clone().filter_map(|value| match value {
        SqliteValue::Text(text) => Some(text.as_str()),
        _ => None,
    });
    let integers_within = |low: i64, high: i64| {
        values.clone().all(|value| match value {
            SqliteValue::Integer(number) => (low..=high).contains(number),
            _ => true,
        })
    };
    match column_type {
        ColumnType::Integer => {
            let (name, low, high) = match base {
                "int" | "integer" => ("INT", i64::from(i32::MIN), i64::from(i32::MAX)),
                "bigint" => ("BIGINT", i64::MIN, i64::MAX),
                "mediumint" => ("MEDIUMINT", -(1 << 23), (1 << 23) - 1),
                "smallint" => ("SMALLINT", i64::from(i16::MIN), i64::from(i16::MAX)),
                "tinyint" => ("TINYINT", i64::from(i8::MIN), i64::from(i8::MAX)),
                _ => return None,
            };
            integers_within(low, high).then(|| name.to_string())
        }
        ColumnType::Varchar(_) => {
            // Each value counted as it is written into the column (a real as SQLite
            // prints it, `2.0`).
            let longest = values
                .clone()
                .map(|value| match value {
                    SqliteValue::Text(text) => text.chars().count(),
                    SqliteValue::Integer(number) => number.to_string().len(),
                    SqliteValue::Real(number) => sqlite_real_text(*number).len(),
                    _ => 0,
                })
                .max()
                .unwrap_or(0);
            match base {
                "varchar" | "nvarchar" | "varchar2" | "character varying" => {
                    let n = length()?;
                    (longest <= n).then(|| format!("VARCHAR({n})"))
                }
                // MySQL drops a CHAR value's trailing spaces when it reads it back.
                "char" | "character" | "nchar" => {
                    let n = length()?;
                    let mut texts = texts;
                    (longest <= n && !texts.any(|text| text.ends_with(' ')))
                        .then(|| format!("CHAR({n})"))
                }
                "text" if !in_key => Some("TEXT".to_string()),
                _ => None,
            }
        }
        ColumnType::Real | ColumnType::LongText | ColumnType::Blob => None,
    }
}

/// Each table's columns: the storage read off the values, and the type the column is
/// created with, its kept declaration ([`kept_declaration`]) unless a foreign key joins
/// it to a column written otherwise: MySQL keys only columns of one type, so both sides
/// then take the type read off their values.
fn column_types(tables: &[SourceTable]) -> Vec<Vec<(ColumnType, String)>> {
    let lower = |name: &str| name.to_lowercase();
    let mut keyed: std::collections::BTreeSet<(String, String)> = Default::default();
    for table in tables {
        for column in &table.primary_key {
            keyed.insert((lower(&table.name), lower(column)));
        }
        for (from, parent, to) in &table.foreign_keys {
            keyed.extend(
                from.iter()
                    .map(|column| (lower(&table.name), lower(column))),
            );
            keyed.extend(to.iter().map(|column| (lower(parent), lower(column))));
        }
    }
    let mut types: Vec<Vec<(ColumnType, String)>> = tables
        .iter()
        .map(|table| {
            table
                .columns
                .iter()
                .enumerate()
                .map(|(index, (column, declaration))| {
                    let values = table.rows.iter().map(move |row| &row[index]);
                    let storage = ColumnType::of_values(declaration, values.clone());
                    let in_key = keyed.contains(&(lower(&table.name), lower(column)));
                    let written = kept_declaration(declaration, storage, values, in_key)
                        .unwrap_or_else(|| storage.sql());
                    (storage, written)
                })
                .collect()
        })
        .collect();
    let position = |table: &str, column: &str| {
        let table_index = tables.iter().position(|t| lower(&t.name) == lower(table))?;
        let column_index = tables[table_index]
            .columns
            .iter()
            .position(|(name, _)| lower(name) == lower(column))?;
        Some((table_index, column_index))
    };
    let mut pairs = Vec::new();
    for (table_index, table) in tables.iter().enumerate() {
        for (from, parent, to) in &table.foreign_keys {
            let to = referenced_columns(tables, parent, to);
            for (child, referenced) in from.iter().zip(&to) {
                if let (Some(column), Some(other)) = (
                    position(&table.name, child).map(|(_, column)| (table_index, column)),
                    position(parent, referenced),
                ) {
                    pairs.push((column, other));
                }
            }
        }
    }
    // A column may be joined to several: undo until no pair disagrees.
    let mut changed = true;
    while changed {
        changed = false;
        for ((t1, c1), (t2, c2)) in &pairs {
            if types[*t1][*c1].1.eq_ignore_ascii_case(&types[*t2][*c2].1) {
                continue;
            }
            for (t, c) in [(*t1, *c1), (*t2, *c2)] {
                let storage = types[t][c].0.sql();
                if types[t][c].1 != storage {
                    types[t][c].1 = storage;
                    changed = true;
                }
            }
        }
    }
    types
}

/// The columns a foreign key refers to: as the file names them, or, where it names
/// none, the parent's primary key (the parent found whatever its case).
fn referenced_columns(tables: &[SourceTable], parent: &str, to: &[String]) -> Vec<String> {
    if !to.is_empty() {
        return to.to_vec();
    }
    tables
        .iter()
        .find(|table| table.name.to_lowercase() == parent.to_lowercase())
        .map(|table| table.primary_key.clone())
        .unwrap_or_default()
}

/// One table read from the file.
struct SourceTable {
    name: String,
    columns: Vec<(String, String)>,
    /// Whether each column is declared NOT NULL, in the columns' order.
    not_null: Vec<bool>,
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
        let quoted = crate::sql_text::quote_ident(&name);
        let mut columns = Vec::new();
        let mut not_null = Vec::new();
        let mut keyed: Vec<(i64, String)> = Vec::new();
        let mut statement = connection
            .prepare(&format!("PRAGMA table_info({quoted})"))
            .map_err(read)?;
        let mut info = statement.query([]).map_err(read)?;
        while let Some(row) = info.next().map_err(read)? {
            let column: String = row.get(1).map_err(read)?;
            let declared: Option<String> = row.get(2).map_err(read)?;
            let declared_not_null: i64 = row.get(3).map_err(read)?;
            not_null.push(declared_not_null != 0);
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
            not_null,
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
    let column_types = column_types(&tables);
    let mut report = CopyReport::default();
    let mut types_of: BTreeMap<String, BTreeMap<String, ColumnType>> = BTreeMap::new();
    for (table, columns) in tables.iter().zip(&column_types) {
        let name = quote_name(&table.name);
        let types: Vec<ColumnType> = columns.iter().map(|(storage, _)| *storage).collect();
        let definitions: Vec<String> = table
            .columns
            .iter()
            .zip(columns)
            .enumerate()
            .map(|(index, ((column, _), (_, written)))| {
                // NOT NULL where the file declares it and holds it (the load is strict).
                let not_null = table.not_null.get(index).copied().unwrap_or(false)
                    && table
                        .rows
                        .iter()
                        .all(|row| !matches!(row[index], SqliteValue::Null));
                let constraint = if not_null { " NOT NULL" } else { "" };
                format!("{} {written}{constraint}", quote_name(column))
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
            let to = referenced_columns(&tables, parent_table, to);
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
    fn a_declaration_is_kept_where_every_value_fits_it() {
        let kept = |declaration: &str, values: &[SqliteValue], in_key: bool| {
            let column_type = ColumnType::of_values(declaration, values.iter());
            kept_declaration(declaration, column_type, values.iter(), in_key)
        };
        let small = [SqliteValue::Integer(3), SqliteValue::Null];
        assert_eq!(kept("int", &small, true).as_deref(), Some("INT"));
        assert_eq!(kept("INTEGER", &small, false).as_deref(), Some("INT"));
        assert_eq!(kept("bigint(20)", &small, false).as_deref(), Some("BIGINT"));
        let large = [SqliteValue::Integer(i64::from(i32::MAX) + 1)];
        assert_eq!(kept("int", &large, false), None, "too large for INT");
        assert_eq!(
            kept("smallint", &[SqliteValue::Integer(40_000)], false),
            None
        );
        let words = [SqliteValue::Text("Pune".into()), SqliteValue::Null];
        assert_eq!(kept("text", &words, false).as_deref(), Some("TEXT"));
        assert_eq!(
            kept("TEXT", &words, true),
            None,
            "text in a key stays VARCHAR"
        );
        assert_eq!(
            kept("varchar(20)", &words, true).as_deref(),
            Some("VARCHAR(20)")
        );
        assert_eq!(kept("varchar(3)", &words, false), None, "a value is longer");
        assert_eq!(kept("char(4)", &words, false).as_deref(), Some("CHAR(4)"));
        let padded = [SqliteValue::Text("ab ".into())];
        assert_eq!(
            kept("char(4)", &padded, false),
            None,
            "CHAR drops the space"
        );
        // A declaration the values contradict is not kept.
        let mixed = [SqliteValue::Integer(3), SqliteValue::Text("n/a".into())];
        assert_eq!(kept("int", &mixed, false), None);
        assert_eq!(kept("real", &[SqliteValue::Real(2.5)], false), None);
        assert_eq!(kept("date", &words, false), None);
    }

    /// A copy on the machine's MariaDB: the file's declarations come back where the
    /// values fit them, and the values come back unchanged.
    #[tokio::test]
    async fn a_copy_on_mariadb_keeps_the_declarations_its_values_fit() {
        let admin_url = crate::eval::guard_check::mysql_admin_url();
        if let Err(error) = super::super::mysql_reachable(&admin_url).await {
            crate::ci::skip_or_fail("the SQLite copy", &format!("MySQL is unreachable: {error}"));
            return;
        }
        let folder = tempfile::tempdir().expect("a temporary folder");
        let file = folder.path().join("shop.sqlite");
        let sqlite = rusqlite::Connection::open(&file).expect("a SQLite file");
        sqlite
            .execute_batch(
                "CREATE TABLE city (code char(3) PRIMARY KEY, name text NOT NULL, founded int);
                 CREATE TABLE person (id int PRIMARY KEY, name text);
                 CREATE TABLE shop (id INTEGER PRIMARY KEY, city char(3) REFERENCES city(code),
                   owner number REFERENCES person(id), note TEXT, rating real, opened date,
                   stock int, tag varchar(4));
                 INSERT INTO city VALUES ('PNQ', 'Pune', 1600), ('BOM', 'Mumbai', 1507);
                 INSERT INTO person VALUES (1, 'Asha'), (2, 'Ravi');
                 INSERT INTO shop VALUES (1, 'PNQ', 1, 'corner', 4.5, '2024-01-31', 7, 'ab'),
                   (2, 'BOM', 2, NULL, 3, '2023-12-01', 'n/a', 'abcdef');",
            )
            .expect("the file's tables");
        drop(sqlite);
        let database = format!(
            "askdb_copy_{}_{}",
            std::process::id(),
            crate::calendar::unix_millis()
        );
        let copied = copy_sqlite_into_mysql(&file, &admin_url, &database).await;
        let url = super::super::url_with_database(&admin_url, &database);
        let cards_of = |url: String| async move {
            let parsed: crate::database::DatabaseUrl =
                url.parse().map_err(|error| format!("{url}: {error}"))?;
            let gate = crate::database::open_gate(&parsed, Default::default())
                .await
                .map_err(|error| format!("{url}: {error}"))?;
            crate::linking::cards::build_cards(&gate)
                .await
                .map_err(|error| format!("{url}: {error}"))
        };
        let copy_cards = cards_of(url.clone()).await;
        let read = async {
            let mut conn = connect_mysql(&url, None).await?;
            let types: Vec<(String, String, String, String)> = conn
                .exec(
                    "SELECT table_name, column_name, column_type, is_nullable \
                     FROM information_schema.columns \
                     WHERE table_schema = ? ORDER BY table_name, ordinal_position",
                    (database.as_str(),),
                )
                .await
                .map_err(|error| mysql_step_error("read the types", &error))?;
            let rows: Vec<(i64, Option<String>, Option<String>, String)> = conn
                .query("SELECT id, city, note, stock FROM shop ORDER BY id")
                .await
                .map_err(|error| mysql_step_error("read the rows", &error))?;
            let _ = conn.disconnect().await;
            Ok::<_, SetupError>((types, rows))
        }
        .await;
        drop_mysql_database(&admin_url, &database)
            .await
            .expect("the copy is dropped");
        let report = copied.expect("the copy succeeds");
        assert!(report.keys_left_out.is_empty(), "{report:?}");
        assert_eq!(
            report.keys, 5,
            "three primary keys and two foreign keys: {report:?}"
        );
        let (types, rows) = read.expect("the copy reads back");
        // The model is shown the copy's city as it is shown the file's: the same type
        // names and the same sample rows (in key order, though the file holds 'PNQ'
        // before 'BOM'). The card's header, with its row count, is left out: MariaDB's
        // count is the catalog's estimate. (`person.id` is not compared: its key joins
        // `shop.owner`, so the copy holds it as BIGINT, below.)
        let city_card = |cards: Vec<crate::linking::cards::TableCard>| {
            let card = cards
                .into_iter()
                .find(|card| card.table == "city")
                .expect("a card for city");
            let body: Vec<String> = card.text.lines().skip(1).map(str::to_string).collect();
            (body.join("\n"), card.rows_text)
        };
        let from_file = city_card(
            cards_of(format!("sqlite:{}", file.display()))
                .await
                .expect("the file's cards"),
        );
        let from_copy = city_card(copy_cards.expect("the copy's cards"));
        assert_eq!(from_copy, from_file);
        assert!(
            from_file.0.contains("  name TEXT NOT NULL")
                && from_file.0.contains("e.g. 'BOM', 'PNQ'"),
            "{}",
            from_file.0
        );
        let type_of = |table: &str, column: &str| {
            types
                .iter()
                .find(|(t, c, _, _)| t == table && c == column)
                .map(|(_, _, written, _)| written.to_lowercase())
                .unwrap_or_else(|| panic!("{table}.{column} in {types:?}"))
        };
        assert_eq!(type_of("city", "code"), "char(3)");
        assert_eq!(type_of("shop", "city"), "char(3)");
        assert_eq!(type_of("city", "name"), "text");
        let nullable = |table: &str, column: &str| {
            types
                .iter()
                .any(|(t, c, _, nullable)| t == table && c == column && nullable == "YES")
        };
        assert!(!nullable("city", "name"), "declared NOT NULL: {types:?}");
        assert!(nullable("city", "founded") && nullable("shop", "note"));
        assert!(type_of("city", "founded").starts_with("int"), "{types:?}");
        assert!(type_of("shop", "id").starts_with("int"), "{types:?}");
        // Integers under a `number` declaration are BIGINT, and the key that joins them
        // to `person.id int` needs one type: both sides take the type of their values.
        assert!(type_of("shop", "owner").starts_with("bigint"), "{types:?}");
        assert!(type_of("person", "id").starts_with("bigint"), "{types:?}");
        // Values the declaration does not hold keep the type read off them.
        assert_eq!(type_of("shop", "note"), "text");
        assert_eq!(type_of("shop", "rating"), "double");
        assert_eq!(type_of("shop", "opened"), "varchar(255)");
        assert_eq!(type_of("shop", "stock"), "varchar(255)");
        assert_eq!(type_of("shop", "tag"), "varchar(255)");
        assert_eq!(
            rows,
            vec![
                (1, Some("PNQ".into()), Some("corner".into()), "7".into()),
                (2, Some("BOM".into()), None, "n/a".into()),
            ]
        );
    }

    #[test]
    fn columns_a_foreign_key_joins_are_written_alike_down_a_chain_of_keys() {
        let table = |name: &str,
                     columns: &[(&str, &str)],
                     primary_key: &[&str],
                     foreign_keys: &[(&str, &str, &str)],
                     row: Vec<SqliteValue>| SourceTable {
            name: name.to_string(),
            columns: columns
                .iter()
                .map(|(column, declared)| (column.to_string(), declared.to_string()))
                .collect(),
            not_null: vec![false; columns.len()],
            primary_key: primary_key
                .iter()
                .map(|column| column.to_string())
                .collect(),
            foreign_keys: foreign_keys
                .iter()
                .map(|(from, parent, to)| {
                    (
                        vec![from.to_string()],
                        parent.to_string(),
                        vec![to.to_string()],
                    )
                })
                .collect(),
            rows: vec![row],
        };
        let tables = vec![
            table(
                "a",
                &[("id", "int")],
                &["id"],
                &[],
                vec![SqliteValue::Integer(1)],
            ),
            // `number` keeps no declaration: BIGINT, so a.id must be BIGINT too...
            table(
                "b",
                &[("id", "int"), ("a_id", "number")],
                &["id"],
                &[("a_id", "A", "id")],
                vec![SqliteValue::Integer(1), SqliteValue::Integer(1)],
            ),
            // ...and so must a column two keys away that refers to b.a_id.
            table(
                "c",
                &[("x", "int")],
                &[],
                &[("x", "b", "a_id")],
                vec![SqliteValue::Integer(1)],
            ),
            table(
                "d",
                &[("code", "char(3)")],
                &["code"],
                &[],
                vec![SqliteValue::Text("PNQ".into())],
            ),
            table(
                "e",
                &[("code", "char(3)")],
                &[],
                &[("code", "d", "code")],
                vec![SqliteValue::Text("PNQ".into())],
            ),
        ];
        let written: Vec<Vec<String>> = column_types(&tables)
            .into_iter()
            .map(|columns| columns.into_iter().map(|(_, written)| written).collect())
            .collect();
        assert_eq!(
            written,
            vec![
                vec!["BIGINT".to_string()],
                vec!["INT".to_string(), "BIGINT".to_string()],
                vec!["BIGINT".to_string()],
                vec!["CHAR(3)".to_string()],
                vec!["CHAR(3)".to_string()],
            ]
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
