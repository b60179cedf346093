//! SQL text primitives shared by every module that writes SQL of its own: the
//! dialects askdb speaks, the parser dialect for each, and quoting of identifiers and
//! string literals. One home, so a quoting rule is fixed in one place.
//!
//! Quoting here is for SQL askdb composes itself (introspection, samples, the empty-result
//! probe, administration); model and user SQL is never quoted, it is parsed by the guard.

use serde::{Deserialize, Serialize};
use sqlparser::dialect::{Dialect, MySqlDialect, PostgreSqlDialect, SQLiteDialect};

/// Which SQL grammar a database speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SqlDialect {
    Postgres,
    Sqlite,
    /// MySQL and MariaDB: one grammar to the guard (sqlparser's MySQL dialect), read by
    /// the server under the session `sql_mode` the executor pins.
    Mysql,
}

impl SqlDialect {
    /// The sqlparser dialect that parses this database's SQL.
    pub fn parser_dialect(self) -> Box<dyn Dialect> {
        match self {
            SqlDialect::Postgres => Box::new(PostgreSqlDialect {}),
            SqlDialect::Sqlite => Box::new(SQLiteDialect {}),
            SqlDialect::Mysql => Box::new(MySqlDialect {}),
        }
    }

    /// The schema name under which user tables may be qualified. MySQL's schema is the
    /// database itself, whose name differs per connection: no fixed name qualifies a
    /// table there, so a qualified name is only ever another database's table.
    pub fn default_schema(self) -> &'static str {
        match self {
            SqlDialect::Postgres => "public",
            SqlDialect::Sqlite => "main",
            SqlDialect::Mysql => "",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SqlDialect::Postgres => "postgres",
            SqlDialect::Sqlite => "sqlite",
            SqlDialect::Mysql => "mysql",
        }
    }
}

/// What the server behind a dialect runs beyond the grammar every version shares, read
/// from the server when askdb connects. The prompt states it, so the model neither avoids
/// what works nor writes what this server refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerFeatures {
    /// `INTERSECT` and `EXCEPT`: SQLite and PostgreSQL always; MariaDB from 10.3, MySQL
    /// from 8.0.31.
    pub set_operations: bool,
}

impl ServerFeatures {
    /// What every SQLite and PostgreSQL version askdb supports runs.
    pub const COMPLETE: ServerFeatures = ServerFeatures {
        set_operations: true,
    };

    /// What a MySQL or MariaDB server runs, from its `VERSION()` (`10.11.6-MariaDB-...`,
    /// `8.0.35`). A version that does not read as numbers is taken as the oldest.
    pub fn of_mysql_version(version: &str) -> ServerFeatures {
        // MariaDB before 11 announced itself as `5.5.5-10.x` where old clients look.
        let numbers: Vec<u32> = version
            .strip_prefix("5.5.5-")
            .unwrap_or(version)
            .split(|c: char| !c.is_ascii_digit())
            .take(3)
            .map(|part| part.parse().unwrap_or(0))
            .collect();
        let at_least = |wanted: [u32; 3]| {
            let mut have = [0u32; 3];
            for (slot, number) in have.iter_mut().zip(&numbers) {
                *slot = *number;
            }
            have >= wanted
        };
        let set_operations = if version.contains("MariaDB") {
            at_least([10, 3, 0])
        } else {
            at_least([8, 0, 31])
        };
        ServerFeatures { set_operations }
    }
}

/// A double-quoted identifier with embedded quotes doubled (both dialects accept it).
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A backtick-quoted identifier for MySQL, embedded backticks doubled (MySQL reads a
/// double-quoted name as a string unless ANSI_QUOTES is on).
pub fn quote_ident_mysql(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A single-quoted string literal with embedded quotes doubled. Standard SQL: neither
/// dialect treats a backslash as an escape in such a literal (PostgreSQL with
/// `standard_conforming_strings` on, its default since 9.1).
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_the_quote_character_and_nothing_else() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_ident("plain"), "\"plain\"");
        assert_eq!(quote_ident_mysql("a`b"), "`a``b`");
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal("back\\slash"), "'back\\slash'");
    }

    #[test]
    fn set_operations_are_read_off_the_server_version() {
        let runs = |version: &str| ServerFeatures::of_mysql_version(version).set_operations;
        assert!(runs("10.11.6-MariaDB-0+deb12u1"));
        assert!(runs("10.3.0-MariaDB"));
        assert!(!runs("10.2.44-MariaDB-log"));
        assert!(runs("5.5.5-10.11.6-MariaDB"));
        assert!(runs("8.0.31"));
        assert!(runs("8.4.0"));
        assert!(!runs("8.0.30"));
        assert!(!runs("5.7.44-log"));
        assert!(!runs("not a version"));
    }
}
