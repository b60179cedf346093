//! The database a user names, resolved into what the gate opens. `--db demo` (the
//! default) builds the embedded demo database on first use in askdb's data directory and
//! brings its built-in notes; a SQLite path or a PostgreSQL URL is opened as given, with
//! the demo's notes applied when it holds the demo's tables (the demo loaded into
//! PostgreSQL by `askdb db setup` keeps its restricted columns). Every caller opens its
//! gate here, so the gate itself never needs to know the demo exists.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::gate::{Database, Gate, GateError, GateOptions, OpeningGate};
use crate::text::redact_password;

/// Where the database is, as a user writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// The embedded demo database (built on first use in askdb's data directory).
    Demo,
    Sqlite(PathBuf),
    Postgres(String),
    /// MySQL or MariaDB, kept as `mysql://...` (`mariadb://` is the same server).
    Mysql(String),
}

#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    #[error("unrecognised database URL {0:?}: use sqlite:PATH, a path to a .sqlite/.db file, postgres://USER@HOST/DB, mysql://USER:PASS@HOST:PORT/DB, or demo")]
    BadUrl(String),
    #[error("cannot build the demo database: {0}")]
    Demo(String),
    #[error(transparent)]
    Gate(#[from] GateError),
}

impl FromStr for DatabaseUrl {
    type Err = DatabaseError;

    fn from_str(text: &str) -> Result<Self, DatabaseError> {
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.eq_ignore_ascii_case("demo") {
            return Ok(DatabaseUrl::Demo);
        }
        if trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://") {
            return Ok(DatabaseUrl::Postgres(trimmed.to_string()));
        }
        if let Some(url) = crate::text::mysql_url(trimmed) {
            if url == "mysql://" {
                return Err(DatabaseError::BadUrl(text.to_string()));
            }
            return Ok(DatabaseUrl::Mysql(url));
        }
        if let Some(path) = trimmed
            .strip_prefix("sqlite://")
            .or_else(|| trimmed.strip_prefix("sqlite:"))
        {
            if path.is_empty() {
                return Err(DatabaseError::BadUrl(text.to_string()));
            }
            return Ok(DatabaseUrl::Sqlite(PathBuf::from(path)));
        }
        if trimmed.contains("://") {
            return Err(DatabaseError::BadUrl(text.to_string()));
        }
        let path = Path::new(trimmed);
        let looks_like_sqlite = matches!(
            path.extension().and_then(|ext| ext.to_str()),
            Some("sqlite" | "sqlite3" | "db")
        );
        if looks_like_sqlite || path.is_file() {
            return Ok(DatabaseUrl::Sqlite(path.to_path_buf()));
        }
        Err(DatabaseError::BadUrl(text.to_string()))
    }
}

impl fmt::Display for DatabaseUrl {
    /// Shows the URL without any password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatabaseUrl::Demo => f.write_str("demo"),
            DatabaseUrl::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            DatabaseUrl::Postgres(url) | DatabaseUrl::Mysql(url) => {
                f.write_str(&redact_password(url))
            }
        }
    }
}

impl DatabaseUrl {
    /// The URL as askdb accepts it again (the password kept), for run folders that
    /// reopen the same database.
    pub fn as_argument(&self) -> String {
        match self {
            DatabaseUrl::Demo => "demo".to_string(),
            DatabaseUrl::Sqlite(path) => format!("sqlite:{}", path.display()),
            DatabaseUrl::Postgres(url) | DatabaseUrl::Mysql(url) => url.clone(),
        }
    }

    /// The SQLite file behind this URL, if it is one (the demo's is in askdb's data
    /// directory).
    pub fn sqlite_file(&self) -> Option<PathBuf> {
        match self {
            DatabaseUrl::Demo => Some(crate::home::data_dir().join(crate::demo::DEMO_FILE_NAME)),
            DatabaseUrl::Sqlite(path) => Some(path.clone()),
            DatabaseUrl::Postgres(_) | DatabaseUrl::Mysql(_) => None,
        }
    }
}

/// Resolves the URL (building the demo when it is named) and opens its gate. Explicit
/// notes in `options` win; otherwise the demo's notes apply to a database that holds
/// the demo's tables.
pub async fn open_gate(url: &DatabaseUrl, options: GateOptions) -> Result<Gate, DatabaseError> {
    Ok(connect_gate(url, options).await?.finish().await?)
}

/// [`open_gate`] up to the database's answer ([`Gate::connect`]): the catalogs are read
/// when the [`OpeningGate`] is finished.
pub async fn connect_gate(
    url: &DatabaseUrl,
    mut options: GateOptions,
) -> Result<OpeningGate, DatabaseError> {
    if options.default_notes.is_none() {
        options.default_notes = Some(crate::demo::demo_notes());
    }
    let database = match url {
        DatabaseUrl::Demo => {
            let path = tokio::task::spawn_blocking(crate::demo::ensure_demo_sqlite)
                .await
                .map_err(|error| DatabaseError::Demo(error.to_string()))?
                .map_err(|error| DatabaseError::Demo(error.to_string()))?;
            if options.label.is_none() {
                options.label = Some("demo".to_string());
            }
            Database::Sqlite(path)
        }
        DatabaseUrl::Sqlite(path) => Database::Sqlite(path.clone()),
        DatabaseUrl::Postgres(text) => Database::Postgres(text.clone()),
        DatabaseUrl::Mysql(text) => Database::Mysql(text.clone()),
    };
    Ok(Gate::connect(&database, options).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_urls_parse_or_fail_clearly() {
        assert_eq!("demo".parse::<DatabaseUrl>().ok(), Some(DatabaseUrl::Demo));
        assert_eq!(
            "sqlite:/tmp/x.db".parse::<DatabaseUrl>().ok(),
            Some(DatabaseUrl::Sqlite(PathBuf::from("/tmp/x.db")))
        );
        assert_eq!(
            "/data/shop.sqlite".parse::<DatabaseUrl>().ok(),
            Some(DatabaseUrl::Sqlite(PathBuf::from("/data/shop.sqlite")))
        );
        assert!(matches!(
            "postgres://askdb_ro@127.0.0.1/shop".parse::<DatabaseUrl>(),
            Ok(DatabaseUrl::Postgres(_))
        ));
        assert_eq!(
            "mariadb://askdb_ro:pw@127.0.0.1:3306/shop"
                .parse::<DatabaseUrl>()
                .ok(),
            Some(DatabaseUrl::Mysql(
                "mysql://askdb_ro:pw@127.0.0.1:3306/shop".to_string()
            ))
        );
        let shown = "mysql://askdb_ro:pw@127.0.0.1:3306/shop"
            .parse::<DatabaseUrl>()
            .map(|url| url.to_string())
            .unwrap_or_default();
        assert!(
            shown.starts_with("mysql://askdb_ro") && !shown.contains("pw"),
            "{shown}"
        );
        for bad in [
            "mysql://",
            "mariadb://",
            "oracle://x",
            "sqlite:",
            "not a url",
        ] {
            let error = bad.parse::<DatabaseUrl>().expect_err(bad);
            assert!(
                error.to_string().contains("unrecognised database URL"),
                "{error}"
            );
        }
        assert_eq!(
            "postgres://askdb_ro:s3cret@127.0.0.1:5432/shop"
                .parse::<DatabaseUrl>()
                .map(|url| url.to_string())
                .ok()
                .as_deref(),
            Some("postgres://askdb_ro:***@127.0.0.1:5432/shop")
        );
    }
}
