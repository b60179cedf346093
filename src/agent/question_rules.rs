//! Rules about what a question asks for, applied before any model call: a question that
//! names a restricted column ("the phone numbers of our customers") is declined with
//! the reason, because the model never sees that column and would otherwise invent a
//! stand-in; a question that names its own period ("in 2025") is told so, because the
//! glossary's "recent" and "this year" must not narrow a period the user already chose.

use crate::schema::SchemaNotes;

/// Lower-case words of a text, split on anything but letters and digits.
fn words(text: &str) -> Vec<String> {
    crate::words::words(text, crate::words::Split::Alphanumeric)
}

/// Whether `word` is `stem` or a plural of it ("phones", "addresses").
fn names(word: &str, stem: &str) -> bool {
    word == stem || word.strip_suffix('s') == Some(stem) || word.strip_suffix("es") == Some(stem)
}

/// The restricted column a question asks for, written `table.column`, if any. A column
/// counts as named when every word of its name (split on `_`) appears in the question,
/// singular or plural.
pub fn restricted_column_named(question: &str, notes: &SchemaNotes) -> Option<String> {
    let asked = words(question);
    notes.restricted_columns.iter().find_map(|entry| {
        let column = entry.rsplit('.').next().unwrap_or(entry);
        let parts: Vec<String> = column
            .to_lowercase()
            .split('_')
            .filter(|part| !part.is_empty())
            .map(str::to_string)
            .collect();
        let named = !parts.is_empty()
            && parts
                .iter()
                .all(|part| asked.iter().any(|word| names(word, part)));
        named.then(|| entry.clone())
    })
}

/// Verbs that open a request to change data ("Delete the cancelled orders", "Set every
/// unpaid bill to paid"). "Add" is left out: "add up the totals" is a read.
const WRITE_VERBS: &[&str] = &[
    "delete", "remove", "drop", "update", "insert", "create", "truncate", "alter", "erase", "wipe",
    "modify", "rename", "set", "change", "mark", "cancel",
];

/// Why a question is a request to change data, when its first word is a verb that
/// changes data; None for a question (a read).
pub fn write_request(question: &str) -> Option<String> {
    let first = words(question).into_iter().next()?;
    WRITE_VERBS
        .contains(&first.as_str())
        .then(|| format!("\"{first} ...\" asks to change data, and askdb only reads data"))
}

/// Words that put a year after them in the role of a period ("in 2025", "since 2024").
const PERIOD_WORDS: &[&str] = &[
    "in", "of", "during", "for", "since", "from", "between", "and", "to", "until", "before",
    "after", "year",
];

/// An assumption for a question that names its own period: a four-digit year from
/// 1900 to 2099 after a period word ("in 2025"; "over 2000 rupees" is no year). None
/// when no year is named.
pub fn named_period_assumption(question: &str) -> Option<String> {
    let asked = words(question);
    let years: Vec<String> = asked
        .windows(2)
        .filter(|pair| PERIOD_WORDS.contains(&pair[0].as_str()))
        .map(|pair| pair[1].clone())
        .filter(|word| {
            word.len() == 4
                && word.chars().all(|c| c.is_ascii_digit())
                && (word.starts_with("19") || word.starts_with("20"))
        })
        .collect();
    if years.is_empty() {
        return None;
    }
    Some(format!(
        "the question names its period ({}): filter on exactly that period; glossary words \
         such as \"recent\" or \"this year\" do not narrow it",
        years.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_to_change_data_are_told_from_questions() {
        assert!(write_request("Delete the cancelled purchase orders.").is_some());
        assert!(write_request("Set every unpaid bill to paid.").is_some());
        assert!(write_request("How many bills were deleted?").is_none());
        assert!(write_request("Add up the totals per month").is_none());
        assert!(write_request("Which settings changed?").is_none());
    }

    fn notes() -> SchemaNotes {
        SchemaNotes {
            restricted_columns: vec![
                "customers.phone".to_string(),
                "customers.address".to_string(),
                "staff.home_address".to_string(),
            ],
            ..SchemaNotes::default()
        }
    }

    #[test]
    fn a_question_naming_a_restricted_column_is_caught_singular_or_plural() {
        assert_eq!(
            restricted_column_named("List the phone numbers of all our customers.", &notes()),
            Some("customers.phone".to_string())
        );
        assert_eq!(
            restricted_column_named("Which customers share addresses?", &notes()),
            Some("customers.address".to_string())
        );
        assert_eq!(
            restricted_column_named("Where is each staff member's home address?", &notes()),
            Some("customers.address".to_string()),
            "the first restricted column that matches is reported"
        );
    }

    #[test]
    fn ordinary_questions_and_partial_words_are_not_caught() {
        assert_eq!(
            restricted_column_named("How many customers do we have?", &notes()),
            None
        );
        assert_eq!(
            restricted_column_named("Which customers bought a telephone?", &notes()),
            None,
            "telephone is not the word phone"
        );
        let only_home = SchemaNotes {
            restricted_columns: vec!["staff.home_address".to_string()],
            ..SchemaNotes::default()
        };
        assert_eq!(
            restricted_column_named("Who lives at home?", &only_home),
            None,
            "every word of the column name must appear"
        );
    }

    #[test]
    fn a_named_year_becomes_an_assumption_and_other_numbers_do_not() {
        let assumption =
            named_period_assumption("What was our total revenue in 2025?").expect("a year");
        assert!(assumption.contains("(2025)"), "{assumption}");
        assert!(named_period_assumption("Top 5 products by units sold").is_none());
        assert!(named_period_assumption("Bills over 2000 rupees").is_none());
        let span = named_period_assumption("Revenue between 2024 and 2025").expect("years");
        assert!(span.contains("(2024, 2025)"), "{span}");
        assert!(named_period_assumption("Recent bills").is_none());
    }
}
