//! The words that tell a repair what the empty-result diagnostic found
//! ([`crate::agent::empty`]): stored spellings, and the column that keeps a value a
//! filter compared with another.

/// An empty result whose text filters match only when case and spaces are ignored.
pub const CASE_MISMATCH: &str =
    "no rows; the text filters match only when case and spaces are ignored";

/// An empty result whose text filter's value another column stores.
pub const VALUE_ELSEWHERE: &str =
    "no rows; a text filter compares a column with a value another column stores";

/// Where a filter's value is really kept: "'Africa' is not a value of country.Region
/// (it holds 'Caribbean', 'Southern and Central Asia', ...); it is stored in
/// country.Continent: compare that column instead of country.Region."
pub fn value_elsewhere_fact(
    column: &str,
    value: &str,
    held: &[String],
    places: &[String],
) -> String {
    let held = if held.is_empty() {
        String::new()
    } else {
        format!(" (it holds {}, ...)", held.join(", "))
    };
    format!(
        "'{value}' is not a value of {column}{held}; it is stored in {}: compare that \
         column instead of {column}.",
        places.join(", ")
    )
}

/// The findings of the empty-result probe, in words.
pub fn empty_probe_facts(findings: &[String]) -> String {
    findings.join("\n")
}

/// How a text filter's value is really spelled.
pub fn stored_spelling_fact(
    table: &str,
    column: &str,
    is_like: bool,
    value: &str,
    stored: &[String],
) -> String {
    format!(
        "{table}.{column} {} '{value}' matches the stored value(s) {}.",
        if is_like { "LIKE" } else { "=" },
        stored.join(", ")
    )
}
