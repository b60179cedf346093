//! The comparator: execution accuracy from result sets, never from SQL text.
//!
//! [`results_match`] decides whether a predicted result set answers the question as the
//! gold result set does. Both results should come from the same read-only connection, so
//! that the only differences left are the ones the rules below forgive or catch. The rules,
//! in the order they are applied:
//!
//! 1. **Empty gold.** When the gold result has no rows, the prediction matches exactly when
//!    it has no rows either, whatever its columns (a known blind spot: any query that
//!    returns nothing "answers" a question whose answer is nothing).
//! 2. **Columns.** A prediction with fewer columns than the gold never matches.
//! 3. **Row count.** The row counts must be equal (rows form a multiset: duplicates count,
//!    so `[1, 1, 2]` differs from `[1, 2]` and from `[1, 2, 2]`).
//! 4. **Column mapping.** Column names are ignored. Each gold column must be matched by a
//!    distinct predicted column (an injective mapping; extra predicted columns are
//!    tolerated, and columns may come in any order) such that the predicted rows, projected
//!    onto the mapped columns, equal the gold rows *row for row*: as multisets of rows, or
//!    as sequences when [`CompareOptions::ordered`] is set. A predicted column is a
//!    candidate for a gold column only when its sorted multiset of values equals the gold
//!    column's; the search tries the candidate at the same position first, then the others
//!    in order, assigns the gold columns with the fewest candidates first, checks every
//!    partial assignment (the projection onto the columns assigned so far must already
//!    match) and backtracks; of predicted columns identical row for row it tries only one
//!    per gold column, since they are interchangeable. A gold column without any candidate
//!    fails rule `column_values`; candidates without a working assignment fail rule `rows`.
//!    The search gives up after [`MAX_SEARCH_STEPS`] partial assignments and reports a
//!    mismatch (rule `search_cap`); real results never come close.
//! 5. **Order.** Row order is ignored unless [`CompareOptions::ordered`] is set; the caller
//!    sets it when the gold query orders its outermost result ([`gold_orders`]). When an
//!    ordered comparison fails but an unordered one would succeed, the reason says so
//!    (rule `order`). Blind spot: when the gold orders by a key with ties, the order of the
//!    tied rows is the database's choice, and a prediction listing them otherwise fails.
//!
//! Cell values are compared after normalisation:
//!
//! - **Numbers** compare by value, rounded to [`CompareOptions::decimals`] places
//!   (default 2, at most 18): a value `x` becomes the integer `round(x * 10^decimals)`,
//!   rounding half away from zero. Integers (JSON integers, and strings of digits) are
//!   scaled exactly in 128-bit arithmetic; every other number goes through an IEEE-754
//!   double (`x * 10^decimals`, then rounded), so `12 == 12.0`, `1047484 == 1047484.00` and
//!   `12.344 == 12.341` at two places. Consequences, pinned by tests: numbers that differ
//!   only beyond the precision match; two values a hair apart on either side of a rounding
//!   boundary (`0.285` and `0.28500000000000003`) do not. Integers beyond 2^53 compared
//!   with doubles may differ by the double's rounding. A double too large for the scaled
//!   integer (beyond about 1.7e38 after scaling) is compared by its exact bits.
//! - **Numeric strings** compare equal to numbers. PostgreSQL NUMERIC values may arrive
//!   as JSON strings where SQLite returns REAL, so a string matching `-?[0-9]+(\.[0-9]+)?`
//!   (no spaces, no `+`, no exponent, no `NaN`) is read as that number: `"1047484.00"`
//!   equals `1047484`. Blind spot: a text column holding digits (`"007"`, a zip code)
//!   equals the number 7.
//! - **Booleans** are the numbers 1 and 0 (SQLite has no booleans): `true == 1`,
//!   `false == 0`, `true == "1"`.
//! - **NULL** equals NULL and nothing else (not 0, not `""`, not the text `"NULL"`).
//! - **Text** compares exactly: case-sensitive and whitespace-sensitive
//!   (`"Paid" != "paid"`, `"a " != "a"`).
//! - **Dates and timestamps** arrive as text and compare as text: `"2024-01-05"` differs
//!   from `"2024-01-05 00:00:00"` and from `"2024-01-05T00:00:00"`.
//! - **Arrays and objects** (PostgreSQL arrays, JSON columns) compare by their JSON text.
//!
//! The width of a result set is the larger of its number of column names and its longest
//! row; a missing cell in a shorter row reads as NULL (the gate never produces ragged rows;
//! this only keeps a malformed input from panicking).

mod cell;
mod order;
mod search;

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value as JsonValue;

use crate::gate::QueryResult;
use cell::{Cell, Table};
pub use order::gold_orders;
use search::{Search, SearchResult};

/// The most partial column assignments the mapping search tries before giving up.
pub const MAX_SEARCH_STEPS: usize = 10_000;

/// The default number of decimal places numbers are rounded to.
pub const DEFAULT_DECIMALS: u32 = 2;

/// The most decimal places honoured (10^18 still leaves room for any 64-bit integer in
/// 128-bit arithmetic).
pub const MAX_DECIMALS: u32 = 18;

/// Columns and rows of one query result.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResultSet {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<JsonValue>>,
}

impl ResultSet {
    pub fn new(columns: Vec<String>, rows: Vec<Vec<JsonValue>>) -> Self {
        ResultSet { columns, rows }
    }
}

impl From<QueryResult> for ResultSet {
    fn from(result: QueryResult) -> Self {
        ResultSet {
            columns: result.columns,
            rows: result.rows,
        }
    }
}

impl From<&QueryResult> for ResultSet {
    fn from(result: &QueryResult) -> Self {
        ResultSet {
            columns: result.columns.clone(),
            rows: result.rows.clone(),
        }
    }
}

/// How to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompareOptions {
    /// Respect row order: set it when the gold query orders its outermost result
    /// ([`gold_orders`]).
    pub ordered: bool,
    /// Decimal places numbers are rounded to before comparing (capped at [`MAX_DECIMALS`]).
    pub decimals: u32,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            ordered: false,
            decimals: DEFAULT_DECIMALS,
        }
    }
}

/// The rule a prediction failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Gold and prediction have different numbers of rows.
    RowCount,
    /// The prediction has fewer columns than the gold.
    FewerColumns,
    /// A gold column has no predicted column holding the same multiset of values.
    ColumnValues,
    /// Every gold column has candidates, but no assignment matches row for row.
    Rows,
    /// The rows match as a multiset but not in the gold's order.
    Order,
    /// The column-mapping search reached [`MAX_SEARCH_STEPS`].
    SearchCap,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::RowCount => "row_count",
            Rule::FewerColumns => "fewer_columns",
            Rule::ColumnValues => "column_values",
            Rule::Rows => "rows",
            Rule::Order => "order",
            Rule::SearchCap => "search_cap",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of a comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    Match,
    /// The rule that failed and a short reason for reports.
    Mismatch {
        rule: Rule,
        reason: String,
    },
}

impl Verdict {
    pub fn is_match(&self) -> bool {
        matches!(self, Verdict::Match)
    }

    /// The failed rule, None on a match.
    pub fn rule(&self) -> Option<Rule> {
        match self {
            Verdict::Match => None,
            Verdict::Mismatch { rule, .. } => Some(*rule),
        }
    }

    /// The short reason, None on a match.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Verdict::Match => None,
            Verdict::Mismatch { reason, .. } => Some(reason),
        }
    }

    fn mismatch(rule: Rule, reason: impl Into<String>) -> Self {
        Verdict::Mismatch {
            rule,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Match => f.write_str("match"),
            Verdict::Mismatch { rule, reason } => write!(f, "mismatch ({rule}): {reason}"),
        }
    }
}

/// A key equal for two result sets exactly when they hold the same rows up to row order
/// and column order, with cells normalised as [`results_match`] normalises them (numbers
/// at two decimals). Candidates with equal keys gave the same answer: the agent's
/// execution-guided vote groups by it. Column names are ignored. Columns are put in a
/// canonical order (by their sorted values), then the rows are sorted, so the rows keep
/// their association.
pub fn canonical_key(result: &ResultSet) -> String {
    let table = Table::new(result, 10_i128.pow(2));
    let mut order: Vec<usize> = (0..table.width).collect();
    order.sort_by_key(|&index| table.sorted_column(index));
    let mut rows: Vec<Vec<&Cell>> = table
        .rows
        .iter()
        .map(|row| order.iter().map(|&index| &row[index]).collect())
        .collect();
    rows.sort();
    format!("{}:{rows:?}", table.width)
}

/// Compares a predicted result with the gold result under the rules of the module doc.
pub fn results_match(gold: &ResultSet, predicted: &ResultSet, options: &CompareOptions) -> Verdict {
    compare_with_cap(gold, predicted, options, MAX_SEARCH_STEPS)
}

fn compare_with_cap(
    gold: &ResultSet,
    predicted: &ResultSet,
    options: &CompareOptions,
    max_steps: usize,
) -> Verdict {
    let scale = 10i128.pow(options.decimals.min(MAX_DECIMALS));
    let gold_table = Table::new(gold, scale);
    let predicted_table = Table::new(predicted, scale);

    if gold_table.rows.is_empty() {
        return if predicted_table.rows.is_empty() {
            Verdict::Match
        } else {
            Verdict::mismatch(
                Rule::RowCount,
                format!(
                    "gold has no rows, predicted has {}",
                    predicted_table.rows.len()
                ),
            )
        };
    }
    if predicted_table.width < gold_table.width {
        return Verdict::mismatch(
            Rule::FewerColumns,
            format!(
                "gold has {} columns, predicted only {}",
                gold_table.width, predicted_table.width
            ),
        );
    }
    if predicted_table.rows.len() != gold_table.rows.len() {
        return Verdict::mismatch(
            Rule::RowCount,
            format!(
                "gold has {} rows, predicted {}",
                gold_table.rows.len(),
                predicted_table.rows.len()
            ),
        );
    }

    let predicted_columns: Vec<Vec<&Cell>> = (0..predicted_table.width)
        .map(|index| predicted_table.sorted_column(index))
        .collect();
    let mut candidates: Vec<Vec<usize>> = Vec::with_capacity(gold_table.width);
    for gold_index in 0..gold_table.width {
        let gold_column = gold_table.sorted_column(gold_index);
        // The same position first, so an answer in the gold's own layout is found at once.
        let mut found: Vec<usize> = Vec::new();
        if predicted_columns[gold_index] == gold_column {
            found.push(gold_index);
        }
        found.extend(
            (0..predicted_table.width)
                .filter(|&index| index != gold_index && predicted_columns[index] == gold_column),
        );
        if found.is_empty() {
            let name = gold.columns.get(gold_index).map_or("?", String::as_str);
            return Verdict::mismatch(
                Rule::ColumnValues,
                format!(
                    "no predicted column holds the values of gold column {} ({name})",
                    gold_index + 1
                ),
            );
        }
        candidates.push(found);
    }

    let mut search = Search::new(
        &gold_table,
        &predicted_table,
        &candidates,
        options.ordered,
        max_steps,
    );
    match search.run() {
        SearchResult::Found => Verdict::Match,
        SearchResult::CapReached => Verdict::mismatch(
            Rule::SearchCap,
            format!("no column mapping found within {max_steps} steps"),
        ),
        SearchResult::NotFound if options.ordered => {
            let mut unordered =
                Search::new(&gold_table, &predicted_table, &candidates, false, max_steps);
            match unordered.run() {
                SearchResult::Found => {
                    Verdict::mismatch(Rule::Order, "the rows match, but not in the gold's order")
                }
                SearchResult::CapReached => Verdict::mismatch(
                    Rule::SearchCap,
                    format!("no column mapping found within {max_steps} steps"),
                ),
                SearchResult::NotFound => Verdict::mismatch(
                    Rule::Rows,
                    "the columns hold the gold's values, but the rows differ",
                ),
            }
        }
        SearchResult::NotFound => Verdict::mismatch(
            Rule::Rows,
            "the columns hold the gold's values, but the rows differ",
        ),
    }
}

#[cfg(test)]
mod tests;
