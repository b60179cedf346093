//! The answer's checks, with no model involved: every number in the model's
//! explanation is looked for in the result rows (a number that is not there is flagged,
//! never shown as fact), and the chart is chosen by rules from the result's shape.

use serde::{Deserialize, Serialize};
use serde_json::Value as JsonValue;

/// The kind of chart the page draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChartKind {
    Bar,
    Line,
    Scatter,
    /// No chart: the table says it better.
    None,
}

impl ChartKind {
    pub const ALL: [ChartKind; 4] = [
        ChartKind::Bar,
        ChartKind::Line,
        ChartKind::Scatter,
        ChartKind::None,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ChartKind::Bar => "bar",
            ChartKind::Line => "line",
            ChartKind::Scatter => "scatter",
            ChartKind::None => "none",
        }
    }
}

impl std::fmt::Display for ChartKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A chart the page can draw from the rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartSpec {
    pub kind: ChartKind,
    /// The column on the x axis (categories or time), when there is a chart.
    pub x: Option<String>,
    /// The numeric columns plotted.
    pub y: Vec<String>,
    /// Why this kind, in a few words.
    pub reason: String,
}

impl ChartSpec {
    fn none(reason: &str) -> Self {
        ChartSpec {
            kind: ChartKind::None,
            x: None,
            y: Vec::new(),
            reason: reason.to_string(),
        }
    }
}

/// More categories than this make a bar chart unreadable; the table is better.
const MAX_BAR_CATEGORIES: usize = 30;

#[derive(Debug, Clone, Copy, PartialEq)]
enum ColumnKind {
    Number,
    Time,
    Text,
    Empty,
}

fn is_time_text(text: &str) -> bool {
    // 2025, 2025-03, 2025-03-31, 2025-03-31 10:00:00, 2025-03-31T10:00:00
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        range
            .clone()
            .all(|i| bytes.get(i).is_some_and(u8::is_ascii_digit))
    };
    if text.len() == 4 {
        return digits(0..4) && (text.starts_with("19") || text.starts_with("20"));
    }
    text.len() >= 7 && digits(0..4) && bytes.get(4) == Some(&b'-') && digits(5..7)
}

fn column_kind(name: &str, rows: &[Vec<JsonValue>], index: usize) -> ColumnKind {
    let values: Vec<&JsonValue> = rows
        .iter()
        .filter_map(|row| row.get(index))
        .filter(|value| !value.is_null())
        .collect();
    if values.is_empty() {
        return ColumnKind::Empty;
    }
    let lowered = name.to_lowercase();
    let time_name = [
        "date", "month", "year", "day", "week", "_dt", "time", "period",
    ]
    .iter()
    .any(|part| lowered.contains(part));
    if values.iter().all(|value| match value {
        JsonValue::String(text) => is_time_text(text),
        JsonValue::Number(number) => {
            time_name
                && number
                    .as_i64()
                    .is_some_and(|year| (1900..=2100).contains(&year))
        }
        _ => false,
    }) {
        return ColumnKind::Time;
    }
    if values.iter().all(|value| value.is_number()) {
        return ColumnKind::Number;
    }
    ColumnKind::Text
}

/// Chooses a chart from the result's shape: one category and numbers -> bar, time and
/// numbers -> line, two numbers -> scatter, a single value or anything else -> none.
pub fn choose_chart(columns: &[String], rows: &[Vec<JsonValue>]) -> ChartSpec {
    if rows.is_empty() {
        return ChartSpec::none("no rows");
    }
    if rows.len() == 1 && columns.len() == 1 {
        return ChartSpec::none("a single value");
    }
    let kinds: Vec<ColumnKind> = columns
        .iter()
        .enumerate()
        .map(|(index, name)| column_kind(name, rows, index))
        .collect();
    let numbers: Vec<String> = columns
        .iter()
        .zip(&kinds)
        .filter(|(_, kind)| **kind == ColumnKind::Number)
        .map(|(name, _)| name.clone())
        .collect();
    let first_of = |wanted: ColumnKind| {
        columns
            .iter()
            .zip(&kinds)
            .find(|(_, kind)| **kind == wanted)
            .map(|(name, _)| name.clone())
    };
    let others = columns.len() - numbers.len();
    if numbers.is_empty() {
        return ChartSpec::none("no numeric column");
    }
    if let Some(time) = first_of(ColumnKind::Time) {
        if others == 1 && rows.len() >= 2 {
            return ChartSpec {
                kind: ChartKind::Line,
                x: Some(time),
                y: numbers,
                reason: "time and numbers".to_string(),
            };
        }
    }
    if let Some(category) = first_of(ColumnKind::Text) {
        if others == 1 && rows.len() <= MAX_BAR_CATEGORIES {
            return ChartSpec {
                kind: ChartKind::Bar,
                x: Some(category),
                y: numbers,
                reason: "one category and numbers".to_string(),
            };
        }
        if others == 1 {
            return ChartSpec::none("too many categories for a bar chart");
        }
    }
    if others == 0 && numbers.len() == 2 && rows.len() >= 3 {
        return ChartSpec {
            kind: ChartKind::Scatter,
            x: Some(numbers[0].clone()),
            y: vec![numbers[1].clone()],
            reason: "two numbers".to_string(),
        };
    }
    if rows.len() == 1 {
        return ChartSpec::none("a single row");
    }
    ChartSpec::none("no chart fits this shape")
}

/// Numbers written in a text: digits with optional thousands separators, a decimal part
/// and a sign. Percent signs and currency words are left to the reader.
pub fn numbers_in(text: &str) -> Vec<(String, f64)> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut index = 0;
    while index < chars.len() {
        // Digits glued to a word ("B25", "B25-000123", "x_2") belong to an identifier.
        let glued = |at: usize| chars[at].is_alphanumeric() || chars[at] == '_';
        let starts_number = chars[index].is_ascii_digit()
            && (index == 0
                || !(glued(index - 1)
                    || (chars[index - 1] == '-' && index >= 2 && glued(index - 2))));
        if !starts_number {
            index += 1;
            continue;
        }
        let start = index;
        while index < chars.len()
            && (chars[index].is_ascii_digit()
                || ((chars[index] == ',' || chars[index] == '.')
                    && chars.get(index + 1).is_some_and(char::is_ascii_digit)))
        {
            index += 1;
        }
        // A word stuck to the digits ("B25-000123", "2nd") is an identifier, not a number.
        if index < chars.len() && (chars[index].is_alphabetic() || chars[index] == '_') {
            while index < chars.len() && chars[index].is_alphanumeric() {
                index += 1;
            }
            continue;
        }
        let written: String = chars[start..index].iter().collect();
        let plain: String = written.chars().filter(|c| *c != ',').collect();
        if let Ok(value) = plain.parse::<f64>() {
            found.push((written, value));
        }
    }
    found
}

fn close(a: f64, b: f64) -> bool {
    if a == b {
        return true;
    }
    // Written numbers are often rounded: accept a match at the precision written
    // (two decimals, or whole numbers) or within half a unit of the last digit.
    (a - b).abs() < 0.005 || (a.round() == b.round() && (a - b).abs() < 0.5 && a.fract() == 0.0)
}

/// Numbers in `explanation` that are found neither in the rows, nor in the row count,
/// nor in the question: the ones to flag.
pub fn unverified_numbers(
    explanation: &str,
    question: &str,
    rows: &[Vec<JsonValue>],
) -> Vec<String> {
    let mut known: Vec<f64> = vec![rows.len() as f64];
    for row in rows {
        for value in row {
            match value {
                JsonValue::Number(number) => known.extend(number.as_f64()),
                JsonValue::String(text) => {
                    known.extend(numbers_in(text).into_iter().map(|(_, v)| v))
                }
                _ => {}
            }
        }
    }
    known.extend(numbers_in(question).into_iter().map(|(_, value)| value));
    let mut unverified = Vec::new();
    for (written, value) in numbers_in(explanation) {
        if !known.iter().any(|known| close(value, *known)) && !unverified.contains(&written) {
            unverified.push(written);
        }
    }
    unverified
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cols(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn charts_follow_the_shape_of_the_result() {
        let single = choose_chart(&cols(&["n"]), &[vec![json!(1400)]]);
        assert_eq!(single.kind, ChartKind::None);
        let bar = choose_chart(
            &cols(&["status", "bills"]),
            &[
                vec![json!("PAID"), json!(1300)],
                vec![json!("VOID"), json!(46)],
            ],
        );
        assert_eq!(
            (bar.kind, bar.x.as_deref()),
            (ChartKind::Bar, Some("status"))
        );
        let line = choose_chart(
            &cols(&["month", "revenue"]),
            &[
                vec![json!("2025-01"), json!(10.5)],
                vec![json!("2025-02"), json!(12)],
            ],
        );
        assert_eq!(line.kind, ChartKind::Line);
        let years = choose_chart(
            &cols(&["year", "revenue"]),
            &[vec![json!(2025), json!(10.5)], vec![json!(2026), json!(12)]],
        );
        assert_eq!(years.kind, ChartKind::Line);
        let scatter = choose_chart(
            &cols(&["price", "qty"]),
            &[
                vec![json!(1), json!(2)],
                vec![json!(2), json!(3)],
                vec![json!(3), json!(5)],
            ],
        );
        assert_eq!(scatter.kind, ChartKind::Scatter);
        let text_only = choose_chart(&cols(&["name"]), &[vec![json!("a")], vec![json!("b")]]);
        assert_eq!(text_only.kind, ChartKind::None);
        assert_eq!(choose_chart(&cols(&["n"]), &[]).kind, ChartKind::None);
    }

    #[test]
    fn numbers_are_read_as_written() {
        let found: Vec<f64> =
            numbers_in("Revenue was 1,047,484.00 over 701 bills (B25-000123), 3rd best.")
                .into_iter()
                .map(|(_, value)| value)
                .collect();
        assert_eq!(found, vec![1_047_484.0, 701.0]);
    }

    #[test]
    fn numbers_missing_from_the_rows_are_flagged() {
        let rows = vec![
            vec![json!("PAID"), json!(1300)],
            vec![json!("VOID"), json!(46.25)],
        ];
        assert!(
            unverified_numbers("1,300 bills were paid and 46.25 voided.", "", &rows).is_empty()
        );
        assert_eq!(
            unverified_numbers("1300 paid, 99 voided, in 2025.", "How many in 2025?", &rows),
            vec!["99".to_string()]
        );
        // The row count itself is a fact of the result.
        assert!(unverified_numbers("There are 2 statuses.", "", &rows).is_empty());
    }
}
