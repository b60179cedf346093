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
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, TokenWithSpan};

mod allow_list;
pub mod bounds;
mod checker;
mod declared;
mod limit;
mod mysql_tokens;
mod name_resolution;
mod policy;
pub(crate) mod postgres_plan;
mod refusal;
pub(crate) mod resolution;
mod runner;

use checker::*;
pub use declared::table_factor_table_alias;
use declared::*;
use limit::*;
pub use policy::GuardPolicy;
use policy::*;
use refusal::*;
pub use refusal::{Refusal, RefusalReason};

pub use runner::RUNTIME_STACK_BYTES;

/// The default row cap forced into every query's LIMIT.
pub const DEFAULT_ROW_CAP: u64 = 200;

/// The longest statement the guard will read, in bytes; longer input is refused before
/// parsing so a pathological statement cannot tie up the parser.
pub const MAX_SQL_BYTES: usize = 100_000;

pub use crate::sql_text::SqlDialect;

/// The `sql_mode` a MySQL or MariaDB session is pinned to before its first statement: the
/// mode under which the server reads text as the guard's MySQL dialect does. `||` is
/// concatenation (PIPES_AS_CONCAT), as sqlparser reads it; `"x"` is refused by the guard
/// whatever ANSI_QUOTES says, and left off here; a backslash is refused by the guard and
/// is a plain character here (NO_BACKSLASH_ESCAPES), so no string can end early.
pub const MYSQL_SQL_MODE: &str =
    "PIPES_AS_CONCAT,NO_BACKSLASH_ESCAPES,STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION";

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

/// The names a statement declares for its own relations (table, derived-table and
/// function aliases, CTE names), lowercased: MariaDB's plan names an aliased table by
/// its alias, so these are the plan's names that stand for no table of their own. None
/// when the text does not parse as one statement.
pub(crate) fn declared_relation_names(sql: &str, policy: &GuardPolicy) -> Option<BTreeSet<String>> {
    let statement = parse_one(sql, policy).ok()?;
    let mut declared = RelationAliases::default();
    let _ = statement.visit(&mut declared);
    Some(declared.0)
}

/// Token bounds, then the parser (with its recursion limit), then exactly one statement
/// with SQLite hexadecimal integers restored.
fn parse_one(sql: &str, policy: &GuardPolicy) -> Result<Statement, Refusal> {
    let scanned = bounds::scan(sql, policy.dialect)?;
    let dialect = policy.dialect.parser_dialect();
    let tokens = match policy.dialect {
        SqlDialect::Postgres => parenthesize_table_statement(scanned.tokens),
        SqlDialect::Sqlite | SqlDialect::Mysql => scanned.tokens,
    };
    let mut statements = Parser::new(dialect.as_ref())
        .with_recursion_limit(bounds::PARSER_RECURSION_LIMIT)
        .with_tokens_with_locations(tokens)
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

/// PostgreSQL's top-level `TABLE name` is `SELECT * FROM name`, but sqlparser 0.64 parses
/// it only inside parentheses: `TABLE bills ORDER BY 1` is read as `(TABLE bills ORDER BY 1)`,
/// the same query. The wrap is on tokens, so a comment cannot swallow the closing
/// parenthesis, and the checks and the text that runs are both the wrapped tree: whatever
/// the tokens turn out to mean once wrapped is what is checked and what runs.
fn parenthesize_table_statement(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant = |token: &TokenWithSpan| {
        !matches!(
            token.token,
            Token::Whitespace(_) | Token::EOF | Token::SemiColon
        )
    };
    let Some(first) = tokens.iter().position(significant) else {
        return tokens;
    };
    if !matches!(&tokens[first].token, Token::Word(word) if word.keyword == Keyword::TABLE && word.quote_style.is_none())
    {
        return tokens;
    }
    let Some(last) = tokens.iter().rposition(significant) else {
        return tokens;
    };
    tokens.insert(last + 1, TokenWithSpan::wrap(Token::RParen));
    tokens.insert(first, TokenWithSpan::wrap(Token::LParen));
    tokens
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

#[cfg(test)]
mod mysql_tests;
#[cfg(test)]
mod tests;
