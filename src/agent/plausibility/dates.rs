//! The `number_as_date` rule: a date function applied to a column whose values are years
//! stored as plain numbers (`2014` or `'2014'`).
//!
//! Small models reach for `strftime('%Y', year)` whenever a question names a year. On a
//! column that holds the year itself this is never right: SQLite reads the number as a
//! Julian day (`strftime('%Y', 2014)` is `-4707`) or the digits as no date at all (NULL),
//! and PostgreSQL's `EXTRACT` of an integer is an error the database reports itself.
//! Neither the declared type (Spider's `concert.Year` is TEXT) nor the result tells; the
//! column's own values do. The cards
//! keep up to three distinct real values per column, and a column holds years here when
//! it has at least one and every one is four digits from 1000 to 2999.
//!
//! Other columns of digits (ids, a day stored as `20131021`) are left alone: a date
//! function is wrong on them too, but the repair has no fact to give. In the Spider run
//! that first tried them, all three such repairs were told "compare it with the number
//! itself" and filtered an id by the question's year, or a day by the sample values.
//!
//! A call with a modifier that reads numbers as time (`'unixepoch'`, `'auto'`,
//! `'julianday'`) is what such a column needs, and is left alone; so are columns whose
//! table cannot be told from the statement (a bare name two of its tables share).

use std::collections::HashMap;
use std::ops::ControlFlow;

use sqlparser::ast::{
    visit_expressions, visit_expressions_mut, BinaryOperator, DateTimeField, Expr, FunctionArg,
    FunctionArgExpr, FunctionArguments, ObjectNamePart, Statement, TableFactor, Value, Visit,
    Visitor,
};

use crate::linking::cards::TableCard;
use crate::schema::{table_named, TableSchema};

/// Functions that read their argument as a date or time.
const DATE_FUNCTIONS: &[&str] = &[
    "strftime",
    "date",
    "datetime",
    "julianday",
    "time",
    "unixepoch",
    "date_part",
    "date_trunc",
];

/// SQLite modifiers that make a date function read a number as time.
const NUMERIC_TIME_MODIFIERS: &[&str] = &["unixepoch", "auto", "julianday"];

/// One column of years stored as numbers, read as a date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NumberAsDate {
    /// The table as the schema names it.
    pub table: String,
    /// The column as the schema names it.
    pub column: String,
    /// The function as written (`strftime`, `EXTRACT`).
    pub function: String,
    /// The column's sample values, as the cards show them.
    pub samples: Vec<String>,
}

/// Every column of years stored as numbers that the statement reads through a date
/// function, once each.
pub(super) fn numbers_read_as_dates(
    statement: &Statement,
    schema: &[TableSchema],
    cards: &[TableCard],
) -> Vec<NumberAsDate> {
    if cards.is_empty() {
        return Vec::new();
    }
    let mut tables = Tables::default();
    let _ = statement.visit(&mut tables);
    let mut calls = DateCalls::default();
    let _ = statement.visit(&mut calls);
    let mut found: Vec<NumberAsDate> = Vec::new();
    for (function, column) in calls.columns {
        let Some((table, column)) = tables.resolve(&column, schema) else {
            continue;
        };
        let Some(samples) = cards
            .iter()
            .find(|card| card.table.eq_ignore_ascii_case(&table.name))
            .and_then(|card| card.samples.get(&column.to_lowercase()))
        else {
            continue;
        };
        let years = !samples.is_empty()
            && samples.iter().all(|value| {
                let digits = value.trim_matches('\'');
                digits.len() == 4
                    && digits.chars().all(|c| c.is_ascii_digit())
                    && (digits.starts_with('1') || digits.starts_with('2'))
            });
        let already = found.iter().any(|seen| {
            seen.table.eq_ignore_ascii_case(&table.name)
                && seen.column.eq_ignore_ascii_case(&column)
        });
        if years && !already {
            found.push(NumberAsDate {
                table: table.name.clone(),
                column,
                function,
                samples: samples.clone(),
            });
        }
    }
    found
}

/// The statement with every year taken out of a column of years compared as the column
/// itself: `strftime('%Y', year)`, `EXTRACT(YEAR FROM year)` and `date_part('year', year)`
/// become `year` (SQLite and PostgreSQL compare the number with `'2014'` or `2014` alike,
/// by the column's affinity). None when there is nothing to take out, or when another
/// date function still reads such a column afterwards (`date(year)`, `strftime('%m',
/// year)`: what was meant is not known), so the model's repair is asked instead.
///
/// The rule writes this fix itself because the model's repair, told the column holds
/// years, wrote `year = CAST(year AS TEXT)`, true of every row (decision 0009).
pub(super) fn with_years_compared_as_numbers(
    statement: &Statement,
    schema: &[TableSchema],
    cards: &[TableCard],
) -> Option<Statement> {
    let flagged = numbers_read_as_dates(statement, schema, cards);
    if flagged.is_empty() {
        return None;
    }
    let mut tables = Tables::default();
    let _ = statement.visit(&mut tables);
    let is_flagged = |column: &ColumnRef| {
        tables.resolve(column, schema).is_some_and(|(table, name)| {
            flagged.iter().any(|found| {
                found.table.eq_ignore_ascii_case(&table.name)
                    && found.column.eq_ignore_ascii_case(&name)
            })
        })
    };
    let mut rewritten = statement.clone();
    let mut replaced = 0;
    let _ = visit_expressions_mut(&mut rewritten, |expr| {
        if let Some(column) = year_of_column(expr)
            .filter(|column| column_ref(column).is_some_and(|reference| is_flagged(&reference)))
        {
            *expr = column.clone();
            replaced += 1;
        }
        ControlFlow::<()>::Continue(())
    });
    let left = numbers_read_as_dates(&rewritten, schema, cards);
    (replaced > 0 && left.is_empty()).then_some(rewritten)
}

/// The column a call takes the year of, when the call is exactly that:
/// `strftime('%Y', c)`, `EXTRACT(YEAR FROM c)`, `date_part('year', c)`.
fn year_of_column(expr: &Expr) -> Option<&Expr> {
    match expr {
        Expr::Extract { field, expr, .. } => {
            matches!(field, DateTimeField::Year).then_some(expr.as_ref())
        }
        Expr::Function(function) => {
            let Some(ObjectNamePart::Identifier(name)) = function.name.0.last() else {
                return None;
            };
            let FunctionArguments::List(list) = &function.args else {
                return None;
            };
            let [FunctionArg::Unnamed(FunctionArgExpr::Expr(first)), FunctionArg::Unnamed(FunctionArgExpr::Expr(second))] =
                list.args.as_slice()
            else {
                return None;
            };
            let Expr::Value(value) = first else {
                return None;
            };
            let Value::SingleQuotedString(text) = &value.value else {
                return None;
            };
            let lowered = name.value.to_lowercase();
            let takes_year = (lowered == "strftime" && text == "%Y")
                || (lowered == "date_part" && text.eq_ignore_ascii_case("year"));
            takes_year.then_some(second)
        }
        _ => None,
    }
}

/// A column as written: its qualifier (lower-cased, when there is one) and its name.
#[derive(Debug, Clone)]
struct ColumnRef {
    qualifier: Option<String>,
    name: String,
}

/// The tables the statement names, by the name each is known by (alias or own name).
#[derive(Default)]
pub(super) struct Tables {
    known_as: HashMap<String, String>,
    /// Every table the statement names, lowercased, once each, in order.
    pub named: Vec<String>,
}

impl Tables {
    /// The schema's table and column a reference means, when the statement says which.
    fn resolve<'s>(
        &self,
        column: &ColumnRef,
        schema: &'s [TableSchema],
    ) -> Option<(&'s TableSchema, String)> {
        let in_schema = |table_name: &str| table_named(schema, table_name);
        let has_column =
            |table: &TableSchema| table.column_named(&column.name).map(|own| own.name.clone());
        match &column.qualifier {
            Some(qualifier) => {
                let table = in_schema(self.known_as.get(qualifier)?)?;
                has_column(table).map(|name| (table, name))
            }
            None => {
                let mut holders = self
                    .named
                    .iter()
                    .filter_map(|name| in_schema(name))
                    .filter_map(|table| has_column(table).map(|name| (table, name)));
                let first = holders.next()?;
                // A bare name two tables share is the database's to resolve, not ours.
                let another =
                    holders.any(|(table, _)| !table.name.eq_ignore_ascii_case(&first.0.name));
                (!another).then_some(first)
            }
        }
    }
}

impl Visitor for Tables {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, alias, .. } = factor {
            if let Some(ObjectNamePart::Identifier(ident)) = name.0.last() {
                let table = ident.value.to_lowercase();
                let known_as = alias
                    .as_ref()
                    .map_or_else(|| table.clone(), |alias| alias.name.value.to_lowercase());
                self.known_as.insert(known_as, table.clone());
                if !self.named.contains(&table) {
                    self.named.push(table);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// Columns passed straight to a date function, with the function's name as written.
#[derive(Default)]
struct DateCalls {
    columns: Vec<(String, ColumnRef)>,
}

fn column_ref(expr: &Expr) -> Option<ColumnRef> {
    match expr {
        Expr::Nested(inner) => column_ref(inner),
        Expr::Identifier(ident) => Some(ColumnRef {
            qualifier: None,
            name: ident.value.clone(),
        }),
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 => Some(ColumnRef {
            qualifier: Some(parts[parts.len() - 2].value.to_lowercase()),
            name: parts[parts.len() - 1].value.clone(),
        }),
        _ => None,
    }
}

impl Visitor for DateCalls {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        match expr {
            Expr::Extract { expr: inner, .. } => {
                if let Some(column) = column_ref(inner) {
                    self.columns.push(("EXTRACT".to_string(), column));
                }
            }
            Expr::Function(function) => {
                let Some(ObjectNamePart::Identifier(name)) = function.name.0.last() else {
                    return ControlFlow::Continue(());
                };
                let lowered = name.value.to_lowercase();
                if !DATE_FUNCTIONS.contains(&lowered.as_str()) {
                    return ControlFlow::Continue(());
                }
                let FunctionArguments::List(list) = &function.args else {
                    return ControlFlow::Continue(());
                };
                let arguments: Vec<&Expr> = list
                    .args
                    .iter()
                    .filter_map(|argument| match argument {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => Some(expr),
                        _ => None,
                    })
                    .collect();
                let reads_numbers_as_time = arguments.iter().any(|argument| {
                    matches!(argument, Expr::Value(value)
                        if matches!(&value.value, Value::SingleQuotedString(text)
                            if NUMERIC_TIME_MODIFIERS.contains(&text.to_lowercase().as_str())))
                });
                if !reads_numbers_as_time {
                    for argument in arguments {
                        if let Some(column) = column_ref(argument) {
                            self.columns.push((name.value.clone(), column));
                        }
                    }
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// SQLite's spellings of a span of time in a date modifier (`'-30 days'`, `'1 month'`).
const SPAN_UNITS: &[&str] = &[
    "second", "seconds", "minute", "minutes", "hour", "hours", "day", "days", "week", "weeks",
    "month", "months", "year", "years",
];

/// Whether a text is a span of time (`30 days`, `-1 month`).
fn is_span(text: &str) -> bool {
    let mut words = text.split_whitespace();
    let (Some(count), Some(unit), None) = (words.next(), words.next(), words.next()) else {
        return false;
    };
    let digits = count.trim_start_matches(['+', '-']);
    !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        && SPAN_UNITS.contains(&unit.to_lowercase().as_str())
}

/// Every `+` or `-` with a span of time written as text on one side
/// (`strftime('%Y-%m-%d', 'now') - '30 days'`), as written. SQLite reads both sides as
/// numbers: the date as its leading year and `'30 days'` as 30, so the result is a
/// number like 1995, never a date; `date('now', '-30 days')` is what was meant.
pub(super) fn spans_as_numbers(statement: &Statement) -> Vec<String> {
    let mut found = Vec::new();
    let _ = visit_expressions(statement, |expr| {
        if let Expr::BinaryOp { left, op, right } = expr {
            let additive = matches!(op, BinaryOperator::Plus | BinaryOperator::Minus);
            let sides: [&Expr; 2] = [left, right];
            let span_side = sides.iter().any(|side| {
                matches!(side, Expr::Value(value)
                    if matches!(&value.value, Value::SingleQuotedString(text) if is_span(text)))
            });
            let written = expr.to_string();
            if additive && span_side && !found.contains(&written) {
                found.push(written);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use sqlparser::parser::Parser;

    use super::*;

    fn table(name: &str, columns: &[&str]) -> TableSchema {
        TableSchema::for_tests(name, columns, "TEXT", &[])
    }

    fn card(name: &str, samples: &[(&str, &[&str])]) -> TableCard {
        let samples: BTreeMap<String, Vec<String>> = samples
            .iter()
            .map(|(column, values)| {
                (
                    column.to_lowercase(),
                    values.iter().map(|value| value.to_string()).collect(),
                )
            })
            .collect();
        TableCard::new(name, "", String::new(), std::iter::empty(), &[], samples)
    }

    fn flagged(sql: &str) -> Vec<String> {
        let schema = vec![
            table("concert", &["concert_ID", "Year", "Stadium_ID"]),
            table("stadium", &["Stadium_ID", "Name", "Opened"]),
            table("visit", &["Visit_ID", "Visit_Date", "Year"]),
        ];
        let cards = vec![
            card(
                "concert",
                &[
                    ("concert_id", &["1", "2"]),
                    ("year", &["'2014'", "'2015'"]),
                    ("stadium_id", &["1"]),
                ],
            ),
            card(
                "stadium",
                &[("name", &["'Hampden'"]), ("opened", &["1700000000"])],
            ),
            card(
                "visit",
                &[("visit_date", &["'2014-05-01'"]), ("year", &["2014"])],
            ),
        ];
        let statements =
            Parser::parse_sql(&sqlparser::dialect::SQLiteDialect {}, sql).expect("test SQL parses");
        numbers_read_as_dates(&statements[0], &schema, &cards)
            .into_iter()
            .map(|found| format!("{}.{} {}", found.table, found.column, found.function))
            .collect()
    }

    #[test]
    fn a_date_function_over_a_column_of_plain_numbers_is_flagged() {
        assert_eq!(
            flagged("SELECT count(*) FROM concert WHERE strftime('%Y', Year) = '2014'"),
            vec!["concert.Year strftime"]
        );
        assert_eq!(
            flagged(
                "SELECT s.Name FROM stadium s JOIN concert c ON c.Stadium_ID = s.Stadium_ID \
                 WHERE CAST(strftime('%Y', c.Year) AS INTEGER) > 2013"
            ),
            vec!["concert.Year strftime"]
        );
        assert_eq!(
            flagged("SELECT EXTRACT(YEAR FROM c.Year) FROM concert AS c"),
            vec!["concert.Year EXTRACT"]
        );
    }

    #[test]
    fn dates_numbers_read_as_time_and_unresolved_names_are_left_alone() {
        // The column holds dates.
        assert!(flagged("SELECT strftime('%Y', Visit_Date) FROM visit").is_empty());
        // Numbers read as seconds since 1970, as the modifier says.
        assert!(flagged("SELECT date(Opened, 'unixepoch') FROM stadium").is_empty());
        // The year compared as the number it is.
        assert!(flagged("SELECT count(*) FROM concert WHERE Year = '2014'").is_empty());
        // `Year` is a column of both concert and visit: which one is not ours to say.
        assert!(flagged(
            "SELECT strftime('%Y', Year) FROM concert JOIN visit ON concert.concert_ID = visit.Visit_ID"
        )
        .is_empty());
        // Digits that are no year: an id, a day written 20131021.
        assert!(flagged("SELECT strftime('%Y', concert_ID) FROM concert").is_empty());
        assert!(flagged("SELECT date(Opened) FROM stadium").is_empty());
        // No samples for the column: nothing to weigh.
        assert!(flagged("SELECT strftime('%Y', Stadium_ID) FROM stadium").is_empty());
    }

    #[test]
    fn each_column_is_reported_once() {
        assert_eq!(
            flagged(
                "SELECT strftime('%Y', Year) FROM concert WHERE strftime('%Y', Year) IN ('2014', '2015')"
            ),
            vec!["concert.Year strftime"]
        );
    }

    fn fixed(sql: &str) -> Option<String> {
        let schema = vec![
            table("concert", &["concert_ID", "Year", "Stadium_ID"]),
            table("stadium", &["Stadium_ID", "Name", "Opened"]),
        ];
        let cards = vec![card(
            "concert",
            &[("concert_id", &["1", "2"]), ("year", &["'2014'", "'2015'"])],
        )];
        let statements =
            Parser::parse_sql(&sqlparser::dialect::SQLiteDialect {}, sql).expect("test SQL parses");
        with_years_compared_as_numbers(&statements[0], &schema, &cards)
            .map(|statement| statement.to_string())
    }

    #[test]
    fn the_year_taken_out_of_a_column_of_years_is_the_column_itself() {
        assert_eq!(
            fixed("SELECT count(*) FROM concert WHERE strftime('%Y', Year) = '2014'").as_deref(),
            Some("SELECT count(*) FROM concert WHERE Year = '2014'")
        );
        assert_eq!(
            fixed(
                "SELECT T1.Name FROM stadium AS T1 JOIN concert AS T2 ON T1.Stadium_ID = T2.Stadium_ID \
                 WHERE CAST(strftime('%Y', T2.Year) AS INTEGER) > 2013 GROUP BY strftime('%Y', T2.Year)"
            )
            .as_deref(),
            Some(
                "SELECT T1.Name FROM stadium AS T1 JOIN concert AS T2 ON T1.Stadium_ID = T2.Stadium_ID \
                 WHERE CAST(T2.Year AS INTEGER) > 2013 GROUP BY T2.Year"
            )
        );
        assert_eq!(
            fixed("SELECT EXTRACT(YEAR FROM c.Year) FROM concert AS c").as_deref(),
            Some("SELECT c.Year FROM concert AS c")
        );
        assert_eq!(
            fixed("SELECT date_part('year', Year) FROM concert").as_deref(),
            Some("SELECT Year FROM concert")
        );
    }

    #[test]
    fn no_fix_is_written_when_a_date_function_would_still_read_the_years() {
        // A date of a year, a month of a year: what was meant is not the rules' to say.
        assert_eq!(
            fixed("SELECT count(*) FROM concert WHERE date(Year) > '2014-12-31'"),
            None
        );
        assert_eq!(
            fixed(
                "SELECT count(*) FROM concert WHERE strftime('%Y', Year) = '2014' \
                 AND strftime('%m', Year) = '05'"
            ),
            None
        );
        // Nothing read as a date: nothing to fix.
        assert_eq!(
            fixed("SELECT count(*) FROM concert WHERE Year = '2014'"),
            None
        );
        assert_eq!(fixed("SELECT strftime('%Y', Opened) FROM stadium"), None);
    }

    fn spans(sql: &str) -> Vec<String> {
        let statements =
            Parser::parse_sql(&sqlparser::dialect::SQLiteDialect {}, sql).expect("test SQL parses");
        spans_as_numbers(&statements[0])
    }

    #[test]
    fn a_span_of_time_added_to_a_date_as_text_is_found() {
        assert_eq!(
            spans(
                "SELECT count(*) FROM visit WHERE Visit_Date >= \
                 strftime('%Y-%m-%d', 'now') - '30 days'"
            ),
            vec!["strftime('%Y-%m-%d', 'now') - '30 days'"]
        );
        assert_eq!(
            spans("SELECT * FROM visit WHERE Visit_Date > '2025-01-01' + '-1 month'").len(),
            1
        );
    }

    #[test]
    fn date_modifiers_and_plain_arithmetic_are_left_alone() {
        for sql in [
            "SELECT count(*) FROM visit WHERE Visit_Date >= date('now', '-30 days')",
            "SELECT Price - 30 FROM visit",
            "SELECT Name || ' days' FROM visit",
            "SELECT Price - '30' FROM visit",
        ] {
            assert!(spans(sql).is_empty(), "{sql}");
        }
    }
}
