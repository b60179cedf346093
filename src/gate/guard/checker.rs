//! The parser check's walks over the tree: the statement's shape (nested writes, INTO,
//! locks), then functions, relations and columns in tree order, each resolved against
//! the names the statement declares (`declared.rs`) and the policy.

use super::*;

/// Words PostgreSQL reads, unquoted, as facts about the session (`SELECT current_role`)
/// rather than as column names.
pub(super) const POSTGRES_SESSION_WORDS: &[&str] = &[
    "current_role",
    "current_user",
    "session_user",
    "user",
    "current_schema",
    "current_catalog",
    "system_user",
];

/// PostgreSQL's system columns: no user column may take these names, so an unquoted one
/// is always the system column (transaction ids, a row's location, a table's oid).
pub(super) const POSTGRES_SYSTEM_COLUMNS: &[&str] =
    &["xmin", "xmax", "cmin", "cmax", "ctid", "tableoid"];

pub(super) fn is_postgres_system_column(ident: &Ident, dialect: SqlDialect) -> bool {
    dialect == SqlDialect::Postgres && POSTGRES_SYSTEM_COLUMNS.contains(&ident_name(ident).as_str())
}

/// Words MySQL and MariaDB read, unquoted and without parentheses, as the session's
/// user or role (`SELECT CURRENT_USER`).
pub(super) const MYSQL_SESSION_WORDS: &[&str] = &["current_user", "current_role"];

/// The words a dialect reads, unquoted, as facts about the session.
pub(super) fn session_words(dialect: SqlDialect) -> &'static [&'static str] {
    match dialect {
        SqlDialect::Postgres => POSTGRES_SESSION_WORDS,
        SqlDialect::Mysql => MYSQL_SESSION_WORDS,
        SqlDialect::Sqlite => &[],
    }
}

pub(super) fn is_session_fact(ident: &Ident, dialect: SqlDialect) -> bool {
    ident.quote_style.is_none() && session_words(dialect).contains(&ident_name(ident).as_str())
        || is_postgres_system_column(ident, dialect)
}

pub(super) fn session_fact_refusal(written: &str) -> Refusal {
    Refusal::new(
        RefusalReason::SystemCatalog,
        format!("{written} is information about the database system or the session, not data; query only the tables and columns in the schema"),
    )
}

// ---------------------------------------------------------------------------------
// Pass 1: the statement's shape (nested writes, INTO, locking clauses).
// ---------------------------------------------------------------------------------

pub(super) fn statement_shape_check(query: &Query) -> ControlFlow<Refusal> {
    struct ShapeChecker;
    impl Visitor for ShapeChecker {
        type Break = Refusal;

        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<Refusal> {
            if !query.locks.is_empty() {
                return ControlFlow::Break(Refusal::new(
                    RefusalReason::LockingClause,
                    "locking clauses (FOR UPDATE / FOR SHARE) are not allowed; read without locking",
                ));
            }
            if query.for_clause.is_some() {
                return ControlFlow::Break(Refusal::new(
                    RefusalReason::NotAQuery,
                    "FOR XML / FOR JSON clauses are not supported",
                ));
            }
            ControlFlow::Continue(())
        }

        fn pre_visit_statement(&mut self, statement: &Statement) -> ControlFlow<Refusal> {
            // The visit starts below the top-level statement, so any statement seen
            // here is nested inside the query: a data-modifying WITH or subquery.
            ControlFlow::Break(Refusal::new(
                RefusalReason::DataModifyingCte,
                format!(
                    "a query may not contain {} (data-modifying WITH); only SELECT is allowed",
                    statement_kind(statement)
                ),
            ))
        }

        fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<Refusal> {
            if select.into.is_some() {
                return ControlFlow::Break(Refusal::new(
                    RefusalReason::SelectInto,
                    "SELECT ... INTO creates a table; select the rows without INTO",
                ));
            }
            ControlFlow::Continue(())
        }
    }
    query.visit(&mut ShapeChecker)
}

// ---------------------------------------------------------------------------------
// Pass 3: functions, relations and columns, in tree order.
// ---------------------------------------------------------------------------------

pub(super) struct TreeChecker<'a> {
    pub(super) policy: &'a GuardPolicy,
    pub(super) names: &'a DeclaredNames,
    pub(super) tables: BTreeSet<String>,
    /// Qualified columns their relation does not have, each said once: the walk goes on
    /// past them so that one refusal names every one (a repair can fix them all at
    /// once), while any other refusal still stops it where it is found.
    pub(super) unknown_columns: Vec<String>,
}

impl TreeChecker<'_> {
    fn check_function_name(&self, name: &ObjectName) -> ControlFlow<Refusal> {
        let parts = object_name_parts(name);
        if let Some(last) = parts.last() {
            if session_words(self.policy.dialect).contains(&last.as_str()) {
                // `SELECT session_user` parses as a call without arguments.
                return ControlFlow::Break(session_fact_refusal(last));
            }
            if is_denied_function(last) {
                return ControlFlow::Break(denied_function_refusal(last));
            }
            if !self.policy.is_function_allowed(last) {
                return ControlFlow::Break(unlisted_function_refusal(last));
            }
        }
        // pg_catalog.now() is the listed now().
        // A function in any other schema (public.lower) is a user's function that only
        // shares a name with the listed one.
        if parts.len() > 1 {
            let schema = &parts[parts.len() - 2];
            if parts.len() > 2 || schema != "pg_catalog" {
                return ControlFlow::Break(unlisted_function_refusal(&parts.join(".")));
            }
        }
        ControlFlow::Continue(())
    }

    fn check_relation(&mut self, name: &ObjectName) -> ControlFlow<Refusal> {
        let parts = object_name_parts(name);
        let Some(table) = parts.last() else {
            return ControlFlow::Continue(());
        };
        let schema = if parts.len() >= 2 {
            Some(parts[parts.len() - 2].as_str())
        } else {
            None
        };
        if parts
            .iter()
            .any(|part| is_catalog_schema(part, self.policy.dialect))
            && schema != Some(self.policy.dialect.default_schema())
            || is_catalog_name(table)
        {
            return ControlFlow::Break(Refusal::new(
                RefusalReason::SystemCatalog,
                format!(
                    "system catalog {} cannot be read; the schema you were given lists every table and column",
                    parts.join(".")
                ),
            ));
        }
        if self.policy.is_hidden(table) {
            return ControlFlow::Break(Refusal::hidden_table(table));
        }
        if parts.len() == 1 && self.names.ctes.contains(table) {
            return ControlFlow::Continue(());
        }
        if let Some(key) = relation_key(&parts, self.policy.dialect) {
            if self.policy.is_hidden(&key) {
                return ControlFlow::Break(Refusal::hidden_table(&key));
            }
            if self.policy.is_visible(&key) {
                self.tables.insert(key);
                return ControlFlow::Continue(());
            }
        }
        ControlFlow::Break(Refusal::new(
            RefusalReason::UnknownTable,
            format!(
                "table \"{}\" does not exist; use only the tables in the schema",
                parts.join(".")
            ),
        ))
    }

    /// A cast's target type: ordinary scalars only.
    fn check_data_type(&self, data_type: &DataType) -> ControlFlow<Refusal> {
        match data_type {
            DataType::Custom(name, _) => {
                let parts = object_name_parts(name);
                let qualified_ok = match parts.as_slice() {
                    [_] => true,
                    [schema, _] => {
                        schema == "pg_catalog" || schema == self.policy.dialect.default_schema()
                    }
                    _ => false,
                };
                let allowed = qualified_ok
                    && parts
                        .last()
                        .is_some_and(|last| allow_list::type_allowed(self.policy.dialect, last));
                if allowed {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(denied_type_refusal(&parts.join(".")))
                }
            }
            DataType::Array(
                ArrayElemTypeDef::AngleBracket(inner)
                | ArrayElemTypeDef::SquareBracket(inner, _)
                | ArrayElemTypeDef::Parenthesis(inner)
                | ArrayElemTypeDef::ParenthesisNotNull(inner)
                | ArrayElemTypeDef::Qualified(inner, _),
            ) => self.check_data_type(inner),
            DataType::Zerofill(inner)
            | DataType::Nullable(inner)
            | DataType::LowCardinality(inner)
            | DataType::Collate(inner, _) => self.check_data_type(inner),
            DataType::Regclass
            | DataType::Table(_)
            | DataType::NamedTable { .. }
            | DataType::Map(..)
            | DataType::Tuple(_)
            | DataType::Nested(_)
            | DataType::Object(_)
            | DataType::Enum(..)
            | DataType::Set(_)
            | DataType::Struct(..)
            | DataType::Union(_)
            | DataType::Unspecified
            | DataType::Trigger
            | DataType::AnyType => {
                ControlFlow::Break(denied_type_refusal(&data_type.to_string().to_lowercase()))
            }
            _ => ControlFlow::Continue(()),
        }
    }

    /// Every column the relations named `qualifier` may have (tables, CTEs, derived
    /// tables and aliases' column lists, over every scope), or None when the statement
    /// declares no relation of that name (the database then reports the reference).
    fn qualifier_columns(&self, qualifier: &str) -> Option<name_resolution::Columns> {
        let resolver = name_resolution::Resolver {
            policy: self.policy,
            ctes: &self.names.ctes,
        };
        let mut found: Option<name_resolution::Columns> = None;
        let mut merge = |columns: name_resolution::Columns| match &mut found {
            Some(known) => known.merge(columns),
            None => found = Some(columns),
        };
        if let Some(tables) = self.names.relations.get(qualifier) {
            for table in tables {
                if self.names.ctes.contains(table) {
                    merge(
                        self.names
                            .cte_columns
                            .get(table)
                            .cloned()
                            .unwrap_or_else(name_resolution::Columns::unknown),
                    );
                }
                if self.policy.columns_of(table).is_some() || !self.names.ctes.contains(table) {
                    merge(resolver.table_columns(table));
                }
            }
        }
        if let Some(columns) = self.names.alias_columns.get(qualifier) {
            merge(name_resolution::Columns::known(columns.iter().cloned()));
        }
        if let Some(columns) = self.names.derived_columns.get(qualifier) {
            merge(columns.clone());
        }
        found
    }

    /// A qualified reference must name a column of a relation its qualifier stands for.
    /// `c.to_jsonb` on a table is PostgreSQL's attribute notation for `to_jsonb(c)`, the
    /// whole row; `T2.quantity` where T2 is tracks reads nothing the query meant. The
    /// refusal uses the database's own words (`column T2.x does not exist`), so the
    /// agent repairs it as it repairs the database's error, and lists the relation's
    /// columns as the schema spells them (`sbTickerType`, not the folded `sbtickertype`
    /// a case-sensitive engine would not find).
    fn check_qualified_resolves(
        &self,
        qualifier: &str,
        column: &str,
        written: &str,
    ) -> ControlFlow<Refusal> {
        let Some(columns) = self.qualifier_columns(qualifier) else {
            return ControlFlow::Continue(());
        };
        if columns.may_have(column) {
            return ControlFlow::Continue(());
        }
        let tables: Vec<&str> = self
            .names
            .relations
            .get(qualifier)
            .map(|tables| tables.iter().map(String::as_str).collect())
            .unwrap_or_default();
        let shown_qualifier = written.rsplit_once('.').map_or(qualifier, |(left, _)| left);
        let described: Vec<String> = tables
            .iter()
            .map(|table| {
                if self.names.ctes.contains(*table) {
                    format!("the WITH query {table}")
                } else {
                    (*table).to_string()
                }
            })
            .collect();
        let stands_for = if described.is_empty() {
            format!("{shown_qualifier} is a subquery")
        } else {
            format!("{shown_qualifier} is {}", described.join(" / "))
        };
        let is_function = is_denied_function(column)
            || allow_list::function_allowed(self.policy.dialect, column)
            || self.policy.extra_functions.contains(column);
        let why = if is_function {
            " (attribute notation such as alias.function on a whole row is not allowed)"
        } else {
            ""
        };
        // A table's columns as its schema declares them (the model and the person reading
        // the refusal write what they see), then the names only the statement gives.
        let mut listed: Vec<&str> = Vec::new();
        for table in &tables {
            if self.names.ctes.contains(*table) {
                continue;
            }
            for declared in self.policy.declared_columns(table).unwrap_or_default() {
                let folded = fold(declared);
                if columns.names.contains(&folded)
                    && !listed.iter().any(|name| fold(name) == folded)
                {
                    listed.push(declared);
                }
            }
        }
        for name in &columns.names {
            if !listed.iter().any(|listed| fold(listed) == *name) {
                listed.push(name);
            }
        }
        listed.retain(|name| !matches!(fold(name).as_str(), "rowid" | "oid" | "_rowid_"));
        listed.retain(|name| {
            !tables
                .iter()
                .any(|table| self.policy.is_restricted(table, name))
        });
        ControlFlow::Break(Refusal::new(
            RefusalReason::UnknownColumn,
            format!(
                "column {written} does not exist: {stands_for}, which has no column {column}{why}; its columns are {}",
                listed.join(", ")
            ),
        ))
    }

    /// `alias.name` where the alias stands, in some scope, for a table with restricted
    /// columns that has no column `name`: PostgreSQL may read it as attribute notation, a
    /// function of that table's whole row (`c.to_jsonb`), even when another relation
    /// sharing the alias (an open derived table) could have the name.
    fn check_whole_row_notation(
        &self,
        qualifier: &str,
        column: &str,
        written: &str,
    ) -> ControlFlow<Refusal> {
        if !self.names.restricted_relations.contains(qualifier) {
            return ControlFlow::Continue(());
        }
        let resolver = name_resolution::Resolver {
            policy: self.policy,
            ctes: &self.names.ctes,
        };
        let is_a_column = self.names.relations.get(qualifier).is_some_and(|tables| {
            tables
                .iter()
                .any(|table| resolver.table_columns(table).may_have(column))
        });
        if is_a_column {
            return ControlFlow::Continue(());
        }
        ControlFlow::Break(restricted_refusal(&format!(
            "{written} names no column of the table with restricted columns that {qualifier} stands for (it would be read as a function of the whole row), so it"
        )))
    }

    /// A column reference `qualifier.column` or bare `column`.
    fn check_column(
        &self,
        qualifier: Option<&str>,
        column: &str,
        written: &str,
    ) -> ControlFlow<Refusal> {
        if let Some(qualifier) = qualifier {
            self.check_qualified_resolves(qualifier, column, written)?;
            self.check_whole_row_notation(qualifier, column, written)?;
        }
        if !self.names.restricted_columns_in_play.contains(column) {
            return ControlFlow::Continue(());
        }
        let refuse = match qualifier {
            // A bare name that some restricted table of this statement owns.
            None => true,
            Some(qualifier) => match self.names.relations.get(qualifier) {
                Some(tables) => tables
                    .iter()
                    .any(|table| self.policy.is_restricted(table, column)),
                // Qualified by a derived table or CTE alias: its columns come from a
                // subquery the guard also checks, but the alias may rename a restricted
                // column into this name, so stay on the safe side.
                None => true,
            },
        };
        if refuse {
            let shown = match qualifier {
                Some(qualifier) => format!("column {qualifier}.{column}"),
                None => format!("column {column}"),
            };
            return ControlFlow::Break(restricted_refusal(&shown));
        }
        ControlFlow::Continue(())
    }

    /// `alias.*` in a select list or a function argument.
    fn check_qualified_wildcard(&self, qualifier: &ObjectName) -> ControlFlow<Refusal> {
        let parts = object_name_parts(qualifier);
        let Some(last) = parts.last() else {
            return ControlFlow::Continue(());
        };
        if self.names.restricted_relations.contains(last) {
            return ControlFlow::Break(restricted_refusal(&format!(
                "{last}.* includes a restricted column and"
            )));
        }
        ControlFlow::Continue(())
    }

    fn check_select(&self, select: &Select) -> ControlFlow<Refusal> {
        let restricted_in_from: Vec<String> = select
            .from
            .iter()
            .flat_map(base_tables_of)
            .filter(|table| self.policy.restricted_columns(table).is_some())
            .collect();
        for item in &select.projection {
            match item {
                SelectItem::Wildcard(_) => {
                    if let Some(table) = restricted_in_from.first() {
                        return ControlFlow::Break(restricted_refusal(&format!(
                            "SELECT * over {table} includes a restricted column and"
                        )));
                    }
                }
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(name),
                    _,
                ) => self.check_qualified_wildcard(name)?,
                SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::Expr(_), _) => {}
                SelectItem::UnnamedExpr(_)
                | SelectItem::ExprWithAlias { .. }
                | SelectItem::ExprWithAliases { .. } => {}
            }
        }
        for table_with_joins in &select.from {
            self.check_joins(table_with_joins)?;
        }
        ControlFlow::Continue(())
    }

    /// The visible base tables of one FROM item, or None when it is anything else (a
    /// derived table, a function, a CTE name): then its columns are not known.
    fn plain_tables(&self, factor: &TableFactor, out: &mut Vec<String>) -> Option<()> {
        match factor {
            TableFactor::Table { name, args, .. } if args.is_none() => {
                let parts = object_name_parts(name);
                if parts.len() == 1 && parts.iter().any(|part| self.names.ctes.contains(part)) {
                    return None;
                }
                let key = relation_key(&parts, self.policy.dialect)?;
                if !self.policy.is_visible(&key) {
                    return None;
                }
                out.push(key);
                Some(())
            }
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => {
                self.plain_tables(&table_with_joins.relation, out)?;
                for join in &table_with_joins.joins {
                    self.plain_tables(&join.relation, out)?;
                }
                Some(())
            }
            _ => None,
        }
    }

    /// Whether the `index`-th join, a NATURAL JOIN, may match on a restricted column: the
    /// columns both sides share are known only for plain tables, so anything else may.
    fn natural_join_may_match_restricted(&self, from: &TableWithJoins, index: usize) -> bool {
        let mut left = Vec::new();
        let mut right = Vec::new();
        let known = self.plain_tables(&from.relation, &mut left).is_some()
            && from
                .joins
                .iter()
                .take(index)
                .all(|join| self.plain_tables(&join.relation, &mut left).is_some())
            && from
                .joins
                .get(index)
                .is_some_and(|join| self.plain_tables(&join.relation, &mut right).is_some());
        if !known {
            return true;
        }
        let columns = |tables: &[String]| -> BTreeSet<String> {
            tables
                .iter()
                .filter_map(|table| self.policy.columns_of(table))
                .flatten()
                .cloned()
                .collect()
        };
        let (left_columns, right_columns) = (columns(&left), columns(&right));
        left.iter().chain(right.iter()).any(|table| {
            self.policy
                .restricted_columns(table)
                .is_some_and(|restricted| {
                    restricted.iter().any(|column| {
                        left_columns.contains(column) && right_columns.contains(column)
                    })
                })
        })
    }

    fn check_joins(&self, table_with_joins: &TableWithJoins) -> ControlFlow<Refusal> {
        let involved: Vec<String> = base_tables_of(table_with_joins)
            .into_iter()
            .filter(|table| self.policy.restricted_columns(table).is_some())
            .collect();
        if involved.is_empty() {
            return ControlFlow::Continue(());
        }
        for (index, join) in table_with_joins.joins.iter().enumerate() {
            match join_constraint(&join.join_operator) {
                Some(JoinConstraint::Natural)
                    if self.natural_join_may_match_restricted(table_with_joins, index) =>
                {
                    return ControlFlow::Break(restricted_refusal(&format!(
                        "a NATURAL JOIN with {} may match on a restricted column and",
                        involved.join(", ")
                    )));
                }
                Some(JoinConstraint::Using(columns))
                | Some(JoinConstraint::UsingAlias(columns, _)) => {
                    for column in columns {
                        if let Some(name) = object_name_parts(column).last() {
                            if involved
                                .iter()
                                .any(|table| self.policy.is_restricted(table, name))
                            {
                                return ControlFlow::Break(restricted_refusal(&format!(
                                    "USING ({name})"
                                )));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }

    fn check_set_expr_tables(&mut self, body: &SetExpr) -> ControlFlow<Refusal> {
        match body {
            SetExpr::Table(table) => {
                let Some(name) = &table.table_name else {
                    return ControlFlow::Continue(());
                };
                let mut parts = Vec::new();
                if let Some(schema) = &table.schema_name {
                    parts.push(schema.clone());
                }
                parts.push(name.clone());
                let object = ObjectName::from(parts);
                self.check_relation(&object)?;
                let table = fold(&name.value);
                if self.policy.restricted_columns(&table).is_some() {
                    return ControlFlow::Break(restricted_refusal(&format!(
                        "TABLE {table} reads every column, including a restricted one, and"
                    )));
                }
                ControlFlow::Continue(())
            }
            SetExpr::SetOperation { left, right, .. } => {
                self.check_set_expr_tables(left)?;
                self.check_set_expr_tables(right)
            }
            _ => ControlFlow::Continue(()),
        }
    }
}

pub(super) fn join_constraint(operator: &JoinOperator) -> Option<&JoinConstraint> {
    match operator {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c)
        | JoinOperator::Semi(c)
        | JoinOperator::LeftSemi(c)
        | JoinOperator::RightSemi(c)
        | JoinOperator::Anti(c)
        | JoinOperator::LeftAnti(c)
        | JoinOperator::RightAnti(c) => Some(c),
        JoinOperator::AsOf { constraint, .. } => Some(constraint),
        _ => None,
    }
}

/// The base tables named directly in a FROM item and its joins (not inside subqueries).
pub(super) fn base_tables_of(table_with_joins: &TableWithJoins) -> Vec<String> {
    fn of_factor(factor: &TableFactor, out: &mut Vec<String>) {
        match factor {
            TableFactor::Table { name, args, .. } if args.is_none() => {
                let parts = object_name_parts(name);
                // Both spellings: the bare name and the schema-qualified key, so a
                // restriction on either is seen.
                if let Some(table) = parts.last() {
                    out.push(table.clone());
                }
                if parts.len() == 2 {
                    out.push(parts.join("."));
                }
            }
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => {
                out.extend(base_tables_of(table_with_joins));
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    of_factor(&table_with_joins.relation, &mut out);
    for join in &table_with_joins.joins {
        of_factor(&join.relation, &mut out);
    }
    out
}

impl Visitor for TreeChecker<'_> {
    type Break = Refusal;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<Refusal> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                let name = ident_name(&cte.alias.name);
                // A WITH name may not shadow a hidden table or a catalog: the shadow
                // would let a reference elsewhere in the statement reach the real one.
                if self.policy.is_hidden(&name) {
                    return ControlFlow::Break(Refusal::hidden_table(&name));
                }
                if is_catalog_name(&name) {
                    return ControlFlow::Break(Refusal::new(
                        RefusalReason::SystemCatalog,
                        format!("the name {name} is reserved for system catalogs"),
                    ));
                }
            }
        }
        self.check_set_expr_tables(&query.body)
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<Refusal> {
        self.check_select(select)
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<Refusal> {
        if let Some(alias) = table_factor_table_alias(factor) {
            for column in &alias.columns {
                if let Some(data_type) = &column.data_type {
                    self.check_data_type(data_type)?;
                }
            }
        }
        match factor {
            TableFactor::Table {
                name, args, alias, ..
            } => {
                // `customers AS c(id, name, p)` renames columns by position, so `c.p`
                // would read phone under another name.
                let renames_columns = alias
                    .as_ref()
                    .is_some_and(|alias| !alias.columns.is_empty());
                let table = object_name_parts(name).last().cloned().unwrap_or_default();
                if args.is_none()
                    && renames_columns
                    && self.policy.restricted_columns(&table).is_some()
                {
                    return ControlFlow::Break(restricted_refusal(&format!(
                        "renaming the columns of {table}, which has a restricted column,"
                    )));
                }
                if args.is_some() {
                    // A table function written like a table: `FROM pg_sleep(1)`.
                    let parts = object_name_parts(name);
                    let last = parts.last().map(String::as_str).unwrap_or_default();
                    if is_denied_function(last) {
                        return ControlFlow::Break(denied_function_refusal(last));
                    }
                    if is_catalog_name(last) {
                        return ControlFlow::Break(Refusal::new(
                            RefusalReason::SystemCatalog,
                            format!("{last}() reads the system catalog and is not allowed"),
                        ));
                    }
                    self.check_function_name(name)
                } else {
                    self.check_relation(name)
                }
            }
            TableFactor::Function { name, .. } => {
                let parts = object_name_parts(name);
                let last = parts.last().map(String::as_str).unwrap_or_default();
                if is_catalog_name(last) && !is_denied_function(last) {
                    return ControlFlow::Break(Refusal::new(
                        RefusalReason::SystemCatalog,
                        format!("{last}() reads the system catalog and is not allowed"),
                    ));
                }
                self.check_function_name(name)
            }
            _ => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<Refusal> {
        match expr {
            Expr::Trim {
                trim_what,
                trim_characters,
                ..
            } => {
                let mut sets: Vec<&Expr> = trim_what.iter().map(|what| what.as_ref()).collect();
                sets.extend(trim_characters.iter().flatten());
                match bounds::check_character_sets("trim", &sets) {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(refusal) => ControlFlow::Break(refusal),
                }
            }
            Expr::Function(function) => {
                self.check_function_name(&function.name)?;
                if let Some(last) = object_name_parts(&function.name).last() {
                    if let Err(refusal) = bounds::check_built_size(last, &function.args) {
                        return ControlFlow::Break(refusal);
                    }
                }
                if let FunctionArguments::List(list) = &function.args {
                    for arg in &list.args {
                        let arg_expr = match arg {
                            FunctionArg::Named { arg, .. }
                            | FunctionArg::ExprNamed { arg, .. }
                            | FunctionArg::Unnamed(arg) => arg,
                        };
                        if let FunctionArgExpr::QualifiedWildcard(qualifier) = arg_expr {
                            self.check_qualified_wildcard(qualifier)?;
                        }
                    }
                }
                ControlFlow::Continue(())
            }
            // Calls with a syntax of their own parse as their own nodes, not as a
            // function: the allow-list still decides (SQLite's build has none of these).
            Expr::Ceil { .. }
            | Expr::Floor { .. }
            | Expr::Position { .. }
            | Expr::Overlay { .. }
            | Expr::Extract { .. } => {
                let name = match expr {
                    Expr::Ceil { .. } => "ceil",
                    Expr::Floor { .. } => "floor",
                    Expr::Position { .. } => "position",
                    Expr::Overlay { .. } => "overlay",
                    _ => "extract",
                };
                if self.policy.is_function_allowed(name) {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(unlisted_function_refusal(name))
                }
            }
            Expr::Cast { data_type, .. } => self.check_data_type(data_type),
            Expr::Collate { collation, .. } if self.policy.dialect == SqlDialect::Sqlite => {
                // SQLite resolves a collation only where it compares, so an unknown one
                // can pass in the text as written and fail once the query is wrapped.
                let name = object_name_parts(collation).join(".");
                if matches!(name.as_str(), "binary" | "nocase" | "rtrim") {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(Refusal::new(
                        RefusalReason::ParseError,
                        format!(
                            "collation {name} does not exist; SQLite has BINARY, NOCASE and RTRIM"
                        ),
                    ))
                }
            }
            Expr::TypedString(typed) => self.check_data_type(&typed.data_type),
            Expr::Identifier(ident) if is_session_fact(ident, self.policy.dialect) => {
                ControlFlow::Break(session_fact_refusal(&ident.value))
            }
            Expr::CompoundIdentifier(idents)
                if idents
                    .last()
                    .is_some_and(|last| is_postgres_system_column(last, self.policy.dialect)) =>
            {
                let written: Vec<&str> = idents.iter().map(|ident| ident.value.as_str()).collect();
                ControlFlow::Break(session_fact_refusal(&written.join(".")))
            }
            Expr::Identifier(ident) => {
                let name = ident_name(ident);
                // Also when a derived table or CTE of another scope has the same name:
                // an inner scope may still mean the table (alias shadowing).
                if self.names.restricted_relations.contains(&name) {
                    return ControlFlow::Break(restricted_refusal(&format!(
                        "the whole-row reference {name} includes a restricted column and"
                    )));
                }
                self.check_column(None, &name, &ident.value)
            }
            Expr::CompoundIdentifier(idents) => {
                let names: Vec<String> = idents.iter().map(ident_name).collect();
                let column = names.last().map(String::as_str).unwrap_or_default();
                let qualifier = names
                    .len()
                    .checked_sub(2)
                    .and_then(|index| names.get(index))
                    .map(String::as_str);
                let written: Vec<&str> = idents.iter().map(|ident| ident.value.as_str()).collect();
                match self.check_column(qualifier, column, &written.join(".")) {
                    ControlFlow::Break(refusal)
                        if refusal.reason == RefusalReason::UnknownColumn =>
                    {
                        if !self.unknown_columns.contains(&refusal.message) {
                            self.unknown_columns.push(refusal.message);
                        }
                        ControlFlow::Continue(())
                    }
                    other => other,
                }
            }
            Expr::QualifiedWildcard(qualifier, _) => self.check_qualified_wildcard(qualifier),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::BitwiseAnd,
                right,
            } if self.policy.dialect == SqlDialect::Postgres
                && is_unicode_escape_shape(left, right) =>
            {
                // PostgreSQL reads U&"\0070hone" as the identifier phone; sqlparser
                // reads it as `U & "\0070hone"`. The re-rendered text would be harmless,
                // but the guard cannot see the name, so it refuses to guess.
                ControlFlow::Break(Refusal::new(
                    RefusalReason::ParseError,
                    "unicode-escaped names and strings (U&\"...\" / U&'...') are not supported; write the plain name",
                ))
            }
            _ => ControlFlow::Continue(()),
        }
    }
}

/// `U & "..."` or `U & '...'`: how sqlparser reads PostgreSQL's U&"..." escapes.
pub(super) fn is_unicode_escape_shape(left: &Expr, right: &Expr) -> bool {
    let left_is_u = matches!(left, Expr::Identifier(ident)
        if ident.quote_style.is_none() && ident.value.eq_ignore_ascii_case("u"));
    let quoted = |ident: Option<&Ident>| ident.is_some_and(|ident| ident.quote_style == Some('"'));
    let right_is_quoted = match right {
        Expr::Identifier(ident) => quoted(Some(ident)),
        Expr::CompoundIdentifier(idents) => quoted(idents.first()),
        Expr::Function(function) => {
            quoted(function.name.0.first().and_then(|part| part.as_ident()))
        }
        Expr::Value(value) => matches!(value.value, Value::SingleQuotedString(_)),
        _ => false,
    };
    left_is_u && right_is_quoted
}

// ---------------------------------------------------------------------------------
// The row cap.
// ---------------------------------------------------------------------------------

pub(super) fn literal_count(expr: &Expr) -> Option<u64> {
    match expr {
        Expr::Value(value) => match &value.value {
            Value::Number(text, _) => text.parse::<u64>().ok(),
            _ => None,
        },
        Expr::Nested(inner) => literal_count(inner),
        _ => None,
    }
}
