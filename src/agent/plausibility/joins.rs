//! The `repeated_rows` rule: a table joined and never read, on columns that are not one
//! of its keys, repeats the rows it is joined to, which a total or a plain row list then
//! counts more than once.
//!
//! A small model often joins a table the question does not need ("how many singers"
//! answered over `singer JOIN singer_in_concert`). Whether such a join changes the answer
//! depends on the joined table's keys: joined on its primary key or a unique key, each
//! row meets at most one partner and nothing repeats; joined on any other column, a row
//! meets every partner. Only the second case is flagged, and only where repeats change
//! the result: a `SUM`, `AVG`, `TOTAL` or `COUNT(column)` without DISTINCT, or the
//! statement's own rows listed without DISTINCT, grouping, a set operation that drops
//! repeats or `LIMIT 1`, when the result does hold a row twice (the caller looks: many
//! tables are one-to-one in their data whatever their keys say). `COUNT(*)` is left
//! alone, since counting the joined rows is as often what the question asks ("how many
//! performances by French singers"). A table that bridges two others (named in two ON
//! conditions), one with a condition that is not a plain equality of columns, one
//! without declared keys, and selects with comma joins are left alone too: the rule
//! speaks only when the keys say rows repeat.
//!
//! The rule also writes its fix ([`without_repeating_joins`]), since a 1.5B model asked
//! to drop the join mostly keeps it: the join is taken out when the question does not name the
//! joined table ("the average age of all singers"), and kept as an `EXISTS` test when it
//! does ("singers who performed in a concert"), so a filter the question asks for stays
//! and only its repeats go.

use std::collections::HashMap;
use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Distinct, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, JoinConstraint, JoinOperator, LimitClause, ObjectNamePart,
    Query, Select, SelectItem, SetExpr, SetQuantifier, Statement, TableFactor, TableWithJoins,
    Visit, VisitMut, Visitor, VisitorMut,
};

use crate::schema::{table_named, TableSchema};

/// One table joined and never read whose join repeats the rows of another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RepeatingJoin {
    /// The joined table as the schema names it.
    pub table: String,
    /// Its columns in the ON condition.
    pub join_columns: Vec<String>,
    /// The table whose rows repeat.
    pub repeated: String,
    /// What the repeats change.
    pub affects: Affects,
    /// Where the joined table stands in its FROM list (0: the first table, n: the
    /// table of the n-th join).
    pub position: usize,
    /// Which join's ON condition names it (an index into the FROM list's joins).
    pub condition: usize,
    /// Whether that join is a LEFT join, which keeps every row it is joined to.
    pub left: bool,
}

/// What a join's repeated rows change in a select.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Affects {
    /// A total, average or count of a column, written as in the query.
    Aggregate(String),
    /// The statement's own rows, listed without DISTINCT or grouping: only a result
    /// that holds the same row twice shows the repeats happened.
    Rows,
}

impl std::fmt::Display for Affects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Affects::Aggregate(text) => f.write_str(text),
            Affects::Rows => f.write_str("the rows"),
        }
    }
}

/// Every repeating join in the statement's selects, at most one per joined table.
pub(super) fn repeating_joins(statement: &Statement, schema: &[TableSchema]) -> Vec<RepeatingJoin> {
    if schema.is_empty() {
        return Vec::new();
    }
    let mut uses = Identifiers::default();
    let _ = statement.visit(&mut uses);
    let mut selects = EachSelect {
        schema,
        uses: &uses,
        top: true,
        found: Vec::new(),
    };
    let _ = statement.visit(&mut selects);
    selects.found
}

/// Visits every SELECT of a statement, subqueries included, and keeps what it finds.
struct EachSelect<'a> {
    schema: &'a [TableSchema],
    uses: &'a Identifiers,
    /// The next query visited is the statement's own (whose rows are the result).
    top: bool,
    found: Vec<RepeatingJoin>,
}

impl EachSelect<'_> {
    /// `rows_show`: this select's rows reach the result as they are (the statement's
    /// own select, or a branch of a UNION ALL of it, keeping more than one row).
    fn set(&mut self, set: &SetExpr, rows_show: bool) {
        match set {
            SetExpr::Select(select) => {
                for join in in_select(select, self.schema, self.uses, rows_show) {
                    if !self.found.iter().any(|known| known.table == join.table) {
                        self.found.push(join);
                    }
                }
            }
            SetExpr::SetOperation {
                left,
                right,
                set_quantifier,
                ..
            } => {
                let kept = branches_show_rows(rows_show, set_quantifier);
                self.set(left, kept);
                self.set(right, kept);
            }
            _ => {}
        }
    }
}

/// Whether the rows of a set operation's branches reach the result as they are: UNION,
/// EXCEPT and INTERSECT without ALL drop repeated rows.
fn branches_show_rows(rows_show: bool, quantifier: &SetQuantifier) -> bool {
    rows_show && matches!(quantifier, SetQuantifier::All | SetQuantifier::AllByName)
}

/// Whether the query keeps one row at most (`LIMIT 1`): repeats of it cannot show.
fn keeps_one_row(query: &Query) -> bool {
    let limit = match &query.limit_clause {
        Some(LimitClause::LimitOffset {
            limit: Some(limit), ..
        }) => limit,
        Some(LimitClause::OffsetCommaLimit { limit, .. }) => limit,
        _ => return false,
    };
    matches!(limit, Expr::Value(value) if value.to_string() == "1")
}

impl Visitor for EachSelect<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        let top = std::mem::take(&mut self.top);
        self.set(&query.body, top && !keeps_one_row(query));
        ControlFlow::Continue(())
    }
}

/// How often each name is used as a column: bare (`name`) and by qualifier (`t.name`
/// counts once for `t`).
#[derive(Default)]
struct Identifiers {
    bare: HashMap<String, usize>,
    qualified: HashMap<String, usize>,
}

impl Identifiers {
    fn of(expr: &Expr) -> Identifiers {
        let mut uses = Identifiers::default();
        let _ = expr.visit(&mut uses);
        uses
    }
}

impl Visitor for Identifiers {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        match expr {
            Expr::Identifier(ident) => {
                *self.bare.entry(ident.value.to_lowercase()).or_default() += 1;
            }
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                let qualifier = parts[parts.len() - 2].value.to_lowercase();
                *self.qualified.entry(qualifier).or_default() += 1;
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// One table of a FROM list: the name it is known by and its schema, when it is a table.
struct Binding<'a> {
    name: String,
    table: Option<&'a TableSchema>,
}

fn binding<'a>(factor: &TableFactor, schema: &'a [TableSchema]) -> Option<Binding<'a>> {
    match factor {
        TableFactor::Table {
            name, alias, args, ..
        } if args.is_none() => {
            let table_name = match name.0.last()? {
                ObjectNamePart::Identifier(ident) => ident.value.to_lowercase(),
                ObjectNamePart::Function(_) => return None,
            };
            let known_as = alias.as_ref().map_or_else(
                || table_name.clone(),
                |alias| alias.name.value.to_lowercase(),
            );
            // A renamed column list hides the table's own names: leave it alone.
            let renamed = alias
                .as_ref()
                .is_some_and(|alias| !alias.columns.is_empty());
            Some(Binding {
                name: known_as,
                table: table_named(schema, &table_name).filter(|_| !renamed),
            })
        }
        other => Some(Binding {
            name: crate::gate::table_factor_table_alias(other)
                .map(|alias| alias.name.value.to_lowercase())?,
            table: None,
        }),
    }
}

/// What repeated rows would change in this select, if anything.
fn repeats_matter(select: &Select) -> Option<Affects> {
    if matches!(
        select.distinct,
        Some(Distinct::Distinct) | Some(Distinct::On(_))
    ) {
        return None;
    }
    let mut aggregates = Aggregates::default();
    for item in &select.projection {
        match item {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                let _ = expr.visit(&mut aggregates);
            }
            _ => {}
        }
    }
    if let Some(having) = &select.having {
        let _ = having.visit(&mut aggregates);
    }
    if let Some(sensitive) = aggregates.sensitive {
        return Some(Affects::Aggregate(sensitive));
    }
    let grouped = match &select.group_by {
        GroupByExpr::Expressions(exprs, _) => !exprs.is_empty(),
        GroupByExpr::All(_) => true,
    };
    (!grouped && !aggregates.any).then_some(Affects::Rows)
}

/// The aggregates of a projection: whether there is any, and the first whose value
/// repeated rows change.
#[derive(Default)]
struct Aggregates {
    any: bool,
    sensitive: Option<String>,
}

impl Visitor for Aggregates {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        let Expr::Function(function) = expr else {
            return ControlFlow::Continue(());
        };
        if function.over.is_some() {
            return ControlFlow::Continue(());
        }
        let name = function
            .name
            .0
            .last()
            .and_then(|part| match part {
                ObjectNamePart::Identifier(ident) => Some(ident.value.to_lowercase()),
                ObjectNamePart::Function(_) => None,
            })
            .unwrap_or_default();
        let aggregate = matches!(
            name.as_str(),
            "sum" | "avg" | "count" | "total" | "min" | "max" | "group_concat" | "string_agg"
        );
        if !aggregate {
            return ControlFlow::Continue(());
        }
        self.any = true;
        let FunctionArguments::List(list) = &function.args else {
            return ControlFlow::Continue(());
        };
        let distinct = matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct));
        let star = list.args.iter().any(|arg| {
            matches!(
                arg,
                FunctionArg::Unnamed(FunctionArgExpr::Wildcard)
                    | FunctionArg::Unnamed(FunctionArgExpr::QualifiedWildcard(_))
            )
        });
        let counts_repeats = matches!(name.as_str(), "sum" | "avg" | "count" | "total");
        if counts_repeats && !distinct && !star && self.sensitive.is_none() {
            self.sensitive = Some(expr.to_string());
        }
        ControlFlow::Continue(())
    }
}

/// The columns of `binding` an ON condition equates with columns of other tables, and
/// those tables' names; None when the condition is anything but such equalities joined by
/// AND (a filter, an OR, a bare column), as the rule cannot weigh those.
fn equated_columns(on: &Expr, binding: &str) -> Option<(Vec<String>, Vec<String>)> {
    let mut mine = Vec::new();
    let mut others = Vec::new();
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
                let (Some(left), Some(right)) = (qualified(left), qualified(right)) else {
                    // A condition that does not name this table is another table's affair.
                    if Identifiers::of(expr).qualified.contains_key(binding) {
                        return None;
                    }
                    continue;
                };
                match (left.0 == binding, right.0 == binding) {
                    (true, false) => {
                        mine.push(left.1);
                        others.push(right.0);
                    }
                    (false, true) => {
                        mine.push(right.1);
                        others.push(left.0);
                    }
                    (true, true) => return None,
                    (false, false) => {}
                }
            }
            other => {
                if Identifiers::of(other).qualified.contains_key(binding) {
                    return None;
                }
            }
        }
    }
    others.sort();
    others.dedup();
    Some((mine, others))
}

/// `t.column` as (t, column), lowercased.
pub(super) fn qualified(expr: &Expr) -> Option<(String, String)> {
    match expr {
        Expr::Nested(inner) => qualified(inner),
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 => Some((
            parts[parts.len() - 2].value.to_lowercase(),
            parts[parts.len() - 1].value.to_lowercase(),
        )),
        _ => None,
    }
}

/// Whether `columns` hold one of the table's keys whole.
fn holds_a_key(table: &TableSchema, columns: &[String]) -> bool {
    std::iter::once(&table.primary_key)
        .chain(table.unique.iter())
        .filter(|key| !key.is_empty())
        .any(|key| {
            key.iter().all(|part| {
                columns
                    .iter()
                    .any(|column| column.eq_ignore_ascii_case(part))
            })
        })
}

fn in_select(
    select: &Select,
    schema: &[TableSchema],
    uses: &Identifiers,
    rows_show: bool,
) -> Vec<RepeatingJoin> {
    let mut found = Vec::new();
    // Comma joins put their conditions in WHERE, where the rule does not follow them.
    let [from] = select.from.as_slice() else {
        return found;
    };
    if from.joins.is_empty() {
        return found;
    }
    let Some(affects) = repeats_matter(select) else {
        return found;
    };
    if affects == Affects::Rows && !rows_show {
        return found;
    }
    if select.projection.iter().any(|item| {
        matches!(
            item,
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
        )
    }) {
        return found;
    }
    let mut bindings = Vec::new();
    let mut conditions: Vec<&Expr> = Vec::new();
    for factor in
        std::iter::once(&from.relation).chain(from.joins.iter().map(|join| &join.relation))
    {
        let Some(binding) = binding(factor, schema) else {
            return found;
        };
        bindings.push(binding);
    }
    for join in &from.joins {
        match &join.join_operator {
            JoinOperator::Join(JoinConstraint::On(on))
            | JoinOperator::Inner(JoinConstraint::On(on))
            | JoinOperator::Left(JoinConstraint::On(on))
            | JoinOperator::LeftOuter(JoinConstraint::On(on)) => conditions.push(on),
            // USING, NATURAL, cross and outer joins of other kinds: not weighed.
            _ => return found,
        }
    }
    let in_conditions: Vec<Identifiers> = conditions.iter().map(|on| Identifiers::of(on)).collect();
    for (position, binding) in bindings.iter().enumerate() {
        let Some(table) = binding.table else {
            continue;
        };
        // Read anywhere outside the ON conditions (any scope, ORDER BY included)?
        let qualified_in_on: usize = in_conditions
            .iter()
            .map(|uses| uses.qualified.get(&binding.name).copied().unwrap_or(0))
            .sum();
        let qualified_everywhere = uses.qualified.get(&binding.name).copied().unwrap_or(0);
        if qualified_everywhere > qualified_in_on {
            continue;
        }
        let bare_read = table.columns.iter().any(|column| {
            let name = column.name.to_lowercase();
            let everywhere = uses.bare.get(&name).copied().unwrap_or(0);
            let in_on: usize = in_conditions
                .iter()
                .map(|uses| uses.bare.get(&name).copied().unwrap_or(0))
                .sum();
            everywhere > in_on
        });
        if bare_read {
            continue;
        }
        // A leaf: named by exactly one ON condition, which ties it to one other table.
        let naming: Vec<(usize, &&Expr)> = conditions
            .iter()
            .zip(&in_conditions)
            .enumerate()
            .filter(|(_, (_, uses))| uses.qualified.contains_key(&binding.name))
            .map(|(index, (on, _))| (index, on))
            .collect();
        let [(condition, on)] = naming.as_slice() else {
            continue;
        };
        let Some((columns, others)) = equated_columns(on, &binding.name) else {
            continue;
        };
        let [other] = others.as_slice() else {
            continue;
        };
        if columns.is_empty() || holds_a_key(table, &columns) {
            continue;
        }
        if table.primary_key.is_empty() && table.unique.is_empty() {
            continue;
        }
        let repeated = bindings
            .iter()
            .find(|candidate| &candidate.name == other)
            .and_then(|candidate| candidate.table)
            .map_or_else(|| other.clone(), |table| table.name.clone());
        found.push(RepeatingJoin {
            table: table.name.clone(),
            join_columns: columns,
            repeated,
            affects: affects.clone(),
            position,
            condition: *condition,
            left: matches!(
                from.joins[*condition].join_operator,
                JoinOperator::Left(_) | JoinOperator::LeftOuter(_)
            ),
        });
    }
    found
}

/// How a repeating join is taken out of its select.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Removal {
    /// Left out: the question does not speak of the joined table (or the join is a LEFT
    /// join, which filters nothing), so the join only repeats rows.
    Drop,
    /// Kept as a test, `WHERE EXISTS (SELECT 1 FROM joined WHERE on)`: the question names
    /// the joined table ("singers who performed in a concert"), so the join filters on
    /// purpose and only its repeats are wrong.
    Exists,
}

/// The statement with every repeating join taken out: dropped when the question does
/// not name the joined table, turned into an EXISTS test when it does. None when a
/// repeating join cannot be taken out exactly (its ON condition sits on another join, the
/// first table joined by a LEFT join) or there is none.
///
/// The rewrite is the rule's own fix, made without the model: in two Spider runs none of
/// the 9 repairs a 1.5B model was asked for ended right (decision 0009).
pub(super) fn without_repeating_joins(
    statement: &Statement,
    schema: &[TableSchema],
    question: &str,
    dialect: &dyn sqlparser::dialect::Dialect,
) -> Option<Statement> {
    if schema.is_empty() {
        return None;
    }
    let mut uses = Identifiers::default();
    let _ = statement.visit(&mut uses);
    let question_words = stems(question);
    let mut rewritten = statement.clone();
    let mut rewrite = EachSelectMut {
        schema,
        uses: &uses,
        question_words: &question_words,
        dialect,
        top: true,
        removed: 0,
        failed: false,
    };
    let _ = VisitMut::visit(&mut rewritten, &mut rewrite);
    (rewrite.removed > 0 && !rewrite.failed).then_some(rewritten)
}

/// The mutable twin of [`EachSelect`]: visits the selects in the same order, weighs each
/// with [`in_select`] and takes its repeating joins out.
struct EachSelectMut<'a> {
    schema: &'a [TableSchema],
    uses: &'a Identifiers,
    question_words: &'a [String],
    dialect: &'a dyn sqlparser::dialect::Dialect,
    top: bool,
    removed: usize,
    failed: bool,
}

impl EachSelectMut<'_> {
    fn set(&mut self, set: &mut SetExpr, rows_show: bool) {
        match set {
            SetExpr::Select(select) => {
                let found = in_select(select, self.schema, self.uses, rows_show);
                // From the last table back, so the positions of the others stand.
                for join in found.iter().rev() {
                    match self.take_out(select, join) {
                        Some(()) => self.removed += 1,
                        None => self.failed = true,
                    }
                }
            }
            SetExpr::SetOperation {
                left,
                right,
                set_quantifier,
                ..
            } => {
                let kept = branches_show_rows(rows_show, set_quantifier);
                self.set(left, kept);
                self.set(right, kept);
            }
            _ => {}
        }
    }

    /// Takes one repeating join out of `select`; None when it cannot be done exactly.
    fn take_out(&self, select: &mut Select, join: &RepeatingJoin) -> Option<()> {
        let from = select.from.first_mut()?;
        // The condition that names the table must be its own join's (or, for the first
        // table, the first join's), so taking the join out takes the condition with it.
        let own_condition = join.position.saturating_sub(1);
        if join.condition != own_condition || own_condition >= from.joins.len() {
            return None;
        }
        if join.position == 0 && join.left {
            // The first table is the one a LEFT join keeps whole: it is no leaf to drop.
            return None;
        }
        let removal = if join.left {
            Removal::Drop
        } else if self.names_the_table(select_tables(from, self.schema), &join.table) {
            Removal::Exists
        } else {
            Removal::Drop
        };
        let taken = from.joins.remove(own_condition);
        let on = match taken.join_operator {
            JoinOperator::Join(JoinConstraint::On(on))
            | JoinOperator::Inner(JoinConstraint::On(on))
            | JoinOperator::Left(JoinConstraint::On(on))
            | JoinOperator::LeftOuter(JoinConstraint::On(on)) => on,
            _ => return None,
        };
        let relation = if join.position == 0 {
            std::mem::replace(&mut from.relation, taken.relation)
        } else {
            taken.relation
        };
        if removal == Removal::Exists {
            let test = format!("SELECT 1 FROM {relation} WHERE {on}");
            let parsed = sqlparser::parser::Parser::parse_sql(self.dialect, &test).ok()?;
            let Some(Statement::Query(subquery)) = parsed.into_iter().next() else {
                return None;
            };
            let exists = Expr::Exists {
                subquery,
                negated: false,
            };
            select.selection = Some(match select.selection.take() {
                Some(filter) => Expr::BinaryOp {
                    left: Box::new(Expr::Nested(Box::new(filter))),
                    op: BinaryOperator::And,
                    right: Box::new(exists),
                },
                None => exists,
            });
        }
        Some(())
    }

    /// Whether the question names the joined table by a word the select's other tables'
    /// names do not hold ("concert" of `singer_in_concert` next to `singer`).
    fn names_the_table(&self, others: Vec<String>, table: &str) -> bool {
        let other_words: Vec<String> = others
            .iter()
            .filter(|other| !other.eq_ignore_ascii_case(table))
            .flat_map(|other| stems(other))
            .collect();
        let own: Vec<String> = stems(table)
            .into_iter()
            .filter(|word| !other_words.contains(word))
            .collect();
        self.question_words
            .iter()
            .filter(|word| !other_words.contains(word))
            .any(|word| {
                own.iter()
                    .any(|name| name == word || (word.len() >= 5 && name.contains(word.as_str())))
            })
    }
}

impl VisitorMut for EachSelectMut<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let top = std::mem::take(&mut self.top);
        let rows_show = top && !keeps_one_row(query);
        self.set(&mut query.body, rows_show);
        ControlFlow::Continue(())
    }
}

/// The schema names of the tables of one FROM list.
fn select_tables(from: &TableWithJoins, schema: &[TableSchema]) -> Vec<String> {
    std::iter::once(&from.relation)
        .chain(from.joins.iter().map(|join| &join.relation))
        .filter_map(|factor| binding(factor, schema)?.table)
        .map(|table| table.name.clone())
        .collect()
}

/// Words too common to name a table by (`has_pet`, `singer_in_concert`).
const LINKING_WORDS: &[&str] = &[
    "has", "have", "in", "of", "on", "the", "and", "to", "by", "for", "with", "at",
];

/// The stems of a text's words (identifiers split at `_` and case changes), without the
/// linking words and one-letter words.
fn stems(text: &str) -> Vec<String> {
    crate::words::words(text, crate::words::Split::Identifier)
        .into_iter()
        .filter(|word| word.len() > 1 && !LINKING_WORDS.contains(&word.as_str()))
        .map(|word| crate::linking::lexical::stem(&word))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::SQLiteDialect;
    use sqlparser::parser::Parser;

    fn table(name: &str, columns: &[&str], primary_key: &[&str]) -> TableSchema {
        TableSchema::for_tests(name, columns, "INTEGER", primary_key)
    }

    /// Spider's concert_singer, cut down: a performance row per singer and concert.
    fn schema() -> Vec<TableSchema> {
        vec![
            table(
                "singer",
                &["singer_id", "name", "age", "country"],
                &["singer_id"],
            ),
            table("concert", &["concert_id", "theme", "year"], &["concert_id"]),
            table(
                "singer_in_concert",
                &["concert_id", "singer_id"],
                &["concert_id", "singer_id"],
            ),
            table("guest", &["singer_id", "note"], &[]),
        ]
    }

    /// The joined tables the rule flags in `sql`, as `table<-repeated`.
    fn flagged(sql: &str) -> Vec<String> {
        let statements = Parser::parse_sql(&SQLiteDialect {}, sql).expect("test SQL parses");
        repeating_joins(&statements[0], &schema())
            .into_iter()
            .map(|join| format!("{}<-{}", join.table, join.repeated))
            .collect()
    }

    const SINGERS_WITH_PERFORMANCES: &str =
        "FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id";

    #[test]
    fn a_total_over_a_join_on_a_column_that_is_no_key_is_flagged() {
        assert_eq!(
            flagged(&format!("SELECT avg(T1.age) {SINGERS_WITH_PERFORMANCES}")),
            ["singer_in_concert<-singer"]
        );
        assert_eq!(
            flagged(&format!(
                "SELECT T1.country, sum(T1.age) {SINGERS_WITH_PERFORMANCES} GROUP BY T1.country"
            )),
            ["singer_in_concert<-singer"]
        );
        // The joined table first, the read one joined to it.
        assert_eq!(
            flagged(
                "SELECT T2.name FROM singer_in_concert AS T1 \
                 JOIN singer AS T2 ON T1.singer_id = T2.singer_id"
            ),
            ["singer_in_concert<-singer"]
        );
    }

    #[test]
    fn what_repeats_cannot_change_is_not_flagged() {
        for sql in [
            // Counting the joined rows is as often the question.
            format!("SELECT count(*) {SINGERS_WITH_PERFORMANCES}"),
            format!("SELECT T1.country, count(*) {SINGERS_WITH_PERFORMANCES} GROUP BY T1.country"),
            // DISTINCT, grouping without a total, MIN and MAX are immune to repeats.
            format!("SELECT DISTINCT T1.name {SINGERS_WITH_PERFORMANCES}"),
            format!("SELECT count(DISTINCT T1.name) {SINGERS_WITH_PERFORMANCES}"),
            format!("SELECT T1.name {SINGERS_WITH_PERFORMANCES} GROUP BY T1.name"),
            format!("SELECT max(T1.age) {SINGERS_WITH_PERFORMANCES}"),
            // One row kept: its repeats cannot show.
            format!("SELECT T1.name {SINGERS_WITH_PERFORMANCES} ORDER BY T1.age LIMIT 1"),
            // Rows of a set operation without ALL, or of a subquery, never reach the
            // result as they are.
            format!("SELECT name FROM singer EXCEPT SELECT T1.name {SINGERS_WITH_PERFORMANCES}"),
            format!(
                "SELECT name FROM singer WHERE name IN (SELECT T1.name {SINGERS_WITH_PERFORMANCES})"
            ),
        ] {
            assert_eq!(flagged(&sql), Vec::<String>::new(), "{sql}");
        }
    }

    #[test]
    fn a_join_on_the_joined_tables_key_never_repeats_rows() {
        // singer joined on its primary key: each performance meets one singer.
        assert_eq!(
            flagged(
                "SELECT count(T1.concert_id) FROM singer_in_concert AS T1 \
                 JOIN singer AS T2 ON T1.singer_id = T2.singer_id"
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_table_that_is_read_bridges_or_has_no_declared_keys_is_left_alone() {
        for sql in [
            // Read in WHERE, qualified and bare, and in ORDER BY.
            format!("SELECT T1.name {SINGERS_WITH_PERFORMANCES} WHERE T2.concert_id = 1"),
            format!("SELECT T1.name {SINGERS_WITH_PERFORMANCES} WHERE concert_id = 1"),
            format!("SELECT T1.name {SINGERS_WITH_PERFORMANCES} ORDER BY T2.concert_id"),
            // A bridge between two read tables.
            format!(
                "SELECT T1.name, T3.theme {SINGERS_WITH_PERFORMANCES} \
                 JOIN concert AS T3 ON T2.concert_id = T3.concert_id"
            ),
            // A condition beyond the equality of keys: the join filters on purpose.
            "SELECT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 \
             ON T1.singer_id = T2.singer_id AND T2.concert_id > 3"
                .to_string(),
            // No keys declared: the rule cannot tell.
            "SELECT sum(T1.age) FROM singer AS T1 JOIN guest AS T2 ON T1.singer_id = T2.singer_id"
                .to_string(),
            // Comma joins put the condition in WHERE.
            "SELECT sum(T1.age) FROM singer AS T1, singer_in_concert AS T2 \
             WHERE T1.singer_id = T2.singer_id"
                .to_string(),
            // Every column asked for.
            format!("SELECT * {SINGERS_WITH_PERFORMANCES}"),
            // A table-valued function joined in: it has no declared keys to weigh.
            "SELECT sum(T1.age) FROM singer AS T1 \
             JOIN json_each(T1.country) AS j ON j.value = T1.name"
                .to_string(),
            // Read by a table-valued function's argument, outside every ON condition.
            format!(
                "SELECT sum(T1.age) {SINGERS_WITH_PERFORMANCES} \
                 JOIN json_each(T2.concert_id) AS j ON j.key = T1.singer_id"
            ),
        ] {
            assert_eq!(flagged(&sql), Vec::<String>::new(), "{sql}");
        }
    }

    #[test]
    fn a_table_valued_function_beside_a_repeating_join_hides_nothing() {
        // The function is known by its alias, so the select is still weighed.
        assert_eq!(
            flagged(&format!(
                "SELECT sum(T1.age) {SINGERS_WITH_PERFORMANCES} \
                 JOIN json_each(T1.country) AS j ON j.value = T1.name"
            )),
            ["singer_in_concert<-singer"]
        );
    }

    #[test]
    fn the_rows_of_a_union_all_branch_reach_the_result() {
        assert_eq!(
            flagged(&format!(
                "SELECT name FROM singer UNION ALL SELECT T1.name {SINGERS_WITH_PERFORMANCES}"
            )),
            ["singer_in_concert<-singer"]
        );
    }

    #[test]
    fn a_subquery_is_weighed_in_its_own_select() {
        assert_eq!(
            flagged(&format!(
                "SELECT name FROM singer WHERE age > (SELECT avg(T1.age) {SINGERS_WITH_PERFORMANCES})"
            )),
            ["singer_in_concert<-singer"]
        );
    }

    /// `sql` with its repeating joins taken out, for `question`.
    fn rewritten(sql: &str, question: &str) -> Option<String> {
        let statements = Parser::parse_sql(&SQLiteDialect {}, sql).expect("test SQL parses");
        without_repeating_joins(&statements[0], &schema(), question, &SQLiteDialect {})
            .map(|statement| statement.to_string())
    }

    #[test]
    fn a_join_the_question_does_not_name_is_dropped() {
        let sql = format!("SELECT avg(T1.age) {SINGERS_WITH_PERFORMANCES}");
        assert_eq!(
            rewritten(&sql, "What is the average age of all singers?").as_deref(),
            Some("SELECT avg(T1.age) FROM singer AS T1")
        );
        // The joined table first: the table it is joined to takes its place.
        assert_eq!(
            rewritten(
                "SELECT T2.name FROM singer_in_concert AS T1 \
                 JOIN singer AS T2 ON T1.singer_id = T2.singer_id",
                "List the names of the singers."
            )
            .as_deref(),
            Some("SELECT T2.name FROM singer AS T2")
        );
    }

    #[test]
    fn a_join_the_question_names_becomes_an_exists_test() {
        let sql =
            format!("SELECT avg(T1.age) {SINGERS_WITH_PERFORMANCES} WHERE T1.country = 'France'");
        assert_eq!(
            rewritten(&sql, "Average age of French singers who sang in a concert?").as_deref(),
            Some(
                "SELECT avg(T1.age) FROM singer AS T1 WHERE (T1.country = 'France') AND \
                 EXISTS (SELECT 1 FROM singer_in_concert AS T2 WHERE T1.singer_id = T2.singer_id)"
            )
        );
        // Plural and other forms of the word name it too ("concerts").
        assert!(
            rewritten(&sql, "Average age of French singers with concerts")
                .is_some_and(|sql| sql.contains("EXISTS"))
        );
    }

    #[test]
    fn a_left_join_is_dropped_even_when_named_as_it_filters_nothing() {
        let sql = "SELECT sum(T1.age) FROM singer AS T1 \
                   LEFT JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id";
        assert_eq!(
            rewritten(sql, "Total age of singers, concert or not").as_deref(),
            Some("SELECT sum(T1.age) FROM singer AS T1")
        );
    }

    #[test]
    fn a_subquery_is_rewritten_in_place() {
        let sql = format!(
            "SELECT name FROM singer WHERE age > (SELECT avg(T1.age) {SINGERS_WITH_PERFORMANCES})"
        );
        assert_eq!(
            rewritten(&sql, "Singers older than the average singer").as_deref(),
            Some("SELECT name FROM singer WHERE age > (SELECT avg(T1.age) FROM singer AS T1)")
        );
    }

    #[test]
    fn nothing_to_take_out_or_no_exact_way_gives_no_rewrite() {
        for sql in [
            // Nothing repeats.
            format!("SELECT count(*) {SINGERS_WITH_PERFORMANCES}"),
            "SELECT avg(age) FROM singer".to_string(),
            // The condition naming the joined table is the next join's.
            ON_ANOTHER_JOIN.to_string(),
        ] {
            assert_eq!(rewritten(&sql, "average age of singers"), None, "{sql}");
        }
        assert_eq!(flagged(ON_ANOTHER_JOIN), ["singer_in_concert<-singer"]);
    }

    /// A repeating join whose condition sits on the next join: taking the join out would
    /// leave that condition naming a table that is gone.
    const ON_ANOTHER_JOIN: &str = "SELECT avg(T1.age) FROM singer AS T1 \
        JOIN singer_in_concert AS T2 ON T1.age > 0 \
        JOIN concert AS T3 ON T3.concert_id = T1.singer_id AND T2.singer_id = T1.singer_id";

    #[test]
    fn a_rewrite_has_no_repeating_join_left() {
        let sql = format!("SELECT sum(T1.age), avg(T1.age) {SINGERS_WITH_PERFORMANCES}");
        for question in ["total age of singers", "total age of singers in concerts"] {
            let fixed = rewritten(&sql, question).expect("a rewrite");
            assert_eq!(flagged(&fixed), Vec::<String>::new(), "{fixed}");
        }
    }
}
