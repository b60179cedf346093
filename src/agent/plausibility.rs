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
//!   takes the outer query's (`plausibility/outer_columns.rs` says exactly when); the
//!   finding names the subquery's column a declared key ties to the outer one.
//! - `unkeyed_join`: a join's ON equates two columns no declared key ties, between tables
//!   whose keys the schema declares (`plausibility/join_keys.rs` says exactly when); the
//!   finding lists the keys of both tables, the path the join should take.
//! - `currency`: a result column named after a currency other than the one the notes
//!   declare (`total_usd` on a database that bills in INR).
//! - `explanation_period`, `explanation_currency`: the written answer names a year
//!   neither the question nor the rows hold, or money in another currency than the
//!   notes'. A foreign currency is corrected to the declared one (the notes are the
//!   authority on what the money is); a year is flagged, as the right words are unknown.
//!
//! The named periods are read in `plausibility/periods.rs`, the breakdown a question
//! asks for in `plausibility/breakdown.rs`, the facts of the SQL's tree in
//! `plausibility/sql_facts.rs`, and the written answer is checked in
//! `plausibility/explanation.rs`; this file holds the rules that weigh them.
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

mod breakdown;
mod dates;
mod explanation;
mod join_keys;
mod joins;
mod outer_columns;
mod periods;
mod sql_facts;

use breakdown::*;
pub use explanation::check_explanation;
use periods::*;
pub use periods::{named_period, YearSpan};
use sql_facts::*;

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
    UnkeyedJoin,
    Currency,
    ExplanationPeriod,
    ExplanationCurrency,
}

impl Check {
    pub const ALL: [Check; 13] = [
        Check::PeriodFilter,
        Check::PeriodRows,
        Check::PeriodUnfiltered,
        Check::TablePeriod,
        Check::Grouping,
        Check::RepeatedRows,
        Check::NumberAsDate,
        Check::SpanAsNumber,
        Check::OuterColumn,
        Check::UnkeyedJoin,
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
            Check::UnkeyedJoin => "unkeyed_join",
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

/// SQL the rules wrote to mend a failure without the model (a suspect answer's
/// findings here, a join on a column its table lacks in `repair_facts`), and what it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleFix {
    pub sql: String,
    /// What was changed, for the trace ("without the repeating join").
    pub change: String,
}

/// The rules' own fix of a suspect answer, written without the model: `repeated_rows`
/// takes out the joins that repeat rows ([`joins`] says how), `number_as_date` compares a
/// column of years as the year it holds (`plausibility/dates.rs`), `outer_column` selects
/// the subquery's keyed column (`plausibility/outer_columns.rs`), `unkeyed_join` joins
/// through the declared keys (`plausibility/join_keys.rs`). None when a finding
/// is of another check, or a fix cannot be written exactly; then the model's repair is
/// told the facts. The caller runs the SQL through the gate like any other statement.
pub fn rule_fix(answer: &Answer<'_>, findings: &[Finding]) -> Option<RuleFix> {
    let fixable = |check: Check| {
        matches!(
            check,
            Check::RepeatedRows | Check::NumberAsDate | Check::OuterColumn | Check::UnkeyedJoin
        )
    };
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
    if found(Check::OuterColumn) {
        fixed = outer_columns::with_keyed_columns(&fixed, answer.schema)?;
        changes.push("with the subquery's keyed column in place of the outer one");
    }
    if found(Check::UnkeyedJoin) {
        fixed = join_keys::with_keyed_joins(&fixed, answer.schema, answer.dialect)?;
        changes.push("joined through the declared keys");
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
        // The key the schema declares between the two tables says which column of the
        // subquery holds the outer values; without one, the model is told to find it.
        let which = if outer.keyed.is_empty() {
            format!(
                "select the column of {} that holds it",
                outer.inner_tables.join(", ")
            )
        } else {
            format!(
                "{} holds those values (a foreign key ties it to {}): select it",
                outer.keyed.join(" or "),
                outer.owners.join(", ")
            )
        };
        findings.push(Finding::new(
            Check::OuterColumn,
            format!(
                "the subquery over {inner} selects {column}, which {inner} does not have: the \
                 database takes it from the outer query's {owners}, so the IN list holds each \
                 outer row's own value; {which}",
                inner = outer.inner_tables.join(", "),
                column = outer.column,
                owners = outer.owners.join(", "),
            ),
        ));
    }
    for join in &facts.unkeyed_joins {
        let path = join
            .path
            .as_ref()
            .map(|path| format!("; joined by its keys: {path}"))
            .unwrap_or_default();
        findings.push(Finding::new(
            Check::UnkeyedJoin,
            format!(
                "the join {} equates two columns no declared key ties together, so it pairs \
                 rows that merely share a number; the keys of these tables: {}{path}",
                join.condition,
                join.keys.join("; ")
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

#[cfg(test)]
mod tests;
