//! Reading what the model wrote, tolerantly: SQL in a fenced block (the default reply),
//! the JSON action object (`{"action": "sql" | "clarify" | "decline", ...}`), or a bare
//! statement from a model that ignored the format. A decline marker (`-- DECLINE: why`)
//! written instead of SQL is a decline. Anything else is malformed. A follow-up's reply
//! opens with its standalone restatement (`-- Understood as: ...`, or the JSON field
//! `understood_as`), read off before the SQL, which never carries it to the guard. A
//! one-field reply askdb began for the model (`reply=field`) is continued with no grammar,
//! so its string is read even where the model broke its JSON.

use serde::Deserialize;

use super::ClarifyRequest;
use crate::gate::SqlDialect;

/// The marker a model writes instead of SQL to decline.
pub const DECLINE_MARKER: &str = "-- DECLINE:";

/// The marker a follow-up's reply opens with, before its standalone restatement.
pub const UNDERSTOOD_MARKER: &str = "-- Understood as:";

/// How a `reply=field` reply is begun for the model where the provider continues a turn:
/// the object up to its one string's first character.
pub const FIELD_OPENING: &str = "{\"sql\": \"";

/// A parsed generation reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Sql {
        sql: String,
        assumptions: Vec<String>,
        /// The question as one standalone question, when the reply states it.
        understood_as: Option<String>,
    },
    Clarify(ClarifyRequest),
    Decline(String),
    Malformed(String),
}

#[derive(Debug, Default, Deserialize)]
struct RawReply {
    action: Option<String>,
    sql: Option<String>,
    question: Option<String>,
    #[serde(default)]
    options: Vec<String>,
    reason: Option<String>,
    #[serde(default)]
    assumptions: Vec<String>,
    understood_as: Option<String>,
}

/// The content of the first fenced block (```sql ... ``` or ``` ... ```); the closing
/// fence may be missing, as when a stop sequence ended the reply there.
fn fenced(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let after = &text[start + 3..];
    // The rest of the opening line is the language tag.
    let body_start = after
        .find('\n')
        .map(|index| index + 1)
        .unwrap_or(after.len());
    let body = &after[body_start..];
    let body = match body.find("```") {
        Some(end) => &body[..end],
        None => body,
    };
    Some(body)
}

fn is_statement(text: &str) -> bool {
    let upper = text.trim_start().to_uppercase();
    upper.starts_with("SELECT") || upper.starts_with("WITH") || upper.starts_with("VALUES")
}

/// A statement as the model wrote it, without the trailing semicolon and blank space.
fn statement(text: &str) -> String {
    text.trim().trim_end_matches(';').trim_end().to_string()
}

fn decline_marked(text: &str) -> Option<String> {
    let trimmed = text.trim_start();
    trimmed.strip_prefix(DECLINE_MARKER).map(|reason| {
        let reason = reason.lines().next().unwrap_or_default().trim();
        if reason.is_empty() {
            "the model declined without a reason".to_string()
        } else {
            reason.to_string()
        }
    })
}

fn from_json(raw: RawReply) -> Reply {
    let action = raw.action.as_deref().map(str::trim).unwrap_or_default();
    let sql = raw.sql.filter(|sql| !sql.trim().is_empty());
    match (action, sql) {
        ("clarify", _) => match raw.question {
            Some(question) if !question.trim().is_empty() => Reply::Clarify(ClarifyRequest {
                question,
                options: raw.options.into_iter().take(4).collect(),
            }),
            _ => Reply::Malformed("a clarify reply without a question".to_string()),
        },
        ("decline", _) => Reply::Decline(
            raw.reason
                .unwrap_or_else(|| "the model declined without a reason".to_string()),
        ),
        (_, Some(sql)) => {
            let (understood_as, sql) = understood(&sql);
            Reply::Sql {
                sql: statement(sql),
                assumptions: raw.assumptions,
                understood_as: raw
                    .understood_as
                    .map(|text| text.trim().to_string())
                    .filter(|text| !text.is_empty())
                    .or(understood_as),
            }
        }
        _ => Reply::Malformed("the reply has no SQL, clarification or reason".to_string()),
    }
}

/// The restatement a text opens with (`-- Understood as: ...` lines, the first kept),
/// and the text after it.
fn understood(text: &str) -> (Option<String>, &str) {
    let mut rest = text.trim_start();
    let mut found = None;
    loop {
        let line_end = rest.find('\n').unwrap_or(rest.len());
        let line = &rest[..line_end];
        let marker = UNDERSTOOD_MARKER.len();
        let is_marker = line.len() >= marker
            && line.is_char_boundary(marker)
            && line[..marker].eq_ignore_ascii_case(UNDERSTOOD_MARKER);
        if !is_marker {
            return (found, rest);
        }
        let said = &line[marker..];
        let after = rest[line_end..].trim_start();
        // A query written on the restatement's own line (the model went on after the
        // marker written for it without a line break) is the reply's body, not a comment.
        if let (true, Some(at)) = (after.is_empty(), query_start(said)) {
            let restated = said[..at].trim();
            if found.is_none() && !restated.is_empty() {
                found = Some(restated.to_string());
            }
            return (found, &said[at..]);
        }
        let said = said.trim();
        if found.is_none() && !said.is_empty() {
            found = Some(said.to_string());
        }
        rest = after;
    }
}

/// Where a query begins inside a line of prose: the first upper-case `SELECT` or `WITH`
/// after a space (a restatement's words are not upper case).
fn query_start(line: &str) -> Option<usize> {
    ["SELECT ", "WITH "]
        .iter()
        .filter_map(|keyword| line.find(&format!(" {keyword}")).map(|at| at + 1))
        .min()
}

/// Reads a generation reply in any of the forms above.
pub fn parse_reply(text: &str) -> Reply {
    if let Some(body) = fenced(text) {
        let (understood_as, body) = understood(body);
        if let Some(reason) = decline_marked(body) {
            return Reply::Decline(reason);
        }
        if is_statement(body) {
            return Reply::Sql {
                sql: statement(body),
                assumptions: Vec::new(),
                understood_as,
            };
        }
        // A fenced JSON object is the JSON form.
        if let Ok(raw) = crate::llm::json::parse_json_reply_as::<RawReply>(body) {
            return from_json(raw);
        }
    }
    if let Ok(raw) = crate::llm::json::parse_json_reply_as::<RawReply>(text) {
        return from_json(raw);
    }
    if let Some(sql) = begun_field(text) {
        return Reply::Sql {
            sql: statement(&sql),
            assumptions: Vec::new(),
            understood_as: None,
        };
    }
    let (understood_as, text) = understood(text);
    if let Some(reason) = decline_marked(text) {
        return Reply::Decline(reason);
    }
    if is_statement(text) {
        return Reply::Sql {
            sql: statement(text),
            assumptions: Vec::new(),
            understood_as,
        };
    }
    let shown: String = text.chars().take(200).collect();
    Reply::Malformed(format!("the reply holds no SQL: {shown}"))
}

/// The query of a field reply askdb began ([`FIELD_OPENING`]) that is not valid JSON:
/// the model continued a string with no grammar to hold it, and may have written a raw
/// line break or an unescaped quote inside it. Its string runs to the last quote before
/// the closing brace (or to the end of a reply cut short), its escapes read as JSON's.
fn begun_field(text: &str) -> Option<String> {
    let body = text.trim_start().strip_prefix(FIELD_OPENING)?;
    let trimmed = body.trim_end();
    let body = match trimmed.strip_suffix('}') {
        Some(inside) => inside.trim_end().strip_suffix('"')?,
        None => trimmed.strip_suffix('"').unwrap_or(trimmed),
    };
    let mut sql = String::with_capacity(body.len());
    let mut characters = body.chars();
    while let Some(character) = characters.next() {
        if character != '\\' {
            sql.push(character);
            continue;
        }
        match characters.next() {
            Some('n') => sql.push('\n'),
            Some('t') => sql.push('\t'),
            Some('r') => sql.push('\r'),
            Some(escaped @ ('"' | '\\' | '/')) => sql.push(escaped),
            Some(other) => {
                sql.push('\\');
                sql.push(other);
            }
            None => sql.push('\\'),
        }
    }
    is_statement(&sql).then_some(sql)
}

/// Whitespace-folded SQL, to spot a reply identical to a failed one. Case is kept:
/// `status = 'paid'` and `status = 'PAID'` are different queries.
pub fn normalise_sql(sql: &str) -> String {
    sql.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(';')
        .to_string()
}

/// MySQL's reading of a name a model double-quoted after a qualifier (`T1."Id"`), the
/// habit of SQLite and PostgreSQL, where `"Id"` is a name: MySQL reads `"Id"` as a
/// string (the session runs without ANSI_QUOTES) and the guard refuses double quotes for
/// that ambiguity. After `qualifier.` a string cannot stand, so the only reading is the
/// name, written here in backticks; every other double-quoted text is left for the guard
/// to refuse as before. Quotes inside strings, backticked names and comments are skipped.
/// None when nothing was rewritten (and always for the other dialects).
pub fn qualified_names_in_backticks(sql: &str, dialect: SqlDialect) -> Option<String> {
    if dialect != SqlDialect::Mysql {
        return None;
    }
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut rewritten = false;
    let mut copied = 0;
    let mut index = 0;
    // Skips a quoted run starting at `start` (its quote character), honouring doubled
    // quotes and, in strings, backslash escapes; returns the index after it.
    let skip_quoted = |start: usize, quote: u8| -> usize {
        let mut at = start + 1;
        while at < bytes.len() {
            if bytes[at] == b'\\' && quote != b'`' {
                at += 2;
                continue;
            }
            if bytes[at] == quote {
                if bytes.get(at + 1) == Some(&quote) {
                    at += 2;
                    continue;
                }
                return at + 1;
            }
            at += 1;
        }
        bytes.len()
    };
    while index < bytes.len() {
        match bytes[index] {
            b'\'' | b'`' => index = skip_quoted(index, bytes[index]),
            b'-' if sql[index..].starts_with("-- ") => {
                index = sql[index..]
                    .find('\n')
                    .map_or(bytes.len(), |end| index + end);
            }
            b'#' => {
                index = sql[index..]
                    .find('\n')
                    .map_or(bytes.len(), |end| index + end)
            }
            b'/' if sql[index..].starts_with("/*") => {
                index = sql[index + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |end| index + end + 4);
            }
            b'"' => {
                let end = skip_quoted(index, b'"');
                // Closed: the run ends in its own quote, not at the end of the text.
                let closed = end >= index + 2 && bytes[end - 1] == b'"';
                let inner = if closed { &sql[index + 1..end - 1] } else { "" };
                let after_qualifier = sql[..index].trim_end().ends_with('.');
                let plain_name = !inner.is_empty() && !inner.contains(['"', '`', '\\', '\n']);
                if after_qualifier && plain_name {
                    out.push_str(&sql[copied..index]);
                    out.push('`');
                    out.push_str(inner);
                    out.push('`');
                    copied = end;
                    rewritten = true;
                }
                index = end;
            }
            _ => index += 1,
        }
    }
    if !rewritten {
        return None;
    }
    out.push_str(&sql[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_double_quoted_name_after_a_qualifier_is_a_backticked_name_on_mysql_alone() {
        let written = r#"SELECT T2.Model FROM cars_data AS T1 JOIN car_names AS T2 ON T1."Id" = T2. "MakeId""#;
        assert_eq!(
            qualified_names_in_backticks(written, SqlDialect::Mysql).as_deref(),
            Some("SELECT T2.Model FROM cars_data AS T1 JOIN car_names AS T2 ON T1.`Id` = T2. `MakeId`")
        );
        assert_eq!(
            qualified_names_in_backticks(written, SqlDialect::Sqlite),
            None
        );
        assert_eq!(
            qualified_names_in_backticks(written, SqlDialect::Postgres),
            None
        );
        // A string stays a string, to be refused or run as MySQL reads it.
        for untouched in [
            r#"SELECT name FROM t WHERE name = "Kyle""#,
            r#"SELECT "Id" FROM t"#,
            r#"SELECT 'T1."Id"' FROM t"#,
            r#"SELECT `a."b"` FROM t"#,
            "SELECT a FROM t -- T1.\"Id\"\n",
            r#"SELECT a FROM t /* T1."Id" */"#,
            r#"SELECT T1."" FROM t AS T1"#,
            r#"SELECT T1."a`b" FROM t AS T1"#,
            r#"SELECT T1."unclosed FROM t AS T1"#,
        ] {
            assert_eq!(
                qualified_names_in_backticks(untouched, SqlDialect::Mysql),
                None,
                "{untouched}"
            );
        }
    }

    fn sql_of(text: &str) -> Option<String> {
        match parse_reply(text) {
            Reply::Sql { sql, .. } => Some(sql),
            _ => None,
        }
    }

    #[test]
    fn fenced_blocks_json_objects_and_bare_statements_are_read() {
        assert_eq!(
            sql_of("```sql\nSELECT 1;\n```").as_deref(),
            Some("SELECT 1")
        );
        // A stop sequence took the closing fence.
        assert_eq!(
            sql_of("```sql\nSELECT a\nFROM t\n").as_deref(),
            Some("SELECT a\nFROM t")
        );
        assert_eq!(
            sql_of(
                "Here is the query:\n```\nWITH x AS (SELECT 1) SELECT * FROM x\n```\nIt counts."
            )
            .as_deref(),
            Some("WITH x AS (SELECT 1) SELECT * FROM x")
        );
        assert_eq!(
            sql_of(r#"{"action": "sql", "sql": "SELECT 2;"}"#).as_deref(),
            Some("SELECT 2")
        );
        assert_eq!(
            sql_of("```json\n{\"sql\": \"SELECT 3\"}\n```").as_deref(),
            Some("SELECT 3")
        );
        assert_eq!(sql_of("select 4").as_deref(), Some("select 4"));
    }

    #[test]
    fn a_begun_field_is_read_when_the_model_broke_its_json() {
        // Valid JSON reads as JSON.
        assert_eq!(
            sql_of("{\"sql\": \"SELECT name FROM t WHERE a = \\\"x\\\"\"}").as_deref(),
            Some("SELECT name FROM t WHERE a = \"x\"")
        );
        // A raw line break and an unescaped quote inside the string: the query as meant.
        assert_eq!(
            sql_of("{\"sql\": \"SELECT name\nFROM t WHERE a = \"x\"\"\n}").as_deref(),
            Some("SELECT name\nFROM t WHERE a = \"x\"")
        );
        // Cut short before the string closed.
        assert_eq!(
            sql_of("{\"sql\": \"SELECT name FROM t\nWHERE a > 1").as_deref(),
            Some("SELECT name FROM t\nWHERE a > 1")
        );
        // Not a query, and not the opening askdb writes: malformed as before.
        assert!(matches!(
            parse_reply("{\"sql\": \"I cannot answer that\n\"}"),
            Reply::Malformed(_)
        ));
        assert!(matches!(
            parse_reply("{\"query\": \"SELECT 1\n\"}"),
            Reply::Malformed(_)
        ));
    }

    #[test]
    fn declines_clarifications_and_noise_are_told_apart() {
        assert_eq!(
            parse_reply("```sql\n-- DECLINE: askdb cannot delete bills\n```"),
            Reply::Decline("askdb cannot delete bills".to_string())
        );
        assert!(matches!(
            parse_reply(r#"{"action": "decline", "reason": "writes"}"#),
            Reply::Decline(reason) if reason == "writes"
        ));
        assert!(matches!(
            parse_reply(r#"{"action": "clarify", "question": "Which year?", "options": ["2024", "2025"]}"#),
            Reply::Clarify(request) if request.options.len() == 2
        ));
        assert!(matches!(
            parse_reply("I think you want the bills."),
            Reply::Malformed(_)
        ));
        assert!(matches!(parse_reply("```sql\n\n```"), Reply::Malformed(_)));
    }

    #[test]
    fn a_follow_ups_restatement_is_read_off_before_its_sql() {
        let reply = parse_reply(
            "```sql\n-- Understood as: the number of bills voided in 2024\nSELECT count(*) FROM bills\n```",
        );
        assert_eq!(
            reply,
            Reply::Sql {
                sql: "SELECT count(*) FROM bills".to_string(),
                assumptions: Vec::new(),
                understood_as: Some("the number of bills voided in 2024".to_string()),
            }
        );
        assert_eq!(
            parse_reply(
                "```sql\n-- understood as: deleting them\n-- DECLINE: askdb only reads\n```"
            ),
            Reply::Decline("askdb only reads".to_string())
        );
        assert!(matches!(
            parse_reply(r#"{"action": "sql", "sql": "SELECT 1", "understood_as": "one"}"#),
            Reply::Sql { understood_as: Some(text), .. } if text == "one"
        ));
        // The marker alone is no SQL.
        assert!(matches!(
            parse_reply("```sql\n-- Understood as: x\n```"),
            Reply::Malformed(_)
        ));
        // A query the model wrote on the marker's line, after the restatement, is the
        // query; a lower-case "select" is the restatement's word.
        assert_eq!(
            parse_reply(
                "```sql\n-- Understood as: select the singers older than 40 SELECT name FROM singer WHERE age > 40\n```"
            ),
            Reply::Sql {
                sql: "SELECT name FROM singer WHERE age > 40".to_string(),
                assumptions: Vec::new(),
                understood_as: Some("select the singers older than 40".to_string()),
            }
        );
        assert!(matches!(
            parse_reply("```sql\n-- Understood as: WITH t AS (SELECT 1 AS x) SELECT x FROM t\n```"),
            Reply::Sql { sql, understood_as: None, .. } if sql == "WITH t AS (SELECT 1 AS x) SELECT x FROM t"
        ));
    }

    #[test]
    fn normalising_folds_space_but_keeps_case() {
        assert_eq!(normalise_sql("SELECT  a\n FROM t;"), "SELECT a FROM t");
        assert_ne!(normalise_sql("x = 'paid'"), normalise_sql("x = 'PAID'"));
    }
}
