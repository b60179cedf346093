//! Column resolution for the guard: which column names a relation of a statement has.
//! A base table has the columns the policy lists; a derived table, a CTE or a set
//! operation has the output names of its query, when they can be known from the tree
//! alone (`x AS name`, a bare or qualified column, `*` over base tables). A relation
//! whose names cannot all be known (an unnamed expression, a table function) is
//! `open`: any name may be one of its columns, and the database decides.

use std::collections::BTreeSet;

use sqlparser::ast::{
    Expr, Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, TableAlias,
    TableFactor,
};

use super::{ident_name, object_name_parts, relation_key, GuardPolicy};

/// The column names of one relation, or of every relation a name stands for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Columns {
    pub names: BTreeSet<String>,
    /// Some column's name is not known: `names` is not the whole list.
    pub open: bool,
}

impl Columns {
    pub fn known(names: impl IntoIterator<Item = String>) -> Self {
        Columns {
            names: names.into_iter().collect(),
            open: false,
        }
    }

    pub fn unknown() -> Self {
        Columns {
            names: BTreeSet::new(),
            open: true,
        }
    }

    /// The columns of a name that stands for either relation (the same alias in two
    /// scopes): a reference is accepted when either may have it.
    pub fn merge(&mut self, other: Columns) {
        self.names.extend(other.names);
        self.open |= other.open;
    }

    /// Whether `column` (folded) may be one of these columns.
    pub fn may_have(&self, column: &str) -> bool {
        self.open || self.names.contains(column)
    }
}

/// Resolves the columns of relations in one statement: the policy's tables, and the
/// statement's CTE names (which shadow a table of the same name).
pub(super) struct Resolver<'a> {
    pub policy: &'a GuardPolicy,
    pub ctes: &'a BTreeSet<String>,
}

impl Resolver<'_> {
    /// The columns a derived table or CTE exposes: its alias's column list renames the
    /// first outputs by position, and the rest keep the query's names.
    pub(super) fn aliased_outputs(&self, alias: Option<&TableAlias>, query: &Query) -> Columns {
        let outputs = self.query_outputs(query);
        match alias {
            Some(alias) if !alias.columns.is_empty() => {
                let renamed: Vec<String> = alias
                    .columns
                    .iter()
                    .map(|column| ident_name(&column.name))
                    .collect();
                // The renamed positions replace the first outputs, whose names are then no
                // longer columns; which names those were is not tracked, so keep them (the
                // permissive direction) and add the new ones.
                let mut columns = outputs;
                columns.names.extend(renamed);
                columns
            }
            _ => outputs,
        }
    }

    /// The output column names of a query.
    pub(super) fn query_outputs(&self, query: &Query) -> Columns {
        self.set_expr_outputs(&query.body)
    }

    fn set_expr_outputs(&self, body: &SetExpr) -> Columns {
        match body {
            SetExpr::Select(select) => self.select_outputs(select),
            SetExpr::Query(query) => self.query_outputs(query),
            // The left side names the columns of UNION, INTERSECT and EXCEPT.
            SetExpr::SetOperation { left, .. } => self.set_expr_outputs(left),
            SetExpr::Table(table) => match &table.table_name {
                Some(name) => self.base_columns(&[ident_name(name)]),
                None => Columns::unknown(),
            },
            _ => Columns::unknown(),
        }
    }

    fn select_outputs(&self, select: &Select) -> Columns {
        let mut columns = Columns::default();
        for item in &select.projection {
            match item {
                SelectItem::ExprWithAlias { alias, .. } => {
                    columns.names.insert(ident_name(alias));
                }
                SelectItem::ExprWithAliases { aliases, .. } => {
                    columns.names.extend(aliases.iter().map(ident_name));
                }
                SelectItem::UnnamedExpr(Expr::Identifier(ident)) => {
                    columns.names.insert(ident_name(ident));
                }
                SelectItem::UnnamedExpr(Expr::CompoundIdentifier(idents)) => {
                    if let Some(last) = idents.last() {
                        columns.names.insert(ident_name(last));
                    }
                }
                // PostgreSQL names `count(*)` count and SQLite names it `count(*)`: the
                // name is the database's choice.
                SelectItem::UnnamedExpr(_) => columns.open = true,
                SelectItem::Wildcard(_) => {
                    for from in &select.from {
                        columns.merge(self.factor_columns(&from.relation));
                        for join in &from.joins {
                            columns.merge(self.factor_columns(&join.relation));
                        }
                    }
                    if select.from.is_empty() {
                        columns.open = true;
                    }
                }
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(name),
                    _,
                ) => {
                    let qualifier = object_name_parts(name);
                    let mut found = false;
                    for from in &select.from {
                        let factors = std::iter::once(&from.relation)
                            .chain(from.joins.iter().map(|j| &j.relation));
                        for factor in factors {
                            if Self::factor_is_named(factor, &qualifier) {
                                columns.merge(self.factor_columns(factor));
                                found = true;
                            }
                        }
                    }
                    if !found {
                        columns.open = true;
                    }
                }
                SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::Expr(_), _) => {
                    columns.open = true;
                }
            }
        }
        columns
    }

    /// Whether a FROM item is the one `qualifier` names (its alias, else its table name).
    fn factor_is_named(factor: &TableFactor, qualifier: &[String]) -> bool {
        let Some(last) = qualifier.last() else {
            return false;
        };
        match factor {
            TableFactor::Table { name, alias, .. } => match alias {
                Some(alias) => &ident_name(&alias.name) == last,
                None => object_name_parts(name).last() == Some(last),
            },
            other => {
                super::table_factor_alias(other).is_some_and(|alias| &ident_name(alias) == last)
            }
        }
    }

    /// The columns one FROM item contributes to `SELECT *`.
    fn factor_columns(&self, factor: &TableFactor) -> Columns {
        match factor {
            TableFactor::Table {
                name, args, alias, ..
            } if args.is_none() => {
                let renamed = alias
                    .as_ref()
                    .is_some_and(|alias| !alias.columns.is_empty());
                let mut columns = self.base_columns(&object_name_parts(name));
                if renamed {
                    if let Some(alias) = alias {
                        columns
                            .names
                            .extend(alias.columns.iter().map(|column| ident_name(&column.name)));
                    }
                }
                columns
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => self.aliased_outputs(alias.as_ref(), subquery),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => {
                let mut columns = self.factor_columns(&table_with_joins.relation);
                for join in &table_with_joins.joins {
                    columns.merge(self.factor_columns(&join.relation));
                }
                columns
            }
            _ => Columns::unknown(),
        }
    }

    /// A base table's columns from the policy, with SQLite's rowid aliases; open when the
    /// name is a CTE's (which may shadow a table) or not in the policy.
    pub(super) fn base_columns(&self, parts: &[String]) -> Columns {
        if let [name] = parts {
            if self.ctes.contains(name) {
                return Columns::unknown();
            }
        }
        let Some(key) = relation_key(parts, self.policy.dialect) else {
            return Columns::unknown();
        };
        self.table_columns(&key)
    }

    /// The columns of a table the statement names by its policy key.
    pub(super) fn table_columns(&self, key: &str) -> Columns {
        match self.policy.columns_of(key) {
            Some(names) => {
                let mut columns = Columns::known(names.iter().cloned());
                if self.policy.dialect == crate::sql_text::SqlDialect::Sqlite {
                    // Every ordinary SQLite table answers to these.
                    columns
                        .names
                        .extend(["rowid", "oid", "_rowid_"].map(str::to_string));
                }
                columns
            }
            None => Columns::unknown(),
        }
    }
}
