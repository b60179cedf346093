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
    visit_expressions, visit_expressions_mut, Expr, Ident, InTarget, ObjectNamePart, Query,
    SelectItem, SetExpr, Statement, TableFactor, Visit,
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
    /// The subquery's columns a foreign key ties to an owner's column of that name
    /// (`car_makers.Country` for `countries.CountryId`), as `table.column`: what the
    /// list was most likely meant to hold, which the schema knows and the model's
    /// reply did not.
    pub keyed: Vec<String>,
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
    let owner_schemas: Vec<&TableSchema> =
        owners.iter().filter_map(|name| in_schema(name)).collect();
    let keyed = keyed_columns(&inner_schemas, &owner_schemas, &column);
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
        keyed,
    })
}

/// The inner tables' columns a single-column foreign key ties to an owner's `column`,
/// in either direction (the inner column references the owner's, or the owner's
/// references the inner column), written `table.column`, each once.
fn keyed_columns(inner: &[&TableSchema], owners: &[&TableSchema], column: &str) -> Vec<String> {
    let mut keyed: Vec<String> = Vec::new();
    let mut push = |table: &str, name: &str| {
        let written = format!("{table}.{name}");
        if !keyed.contains(&written) {
            keyed.push(written);
        }
    };
    for owner in owners {
        let Some(owner_column) = owner.column_named(column) else {
            continue;
        };
        for table in inner {
            for key in &table.foreign_keys {
                if let ([from], [to]) = (key.columns.as_slice(), key.references_columns.as_slice())
                {
                    if key.references_table.eq_ignore_ascii_case(&owner.name)
                        && to.eq_ignore_ascii_case(&owner_column.name)
                    {
                        push(&table.name, from);
                    }
                }
            }
            for key in &owner.foreign_keys {
                if let ([from], [to]) = (key.columns.as_slice(), key.references_columns.as_slice())
                {
                    if from.eq_ignore_ascii_case(&owner_column.name)
                        && key.references_table.eq_ignore_ascii_case(&table.name)
                    {
                        if let Some(inner_column) = table.column_named(to) {
                            push(&table.name, &inner_column.name);
                        }
                    }
                }
            }
        }
    }
    keyed
}

/// The rule's own fix, made without the model: in every IN-subquery that selects a
/// column its tables lack, the name is replaced by the one column a declared key ties
/// to it (`SELECT CountryId FROM car_makers` becomes `SELECT car_makers.Country FROM
/// car_makers`), wherever the subquery's own select writes it (its GROUP BY too), since
/// there the name can only have meant that column. None when a subquery has no such
/// column or more than one: then the model's repair is told the facts. On Spider's
/// tuning sample a 1.5B model told the column kept the outer one every time.
pub(super) fn with_keyed_columns(
    statement: &Statement,
    schema: &[TableSchema],
) -> Option<Statement> {
    let mut statement_tables = Tables::default();
    let _ = statement.visit(&mut statement_tables);
    let mut rewritten = statement.clone();
    let mut changed = 0;
    let mut failed = false;
    let _ = visit_expressions_mut(&mut rewritten, |expr| {
        if let Expr::In {
            target: InTarget::Subquery(subquery),
            ..
        } = expr
        {
            if let Some(outer) = outer_column(subquery, &statement_tables.named, schema) {
                match keyed_rename(subquery, &outer) {
                    Some(()) => changed += 1,
                    None => failed = true,
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    (changed > 0 && !failed).then_some(rewritten)
}

/// Writes the subquery's one keyed column wherever its select names the outer column.
fn keyed_rename(subquery: &mut Query, outer: &OuterColumn) -> Option<()> {
    let [keyed] = outer.keyed.as_slice() else {
        return None;
    };
    let (keyed_table, keyed_column) = keyed.split_once('.')?;
    let known_as = own_tables(subquery)?
        .into_iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(keyed_table))
        .map(|(_, known_as)| known_as)?;
    let (qualifier, column) = match outer.column.split_once('.') {
        Some((qualifier, column)) => (Some(qualifier.to_string()), column.to_string()),
        None => (None, outer.column.clone()),
    };
    let names_it = |expr: &Expr| match (expr, &qualifier) {
        (Expr::Identifier(ident), None) => ident.value.eq_ignore_ascii_case(&column),
        (Expr::CompoundIdentifier(parts), Some(qualifier)) => {
            parts.len() == 2
                && parts[0].value.eq_ignore_ascii_case(qualifier)
                && parts[1].value.eq_ignore_ascii_case(&column)
        }
        _ => false,
    };
    let SetExpr::Select(select) = subquery.body.as_mut() else {
        return None;
    };
    let replacement = Expr::CompoundIdentifier(vec![
        Ident::new(known_as),
        Ident::new(keyed_column.to_string()),
    ]);
    let _ = visit_expressions_mut(select.as_mut(), |expr| {
        if names_it(expr) {
            *expr = replacement.clone();
        }
        ControlFlow::<()>::Continue(())
    });
    Some(())
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
            TableSchema {
                foreign_keys: vec![crate::schema::ForeignKey {
                    columns: vec!["Country".to_string()],
                    references_table: "countries".to_string(),
                    references_columns: vec!["CountryId".to_string()],
                }],
                ..TableSchema::for_tests("car_makers", &["Id", "Maker", "Country"], "TEXT", &["Id"])
            },
            TableSchema::for_tests("model_list", &["ModelId", "Maker", "Model"], "TEXT", &[]),
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
                keyed: vec!["car_makers.Country".to_string()],
            }]
        );
        let qualified = found(
            "SELECT T1.CountryName FROM countries AS T1 WHERE T1.CountryId IN \
             (SELECT T1.CountryId FROM car_makers AS T2)",
        );
        assert_eq!(qualified.len(), 1);
        assert_eq!(qualified[0].column, "T1.CountryId");
        assert_eq!(qualified[0].keyed, vec!["car_makers.Country".to_string()]);
    }

    #[test]
    fn the_key_is_found_from_either_side_and_only_where_one_is_declared() {
        // The owner's column references the subquery's table: that column is named.
        let schema = vec![
            TableSchema {
                foreign_keys: vec![crate::schema::ForeignKey {
                    columns: vec!["Maker".to_string()],
                    references_table: "car_makers".to_string(),
                    references_columns: vec!["Id".to_string()],
                }],
                ..TableSchema::for_tests("model_list", &["ModelId", "Maker"], "TEXT", &[])
            },
            TableSchema::for_tests("car_makers", &["Id", "FullName"], "TEXT", &["Id"]),
        ];
        let statements = Parser::parse_sql(
            &SQLiteDialect {},
            "SELECT ModelId FROM model_list WHERE Maker IN (SELECT Maker FROM car_makers)",
        )
        .expect("test SQL parses");
        let outer = outer_columns(&statements[0], &schema);
        assert_eq!(outer.len(), 1);
        assert_eq!(outer[0].keyed, vec!["car_makers.Id".to_string()]);
        // No key between the tables: nothing is guessed.
        let unkeyed =
            found("SELECT Model FROM model_list WHERE ModelId IN (SELECT ModelId FROM car_makers)");
        assert_eq!(unkeyed.len(), 1);
        assert!(unkeyed[0].keyed.is_empty(), "{unkeyed:?}");
    }

    fn fixed(sql: &str) -> Option<String> {
        let statements = Parser::parse_sql(&SQLiteDialect {}, sql).expect("test SQL parses");
        with_keyed_columns(&statements[0], &schema()).map(|statement| statement.to_string())
    }

    #[test]
    fn the_keyed_column_replaces_the_outer_one_throughout_the_subquery() {
        assert_eq!(
            fixed(
                "SELECT CountryName FROM countries WHERE CountryId NOT IN \
                 (SELECT CountryId FROM car_makers)"
            )
            .as_deref(),
            Some(
                "SELECT CountryName FROM countries WHERE CountryId NOT IN \
                 (SELECT car_makers.Country FROM car_makers)"
            )
        );
        assert_eq!(
            fixed(
                "SELECT COUNT(*) FROM countries AS T1 WHERE T1.CountryId IN \
                 (SELECT T1.CountryId FROM car_makers AS m GROUP BY T1.CountryId \
                 HAVING COUNT(*) > 2)"
            )
            .as_deref(),
            Some(
                "SELECT COUNT(*) FROM countries AS T1 WHERE T1.CountryId IN \
                 (SELECT m.Country FROM car_makers AS m GROUP BY m.Country HAVING COUNT(*) > 2)"
            )
        );
        // No declared key to follow, or nothing wrong: no fix.
        assert_eq!(
            fixed("SELECT Model FROM model_list WHERE ModelId IN (SELECT ModelId FROM car_makers)"),
            None
        );
        assert_eq!(
            fixed(
                "SELECT CountryName FROM countries WHERE CountryId IN \
                 (SELECT Country FROM car_makers)"
            ),
            None
        );
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
