//! Schema notes: the human knowledge about a database that introspection cannot find:
//! table and column descriptions, business conventions, glossary terms, restricted
//! columns (never shown, refused by the guard) and hidden tables (never listed, refused
//! as unknown), the currency its money columns hold, and the period a table's rows cover
//! (`holds`, which the answer checks hold a question's period to). The demo database ships its notes built in (`crate::demo::demo_notes`); any
//! other database can take them from a TOML file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Notes for one database. Names are compared lower-cased.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchemaNotes {
    /// Per-table description and per-column descriptions, keyed by table name.
    #[serde(default)]
    pub tables: BTreeMap<String, TableNote>,
    /// Business conventions, one sentence each ("VOID bills never count as revenue").
    #[serde(default)]
    pub conventions: Vec<String>,
    /// Words that are ambiguous in questions, and what they mean here.
    #[serde(default)]
    pub glossary: BTreeMap<String, String>,
    /// Columns never sampled, never shown to the model and refused by the guard,
    /// written `table.column`.
    #[serde(default)]
    pub restricted_columns: Vec<String>,
    /// Tables never listed, never described and refused by the guard as unknown.
    #[serde(default)]
    pub hidden_tables: Vec<String>,
    /// The currency money is kept in, as an ISO 4217 code (`INR`, `EUR`): what the page
    /// formats money with. None: amounts are shown as plain numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// Columns that hold money in [`Self::currency`], written `table.column`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub money_columns: Vec<String>,
    /// What "best", "top" or "performance" can be measured by in this database, offered
    /// as the options when a question leaves it open ("highest total billed amount").
    /// Empty: the options come from the schema (counts of related tables, numeric
    /// columns of the tables the question names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measures: Vec<String>,
    /// The month (1-12) this business's fiscal year starts in, when it is not January:
    /// "last quarter" then also offers the fiscal quarter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fiscal_year_start_month: Option<u8>,
    /// Functions this database adds to the guard's reviewed allow-list
    /// (`config/guard_allow_list.toml`), by name: for example a user-defined function
    /// known to read nothing outside its arguments. The guard's deny list still wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_functions: Vec<String>,
}

impl SchemaNotes {
    /// The bare names of the money columns (`total_amt` of `bills.total_amt`),
    /// lower-cased, each once: what a result column is matched against.
    pub fn money_column_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .money_columns
            .iter()
            .map(|column| {
                column
                    .rsplit('.')
                    .next()
                    .unwrap_or(column.as_str())
                    .to_lowercase()
            })
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// What one table is for (and not for), what its columns mean, and the period its rows
/// cover.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableNote {
    pub description: String,
    #[serde(default)]
    pub columns: BTreeMap<String, String>,
    /// The dates the table's rows cover, when the table holds only part of the history
    /// (an archive, a table that starts on a cut-over date). In TOML:
    /// `holds = { from = "2023-01-01", to = "2024-12-31" }`; either end may be left out
    /// (open). An answer that reads this table for a period outside it is flagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holds: Option<Period>,
}

/// A span of dates, each end an ISO date (`2025-01-01`) and inclusive; a missing end is
/// open.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Period {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

impl Period {
    /// The first and last year the period touches (`i64::MIN` / `i64::MAX` for an open
    /// end); None when an end is not an ISO date.
    pub fn years(&self) -> Option<(i64, i64)> {
        let year = |date: &Option<String>, open: i64| -> Option<i64> {
            match date {
                None => Some(open),
                Some(text) => {
                    let head = text.get(..4)?;
                    let rest = text.get(4..)?;
                    let well_formed = head.chars().all(|c| c.is_ascii_digit())
                        && (rest.is_empty() || rest.starts_with('-'));
                    if well_formed {
                        head.parse().ok()
                    } else {
                        None
                    }
                }
            }
        };
        Some((year(&self.from, i64::MIN)?, year(&self.to, i64::MAX)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_period_is_read_from_toml_with_either_end_open() {
        let notes: SchemaNotes = toml::from_str(
            "[tables.bill_archive]\ndescription = \"old bills\"\nholds = { from = \"2023-01-01\", to = \"2024-12-31\" }\n\
             [tables.bills]\ndescription = \"bills\"\nholds = { from = \"2025-01-01\" }\n",
        )
        .expect("notes parse");
        let archive = notes.tables["bill_archive"]
            .holds
            .as_ref()
            .expect("a period");
        assert_eq!(archive.years(), Some((2023, 2024)));
        let bills = notes.tables["bills"].holds.as_ref().expect("a period");
        assert_eq!(bills.years(), Some((2025, i64::MAX)));
        let bad = Period {
            from: Some("last year".to_string()),
            to: None,
        };
        assert_eq!(bad.years(), None, "not an ISO date: no period");
        assert!(
            toml::from_str::<SchemaNotes>(
                "[tables.t]\ndescription = \"t\"\nholds = { start = \"2023-01-01\" }\n"
            )
            .is_err(),
            "an unknown field of a period is an error, not an open period"
        );
    }
}
