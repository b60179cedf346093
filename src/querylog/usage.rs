//! Which verified examples the query log says were used since a time: what `askdb
//! examples list --unused-days N` prunes by. Reads the log like `askdb log stats`
//! ([`LogSource`]); a SQLite log written before the log kept examples has none.

use std::collections::BTreeSet;

use super::stats::LogSource;
use super::{connect_postgres, LogError};
use crate::gate::QUERY_LOG_TABLE;

/// The example ids in the log's `examples` column (`3,7`), a malformed id skipped.
fn ids(text: &str) -> impl Iterator<Item = i64> + '_ {
    text.split(',').filter_map(|id| id.trim().parse().ok())
}

/// Every example id a question logged at or after `since` (`YYYY-MM-DD HH:MM:SS` UTC)
/// used, shown to the model or re-run.
pub async fn examples_used_since(
    source: &LogSource,
    since: &str,
) -> Result<BTreeSet<i64>, LogError> {
    match source {
        LogSource::Postgres(url) => {
            let client = connect_postgres(url).await?;
            let sql = format!(
                "SELECT examples FROM {QUERY_LOG_TABLE} \
                 WHERE examples IS NOT NULL AND asked_at >= $1::text::timestamp AT TIME ZONE 'UTC'"
            );
            let rows = client
                .query(sql.as_str(), &[&since])
                .await
                .map_err(|error| LogError::Read(crate::text::error_chain(&error)))?;
            let mut used = BTreeSet::new();
            for row in rows {
                let text: String = row
                    .try_get(0)
                    .map_err(|error| LogError::Read(crate::text::error_chain(&error)))?;
                used.extend(ids(&text));
            }
            Ok(used)
        }
        LogSource::Mysql(url) => {
            let mut used = BTreeSet::new();
            for text in super::mysql::examples_since(url, since).await? {
                used.extend(ids(&text));
            }
            Ok(used)
        }
        LogSource::Sqlite(path) => {
            let path = path.clone();
            let since = since.to_string();
            tokio::task::spawn_blocking(move || sqlite_used_since(&path, &since))
                .await
                .map_err(|error| LogError::Read(error.to_string()))?
        }
    }
}

fn sqlite_used_since(path: &std::path::Path, since: &str) -> Result<BTreeSet<i64>, LogError> {
    // No log yet: nothing was used.
    if !path.exists() {
        return Ok(BTreeSet::new());
    }
    let fail = |error: rusqlite::Error| LogError::Read(format!("{}: {error}", path.display()));
    let connection =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(fail)?;
    let has_column = connection
        .prepare(&format!("PRAGMA table_info({QUERY_LOG_TABLE})"))
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get::<_, String>(1))?
                .collect::<Result<Vec<String>, _>>()
        })
        .map_err(fail)?
        .iter()
        .any(|column| column == "examples");
    if !has_column {
        return Ok(BTreeSet::new());
    }
    let mut statement = connection
        .prepare(&format!(
            "SELECT examples FROM {QUERY_LOG_TABLE} WHERE examples IS NOT NULL AND asked_at >= ?1"
        ))
        .map_err(fail)?;
    let rows = statement
        .query_map([since], |row| row.get::<_, String>(0))
        .map_err(fail)?;
    let mut used = BTreeSet::new();
    for row in rows {
        used.extend(ids(&row.map_err(fail)?));
    }
    Ok(used)
}
