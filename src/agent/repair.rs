//! Schema facts for a repair, computed from the failing query and the schema, never from
//! the model: for an unknown column, which alias of the failing query stands for which
//! table, which table owns the column (spelled as it is stored) and what it is called in
//! the query, or the foreign-key path to it; for a type mismatch, the cards of the tables
//! involved. The words that carry these facts to the model are in
//! [`super::prompts::column_fact_text`].

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use sqlparser::ast::{ObjectNamePart, TableFactor, Visit, Visitor};
use sqlparser::parser::Parser;

use crate::gate::SqlDialect;
use crate::linking::{JoinHop, SchemaIndex};

/// A column a database said does not exist, as the error named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownColumn {
    /// The qualifier as written (`T2` in `T2.Quantity`), if any.
    pub qualifier: Option<String>,
    pub column: String,
}

/// Reads the column out of an unknown-column error: SQLite says `no such column:
/// b.cust_nme`, PostgreSQL says `column "cust_nme" does not exist` or `column
/// b.cust_nme does not exist`.
pub fn unknown_column(message: &str) -> Option<UnknownColumn> {
    let named = if let Some(rest) = message.split("no such column:").nth(1) {
        rest.split_whitespace().next()?.to_string()
    } else if let Some(rest) = message.split("column ").nth(1) {
        rest.split(" does not exist").next()?.trim().to_string()
    } else {
        return None;
    };
    let parts: Vec<String> = named
        .split('.')
        .map(|part| part.trim_matches('"').to_string())
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

    #[test]
    fn unknown_column_names_are_read_from_both_dialects() {
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
