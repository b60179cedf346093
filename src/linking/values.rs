//! The value index: the distinct values of short text columns, so that a literal a
//! question names ('Teflon Tape', "Sharma Constructions", "UPI", "paid") finds the
//! table and column that hold it, even when no word of the question matches a name.
//!
//! Values are read through the gate like every other query (the guard caps the
//! LIMIT; restricted columns are never visible to be read).

use serde::{Deserialize, Serialize};

use super::lexical::{contains_run, value_terms, words};
use crate::gate::{Gate, GateError, QueryOutcome};
use crate::linking::cards::TableCard;
use crate::sql_text::quote_name;

/// Distinct values read per column (the guard may cap it lower).
pub const DISTINCT_VALUES: usize = 500;

/// Columns whose values average more characters than this are free text (notes,
/// addresses): their words are not names of things, and would match everything.
pub const MAX_AVERAGE_VALUE_CHARS: usize = 40;

/// The distinct values of one column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnValues {
    pub table: String,
    pub column: String,
    pub values: Vec<String>,
}

/// A value of the index found in a question.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueMatch {
    pub table: String,
    pub column: String,
    pub value: String,
    /// How much the match says: a several-word name is near proof, a one-word value
    /// such as 'OPEN' or 'CASH' may just be English.
    pub strength: f64,
}

#[derive(Debug, Clone)]
struct Entry {
    table: String,
    column: String,
    value: String,
    terms: Vec<String>,
}

/// Normalised values of the indexed columns.
#[derive(Debug, Clone, Default)]
pub struct ValueIndex {
    entries: Vec<Entry>,
}

/// Values of one or two characters, and lone function words, carry no evidence on
/// their own (units 'm' and 'kg' would match every question that says "m").
fn worth_indexing(value: &str, terms: &[String]) -> bool {
    let has_letter = value.chars().any(char::is_alphabetic);
    let long_enough = value.trim().chars().count() >= 3;
    let single_function_word = terms.len() == 1 && super::lexical::text_terms(value).is_empty();
    has_letter && long_enough && !single_function_word && !terms.is_empty()
}

impl ValueIndex {
    pub fn new(columns: Vec<ColumnValues>) -> ValueIndex {
        let mut entries = Vec::new();
        for column in columns {
            for value in column.values {
                let terms = value_terms(&value);
                if !worth_indexing(&value, &terms) {
                    continue;
                }
                entries.push(Entry {
                    table: column.table.clone(),
                    column: column.column.clone(),
                    value,
                    terms,
                });
            }
        }
        ValueIndex { entries }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The columns (table, column) that store `value` itself, case and surrounding
    /// spaces ignored: where a literal a query compared with the wrong column is kept.
    pub fn columns_holding(&self, value: &str) -> Vec<(String, String)> {
        let wanted = value.trim();
        let mut holders: Vec<(String, String)> = self
            .entries
            .iter()
            .filter(|entry| entry.value.trim().eq_ignore_ascii_case(wanted))
            .map(|entry| (entry.table.clone(), entry.column.clone()))
            .collect();
        holders.sort();
        holders.dedup();
        holders
    }

    /// Values the question names: the whole value appears in the question's words, or
    /// a quoted literal of the question appears inside the value ('PVC Pipe' finds
    /// 'PVC Pipe 1 inch').
    pub fn matches(&self, question: &str) -> Vec<ValueMatch> {
        let question_terms = value_terms(question);
        let quoted: Vec<Vec<String>> = quoted_literals(question)
            .iter()
            .map(|literal| value_terms(literal))
            .filter(|terms| !terms.is_empty())
            .collect();
        let mut found = Vec::new();
        for entry in &self.entries {
            let whole = contains_run(&question_terms, &entry.terms);
            let inside = quoted
                .iter()
                .any(|literal| contains_run(&entry.terms, literal));
            if whole || inside {
                let strength = if entry.terms.len() > 1 || inside {
                    2.0
                } else {
                    1.0
                };
                found.push(ValueMatch {
                    table: entry.table.clone(),
                    column: entry.column.clone(),
                    value: entry.value.clone(),
                    strength,
                });
            }
        }
        found
    }
}

/// Text between matching single or double quotes: how people mark a literal.
/// An apostrophe inside a word (customer's) opens nothing.
fn quoted_literals(question: &str) -> Vec<String> {
    let chars: Vec<char> = question.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let quote = chars[i];
        let opens =
            matches!(quote, '\'' | '"' | '‘' | '“') && (i == 0 || !chars[i - 1].is_alphanumeric());
        if opens {
            let close = match quote {
                '‘' => '’',
                '“' => '”',
                other => other,
            };
            if let Some(end) = chars[i + 1..].iter().position(|&c| c == close) {
                let literal: String = chars[i + 1..i + 1 + end].iter().collect();
                if !words(&literal).is_empty() {
                    out.push(literal);
                }
                i += end + 2;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Whether a declared type holds text (SQLite columns may have no type at all).
fn is_text_type(data_type: &str) -> bool {
    let lower = data_type.to_lowercase();
    lower.is_empty()
        || ["char", "text", "clob", "string"]
            .iter()
            .any(|word| lower.contains(word))
}

/// Reads the distinct values of every short text column of the given tables through
/// the gate. A column whose query fails is left out rather than failing the index:
/// linking without one column's values is still linking.
pub async fn collect(gate: &Gate, cards: &[&TableCard]) -> Result<Vec<ColumnValues>, GateError> {
    let mut out = Vec::new();
    for card in cards {
        let description = gate.describe_table(&card.table)?;
        for column in &description.columns {
            if !is_text_type(&column.data_type) {
                continue;
            }
            let sql = format!(
                "SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL LIMIT {DISTINCT_VALUES}",
                column = quote_name(gate.dialect(), &column.name),
                table = quote_name(gate.dialect(), &description.name),
            );
            let QueryOutcome::Rows(result) = gate.run_query(&sql).await else {
                continue;
            };
            let values: Vec<String> = result
                .rows
                .iter()
                .filter_map(|row| row.first()?.as_str().map(str::to_string))
                .collect();
            if values.is_empty() {
                continue;
            }
            let total_chars: usize = values.iter().map(|value| value.chars().count()).sum();
            if total_chars / values.len() > MAX_AVERAGE_VALUE_CHARS {
                continue;
            }
            out.push(ColumnValues {
                table: description.name.clone(),
                column: column.name.to_lowercase(),
                values,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> ValueIndex {
        ValueIndex::new(vec![
            ColumnValues {
                table: "products".into(),
                column: "prod_name".into(),
                values: vec!["Teflon Tape".into(), "PVC Pipe 1 inch".into()],
            },
            ColumnValues {
                table: "products".into(),
                column: "unit".into(),
                values: vec!["m".into(), "the".into(), "roll".into()],
            },
            ColumnValues {
                table: "payments".into(),
                column: "mode".into(),
                values: vec!["UPI".into(), "CASH".into()],
            },
        ])
    }

    #[test]
    fn whole_values_and_quoted_parts_match() {
        let index = index();
        let found = index.matches("How many rolls of teflon tape were sold?");
        assert!(found
            .iter()
            .any(|m| m.value == "Teflon Tape" && m.strength == 2.0));
        let found = index.matches("sales of 'PVC Pipe' this year");
        assert!(found.iter().any(|m| m.value == "PVC Pipe 1 inch"));
        let found = index.matches("money taken by upi");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].column, "mode");
    }

    #[test]
    fn the_columns_holding_a_value_are_found_whatever_its_case() {
        let index = index();
        assert_eq!(
            index.columns_holding(" teflon tape "),
            vec![("products".to_string(), "prod_name".to_string())]
        );
        assert_eq!(
            index.columns_holding("cash"),
            vec![("payments".to_string(), "mode".to_string())]
        );
        // A part of a value is not the value, and an unindexed one is not found.
        assert!(index.columns_holding("Teflon").is_empty());
        assert!(index.columns_holding("m").is_empty());
    }

    #[test]
    fn short_and_function_word_values_are_not_indexed() {
        let index = index();
        assert!(index.matches("show me the m").is_empty());
    }

    #[test]
    fn apostrophes_inside_words_open_no_literal() {
        assert!(quoted_literals("the customer's bills").is_empty());
        assert_eq!(
            quoted_literals("bills of \"Sharma\" and 'X'"),
            ["Sharma", "X"]
        );
    }
}
