//! The guard: the first safety layer. It bounds the statement's size on its tokens,
//! parses it with a real SQL parser (sqlparser-rs, PostgreSQL or SQLite dialect), forces
//! the row cap into the outermost LIMIT and re-renders the tree. Then it proves the round
//! trip: the re-rendered text is parsed again with the same dialect and must give the
//! very tree that was parsed and rewritten. Only then are the checks made, once, on that
//! tree (the one the text that runs parses to): it walks the whole tree and refuses
//! anything that is not one plain read-only query over allowed tables and columns using
//! allowed functions and types. Only that text runs, so a trick the parser did not see,
//! a rendering that changes meaning, or a rewrite of the guard's own, cannot reach the
//! database unchecked.
//!
//! Nothing here matches SQL text with strings or regular expressions: every decision is
//! taken on the parsed tree. Name comparisons are case-insensitive (the conservative
//! direction: a quoted `"PHONE"` in PostgreSQL names a column that does not exist, and
//! refusing it costs nothing).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sqlparser::ast::{
    escape_quoted_string, ArrayElemTypeDef, BinaryOperator, DataType, Expr, FunctionArg,
    FunctionArgExpr, FunctionArguments, Ident, JoinConstraint, JoinOperator, LimitClause,
    ObjectName, ObjectNamePart, Query, Select, SelectItem, SelectItemQualifiedWildcardKind,
    SetExpr, Statement, TableAlias, TableFactor, TableWithJoins, Value, ValueWithSpan, Visit,
    Visitor, VisitorMut,
};
use sqlparser::parser::Parser;

mod allow_list;
pub mod bounds;
pub(crate) mod postgres_plan;
pub(crate) mod resolution;
mod runner;
mod scope;

pub use runner::RUNTIME_STACK_BYTES;

/// The default row cap forced into every query's LIMIT.
pub const DEFAULT_ROW_CAP: u64 = 200;

/// The longest statement the guard will read, in bytes; longer input is refused before
/// parsing so a pathological statement cannot tie up the parser.
pub const MAX_SQL_BYTES: usize = 100_000;

pub use crate::sql_text::SqlDialect;

/// What the guard allows: the visible tables with their columns, the restricted
/// columns, the hidden tables and the row cap. All names are lower-cased on insertion.
#[derive(Debug, Clone)]
pub struct GuardPolicy {
    pub dialect: SqlDialect,
    pub row_cap: u64,
    /// Which policy this is: a [`CheckedQuery`] carries the id of the policy that
    /// checked it, so a query checked for one database cannot run on another.
    id: u64,
    tables: BTreeMap<String, BTreeSet<String>>,
    restricted: BTreeMap<String, BTreeSet<String>>,
    hidden: BTreeSet<String>,
    /// Functions this database's notes add to the reviewed allow-list.
    extra_functions: BTreeSet<String>,
}

impl GuardPolicy {
    pub fn new(dialect: SqlDialect) -> Self {
        static NEXT_POLICY_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        GuardPolicy {
            dialect,
            row_cap: DEFAULT_ROW_CAP,
            id: NEXT_POLICY_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            tables: BTreeMap::new(),
            restricted: BTreeMap::new(),
            hidden: BTreeSet::new(),
            extra_functions: BTreeSet::new(),
        }
    }

    /// Allows one more function for this database (from its notes). The hard deny list
    /// still wins: a denied function cannot be allowed.
    pub fn allow_function(&mut self, name: &str) {
        self.extra_functions.insert(fold(name));
    }

    /// Whether a function (lower-cased last name part) may be called.
    pub fn is_function_allowed(&self, name: &str) -> bool {
        !is_denied_function(name)
            && (allow_list::function_allowed(self.dialect, name)
                || self.extra_functions.contains(name))
    }

    /// The columns of a visible table (lower-cased), restricted ones included.
    pub fn columns_of(&self, table: &str) -> Option<&BTreeSet<String>> {
        self.tables.get(&fold(table))
    }

    /// Allows a table with these columns (unless it is also declared hidden).
    pub fn allow_table<I, S>(&mut self, table: &str, columns: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.tables.insert(
            fold(table),
            columns.into_iter().map(|c| fold(c.as_ref())).collect(),
        );
    }

    /// Marks `table.column` as restricted: never readable through the guard.
    pub fn restrict_column(&mut self, table: &str, column: &str) {
        self.restricted
            .entry(fold(table))
            .or_default()
            .insert(fold(column));
    }

    /// Hides a table: refused as unknown, and a refusal that is never repaired.
    pub fn hide_table(&mut self, table: &str) {
        self.hidden.insert(fold(table));
    }

    pub fn is_visible(&self, table: &str) -> bool {
        let table = fold(table);
        self.tables.contains_key(&table) && !self.hidden.contains(&table)
    }

    pub fn is_hidden(&self, table: &str) -> bool {
        self.hidden.contains(&fold(table))
    }

    pub fn is_restricted(&self, table: &str, column: &str) -> bool {
        self.restricted
            .get(&fold(table))
            .is_some_and(|columns| columns.contains(&fold(column)))
    }

    /// The identity a [`CheckedQuery`] records.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The restricted columns of one table (lower-cased).
    pub fn restricted_columns(&self, table: &str) -> Option<&BTreeSet<String>> {
        self.restricted.get(&fold(table))
    }
}

/// Why the guard refused a statement. The JSON name is the stable reason code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalReason {
    EmptyStatement,
    TooLong,
    ParseError,
    MultipleStatements,
    NotAQuery,
    DataModifyingCte,
    SelectInto,
    LockingClause,
    DeniedFunction,
    SystemCatalog,
    UnknownTable,
    RestrictedColumn,
    /// A qualified column the relation does not have, such as attribute notation on a
    /// whole row (`c.to_jsonb`).
    UnknownColumn,
    /// A cast to a type that is not an ordinary scalar (reg* types, oid, row types).
    DeniedType,
    /// A literal size argument over the bound (`repeat('x', 50000000)`).
    TooLarge,
    /// The re-rendered text would not parse back to the checked tree.
    UnsafeRendering,
    /// A checked query presented to a gate whose policy did not check it.
    ForeignPolicy,
    /// The database's own resolution of the statement (its plan, or what it reads as it
    /// is prepared) could not be read, so it could not be verified.
    UnreadableResolution,
}

impl RefusalReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::EmptyStatement => "empty_statement",
            RefusalReason::TooLong => "too_long",
            RefusalReason::ParseError => "parse_error",
            RefusalReason::MultipleStatements => "multiple_statements",
            RefusalReason::NotAQuery => "not_a_query",
            RefusalReason::DataModifyingCte => "data_modifying_cte",
            RefusalReason::SelectInto => "select_into",
            RefusalReason::LockingClause => "locking_clause",
            RefusalReason::DeniedFunction => "denied_function",
            RefusalReason::SystemCatalog => "system_catalog",
            RefusalReason::UnknownTable => "unknown_table",
            RefusalReason::RestrictedColumn => "restricted_column",
            RefusalReason::UnknownColumn => "unknown_column",
            RefusalReason::DeniedType => "denied_type",
            RefusalReason::TooLarge => "too_large",
            RefusalReason::UnsafeRendering => "unsafe_rendering",
            RefusalReason::ForeignPolicy => "foreign_policy",
            RefusalReason::UnreadableResolution => "unreadable_resolution",
        }
    }
}

/// A refusal with a message the model can act on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    pub reason: RefusalReason,
    pub message: String,
    /// Whether a regenerated query could reasonably succeed. Writes, locks, denied
    /// functions and hidden tables are never repaired: the intent itself is refused.
    pub repairable: bool,
}

impl Refusal {
    fn new(reason: RefusalReason, message: impl Into<String>) -> Self {
        let repairable = matches!(
            reason,
            RefusalReason::ParseError
                | RefusalReason::MultipleStatements
                | RefusalReason::SystemCatalog
                | RefusalReason::UnknownTable
                | RefusalReason::RestrictedColumn
                | RefusalReason::TooLong
                | RefusalReason::UnknownColumn
                | RefusalReason::TooLarge
                | RefusalReason::UnsafeRendering
                | RefusalReason::UnreadableResolution
        );
        Refusal {
            reason,
            message: message.into(),
            repairable,
        }
    }

    /// A [`CheckedQuery`] presented to a gate whose policy did not check it.
    pub(crate) fn foreign_policy() -> Self {
        Refusal::new(
            RefusalReason::ForeignPolicy,
            "this query was checked for another database; check it again on this one",
        )
    }

    /// The database compiled the statement but what it resolved to could not be read.
    pub(crate) fn unreadable_resolution(why: &str) -> Self {
        Refusal::new(
            RefusalReason::UnreadableResolution,
            format!("the database's plan of this statement could not be verified ({why}); write it more plainly"),
        )
    }

    fn hidden_table(name: &str) -> Self {
        // Same words as any unknown table, so the refusal does not reveal that the
        // table exists; only the repair decision differs.
        let mut refusal = Refusal::new(
            RefusalReason::UnknownTable,
            format!("table \"{name}\" does not exist; use only the tables in the schema"),
        );
        refusal.repairable = false;
        refusal
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason.as_str(), self.message)
    }
}

/// How the guard treated the row cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "action", content = "rows")]
pub enum LimitAction {
    /// The query's own limit was at most the cap and was kept.
    Kept(u64),
    /// The limit was missing, too large or not a plain number; the cap was set.
    Capped(u64),
    /// A set operation or VALUES list was wrapped in an outer query carrying the cap.
    Wrapped(u64),
}

/// A statement that passed the guard, with the text that will actually run. Only
/// [`check`] can make one (the fields are private), so holding a `CheckedQuery` proves
/// the guard accepted exactly this text under the policy whose id it carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckedQuery {
    sql: String,
    limit: LimitAction,
    tables: Vec<String>,
    #[serde(skip)]
    policy_id: u64,
}

impl CheckedQuery {
    /// The re-rendered, checked statement: this is what runs.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// How the row cap was applied.
    pub fn limit(&self) -> LimitAction {
        self.limit
    }

    /// The visible base tables the query reads, lower-cased and sorted.
    pub fn tables(&self) -> &[String] {
        &self.tables
    }

    /// The id of the policy that checked it.
    pub fn policy_id(&self) -> u64 {
        self.policy_id
    }
}

/// Checks one statement against the policy; on success returns the text to run. The
/// check runs on a guard thread with a large stack ([`runner`]).
pub fn check(sql: &str, policy: &Arc<GuardPolicy>) -> Result<CheckedQuery, Refusal> {
    runner::run(sql, policy)
}

fn check_here(sql: &str, policy: &GuardPolicy) -> Result<CheckedQuery, Refusal> {
    if sql.len() > MAX_SQL_BYTES {
        return Err(Refusal::new(
            RefusalReason::TooLong,
            format!(
                "the statement is {} bytes; the limit is {MAX_SQL_BYTES}",
                sql.len()
            ),
        ));
    }
    let mut statement = parse_one(sql, policy)?;
    let Statement::Query(query) = &mut statement else {
        return Err(Refusal::new(
            RefusalReason::NotAQuery,
            format!(
                "only a read-only query (SELECT, WITH ... SELECT, VALUES) may run; this is {}",
                statement_kind(&statement)
            ),
        ));
    };
    // The rewrites first (the row cap, PostgreSQL's escape strings), then the round trip,
    // then every check, once, on the tree parsed back from the text that will run: a
    // rewrite cannot slip anything past the checks, and the checks see exactly what runs.
    let limit = force_limit(query, policy)?;
    if policy.dialect == SqlDialect::Postgres {
        // PostgreSQL has a string form the printer renders faithfully for any value.
        let _ = sqlparser::ast::VisitMut::visit(query.as_mut(), &mut EscapeStringsForPostgres);
    }
    let (sql, tables) = prove_round_trip(&statement, policy)?;
    Ok(CheckedQuery {
        sql,
        limit,
        tables,
        policy_id: policy.id,
    })
}

/// Token bounds, then the parser (with its recursion limit), then exactly one statement
/// with SQLite hexadecimal integers restored.
fn parse_one(sql: &str, policy: &GuardPolicy) -> Result<Statement, Refusal> {
    let scanned = bounds::scan(sql, policy.dialect)?;
    let dialect = policy.dialect.parser_dialect();
    let mut statements = Parser::new(dialect.as_ref())
        .with_recursion_limit(bounds::PARSER_RECURSION_LIMIT)
        .with_tokens_with_locations(scanned.tokens)
        .parse_statements()
        .map_err(|error| {
            Refusal::new(
                RefusalReason::ParseError,
                format!("could not parse the statement: {error}"),
            )
        })?;
    let mut statement = match statements.len() {
        0 => {
            return Err(Refusal::new(
                RefusalReason::EmptyStatement,
                "there is no statement to run",
            ))
        }
        1 => statements.remove(0),
        n => {
            return Err(Refusal::new(
                RefusalReason::MultipleStatements,
                format!("found {n} statements; send exactly one SELECT"),
            ))
        }
    };
    if !scanned.hex_integers.is_empty() {
        let mut fix = HexIntegers {
            at: &scanned.hex_integers,
        };
        if let ControlFlow::Break(refusal) =
            sqlparser::ast::VisitMut::visit(&mut statement, &mut fix)
        {
            return Err(refusal);
        }
    }
    Ok(statement)
}

/// Every check on the tree; returns the visible base tables read.
fn check_query(query: &Query, policy: &GuardPolicy) -> Result<Vec<String>, Refusal> {
    if let ControlFlow::Break(refusal) = statement_shape_check(query) {
        return Err(refusal);
    }
    let names = collect_names(query, policy);
    let mut checker = TreeChecker {
        policy,
        names: &names,
        tables: BTreeSet::new(),
        unknown_columns: Vec::new(),
    };
    if let ControlFlow::Break(refusal) = query.visit(&mut checker) {
        return Err(refusal);
    }
    if !checker.unknown_columns.is_empty() {
        // One line per column, in the order the query names them.
        return Err(Refusal::new(
            RefusalReason::UnknownColumn,
            checker.unknown_columns.join("\n"),
        ));
    }
    Ok(checker.tables.into_iter().collect())
}

/// The round-trip proof: the text that will run, parsed again with the same dialect and
/// bounds, must be the very tree that was parsed and rewritten, and then pass every
/// check. Any difference is a refusal: the printer would have run something else.
/// Returns the text and the visible base tables it reads.
fn prove_round_trip(
    statement: &Statement,
    policy: &GuardPolicy,
) -> Result<(String, Vec<String>), Refusal> {
    let rendered = statement.to_string();
    let unfaithful = |detail: &str| {
        Refusal::new(
            RefusalReason::UnsafeRendering,
            format!(
                "the statement cannot be re-rendered faithfully ({detail}); write string literals and quoted names without backslash-quote or doubled-quote sequences inside them"
            ),
        )
    };
    let reparsed = parse_one(&rendered, policy).map_err(|refusal| {
        unfaithful(&format!(
            "its rendering does not parse back: {}",
            refusal.message
        ))
    })?;
    if &reparsed != statement {
        return Err(unfaithful(
            "the text that would run parses to a different statement",
        ));
    }
    let Statement::Query(query) = &reparsed else {
        return Err(unfaithful("its rendering is not a query"));
    };
    let tables = check_query(query, policy)?;
    Ok((rendered, tables))
}

/// Restores SQLite's hexadecimal integers (`0x10`, which sqlparser reads as the blob
/// `X'10'`) to decimal integers, by the token positions the scan found.
struct HexIntegers<'a> {
    at: &'a BTreeSet<(u64, u64)>,
}

impl VisitorMut for HexIntegers<'_> {
    type Break = Refusal;

    fn pre_visit_value(&mut self, value: &mut ValueWithSpan) -> ControlFlow<Refusal> {
        if let Value::HexStringLiteral(digits) = &value.value {
            let start = value.span.start;
            if self.at.contains(&(start.line, start.column)) {
                match bounds::hex_integer_value(digits) {
                    Ok(decimal) => value.value = Value::Number(decimal, false),
                    Err(refusal) => return ControlFlow::Break(refusal),
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// sqlparser prints a single-quoted string by doubling each quote except one after a
/// backslash or before another quote, so a value holding `\'` or `''` prints as other
/// SQL. On PostgreSQL such a value is printed as an escape string (`E'...'`), whose
/// printer escapes every quote and backslash; the round trip proves it.
struct EscapeStringsForPostgres;

impl VisitorMut for EscapeStringsForPostgres {
    type Break = ();

    fn pre_visit_value(&mut self, value: &mut ValueWithSpan) -> ControlFlow<()> {
        if let Value::SingleQuotedString(text) = &value.value {
            let printed = escape_quoted_string(text, '\'').to_string();
            if printed != text.replace('\'', "''") {
                value.value = Value::EscapedStringLiteral(text.clone());
            }
        }
        ControlFlow::Continue(())
    }
}

fn statement_kind(statement: &Statement) -> String {
    // The first words of the rendered statement name its kind (INSERT, DROP TABLE...);
    // rendering is the parser's own, so this is not matching the user's text.
    let rendered = statement.to_string();
    let words: Vec<&str> = rendered.split_whitespace().take(2).collect();
    let kind = words.join(" ");
    if kind.is_empty() {
        "not a query".to_string()
    } else {
        format!("a {kind} statement")
    }
}

/// Words PostgreSQL reads, unquoted, as facts about the session (`SELECT current_role`)
/// rather than as column names.
const POSTGRES_SESSION_WORDS: &[&str] = &[
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
const POSTGRES_SYSTEM_COLUMNS: &[&str] = &["xmin", "xmax", "cmin", "cmax", "ctid", "tableoid"];

fn is_postgres_system_column(ident: &Ident, dialect: SqlDialect) -> bool {
    dialect == SqlDialect::Postgres
        && POSTGRES_SYSTEM_COLUMNS.contains(&ident_name(ident).as_str())
}

fn is_postgres_session_fact(ident: &Ident, dialect: SqlDialect) -> bool {
    dialect == SqlDialect::Postgres
        && (ident.quote_style.is_none()
            && POSTGRES_SESSION_WORDS.contains(&ident_name(ident).as_str())
            || is_postgres_system_column(ident, dialect))
}

fn session_fact_refusal(written: &str) -> Refusal {
    Refusal::new(
        RefusalReason::SystemCatalog,
        format!("{written} is information about the database system or the session, not data; query only the tables and columns in the schema"),
    )
}

fn fold(name: &str) -> String {
    name.to_lowercase()
}

fn ident_name(ident: &Ident) -> String {
    fold(&ident.value)
}

/// The name a relation is known by in the policy: the bare table name in the default
/// schema (`bills`, `public.bills`), `schema.table` in any other (`consumer_div.users`).
fn relation_key(parts: &[String], dialect: SqlDialect) -> Option<String> {
    match parts {
        [table] => Some(table.clone()),
        [schema, table] if schema == dialect.default_schema() => Some(table.clone()),
        [schema, table] => Some(format!("{schema}.{table}")),
        _ => None,
    }
}

fn object_name_parts(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => ident_name(ident),
            // A computed name part cannot be resolved statically: give it a name that
            // matches nothing, so it is refused as an unknown table.
            ObjectNamePart::Function(_) => "<computed name>".to_string(),
        })
        .collect()
}

// ---------------------------------------------------------------------------------
// Pass 1: the statement's shape (nested writes, INTO, locking clauses).
// ---------------------------------------------------------------------------------

fn statement_shape_check(query: &Query) -> ControlFlow<Refusal> {
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
// Pass 2: names declared by the statement (CTE names, table aliases).
// ---------------------------------------------------------------------------------

#[derive(Default)]
struct DeclaredNames {
    /// Names declared by WITH anywhere in the statement.
    ctes: BTreeSet<String>,
    /// Alias or table name -> base tables it may stand for (a name reused in several
    /// scopes maps to all of them; every restriction check takes the union).
    relations: BTreeMap<String, BTreeSet<String>>,
    /// Names (aliases and table names) that stand for a table with restricted columns:
    /// used bare in an expression they are a whole-row reference.
    restricted_relations: BTreeSet<String>,
    /// Restricted column names of every restricted table the statement reads.
    restricted_columns_in_play: BTreeSet<String>,
    /// Aliases of derived tables, table functions and CTE references: columns
    /// qualified by them come from a subquery that is checked on its own.
    derived_aliases: BTreeSet<String>,
    /// Column names given by a base table's alias (`bills AS b(id, n)`).
    alias_columns: BTreeMap<String, BTreeSet<String>>,
    /// Alias of a derived table, table function or other non-table FROM item -> the
    /// columns it exposes (merged over every scope that uses the alias).
    derived_columns: BTreeMap<String, scope::Columns>,
    /// CTE name -> the columns it exposes.
    cte_columns: BTreeMap<String, scope::Columns>,
}

fn collect_names(query: &Query, policy: &GuardPolicy) -> DeclaredNames {
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
        let resolver = scope::Resolver {
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
struct OutputCollector<'a> {
    resolver: scope::Resolver<'a>,
    derived: BTreeMap<String, scope::Columns>,
    ctes: BTreeMap<String, scope::Columns>,
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
            _ => scope::Columns::unknown(),
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

fn table_factor_alias(factor: &TableFactor) -> Option<&Ident> {
    table_factor_table_alias(factor).map(|alias| &alias.name)
}

fn table_factor_table_alias(factor: &TableFactor) -> Option<&TableAlias> {
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

// ---------------------------------------------------------------------------------
// Pass 3: functions, relations and columns, in tree order.
// ---------------------------------------------------------------------------------

struct TreeChecker<'a> {
    policy: &'a GuardPolicy,
    names: &'a DeclaredNames,
    tables: BTreeSet<String>,
    /// Qualified columns their relation does not have, each said once: the walk goes on
    /// past them so that one refusal names every one (a repair can fix them all at
    /// once), while any other refusal still stops it where it is found.
    unknown_columns: Vec<String>,
}

/// Functions that read files, sleep, signal other sessions, change settings or
/// sequences, take advisory locks, reach other servers or load code.
const DENIED_FUNCTIONS: &[&str] = &[
    // PostgreSQL
    "set_config",
    "nextval",
    "setval",
    "currval",
    "lastval",
    "txid_current",
    "query_to_xml",
    "query_to_xmlschema",
    "query_to_xml_and_xmlschema",
    "gin_clean_pending_list",
    "binary_upgrade_set_next_pg_type_oid",
    "make_interval_from_file",
    // SQLite
    "load_extension",
    "readfile",
    "writefile",
    "fts3_tokenizer",
    "edit",
    "fsdir",
    "zipfile",
    "sqlar_compress",
    "sqlar_uncompress",
];

/// Name prefixes that are denied as a family: PostgreSQL administration functions
/// (`pg_*`: sleep, files, signals, advisory locks, WAL, notifications), large objects,
/// dblink, the XML dumpers of whole tables and schemas, and index maintenance.
const DENIED_PREFIXES: &[&str] = &[
    "pg_",
    "lo_",
    "dblink",
    "table_to_xml",
    "cursor_to_xml",
    "schema_to_xml",
    "database_to_xml",
    "brin_",
    "binary_upgrade_",
];

/// `pg_*` functions that only describe a value and are safe to call.
/// (`pg_typeof` is not: comparing its result with a string casts the string to a type
/// name, and the error for a missing one tells which names exist.)
const ALLOWED_PG_FUNCTIONS: &[&str] = &["pg_size_pretty"];

fn is_denied_function(name: &str) -> bool {
    if ALLOWED_PG_FUNCTIONS.contains(&name) {
        return false;
    }
    DENIED_FUNCTIONS.contains(&name)
        || DENIED_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

const CATALOG_SCHEMAS: &[&str] = &["pg_catalog", "information_schema", "pg_toast"];
const CATALOG_PREFIXES: &[&str] = &["pg_", "sqlite_", "pragma_"];

fn is_catalog_name(name: &str) -> bool {
    CATALOG_PREFIXES
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

fn unlisted_function_refusal(name: &str) -> Refusal {
    Refusal::new(
        RefusalReason::DeniedFunction,
        format!("function {name}() is not allowed: a query may use only the functions of ordinary analysis (aggregates, window, math, string, date/time, JSON and array functions); compute the answer with those"),
    )
}

fn denied_type_refusal(name: &str) -> Refusal {
    Refusal::new(
        RefusalReason::DeniedType,
        format!("a cast to {name} is not allowed: only ordinary scalar types (numbers, text, dates and times, booleans, JSON, arrays of them) may be cast to; reg* types, oid and row types are refused"),
    )
}

fn denied_function_refusal(name: &str) -> Refusal {
    Refusal::new(
        RefusalReason::DeniedFunction,
        format!("function {name}() is not allowed: it can sleep, read files, change settings or reach outside the query"),
    )
}

fn restricted_refusal(what: &str) -> Refusal {
    Refusal::new(
        RefusalReason::RestrictedColumn,
        format!("{what} is restricted and cannot be read; select only the columns you need, leaving restricted ones out (COUNT(*) is allowed)"),
    )
}

impl TreeChecker<'_> {
    fn check_function_name(&self, name: &ObjectName) -> ControlFlow<Refusal> {
        let parts = object_name_parts(name);
        if let Some(last) = parts.last() {
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
            .any(|part| CATALOG_SCHEMAS.contains(&part.as_str()))
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
    fn qualifier_columns(&self, qualifier: &str) -> Option<scope::Columns> {
        let resolver = scope::Resolver {
            policy: self.policy,
            ctes: &self.names.ctes,
        };
        let mut found: Option<scope::Columns> = None;
        let mut merge = |columns: scope::Columns| match &mut found {
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
                            .unwrap_or_else(scope::Columns::unknown),
                    );
                }
                if self.policy.columns_of(table).is_some() || !self.names.ctes.contains(table) {
                    merge(resolver.table_columns(table));
                }
            }
        }
        if let Some(columns) = self.names.alias_columns.get(qualifier) {
            merge(scope::Columns::known(columns.iter().cloned()));
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
    /// agent repairs it as it repairs the database's error.
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
        let mut listed: Vec<&str> = columns.names.iter().map(String::as_str).collect();
        listed.retain(|name| !matches!(*name, "rowid" | "oid" | "_rowid_"));
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
        let resolver = scope::Resolver {
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

fn join_constraint(operator: &JoinOperator) -> Option<&JoinConstraint> {
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
fn base_tables_of(table_with_joins: &TableWithJoins) -> Vec<String> {
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
            Expr::Identifier(ident) if is_postgres_session_fact(ident, self.policy.dialect) => {
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
fn is_unicode_escape_shape(left: &Expr, right: &Expr) -> bool {
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

fn literal_count(expr: &Expr) -> Option<u64> {
    match expr {
        Expr::Value(value) => match &value.value {
            Value::Number(text, _) => text.parse::<u64>().ok(),
            _ => None,
        },
        Expr::Nested(inner) => literal_count(inner),
        _ => None,
    }
}

fn cap_expr(cap: u64) -> Expr {
    Expr::Value(Value::Number(cap.to_string(), false).with_empty_span())
}

/// The query's own row limit when it is a plain number: from LIMIT, `LIMIT offset, n`
/// or FETCH FIRST n ROWS ONLY. FETCH ... WITH TIES or PERCENT can return more than n
/// rows, so they do not count as a plain limit.
fn existing_limit(query: &Query) -> Option<u64> {
    if let Some(fetch) = &query.fetch {
        if fetch.percent || fetch.with_ties {
            return None;
        }
        return match &fetch.quantity {
            Some(quantity) => literal_count(quantity),
            None => Some(1),
        };
    }
    match &query.limit_clause {
        Some(LimitClause::LimitOffset {
            limit: Some(limit), ..
        }) => literal_count(limit),
        Some(LimitClause::OffsetCommaLimit { limit, .. }) => literal_count(limit),
        _ => None,
    }
}

/// Whether the query's own limit is one the guard cannot read as a number: an expression
/// (`LIMIT 2+3`, `LIMIT (SELECT 3)`), a literal that is not a plain integer (`LIMIT 5.0`,
/// `LIMIT '5'`, `LIMIT 1e2`, a placeholder), or LIMIT and FETCH side by side. It may be
/// smaller than the cap, so replacing it by the cap could return more rows than the
/// query asks for (the guard fuzzer found `LIMIT 5.0` returning 149 rows for 5).
/// A negative literal is no limit (SQLite) or an error (PostgreSQL): the cap replaces it.
/// `-0` is zero rows, so it stays.
fn limit_is_computed(query: &Query) -> bool {
    let computed = |expr: &Expr| {
        literal_count(expr).is_none()
            && !matches!(expr, Expr::UnaryOp { op: sqlparser::ast::UnaryOperator::Minus, expr }
                if literal_count(expr).is_some_and(|count| count > 0))
    };
    let limit = match &query.limit_clause {
        Some(LimitClause::LimitOffset {
            limit: Some(limit), ..
        })
        | Some(LimitClause::OffsetCommaLimit { limit, .. }) => Some(limit),
        _ => None,
    };
    match &query.fetch {
        Some(_) if limit.is_some() => true,
        Some(fetch) => fetch.quantity.as_ref().is_some_and(computed),
        None => limit.is_some_and(computed),
    }
}

fn force_limit(query: &mut Query, policy: &GuardPolicy) -> Result<LimitAction, Refusal> {
    let cap = policy.row_cap;
    // A limit that is not a plain number stays as written, inside an outer query
    // carrying the cap.
    if limit_is_computed(query) {
        wrap_with_cap(query, policy)?;
        return Ok(LimitAction::Wrapped(cap));
    }
    if let Some(limit) = existing_limit(query) {
        if limit <= cap {
            return Ok(LimitAction::Kept(limit));
        }
    }
    // FETCH ... WITH TIES or PERCENT means something a LIMIT cannot say: keep it, inside
    // an outer query carrying the cap.
    if query
        .fetch
        .as_ref()
        .is_some_and(|fetch| fetch.with_ties || fetch.percent)
    {
        wrap_with_cap(query, policy)?;
        return Ok(LimitAction::Wrapped(cap));
    }
    match query.body.as_ref() {
        SetExpr::SetOperation { .. } | SetExpr::Values(_) => {
            wrap_with_cap(query, policy)?;
            Ok(LimitAction::Wrapped(cap))
        }
        _ => {
            set_limit(query, cap);
            Ok(LimitAction::Capped(cap))
        }
    }
}

fn set_limit(query: &mut Query, cap: u64) {
    // Never leave LIMIT and FETCH side by side: FETCH goes, LIMIT carries the cap.
    query.fetch = None;
    query.limit_clause = Some(match query.limit_clause.take() {
        Some(LimitClause::OffsetCommaLimit { offset, .. }) => LimitClause::OffsetCommaLimit {
            offset,
            limit: cap_expr(cap),
        },
        Some(LimitClause::LimitOffset { offset, .. }) => LimitClause::LimitOffset {
            limit: Some(cap_expr(cap)),
            offset,
            limit_by: Vec::new(),
        },
        None => LimitClause::LimitOffset {
            limit: Some(cap_expr(cap)),
            offset: None,
            limit_by: Vec::new(),
        },
    });
}

/// Wraps the whole query as `SELECT * FROM (<query>) AS askdb_capped LIMIT cap`, so
/// the cap visibly covers every branch of a set operation.
fn wrap_with_cap(query: &mut Query, policy: &GuardPolicy) -> Result<(), Refusal> {
    let template = format!(
        "SELECT * FROM (SELECT 1) AS askdb_capped LIMIT {}",
        policy.row_cap
    );
    let dialect = policy.dialect.parser_dialect();
    let internal_error = || {
        Refusal::new(
            RefusalReason::ParseError,
            "internal error while applying the row cap",
        )
    };
    let mut parsed =
        Parser::parse_sql(dialect.as_ref(), &template).map_err(|_| internal_error())?;
    let Some(Statement::Query(mut outer)) = parsed.pop() else {
        return Err(internal_error());
    };
    let SetExpr::Select(select) = outer.body.as_mut() else {
        return Err(internal_error());
    };
    let Some(from) = select.from.first_mut() else {
        return Err(internal_error());
    };
    let TableFactor::Derived { subquery, .. } = &mut from.relation else {
        return Err(internal_error());
    };
    std::mem::swap(subquery.as_mut(), query);
    std::mem::swap(query, outer.as_mut());
    Ok(())
}

#[cfg(test)]
mod tests;
