//! The breakdown a question asks for ("per month", "for each supplier"): what the
//! `grouping` rule holds the statement's GROUP BY and PARTITION BY to.

use super::*;

/// A time grain a question asks the answer to be broken down by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Grain {
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl Grain {
    pub(super) fn of(word: &str) -> Option<Grain> {
        let singular = word.strip_suffix('s').unwrap_or(word);
        Some(match singular {
            "day" | "date" => Grain::Day,
            "week" => Grain::Week,
            "month" => Grain::Month,
            "quarter" => Grain::Quarter,
            "year" => Grain::Year,
            _ => return None,
        })
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Grain::Day => "day",
            Grain::Week => "week",
            Grain::Month => "month",
            Grain::Quarter => "quarter",
            Grain::Year => "year",
        }
    }

    /// Whether a grouping expression (lower-cased, as rendered) breaks the rows down by
    /// this grain.
    pub(super) fn grouped_by(self, text: &str) -> bool {
        let text = text.to_lowercase();
        let any = |parts: &[&str]| parts.iter().any(|part| text.contains(part));
        match self {
            Grain::Year => any(&["year", "%y", "yyyy", ", 1, 4)", ",1,4)"]),
            Grain::Month => any(&["month", "%m", "'mm'", "yyyy-mm", ", 1, 7)", ",1,7)"]),
            Grain::Quarter => any(&["quarter", "'q'", "%m", "month"]),
            Grain::Week => any(&["week", "%w", "'iw'", "'ww'"]),
            Grain::Day => any(&[
                "day", "%d", "date(", "::date", "as date", "%j", "_dt", "date", ", 1, 10)",
            ]),
        }
    }
}

/// Words that make "per month" a rate rather than a breakdown ("average revenue per
/// month").
pub(super) const RATE_WORDS: &[&str] = &["average", "avg", "mean", "typical", "typically"];

/// Words after "each" that make no breakdown ("each time", "each of", "each other").
pub(super) const EACH_IDIOMS: &[&str] = &["time", "of", "other", "one", "and", "or"];

/// What the question asks the rows to be broken down by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Breakdown {
    /// Time grains, with the words that asked ("per month").
    pub(super) grains: Vec<(Grain, String)>,
    /// A breakdown by something that is not time ("each supplier", "by category").
    pub(super) other: Option<String>,
}

pub(super) fn breakdown(question: &str) -> Breakdown {
    let words = crate::words::words(question, crate::words::Split::Alphanumeric);
    let rate = words.iter().any(|word| RATE_WORDS.contains(&word.as_str()));
    let mut found = Breakdown::default();
    for pair in words.windows(2) {
        let (lead, word) = (pair[0].as_str(), pair[1].as_str());
        if !matches!(lead, "per" | "each" | "by" | "every") {
            continue;
        }
        match Grain::of(word) {
            Some(grain) => {
                // "per month" under "average" is a rate; "every month" a frequency.
                if !(rate && lead == "per") && lead != "every" {
                    found.grains.push((grain, format!("{lead} {word}")));
                }
            }
            None => {
                // Only "each X": "by X" is as often a passive ("produced by the maker")
                // or a ranking ("top 5 by revenue") as a breakdown.
                let other = lead == "each" && !EACH_IDIOMS.contains(&word);
                if other && year_word(word).is_none() && found.other.is_none() {
                    found.other = Some(format!("{lead} {word}"));
                }
            }
        }
    }
    found
}
