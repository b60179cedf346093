//! The `unkeyed_join` rule: a join whose ON condition equates two columns that no
//! declared key ties together, between tables whose keys the schema does declare.
//!
//! A small model joins on whichever two id-like columns it sees (`stadium.Stadium_ID =
//! singer_in_concert.concert_ID`, `battle.id = death.caused_by_ship_id`): the query runs,
//! rows come back, and they pair a stadium with whatever concert shares its number. The
//! schema knows better: `concert.Stadium_ID` references `stadium.Stadium_ID`, and the
//! path goes through `concert`. The rule names the keys of the two tables so the repair
//! can join through them.
//!
//! It speaks only where the keys decide: both columns belong to tables the schema knows
//! (not a derived table or a renamed alias), the two tables differ, and either a key is
//! declared between these two tables, or each takes part in some declared key (so a
//! database that declares none, or a table left out of its keys, is never judged). A
//! pair is left alone when a single-column foreign key ties it in either direction, when
//! both columns reference the same column (two children of one parent), or when the two
//! columns have the same name (a natural join key the schema did not declare). On
//! Spider's 1,034 dev gold queries the rule flags none.

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, Join, JoinConstraint, JoinOperator, ObjectNamePart, Query, SetExpr,
    Statement, TableFactor, TableWithJoins, Visit, VisitMut, Visitor, VisitorMut,
};
use sqlparser::parser::Parser;

use super::joins::qualified;
use crate::gate::SqlDialect;
use crate::schema::{table_named, ForeignKey, TableSchema};
use crate::sql_text::quote_name;

/// One ON equality between columns no declared key ties, with the keys that do exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct UnkeyedJoin {
    /// The equality as `table.column = table.column`, with the schema's names.
    pub condition: String,
    /// The declared foreign keys of either table, or into either table, as
    /// `child.column references parent.column`.
    pub keys: Vec<String>,
    /// The shortest chain of declared keys from one table to the other, written as the
    /// joins that follow it (`continents JOIN countries ON countries.Continent =
    /// continents.ContId JOIN car_makers ON car_makers.Country = countries.CountryId`):
    /// a small model copies a written join far more readily than it builds one from a
    /// list of keys. None when no chain of at most three keys links them.
    pub path: Option<String>,
}

/// Every ON equality of the statement's selects that joins on columns no key ties.
pub(super) fn unkeyed_joins(statement: &Statement, schema: &[TableSchema]) -> Vec<UnkeyedJoin> {
    if schema.iter().all(|table| table.foreign_keys.is_empty()) {
        return Vec::new();
    }
    let mut walker = Walker {
        schema,
        found: Vec::new(),
    };
    let _ = statement.visit(&mut walker);
    walker.found
}

struct Walker<'a> {
    schema: &'a [TableSchema],
    found: Vec<UnkeyedJoin>,
}

impl Visitor for Walker<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        self.set(query.body.as_ref());
        ControlFlow::Continue(())
    }
}

impl Walker<'_> {
    fn set(&mut self, set: &SetExpr) {
        match set {
            SetExpr::Select(select) => {
                for from in &select.from {
                    let mut bound: Vec<(String, &TableSchema)> = Vec::new();
                    for factor in std::iter::once(&from.relation)
                        .chain(from.joins.iter().map(|join| &join.relation))
                    {
                        if let Some(binding) = binding(factor, self.schema) {
                            bound.push(binding);
                        }
                    }
                    for join in &from.joins {
                        if let Some(on) = on_condition(&join.join_operator) {
                            self.weigh(on, &bound);
                        }
                    }
                }
            }
            SetExpr::SetOperation { left, right, .. } => {
                self.set(left);
                self.set(right);
            }
            // Nested queries are visited as queries of their own.
            _ => {}
        }
    }

    fn weigh(&mut self, on: &Expr, bound: &[(String, &TableSchema)]) {
        let mut stack = vec![on];
        while let Some(expr) = stack.pop() {
            match expr {
                Expr::Nested(inner) => stack.push(inner),
                Expr::BinaryOp {
                    left,
                    op: BinaryOperator::And,
                    right,
                } => {
                    stack.push(left);
                    stack.push(right);
                }
                Expr::BinaryOp {
                    left,
                    op: BinaryOperator::Eq,
                    right,
                } => {
                    let resolve = |expr: &Expr| {
                        let (qualifier, column) = qualified(expr)?;
                        let (_, table) = bound
                            .iter()
                            .find(|(name, _)| name.eq_ignore_ascii_case(&qualifier))?;
                        let column = table.column_named(&column)?;
                        Some((*table, column.name.clone()))
                    };
                    if let (Some(left), Some(right)) = (resolve(left), resolve(right)) {
                        if let Some(found) = unkeyed(left, right, self.schema) {
                            if !self.found.contains(&found) {
                                self.found.push(found);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// The ON condition of a join, whatever its kind.
fn on_condition(operator: &JoinOperator) -> Option<&Expr> {
    let constraint = match operator {
        JoinOperator::Join(constraint)
        | JoinOperator::Inner(constraint)
        | JoinOperator::Left(constraint)
        | JoinOperator::LeftOuter(constraint)
        | JoinOperator::Right(constraint)
        | JoinOperator::RightOuter(constraint)
        | JoinOperator::FullOuter(constraint) => constraint,
        _ => return None,
    };
    match constraint {
        JoinConstraint::On(expr) => Some(expr),
        _ => None,
    }
}

/// A FROM item that is a table the schema knows, by the name the query calls it; None
/// for anything else, and for an alias that renames the table's columns.
fn binding<'a>(
    factor: &TableFactor,
    schema: &'a [TableSchema],
) -> Option<(String, &'a TableSchema)> {
    let TableFactor::Table {
        name, alias, args, ..
    } = factor
    else {
        return None;
    };
    if args.is_some()
        || alias
            .as_ref()
            .is_some_and(|alias| !alias.columns.is_empty())
    {
        return None;
    }
    let ObjectNamePart::Identifier(ident) = name.0.last()? else {
        return None;
    };
    let table = table_named(schema, &ident.value)?;
    let known_as = alias
        .as_ref()
        .map_or_else(|| ident.value.clone(), |alias| alias.name.value.clone());
    Some((known_as, table))
}

/// The one column a single-column foreign key maps, as (from, table, to).
fn single(key: &ForeignKey) -> Option<(&str, &str, &str)> {
    match (key.columns.as_slice(), key.references_columns.as_slice()) {
        ([from], [to]) => Some((from, &key.references_table, to)),
        _ => None,
    }
}

/// Whether `table` declares a key or is the parent of one.
fn takes_part_in_keys(table: &TableSchema, schema: &[TableSchema]) -> bool {
    !table.foreign_keys.is_empty()
        || schema.iter().any(|other| {
            other
                .foreign_keys
                .iter()
                .any(|key| key.references_table.eq_ignore_ascii_case(&table.name))
        })
}

/// The finding for `left = right`, when no declared key ties them and the keys decide.
fn unkeyed(
    (left_table, left_column): (&TableSchema, String),
    (right_table, right_column): (&TableSchema, String),
    schema: &[TableSchema],
) -> Option<UnkeyedJoin> {
    if left_table.name.eq_ignore_ascii_case(&right_table.name)
        || left_column.eq_ignore_ascii_case(&right_column)
    {
        return None;
    }
    let references = |child: &TableSchema, column: &str| -> Vec<(String, String)> {
        child
            .foreign_keys
            .iter()
            .filter_map(single)
            .filter(|(from, _, _)| from.eq_ignore_ascii_case(column))
            .map(|(_, table, to)| (table.to_lowercase(), to.to_lowercase()))
            .collect()
    };
    let left_refs = references(left_table, &left_column);
    let right_refs = references(right_table, &right_column);
    let points_at = |refs: &[(String, String)], table: &TableSchema, column: &str| {
        refs.iter().any(|(parent, to)| {
            parent.eq_ignore_ascii_case(&table.name) && to.eq_ignore_ascii_case(column)
        })
    };
    if points_at(&left_refs, right_table, &right_column)
        || points_at(&right_refs, left_table, &left_column)
        || left_refs.iter().any(|target| right_refs.contains(target))
    {
        return None;
    }
    let declared_between = |child: &TableSchema, parent: &TableSchema| {
        child
            .foreign_keys
            .iter()
            .any(|key| key.references_table.eq_ignore_ascii_case(&parent.name))
    };
    let keys_decide = declared_between(left_table, right_table)
        || declared_between(right_table, left_table)
        || (takes_part_in_keys(left_table, schema) && takes_part_in_keys(right_table, schema));
    if !keys_decide {
        return None;
    }
    Some(UnkeyedJoin {
        condition: format!(
            "{}.{left_column} = {}.{right_column}",
            left_table.name, right_table.name
        ),
        keys: keys_of(&[left_table, right_table], schema),
        path: key_path(left_table, right_table, schema),
    })
}

/// The longest chain of keys a path may follow: beyond three hops the join is rarely
/// what a question meant, and the sentence stops being one a model copies.
const MAX_PATH_KEYS: usize = 3;

/// One step of a chain of keys: `JOIN table ON table.column = from.from_column`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hop {
    from: String,
    from_column: String,
    table: String,
    column: String,
}

/// The shortest chain of single-column keys from `from` to `to` (breadth first, keys in
/// the schema's order, so the same schema always gives the same chain).
fn key_hops(from: &TableSchema, to: &TableSchema, schema: &[TableSchema]) -> Option<Vec<Hop>> {
    // Every key as an edge both ways: (table, its column, other table, other's column).
    let mut edges: Vec<(&str, &str, &str, &str)> = Vec::new();
    for child in schema {
        for (column, parent, parent_column) in child.foreign_keys.iter().filter_map(single) {
            let Some(parent) = table_named(schema, parent) else {
                continue;
            };
            edges.push((
                child.name.as_str(),
                column,
                parent.name.as_str(),
                parent_column,
            ));
            edges.push((
                parent.name.as_str(),
                parent_column,
                child.name.as_str(),
                column,
            ));
        }
    }
    let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    // Each entry: the tables visited, and the hops taken so far.
    let mut frontier: Vec<(Vec<&str>, Vec<Hop>)> = vec![(vec![from.name.as_str()], Vec::new())];
    for _ in 0..MAX_PATH_KEYS {
        let mut next = Vec::new();
        for (visited, hops) in &frontier {
            let here = *visited.last()?;
            for (table, column, other, other_column) in &edges {
                if !same(table, here) || visited.iter().any(|seen| same(seen, other)) {
                    continue;
                }
                let mut hops = hops.clone();
                hops.push(Hop {
                    from: here.to_string(),
                    from_column: column.to_string(),
                    table: other.to_string(),
                    column: other_column.to_string(),
                });
                if same(other, &to.name) {
                    return Some(hops);
                }
                let mut visited = visited.clone();
                visited.push(other);
                next.push((visited, hops));
            }
        }
        frontier = next;
    }
    None
}

/// The chain of keys from `from` to `to`, written as the joins that follow it.
fn key_path(from: &TableSchema, to: &TableSchema, schema: &[TableSchema]) -> Option<String> {
    let hops = key_hops(from, to, schema)?;
    let joins: Vec<String> = hops
        .iter()
        .map(|hop| {
            format!(
                "JOIN {table} ON {table}.{column} = {from}.{from_column}",
                table = hop.table,
                column = hop.column,
                from = hop.from,
                from_column = hop.from_column
            )
        })
        .collect();
    Some(format!("{} {}", from.name, joins.join(" ")))
}

/// The rule's own fix, made without the model: each join on columns no key ties is
/// rewritten to follow the chain of declared keys between its two tables, the tables in
/// between joined under their own names (`continents JOIN car_makers ON
/// continents.ContId = car_makers.Country` becomes `continents JOIN countries ON
/// countries.Continent = continents.ContId JOIN car_makers ON car_makers.Country =
/// countries.CountryId`). None when any such join cannot be rewritten exactly: its ON
/// holds more than the one equality, it is not an inner join, no chain links the tables,
/// or a table in between is already in its FROM list. On Spider's tuning sample a 1.5B
/// model told the keys and the joins wrote the same join again every time.
pub(super) fn with_keyed_joins(
    statement: &Statement,
    schema: &[TableSchema],
    dialect: SqlDialect,
) -> Option<Statement> {
    let mut rewritten = statement.clone();
    let mut rewrite = Rewrite {
        schema,
        dialect,
        changed: 0,
        failed: false,
    };
    let _ = VisitMut::visit(&mut rewritten, &mut rewrite);
    (rewrite.changed > 0 && !rewrite.failed).then_some(rewritten)
}

struct Rewrite<'a> {
    schema: &'a [TableSchema],
    dialect: SqlDialect,
    changed: usize,
    failed: bool,
}

impl VisitorMut for Rewrite<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        self.set(query.body.as_mut());
        ControlFlow::Continue(())
    }
}

impl Rewrite<'_> {
    fn set(&mut self, set: &mut SetExpr) {
        match set {
            SetExpr::Select(select) => {
                for from in &mut select.from {
                    self.from(from);
                }
            }
            SetExpr::SetOperation { left, right, .. } => {
                self.set(left);
                self.set(right);
            }
            _ => {}
        }
    }

    fn from(&mut self, from: &mut TableWithJoins) {
        let mut index = 0;
        while index < from.joins.len() {
            let bound: Vec<Option<(String, &TableSchema)>> = std::iter::once(&from.relation)
                .chain(from.joins.iter().map(|join| &join.relation))
                .map(|factor| binding(factor, self.schema))
                .collect();
            let Some(on) = on_condition(&from.joins[index].join_operator) else {
                index += 1;
                continue;
            };
            let Some((earlier, joined)) = self.unkeyed_sides(on, &bound, index + 1) else {
                index += 1;
                continue;
            };
            match self.keyed_joins(&bound, earlier, joined, &from.joins[index].join_operator) {
                Some((inserted, operator)) => {
                    let count = inserted.len();
                    from.joins[index].join_operator = operator;
                    for (offset, join) in inserted.into_iter().enumerate() {
                        from.joins.insert(index + offset, join);
                    }
                    self.changed += 1;
                    index += count + 1;
                }
                None => {
                    self.failed = true;
                    return;
                }
            }
        }
    }

    /// When the join at `position` is ON one equality of columns no key ties, between
    /// its own table and an earlier one: (the earlier table's position, `position`).
    fn unkeyed_sides(
        &self,
        on: &Expr,
        bound: &[Option<(String, &TableSchema)>],
        position: usize,
    ) -> Option<(usize, usize)> {
        let mut on = on;
        while let Expr::Nested(inner) = on {
            on = inner;
        }
        let Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = on
        else {
            return None;
        };
        let locate = |expr: &Expr| {
            let (qualifier, column) = qualified(expr)?;
            let at = bound[..=position].iter().position(|entry| {
                entry
                    .as_ref()
                    .is_some_and(|(name, _)| name.eq_ignore_ascii_case(&qualifier))
            })?;
            let (_, table) = bound[at].as_ref()?;
            Some((at, (*table, table.column_named(&column)?.name.clone())))
        };
        let (left_at, left) = locate(left)?;
        let (right_at, right) = locate(right)?;
        unkeyed(left, right, self.schema)?;
        match (left_at == position, right_at == position) {
            (true, false) => Some((right_at, position)),
            (false, true) => Some((left_at, position)),
            _ => None,
        }
    }

    /// The joins to insert before the joined table and its new ON, following the chain
    /// of keys from the earlier table to it.
    fn keyed_joins(
        &self,
        bound: &[Option<(String, &TableSchema)>],
        earlier: usize,
        joined: usize,
        operator: &JoinOperator,
    ) -> Option<(Vec<Join>, JoinOperator)> {
        if !matches!(operator, JoinOperator::Join(_) | JoinOperator::Inner(_)) {
            return None;
        }
        let (earlier_name, earlier_table) = bound[earlier].as_ref()?;
        let (joined_name, joined_table) = bound[joined].as_ref()?;
        let hops = key_hops(earlier_table, joined_table, self.schema)?;
        let (last, between) = hops.split_last()?;
        // A table in between that the FROM list already names would be read twice
        // under one name.
        if between.iter().any(|hop| {
            bound.iter().flatten().any(|(name, table)| {
                name.eq_ignore_ascii_case(&hop.table) || table.name.eq_ignore_ascii_case(&hop.table)
            })
        }) {
            return None;
        }
        // Names the query wrote (aliases) are written back as they were read; the
        // schema's are quoted only where the engine would not read them bare as spelled
        // (PostgreSQL folds a bare name to lower case).
        let plain = |name: &str| {
            name.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        let written = |name: &str| {
            if plain(name) {
                name.to_string()
            } else {
                quote_name(self.dialect, name)
            }
        };
        let schema_name = |name: &str| {
            let folds = self.dialect == SqlDialect::Postgres && name.to_lowercase() != name;
            if plain(name) && !folds {
                name.to_string()
            } else {
                quote_name(self.dialect, name)
            }
        };
        let name_of = |table: &str| {
            if table.eq_ignore_ascii_case(&earlier_table.name) {
                written(earlier_name)
            } else {
                schema_name(table)
            }
        };
        let mut text = format!("SELECT 1 FROM {}", written(earlier_name));
        for hop in between {
            text.push_str(&format!(
                " JOIN {table} ON {table}.{column} = {from}.{from_column}",
                table = schema_name(&hop.table),
                column = schema_name(&hop.column),
                from = name_of(&hop.from),
                from_column = schema_name(&hop.from_column),
            ));
        }
        text.push_str(&format!(
            " JOIN {joined} ON {joined}.{column} = {from}.{from_column}",
            joined = written(joined_name),
            column = schema_name(&last.column),
            from = name_of(&last.from),
            from_column = schema_name(&last.from_column),
        ));
        let parsed = Parser::parse_sql(&*self.dialect.parser_dialect(), &text).ok()?;
        let Some(Statement::Query(query)) = parsed.into_iter().next() else {
            return None;
        };
        let SetExpr::Select(select) = *query.body else {
            return None;
        };
        let mut joins = select.from.into_iter().next()?.joins;
        let operator = joins.pop()?.join_operator;
        Some((joins, operator))
    }
}

/// The declared foreign keys of the tables and into them, in the schema's words, at
/// most eight.
fn keys_of(tables: &[&TableSchema], schema: &[TableSchema]) -> Vec<String> {
    let named = |name: &str| {
        tables
            .iter()
            .any(|table| table.name.eq_ignore_ascii_case(name))
    };
    let mut keys = Vec::new();
    for child in schema {
        for key in &child.foreign_keys {
            if !(named(&child.name) || named(&key.references_table)) {
                continue;
            }
            let parent = table_named(schema, &key.references_table)
                .map_or(key.references_table.as_str(), |table| table.name.as_str());
            let written = format!(
                "{}.{} references {parent}.{}",
                child.name,
                key.columns.join(", "),
                key.references_columns.join(", ")
            );
            if !keys.contains(&written) {
                keys.push(written);
            }
        }
    }
    keys.truncate(8);
    keys
}

#[cfg(test)]
mod tests {
    use sqlparser::dialect::SQLiteDialect;
    use sqlparser::parser::Parser;

    use super::*;

    fn key(column: &str, table: &str, to: &str) -> ForeignKey {
        ForeignKey {
            columns: vec![column.to_string()],
            references_table: table.to_string(),
            references_columns: vec![to.to_string()],
        }
    }

    fn table(name: &str, columns: &[&str], keys: Vec<ForeignKey>) -> TableSchema {
        TableSchema {
            foreign_keys: keys,
            ..TableSchema::for_tests(name, columns, "INT", &columns[..1])
        }
    }

    /// Spider's concert_singer, and a table outside every key.
    fn schema() -> Vec<TableSchema> {
        vec![
            table("stadium", &["Stadium_ID", "Name"], vec![]),
            table("singer", &["Singer_ID", "Name"], vec![]),
            table(
                "concert",
                &["concert_ID", "Stadium_ID", "Year"],
                vec![key("Stadium_ID", "stadium", "Stadium_ID")],
            ),
            table(
                "singer_in_concert",
                &["concert_ID", "Singer_ID"],
                vec![
                    key("concert_ID", "concert", "concert_ID"),
                    key("Singer_ID", "singer", "Singer_ID"),
                ],
            ),
            table("festival", &["festival_id", "stadium_ref"], vec![]),
        ]
    }

    fn found(sql: &str) -> Vec<UnkeyedJoin> {
        let statements = Parser::parse_sql(&SQLiteDialect {}, sql).expect("test SQL parses");
        unkeyed_joins(&statements[0], &schema())
    }

    #[test]
    fn a_join_on_columns_no_key_ties_is_found_with_the_keys_that_exist() {
        let unkeyed = found(
            "SELECT T1.Name, COUNT(T2.concert_ID) FROM stadium AS T1 \
             JOIN singer_in_concert AS T2 ON T1.Stadium_ID = T2.concert_ID GROUP BY T1.Name",
        );
        assert_eq!(unkeyed.len(), 1, "{unkeyed:?}");
        assert_eq!(
            unkeyed[0].condition,
            "stadium.Stadium_ID = singer_in_concert.concert_ID"
        );
        assert_eq!(
            unkeyed[0].path.as_deref(),
            Some(
                "stadium JOIN concert ON concert.Stadium_ID = stadium.Stadium_ID \
                 JOIN singer_in_concert ON singer_in_concert.concert_ID = concert.concert_ID"
            )
        );
        assert!(
            unkeyed[0]
                .keys
                .contains(&"concert.Stadium_ID references stadium.Stadium_ID".to_string())
                && unkeyed[0].keys.contains(
                    &"singer_in_concert.concert_ID references concert.concert_ID".to_string()
                ),
            "{:?}",
            unkeyed[0].keys
        );
        // The same in a subquery and in a set operation's branch.
        assert_eq!(
            found(
                "SELECT Name FROM singer WHERE Singer_ID IN (SELECT s.Singer_ID FROM \
                 singer_in_concert AS s JOIN stadium ON stadium.Stadium_ID = s.Singer_ID)"
            )
            .len(),
            1
        );
        assert_eq!(
            found(
                "SELECT Name FROM stadium UNION SELECT c.Year FROM concert AS c \
                 JOIN singer ON singer.Singer_ID = c.Stadium_ID"
            )
            .len(),
            1
        );
    }

    #[test]
    fn joins_the_keys_allow_are_left_alone() {
        for sql in [
            // The declared key, either way round.
            "SELECT T2.Name FROM concert AS T1 JOIN stadium AS T2 ON T1.Stadium_ID = T2.Stadium_ID",
            "SELECT T2.Name FROM stadium AS T2 JOIN concert AS T1 ON T2.Stadium_ID = T1.Stadium_ID",
            "SELECT c.Year FROM singer_in_concert AS s JOIN concert AS c ON c.concert_ID = s.concert_ID",
            // Two children of one parent.
            "SELECT 1 FROM singer_in_concert AS a JOIN singer_in_concert AS b ON a.concert_ID = b.concert_ID",
            // A table outside every key is not judged.
            "SELECT 1 FROM festival AS f JOIN stadium AS s ON f.stadium_ref = s.Stadium_ID",
            // Same-named columns: a natural key the schema did not declare.
            "SELECT 1 FROM stadium AS a JOIN singer AS b ON a.Name = b.Name",
            // A derived table, a table the schema does not know, a filter in the ON.
            "SELECT 1 FROM (SELECT 1 AS x) AS d JOIN stadium AS s ON d.x = s.Stadium_ID",
            "SELECT 1 FROM elsewhere AS e JOIN stadium AS s ON e.id = s.Stadium_ID",
            "SELECT 1 FROM concert AS c JOIN stadium AS s ON c.Stadium_ID = s.Stadium_ID AND c.Year = 2014",
        ] {
            let unkeyed = found(sql);
            assert!(unkeyed.is_empty(), "{sql}: {unkeyed:?}");
        }
    }

    fn rewritten(sql: &str) -> Option<String> {
        let statements = Parser::parse_sql(&SQLiteDialect {}, sql).expect("test SQL parses");
        with_keyed_joins(&statements[0], &schema(), SqlDialect::Sqlite)
            .map(|statement| statement.to_string())
    }

    #[test]
    fn an_unkeyed_join_is_rewritten_through_the_tables_between() {
        assert_eq!(
            rewritten(
                "SELECT T1.Name, COUNT(*) FROM stadium AS T1 \
                 JOIN singer_in_concert AS T2 ON T1.Stadium_ID = T2.concert_ID GROUP BY T1.Name"
            )
            .as_deref(),
            Some(
                "SELECT T1.Name, COUNT(*) FROM stadium AS T1 \
                 JOIN concert ON concert.Stadium_ID = T1.Stadium_ID \
                 JOIN singer_in_concert AS T2 ON T2.concert_ID = concert.concert_ID GROUP BY T1.Name"
            )
        );
        // A direct key the join missed: only the ON changes, on either side.
        assert_eq!(
            rewritten(
                "SELECT s.Name FROM concert AS c JOIN stadium AS s ON c.concert_ID = s.Stadium_ID"
            )
            .as_deref(),
            Some(
                "SELECT s.Name FROM concert AS c JOIN stadium AS s ON s.Stadium_ID = c.Stadium_ID"
            )
        );
        // In a set operation's branch too.
        assert!(rewritten(
            "SELECT Name FROM stadium UNION SELECT c.Year FROM concert AS c \
             JOIN singer ON singer.Singer_ID = c.Stadium_ID"
        )
        .is_some_and(|sql| sql
            .contains("JOIN singer_in_concert ON singer_in_concert.concert_ID = c.concert_ID")));
    }

    #[test]
    fn a_join_that_cannot_be_rewritten_exactly_is_left_to_the_model() {
        for sql in [
            // A table in between is already in the FROM list.
            "SELECT 1 FROM stadium AS T1 JOIN concert AS c ON c.Stadium_ID = T1.Stadium_ID \
             JOIN singer_in_concert AS T2 ON T1.Stadium_ID = T2.concert_ID",
            // More than the one equality in the ON, or not an inner join.
            "SELECT 1 FROM stadium AS T1 JOIN singer_in_concert AS T2 \
             ON T1.Stadium_ID = T2.concert_ID AND T2.Singer_ID = 1",
            "SELECT 1 FROM stadium AS T1 LEFT JOIN singer_in_concert AS T2 \
             ON T1.Stadium_ID = T2.concert_ID",
            // Nothing wrong.
            "SELECT 1 FROM concert AS c JOIN stadium AS s ON c.Stadium_ID = s.Stadium_ID",
        ] {
            assert_eq!(rewritten(sql), None, "{sql}");
        }
    }

    #[test]
    fn a_schema_without_declared_keys_is_never_judged() {
        let bare: Vec<TableSchema> = schema()
            .into_iter()
            .map(|table| TableSchema {
                foreign_keys: Vec::new(),
                ..table
            })
            .collect();
        let statements = Parser::parse_sql(
            &SQLiteDialect {},
            "SELECT 1 FROM stadium AS T1 JOIN singer_in_concert AS T2 ON T1.Stadium_ID = T2.concert_ID",
        )
        .expect("test SQL parses");
        assert!(unkeyed_joins(&statements[0], &bare).is_empty());
    }
}
