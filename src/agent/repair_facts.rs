//! Schema facts for a repair, computed from the failing query and the schema, never from
//! the model: for an unknown column, which alias of the failing query stands for which
//! table, which table owns the column (spelled as it is stored) and what it is called in
//! the query, or the foreign-key path to it; for a type mismatch, the cards of the tables
//! involved. The words that carry these facts to the model are in
//! [`super::prompts::column_fact_text`].
//!
//! One unknown column is mended here without the model: a join whose ON condition
//! compares a column one of its two tables lacks, where exactly one foreign key links
//! the two tables, is rewritten on that key ([`join_on_foreign_key`]).

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, Ident, JoinConstraint, JoinOperator, ObjectNamePart, Select, TableFactor,
    Visit, VisitMut, Visitor, VisitorMut,
};
use sqlparser::parser::Parser;

use crate::gate::SqlDialect;
use crate::linking::{JoinHop, SchemaIndex};
use crate::schema::{table_named, TableSchema};

/// A column a database said does not exist, as the error named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownColumn {
    /// The qualifier as written (`T2` in `T2.Quantity`), if any.
    pub qualifier: Option<String>,
    pub column: String,
}

/// Reads the column out of an unknown-column error: SQLite says `no such column:
/// b.cust_nme`, PostgreSQL says `column "cust_nme" does not exist` or `column
/// b.cust_nme does not exist`, MySQL and MariaDB say `Unknown column 'b.cust_nme' in
/// 'field list'` (or `in 'SELECT'`, `in 'on clause'`, ...).
pub fn unknown_column(message: &str) -> Option<UnknownColumn> {
    let named = if let Some(rest) = message.split("no such column:").nth(1) {
        rest.split_whitespace().next()?.to_string()
    } else if let Some(rest) = message.split("Unknown column '").nth(1) {
        rest.split('\'').next()?.to_string()
    } else if let Some(rest) = message.split("column ").nth(1) {
        rest.split(" does not exist").next()?.trim().to_string()
    } else {
        return None;
    };
    let parts: Vec<String> = named
        .split('.')
        .map(|part| {
            part.trim_matches(|quote| quote == '"' || quote == '`')
                .to_string()
        })
        .filter(|part| !part.is_empty())
        .collect();
    let column = parts.last()?.clone();
    let qualifier = parts
        .len()
        .checked_sub(2)
        .and_then(|index| parts.get(index))
        .cloned();
    Some(UnknownColumn { qualifier, column })
}

/// Every column an unknown-column error names: the guard names each column its
/// relation lacks on a line of its own, a database names one.
pub fn unknown_columns(message: &str) -> Vec<UnknownColumn> {
    let mut columns: Vec<UnknownColumn> = Vec::new();
    for column in message.lines().filter_map(unknown_column) {
        if !columns.contains(&column) {
            columns.push(column);
        }
    }
    columns
}

/// The names each table goes by in a query, over every FROM clause of every scope:
/// lower-cased alias (or the table's own name) -> (the alias as written, the table).
pub fn aliases(sql: &str, dialect: SqlDialect) -> BTreeMap<String, (String, String)> {
    struct Collect(BTreeMap<String, (String, String)>);
    impl Visitor for Collect {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table { name, alias, .. } = factor {
                let table = name
                    .0
                    .last()
                    .and_then(ObjectNamePart::as_ident)
                    .map(|ident| ident.value.clone());
                if let Some(table) = table {
                    let known_as = alias
                        .as_ref()
                        .map(|alias| alias.name.value.clone())
                        .unwrap_or_else(|| table.clone());
                    self.0.insert(known_as.to_lowercase(), (known_as, table));
                }
            }
            ControlFlow::Continue(())
        }
    }
    let Ok(statements) = Parser::parse_sql(dialect.parser_dialect().as_ref(), sql) else {
        return BTreeMap::new();
    };
    let mut collect = Collect(BTreeMap::new());
    for statement in &statements {
        let _ = statement.visit(&mut collect);
    }
    collect.0
}

/// The failing query with every join whose ON condition compares a column one of its
/// two tables lacks (`T1.MakeId = T2.MakeId` where T1 is `cars_data`, which has no
/// `MakeId`) rewritten on the foreign key that links the two tables
/// (`T1.Id = T2.MakeId`), when exactly one single-column key does. None when no such
/// join is found: a condition that is not one equality of two qualified columns, a
/// table joined to itself, an alias that names two tables, no key or more than one.
///
/// The rules write this fix because a 1.5B model, told which columns the table has,
/// sent the same ON condition back in each repair of two such Spider questions (decision
/// 0009). The caller runs it through the gate like any other statement.
pub fn join_on_foreign_key(
    sql: &str,
    dialect: SqlDialect,
    schema: &[TableSchema],
) -> Option<String> {
    let mut statements = Parser::parse_sql(dialect.parser_dialect().as_ref(), sql).ok()?;
    let [statement] = statements.as_mut_slice() else {
        return None;
    };
    let mut names = TableNames::default();
    let _ = Visit::visit(&*statement, &mut names);
    let mut rejoin = Rejoin {
        names: &names,
        schema,
        dialect,
        rewritten: 0,
    };
    let _ = VisitMut::visit(statement, &mut rejoin);
    (rejoin.rewritten > 0).then(|| statement.to_string())
}

/// Every name a table goes by in the statement (lower-cased) and the tables it names;
/// a name given to two tables (an alias reused in a subquery) is not resolved.
#[derive(Default)]
struct TableNames(BTreeMap<String, Vec<String>>);

impl TableNames {
    fn table<'s>(&self, known_as: &str, schema: &'s [TableSchema]) -> Option<&'s TableSchema> {
        match self.0.get(&known_as.to_lowercase())?.as_slice() {
            [table] => table_named(schema, table),
            _ => None,
        }
    }
}

impl Visitor for TableNames {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, alias, .. } = factor {
            if let Some(table) = name.0.last().and_then(ObjectNamePart::as_ident) {
                let known_as = alias
                    .as_ref()
                    .map_or(&table.value, |alias| &alias.name.value);
                let tables = self.0.entry(known_as.to_lowercase()).or_default();
                if !tables
                    .iter()
                    .any(|seen| seen.eq_ignore_ascii_case(&table.value))
                {
                    tables.push(table.value.clone());
                }
            }
        }
        ControlFlow::Continue(())
    }
}

struct Rejoin<'a> {
    names: &'a TableNames,
    schema: &'a [TableSchema],
    dialect: SqlDialect,
    rewritten: usize,
}

impl Rejoin<'_> {
    /// The ON condition on the one foreign key linking its two tables, when it
    /// compares a column either lacks.
    fn rejoined(&self, condition: &Expr) -> Option<Expr> {
        let Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = condition
        else {
            return None;
        };
        let (Expr::CompoundIdentifier(left), Expr::CompoundIdentifier(right)) =
            (left.as_ref(), right.as_ref())
        else {
            return None;
        };
        let ([left_name, left_column], [right_name, right_column]) =
            (left.as_slice(), right.as_slice())
        else {
            return None;
        };
        let left_table = self.names.table(&left_name.value, self.schema)?;
        let right_table = self.names.table(&right_name.value, self.schema)?;
        if left_table.name.eq_ignore_ascii_case(&right_table.name) {
            return None;
        }
        let lacks = left_table.column_named(&left_column.value).is_none()
            || right_table.column_named(&right_column.value).is_none();
        if !lacks {
            return None;
        }
        // (left table's column, right table's column) for each key between the two.
        let mut keys: Vec<(String, String)> = Vec::new();
        let links = |from: &TableSchema, to: &TableSchema| -> Vec<(String, String)> {
            from.foreign_keys
                .iter()
                .filter(|key| key.references_table.eq_ignore_ascii_case(&to.name))
                .filter_map(|key| {
                    match (key.columns.as_slice(), key.references_columns.as_slice()) {
                        ([own], [referenced]) => Some((own.clone(), referenced.clone())),
                        _ => None,
                    }
                })
                .collect()
        };
        let both_ways = links(left_table, right_table).into_iter().chain(
            links(right_table, left_table)
                .into_iter()
                .map(|(right, left)| (left, right)),
        );
        for key in both_ways {
            let seen = keys.iter().any(|known| {
                known.0.eq_ignore_ascii_case(&key.0) && known.1.eq_ignore_ascii_case(&key.1)
            });
            if !seen {
                keys.push(key);
            }
        }
        let [(left_key, right_key)] = keys.as_slice() else {
            return None;
        };
        // Both columns must be the tables' own, as the schema spells them.
        let left_key = left_table.column_named(left_key)?.name.clone();
        let right_key = right_table.column_named(right_key)?.name.clone();
        Some(Expr::BinaryOp {
            left: Box::new(Expr::CompoundIdentifier(vec![
                left_name.clone(),
                identifier(&left_key, self.dialect),
            ])),
            op: BinaryOperator::Eq,
            right: Box::new(Expr::CompoundIdentifier(vec![
                right_name.clone(),
                identifier(&right_key, self.dialect),
            ])),
        })
    }
}

/// A column name as SQL must write it: bare when it is a plain word (in PostgreSQL, also
/// lower-case, as it folds bare names), else quoted as the dialect quotes names (MySQL
/// reads a double-quoted word as a string).
fn identifier(name: &str, dialect: SqlDialect) -> Ident {
    let plain = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit())
        && (dialect != SqlDialect::Postgres || !name.chars().any(|c| c.is_ascii_uppercase()));
    if plain {
        Ident::new(name)
    } else {
        Ident::with_quote(dialect.name_quote(), name)
    }
}

impl VisitorMut for Rejoin<'_> {
    type Break = ();

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        for from in &mut select.from {
            for join in &mut from.joins {
                let constraint = match &mut join.join_operator {
                    JoinOperator::Join(constraint)
                    | JoinOperator::Inner(constraint)
                    | JoinOperator::Left(constraint)
                    | JoinOperator::LeftOuter(constraint)
                    | JoinOperator::Right(constraint)
                    | JoinOperator::RightOuter(constraint)
                    | JoinOperator::FullOuter(constraint) => constraint,
                    _ => continue,
                };
                if let JoinConstraint::On(condition) = constraint {
                    if let Some(rejoined) = self.rejoined(condition) {
                        *condition = rejoined;
                        self.rewritten += 1;
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// One table that owns the column a query got wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    pub table: String,
    /// The column as the table spells it.
    pub column: String,
    /// The alias (or name) the failing query already gives this table, if it reads it.
    pub known_as: Option<String>,
    /// The foreign-key joins from a table of the query to this one, when it is not read.
    pub join: Vec<JoinHop>,
    /// The table's card, when the query does not read it yet.
    pub card: Option<String>,
}

/// Everything the repair of an unknown column needs to say.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnFact {
    pub column: String,
    /// The qualifier the query used and the table it stands for there.
    pub qualified: Option<(String, Option<String>)>,
    /// Tables owning the column (or, failing that, a near spelling), best first.
    pub owners: Vec<Owner>,
}

impl ColumnFact {
    /// No table has the column nor a name near it (`SchemaIndex::column_candidates`).
    pub fn is_absent(&self) -> bool {
        self.owners.is_empty()
    }

    /// The owning tables, for retrieval to include on the next attempt.
    pub fn owner_tables(&self) -> impl Iterator<Item = &str> {
        self.owners.iter().map(|owner| owner.table.as_str())
    }
}

/// The facts of an unknown column in `failing_sql`.
pub fn column_fact(
    error: &UnknownColumn,
    failing_sql: &str,
    dialect: SqlDialect,
    index: &SchemaIndex,
) -> ColumnFact {
    let known = aliases(failing_sql, dialect);
    let read: Vec<String> = known.values().map(|(_, table)| table.clone()).collect();
    let qualified = error.qualifier.as_ref().map(|qualifier| {
        (
            qualifier.clone(),
            known
                .get(&qualifier.to_lowercase())
                .map(|(_, table)| table.clone()),
        )
    });
    // Each owner with how many joins away it is (0 when read; none when unconnected).
    let mut found: Vec<(Owner, usize)> = Vec::new();
    for (table, column) in index.column_candidates(&error.column) {
        if found.iter().any(|(owner, _)| owner.table == table) {
            continue;
        }
        let known_as = known
            .values()
            .find(|(_, read_table)| read_table.eq_ignore_ascii_case(&table))
            .map(|(alias, _)| alias.clone());
        let join = match known_as {
            Some(_) => Some(Vec::new()),
            None => index.join_path(&read, &table),
        };
        let hops = join.as_ref().map_or(usize::MAX, Vec::len);
        let owner = Owner {
            table,
            column,
            known_as,
            join: join.unwrap_or_default(),
            card: None,
        };
        found.push((owner, hops));
    }
    // A table the query already reads comes first: `T2.Name` where T2 has no name and
    // T1 has one is most often T1's, and a small model takes the first owner it is told.
    // Of the others the nearest comes first: `pid` asked of `journal` is `publication`'s
    // (one join away), not `domain_publication`'s (two), which a model told of it first
    // joined, dropping `journal` and its filter. Stable: ties keep the schema's order.
    found.sort_by_key(|(owner, hops)| (owner.known_as.is_none(), *hops));
    found.truncate(3);
    let owners = found
        .into_iter()
        .map(|(mut owner, _)| {
            // The card only for a table the query does not read yet: its columns are
            // what the next attempt must write.
            if owner.known_as.is_none() {
                owner.card = index.card(&owner.table).map(|card| card.text.clone());
            }
            owner
        })
        .collect();
    ColumnFact {
        column: error.column.clone(),
        qualified,
        owners,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cars_schema() -> Vec<TableSchema> {
        let key = |columns: &str, table: &str, referenced: &str| crate::schema::ForeignKey {
            columns: vec![columns.to_string()],
            references_table: table.to_string(),
            references_columns: vec![referenced.to_string()],
        };
        let mut cars_data = TableSchema::for_tests(
            "cars_data",
            &["Id", "Horsepower", "Weight"],
            "INTEGER",
            &["Id"],
        );
        cars_data.foreign_keys = vec![key("Id", "car_names", "MakeId")];
        let mut car_names = TableSchema::for_tests(
            "car_names",
            &["MakeId", "Model", "Make"],
            "TEXT",
            &["MakeId"],
        );
        car_names.foreign_keys = vec![key("Model", "model_list", "Model")];
        let model_list =
            TableSchema::for_tests("model_list", &["ModelId", "Maker", "Model"], "TEXT", &[]);
        let mut employee =
            TableSchema::for_tests("employee", &["Id", "Name", "Manager"], "TEXT", &["Id"]);
        employee.foreign_keys = vec![key("Manager", "employee", "Id")];
        vec![cars_data, car_names, model_list, employee]
    }

    fn rejoined(sql: &str, dialect: SqlDialect) -> Option<String> {
        join_on_foreign_key(sql, dialect, &cars_schema())
    }

    #[test]
    fn a_join_on_a_column_its_table_lacks_is_rewritten_on_the_foreign_key() {
        // The key is declared on either side; the aliases stay as written.
        assert_eq!(
            rejoined(
                "SELECT T2.Model FROM cars_data AS T1 JOIN car_names AS T2 ON T1.MakeId = T2.MakeId \
                 ORDER BY T1.Horsepower LIMIT 1",
                SqlDialect::Sqlite
            )
            .as_deref(),
            Some(
                "SELECT T2.Model FROM cars_data AS T1 JOIN car_names AS T2 ON T1.Id = T2.MakeId \
                 ORDER BY T1.Horsepower LIMIT 1"
            )
        );
        assert_eq!(
            rejoined(
                "SELECT count(*) FROM car_names JOIN model_list ON car_names.ModelId = model_list.ModelId",
                SqlDialect::Sqlite
            )
            .as_deref(),
            Some("SELECT count(*) FROM car_names JOIN model_list ON car_names.Model = model_list.Model")
        );
        // Inside a subquery too.
        assert_eq!(
            rejoined(
                "SELECT Make FROM car_names WHERE MakeId IN (SELECT a.MakeId FROM cars_data a \
                 LEFT JOIN car_names b ON a.Make = b.MakeId)",
                SqlDialect::Sqlite
            )
            .as_deref(),
            Some(
                "SELECT Make FROM car_names WHERE MakeId IN (SELECT a.MakeId FROM cars_data a \
                 LEFT JOIN car_names b ON a.Id = b.MakeId)"
            )
        );
        // PostgreSQL folds bare names: a name with capitals is quoted.
        assert_eq!(
            rejoined(
                "SELECT 1 FROM cars_data t1 JOIN car_names t2 ON t1.makeid = t2.makeid",
                SqlDialect::Postgres
            )
            .as_deref(),
            Some("SELECT 1 FROM cars_data t1 JOIN car_names t2 ON t1.\"Id\" = t2.\"MakeId\"")
        );
        // MySQL reads "Id" as a string (and the guard refuses it): its names are bare,
        // as its column names ignore case, or in backticks.
        assert_eq!(
            rejoined(
                "SELECT 1 FROM cars_data t1 JOIN car_names t2 ON t1.makeid = t2.makeid",
                SqlDialect::Mysql
            )
            .as_deref(),
            Some("SELECT 1 FROM cars_data t1 JOIN car_names t2 ON t1.Id = t2.MakeId")
        );
        assert_eq!(
            identifier("Air Date", SqlDialect::Mysql).to_string(),
            "`Air Date`"
        );
        assert_eq!(
            identifier("Air Date", SqlDialect::Sqlite).to_string(),
            "\"Air Date\""
        );
    }

    #[test]
    fn joins_the_rules_cannot_mend_exactly_are_left_to_the_model() {
        for sql in [
            // Both columns exist: whatever is wrong is elsewhere.
            "SELECT 1 FROM cars_data T1 JOIN car_names T2 ON T1.Id = T2.MakeId WHERE T1.Make = 'x'",
            // No foreign key links the two tables.
            "SELECT 1 FROM cars_data T1 JOIN model_list T2 ON T1.Model = T2.Model",
            // A table joined to itself: which way the key runs is not known.
            "SELECT 1 FROM employee a JOIN employee b ON a.Boss = b.Id",
            // Not one equality of two qualified columns.
            "SELECT 1 FROM cars_data T1 JOIN car_names T2 ON T1.MakeId = T2.MakeId AND T1.Weight > 1",
            "SELECT 1 FROM cars_data T1 JOIN car_names T2 ON MakeId = T2.MakeId",
            // An alias that names two tables.
            "SELECT 1 FROM cars_data T1 JOIN car_names T2 ON T1.MakeId = T2.MakeId \
             WHERE EXISTS (SELECT 1 FROM model_list T1)",
            // No join at all, or not SQL.
            "SELECT MakeId FROM cars_data",
            "SELEC nothing",
        ] {
            assert_eq!(rejoined(sql, SqlDialect::Sqlite), None, "{sql}");
        }
    }

    #[test]
    fn unknown_column_names_are_read_from_every_dialect() {
        assert_eq!(
            unknown_column("no such column: T2.Quantity"),
            Some(UnknownColumn {
                qualifier: Some("T2".to_string()),
                column: "Quantity".to_string()
            })
        );
        assert_eq!(
            unknown_column("column \"cust_nme\" does not exist").map(|c| c.column),
            Some("cust_nme".to_string())
        );
        assert_eq!(
            unknown_column("column b.cust_nme does not exist").and_then(|c| c.qualifier),
            Some("b".to_string())
        );
        // MySQL and MariaDB: the whole name in quotes, then the clause it was met in.
        assert_eq!(
            unknown_column("Unknown column 'Name' in 'SELECT'"),
            Some(UnknownColumn {
                qualifier: None,
                column: "Name".to_string()
            })
        );
        assert_eq!(
            unknown_column("Unknown column 'T1.MakeId' in 'on clause'"),
            Some(UnknownColumn {
                qualifier: Some("T1".to_string()),
                column: "MakeId".to_string()
            })
        );
        assert_eq!(
            unknown_column("Unknown column 'cust_nme' in 'field list'").map(|c| c.column),
            Some("cust_nme".to_string())
        );
        assert_eq!(unknown_column("syntax error"), None);
    }

    #[test]
    fn aliases_map_every_scope_to_its_table() {
        let known = aliases(
            "SELECT T2.Quantity FROM tracks AS T2 JOIN invoice_items T3 ON T2.TrackId = T3.TrackId \
             WHERE T2.x IN (SELECT a.y FROM albums a) AND EXISTS (SELECT 1 FROM genres)",
            SqlDialect::Sqlite,
        );
        let table = |alias: &str| {
            known
                .get(alias)
                .map(|(written, table)| (written.as_str(), table.as_str()))
        };
        assert_eq!(table("t2"), Some(("T2", "tracks")));
        assert_eq!(table("t3"), Some(("T3", "invoice_items")));
        assert_eq!(table("a"), Some(("a", "albums")));
        assert_eq!(table("genres"), Some(("genres", "genres")));
    }
}
