//! Demo cell values, kept free of any SQL dialect so one generator feeds SQLite and
//! PostgreSQL with the same rows. Money is integer-scaled, never a float, so totals are
//! exact; each backend decides how to store it.

use std::fmt;

use super::ddl::DdlDialect;

/// One cell of a demo row.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DemoValue {
    Null,
    Int(i64),
    /// An exact decimal: `scaled / 10^scale` (1234 with scale 2 is 12.34).
    Decimal {
        scaled: i64,
        scale: u8,
    },
    Text(String),
    Bool(bool),
    /// 'YYYY-MM-DD'.
    Date(String),
    /// 'YYYY-MM-DD HH:MM:SS'.
    Timestamp(String),
}

impl DemoValue {
    /// A money amount in paise (hundredths of a rupee), scale 2.
    pub fn money(paise: i64) -> DemoValue {
        DemoValue::Decimal {
            scaled: paise,
            scale: 2,
        }
    }

    /// The nearest f64 to a number (SQLite stores numerics as REAL); None for
    /// non-numbers.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            DemoValue::Int(v) => Some(*v as f64),
            DemoValue::Decimal { scaled, scale } => {
                Some(*scaled as f64 / 10f64.powi(i32::from(*scale)))
            }
            _ => None,
        }
    }

    /// The integer inside `Int`, or the scaled integer inside `Decimal`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            DemoValue::Int(v) => Some(*v),
            DemoValue::Decimal { scaled, .. } => Some(*scaled),
            _ => None,
        }
    }

    /// The text inside `Text`, `Date` or `Timestamp`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            DemoValue::Text(s) | DemoValue::Date(s) | DemoValue::Timestamp(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, DemoValue::Null)
    }

    /// The value as an SQL literal for `dialect`, for loaders that build literal
    /// INSERT statements instead of binding parameters (decimals keep every digit;
    /// PostgreSQL dates and timestamps are typed literals, SQLite's are plain text,
    /// SQLite booleans are 0/1).
    pub fn sql_literal(&self, dialect: DdlDialect) -> String {
        match (self, dialect) {
            (DemoValue::Null, _) => "NULL".to_string(),
            (DemoValue::Int(v), _) => v.to_string(),
            (DemoValue::Decimal { .. }, _) => self.to_string(),
            (DemoValue::Text(s), _) => quote(s),
            (DemoValue::Bool(b), DdlDialect::Postgres | DdlDialect::Mysql) => {
                if *b { "TRUE" } else { "FALSE" }.to_string()
            }
            (DemoValue::Bool(b), DdlDialect::Sqlite) => if *b { "1" } else { "0" }.to_string(),
            (DemoValue::Date(s), DdlDialect::Postgres | DdlDialect::Mysql) => {
                format!("DATE {}", quote(s))
            }
            (DemoValue::Timestamp(s), DdlDialect::Postgres | DdlDialect::Mysql) => {
                format!("TIMESTAMP {}", quote(s))
            }
            (DemoValue::Date(s) | DemoValue::Timestamp(s), DdlDialect::Sqlite) => quote(s),
        }
    }
}

/// A standard SQL string literal (quotes doubled); SQLite and PostgreSQL read
/// backslashes literally, and MySQL does in the session the loader pins
/// (NO_BACKSLASH_ESCAPES).
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Plain text: decimals with all their scale digits ("12.30", "-0.05"), booleans as
/// true/false, NULL as "NULL" (never an empty string, which would look like data).
impl fmt::Display for DemoValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DemoValue::Null => f.write_str("NULL"),
            DemoValue::Int(v) => write!(f, "{v}"),
            DemoValue::Decimal { scaled, scale } => {
                if *scale == 0 {
                    return write!(f, "{scaled}");
                }
                let divisor = 10u64.pow(u32::from(*scale));
                let sign = if *scaled < 0 { "-" } else { "" };
                let magnitude = scaled.unsigned_abs();
                write!(
                    f,
                    "{sign}{}.{:0width$}",
                    magnitude / divisor,
                    magnitude % divisor,
                    width = usize::from(*scale)
                )
            }
            DemoValue::Text(s) | DemoValue::Date(s) | DemoValue::Timestamp(s) => f.write_str(s),
            DemoValue::Bool(b) => write!(f, "{b}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_print_exactly() {
        assert_eq!(DemoValue::money(1234).to_string(), "12.34");
        assert_eq!(DemoValue::money(-5).to_string(), "-0.05");
        assert_eq!(DemoValue::money(1200).to_string(), "12.00");
        assert_eq!(DemoValue::money(1234).as_f64(), Some(12.34));
    }

    #[test]
    fn literals_per_dialect() {
        let text = DemoValue::Text("customer's phone".into());
        assert_eq!(text.sql_literal(DdlDialect::Sqlite), "'customer''s phone'");
        let date = DemoValue::Date("2025-01-01".into());
        assert_eq!(date.sql_literal(DdlDialect::Postgres), "DATE '2025-01-01'");
        assert_eq!(date.sql_literal(DdlDialect::Sqlite), "'2025-01-01'");
        assert_eq!(DemoValue::Bool(true).sql_literal(DdlDialect::Sqlite), "1");
        assert_eq!(
            DemoValue::Bool(false).sql_literal(DdlDialect::Postgres),
            "FALSE"
        );
    }
}
