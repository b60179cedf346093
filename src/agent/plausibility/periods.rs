//! The periods a question names, in whole years: "in 2025", "between 2024 and 2025",
//! "April 2024 to March 2025", "since 2024" (the `period_*` and `table_period` rules
//! compare them with the query's filters, the rows and the tables' notes).

use super::*;

/// A span of whole years, both ends inclusive (`i64::MIN` / `i64::MAX`: open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct YearSpan {
    pub from: i64,
    pub to: i64,
}

impl YearSpan {
    pub(super) fn contains(self, year: i64) -> bool {
        self.from <= year && year <= self.to
    }

    /// The years among `years` that lie outside the span.
    pub(super) fn outside<'y>(self, years: impl IntoIterator<Item = &'y i64>) -> BTreeSet<i64> {
        years
            .into_iter()
            .copied()
            .filter(|year| !self.contains(*year))
            .collect()
    }

    pub(super) fn overlaps(self, from: i64, to: i64) -> bool {
        self.from <= to && from <= self.to
    }
}

impl std::fmt::Display for YearSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.from, self.to) {
            (from, to) if from == to => write!(f, "{from}"),
            (i64::MIN, to) => write!(f, "up to {to}"),
            (from, i64::MAX) => write!(f, "{from} on"),
            (from, to) => write!(f, "{from} to {to}"),
        }
    }
}

pub(super) const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
];

/// Words after which a year is a period ("in 2025", "dated 2025", "March 2025").
pub(super) const PERIOD_WORDS: &[&str] = &[
    "in", "of", "during", "for", "since", "from", "between", "and", "to", "until", "before",
    "after", "year", "dated", "through", "till", "or", "both", "either",
];

pub(super) fn year_word(word: &str) -> Option<i64> {
    let plain = word.strip_suffix("s").unwrap_or(word);
    let is_year = plain.len() == 4
        && plain.chars().all(|c| c.is_ascii_digit())
        && (plain.starts_with("19") || plain.starts_with("20"));
    if is_year {
        plain.parse().ok()
    } else {
        None
    }
}

/// The period of years a question names, or None when it names none this rule can read
/// ("last quarter", "over 2000 rupees" and "our 2026 revenue" name none).
pub fn named_period(question: &str) -> Option<YearSpan> {
    let words = crate::words::words(question, crate::words::Split::Alphanumeric);
    let mut years = Vec::new();
    let (mut open_before, mut open_after, mut ends_before) = (false, false, None);
    for (index, word) in words.iter().enumerate() {
        let Some(year) = year_word(word) else {
            continue;
        };
        let Some(mut lead) = index.checked_sub(1).and_then(|i| words.get(i)) else {
            continue;
        };
        if !(PERIOD_WORDS.contains(&lead.as_str()) || MONTHS.contains(&lead.as_str())) {
            continue;
        }
        // "after the year 2008": the word before "year" says which way the period runs.
        if lead == "year" {
            let before: Vec<&String> = words[..index - 1].iter().rev().take(2).collect();
            if let Some(open) = before
                .into_iter()
                .find(|word| matches!(word.as_str(), "since" | "after" | "before" | "until"))
            {
                lead = open;
            }
        }
        match lead.as_str() {
            "since" | "after" => open_after = true,
            "before" => {
                open_before = true;
                ends_before = Some(year - 1);
            }
            "until" | "till" => open_before = true,
            _ => {}
        }
        years.push(year);
    }
    let (&first, &last) = (years.iter().min()?, years.iter().max()?);
    let mut span = YearSpan {
        from: first,
        to: last,
    };
    if years.len() == 1 && words.iter().any(|word| word == "from") && !open_before {
        open_after = true;
    }
    if open_after {
        span.to = i64::MAX;
    }
    if open_before {
        span.from = i64::MIN;
        if years.len() == 1 {
            if let Some(end) = ends_before {
                span.to = end;
            }
        }
    }
    Some(span)
}
