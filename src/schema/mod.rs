//! What askdb knows about a database's tables: the introspected structure (columns,
//! types, keys, row counts) and the notes that travel with it. Executors fill these
//! types from their catalogs; the gate filters them (hidden tables, restricted columns)
//! before anyone else sees them.

pub mod notes;

use serde::{Deserialize, Serialize};

pub use notes::{Period, SchemaNotes, TableNote};

/// One column as the database describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnSchema {
    pub name: String,
    /// The declared type as the database spells it (`varchar(20)`, `NUMERIC`...).
    pub data_type: String,
    pub nullable: bool,
}

/// A foreign key: these columns reference those columns of another table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForeignKey {
    pub columns: Vec<String>,
    pub references_table: String,
    pub references_columns: Vec<String>,
}

/// One table with its columns, keys and approximate size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableSchema {
    pub name: String,
    pub columns: Vec<ColumnSchema>,
    pub primary_key: Vec<String>,
    #[serde(default)]
    pub unique: Vec<Vec<String>>,
    pub foreign_keys: Vec<ForeignKey>,
    /// Approximate row count (exact for SQLite, `reltuples` for PostgreSQL); None
    /// when the database has no estimate yet.
    pub row_count: Option<i64>,
}

/// The table of that name in a schema. Names compare without case, as the databases
/// compare unquoted names, and as every rule check looks a query's tables up.
pub fn table_named<'s>(schema: &'s [TableSchema], name: &str) -> Option<&'s TableSchema> {
    schema
        .iter()
        .find(|table| table.name.eq_ignore_ascii_case(name))
}

impl TableSchema {
    /// The column of that name, compared without case (see [`table_named`]).
    pub fn column_named(&self, name: &str) -> Option<&ColumnSchema> {
        self.columns
            .iter()
            .find(|column| column.name.eq_ignore_ascii_case(name))
    }

    /// A table of nullable columns of one type, with a primary key and nothing else: the
    /// one fixture the rule tests build schemas from.
    #[cfg(test)]
    pub fn for_tests(
        name: &str,
        columns: &[&str],
        data_type: &str,
        primary_key: &[&str],
    ) -> TableSchema {
        TableSchema {
            name: name.to_string(),
            columns: columns
                .iter()
                .map(|column| ColumnSchema {
                    name: column.to_string(),
                    data_type: data_type.to_string(),
                    nullable: true,
                })
                .collect(),
            primary_key: primary_key.iter().map(|part| part.to_string()).collect(),
            unique: Vec::new(),
            foreign_keys: Vec::new(),
            row_count: None,
        }
    }

    /// The table written as CREATE TABLE, with its keys: the form models read best.
    pub fn create_table_sql(&self) -> String {
        let mut lines: Vec<String> = self
            .columns
            .iter()
            .map(|column| {
                let mut line = format!("  {} {}", column.name, shown_type(&column.data_type));
                if !column.nullable {
                    line.push_str(" NOT NULL");
                }
                line
            })
            .collect();
        if !self.primary_key.is_empty() {
            lines.push(format!("  PRIMARY KEY ({})", self.primary_key.join(", ")));
        }
        for unique in &self.unique {
            lines.push(format!("  UNIQUE ({})", unique.join(", ")));
        }
        for key in &self.foreign_keys {
            lines.push(format!(
                "  FOREIGN KEY ({}) REFERENCES {} ({})",
                key.columns.join(", "),
                key.references_table,
                key.references_columns.join(", ")
            ));
        }
        format!("CREATE TABLE {} (\n{}\n);", self.name, lines.join(",\n"))
    }
}

/// A column type as the CREATE TABLE askdb shows writes it: in capitals outside quotes,
/// and under one name where SQL has two. Each engine reports types in its own case and
/// spelling (MySQL's catalog `int`, PostgreSQL's `integer`, SQLite the file's
/// declaration), and this text is the model's prompt, so the same table copied to
/// another engine reads the same. Anything quoted keeps its case: a PostgreSQL type
/// `"Mood"` (part of the name) and a MySQL enum's values (`enum('a','B')`, the values a
/// filter must match).
pub fn shown_type(data_type: &str) -> String {
    let mut quote: Option<char> = None;
    let capitals: String = data_type
        .chars()
        .map(|c| match quote {
            Some(open) => {
                if c == open {
                    quote = None;
                }
                c
            }
            None if c == '"' || c == '`' || c == '\'' => {
                quote = Some(c);
                c
            }
            None => c.to_ascii_uppercase(),
        })
        .collect();
    // One type SQL spells two ways reads one way: MySQL's catalog says `int` for a
    // column declared INTEGER, SQLite keeps the declaration, PostgreSQL says `integer`.
    for (synonym, name) in [
        ("INTEGER", "INT"),
        ("CHARACTER VARYING", "VARCHAR"),
        ("DOUBLE PRECISION", "DOUBLE"),
    ] {
        if let Some(rest) = capitals.strip_prefix(synonym) {
            if !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                return format!("{name}{rest}");
            }
        }
    }
    capitals
}

/// A column type as MySQL 8 writes it: MariaDB and MySQL 5.7 show an integer's display
/// width (`bigint(20)`, `int(11) unsigned`) and `year(4)`, which change neither what a
/// column holds nor how it compares; MySQL 8 dropped them, keeping only `tinyint(1)`
/// (the boolean convention) and a `zerofill` column's width (which changes how values
/// print). The same column then reads the same on every server, in a prompt and in a
/// drift check against a snapshot taken either way. Any other type comes back as it is.
pub fn without_display_width(column_type: &str) -> String {
    let written = column_type.trim();
    // ASCII lower-casing keeps every byte where it was, so indices carry over.
    let lower = written.to_ascii_lowercase();
    let Some(base) = ["tinyint", "smallint", "mediumint", "bigint", "int", "year"]
        .into_iter()
        .find(|base| lower.starts_with(&format!("{base}(")))
    else {
        return column_type.to_string();
    };
    let Some(close) = lower.find(')') else {
        return column_type.to_string();
    };
    let width = &lower[base.len() + 1..close];
    let keeps_width = lower.contains("zerofill") || (base == "tinyint" && width == "1");
    if keeps_width || width.is_empty() || !width.chars().all(|c| c.is_ascii_digit()) {
        return column_type.to_string();
    }
    format!("{}{}", &written[..base.len()], &written[close + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_types_read_without_their_display_width() {
        for (written, read) in [
            ("bigint(20)", "bigint"),
            ("int(10) unsigned", "int unsigned"),
            ("INT(11)", "INT"),
            ("tinyint(4)", "tinyint"),
            ("tinyint(10)", "tinyint"),
            ("tinyint(1)", "tinyint(1)"),
            ("int(10) unsigned zerofill", "int(10) unsigned zerofill"),
            ("year(4)", "year"),
            ("varchar(20)", "varchar(20)"),
            ("decimal(10,2)", "decimal(10,2)"),
            ("int", "int"),
            ("point", "point"),
        ] {
            assert_eq!(without_display_width(written), read, "{written}");
        }
    }

    #[test]
    fn types_are_shown_in_capitals_except_a_quoted_name() {
        for (reported, shown) in [
            ("int", "INT"),
            ("varchar(20)", "VARCHAR(20)"),
            ("character varying(40)", "VARCHAR(40)"),
            ("INTEGER", "INT"),
            ("integer[]", "INT[]"),
            ("INTEGRAL", "INTEGRAL"),
            ("double precision", "DOUBLE"),
            ("int unsigned", "INT UNSIGNED"),
            ("\"Mood\"", "\"Mood\""),
            ("public.\"Mood\"[]", "PUBLIC.\"Mood\"[]"),
            ("enum('a','B')", "ENUM('a','B')"),
        ] {
            assert_eq!(shown_type(reported), shown, "{reported}");
        }
        let mixed = TableSchema::for_tests("t", &["Name"], "text", &["Name"]);
        assert!(
            mixed.create_table_sql().contains("  Name TEXT,\n"),
            "{}",
            mixed.create_table_sql()
        );
    }

    #[test]
    fn tables_and_columns_are_found_without_case() {
        let schema = vec![
            TableSchema::for_tests("Bills", &["bill_ID", "total"], "INTEGER", &["bill_ID"]),
            TableSchema::for_tests("customers", &["cust_id"], "INTEGER", &["cust_id"]),
        ];
        let bills = table_named(&schema, "bills").expect("found without case");
        assert_eq!(bills.name, "Bills");
        assert_eq!(
            bills
                .column_named("BILL_id")
                .map(|column| column.name.as_str()),
            Some("bill_ID"),
            "the column as the table spells it"
        );
        assert!(bills.column_named("cust_id").is_none());
        assert!(table_named(&schema, "bill").is_none());
    }
}
