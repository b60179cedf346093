//! The empty-result diagnostic: zero rows is not a failure to retry until something
//! comes back. This module reads the query that returned nothing and says what the one
//! diagnostic should be:
//!
//! - an anti-join (NOT EXISTS, NOT IN, EXCEPT, LEFT JOIN ... IS NULL) may rightly find
//!   nothing: no diagnostic;
//! - text equality and LIKE filters are rewritten case- and space-insensitively
//!   (`LOWER(TRIM(CAST(col AS TEXT))) = LOWER(TRIM('value'))`, `AS CHAR` on MySQL, names
//!   quoted as the dialect quotes them); the agent runs that text
//!   once through the gate: rows mean the casing was wrong (one repair), nothing means
//!   "no rows match", unless (with the strategy's `values=on`) the value index says
//!   another column stores a filter's value: one repair told where it is kept
//!   (`'Africa' is not a value of Region; it is stored in country.Continent`);
//! - the text filters are reported so the agent can tell an exact-key lookup
//!   (`bill_no = 'NOPE-1'`), which is answered honestly, from a search.
//!
//! Rewriting happens on the parsed tree; the rewritten statement still passes the guard.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};
use sqlparser::ast::{
    visit_expressions, visit_expressions_mut, BinaryOperator, Expr, JoinOperator, SetExpr,
    Statement, TableFactor, Value, Visit, Visitor,
};
use sqlparser::parser::Parser;

use std::collections::BTreeSet;

use serde_json::Value as JsonValue;

use crate::gate::{Gate, QueryOutcome, QueryResult, SqlDialect};
use crate::schema::{ColumnSchema, TableSchema};
use crate::sql_text::{quote_literal, quote_name};

/// A text filter of the query: `column = 'value'` or `column LIKE 'pattern'`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextFilter {
    /// The qualifier as written (`b` in `b.status`), if any.
    pub qualifier: Option<String>,
    pub column: String,
    pub value: String,
    pub is_like: bool,
}

/// What the diagnostic found in a query that returned nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmptyAnalysis {
    /// The query is an anti-join: an empty answer may be the right one.
    pub anti_join: bool,
    pub text_filters: Vec<TextFilter>,
    /// Other filters (ranges, numbers, subqueries) are present besides text filters.
    pub other_filters: bool,
    /// The query with every text filter made case- and space-insensitive.
    pub case_insensitive_sql: Option<String>,
}

fn column_of(expr: &Expr) -> Option<(Option<String>, String)> {
    match expr {
        Expr::Identifier(ident) => Some((None, ident.value.clone())),
        Expr::CompoundIdentifier(idents) => {
            let column = idents.last()?.value.clone();
            let qualifier = idents
                .len()
                .checked_sub(2)
                .and_then(|index| idents.get(index))
                .map(|ident| ident.value.clone());
            Some((qualifier, column))
        }
        Expr::Nested(inner) => column_of(inner),
        _ => None,
    }
}

fn text_of(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Value(value) => match &value.value {
            Value::SingleQuotedString(text) => Some(text.clone()),
            _ => None,
        },
        Expr::Nested(inner) => text_of(inner),
        _ => None,
    }
}

/// The text filter an expression is, if it is one.
fn as_text_filter(expr: &Expr) -> Option<(TextFilter, &Expr)> {
    match expr {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => {
            let (column_expr, value) = match (column_of(left), text_of(right)) {
                (Some(_), Some(value)) => (left.as_ref(), value),
                _ => match (column_of(right), text_of(left)) {
                    (Some(_), Some(value)) => (right.as_ref(), value),
                    _ => return None,
                },
            };
            let (qualifier, column) = column_of(column_expr)?;
            Some((
                TextFilter {
                    qualifier,
                    column,
                    value,
                    is_like: false,
                },
                column_expr,
            ))
        }
        Expr::Like {
            negated: false,
            expr: column_expr,
            pattern,
            ..
        }
        | Expr::ILike {
            negated: false,
            expr: column_expr,
            pattern,
            ..
        } => {
            let (qualifier, column) = column_of(column_expr)?;
            let value = text_of(pattern)?;
            Some((
                TextFilter {
                    qualifier,
                    column,
                    value,
                    is_like: true,
                },
                column_expr.as_ref(),
            ))
        }
        _ => None,
    }
}

/// Reads a query that returned nothing.
pub fn analyse(sql: &str, dialect: SqlDialect) -> Option<EmptyAnalysis> {
    let parser = dialect.parser_dialect();
    let mut statements = Parser::parse_sql(parser.as_ref(), sql).ok()?;
    if statements.len() != 1 {
        return None;
    }
    let mut statement = statements.remove(0);
    let anti_join = is_anti_join(&statement);

    let mut text_filters = Vec::new();
    let mut other_filters = false;
    let _ = visit_expressions(&statement, |expr| {
        if let Some((filter, _)) = as_text_filter(expr) {
            text_filters.push(filter);
        } else if matches!(
            expr,
            Expr::BinaryOp {
                op: BinaryOperator::Lt
                    | BinaryOperator::LtEq
                    | BinaryOperator::Gt
                    | BinaryOperator::GtEq
                    | BinaryOperator::NotEq,
                ..
            } | Expr::Between { .. }
                | Expr::In { .. }
        ) {
            other_filters = true;
        }
        ControlFlow::<()>::Continue(())
    });

    let case_insensitive_sql = if text_filters.is_empty() {
        None
    } else {
        let mut failed = false;
        let _ = visit_expressions_mut(&mut statement, |expr| {
            let replacement = as_text_filter(expr).map(|(filter, column_expr)| {
                let column = column_expr.to_string();
                let normalised = text_normalised(dialect, &column);
                if filter.is_like {
                    format!("{normalised} LIKE LOWER({})", quote_literal(&filter.value))
                } else {
                    format!(
                        "{normalised} = LOWER(TRIM({}))",
                        quote_literal(&filter.value)
                    )
                }
            });
            if let Some(text) = replacement {
                match Parser::new(parser.as_ref())
                    .try_with_sql(&text)
                    .and_then(|mut parser| parser.parse_expr())
                {
                    Ok(new_expr) => *expr = new_expr,
                    Err(_) => failed = true,
                }
            }
            ControlFlow::<()>::Continue(())
        });
        (!failed).then(|| statement.to_string())
    };
    Some(EmptyAnalysis {
        anti_join,
        text_filters,
        other_filters,
        case_insensitive_sql,
    })
}

/// No rows, only NULLs, or one row of zeros and NULLs (`count(*)` = 0, `SUM` = NULL):
/// what a filter that matched nothing looks like.
pub fn looks_empty(rows: &[Vec<JsonValue>]) -> bool {
    let zero_or_null =
        |value: &JsonValue| value.is_null() || value.as_f64().is_some_and(|number| number == 0.0);
    rows.is_empty()
        || rows.iter().all(|row| row.iter().all(JsonValue::is_null))
        || (rows.len() == 1 && rows[0].iter().all(zero_or_null))
}

/// A column's value as lower-case text without surrounding spaces, in the dialect's own
/// cast (MySQL and MariaDB cast to CHAR, having no `CAST(x AS TEXT)`).
fn text_normalised(dialect: SqlDialect, column: &str) -> String {
    format!(
        "LOWER(TRIM(CAST({column} AS {})))",
        dialect.text_cast_type()
    )
}

/// What the one diagnostic of an empty result decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Diagnosis {
    /// Nothing to repair, and a reason the empty answer is right: an anti-join, or a
    /// lookup by key of a row that does not exist.
    Explained(String),
    /// Nothing to repair, and nothing says why no rows match.
    Stands(String),
    /// The text filters match when case and spaces are ignored: one repair, with the
    /// stored spellings as facts.
    CaseMismatch {
        probe_sql: String,
        findings: Vec<String>,
    },
    /// Nothing matches even with case ignored, but a filter's value is stored in another
    /// column (the value index says which): one repair, with where each value is kept.
    ValueElsewhere { findings: Vec<String> },
}

/// Where a value is stored: (table, column) pairs, from the value index
/// ([`crate::linking::SchemaIndex::columns_holding`]); a lookup that finds nothing turns
/// the check off.
pub type ValueHolders<'a> = &'a (dyn Fn(&str) -> Vec<(String, String)> + Sync);

/// Runs the one diagnostic of an empty result through the gate: an anti-join or a
/// lookup by key stands; otherwise the case-insensitive rewrite runs once, and rows
/// from it mean the stored spelling differs.
pub async fn diagnose(
    gate: &Gate,
    result: &QueryResult,
    holders: ValueHolders<'_>,
) -> (Diagnosis, Option<String>) {
    let Some(analysis) = analyse(&result.sql, gate.dialect()) else {
        return (
            Diagnosis::Stands("the query could not be analysed".to_string()),
            None,
        );
    };
    if analysis.anti_join {
        return (
            Diagnosis::Explained("an anti-join: nothing may be the right answer".to_string()),
            None,
        );
    }
    let Some(probe_sql) = analysis.case_insensitive_sql.clone() else {
        return (
            Diagnosis::Stands("no text filters: no rows match".to_string()),
            None,
        );
    };
    let keys = key_columns(gate, &result.tables);
    let only_key_lookups = analysis
        .text_filters
        .iter()
        .all(|filter| !filter.is_like && keys.contains(&filter.column.to_lowercase()));
    if only_key_lookups && !analysis.other_filters {
        return (
            Diagnosis::Explained("an exact-key lookup: no such row".to_string()),
            None,
        );
    }
    let probe = gate.run_query(&probe_sql).await;
    let matched = matches!(&probe, QueryOutcome::Rows(rows) if !looks_empty(&rows.rows));
    if !matched {
        let mut elsewhere = Vec::new();
        for (filter, places) in stored_elsewhere(
            &analysis.text_filters,
            &result.tables,
            gate.schema(),
            holders,
        ) {
            let (column, held) = filtered_column_values(gate, &result.tables, &filter).await;
            elsewhere.push(super::prompts::value_elsewhere_fact(
                &column,
                &filter.value,
                &held,
                &places,
            ));
        }
        if !elsewhere.is_empty() {
            return (
                Diagnosis::ValueElsewhere {
                    findings: elsewhere,
                },
                Some(probe_sql),
            );
        }
        return (
            Diagnosis::Stands(
                "the case-insensitive probe finds nothing either: no rows match".to_string(),
            ),
            Some(probe_sql),
        );
    }
    let mut findings = Vec::new();
    for filter in &analysis.text_filters {
        if let Some(finding) = stored_spelling(gate, &result.tables, filter).await {
            findings.push(finding);
        }
    }
    (
        Diagnosis::CaseMismatch {
            probe_sql: probe_sql.clone(),
            findings,
        },
        Some(probe_sql),
    )
}

/// For each equality filter whose value the filtered column does not hold, the other
/// columns that do (`country.Continent` for `Region = 'Africa'`). A holder with the
/// filter's own column name in a table the query reads is that column (the value is
/// there; other conditions excluded its rows), so it says nothing. Each place is written as the schema spells it (the value index
/// keeps names in lower case, for matching).
fn stored_elsewhere(
    filters: &[TextFilter],
    tables: &[String],
    schema: &[crate::schema::TableSchema],
    holders: ValueHolders<'_>,
) -> Vec<(TextFilter, Vec<String>)> {
    /// Enough places to choose from without reading the schema back to the model.
    const MAX_HOLDERS: usize = 3;
    let read = |table: &str| tables.iter().any(|name| name.eq_ignore_ascii_case(table));
    let mut findings = Vec::new();
    for filter in filters.iter().filter(|filter| !filter.is_like) {
        let found = holders(&filter.value);
        if found
            .iter()
            .any(|(table, column)| column.eq_ignore_ascii_case(&filter.column) && read(table))
        {
            continue;
        }
        let places: Vec<String> = found
            .iter()
            .take(MAX_HOLDERS)
            .map(|(table, column)| {
                let spelled = crate::schema::table_named(schema, table).and_then(|owner| {
                    let named = owner.column_named(column)?;
                    Some(format!("{}.{}", owner.name, named.name))
                });
                spelled.unwrap_or_else(|| format!("{table}.{column}"))
            })
            .collect();
        if places.is_empty() {
            continue;
        }
        findings.push((filter.clone(), places));
    }
    findings
}

/// The filtered column as `table.column` and a few values it does hold, read through
/// the gate: where two tables share a column's name (`flights.Airline` keeps a number,
/// `airlines.Airline` the name), the bare name told a repair nothing, and the values
/// show what the filtered column is (a key to join on, a code).
async fn filtered_column_values(
    gate: &Gate,
    tables: &[String],
    filter: &TextFilter,
) -> (String, Vec<String>) {
    /// Enough to show what kind of value the column keeps.
    const SHOWN_VALUES: usize = 3;
    let Some((table, column)) = filtered_owner(gate, tables, filter) else {
        return (filter.column.clone(), Vec::new());
    };
    let dialect = gate.dialect();
    let quoted = quote_name(dialect, &column.name);
    let sql = format!(
        "SELECT DISTINCT {quoted} FROM {} WHERE {quoted} IS NOT NULL LIMIT {SHOWN_VALUES}",
        quote_name(dialect, &table.name)
    );
    let held = match gate.run_query(&sql).await {
        QueryOutcome::Rows(rows) => first_column_literals(&rows.rows),
        QueryOutcome::Failed(_) => Vec::new(),
    };
    (format!("{}.{}", table.name, column.name), held)
}

/// The table the query reads that has the filtered column, and that column, as the
/// schema spells them: the first such table (the filter's qualifier is not resolved).
fn filtered_owner<'a>(
    gate: &'a Gate,
    tables: &[String],
    filter: &TextFilter,
) -> Option<(&'a TableSchema, &'a ColumnSchema)> {
    gate.schema()
        .iter()
        .filter(|table| {
            tables
                .iter()
                .any(|name| name.eq_ignore_ascii_case(&table.name))
        })
        .find_map(|table| Some((table, table.column_named(&filter.column)?)))
}

/// Each row's first value as a repair is told it: text as an SQL literal.
fn first_column_literals(rows: &[Vec<JsonValue>]) -> Vec<String> {
    rows.iter()
        .filter_map(|row| row.first())
        .map(|value| match value {
            JsonValue::String(text) => quote_literal(text),
            other => other.to_string(),
        })
        .collect()
}

/// Single-column primary and unique keys of the given tables (lower-cased).
fn key_columns(gate: &Gate, tables: &[String]) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for table in gate.schema() {
        if !tables
            .iter()
            .any(|name| name.eq_ignore_ascii_case(&table.name))
        {
            continue;
        }
        if let [key] = table.primary_key.as_slice() {
            keys.insert(key.to_lowercase());
        }
        for unique in &table.unique {
            if let [key] = unique.as_slice() {
                keys.insert(key.to_lowercase());
            }
        }
    }
    keys
}

/// How a filter's value is really spelled in the table that owns the column.
async fn stored_spelling(gate: &Gate, tables: &[String], filter: &TextFilter) -> Option<String> {
    let (owner, _) = filtered_owner(gate, tables, filter)?;
    let dialect = gate.dialect();
    let column = quote_name(dialect, &filter.column);
    let literal = quote_literal(&filter.value);
    let normalised = text_normalised(dialect, &column);
    let condition = if filter.is_like {
        format!("{normalised} LIKE LOWER({literal})")
    } else {
        format!("{normalised} = LOWER(TRIM({literal}))")
    };
    let sql = format!(
        "SELECT DISTINCT {column} FROM {} WHERE {condition} LIMIT 5",
        quote_name(dialect, &owner.name)
    );
    let QueryOutcome::Rows(rows) = gate.run_query(&sql).await else {
        return None;
    };
    let values = first_column_literals(&rows.rows);
    if values.is_empty() {
        return None;
    }
    Some(super::prompts::stored_spelling_fact(
        &owner.name,
        &filter.column,
        filter.is_like,
        &filter.value,
        &values,
    ))
}

fn is_anti_join(statement: &Statement) -> bool {
    struct AntiJoin {
        found: bool,
        left_join: bool,
        is_null: bool,
    }
    impl Visitor for AntiJoin {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            match expr {
                Expr::Exists { negated: true, .. } | Expr::In { negated: true, .. } => {
                    self.found = true
                }
                Expr::IsNull(_) => self.is_null = true,
                _ => {}
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_query(&mut self, query: &sqlparser::ast::Query) -> ControlFlow<()> {
            if let SetExpr::SetOperation {
                op: sqlparser::ast::SetOperator::Except,
                ..
            } = query.body.as_ref()
            {
                self.found = true;
            }
            if let SetExpr::Select(select) = query.body.as_ref() {
                for from in &select.from {
                    for join in &from.joins {
                        if matches!(
                            join.join_operator,
                            JoinOperator::Left(_) | JoinOperator::LeftOuter(_)
                        ) {
                            self.left_join = true;
                        }
                    }
                }
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_table_factor(&mut self, _factor: &TableFactor) -> ControlFlow<()> {
            ControlFlow::Continue(())
        }
    }
    let mut visitor = AntiJoin {
        found: false,
        left_join: false,
        is_null: false,
    };
    let _ = statement.visit(&mut visitor);
    visitor.found || (visitor.left_join && visitor.is_null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_filters_are_made_case_and_space_insensitive() {
        let analysis = analyse(
            "SELECT count(*) FROM bills b WHERE b.status = 'paid' AND b.total_amt > 100 LIMIT 200",
            SqlDialect::Sqlite,
        )
        .expect("parses");
        assert!(!analysis.anti_join);
        assert!(analysis.other_filters);
        assert_eq!(
            analysis.text_filters,
            vec![TextFilter {
                qualifier: Some("b".into()),
                column: "status".into(),
                value: "paid".into(),
                is_like: false
            }]
        );
        assert_eq!(
            analysis.case_insensitive_sql.as_deref(),
            Some("SELECT count(*) FROM bills b WHERE LOWER(TRIM(CAST(b.status AS TEXT))) = LOWER(TRIM('paid')) AND b.total_amt > 100 LIMIT 200")
        );
    }

    #[test]
    fn like_filters_and_literals_on_the_left_are_found() {
        let analysis = analyse(
            "SELECT * FROM products WHERE prod_name LIKE '%teflon%' OR 'X' = unit",
            SqlDialect::Postgres,
        )
        .expect("parses");
        assert_eq!(analysis.text_filters.len(), 2);
        let sql = analysis.case_insensitive_sql.expect("rewritten");
        assert!(
            sql.contains("LOWER(TRIM(CAST(prod_name AS TEXT))) LIKE LOWER('%teflon%')"),
            "{sql}"
        );
        assert!(
            sql.contains("LOWER(TRIM(CAST(unit AS TEXT))) = LOWER(TRIM('X'))"),
            "{sql}"
        );
    }

    #[test]
    fn anti_joins_are_recognised() {
        for sql in [
            "SELECT c.cust_name FROM customers c WHERE NOT EXISTS (SELECT 1 FROM bills b WHERE b.cust_id = c.cust_id)",
            "SELECT cust_name FROM customers WHERE cust_id NOT IN (SELECT cust_id FROM bills WHERE cust_id IS NOT NULL)",
            "SELECT c.cust_name FROM customers c LEFT JOIN bills b ON b.cust_id = c.cust_id WHERE b.bill_id IS NULL",
            "SELECT cust_id FROM customers EXCEPT SELECT cust_id FROM bills",
        ] {
            assert!(analyse(sql, SqlDialect::Postgres).expect("parses").anti_join, "{sql}");
        }
        assert!(
            !analyse(
                "SELECT * FROM bills WHERE bill_no = 'NOPE-1'",
                SqlDialect::Sqlite
            )
            .expect("parses")
            .anti_join
        );
    }

    #[test]
    fn queries_without_text_filters_have_no_rewrite() {
        let analysis = analyse(
            "SELECT * FROM bills WHERE total_amt > 1e9",
            SqlDialect::Sqlite,
        )
        .expect("parses");
        assert!(analysis.text_filters.is_empty());
        assert!(analysis.case_insensitive_sql.is_none());
    }
}
