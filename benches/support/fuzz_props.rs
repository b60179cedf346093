//! The guard fuzzer's independent checks of an accepted statement, written apart from
//! the guard so that they do not share its mistakes:
//! - [`check_rendering`]: the rendered text parses (same dialect) to one statement whose
//!   printing is the rendered text again, and that tree is the original's tree up to the
//!   documented rewrites (PostgreSQL strings printed as `E'...'`, SQLite `0x..` integers
//!   as decimals, the row cap: the outermost limit set to the cap when the original had
//!   none or a larger plain one, or the whole query wrapped in `SELECT * FROM (...) AS
//!   askdb_capped LIMIT cap`); anything else that changed is a finding;
//! - [`Walker`]: a walk over the rendered tree that finds any refused construct: a
//!   function outside the reviewed allow-list, a catalog relation, a hidden or unknown
//!   table, a restricted column named, a whole row of a table with restricted columns,
//!   attribute notation on one, a cast to a reg* type, oid or a row type.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use askdb::gate::SqlDialect;
use sqlparser::ast::{
    DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, JoinConstraint, JoinOperator,
    LimitClause, ObjectName, ObjectNamePart, OrderBy, OrderByKind, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, Statement, TableFactor, TableWithJoins,
    UnaryOperator, Value, ValueWithSpan, Visit, Visitor, VisitorMut,
};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};

/// The reviewed allow-list, read here on its own (not through the guard's loader).
const ALLOW_LIST: &str = include_str!("../../config/guard_allow_list.toml");

/// What the walker knows about one database, from the gate's schema and notes.
#[derive(Debug, Clone)]
pub struct Knowledge {
    pub dialect: SqlDialect,
    /// Visible table -> every column (restricted ones included), lower-cased.
    pub tables: BTreeMap<String, BTreeSet<String>>,
    pub restricted: BTreeMap<String, BTreeSet<String>>,
    pub hidden: BTreeSet<String>,
    pub functions: BTreeSet<String>,
    pub types: BTreeSet<String>,
}

/// The allow-list's functions and types of one dialect.
pub fn allow_list(dialect: SqlDialect) -> (BTreeSet<String>, BTreeSet<String>) {
    let file: toml::Value =
        toml::from_str(ALLOW_LIST).expect("config/guard_allow_list.toml parses");
    let section = match dialect {
        SqlDialect::Postgres => "postgres",
        SqlDialect::Sqlite => "sqlite",
        SqlDialect::Mysql => "mysql",
    };
    let names = |kind: &str| -> BTreeSet<String> {
        file.get(section)
            .and_then(|s| s.get(kind))
            .and_then(|t| t.as_table())
            .map(|table| {
                table
                    .values()
                    .filter_map(|list| list.as_array())
                    .flatten()
                    .filter_map(|name| name.as_str())
                    .map(str::to_lowercase)
                    .collect()
            })
            .unwrap_or_default()
    };
    (names("functions"), names("types"))
}

/// Functions no database's notes can allow.
fn hard_denied(name: &str) -> bool {
    (name.starts_with("pg_") && !matches!(name, "pg_size_pretty" | "pg_typeof"))
        || name.starts_with("lo_")
        || name.starts_with("dblink")
        || matches!(
            name,
            "load_extension"
                | "readfile"
                | "writefile"
                | "fts3_tokenizer"
                | "set_config"
                | "nextval"
                | "setval"
                | "currval"
                | "lastval"
                | "txid_current"
                | "query_to_xml"
                | "ts_stat"
                | "ts_rewrite"
                | "current_setting"
                | "version"
                | "sqlite_version"
        )
}

fn is_catalog_part(part: &str) -> bool {
    matches!(part, "pg_catalog" | "information_schema" | "pg_toast")
        || part.starts_with("pg_")
        || part.starts_with("sqlite_")
        || part.starts_with("pragma_")
}

fn parts(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => ident.value.to_lowercase(),
            ObjectNamePart::Function(_) => "<computed>".to_string(),
        })
        .collect()
}

/// Parses exactly one statement, as a caller of sqlparser would.
pub fn parse_one(sql: &str, dialect: SqlDialect) -> Result<Statement, String> {
    let parser_dialect = dialect.parser_dialect();
    let mut statements =
        Parser::parse_sql(parser_dialect.as_ref(), sql).map_err(|e| e.to_string())?;
    if statements.len() != 1 {
        return Err(format!("{} statements", statements.len()));
    }
    Ok(statements.remove(0))
}

/// The documented value rewrites, applied to a tree parsed from `source`: PostgreSQL
/// escape strings read as the plain strings they equal; SQLite `0x..` integers (found
/// by their source text) as decimal numbers.
pub fn normalise(statement: &mut Statement, source: &str, dialect: SqlDialect) {
    let mut hex_at = BTreeSet::new();
    if dialect == SqlDialect::Sqlite {
        let parser_dialect = dialect.parser_dialect();
        if let Ok(tokens) = Tokenizer::new(parser_dialect.as_ref(), source).tokenize_with_location()
        {
            let lines: Vec<&str> = source.split('\n').collect();
            for token in tokens {
                if let Token::HexStringLiteral(_) = token.token {
                    let start = token.span.start;
                    let line = lines
                        .get((start.line as usize).saturating_sub(1))
                        .copied()
                        .unwrap_or("");
                    let rest: String = line
                        .chars()
                        .skip((start.column as usize).saturating_sub(1))
                        .take(2)
                        .collect();
                    if rest.eq_ignore_ascii_case("0x") {
                        hex_at.insert((start.line, start.column));
                    }
                }
            }
        }
    }
    struct Fix<'a> {
        dialect: SqlDialect,
        hex_at: &'a BTreeSet<(u64, u64)>,
    }
    impl VisitorMut for Fix<'_> {
        type Break = ();
        fn pre_visit_value(&mut self, value: &mut ValueWithSpan) -> ControlFlow<()> {
            match &value.value {
                Value::EscapedStringLiteral(text) if self.dialect == SqlDialect::Postgres => {
                    value.value = Value::SingleQuotedString(text.clone());
                }
                Value::HexStringLiteral(digits)
                    if self
                        .hex_at
                        .contains(&(value.span.start.line, value.span.start.column)) =>
                {
                    if let Ok(number) = u64::from_str_radix(digits, 16) {
                        value.value = Value::Number(number.to_string(), false);
                    }
                }
                _ => {}
            }
            ControlFlow::Continue(())
        }
    }
    let _ = sqlparser::ast::VisitMut::visit(
        statement,
        &mut Fix {
            dialect,
            hex_at: &hex_at,
        },
    );
}

/// How a query limits its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Limit {
    Plain(u64),
    /// No limit: none, `LIMIT ALL`, `LIMIT NULL`, a negative literal.
    Unlimited,
    /// `WITH TIES` or `PERCENT`: more (or other) rows than a number says.
    TiesOrPercent,
    /// Any other expression.
    Computed,
}

fn classify(expr: &Expr) -> Limit {
    match expr {
        Expr::Value(value) => match &value.value {
            Value::Number(text, _) => text.parse::<u64>().map_or(Limit::Computed, Limit::Plain),
            Value::Null => Limit::Unlimited,
            _ => Limit::Computed,
        },
        Expr::Nested(inner) => classify(inner),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } if matches!(classify(expr), Limit::Plain(n) if n > 0) => Limit::Unlimited,
        _ => Limit::Computed,
    }
}

fn limit_of(query: &Query) -> Limit {
    if let Some(fetch) = &query.fetch {
        if fetch.with_ties || fetch.percent {
            return Limit::TiesOrPercent;
        }
        let limit_too = matches!(
            &query.limit_clause,
            Some(
                LimitClause::LimitOffset { limit: Some(_), .. }
                    | LimitClause::OffsetCommaLimit { .. }
            )
        );
        if limit_too {
            // LIMIT and FETCH side by side: no database reads one number from that.
            return Limit::Computed;
        }
        return fetch.quantity.as_ref().map_or(Limit::Plain(1), classify);
    }
    match &query.limit_clause {
        Some(LimitClause::LimitOffset {
            limit: Some(limit), ..
        }) => classify(limit),
        Some(LimitClause::LimitOffset { limit: None, .. }) | None => Limit::Unlimited,
        Some(LimitClause::OffsetCommaLimit { limit, .. }) => classify(limit),
    }
}

fn offset_of(query: &Query) -> Option<String> {
    match &query.limit_clause {
        Some(LimitClause::LimitOffset { offset, .. }) => {
            offset.as_ref().map(|o| o.value.to_string())
        }
        Some(LimitClause::OffsetCommaLimit { offset, .. }) => Some(offset.to_string()),
        None => None,
    }
}

fn without_limit(query: &Query) -> Query {
    let mut query = query.clone();
    query.limit_clause = None;
    query.fetch = None;
    query
}

/// The guard's wrapper: `SELECT * FROM (<inner>) AS askdb_capped LIMIT n`.
fn wrapped_inner(query: &Query) -> Option<&Query> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    if query.with.is_some() || query.order_by.is_some() || select.from.len() != 1 {
        return None;
    }
    if !matches!(select.projection.as_slice(), [SelectItem::Wildcard(_)])
        || select.selection.is_some()
    {
        return None;
    }
    let from = &select.from[0];
    if !from.joins.is_empty() {
        return None;
    }
    match &from.relation {
        TableFactor::Derived {
            subquery,
            alias: Some(alias),
            ..
        } if alias.name.value == "askdb_capped" => Some(subquery),
        _ => None,
    }
}

/// How the guard applied the cap, as the rendering shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapFact {
    Kept,
    Capped,
    Wrapped,
}

#[derive(Debug, Clone)]
pub struct Facts {
    pub cap: CapFact,
    /// The original orders its outermost result.
    pub ordered: bool,
}

/// A property violation: a short stable kind and a detail.
#[derive(Debug, Clone)]
pub struct Violation {
    pub kind: &'static str,
    pub key: String,
    pub detail: String,
}

fn violation(kind: &'static str, key: impl Into<String>, detail: impl Into<String>) -> Violation {
    Violation {
        kind,
        key: key.into(),
        detail: detail.into(),
    }
}

/// The round-trip property, checked independently of the guard's own proof.
pub fn check_rendering(
    original: &str,
    rendered: &str,
    dialect: SqlDialect,
    cap: u64,
) -> Result<(Statement, Facts), Violation> {
    let mut reparsed = parse_one(rendered, dialect)
        .map_err(|e| violation("rendering_does_not_parse", "parse", e))?;
    let printed = reparsed.to_string();
    if printed != rendered {
        return Err(violation(
            "printer_not_a_fixpoint",
            "print",
            format!("printed again as {printed}"),
        ));
    }
    let keep = reparsed.clone();
    let mut before = parse_one(original, dialect)
        .map_err(|e| violation("original_does_not_parse_alone", "parse", e))?;
    normalise(&mut before, original, dialect);
    normalise(&mut reparsed, rendered, dialect);
    let (Statement::Query(before), Statement::Query(after)) = (&before, &reparsed) else {
        return Err(violation(
            "not_a_query",
            "kind",
            "accepted statement is not a query",
        ));
    };
    let ordered = before.order_by.is_some();
    let after_limit = limit_of(after);
    match after_limit {
        Limit::Plain(n) if n <= cap => {}
        other => {
            return Err(violation(
                "cap_not_enforced",
                "cap",
                format!("outermost limit of the rendering is {other:?}"),
            ))
        }
    }
    if before == after {
        return match limit_of(before) {
            Limit::Plain(n) if n <= cap => Ok((
                keep,
                Facts {
                    cap: CapFact::Kept,
                    ordered,
                },
            )),
            other => Err(violation(
                "cap_not_enforced",
                "kept",
                format!("the original's limit {other:?} was kept"),
            )),
        };
    }
    if let Some(inner) = wrapped_inner(after) {
        if inner == before.as_ref() {
            let ordered = inner.order_by.is_some();
            return Ok((
                keep,
                Facts {
                    cap: CapFact::Wrapped,
                    ordered,
                },
            ));
        }
    }
    if without_limit(before) != without_limit(after) {
        return Err(violation(
            "tree_changed",
            "tree",
            format!("original parses as {before}; the rendering as {after}"),
        ));
    }
    if offset_of(before) != offset_of(after) {
        return Err(violation(
            "offset_changed",
            "offset",
            format!("{:?} -> {:?}", offset_of(before), offset_of(after)),
        ));
    }
    match limit_of(before) {
        Limit::Plain(n) if n > cap => Ok((
            keep,
            Facts {
                cap: CapFact::Capped,
                ordered,
            },
        )),
        Limit::Unlimited => Ok((
            keep,
            Facts {
                cap: CapFact::Capped,
                ordered,
            },
        )),
        Limit::Plain(n) => Err(violation(
            "limit_changed",
            "plain",
            format!("the original's LIMIT {n} (within the cap) became {after_limit:?}"),
        )),
        Limit::Computed => Err(violation(
            "limit_replaced",
            "computed",
            "the original's computed limit was replaced by the cap, which can return more rows",
        )),
        Limit::TiesOrPercent => Err(violation(
            "limit_replaced",
            "ties",
            "FETCH WITH TIES / PERCENT was replaced by a plain limit",
        )),
    }
}

// ---------------------------------------------------------------------------------
// The walker.
// ---------------------------------------------------------------------------------

/// Finds refused constructs in an accepted tree.
pub struct Walker<'a> {
    know: &'a Knowledge,
    /// CTE names declared anywhere.
    ctes: BTreeSet<String>,
    /// Name or alias -> restricted table it stands for.
    restricted_names: BTreeMap<String, String>,
    /// Name or alias -> visible table.
    table_names: BTreeMap<String, String>,
    /// Restricted column names of the restricted tables the statement reads.
    restricted_in_play: BTreeSet<String>,
    /// Every column of every table the statement reads.
    columns_in_play: BTreeSet<String>,
    /// ORDER BY items that are exactly an output alias (they name the output column).
    alias_order_items: BTreeSet<*const Expr>,
    pub found: Vec<Violation>,
}

fn relation_key(parts: &[String], dialect: SqlDialect) -> Option<String> {
    match parts {
        [table] => Some(table.clone()),
        [schema, table] if schema == dialect.default_schema() => Some(table.clone()),
        [schema, table] => Some(format!("{schema}.{table}")),
        _ => None,
    }
}

impl<'a> Walker<'a> {
    pub fn walk(know: &'a Knowledge, statement: &Statement) -> Vec<Violation> {
        let mut walker = Walker {
            know,
            ctes: BTreeSet::new(),
            restricted_names: BTreeMap::new(),
            table_names: BTreeMap::new(),
            restricted_in_play: BTreeSet::new(),
            columns_in_play: BTreeSet::new(),
            alias_order_items: BTreeSet::new(),
            found: Vec::new(),
        };
        walker.prepass(statement);
        let _ = statement.visit(&mut walker);
        walker.found
    }

    fn prepass(&mut self, statement: &Statement) {
        struct Pre<'b, 'a> {
            w: &'b mut Walker<'a>,
            aliases: BTreeSet<String>,
            order_items: Vec<*const Expr>,
            order_names: Vec<String>,
        }
        impl Visitor for Pre<'_, '_> {
            type Break = ();
            fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
                if let Some(with) = &query.with {
                    for cte in &with.cte_tables {
                        self.w.ctes.insert(cte.alias.name.value.to_lowercase());
                    }
                }
                if let Some(OrderBy {
                    kind: OrderByKind::Expressions(items),
                    ..
                }) = &query.order_by
                {
                    for item in items {
                        if let Expr::Identifier(ident) = &item.expr {
                            self.order_items.push(&item.expr as *const Expr);
                            self.order_names.push(ident.value.to_lowercase());
                        }
                    }
                }
                ControlFlow::Continue(())
            }
            fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<()> {
                for item in &select.projection {
                    if let SelectItem::ExprWithAlias { alias, .. } = item {
                        self.aliases.insert(alias.value.to_lowercase());
                    }
                }
                ControlFlow::Continue(())
            }
            fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
                if let TableFactor::Table {
                    name,
                    alias,
                    args: None,
                    ..
                } = factor
                {
                    let parts = parts(name);
                    let Some(key) = relation_key(&parts, self.w.know.dialect) else {
                        return ControlFlow::Continue(());
                    };
                    if parts.len() == 1 && self.w.ctes.contains(&key) {
                        return ControlFlow::Continue(());
                    }
                    let mut names = vec![key.clone()];
                    if let Some(last) = parts.last() {
                        names.push(last.clone());
                    }
                    if let Some(alias) = alias {
                        names.push(alias.name.value.to_lowercase());
                    }
                    if let Some(columns) = self.w.know.tables.get(&key) {
                        self.w.columns_in_play.extend(columns.iter().cloned());
                    }
                    let restricted = self.w.know.restricted.get(&key);
                    if let Some(columns) = restricted {
                        self.w.restricted_in_play.extend(columns.iter().cloned());
                    }
                    for name in names {
                        self.w.table_names.insert(name.clone(), key.clone());
                        if restricted.is_some() {
                            self.w.restricted_names.insert(name, key.clone());
                        }
                    }
                }
                ControlFlow::Continue(())
            }
        }
        let mut pre = Pre {
            w: self,
            aliases: BTreeSet::new(),
            order_items: Vec::new(),
            order_names: Vec::new(),
        };
        let _ = statement.visit(&mut pre);
        let Pre {
            aliases,
            order_items,
            order_names,
            ..
        } = pre;
        for (item, name) in order_items.into_iter().zip(order_names) {
            if aliases.contains(&name) {
                self.alias_order_items.insert(item);
            }
        }
    }

    fn flag(&mut self, kind: &'static str, key: impl Into<String>, detail: impl Into<String>) {
        self.found.push(violation(kind, key, detail));
    }

    fn check_function(&mut self, name: &ObjectName) {
        let parts = parts(name);
        let Some(last) = parts.last().cloned() else {
            return;
        };
        if hard_denied(&last) || !self.know.functions.contains(&last) {
            self.flag(
                "walker_function",
                format!("function:{last}"),
                format!("function {} is not on the allow-list", parts.join(".")),
            );
            return;
        }
        if parts.len() > 2 || (parts.len() == 2 && parts[0] != "pg_catalog") {
            self.flag(
                "walker_function",
                format!("qualified:{}", parts.join(".")),
                "a function of another schema",
            );
        }
    }

    fn check_relation(&mut self, name: &ObjectName) {
        let parts = parts(name);
        if parts.iter().any(|part| is_catalog_part(part))
            && !(parts.len() == 2
                && parts[0] == self.know.dialect.default_schema()
                && !is_catalog_part(&parts[1]))
        {
            self.flag(
                "walker_catalog",
                format!("catalog:{}", parts.join(".")),
                "a catalog relation",
            );
            return;
        }
        let Some(last) = parts.last() else {
            return;
        };
        if self.know.hidden.contains(last) {
            self.flag("walker_hidden", format!("hidden:{last}"), "a hidden table");
            return;
        }
        if parts.len() == 1 && self.ctes.contains(last) {
            return;
        }
        let visible = relation_key(&parts, self.know.dialect).is_some_and(|key| {
            self.know.tables.contains_key(&key) && !self.know.hidden.contains(&key)
        });
        if !visible {
            self.flag(
                "walker_unknown_table",
                format!("unknown:{}", parts.join(".")),
                "a table that is not in the schema",
            );
        }
    }

    fn check_type(&mut self, data_type: &DataType) {
        match data_type {
            DataType::Regclass => self.flag("walker_type", "type:regclass", "a cast to regclass"),
            DataType::Custom(name, _) => {
                let parts = parts(name);
                let last = parts.last().cloned().unwrap_or_default();
                let qualified_ok = parts.len() == 1
                    || (parts.len() == 2
                        && (parts[0] == "pg_catalog"
                            || parts[0] == self.know.dialect.default_schema()));
                if last == "oid"
                    || last.starts_with("reg")
                    || self.know.tables.contains_key(&last)
                    || self.know.hidden.contains(&last)
                    || !self.know.types.contains(&last)
                    || !qualified_ok
                {
                    self.flag(
                        "walker_type",
                        format!("type:{last}"),
                        format!("a cast to {}", parts.join(".")),
                    );
                }
            }
            DataType::Array(inner) => {
                use sqlparser::ast::ArrayElemTypeDef;
                match inner {
                    ArrayElemTypeDef::AngleBracket(inner)
                    | ArrayElemTypeDef::SquareBracket(inner, _)
                    | ArrayElemTypeDef::Parenthesis(inner)
                    | ArrayElemTypeDef::ParenthesisNotNull(inner)
                    | ArrayElemTypeDef::Qualified(inner, _) => self.check_type(inner),
                    _ => {}
                }
            }
            DataType::Table(_)
            | DataType::NamedTable { .. }
            | DataType::Tuple(_)
            | DataType::Struct(..)
            | DataType::Nested(_)
            | DataType::Map(..)
            | DataType::Object(_) => self.flag(
                "walker_type",
                format!("type:{data_type}"),
                "a cast to a row type",
            ),
            _ => {}
        }
    }

    fn check_whole_row_qualifier(&mut self, qualifier: &ObjectName) {
        if let Some(last) = parts(qualifier).last() {
            if let Some(table) = self.restricted_names.get(last).cloned() {
                self.flag(
                    "walker_restricted",
                    format!("wildcard:{table}"),
                    format!("{last}.* reads a restricted column"),
                );
            }
        }
    }

    fn direct_tables(&self, from: &TableWithJoins, out: &mut Vec<Option<String>>) {
        fn factor(w: &Walker, f: &TableFactor, out: &mut Vec<Option<String>>) {
            match f {
                TableFactor::Table {
                    name, args: None, ..
                } => {
                    let parts = parts(name);
                    if parts.len() == 1 && w.ctes.contains(&parts[0]) {
                        out.push(None);
                        return;
                    }
                    out.push(relation_key(&parts, w.know.dialect));
                }
                TableFactor::NestedJoin {
                    table_with_joins, ..
                } => w.direct_tables(table_with_joins, out),
                _ => out.push(None),
            }
        }
        factor(self, &from.relation, out);
        for join in &from.joins {
            factor(self, &join.relation, out);
        }
    }

    fn check_select(&mut self, select: &Select) {
        let mut direct = Vec::new();
        for from in &select.from {
            self.direct_tables(from, &mut direct);
        }
        let restricted_direct: Vec<String> = direct
            .iter()
            .flatten()
            .filter(|t| self.know.restricted.contains_key(*t))
            .cloned()
            .collect();
        for item in &select.projection {
            match item {
                SelectItem::Wildcard(_) => {
                    if let Some(table) = restricted_direct.first() {
                        self.flag(
                            "walker_restricted",
                            format!("star:{table}"),
                            "SELECT * over a table with a restricted column",
                        );
                    }
                }
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(name),
                    _,
                ) => self.check_whole_row_qualifier(name),
                _ => {}
            }
        }
        for from in &select.from {
            self.check_joins(from);
        }
    }

    fn check_joins(&mut self, from: &TableWithJoins) {
        let mut all = Vec::new();
        self.direct_tables(from, &mut all);
        if !all
            .iter()
            .flatten()
            .any(|t| self.know.restricted.contains_key(t))
        {
            return;
        }
        for join in &from.joins {
            let constraint = match &join.join_operator {
                JoinOperator::Join(c)
                | JoinOperator::Inner(c)
                | JoinOperator::Left(c)
                | JoinOperator::LeftOuter(c)
                | JoinOperator::Right(c)
                | JoinOperator::RightOuter(c)
                | JoinOperator::FullOuter(c)
                | JoinOperator::CrossJoin(c) => Some(c),
                _ => None,
            };
            match constraint {
                Some(JoinConstraint::Natural) => {
                    // Every column both sides share joins: unknown sides may share anything.
                    let known = all.iter().all(Option::is_some);
                    let columns = |t: &String| self.know.tables.get(t).cloned().unwrap_or_default();
                    let restricted: BTreeSet<String> = all
                        .iter()
                        .flatten()
                        .filter_map(|t| self.know.restricted.get(t))
                        .flatten()
                        .cloned()
                        .collect();
                    let shared = all
                        .iter()
                        .flatten()
                        .filter(|t| columns(t).iter().any(|c| restricted.contains(c)))
                        .count();
                    if !known || shared > 1 {
                        self.flag(
                            "walker_restricted",
                            "natural",
                            "a NATURAL JOIN that may match on a restricted column",
                        );
                    }
                }
                Some(JoinConstraint::Using(columns)) => {
                    for column in columns {
                        if let Some(name) = parts(column).last() {
                            if self.restricted_in_play.contains(name) {
                                self.flag(
                                    "walker_restricted",
                                    format!("using:{name}"),
                                    "USING a restricted column",
                                );
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn is_function_name(&self, name: &str) -> bool {
        self.know.functions.contains(name)
            || hard_denied(name)
            || matches!(
                name,
                "to_jsonb"
                    | "to_json"
                    | "row_to_json"
                    | "concat"
                    | "json_build_array"
                    | "hstore"
                    | "text"
            )
    }
}

impl Visitor for Walker<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let SetExpr::Table(table) = query.body.as_ref() {
            if let Some(name) = &table.table_name {
                let mut list = Vec::new();
                if let Some(schema) = &table.schema_name {
                    list.push(schema.clone());
                }
                list.push(name.clone());
                let object = ObjectName::from(list);
                self.check_relation(&object);
                if self
                    .know
                    .restricted
                    .contains_key(&name.value.to_lowercase())
                {
                    self.flag(
                        "walker_restricted",
                        format!("table:{name}"),
                        "TABLE over a table with a restricted column",
                    );
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<()> {
        self.check_select(select);
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        match factor {
            TableFactor::Table {
                name,
                args: Some(_),
                ..
            }
            | TableFactor::Function { name, .. } => self.check_function(name),
            TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } => {
                self.check_relation(name);
                let key = relation_key(&parts(name), self.know.dialect).unwrap_or_default();
                if alias.as_ref().is_some_and(|a| !a.columns.is_empty())
                    && self.know.restricted.contains_key(&key)
                    && !self.ctes.contains(&key)
                {
                    self.flag(
                        "walker_restricted",
                        format!("renamed:{key}"),
                        "a table with a restricted column renamed by position",
                    );
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        match expr {
            Expr::Function(function) => {
                self.check_function(&function.name);
                if let FunctionArguments::List(list) = &function.args {
                    for arg in &list.args {
                        let (FunctionArg::Named { arg, .. }
                        | FunctionArg::ExprNamed { arg, .. }
                        | FunctionArg::Unnamed(arg)) = arg;
                        if let FunctionArgExpr::QualifiedWildcard(name) = arg {
                            self.check_whole_row_qualifier(name);
                        }
                    }
                }
            }
            Expr::Cast { data_type, .. } => self.check_type(data_type),
            Expr::TypedString(typed) => self.check_type(&typed.data_type),
            Expr::QualifiedWildcard(name, _) => self.check_whole_row_qualifier(name),
            Expr::Identifier(ident) => {
                let name = ident.value.to_lowercase();
                if self.alias_order_items.contains(&(expr as *const Expr)) {
                    return ControlFlow::Continue(());
                }
                if let Some(table) = self.restricted_names.get(&name).cloned() {
                    if !self.columns_in_play.contains(&name) {
                        self.flag(
                            "walker_restricted",
                            format!("whole_row:{table}"),
                            format!("the whole row {name}"),
                        );
                    }
                }
                if self.restricted_in_play.contains(&name) {
                    self.flag(
                        "walker_restricted",
                        format!("column:{name}"),
                        format!("the restricted column {name}"),
                    );
                }
            }
            Expr::CompoundIdentifier(idents) => {
                let names: Vec<String> = idents.iter().map(|i| i.value.to_lowercase()).collect();
                if names.len() >= 2 {
                    let qualifier = &names[names.len() - 2];
                    let column = &names[names.len() - 1];
                    if let Some(table) = self.restricted_names.get(qualifier).cloned() {
                        let restricted = self
                            .know
                            .restricted
                            .get(&table)
                            .is_some_and(|c| c.contains(column));
                        let known = self
                            .know
                            .tables
                            .get(&table)
                            .is_some_and(|c| c.contains(column));
                        if restricted {
                            self.flag(
                                "walker_restricted",
                                format!("column:{table}.{column}"),
                                format!("{qualifier}.{column}"),
                            );
                        } else if !known && self.is_function_name(column) {
                            self.flag(
                                "walker_restricted",
                                format!("attribute:{column}"),
                                format!("attribute notation {qualifier}.{column}"),
                            );
                        }
                    }
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}
