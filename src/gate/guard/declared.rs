//! The names a statement declares before any is checked: CTE names, table aliases, the
//! relations whose whole row holds a restricted column, and the columns every CTE and
//! derived table exposes.

use super::*;

// ---------------------------------------------------------------------------------
// Pass 2: names declared by the statement (CTE names, table aliases).
// ---------------------------------------------------------------------------------

#[derive(Default)]
pub(super) struct DeclaredNames {
    /// Names declared by WITH anywhere in the statement.
    pub(super) ctes: BTreeSet<String>,
    /// Alias or table name -> base tables it may stand for (a name reused in several
    /// scopes maps to all of them; every restriction check takes the union).
    pub(super) relations: BTreeMap<String, BTreeSet<String>>,
    /// Names (aliases and table names) that stand for a table with restricted columns:
    /// used bare in an expression they are a whole-row reference.
    pub(super) restricted_relations: BTreeSet<String>,
    /// Restricted column names of every restricted table the statement reads.
    pub(super) restricted_columns_in_play: BTreeSet<String>,
    /// Aliases of derived tables, table functions and CTE references: columns
    /// qualified by them come from a subquery that is checked on its own.
    pub(super) derived_aliases: BTreeSet<String>,
    /// Column names given by a base table's alias (`bills AS b(id, n)`).
    pub(super) alias_columns: BTreeMap<String, BTreeSet<String>>,
    /// Alias of a derived table, table function or other non-table FROM item -> the
    /// columns it exposes (merged over every scope that uses the alias).
    pub(super) derived_columns: BTreeMap<String, name_resolution::Columns>,
    /// CTE name -> the columns it exposes.
    pub(super) cte_columns: BTreeMap<String, name_resolution::Columns>,
}

pub(super) fn collect_names(query: &Query, policy: &GuardPolicy) -> DeclaredNames {
    struct Collector<'a> {
        policy: &'a GuardPolicy,
        names: DeclaredNames,
    }
    impl Visitor for Collector<'_> {
        type Break = ();

        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            if let Some(with) = &query.with {
                for cte in &with.cte_tables {
                    self.names.ctes.insert(ident_name(&cte.alias.name));
                }
            }
            ControlFlow::Continue(())
        }

        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            match factor {
                TableFactor::Table {
                    name, alias, args, ..
                } if args.is_none() => {
                    let parts = object_name_parts(name);
                    let Some(table) = relation_key(&parts, self.policy.dialect) else {
                        return ControlFlow::Continue(());
                    };
                    let restricted = self.policy.restricted_columns(&table);
                    let mut aliases = vec![table.clone()];
                    if let Some(last) = parts.last() {
                        if last != &table {
                            aliases.push(last.clone());
                        }
                    }
                    if let Some(alias) = alias {
                        aliases.push(ident_name(&alias.name));
                        if !alias.columns.is_empty() {
                            self.names
                                .alias_columns
                                .entry(ident_name(&alias.name))
                                .or_default()
                                .extend(
                                    alias.columns.iter().map(|column| ident_name(&column.name)),
                                );
                        }
                    }
                    for alias in aliases {
                        self.names
                            .relations
                            .entry(alias.clone())
                            .or_default()
                            .insert(table.clone());
                        if restricted.is_some() {
                            self.names.restricted_relations.insert(alias);
                        }
                    }
                    if let Some(columns) = restricted {
                        self.names
                            .restricted_columns_in_play
                            .extend(columns.iter().cloned());
                    }
                }
                other => {
                    if let Some(alias) = table_factor_alias(other) {
                        self.names.derived_aliases.insert(ident_name(alias));
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut collector = Collector {
        policy,
        names: DeclaredNames::default(),
    };
    let _ = query.visit(&mut collector);
    let mut names = collector.names;
    // Outputs second: a derived table's `*` over a CTE needs every CTE name first.
    let (derived_columns, cte_columns) = {
        let resolver = name_resolution::Resolver {
            policy,
            ctes: &names.ctes,
        };
        let mut outputs = OutputCollector {
            resolver,
            derived: BTreeMap::new(),
            ctes: BTreeMap::new(),
        };
        let _ = query.visit(&mut outputs);
        (outputs.derived, outputs.ctes)
    };
    names.derived_columns = derived_columns;
    names.cte_columns = cte_columns;
    names
}

/// Records the columns every CTE and every non-table FROM item exposes.
pub(super) struct OutputCollector<'a> {
    pub(super) resolver: name_resolution::Resolver<'a>,
    pub(super) derived: BTreeMap<String, name_resolution::Columns>,
    pub(super) ctes: BTreeMap<String, name_resolution::Columns>,
}

impl Visitor for OutputCollector<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                let columns = self.resolver.aliased_outputs(Some(&cte.alias), &cte.query);
                self.ctes
                    .entry(ident_name(&cte.alias.name))
                    .or_default()
                    .merge(columns);
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        let columns = match factor {
            TableFactor::Table { args: None, .. } => return ControlFlow::Continue(()),
            TableFactor::Derived {
                subquery, alias, ..
            } => self.resolver.aliased_outputs(alias.as_ref(), subquery),
            // Table functions, UNNEST, nested joins with an alias: the names are the
            // database's (a function's alias may itself be its one column's name).
            _ => name_resolution::Columns::unknown(),
        };
        if let Some(alias) = table_factor_alias(factor) {
            self.derived
                .entry(ident_name(alias))
                .or_default()
                .merge(columns);
        }
        ControlFlow::Continue(())
    }
}

pub(super) fn table_factor_alias(factor: &TableFactor) -> Option<&Ident> {
    table_factor_table_alias(factor).map(|alias| &alias.name)
}

/// The alias a table factor declares, of whichever kind (a table, a derived table, a
/// table function, ...): the one list of the kinds that may carry one, for the guard and
/// for every module that reads a statement's relations.
pub fn table_factor_table_alias(factor: &TableFactor) -> Option<&TableAlias> {
    match factor {
        TableFactor::Table { alias, .. }
        | TableFactor::Derived { alias, .. }
        | TableFactor::TableFunction { alias, .. }
        | TableFactor::Function { alias, .. }
        | TableFactor::UNNEST { alias, .. }
        | TableFactor::JsonTable { alias, .. }
        | TableFactor::NestedJoin { alias, .. } => alias.as_ref(),
        _ => None,
    }
}

/// The names a statement declares for its own relations, lowercased: every table,
/// derived-table and function alias and every CTE name, in any scope.
#[derive(Default)]
pub(super) struct RelationAliases(pub(super) BTreeSet<String>);

impl Visitor for RelationAliases {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<Self::Break> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.0.insert(cte.alias.name.value.to_lowercase());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<Self::Break> {
        if let Some(alias) = table_factor_alias(factor) {
            self.0.insert(alias.value.to_lowercase());
        }
        ControlFlow::Continue(())
    }
}
