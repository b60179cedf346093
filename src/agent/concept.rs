//! The search for a concept under another name, before askdb says the data is not in
//! the database. When the model twice names a column no table has ("loyalty_tier"),
//! the concept it wanted may still be held, under a name the question did not use:
//! first the columns' own names and the notes' descriptions are searched for its words,
//! then one small model call is shown the candidate tables' columns and asked which
//! holds it (a small model knows synonyms far better than a word list). What it names
//! is accepted only when it is a column of those tables that may be read.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::schema::{SchemaNotes, TableSchema};

/// Where a concept was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoundBy {
    /// A column's name or its description in the notes holds the concept's words.
    NamesAndDescriptions,
    /// The model named the column when shown the tables' columns.
    Model,
}

impl FoundBy {
    pub fn as_str(self) -> &'static str {
        match self {
            FoundBy::NamesAndDescriptions => "the column names and descriptions",
            FoundBy::Model => "the model, shown the tables' columns",
        }
    }
}

/// A column that may hold the concept, as `table.column`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConceptColumn {
    pub table: String,
    pub column: String,
}

impl ConceptColumn {
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.table, self.column)
    }
}

/// Words too common to tell columns apart.
const STOP_WORDS: &[&str] = &[
    "the", "of", "a", "an", "and", "or", "in", "on", "for", "to", "by", "id", "name", "is", "at",
    "per", "total", "count", "number", "no",
];

fn concept_words(text: &str) -> BTreeSet<String> {
    crate::words::words(text, crate::words::Split::Identifier)
        .into_iter()
        .map(|word| word.to_lowercase())
        .filter(|word| word.len() > 1 && !STOP_WORDS.contains(&word.as_str()))
        .map(|word| stem(&word))
        .collect()
}

fn stem(word: &str) -> String {
    word.strip_suffix("ies")
        .map(|head| format!("{head}y"))
        .or_else(|| word.strip_suffix('s').map(str::to_string))
        .unwrap_or_else(|| word.to_string())
}

/// The columns of these tables a query may read: restricted ones are never offered.
pub fn readable_columns<'t>(
    tables: &[&'t TableSchema],
    notes: &SchemaNotes,
) -> Vec<(&'t str, &'t str)> {
    let restricted: BTreeSet<String> = notes
        .restricted_columns
        .iter()
        .map(|column| column.to_lowercase())
        .collect();
    tables
        .iter()
        .flat_map(|table| {
            table
                .columns
                .iter()
                .map(move |column| (table.name.as_str(), column.name.as_str()))
        })
        .filter(|(table, column)| !restricted.contains(&format!("{table}.{column}").to_lowercase()))
        .collect()
}

/// The one readable column whose name or description holds every word of the concept;
/// None when none does or when several do (the search does not guess between them).
pub fn in_names_and_descriptions(
    concept: &str,
    tables: &[&TableSchema],
    notes: &SchemaNotes,
) -> Option<ConceptColumn> {
    let wanted = concept_words(concept);
    if wanted.is_empty() {
        return None;
    }
    let mut found: Vec<ConceptColumn> = readable_columns(tables, notes)
        .into_iter()
        .filter(|(table, column)| {
            let mut held = concept_words(column);
            if let Some(description) = notes
                .tables
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(table))
                .and_then(|(_, note)| {
                    note.columns
                        .iter()
                        .find(|(name, _)| name.eq_ignore_ascii_case(column))
                        .map(|(_, text)| text)
                })
            {
                held.extend(concept_words(description));
            }
            wanted.is_subset(&held)
        })
        .map(|(table, column)| ConceptColumn {
            table: table.to_string(),
            column: column.to_string(),
        })
        .collect();
    found.dedup();
    (found.len() == 1).then(|| found.remove(0))
}

#[derive(Debug, Deserialize)]
struct ColumnReply {
    column: Option<String>,
}

/// The column the model named in its reply (`{"column": "table.column"}` or
/// `{"column": null}`), accepted only when it is a readable column of these tables.
pub fn from_reply(
    reply: &str,
    tables: &[&TableSchema],
    notes: &SchemaNotes,
) -> Option<ConceptColumn> {
    let start = reply.find('{')?;
    let end = reply.rfind('}')?;
    let parsed: ColumnReply = serde_json::from_str(reply.get(start..=end)?).ok()?;
    let named = parsed.column?;
    let named = named.trim().trim_matches('"');
    let (table, column) = match named.rsplit_once('.') {
        Some((table, column)) => (Some(table.trim_matches('"')), column.trim_matches('"')),
        None => (None, named),
    };
    let mut matches = readable_columns(tables, notes)
        .into_iter()
        .filter(|(t, c)| {
            c.eq_ignore_ascii_case(column)
                && table.is_none_or(|table| t.eq_ignore_ascii_case(table))
        });
    let (table, column) = matches.next()?;
    // A bare column name two tables share is not an answer.
    if matches.next().is_some() {
        return None;
    }
    Some(ConceptColumn {
        table: table.to_string(),
        column: column.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::TableNote;

    fn table(name: &str, columns: &[&str]) -> TableSchema {
        TableSchema::for_tests(name, columns, "TEXT", &[])
    }

    fn notes() -> SchemaNotes {
        let mut notes = SchemaNotes {
            restricted_columns: vec!["customers.home_phone".to_string()],
            ..SchemaNotes::default()
        };
        notes.tables.insert(
            "customers".to_string(),
            TableNote {
                description: "People who buy".to_string(),
                columns: [(
                    "seg".to_string(),
                    "The loyalty tier: GOLD, SILVER or NONE".to_string(),
                )]
                .into_iter()
                .collect(),
                holds: None,
            },
        );
        notes
    }

    #[test]
    fn a_concept_is_found_in_a_description_or_a_column_name() {
        let customers = table("customers", &["cust_id", "seg", "home_phone", "city"]);
        let tables = [&customers];
        assert_eq!(
            in_names_and_descriptions("loyalty_tier", &tables, &notes()),
            Some(ConceptColumn {
                table: "customers".to_string(),
                column: "seg".to_string()
            })
        );
        assert_eq!(
            in_names_and_descriptions("cities", &tables, &notes()).map(|c| c.qualified()),
            Some("customers.city".to_string())
        );
        assert_eq!(
            in_names_and_descriptions("birth_date", &tables, &notes()),
            None
        );
        // A restricted column is never offered, even when its name fits.
        assert_eq!(in_names_and_descriptions("phone", &tables, &notes()), None);
    }

    #[test]
    fn two_columns_that_fit_are_not_guessed_between() {
        let matches = table("matches", &["winner_age", "loser_age"]);
        assert_eq!(
            in_names_and_descriptions("age", &[&matches], &SchemaNotes::default()),
            None
        );
    }

    #[test]
    fn the_models_column_is_accepted_only_when_it_exists_and_may_be_read() {
        let customers = table("customers", &["cust_id", "seg", "home_phone"]);
        let bills = table("bills", &["bill_id", "cust_id"]);
        let tables = [&customers, &bills];
        let notes = notes();
        let found = |reply: &str| from_reply(reply, &tables, &notes).map(|c| c.qualified());
        assert_eq!(
            found(r#"{"column": "customers.seg"}"#),
            Some("customers.seg".to_string())
        );
        assert_eq!(
            found("It is this one: {\"column\": \"SEG\"}"),
            Some("customers.seg".to_string())
        );
        assert_eq!(found(r#"{"column": null}"#), None);
        assert_eq!(found(r#"{"column": "customers.loyalty"}"#), None);
        assert_eq!(found(r#"{"column": "customers.home_phone"}"#), None);
        // cust_id is in both tables: a bare name is ambiguous.
        assert_eq!(found(r#"{"column": "cust_id"}"#), None);
        assert_eq!(found("no idea"), None);
    }
}
