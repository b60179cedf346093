//! Checks that an answer which ran fine still answers the question, by rules and with no
//! model involved: the question's words, the parsed tree of the SQL that ran, the result
//! and the schema notes.
//!
//! The rules, each with a stable id ([`Check`]):
//!
//! - `period_filter`: the question names a period (years: "in 2025", "between 2024 and
//!   2025", "April 2024 to March 2025", "since 2024") and the query's date filters
//!   compare with a year outside it (an exclusive end on 1 January of the next year is
//!   the period's end, not another year).
//! - `period_rows`: the result's time column (a year, month or date it is grouped by)
//!   holds years outside the named period, and no filter of the query is on that period
//!   (when one is, the rows' dates are another date: a car's model year).
//! - `period_unfiltered`: the question names a period, and the query has no date filter
//!   at all, returns no time column, and reads a table whose notes do not say it holds
//!   only that period.
//! - `table_period`: the query reads a table whose notes' `holds` lies wholly outside
//!   the named period (the demo's `bill_archive` for a 2025 question).
//! - `grouping`: "per month", "by year", "for each week" and no GROUP BY or PARTITION BY
//!   of the statement mentions that grain; "each supplier" answered with one row and no
//!   grouping at all ("by X" for anything but time is left alone: it is as often a
//!   passive, "produced by the maker", or a ranking, "top 5 by revenue").
//! - `repeated_rows`: a table joined and never read, on columns that are none of its
//!   keys, so the rows it is joined to repeat under a total or in a row list
//!   (`plausibility/joins.rs` says exactly when). The rule also writes its fix
//!   ([`rule_fix`]): the join taken out, or kept as an EXISTS test when the question
//!   names its table.
//! - `number_as_date`: a date function (`strftime`, `date`, `EXTRACT`...) applied to a
//!   column whose values are years stored as numbers, `2014` (`plausibility/dates.rs` says
//!   exactly when). The rule writes its fix too ([`rule_fix`]): the year taken out of
//!   the column (`strftime('%Y', year)`) is the column itself.
//! - `span_as_number` (SQLite): a span of time added to or taken from a date as text
//!   (`strftime('%Y-%m-%d', 'now') - '30 days'`), which SQLite computes on numbers
//!   (`plausibility/dates.rs`).
//! - `outer_column`: `x IN (SELECT col FROM t)` where `t` has no `col`, so the database
//!   takes the outer query's (`plausibility/scopes.rs` says exactly when).
//! - `currency`: a result column named after a currency other than the one the notes
//!   declare (`total_usd` on a database that bills in INR).
//! - `explanation_period`, `explanation_currency`: the written answer names a year
//!   neither the question nor the rows hold, or money in another currency than the
//!   notes'. A foreign currency is corrected to the declared one (the notes are the
//!   authority on what the money is); a year is flagged, as the right words are unknown.
//!
//! Only what can be decided exactly is checked: relative periods ("last month", "this
//! year") are left to the glossary, and a question whose words are not recognised gets
//! no finding. A rule that fired on right answers would cost trust, so each rule has a
//! test with a right answer it must not flag, and every gold answer of the demo set is
//! checked in `tests.rs`.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};
use serde_json::Value as JsonValue;
use sqlparser::ast::{
    BinaryOperator, Expr, GroupByExpr, InTarget, Query, Select, SelectItem, SetExpr, Statement,
    Value, Visit, Visitor, WindowType,
};
use sqlparser::parser::Parser;

use crate::gate::SqlDialect;
use crate::linking::cards::TableCard;
use crate::schema::{SchemaNotes, TableSchema};

mod dates;
mod joins;
mod outer_columns;

/// Which rule found something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    PeriodFilter,
    PeriodRows,
    PeriodUnfiltered,
    TablePeriod,
    Grouping,
    RepeatedRows,
    NumberAsDate,
    SpanAsNumber,
    OuterColumn,
    Currency,
    ExplanationPeriod,
    ExplanationCurrency,
}

impl Check {
    pub const ALL: [Check; 12] = [
        Check::PeriodFilter,
        Check::PeriodRows,
        Check::PeriodUnfiltered,
        Check::TablePeriod,
        Check::Grouping,
        Check::RepeatedRows,
        Check::NumberAsDate,
        Check::SpanAsNumber,
        Check::OuterColumn,
        Check::Currency,
        Check::ExplanationPeriod,
        Check::ExplanationCurrency,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Check::PeriodFilter => "period_filter",
            Check::PeriodRows => "period_rows",
            Check::PeriodUnfiltered => "period_unfiltered",
            Check::TablePeriod => "table_period",
            Check::Grouping => "grouping",
            Check::RepeatedRows => "repeated_rows",
            Check::NumberAsDate => "number_as_date",
            Check::SpanAsNumber => "span_as_number",
            Check::OuterColumn => "outer_column",
            Check::Currency => "currency",
            Check::ExplanationPeriod => "explanation_period",
            Check::ExplanationCurrency => "explanation_currency",
        }
    }
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing the answer gets wrong, in a sentence that names the fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub check: Check,
    pub message: String,
}

impl Finding {
    fn new(check: Check, message: String) -> Finding {
        Finding { check, message }
    }
}

/// What the result checks read.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub question: &'a str,
    /// The SQL that ran (the guard's rendering).
    pub sql: &'a str,
    pub dialect: SqlDialect,
    pub columns: &'a [String],
    pub rows: &'a [Vec<JsonValue>],
    /// The tables the query read, as the guard listed them.
    pub tables: &'a [String],
    pub notes: &'a SchemaNotes,
    /// The database's tables with their keys (what `repeated_rows` weighs joins by).
    pub schema: &'a [TableSchema],
    /// The tables' cards, whose sample values say what a column holds (`number_as_date`).
    pub cards: &'a [TableCard],
}

/// A span of whole years, both ends inclusive (`i64::MIN` / `i64::MAX`: open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct YearSpan {
    pub from: i64,
    pub to: i64,
}

impl YearSpan {
    fn contains(self, year: i64) -> bool {
        self.from <= year && year <= self.to
    }

    /// The years among `years` that lie outside the span.
    fn outside<'y>(self, years: impl IntoIterator<Item = &'y i64>) -> BTreeSet<i64> {
        years
            .into_iter()
            .copied()
            .filter(|year| !self.contains(*year))
            .collect()
    }

    fn overlaps(self, from: i64, to: i64) -> bool {
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

const MONTHS: &[&str] = &[
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
const PERIOD_WORDS: &[&str] = &[
    "in", "of", "during", "for", "since", "from", "between", "and", "to", "until", "before",
    "after", "year", "dated", "through", "till", "or", "both", "either",
];

fn year_word(word: &str) -> Option<i64> {
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
    fn of(word: &str) -> Option<Grain> {
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

    fn as_str(self) -> &'static str {
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
    fn grouped_by(self, text: &str) -> bool {
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
const RATE_WORDS: &[&str] = &["average", "avg", "mean", "typical", "typically"];

/// Words after "each" that make no breakdown ("each time", "each of", "each other").
const EACH_IDIOMS: &[&str] = &["time", "of", "other", "one", "and", "or"];

/// What the question asks the rows to be broken down by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Breakdown {
    /// Time grains, with the words that asked ("per month").
    grains: Vec<(Grain, String)>,
    /// A breakdown by something that is not time ("each supplier", "by category").
    other: Option<String>,
}

fn breakdown(question: &str) -> Breakdown {
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

/// What the checks read from the SQL's tree.
#[derive(Debug, Default)]
struct SqlFacts {
    /// Years the statement's comparisons hold its dates to.
    filter_years: BTreeSet<i64>,
    /// Every GROUP BY and PARTITION BY expression as written (an alias or position
    /// resolved to its select item: `year (strftime('%Y', txn_dt))`).
    groupings: Vec<String>,
    /// Tables joined and never read whose joins repeat other tables' rows.
    repeating_joins: Vec<joins::RepeatingJoin>,
    /// Columns of years stored as numbers, read through a date function.
    numbers_as_dates: Vec<dates::NumberAsDate>,
    /// SQLite only: `+`/`-` with a span of time written as text (`- '30 days'`).
    spans_as_numbers: Vec<String>,
    /// IN-subqueries that select a column their own tables lack.
    outer_columns: Vec<outer_columns::OuterColumn>,
    /// A select item holds a subquery (a per-row count written as a correlated
    /// subquery breaks rows down without a GROUP BY).
    projection_subquery: bool,
}

/// Whether a rendered expression reads a date (so a 2025 compared with it is a year).
fn date_like(text: &str) -> bool {
    [
        "year", "%y", "date", "_dt", "time", "strftime", "extract", "substr", "month", "day",
        "_at", "when",
    ]
    .iter()
    .any(|part| text.contains(part))
}

/// The quoted text of a literal written alone or as a typed or cast literal
/// (`'2025-01-01'`, `DATE '2025-01-01'`, `CAST('2025' AS INTEGER)`), or a plain number.
fn literal_text(expr: &Expr) -> Option<String> {
    if let Expr::Value(value) = expr {
        return match &value.value {
            Value::SingleQuotedString(text) => Some(text.clone()),
            Value::Number(number, _) => Some(number.clone()),
            _ => None,
        };
    }
    let rendered = expr.to_string();
    let start = rendered.find('\'')?;
    let end = start + 1 + rendered.get(start + 1..)?.find('\'')?;
    let inside = rendered.get(start + 1..end)?.to_string();
    let outside = format!("{}{}", &rendered[..start], &rendered[end + 1..]).to_lowercase();
    let rest = [
        "timestamp",
        "datetime",
        "date",
        "cast",
        "as",
        "text",
        "integer",
        "int",
    ]
    .iter()
    .fold(outside, |text, word| text.replace(word, ""));
    rest.chars()
        .all(|c| matches!(c, ' ' | '(' | ')' | ':'))
        .then_some(inside)
}

/// Which side of a range a literal bounds, and whether strictly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// `=`, `<>`, IN, BETWEEN's ends.
    Exact,
    /// `col < lit` (`strict`) or `col <= lit`.
    Upper { strict: bool },
    /// `col > lit` (`strict`) or `col >= lit`.
    Lower { strict: bool },
}

/// The year a literal holds a date to: a date (`2025-03-31`, `2025-03`), or a year
/// (`2025`) compared with a date expression. A 1 January on the upper side of a
/// comparison is the exclusive end of the year before; `year < 1980` ends in 1979 and
/// `year > 2003` starts in 2004.
fn literal_year(literal: &Expr, other: &Expr, bound: Bound) -> Option<i64> {
    let upper_end = matches!(bound, Bound::Upper { .. });
    let text = literal_text(literal)?;
    let text = text.trim();
    let head = text.get(..4)?;
    if !head.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let year: i64 = head.parse().ok()?;
    if !(1900..=2100).contains(&year) {
        return None;
    }
    let rest = text.get(4..)?;
    let is_date =
        rest.starts_with('-') && rest.len() >= 3 && rest[1..3].chars().all(|c| c.is_ascii_digit());
    if is_date {
        let new_year = rest.starts_with("-01-01")
            && rest[6..]
                .trim_start_matches(['T', ' '])
                .chars()
                .all(|c| matches!(c, '0' | ':' | '.'));
        let year_end = rest.starts_with("-12-31");
        if year_end && bound == (Bound::Lower { strict: true }) {
            // `> '2024-12-31'` starts in 2025.
            return Some(year + 1);
        }
        return Some(if upper_end && new_year {
            year - 1
        } else {
            year
        });
    }
    let year = match bound {
        Bound::Upper { strict: true } => year - 1,
        Bound::Lower { strict: true } => year + 1,
        _ => year,
    };
    (rest.is_empty() && date_like(&other.to_string().to_lowercase())).then_some(year)
}

/// A LIKE pattern that pins a date's year (`'2025%'`, `'2025-03-%'`).
fn pattern_year(pattern: &Expr) -> Option<i64> {
    let text = literal_text(pattern)?;
    let head = text.get(..4)?;
    let rest = text.get(4..)?;
    let pins = head.chars().all(|c| c.is_ascii_digit()) && (rest.starts_with(['%', '-']));
    pins.then(|| head.parse().ok()).flatten()
}

struct Collect<'f> {
    facts: &'f mut SqlFacts,
}

impl Collect<'_> {
    fn select(&mut self, select: &Select) {
        let items: Vec<(Option<String>, String)> = select
            .projection
            .iter()
            .filter_map(|item| match item {
                SelectItem::UnnamedExpr(expr) => Some((None, expr.to_string())),
                SelectItem::ExprWithAlias { expr, alias } => {
                    Some((Some(alias.value.to_lowercase()), expr.to_string()))
                }
                _ => None,
            })
            .collect();
        if items
            .iter()
            .any(|(_, text)| text.to_uppercase().contains("SELECT "))
        {
            self.facts.projection_subquery = true;
        }
        let resolve = |expr: &Expr| -> String {
            let text = expr.to_string();
            if let Expr::Identifier(ident) = expr {
                let name = ident.value.to_lowercase();
                if let Some((_, item)) = items
                    .iter()
                    .find(|(alias, _)| alias.as_deref() == Some(name.as_str()))
                {
                    return format!("{} ({item})", ident.value);
                }
            }
            if let Some(position) = literal_text(expr)
                .filter(|_| matches!(expr, Expr::Value(_)))
                .and_then(|text| text.parse::<usize>().ok())
            {
                if let Some((alias, item)) = position.checked_sub(1).and_then(|i| items.get(i)) {
                    return match alias {
                        Some(alias) => format!("{alias} ({item})"),
                        None => item.clone(),
                    };
                }
            }
            text
        };
        match &select.group_by {
            GroupByExpr::Expressions(exprs, _) => {
                self.facts.groupings.extend(exprs.iter().map(resolve));
            }
            GroupByExpr::All(_) => {
                self.facts
                    .groupings
                    .extend(items.iter().map(|(_, text)| text.clone()));
            }
        }
    }

    fn set(&mut self, set: &SetExpr) {
        match set {
            SetExpr::Select(select) => self.select(select),
            SetExpr::SetOperation { left, right, .. } => {
                self.set(left);
                self.set(right);
            }
            _ => {}
        }
    }

    fn comparison(&mut self, left: &Expr, op: &BinaryOperator, right: &Expr) {
        use BinaryOperator as B;
        // The bound a literal on the right sets, then on the left (`2025 < col`).
        let (right_bound, left_bound) = match op {
            B::Lt => (Bound::Upper { strict: true }, Bound::Lower { strict: true }),
            B::LtEq => (
                Bound::Upper { strict: false },
                Bound::Lower { strict: false },
            ),
            B::Gt => (Bound::Lower { strict: true }, Bound::Upper { strict: true }),
            B::GtEq => (
                Bound::Lower { strict: false },
                Bound::Upper { strict: false },
            ),
            B::Eq | B::NotEq => (Bound::Exact, Bound::Exact),
            _ => return,
        };
        self.facts
            .filter_years
            .extend(literal_year(right, left, right_bound));
        self.facts
            .filter_years
            .extend(literal_year(left, right, left_bound));
    }
}

impl Visitor for Collect<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        self.set(&query.body);
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        match expr {
            Expr::BinaryOp { left, op, right } => self.comparison(left, op, right),
            Expr::Between {
                expr, low, high, ..
            } => {
                self.facts
                    .filter_years
                    .extend(literal_year(low, expr, Bound::Exact));
                self.facts
                    .filter_years
                    .extend(literal_year(high, expr, Bound::Exact));
            }
            Expr::In {
                expr,
                target: InTarget::List(list),
                ..
            } => {
                for item in list {
                    self.facts
                        .filter_years
                        .extend(literal_year(item, expr, Bound::Exact));
                }
            }
            Expr::Like { pattern, .. } | Expr::ILike { pattern, .. } => {
                self.facts.filter_years.extend(pattern_year(pattern));
            }
            Expr::Function(function) => {
                if let Some(WindowType::WindowSpec(spec)) = &function.over {
                    self.facts
                        .groupings
                        .extend(spec.partition_by.iter().map(|expr| expr.to_string()));
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

fn sql_facts(
    sql: &str,
    dialect: SqlDialect,
    schema: &[TableSchema],
    cards: &[TableCard],
) -> Option<SqlFacts> {
    let statements = Parser::parse_sql(&*dialect.parser_dialect(), sql).ok()?;
    let statement: &Statement = statements.first()?;
    let mut facts = SqlFacts::default();
    let _ = statement.visit(&mut Collect { facts: &mut facts });
    facts.repeating_joins = joins::repeating_joins(statement, schema);
    facts.numbers_as_dates = dates::numbers_read_as_dates(statement, schema, cards);
    if dialect == SqlDialect::Sqlite {
        facts.spans_as_numbers = dates::spans_as_numbers(statement);
    }
    facts.outer_columns = outer_columns::outer_columns(statement, schema);
    Some(facts)
}

/// SQL the rules wrote to mend a failure without the model (a suspect answer's
/// findings here, a join on a column its table lacks in `repair`), and what it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleFix {
    pub sql: String,
    /// What was changed, for the trace ("without the repeating join").
    pub change: String,
}

/// The rules' own fix of a suspect answer, written without the model: `repeated_rows`
/// takes out the joins that repeat rows ([`joins`] says how), `number_as_date` compares a
/// column of years as the year it holds (`plausibility/dates.rs`). None when a finding
/// is of another check, or a fix cannot be written exactly; then the model's repair is
/// told the facts. The caller runs the SQL through the gate like any other statement.
pub fn rule_fix(answer: &Answer<'_>, findings: &[Finding]) -> Option<RuleFix> {
    let fixable = |check: Check| matches!(check, Check::RepeatedRows | Check::NumberAsDate);
    if findings.is_empty() || !findings.iter().all(|finding| fixable(finding.check)) {
        return None;
    }
    let dialect = answer.dialect.parser_dialect();
    let statements = Parser::parse_sql(&*dialect, answer.sql).ok()?;
    let [statement] = statements.as_slice() else {
        return None;
    };
    let found = |check: Check| findings.iter().any(|finding| finding.check == check);
    let mut fixed = statement.clone();
    let mut changes = Vec::new();
    if found(Check::RepeatedRows) {
        fixed = joins::without_repeating_joins(&fixed, answer.schema, answer.question, &*dialect)?;
        changes.push("without the repeating join");
    }
    if found(Check::NumberAsDate) {
        fixed = dates::with_years_compared_as_numbers(&fixed, answer.schema, answer.cards)?;
        changes.push("with the column of years compared as the year it holds");
    }
    Some(RuleFix {
        sql: fixed.to_string(),
        change: changes.join(" and "),
    })
}

/// Result columns that name time ("year", "month", "bill_date"), with the years their
/// values hold.
fn row_years(
    columns: &[String],
    rows: &[Vec<JsonValue>],
    grouped: bool,
) -> Vec<(String, BTreeSet<i64>)> {
    let mut found = Vec::new();
    for (index, name) in columns.iter().enumerate() {
        let lowered = name.to_lowercase();
        let year_name = lowered.contains("year") || lowered == "yr";
        let time_name = year_name
            || ["month", "quarter", "week", "period"]
                .iter()
                .any(|part| lowered.contains(part));
        let mut years = BTreeSet::new();
        let mut readable = true;
        for value in rows.iter().filter_map(|row| row.get(index)) {
            let year = match value {
                JsonValue::Null => continue,
                JsonValue::Number(number) if year_name => number.as_i64(),
                JsonValue::String(text) if time_name || grouped => {
                    let head = text
                        .get(..4)
                        .filter(|head| head.chars().all(|c| c.is_ascii_digit()));
                    let rest = text.get(4..).unwrap_or("");
                    let date_text = rest.is_empty() && year_name
                        || rest.starts_with('-')
                            && rest
                                .get(1..3)
                                .is_some_and(|m| m.chars().all(|c| c.is_ascii_digit()));
                    head.filter(|_| date_text)
                        .and_then(|head| head.parse().ok())
                }
                _ => None,
            };
            match year.filter(|year| (1900..=2100).contains(year)) {
                Some(year) => {
                    years.insert(year);
                }
                None => {
                    readable = false;
                    break;
                }
            }
        }
        if readable && !years.is_empty() {
            found.push((name.clone(), years));
        }
    }
    found
}

fn list(years: &BTreeSet<i64>) -> String {
    years
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Currency words and symbols, by ISO code.
const CURRENCIES: &[(&str, &[&str], &[&str])] = &[
    ("USD", &["$", "US$"], &["usd", "dollar", "dollars"]),
    ("EUR", &["€"], &["eur", "euro", "euros"]),
    ("GBP", &["£"], &["gbp", "sterling"]),
    ("INR", &["₹", "Rs.", "Rs"], &["inr", "rupee", "rupees"]),
    ("JPY", &["¥"], &["jpy", "yen"]),
];

/// The symbol money in a currency is written with, or its code.
pub fn currency_symbol(code: &str) -> String {
    CURRENCIES
        .iter()
        .find(|(iso, _, _)| iso.eq_ignore_ascii_case(code))
        .and_then(|(_, symbols, _)| symbols.first())
        .map_or_else(
            || format!("{} ", code.to_uppercase()),
            |symbol| symbol.to_string(),
        )
}

/// The checks on a result that returned rows: every finding, in rule order.
pub fn check_result(answer: &Answer<'_>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let Some(facts) = sql_facts(answer.sql, answer.dialect, answer.schema, answer.cards) else {
        return findings;
    };
    let grouped = !facts.groupings.is_empty();
    if let Some(span) = named_period(answer.question) {
        let outside = span.outside(&facts.filter_years);
        if !outside.is_empty() {
            findings.push(Finding::new(
                Check::PeriodFilter,
                format!(
                    "the question asks about {span}, but the query's date filter uses {}",
                    list(&outside)
                ),
            ));
        }
        let time_columns = row_years(answer.columns, answer.rows, grouped);
        // The rows' dates speak for the period when they are a breakdown and the query
        // does not filter on the named period itself (a filter on it means the result's
        // dates are another date: a car's model year, the months of a hiring cohort).
        let filters_the_period = facts.filter_years.iter().any(|year| span.contains(*year));
        let breakdown_years = if grouped && !filters_the_period {
            time_columns.as_slice()
        } else {
            &[]
        };
        for (column, years) in breakdown_years {
            let outside = span.outside(years);
            if !outside.is_empty() {
                findings.push(Finding::new(
                    Check::PeriodRows,
                    format!(
                        "the question asks about {span}, but the result's {column} holds {}",
                        list(&outside)
                    ),
                ));
                break;
            }
        }
        let mut held_within = true;
        for table in answer.tables {
            let held = answer
                .notes
                .tables
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(table))
                .and_then(|(_, note)| note.holds.as_ref())
                .and_then(|holds| holds.years().map(|years| (holds, years)));
            match held {
                Some((holds, (from, to))) => {
                    if !span.overlaps(from, to) {
                        findings.push(Finding::new(
                            Check::TablePeriod,
                            format!(
                                "the question asks about {span}, but the query reads {table}, \
                                 which holds only {} to {} (its notes)",
                                holds.from.as_deref().unwrap_or("the start"),
                                holds.to.as_deref().unwrap_or("today")
                            ),
                        ));
                    }
                    held_within &= span.from <= from && to <= span.to;
                }
                None => held_within = false,
            }
        }
        if facts.filter_years.is_empty() && time_columns.is_empty() && !held_within {
            findings.push(Finding::new(
                Check::PeriodUnfiltered,
                format!("the question asks about {span}, but the query filters no date"),
            ));
        }
    }
    let asked = breakdown(answer.question);
    for (grain, words) in &asked.grains {
        if !facts
            .groupings
            .iter()
            .any(|grouping| grain.grouped_by(grouping))
        {
            let now = if facts.groupings.is_empty() {
                "has no GROUP BY".to_string()
            } else {
                format!("groups by {}", facts.groupings.join(", "))
            };
            findings.push(Finding::new(
                Check::Grouping,
                format!(
                    "the question asks for the result {words}, but the query {now}, not by {}",
                    grain.as_str()
                ),
            ));
        }
    }
    if let Some(words) = &asked.other {
        if !grouped && !facts.projection_subquery && answer.rows.len() == 1 {
            findings.push(Finding::new(
                Check::Grouping,
                format!(
                    "the question asks for the result {words}, but the query returns one row \
                     and has no GROUP BY"
                ),
            ));
        }
    }
    for join in &facts.repeating_joins {
        // A row list shows repeats only when they happened in this data: the same row
        // twice. (A total hides them; its keys are the evidence.)
        if join.affects == joins::Affects::Rows && !has_repeated_row(answer.rows) {
            continue;
        }
        findings.push(Finding::new(
            Check::RepeatedRows,
            format!(
                "the query joins {table} on {columns}, which is not a key of {table}, and reads \
                 none of its columns: each {repeated} row repeats once for every matching \
                 {table} row, which changes {affects}; leave {table} out unless the question \
                 needs it, and then test for it with EXISTS",
                table = join.table,
                columns = join.join_columns.join(", "),
                repeated = join.repeated,
                affects = join.affects,
            ),
        ));
    }
    for number in &facts.numbers_as_dates {
        findings.push(Finding::new(
            Check::NumberAsDate,
            format!(
                "the query applies {function} to {table}.{column}, whose values are years \
                 stored as numbers ({samples}), not dates: a date function reads them as no \
                 date or another one; compare {column} with the year itself",
                function = number.function,
                table = number.table,
                column = number.column,
                samples = number.samples.join(", "),
            ),
        ));
    }
    for written in &facts.spans_as_numbers {
        findings.push(Finding::new(
            Check::SpanAsNumber,
            format!(
                "the query computes {written}: SQLite reads both sides as numbers (a date as \
                 its year, '30 days' as 30), so the result is a number, not a date; a date \
                 relative to another is written date('now', '-30 days') or date(col, '+1 month')"
            ),
        ));
    }
    for outer in &facts.outer_columns {
        findings.push(Finding::new(
            Check::OuterColumn,
            format!(
                "the subquery over {inner} selects {column}, which {inner} does not have: the \
                 database takes it from the outer query's {owners}, so the IN list holds each \
                 outer row's own value; select the column of {inner} that holds it",
                inner = outer.inner_tables.join(", "),
                column = outer.column,
                owners = outer.owners.join(", "),
            ),
        ));
    }
    if let Some(declared) = &answer.notes.currency {
        for column in answer.columns {
            let words = crate::words::words(column, crate::words::Split::Alphanumeric);
            let named = CURRENCIES.iter().find(|(iso, _, names)| {
                !iso.eq_ignore_ascii_case(declared)
                    && words.iter().any(|word| names.contains(&word.as_str()))
            });
            if let Some((iso, _, _)) = named {
                findings.push(Finding::new(
                    Check::Currency,
                    format!(
                        "the result's column {column} names {iso}, but the notes say money here \
                         is in {declared}"
                    ),
                ));
                break;
            }
        }
    }
    findings
}

/// Whether two rows of the result are the same row.
fn has_repeated_row(rows: &[Vec<JsonValue>]) -> bool {
    let mut seen = std::collections::HashSet::new();
    rows.iter()
        .any(|row| !seen.insert(serde_json::to_string(row).unwrap_or_default()))
}

/// The years a text names on their own (`2025`, `2025-03-31`'s 2025).
fn years_in(text: &str) -> BTreeSet<i64> {
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
fn replace_word(text: &str, word: &str, by: &str) -> String {
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

#[cfg(test)]
mod tests;
