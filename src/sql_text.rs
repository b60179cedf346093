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

    /// The character that quotes a name: MySQL and MariaDB read `"x"` as a string unless
    /// the session has ANSI_QUOTES (askdb's pinned mode has not, and the guard refuses
    /// double quotes there), so they quote names in backticks.
    pub fn name_quote(self) -> char {
        match self {
            SqlDialect::Postgres | SqlDialect::Sqlite => '"',
            SqlDialect::Mysql => '`',
        }
    }

    /// The type a value is cast to so it compares as text: MySQL and MariaDB have no
    /// `CAST(x AS TEXT)` and cast to CHAR.
    pub fn text_cast_type(self) -> &'static str {
        match self {
            SqlDialect::Postgres | SqlDialect::Sqlite => "TEXT",
            SqlDialect::Mysql => "CHAR",
        }
    }
}

/// A name quoted as `dialect` quotes names ([`SqlDialect::name_quote`]), embedded
/// quote characters doubled: what SQL askdb writes for a database of any engine uses.
pub fn quote_name(dialect: SqlDialect, name: &str) -> String {
    match dialect {
        SqlDialect::Postgres | SqlDialect::Sqlite => quote_ident(name),
        SqlDialect::Mysql => quote_ident_mysql(name),
    }
}

/// A double-quoted identifier with embedded quotes doubled, as SQLite and PostgreSQL
/// read a name (MySQL reads it as a string: [`quote_name`] picks per dialect).
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
}
