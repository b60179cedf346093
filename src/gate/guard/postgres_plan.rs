//! Reads PostgreSQL's `EXPLAIN (VERBOSE, FORMAT JSON)` of a statement into a
//! [`Resolution`]: the relations every plan node scans, the functions it calls, and the
//! columns it returns or filters, joins, sorts, groups or windows on, every one fully
//! resolved by the planner (a join renamed by a column-alias list reads
//! `customers.phone`; an alias cut at 63 bytes is the alias PostgreSQL uses).
//!
//! Which outputs count: what the top node returns, what each set-operation branch,
//! subquery, CTE and sub-plan hands up, and every condition of every node. A scan's own
//! output list is not counted: PostgreSQL hands the whole physical row up from a scan
//! when that is cheaper, which is not a read of every column (what is actually used of
//! it appears in the outputs and conditions above).
//!
//! Expressions arrive as the planner's deparsed text. Its form is regular: identifiers
//! are lower case or double-quoted, SQL keywords upper case, a function call is a name
//! followed by `(`, a cast is `::type`. The lexer below reads exactly that form.

use serde_json::Value as JsonValue;

use super::resolution::{ColumnRead, Resolution};

/// Plan keys whose text is a condition or key the node evaluates: each one reads the
/// columns it names.
const CONDITION_KEYS: &[&str] = &[
    "Filter",
    "Join Filter",
    "Hash Cond",
    "Merge Cond",
    "Index Cond",
    "Recheck Cond",
    "TID Cond",
    "One-Time Filter",
    "Order By",
    "Sort Key",
    "Presorted Key",
    "Group Key",
    "Cache Key",
    "Run Condition",
    "Function Call",
    "Table Function Call",
    "Sampling Parameters",
    "Repeatable Seed",
];

/// Parent relationships whose node's output is handed up as the rows of something the
/// statement reads: a set operation's branch, a subquery, a CTE or a sub-plan.
const HANDED_UP: &[&str] = &["Member", "Subquery", "InitPlan", "SubPlan"];

/// Keywords PostgreSQL deparses for facts about the session rather than the data.
const SESSION_KEYWORDS: &[&str] = &[
    "CURRENT_ROLE",
    "CURRENT_USER",
    "SESSION_USER",
    "USER",
    "CURRENT_SCHEMA",
    "CURRENT_CATALOG",
    "SYSTEM_USER",
];

/// PostgreSQL's system columns: transaction ids, physical locations and table oids.
/// (`oid` is not among them: no table has had one since PostgreSQL 12, and it is an
/// ordinary column name.)
const SYSTEM_COLUMNS: &[&str] = &["xmin", "xmax", "cmin", "cmax", "ctid", "tableoid"];

/// Why a plan could not be read: the check then refuses rather than guesses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnreadablePlan(pub String);

/// What each alias in the plan stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AliasTarget {
    /// A base relation (table, view, sequence) and its schema.
    Relation(String),
    /// Anything whose columns are computed inside the statement: a subquery, a CTE, a
    /// function's result, a VALUES list. Their contents are read where they are planned.
    Computed,
}

/// Reads one `EXPLAIN (VERBOSE, FORMAT JSON)` result. Tables of `data_schema` are named
/// bare, tables of any other schema `schema.table`, as the gate's policy names them.
pub(crate) fn resolve(
    explain: &JsonValue,
    data_schema: &str,
) -> Result<Resolution, UnreadablePlan> {
    let root = explain
        .as_array()
        .and_then(|items| items.first())
        .and_then(|item| item.get("Plan"))
        .ok_or_else(|| UnreadablePlan("the plan has no root node".into()))?;
    let mut nodes = Vec::new();
    collect_nodes(root, true, &mut nodes)?;
    let mut aliases: Vec<(String, AliasTarget)> = Vec::new();
    let mut resolution = Resolution::default();
    for node in &nodes {
        let alias = node.node.get("Alias").and_then(JsonValue::as_str);
        let schema = node
            .node
            .get("Schema")
            .and_then(JsonValue::as_str)
            .unwrap_or_default()
            .to_lowercase();
        if let Some(relation) = node.node.get("Relation Name").and_then(JsonValue::as_str) {
            let relation = relation.to_lowercase();
            let key = if schema == data_schema {
                relation.clone()
            } else {
                format!("{schema}.{relation}")
            };
            resolution.relations.insert((schema.clone(), relation));
            if let Some(alias) = alias {
                aliases.push((alias.to_lowercase(), AliasTarget::Relation(key)));
            }
        } else if let Some(alias) = alias {
            aliases.push((alias.to_lowercase(), AliasTarget::Computed));
        }
        if let Some(function) = node.node.get("Function Name").and_then(JsonValue::as_str) {
            resolution
                .functions
                .insert((schema, function.to_lowercase()));
        }
    }
    // VERBOSE leaves column names unqualified only when the statement has one range
    // table entry; a bare name then belongs to the one scanned relation, if any.
    let only_relation = match aliases.as_slice() {
        [(_, AliasTarget::Relation(relation))] => Some(relation.clone()),
        _ => None,
    };
    let context = Context {
        aliases: &aliases,
        only_relation: only_relation.as_deref(),
    };
    for node in &nodes {
        let is_scan = node.node.get("Relation Name").is_some();
        let counts_output = node.is_root || (node.handed_up && !is_scan) || node.handed_up_scan();
        if counts_output {
            for expression in strings_of(node.node.get("Output")) {
                read_expression(expression, &context, &mut resolution)?;
            }
        } else {
            // Outputs not counted as reads still call functions and may name session
            // facts; those are judged wherever they appear.
            for expression in strings_of(node.node.get("Output")) {
                let mut calls_only = Resolution::default();
                read_expression(expression, &context, &mut calls_only)?;
                resolution.functions.extend(calls_only.functions);
                resolution.session_facts.extend(calls_only.session_facts);
                resolution
                    .foreign_objects
                    .extend(calls_only.foreign_objects);
            }
        }
        for key in CONDITION_KEYS {
            for expression in strings_of(node.node.get(*key)) {
                read_expression(expression, &context, &mut resolution)?;
            }
        }
    }
    Ok(resolution)
}

struct PlanNode<'a> {
    node: &'a JsonValue,
    is_root: bool,
    /// The node's rows are handed up as something the statement reads.
    handed_up: bool,
}

impl PlanNode<'_> {
    /// A scan that is itself a set-operation branch or sub-plan: its output list is
    /// what the branch returns (PostgreSQL projects a branch to its select list).
    fn handed_up_scan(&self) -> bool {
        self.handed_up && self.node.get("Relation Name").is_some()
    }
}

fn collect_nodes<'a>(
    node: &'a JsonValue,
    is_root: bool,
    into: &mut Vec<PlanNode<'a>>,
) -> Result<(), UnreadablePlan> {
    if !node.is_object() {
        return Err(UnreadablePlan("a plan node is not an object".into()));
    }
    let relationship = node
        .get("Parent Relationship")
        .and_then(JsonValue::as_str)
        .unwrap_or_default();
    into.push(PlanNode {
        node,
        is_root,
        handed_up: HANDED_UP.contains(&relationship),
    });
    if let Some(children) = node.get("Plans") {
        let children = children
            .as_array()
            .ok_or_else(|| UnreadablePlan("a node's plans are not a list".into()))?;
        for child in children {
            collect_nodes(child, false, into)?;
        }
    }
    Ok(())
}

/// A key's value as a list of expressions: a string, or a list of strings.
fn strings_of(value: Option<&JsonValue>) -> Vec<&str> {
    match value {
        Some(JsonValue::String(text)) => vec![text.as_str()],
        Some(JsonValue::Array(items)) => items.iter().filter_map(JsonValue::as_str).collect(),
        _ => Vec::new(),
    }
}

struct Context<'a> {
    aliases: &'a [(String, AliasTarget)],
    only_relation: Option<&'a str>,
}

impl Context<'_> {
    fn target(&self, alias: &str) -> Option<&AliasTarget> {
        self.aliases
            .iter()
            .find(|(name, _)| name == alias)
            .map(|(_, target)| target)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// An identifier: lower case as deparsed, or double-quoted (quotes removed).
    Name(String),
    /// An unquoted word with an upper-case letter: a keyword of the deparsed form.
    Keyword(String),
    Dot,
    Star,
    Open,
    Close,
    Cast,
    /// Operators and punctuation: no names in them.
    Other,
}

fn lex(text: &str) -> Result<Vec<Token>, UnreadablePlan> {
    // Every delimiter of the deparsed form is ASCII, so the text is read as bytes (a
    // multi-byte character is only ever inside a name or a string) and never copied
    // whole: a plan's constants can be large.
    let bytes = text.as_bytes();
    let is_word =
        |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$' || byte >= 0x80;
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let c = bytes[at];
        if c.is_ascii_whitespace() {
            at += 1;
        } else if c == b'\'' || ((c == b'E' || c == b'e') && bytes.get(at + 1) == Some(&b'\'')) {
            // A string literal: skipped, with '' as an escaped quote (and \' in E'').
            let escapes = c != b'\'';
            at += if escapes { 2 } else { 1 };
            loop {
                match bytes.get(at) {
                    None => return Err(UnreadablePlan("an unterminated string".into())),
                    Some(b'\\') if escapes => at += 2,
                    Some(b'\'') if bytes.get(at + 1) == Some(&b'\'') => at += 2,
                    Some(b'\'') => {
                        at += 1;
                        break;
                    }
                    Some(_) => at += 1,
                }
            }
        } else if c == b'"' {
            let mut name = String::new();
            let mut start = at + 1;
            at += 1;
            loop {
                match bytes.get(at) {
                    None => return Err(UnreadablePlan("an unterminated identifier".into())),
                    Some(b'"') if bytes.get(at + 1) == Some(&b'"') => {
                        name.push_str(&text[start..=at]);
                        at += 2;
                        start = at;
                    }
                    Some(b'"') => {
                        name.push_str(&text[start..at]);
                        at += 1;
                        break;
                    }
                    Some(_) => at += 1,
                }
            }
            tokens.push(Token::Name(name.to_lowercase()));
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            let start = at;
            while at < bytes.len() && is_word(bytes[at]) {
                at += 1;
            }
            let word = &text[start..at];
            if word.chars().any(char::is_uppercase) {
                tokens.push(Token::Keyword(word.to_string()));
            } else {
                tokens.push(Token::Name(word.to_string()));
            }
        } else if c.is_ascii_digit() || c == b'$' {
            // Numbers and parameter references ($0): no names in them.
            at += 1;
            while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'.') {
                at += 1;
            }
        } else if c == b':' && bytes.get(at + 1) == Some(&b':') {
            tokens.push(Token::Cast);
            at += 2;
        } else {
            tokens.push(match c {
                b'.' => Token::Dot,
                b'*' => Token::Star,
                b'(' => Token::Open,
                b')' => Token::Close,
                _ => Token::Other,
            });
            at += 1;
        }
    }
    Ok(tokens)
}

/// Reads the names in one deparsed expression into the resolution.
fn read_expression(
    text: &str,
    context: &Context<'_>,
    resolution: &mut Resolution,
) -> Result<(), UnreadablePlan> {
    let tokens = lex(text)?;
    let mut at = 0;
    while at < tokens.len() {
        match &tokens[at] {
            Token::Cast => {
                at = read_type(&tokens, at + 1, resolution);
                continue;
            }
            Token::Keyword(word) => {
                if word == "OPERATOR" && tokens.get(at + 1) == Some(&Token::Open) {
                    // OPERATOR(schema.op): only the built-in schema is allowed.
                    if let Some(Token::Name(schema)) = tokens.get(at + 2) {
                        if schema != super::resolution::POSTGRES_BUILT_IN_SCHEMA {
                            resolution
                                .foreign_objects
                                .insert(format!("operator of schema {schema}"));
                        }
                    }
                } else if SESSION_KEYWORDS.contains(&word.as_str()) {
                    resolution.session_facts.insert(word.clone());
                }
            }
            Token::Name(first) => {
                let dotted = tokens.get(at + 1) == Some(&Token::Dot);
                match (dotted, tokens.get(at + 2), tokens.get(at + 3)) {
                    // schema.function(
                    (true, Some(Token::Name(second)), Some(Token::Open)) => {
                        resolution.functions.insert((first.clone(), second.clone()));
                        at += 3;
                        continue;
                    }
                    // alias.column
                    (true, Some(Token::Name(column)), _) => {
                        read_column(first, Some(column), context, resolution);
                        at += 3;
                        continue;
                    }
                    // alias.*
                    (true, Some(Token::Star), _) => {
                        read_column(first, None, context, resolution);
                        at += 3;
                        continue;
                    }
                    _ => {}
                }
                if tokens.get(at + 1) == Some(&Token::Open) {
                    resolution.functions.insert((String::new(), first.clone()));
                } else if let Some(relation) = context.only_relation {
                    // Where several relations are in play VERBOSE qualifies every
                    // column, so a bare name there is no column of a table.
                    read_bare_name(relation, first, resolution);
                }
            }
            _ => {}
        }
        at += 1;
    }
    Ok(())
}

fn read_column(
    alias: &str,
    column: Option<&String>,
    context: &Context<'_>,
    resolution: &mut Resolution,
) {
    match context.target(alias) {
        Some(AliasTarget::Relation(table)) => {
            let read = match column {
                Some(column) if SYSTEM_COLUMNS.contains(&column.as_str()) => {
                    resolution
                        .session_facts
                        .insert(format!("system column {column}"));
                    return;
                }
                Some(column) => ColumnRead::Column {
                    table: table.clone(),
                    column: column.clone(),
                },
                None => ColumnRead::WholeRow {
                    table: table.clone(),
                },
            };
            resolution.columns.insert(read);
        }
        // A computed relation's columns are read where it is planned: its own node's
        // output is counted as handed up.
        Some(AliasTarget::Computed) => {}
        // A qualifier that names no node of the plan: a field of a composite value or
        // a sub-plan's result. Nothing of a table is named by it.
        None => {}
    }
}

fn read_bare_name(relation: &str, name: &str, resolution: &mut Resolution) {
    if SYSTEM_COLUMNS.contains(&name) {
        resolution
            .session_facts
            .insert(format!("system column {name}"));
    } else {
        // A bare word may be a column or a lower-case keyword (`year` in
        // EXTRACT(year FROM ...)): judged as a column only where the table has it.
        resolution.columns.insert(ColumnRead::BareName {
            table: relation.to_string(),
            name: name.to_string(),
        });
    }
}

/// Skips a type after `::` (lower-case words, a schema qualifier, modifiers in
/// parentheses, array brackets) and returns where the expression goes on. A type outside
/// the built-in namespace is recorded: a table's row type names a relation.
fn read_type(tokens: &[Token], mut at: usize, resolution: &mut Resolution) -> usize {
    let mut words = Vec::new();
    while let Some(Token::Name(word)) = tokens.get(at) {
        words.push(word.clone());
        at += 1;
        if tokens.get(at) == Some(&Token::Dot) {
            at += 1;
        }
    }
    if words.len() >= 2 && tokens.get(at.saturating_sub(2)) == Some(&Token::Dot) {
        resolution
            .foreign_objects
            .insert(format!("type {}", words.join(".")));
    }
    if tokens.get(at) == Some(&Token::Open) {
        let mut depth = 0usize;
        while let Some(token) = tokens.get(at) {
            match token {
                Token::Open => depth += 1,
                Token::Close => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        at += 1;
                        break;
                    }
                }
                _ => {}
            }
            at += 1;
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scan(alias: &str, relation: &str, output: &[&str]) -> JsonValue {
        json!({"Node Type": "Seq Scan", "Relation Name": relation, "Schema": "public",
               "Alias": alias, "Output": output})
    }

    fn plan(root: JsonValue) -> JsonValue {
        json!([{ "Plan": root }])
    }

    fn column(table: &str, column: &str) -> ColumnRead {
        ColumnRead::Column {
            table: table.into(),
            column: column.into(),
        }
    }

    #[test]
    fn a_join_renamed_by_an_alias_list_reads_the_base_columns() {
        // EXPLAIN of SELECT x.c, x.d FROM (customers CROSS JOIN categories) AS x(a,b,c,d)
        let explained = plan(json!({
            "Node Type": "Nested Loop",
            "Output": ["customers.phone", "customers.address"],
            "Plans": [
                scan("customers", "customers", &["customers.id", "customers.phone", "customers.address"]),
                {"Node Type": "Materialize", "Parent Relationship": "Inner",
                 "Plans": [scan("categories", "categories", &[])]}
            ]
        }));
        let resolution = resolve(&explained, "public").expect("readable");
        assert!(resolution.columns.contains(&column("customers", "phone")));
        assert!(resolution.columns.contains(&column("customers", "address")));
        assert!(!resolution.columns.contains(&column("customers", "id")));
        assert_eq!(resolution.relations.len(), 2);
    }

    #[test]
    fn a_scan_handing_up_its_whole_physical_row_is_not_a_read_of_it() {
        let explained = plan(json!({
            "Node Type": "Aggregate", "Output": ["count(*)"],
            "Plans": [scan("customers", "customers", &["id", "name", "phone"])]
        }));
        let resolution = resolve(&explained, "public").expect("readable");
        assert!(resolution.columns.is_empty(), "{resolution:?}");
        assert!(resolution
            .functions
            .contains(&(String::new(), "count".into())));
    }

    #[test]
    fn conditions_sub_plans_and_set_branches_are_reads() {
        let explained = plan(json!({
            "Node Type": "Aggregate", "Output": ["c.name"], "Group Key": ["c.name"],
            "Plans": [
                {"Node Type": "Append", "Parent Relationship": "Outer", "Plans": [
                    scan("c", "customers", &["c.name"]),
                    {"Node Type": "Seq Scan", "Parent Relationship": "Member",
                     "Relation Name": "customers", "Schema": "public", "Alias": "c_1",
                     "Output": ["c_1.phone"]},
                ]},
                {"Node Type": "Seq Scan", "Parent Relationship": "SubPlan",
                 "Relation Name": "bills", "Schema": "public", "Alias": "b",
                 "Output": ["b.total"], "Filter": "(b.customer_id = c.id)"}
            ]
        }));
        let resolution = resolve(&explained, "public").expect("readable");
        for read in [
            column("customers", "phone"),
            column("bills", "total"),
            column("bills", "customer_id"),
            column("customers", "id"),
        ] {
            assert!(
                resolution.columns.contains(&read),
                "{read:?} in {resolution:?}"
            );
        }
    }

    #[test]
    fn tables_outside_the_data_schema_are_named_with_their_schema() {
        let explained = plan(json!({
            "Node Type": "Seq Scan", "Relation Name": "merchants", "Schema": "consumer_div",
            "Alias": "m", "Output": ["m.name"]
        }));
        let resolution = resolve(&explained, "public").expect("readable");
        assert!(resolution
            .columns
            .contains(&column("consumer_div.merchants", "name")));
    }

    #[test]
    fn expressions_name_functions_whole_rows_system_columns_and_session_facts() {
        let explained = plan(json!({
            "Node Type": "Seq Scan", "Relation Name": "customers", "Schema": "public",
            "Alias": "c", "Plans": [scan("b", "bills", &[])],
            "Output": [
                "to_json(c.*)", "TRIM(BOTH FROM c.name)", "EXTRACT(year FROM c.created)",
                "(c.created)::timestamp with time zone", "\"left\"(c.name, 2)",
                "CURRENT_ROLE", "c.xmin", "(c.name ~~ 'it''s a (trap'::text)",
                "public.lower(c.name)", "(c.name OPERATOR(public.===) 'x'::text)",
                "('x'::text)::public.customers"
            ]
        }));
        let resolution = resolve(&explained, "public").expect("readable");
        assert!(resolution.columns.contains(&ColumnRead::WholeRow {
            table: "customers".into()
        }));
        assert!(resolution.columns.contains(&column("customers", "created")));
        assert!(resolution
            .functions
            .contains(&(String::new(), "left".into())));
        assert!(resolution
            .functions
            .contains(&("public".into(), "lower".into())));
        assert!(resolution.session_facts.contains("CURRENT_ROLE"));
        assert!(resolution.session_facts.contains("system column xmin"));
        assert!(!resolution
            .functions
            .iter()
            .any(|(_, name)| name == "timestamp"));
        assert_eq!(resolution.foreign_objects.len(), 2, "{resolution:?}");
    }

    #[test]
    fn unqualified_names_belong_to_the_one_relation() {
        let explained = plan(json!({
            "Node Type": "Limit", "Output": ["name", "phone", "ctid"],
            "Plans": [scan("customers", "customers", &["name", "phone", "ctid"])]
        }));
        let resolution = resolve(&explained, "public").expect("readable");
        assert!(resolution.columns.contains(&ColumnRead::BareName {
            table: "customers".into(),
            name: "phone".into()
        }));
        assert!(resolution.session_facts.contains("system column ctid"));
    }

    #[test]
    fn quoted_and_non_ascii_names_are_read_whole() {
        let tokens = lex("\"Kunde \"\"A\"\"\".straße + 'ü''s'::text").expect("lexes");
        assert_eq!(
            tokens,
            vec![
                Token::Name("kunde \"a\"".into()),
                Token::Dot,
                Token::Name("straße".into()),
                Token::Other,
                Token::Cast,
                Token::Name("text".into()),
            ]
        );
    }

    #[test]
    fn a_plan_of_another_shape_is_unreadable_not_accepted() {
        assert!(resolve(&json!({"Plan": {}}), "public").is_err());
        let no_list = plan(json!({"Node Type": "Result", "Plans": {}}));
        assert!(resolve(&no_list, "public").is_err());
        let open_string = plan(json!({"Node Type": "Result", "Output": ["'open"]}));
        assert!(resolve(&open_string, "public").is_err());
    }
}
