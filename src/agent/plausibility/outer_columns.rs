//! The `outer_column` rule: an `IN (SELECT col FROM t)` subquery whose one column is not
//! a column of its own tables.
//!
//! SQL resolves a name a subquery's tables lack in the enclosing query: `WHERE CountryId
//! NOT IN (SELECT CountryId FROM car_makers)` on a `car_makers` with no `CountryId`
//! compares every country with its own id, so NOT IN keeps nothing and IN keeps every
//! row while car_makers has rows. Neither SQLite nor PostgreSQL reports it; the result
//! (often empty, and an anti-join may rightly be empty) does not tell either. Small
//! models write it when they take the column name from the outer table.
//!
//! Only the subquery's select list is read, and only when every table of the subquery is
//! one the schema knows: a column reaching outward from a WHERE is a correlation and
//! usually meant; as the one column an IN list is built from, it is never what the
//! question asked (the list would hold the outer row's own value).

use std::ops::ControlFlow;

use sqlparser::ast::{
    visit_expressions, Expr, InTarget, ObjectNamePart, Query, SelectItem, SetExpr, Statement,
    TableFactor, Visit,
};

use super::dates::Tables;
use crate::schema::{table_named, TableSchema};

/// One IN-subquery that selects a column its own tables lack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OuterColumn {
    /// The column as written (`CountryId`, or `T1.CountryId`).
    pub column: String,
    /// The subquery's own tables, as the schema names them.
    pub inner_tables: Vec<String>,
    /// The statement's other tables that have a column of that name.
    pub owners: Vec<String>,
}

/// Every IN-subquery of the statement that selects a column none of its own tables has
/// but another table of the statement has.
pub(super) fn outer_columns(statement: &Statement, schema: &[TableSchema]) -> Vec<OuterColumn> {
    let mut statement_tables = Tables::default();
    let _ = statement.visit(&mut statement_tables);
    let mut found = Vec::new();
    let _ = visit_expressions(statement, |expr| {
        if let Expr::In {
            target: InTarget::Subquery(subquery),
            ..
        } = expr
        {
            found.extend(outer_column(subquery, &statement_tables.named, schema));
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

/// The subquery's one selected column when none of its own tables has it but one of the
/// statement's other tables does.
fn outer_column(
    subquery: &Query,
    statement_tables: &[String],
    schema: &[TableSchema],
) -> Option<OuterColumn> {
    let in_schema = |name: &str| table_named(schema, name);
    let has_column = |table: &TableSchema, column: &str| table.column_named(column).is_some();
    let inner = own_tables(subquery)?;
    let (qualifier, column) = single_column(subquery)?;
    // A qualifier naming one of the subquery's own tables is the subquery's column (and
    // an unknown one the database reports itself).
    if let Some(qualifier) = &qualifier {
        if inner.iter().any(|(name, alias)| {
            alias.eq_ignore_ascii_case(qualifier) || name.eq_ignore_ascii_case(qualifier)
        }) {
            return None;
        }
    }
    let inner_schemas = inner
        .iter()
        .map(|(name, _)| in_schema(name))
        .collect::<Option<Vec<&TableSchema>>>()?;
    if inner_schemas.iter().any(|table| has_column(table, &column)) {
        return None;
    }
    let owners: Vec<String> = statement_tables
        .iter()
        .filter_map(|name| in_schema(name))
        .filter(|table| has_column(table, &column))
        .map(|table| table.name.clone())
        .collect();
    if owners.is_empty() {
        return None;
    }
    Some(OuterColumn {
        column: match qualifier {
            Some(qualifier) => format!("{qualifier}.{column}"),
            None => column,
        },
        inner_tables: inner_schemas
            .iter()
            .map(|table| table.name.clone())
            .collect(),
        owners,
    })
}

/// The subquery's own FROM tables (name, name it is known by), or None when it is not a
/// plain SELECT over named tables (a derived table, a set operation).
fn own_tables(query: &Query) -> Option<Vec<(String, String)>> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let mut tables = Vec::new();
    for from in &select.from {
        for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
        {
            let TableFactor::Table { name, alias, .. } = factor else {
                return None;
            };
            let Some(ObjectNamePart::Identifier(ident)) = name.0.last() else {
                return None;
            };
            let known_as = alias
                .as_ref()
                .map_or_else(|| ident.value.clone(), |alias| alias.name.value.clone());
            tables.push((ident.value.clone(), known_as));
        }
    }
    (!tables.is_empty()).then_some(tables)
}

/// The subquery's one select item when it is a bare column: its qualifier and name.
fn single_column(query: &Query) -> Option<(Option<String>, String)> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let [item] = select.projection.as_slice() else {
        return None;
    };
    let expr = match item {
        SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => expr,
        _ => return None,
    };
    match expr {
        Expr::Identifier(ident) => Some((None, ident.value.clone())),
        Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
            Some((Some(parts[0].value.clone()), parts[1].value.clone()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use sqlparser::dialect::SQLiteDialect;
    use sqlparser::parser::Parser;

    use super::*;

    fn schema() -> Vec<TableSchema> {
        vec![
            TableSchema::for_tests(
                "countries",
                &["CountryId", "CountryName"],
                "TEXT",
                &["CountryId"],
            ),
            TableSchema::for_tests("car_makers", &["Id", "Maker", "Country"], "TEXT", &["Id"]),
        ]
    }

    fn found(sql: &str) -> Vec<OuterColumn> {
        let statements = Parser::parse_sql(&SQLiteDialect {}, sql).expect("test SQL parses");
        outer_columns(&statements[0], &schema())
    }

    #[test]
    fn an_in_list_of_the_outer_tables_column_is_found() {
        let outer = found(
            "SELECT CountryName FROM countries WHERE CountryId NOT IN \
             (SELECT CountryId FROM car_makers)",
        );
        assert_eq!(
            outer,
            vec![OuterColumn {
                column: "CountryId".to_string(),
                inner_tables: vec!["car_makers".to_string()],
                owners: vec!["countries".to_string()],
            }]
        );
        let qualified = found(
            "SELECT T1.CountryName FROM countries AS T1 WHERE T1.CountryId IN \
             (SELECT T1.CountryId FROM car_makers AS T2)",
        );
        assert_eq!(qualified.len(), 1);
        assert_eq!(qualified[0].column, "T1.CountryId");
    }

    #[test]
    fn the_subquerys_own_columns_and_correlations_are_left_alone() {
        for sql in [
            // Its own column, bare or qualified.
            "SELECT CountryName FROM countries WHERE CountryId NOT IN \
             (SELECT Country FROM car_makers)",
            "SELECT CountryName FROM countries WHERE CountryId IN \
             (SELECT m.Country FROM car_makers AS m)",
            // A correlation in the WHERE is the subquery's business.
            "SELECT CountryName FROM countries WHERE 1 IN \
             (SELECT 1 FROM car_makers WHERE Country = CountryId)",
            // A table the schema does not know: nothing can be said.
            "SELECT CountryName FROM countries WHERE CountryId IN \
             (SELECT CountryId FROM elsewhere)",
            // A column no table has is the database's error to report.
            "SELECT CountryName FROM countries WHERE CountryId IN \
             (SELECT Nowhere FROM car_makers)",
        ] {
            assert!(found(sql).is_empty(), "{sql}");
        }
    }
}
