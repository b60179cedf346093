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

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value as JsonValue;
use sqlparser::ast::{SetExpr, Statement};
use sqlparser::dialect::Dialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};

use crate::gate::{QueryResult, SqlDialect};

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

/// A cell after normalisation; equal cells are equal answers. The derived order is only
/// used to sort multisets, it means nothing else.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Cell {
    Null,
    /// The value times 10^decimals, rounded half away from zero.
    Scaled(i128),
    /// A double too large to scale, by its bits (normalised so -0.0 never gets here).
    Huge(u64),
    Text(String),
    /// An array or object, by its JSON text.
    Json(String),
}

fn normalise(value: &JsonValue, scale: i128) -> Cell {
    match value {
        JsonValue::Null => Cell::Null,
        JsonValue::Bool(flag) => Cell::Scaled(if *flag { scale } else { 0 }),
        JsonValue::Number(number) => {
            if let Some(integer) = number.as_i64() {
                scale_integer(i128::from(integer), scale)
            } else if let Some(integer) = number.as_u64() {
                scale_integer(i128::from(integer), scale)
            } else {
                match number.as_f64() {
                    Some(double) if double.is_finite() => scale_double(double, scale),
                    // Only reachable with serde_json's arbitrary precision: keep the text.
                    _ => Cell::Text(number.to_string()),
                }
            }
        }
        JsonValue::String(text) => {
            numeric_text(text, scale).unwrap_or_else(|| Cell::Text(text.clone()))
        }
        JsonValue::Array(_) | JsonValue::Object(_) => Cell::Json(value.to_string()),
    }
}

fn scale_integer(integer: i128, scale: i128) -> Cell {
    match integer.checked_mul(scale) {
        Some(scaled) => Cell::Scaled(scaled),
        // Precision is lost here, but only for integers beyond 1.7e38 / 10^decimals.
        None => scale_double(integer as f64, scale),
    }
}

fn scale_double(double: f64, scale: i128) -> Cell {
    let rounded = (double * scale as f64).round();
    // i128::MAX is about 1.7e38; stay clear of the edge, where `as` would saturate.
    if rounded.is_finite() && rounded.abs() < 1.0e38 {
        Cell::Scaled(rounded as i128)
    } else {
        Cell::Huge(double.to_bits())
    }
}

/// Reads `-?[0-9]+(\.[0-9]+)?` as a number; anything else stays text.
fn numeric_text(text: &str, scale: i128) -> Option<Cell> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = match unsigned.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (unsigned, None),
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit());
    if !digits(whole) || !fraction.is_none_or(digits) {
        return None;
    }
    if fraction.is_none() {
        if let Ok(integer) = text.parse::<i128>() {
            return Some(scale_integer(integer, scale));
        }
    }
    let double = text.parse::<f64>().ok()?;
    if !double.is_finite() {
        return None;
    }
    Some(scale_double(double, scale))
}

/// A result set as normalised cells, every row padded to the same width.
struct Table {
    width: usize,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    fn new(result: &ResultSet, scale: i128) -> Self {
        let longest_row = result.rows.iter().map(Vec::len).max().unwrap_or(0);
        let width = result.columns.len().max(longest_row);
        let rows = result
            .rows
            .iter()
            .map(|row| {
                (0..width)
                    .map(|index| {
                        row.get(index)
                            .map_or(Cell::Null, |value| normalise(value, scale))
                    })
                    .collect()
            })
            .collect();
        Table { width, rows }
    }

    fn sorted_column(&self, index: usize) -> Vec<&Cell> {
        let mut values: Vec<&Cell> = self.rows.iter().map(|row| &row[index]).collect();
        values.sort();
        values
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

enum SearchResult {
    Found,
    NotFound,
    CapReached,
}

/// Backtracking search for an injective mapping from gold columns to predicted columns.
struct Search<'a> {
    gold: &'a Table,
    predicted: &'a Table,
    candidates: &'a [Vec<usize>],
    ordered: bool,
    /// Gold columns in the order they are assigned: fewest candidates first, so the
    /// constrained choices prune the tree early.
    order: Vec<usize>,
    /// Predicted column chosen for each gold column in `order`, so far.
    chosen: Vec<usize>,
    /// For each predicted column, the first predicted column with the very same values in
    /// the very same rows: such twins are interchangeable, so trying one of them suffices.
    twin_of: Vec<usize>,
    used: Vec<bool>,
    steps: usize,
    max_steps: usize,
}

impl<'a> Search<'a> {
    fn new(
        gold: &'a Table,
        predicted: &'a Table,
        candidates: &'a [Vec<usize>],
        ordered: bool,
        max_steps: usize,
    ) -> Self {
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.sort_by_key(|&index| (candidates[index].len(), index));
        let column = |index: usize| predicted.rows.iter().map(move |row| &row[index]);
        let twin_of = (0..predicted.width)
            .map(|index| {
                (0..index)
                    .find(|&earlier| column(earlier).eq(column(index)))
                    .unwrap_or(index)
            })
            .collect();
        Search {
            gold,
            predicted,
            candidates,
            ordered,
            order,
            chosen: Vec::new(),
            twin_of,
            used: vec![false; predicted.width],
            steps: 0,
            max_steps,
        }
    }

    fn run(&mut self) -> SearchResult {
        if self.order.is_empty() {
            // No gold columns (only possible with a malformed gold): rows are all empty and
            // the counts already agree.
            return SearchResult::Found;
        }
        self.extend()
    }

    fn extend(&mut self) -> SearchResult {
        let depth = self.chosen.len();
        if depth == self.order.len() {
            return SearchResult::Found;
        }
        let gold_column = self.order[depth];
        let mut tried_twins: Vec<usize> = Vec::new();
        for &candidate in &self.candidates[gold_column] {
            if self.used[candidate] || tried_twins.contains(&self.twin_of[candidate]) {
                continue;
            }
            tried_twins.push(self.twin_of[candidate]);
            self.steps += 1;
            if self.steps > self.max_steps {
                return SearchResult::CapReached;
            }
            self.chosen.push(candidate);
            if self.projection_matches() {
                self.used[candidate] = true;
                match self.extend() {
                    SearchResult::NotFound => {}
                    other => return other,
                }
                self.used[candidate] = false;
            }
            self.chosen.pop();
        }
        SearchResult::NotFound
    }

    /// Whether the gold rows and the predicted rows agree on the columns assigned so far.
    /// A full match implies a match on every subset of columns, so a failure here prunes.
    fn projection_matches(&self) -> bool {
        let gold_columns = &self.order[..self.chosen.len()];
        let project = |table: &'a Table, columns: &[usize]| -> Vec<Vec<&'a Cell>> {
            table
                .rows
                .iter()
                .map(|row| columns.iter().map(|&index| &row[index]).collect())
                .collect()
        };
        let mut gold_rows = project(self.gold, gold_columns);
        let mut predicted_rows = project(self.predicted, &self.chosen);
        if !self.ordered {
            gold_rows.sort();
            predicted_rows.sort();
        }
        gold_rows == predicted_rows
    }
}

/// Whether the outermost query of `sql` has ORDER BY (so its row order is part of the
/// answer). ORDER BY inside a subquery, a CTE, a window or an aggregate does not count; a
/// parenthesised outermost query counts when it orders inside the parentheses; with several
/// statements, the last one decides. When the parser rejects the text, a token scan looks
/// for ORDER BY outside every parenthesis instead (the same rule on the raw tokens); when
/// even the tokenizer fails, the answer is false (compare without order, the lenient side).
pub fn gold_orders(sql: &str, dialect: SqlDialect) -> bool {
    let parser_dialect = dialect.parser_dialect();
    match Parser::parse_sql(parser_dialect.as_ref(), sql) {
        Ok(statements) => match statements.last() {
            Some(Statement::Query(query)) => query_orders(query),
            _ => false,
        },
        Err(_) => top_level_order_by(parser_dialect.as_ref(), sql),
    }
}

fn query_orders(query: &sqlparser::ast::Query) -> bool {
    if query.order_by.is_some() {
        return true;
    }
    match query.body.as_ref() {
        SetExpr::Query(inner) => query_orders(inner),
        _ => false,
    }
}

fn top_level_order_by(dialect: &dyn Dialect, sql: &str) -> bool {
    let Ok(tokens) = Tokenizer::new(dialect, sql).tokenize() else {
        return false;
    };
    let mut depth: i64 = 0;
    let mut after_order = false;
    for token in tokens {
        match token {
            Token::Whitespace(_) => continue,
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            // A `;` starts another statement; only the last one decides.
            Token::SemiColon => {
                depth = 0;
                after_order = false;
                continue;
            }
            Token::Word(ref word) if depth == 0 && after_order && word.keyword == Keyword::BY => {
                return true;
            }
            _ => {}
        }
        after_order =
            depth == 0 && matches!(&token, Token::Word(word) if word.keyword == Keyword::ORDER);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(columns: &[&str], rows: Vec<Vec<JsonValue>>) -> ResultSet {
        ResultSet::new(columns.iter().map(|name| name.to_string()).collect(), rows)
    }

    fn one_column(values: Vec<JsonValue>) -> ResultSet {
        set(
            &["value"],
            values.into_iter().map(|value| vec![value]).collect(),
        )
    }

    fn unordered() -> CompareOptions {
        CompareOptions::default()
    }

    fn ordered() -> CompareOptions {
        CompareOptions {
            ordered: true,
            ..CompareOptions::default()
        }
    }

    fn same(a: JsonValue, b: JsonValue) -> bool {
        results_match(&one_column(vec![a]), &one_column(vec![b]), &unordered()).is_match()
    }

    #[test]
    fn identical_results_match() {
        let gold = set(
            &["name", "total"],
            vec![vec![json!("Ann"), json!(3)], vec![json!("Bo"), json!(5)]],
        );
        assert_eq!(
            results_match(&gold, &gold.clone(), &unordered()),
            Verdict::Match
        );
        assert_eq!(
            results_match(&gold, &gold.clone(), &ordered()),
            Verdict::Match
        );
    }

    #[test]
    fn row_order_is_ignored_unless_ordered() {
        let gold = set(&["n"], vec![vec![json!(1)], vec![json!(2)], vec![json!(3)]]);
        let shuffled = set(&["n"], vec![vec![json!(3)], vec![json!(1)], vec![json!(2)]]);
        assert!(results_match(&gold, &shuffled, &unordered()).is_match());
    }

    #[test]
    fn row_order_is_respected_when_ordered() {
        let gold = set(&["n"], vec![vec![json!(1)], vec![json!(2)], vec![json!(3)]]);
        let shuffled = set(&["n"], vec![vec![json!(3)], vec![json!(1)], vec![json!(2)]]);
        let verdict = results_match(&gold, &shuffled, &ordered());
        assert_eq!(verdict.rule(), Some(Rule::Order));
        assert!(results_match(&gold, &gold.clone(), &ordered()).is_match());
    }

    #[test]
    fn ordered_comparison_of_different_rows_says_rows_not_order() {
        let gold = set(
            &["a", "b"],
            vec![vec![json!(1), json!("x")], vec![json!(2), json!("y")]],
        );
        let crossed = set(
            &["a", "b"],
            vec![vec![json!(1), json!("y")], vec![json!(2), json!("x")]],
        );
        assert_eq!(
            results_match(&gold, &crossed, &ordered()).rule(),
            Some(Rule::Rows)
        );
    }

    #[test]
    fn duplicates_are_counted() {
        let gold = one_column(vec![json!(1), json!(1), json!(2)]);
        let deduplicated = one_column(vec![json!(1), json!(2)]);
        let other_duplicate = one_column(vec![json!(1), json!(2), json!(2)]);
        assert_eq!(
            results_match(&gold, &deduplicated, &unordered()).rule(),
            Some(Rule::RowCount)
        );
        assert_eq!(
            results_match(&gold, &other_duplicate, &unordered()).rule(),
            Some(Rule::ColumnValues)
        );
        assert!(results_match(
            &gold,
            &one_column(vec![json!(2), json!(1), json!(1)]),
            &unordered()
        )
        .is_match());
    }

    #[test]
    fn numbers_are_rounded_to_the_requested_decimals() {
        assert!(same(json!(12.344), json!(12.341)));
        assert!(!same(json!(12.34), json!(12.35)));
        // Half away from zero: 0.125 is exact in binary and rounds up to 0.13.
        assert!(same(json!(0.125), json!(0.13)));
        assert!(same(json!(-0.125), json!(-0.13)));
        let zero_places = CompareOptions {
            decimals: 0,
            ..CompareOptions::default()
        };
        assert!(results_match(
            &one_column(vec![json!(12.4)]),
            &one_column(vec![json!(12)]),
            &zero_places
        )
        .is_match());
        let four_places = CompareOptions {
            decimals: 4,
            ..CompareOptions::default()
        };
        assert!(!results_match(
            &one_column(vec![json!(12.344)]),
            &one_column(vec![json!(12.341)]),
            &four_places
        )
        .is_match());
    }

    #[test]
    fn decimals_beyond_the_cap_do_not_overflow() {
        let many = CompareOptions {
            decimals: 400,
            ..CompareOptions::default()
        };
        let big = one_column(vec![json!(u64::MAX), json!(i64::MIN), json!(1.0e300)]);
        assert!(results_match(&big, &big.clone(), &many).is_match());
        assert!(same(json!(1.0e300), json!(1.0e300)));
        assert!(!same(json!(1.0e300), json!(2.0e300)));
    }

    #[test]
    fn integers_and_floats_compare_by_value() {
        assert!(same(json!(12), json!(12.0)));
        assert!(same(json!(1047484), json!(1047484.00)));
        assert!(same(json!(-3), json!(-3.0)));
        assert!(!same(json!(12), json!(13.0)));
    }

    #[test]
    fn numeric_strings_equal_numbers() {
        // PostgreSQL NUMERIC as text against SQLite REAL or INTEGER.
        assert!(same(json!("1047484.00"), json!(1047484)));
        assert!(same(json!("12.50"), json!(12.5)));
        assert!(same(json!("-0.10"), json!(-0.1)));
        // Not numbers: spaces, a plus sign, an exponent, NaN, a bare dot.
        assert!(!same(json!(" 12"), json!(12)));
        assert!(!same(json!("+12"), json!(12)));
        assert!(!same(json!("1e2"), json!(100)));
        assert!(!same(json!("NaN"), json!(0)));
        assert!(!same(json!("12."), json!(12)));
        assert!(!same(json!(".5"), json!(0.5)));
    }

    #[test]
    fn booleans_equal_one_and_zero() {
        assert!(same(json!(true), json!(1)));
        assert!(same(json!(false), json!(0)));
        assert!(same(json!(true), json!("1")));
        assert!(same(json!(true), json!(1.0)));
        assert!(!same(json!(true), json!(0)));
        assert!(!same(json!(false), json!(JsonValue::Null)));
        assert!(!same(json!(true), json!("true")));
    }

    #[test]
    fn null_equals_null_and_nothing_else() {
        assert!(same(JsonValue::Null, JsonValue::Null));
        assert!(!same(JsonValue::Null, json!(0)));
        assert!(!same(JsonValue::Null, json!("")));
        assert!(!same(JsonValue::Null, json!("NULL")));
    }

    #[test]
    fn text_compares_exactly() {
        assert!(same(json!("Paid"), json!("Paid")));
        assert!(!same(json!("Paid"), json!("paid")));
        assert!(!same(json!("Paid "), json!("Paid")));
        assert!(!same(json!("New  York"), json!("New York")));
    }

    #[test]
    fn dates_and_timestamps_compare_as_text() {
        assert!(same(json!("2024-01-05"), json!("2024-01-05")));
        assert!(!same(json!("2024-01-05"), json!("2024-01-05 00:00:00")));
        assert!(!same(
            json!("2024-01-05 00:00:00"),
            json!("2024-01-05T00:00:00")
        ));
    }

    #[test]
    fn arrays_and_objects_compare_by_json_text() {
        assert!(same(json!([1, 2]), json!([1, 2])));
        assert!(!same(json!([1, 2]), json!([2, 1])));
        assert!(same(json!({"a": 1}), json!({"a": 1})));
    }

    #[test]
    fn column_names_are_ignored() {
        let gold = set(&["total_revenue"], vec![vec![json!(10)]]);
        let predicted = set(&["sum(amount)"], vec![vec![json!(10)]]);
        assert!(results_match(&gold, &predicted, &unordered()).is_match());
    }

    #[test]
    fn columns_may_come_in_any_order() {
        let gold = set(
            &["name", "total"],
            vec![vec![json!("Ann"), json!(3)], vec![json!("Bo"), json!(5)]],
        );
        let swapped = set(
            &["total", "name"],
            vec![vec![json!(5), json!("Bo")], vec![json!(3), json!("Ann")]],
        );
        assert!(results_match(&gold, &swapped, &unordered()).is_match());
        assert!(results_match(
            &gold,
            &set(
                &["total", "name"],
                vec![vec![json!(3), json!("Ann")], vec![json!(5), json!("Bo")]]
            ),
            &ordered()
        )
        .is_match());
    }

    #[test]
    fn extra_predicted_columns_are_tolerated_when_every_gold_column_matches_row_for_row() {
        let gold = set(&["name"], vec![vec![json!("Ann")], vec![json!("Bo")]]);
        let wider = set(
            &["id", "name", "city"],
            vec![
                vec![json!(1), json!("Ann"), json!("Oslo")],
                vec![json!(2), json!("Bo"), json!("Rome")],
            ],
        );
        assert!(results_match(&gold, &wider, &unordered()).is_match());
    }

    #[test]
    fn extra_columns_do_not_excuse_misaligned_rows() {
        // Each gold column's values appear in some predicted column, but never together
        // in the same row.
        let gold = set(
            &["name", "total"],
            vec![vec![json!("Ann"), json!(3)], vec![json!("Bo"), json!(5)]],
        );
        let misaligned = set(
            &["name", "total", "other"],
            vec![
                vec![json!("Ann"), json!(5), json!(0)],
                vec![json!("Bo"), json!(3), json!(0)],
            ],
        );
        assert_eq!(
            results_match(&gold, &misaligned, &unordered()).rule(),
            Some(Rule::Rows)
        );
    }

    #[test]
    fn a_gold_column_missing_from_the_prediction_fails_on_its_values() {
        let gold = set(&["name", "total"], vec![vec![json!("Ann"), json!(3)]]);
        let wrong = set(&["name", "count"], vec![vec![json!("Ann"), json!(4)]]);
        let verdict = results_match(&gold, &wrong, &unordered());
        assert_eq!(verdict.rule(), Some(Rule::ColumnValues));
        assert!(verdict
            .reason()
            .is_some_and(|reason| reason.contains("total")));
    }

    #[test]
    fn the_mapping_search_backtracks() {
        // Gold column a = [1, 2] has three candidates with the same values; only the last,
        // p2, agrees with gold column b row for row. The search first tries p0, fails on b,
        // and comes back.
        let gold = set(
            &["a", "b"],
            vec![vec![json!(1), json!("x")], vec![json!(2), json!("y")]],
        );
        let predicted = set(
            &["p0", "p1", "p2", "p3"],
            vec![
                vec![json!(2), json!(2), json!(1), json!("x")],
                vec![json!(1), json!(1), json!(2), json!("y")],
            ],
        );
        assert!(results_match(&gold, &predicted, &unordered()).is_match());
        // Two gold columns with the same values need two distinct predicted columns: each
        // has a candidate, but no injective assignment exists.
        let twin_gold = set(
            &["a", "b"],
            vec![vec![json!(1), json!(1)], vec![json!(2), json!(2)]],
        );
        let single = set(
            &["a", "c"],
            vec![vec![json!(1), json!(7)], vec![json!(2), json!(8)]],
        );
        assert_eq!(
            results_match(&twin_gold, &single, &unordered()).rule(),
            Some(Rule::Rows)
        );
        let twin = set(
            &["c", "a", "b"],
            vec![
                vec![json!(7), json!(1), json!(1)],
                vec![json!(8), json!(2), json!(2)],
            ],
        );
        assert!(results_match(&twin_gold, &twin, &unordered()).is_match());
    }

    #[test]
    fn the_mapping_search_stops_at_its_cap() {
        // The backtracking case above takes three steps: b to p3, a to p0 (rejected), a to
        // p2 (p1 is p0's twin and is skipped).
        let gold = set(
            &["a", "b"],
            vec![vec![json!(1), json!("x")], vec![json!(2), json!("y")]],
        );
        let predicted = set(
            &["p0", "p1", "p2", "p3"],
            vec![
                vec![json!(2), json!(2), json!(1), json!("x")],
                vec![json!(1), json!(1), json!(2), json!("y")],
            ],
        );
        assert_eq!(
            compare_with_cap(&gold, &predicted, &unordered(), 2).rule(),
            Some(Rule::SearchCap)
        );
        assert!(compare_with_cap(&gold, &predicted, &unordered(), 3).is_match());
    }

    #[test]
    fn interchangeable_columns_do_not_blow_up_the_search() {
        // Eight gold columns and nine predicted columns, all holding the values {0, 1}: every
        // predicted column is a candidate for every gold column, and the rows never align
        // on the last gold column. Trying every arrangement would take 9!/2 steps; since the
        // nine predicted columns are identical, one try per gold column settles it.
        let gold_row = |first: i64| -> Vec<JsonValue> {
            (0..8)
                .map(|i| json!(if i == 7 { 1 - first } else { first }))
                .collect()
        };
        let gold = set(&["c"; 8], vec![gold_row(0), gold_row(1)]);
        let predicted_row =
            |value: i64| -> Vec<JsonValue> { (0..9).map(|_| json!(value)).collect() };
        let predicted = set(&["p"; 9], vec![predicted_row(0), predicted_row(1)]);
        assert_eq!(
            compare_with_cap(&gold, &predicted, &unordered(), 20).rule(),
            Some(Rule::Rows)
        );
    }

    #[test]
    fn fewer_predicted_columns_never_match() {
        let gold = set(&["name", "total"], vec![vec![json!("Ann"), json!(3)]]);
        let narrow = set(&["name"], vec![vec![json!("Ann")]]);
        assert_eq!(
            results_match(&gold, &narrow, &unordered()).rule(),
            Some(Rule::FewerColumns)
        );
    }

    #[test]
    fn different_row_counts_never_match() {
        let gold = one_column(vec![json!(1), json!(2)]);
        let verdict = results_match(&gold, &one_column(vec![json!(1)]), &unordered());
        assert_eq!(verdict.rule(), Some(Rule::RowCount));
        assert_eq!(verdict.reason(), Some("gold has 2 rows, predicted 1"));
        assert_eq!(
            results_match(&gold, &one_column(vec![]), &unordered()).rule(),
            Some(Rule::RowCount)
        );
    }

    #[test]
    fn ragged_rows_read_as_null_without_panicking() {
        let gold = set(&["a", "b"], vec![vec![json!(1), JsonValue::Null]]);
        let ragged = set(&["a", "b"], vec![vec![json!(1)]]);
        assert!(results_match(&gold, &ragged, &unordered()).is_match());
        let no_columns = ResultSet::new(vec![], vec![vec![]]);
        assert!(results_match(&no_columns, &no_columns.clone(), &unordered()).is_match());
    }

    #[test]
    fn verdict_serialises_with_rule_and_reason() {
        let verdict = Verdict::mismatch(Rule::FewerColumns, "gold has 2 columns, predicted only 1");
        let text = serde_json::to_string(&verdict).expect("serialises");
        assert_eq!(
            text,
            r#"{"verdict":"mismatch","rule":"fewer_columns","reason":"gold has 2 columns, predicted only 1"}"#
        );
        assert_eq!(
            serde_json::to_string(&Verdict::Match).expect("serialises"),
            r#"{"verdict":"match"}"#
        );
    }

    // Known blind spots: each test pins a case the comparator accepts (or rejects) although
    // a human might judge otherwise.

    #[test]
    fn blind_spot_an_empty_gold_accepts_any_empty_prediction() {
        let gold = set(&["name"], vec![]);
        let wrong_but_empty = set(&["id", "amount", "city"], vec![]);
        assert!(results_match(&gold, &wrong_but_empty, &unordered()).is_match());
        let narrower_and_empty = set(&[], vec![]);
        assert!(
            results_match(&set(&["a", "b"], vec![]), &narrower_and_empty, &unordered()).is_match()
        );
    }

    #[test]
    fn blind_spot_a_single_null_row_matches_any_single_null_row() {
        // A gold MAX() over no rows and a wrong query whose MAX() also finds nothing agree.
        let gold = set(&["max_total"], vec![vec![JsonValue::Null]]);
        let predicted = set(&["max(other)"], vec![vec![JsonValue::Null]]);
        assert!(results_match(&gold, &predicted, &unordered()).is_match());
    }

    #[test]
    fn blind_spot_numbers_differing_beyond_the_precision_match() {
        assert!(same(json!(100.004), json!(100.0)));
        assert!(same(json!(0.333), json!(0.33)));
    }

    #[test]
    fn blind_spot_values_straddling_a_rounding_boundary_differ() {
        // 0.285 * 100 is 28.499999999999996 in binary, 0.28500000000000003 * 100 is
        // 28.500000000000004: they round to 0.28 and 0.29.
        assert!(!same(json!(0.285), json!(0.28500000000000003)));
    }

    #[test]
    fn blind_spot_integers_beyond_two_to_the_53_against_decimals() {
        // Integers scale exactly; a decimal goes through a double, which cannot hold
        // 99999999999999999999 exactly.
        assert!(same(
            json!("99999999999999999999"),
            json!("99999999999999999999")
        ));
        assert!(!same(
            json!("99999999999999999999"),
            json!("99999999999999999999.00")
        ));
        assert!(same(
            json!(9_007_199_254_740_992_i64),
            json!("9007199254740992.00")
        ));
    }

    #[test]
    fn blind_spot_tied_rows_of_an_ordered_gold_must_keep_the_gold_order() {
        // ORDER BY total: Ann and Bo tie, and the database chose Ann first for the gold.
        let gold = set(
            &["name", "total"],
            vec![vec![json!("Ann"), json!(3)], vec![json!("Bo"), json!(3)]],
        );
        let other_tie_order = set(
            &["name", "total"],
            vec![vec![json!("Bo"), json!(3)], vec![json!("Ann"), json!(3)]],
        );
        assert_eq!(
            results_match(&gold, &other_tie_order, &ordered()).rule(),
            Some(Rule::Order)
        );
    }

    #[test]
    fn blind_spot_digit_text_equals_a_number() {
        assert!(same(json!("007"), json!(7)));
        assert!(same(json!("02134"), json!(2134)));
    }

    #[test]
    fn gold_orders_only_when_the_outermost_query_orders() {
        let pg = SqlDialect::Postgres;
        assert!(gold_orders("SELECT name FROM t ORDER BY name", pg));
        assert!(gold_orders(
            "SELECT name FROM t ORDER BY total DESC LIMIT 5",
            pg
        ));
        assert!(gold_orders(
            "WITH c AS (SELECT 1 AS x) SELECT x FROM c ORDER BY x",
            pg
        ));
        assert!(gold_orders(
            "SELECT a FROM t UNION SELECT b FROM u ORDER BY 1",
            pg
        ));
        assert!(gold_orders("(SELECT a FROM t ORDER BY a)", pg));
        assert!(!gold_orders("SELECT name FROM t", pg));
        assert!(!gold_orders(
            "SELECT * FROM (SELECT a FROM t ORDER BY a LIMIT 3) AS s",
            pg
        ));
        assert!(!gold_orders(
            "WITH c AS (SELECT a FROM t ORDER BY a) SELECT a FROM c",
            pg
        ));
        assert!(!gold_orders(
            "SELECT a, ROW_NUMBER() OVER (ORDER BY a) FROM t",
            pg
        ));
        assert!(!gold_orders(
            "SELECT STRING_AGG(a, ',' ORDER BY a) FROM t",
            pg
        ));
        assert!(!gold_orders("SELECT 'ORDER BY' AS label FROM t", pg));
        assert!(gold_orders(
            "SELECT `Name` FROM `Singer` ORDER BY `Age`",
            SqlDialect::Sqlite
        ));
    }

    #[test]
    fn gold_orders_falls_back_to_a_token_scan_when_the_parser_fails() {
        let pg = SqlDialect::Postgres;
        // Not valid SQL for the parser (a stray keyword), but the tokens are clear.
        assert!(gold_orders("SELECT a FROM t WHERE WHERE ORDER BY a", pg));
        assert!(!gold_orders(
            "SELECT a FROM t WHERE WHERE (x ORDER BY a)",
            pg
        ));
        assert!(!gold_orders("SELECT 'unterminated", pg));
        assert!(!gold_orders("", pg));
    }

    #[test]
    fn the_canonical_key_ignores_row_and_column_order_but_not_pairing() {
        let a = set(
            &["name", "n"],
            vec![vec![json!("Ann"), json!(3)], vec![json!("Bo"), json!(1.0)]],
        );
        let reordered = set(
            &["total", "who"],
            vec![
                vec![json!(1), json!("Bo")],
                vec![json!("3.00"), json!("Ann")],
            ],
        );
        assert_eq!(canonical_key(&a), canonical_key(&reordered));
        let swapped_pairs = set(
            &["name", "n"],
            vec![vec![json!("Ann"), json!(1)], vec![json!("Bo"), json!(3)]],
        );
        assert_ne!(canonical_key(&a), canonical_key(&swapped_pairs));
        let one_more = set(
            &["name", "n"],
            vec![
                vec![json!("Ann"), json!(3)],
                vec![json!("Bo"), json!(1)],
                vec![json!("Bo"), json!(1)],
            ],
        );
        assert_ne!(
            canonical_key(&a),
            canonical_key(&one_more),
            "duplicates count"
        );
    }
}
