//! Writing the demo database as a SQLite file: built in a temporary file beside the
//! target inside one transaction, then renamed into place, so a crash or a concurrent
//! reader never sees a half-built database. Also finds (or first builds) the demo file
//! in askdb's data directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection, OpenFlags};
use sha2::{Digest, Sha256};

use super::ddl::{create_table_sql, insert_sql, DdlDialect};
use super::value::DemoValue;
use super::{generate, DemoError, DemoTable};

/// File name of the demo database inside the data directory.
pub const DEMO_FILE_NAME: &str = "demo.sqlite";

/// The demo SQLite file (`<data dir>/demo.sqlite`, `ASKDB_HOME` overrides the data
/// directory), built on first use. A file written by a different generator version is
/// rebuilt, so golden answers never run against stale rows.
pub fn ensure_demo_sqlite() -> Result<PathBuf, DemoError> {
    let path = crate::home::data_dir().join(DEMO_FILE_NAME);
    ensure_at(&path)?;
    Ok(path)
}

/// Builds `path` unless it already holds this generator's database.
pub(super) fn ensure_at(path: &Path) -> Result<(), DemoError> {
    let tables = generate();
    if stored_fingerprint(path) != Some(fingerprint(&tables)) {
        write_tables(path, &tables)?;
    }
    Ok(())
}

/// Writes the whole demo database to `path` atomically (temporary file in the same
/// directory, one transaction, rename). Creates the directory if needed; replaces an
/// existing file.
pub fn write_sqlite(path: &Path) -> Result<(), DemoError> {
    write_tables(path, &generate())
}

fn write_tables(path: &Path, tables: &[DemoTable]) -> Result<(), DemoError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|source| DemoError::CreateDir {
        path: dir.clone(),
        source,
    })?;
    let mut temp = TempFile {
        path: dir.join(temp_name(path)),
        armed: true,
    };
    build(&temp.path, tables).map_err(|source| DemoError::Sqlite {
        path: temp.path.clone(),
        source,
    })?;
    fs::rename(&temp.path, path).map_err(|source| DemoError::Rename {
        from: temp.path.clone(),
        path: path.to_path_buf(),
        source,
    })?;
    // Renamed into place: nothing left for the guard to clean up.
    temp.armed = false;
    Ok(())
}

/// A hidden name that cannot collide with another process building at the same time.
fn temp_name(path: &Path) -> String {
    let base = path
        .file_name()
        .map_or_else(|| DEMO_FILE_NAME.into(), |n| n.to_string_lossy());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(".{base}.{}-{nanos}.tmp", std::process::id())
}

/// Removes a half-built file (and SQLite's journal) when building fails.
struct TempFile {
    path: PathBuf,
    armed: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Best effort: the file may never have been created.
        let _ = fs::remove_file(&self.path);
        let mut journal = self.path.clone().into_os_string();
        journal.push("-journal");
        let _ = fs::remove_file(PathBuf::from(journal));
    }
}

fn build(path: &Path, tables: &[DemoTable]) -> rusqlite::Result<()> {
    let _ = fs::remove_file(path);
    let mut conn = Connection::open(path)?;
    // Checked on every insert, so a generator bug fails the build instead of shipping.
    conn.execute_batch("PRAGMA foreign_keys = ON")?;
    let tx = conn.transaction()?;
    for table in tables {
        tx.execute_batch(&create_table_sql(&table.def, DdlDialect::Sqlite))?;
        let mut insert = tx.prepare(&insert_sql(&table.def, DdlDialect::Sqlite))?;
        for row in &table.rows {
            insert.execute(params_from_iter(row.iter().map(sqlite_value)))?;
        }
    }
    // The fingerprint marks which generator wrote the file (see ensure_demo_sqlite).
    tx.execute_batch(&format!("PRAGMA user_version = {}", fingerprint(tables)))?;
    tx.commit()?;
    conn.close().map_err(|(_, e)| e)
}

/// How a demo value is stored in SQLite: decimals as REAL, booleans as 0/1, dates and
/// timestamps as ISO text.
pub fn sqlite_value(value: &DemoValue) -> Value {
    match value {
        DemoValue::Null => Value::Null,
        DemoValue::Int(v) => Value::Integer(*v),
        DemoValue::Decimal { .. } => Value::Real(value.as_f64().unwrap_or(0.0)),
        DemoValue::Text(s) | DemoValue::Date(s) | DemoValue::Timestamp(s) => Value::Text(s.clone()),
        DemoValue::Bool(b) => Value::Integer(i64::from(*b)),
    }
}

/// A 31-bit digest of every table's name and rows (fits SQLite's user_version, never
/// 0, the value of a file nobody stamped).
pub fn fingerprint(tables: &[DemoTable]) -> i64 {
    let mut hasher = Sha256::new();
    for table in tables {
        hasher.update(table.def.name.as_bytes());
        hasher.update([0x1d]);
        for row in &table.rows {
            for value in row {
                // The Debug form names the variant, so Int(1) and Text("1") differ.
                hasher.update(format!("{value:?}").as_bytes());
                hasher.update([0x1f]);
            }
            hasher.update([0x1e]);
        }
    }
    let digest = hasher.finalize();
    let word = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) & 0x7fff_ffff;
    i64::from(word.max(1))
}

fn stored_fingerprint(path: &Path) -> Option<i64> {
    if !path.is_file() {
        return None;
    }
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    conn.query_row("PRAGMA user_version", [], |row| row.get(0))
        .ok()
}
