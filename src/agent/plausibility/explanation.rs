//! The written answer's checks (`explanation_period`, `explanation_currency`): a year
//! neither the question nor the rows hold is flagged, money in another currency than the
//! notes' is corrected to the declared one.

use super::*;

/// The years a text names on their own (`2025`, `2025-03-31`'s 2025).
pub(super) fn years_in(text: &str) -> BTreeSet<i64> {
    crate::words::words(text, crate::words::Split::Alphanumeric)
        .iter()
        .filter_map(|word| year_word(word))
        .collect()
}

/// The explanation after its checks: money in another currency than the notes' is
/// rewritten in the declared one (the notes are the authority; `$611,706.5` becomes
/// `₹611,706.5` on a rupee database), and a year that neither the question nor the rows
/// hold is a finding. Returns the text to show and the findings.
pub fn check_explanation(
    explanation: &str,
    question: &str,
    rows: &[Vec<JsonValue>],
    notes: &SchemaNotes,
) -> (String, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut text = explanation.to_string();
    if let Some(declared) = &notes.currency {
        let symbol = currency_symbol(declared);
        let mut foreign = BTreeSet::new();
        for (iso, symbols, names) in CURRENCIES {
            if iso.eq_ignore_ascii_case(declared) {
                continue;
            }
            for written in symbols.iter().rev() {
                // A symbol counts before a number only: "$611" but not a lone "$".
                let mut rewritten = String::new();
                let mut rest = text.as_str();
                while let Some(at) = rest.find(written) {
                    let after = &rest[at + written.len()..];
                    let before_number =
                        after.trim_start().starts_with(|c: char| c.is_ascii_digit());
                    rewritten.push_str(&rest[..at]);
                    if before_number {
                        rewritten.push_str(symbol.trim_end());
                        if symbol.ends_with(' ') {
                            rewritten.push(' ');
                        }
                        foreign.insert(*iso);
                        rest = after.trim_start();
                    } else {
                        rewritten.push_str(written);
                        rest = after;
                    }
                }
                rewritten.push_str(rest);
                text = rewritten;
            }
            for name in names.iter() {
                let words: Vec<String> =
                    crate::words::words(&text, crate::words::Split::Alphanumeric);
                if words.iter().any(|word| word == name) {
                    foreign.insert(*iso);
                    text = replace_word(&text, name, &declared.to_uppercase());
                }
            }
        }
        if !foreign.is_empty() {
            findings.push(Finding::new(
                Check::ExplanationCurrency,
                format!(
                    "the written answer gave money in {}; the notes say it is {declared}, so it \
                     is shown in {declared}",
                    foreign.into_iter().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    let mut supported = years_in(question);
    for value in rows.iter().flatten() {
        match value {
            JsonValue::String(value) => supported.extend(years_in(value)),
            JsonValue::Number(number) => supported.extend(number.as_i64()),
            _ => {}
        }
    }
    if let Some(span) = named_period(question) {
        supported.extend(
            years_in(&text)
                .into_iter()
                .filter(|year| span.contains(*year)),
        );
    }
    let unsupported: BTreeSet<i64> = years_in(&text).difference(&supported).copied().collect();
    if !unsupported.is_empty() {
        findings.push(Finding::new(
            Check::ExplanationPeriod,
            format!(
                "the written answer names {}, which neither the question nor the rows hold",
                list(&unsupported)
            ),
        ));
    }
    (text, findings)
}

/// `text` with every whole-word, case-insensitive `word` replaced by `by`.
pub(super) fn replace_word(text: &str, word: &str, by: &str) -> String {
    let mut out = String::new();
    let mut current = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() {
            current.push(c);
            continue;
        }
        out.push_str(if current.eq_ignore_ascii_case(word) {
            by
        } else {
            &current
        });
        current.clear();
        out.push(c);
    }
    out.push_str(if current.eq_ignore_ascii_case(word) {
        by
    } else {
        &current
    });
    out
}
