//! Every word askdb sends to the model: the stable system prompt (instructions, then
//! the schema block, so provider prefix caches reuse it across questions), the JSON
//! shape of a generation reply, and one repair instruction per error type. The repair
//! is chosen by the error type alone; a repairable type without an instruction is a
//! defect that a test catches.

use serde_json::json;

use crate::gate::{ErrorType, SqlDialect};
use crate::llm::{Message, ModelRequest, Purpose};

/// The most tokens one generation reply may take.
pub const GENERATION_MAX_TOKENS: u32 = 400;

/// The plain reference prompt (`--mode plain`): a one-line system prompt, every table as
/// CREATE TABLE with three sample rows, the question, and a reply held to the one-field
/// JSON `{"sql": ...}`. Nothing of askdb's own: no rules, notes, glossary or repair.
pub fn plain_request(dialect: SqlDialect, schema: &str, question: &str) -> ModelRequest {
    ModelRequest::new(
        Purpose::WriteSql,
        question,
        vec![
            Message::stable_system(format!(
                "You write one {} SQL query that answers the user's question about this database.\n\n{schema}",
                dialect.as_str()
            )),
            Message::user(format!("Question: {question}")),
        ],
    )
    .with_json_schema(json!({
        "type": "object",
        "properties": {"sql": {"type": "string"}},
        "required": ["sql"]
    }))
    .with_max_tokens(GENERATION_MAX_TOKENS)
}

/// The JSON schema a generation reply must follow: exactly one action, with its
/// fields, plus the assumptions the model made. `action` comes first so a
/// grammar-constrained small model commits to its decision before writing SQL, and
/// the property order is the order models write in: llama.cpp turns the schema into a
/// grammar that fixes the order, and a model that wants to write `assumptions` after
/// `sql` but may not keeps extending the SQL string instead (measured: 400-token
/// runaway replies with alphabetical order, a clean 65-token reply with this one).
/// serde_json keeps this order because of its `preserve_order` feature.
pub fn generation_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["sql", "clarify", "decline"]},
            "sql": {"type": "string"},
            "question": {"type": "string"},
            "options": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
            "reason": {"type": "string"},
            "assumptions": {"type": "array", "items": {"type": "string"}, "maxItems": 4}
        },
        "required": ["action"]
    })
}

fn dialect_rules(dialect: SqlDialect) -> &'static str {
    match dialect {
        SqlDialect::Sqlite => {
            "SQLite: dates are TEXT like '2025-03-31' or '2025-03-31 14:05:00'; use \
             strftime('%Y', col), date(col), and string comparison for ranges; there is no \
             EXTRACT, DATE_TRUNC, ILIKE or INTERVAL. Booleans are 0/1. ROUND(x, 2) for money."
        }
        SqlDialect::Postgres => {
            "PostgreSQL: use EXTRACT(YEAR FROM col), date_trunc('month', col), \
             col >= DATE '2025-01-01', INTERVAL '30 days', ILIKE. ROUND(x::numeric, 2) for money."
        }
    }
}

/// The stable system prompt: instructions, then the schema block. Identical for every
/// question on the same schema selection, so it is sent first and marked stable.
pub fn system_prompt(dialect: SqlDialect, schema_block: &str) -> String {
    format!(
        "You are askdb. You turn one question about a {dialect} database into ONE read-only \
         SELECT statement, or you ask for clarification, or you decline.\n\
         Reply with one JSON object and nothing else:\n\
         - {{\"action\": \"sql\", \"sql\": \"SELECT ...\", \"assumptions\": [\"...\"]}} to answer;\n\
         - {{\"action\": \"clarify\", \"question\": \"...\", \"options\": [\"...\", \"...\"]}} when \
         the question can mean several different things (2 to 4 concrete options);\n\
         - {{\"action\": \"decline\", \"reason\": \"...\"}} when it asks to change data \
         (insert, update, delete, create, drop), asks for restricted data, or asks for \
         something the schema does not hold.\n\
         Rules: use only the tables and columns in the schema below; join on the foreign \
         keys shown; give every table an alias and qualify every column with it; follow \
         the business conventions and glossary; text values must match the stored \
         spelling and capitalisation shown in the samples; write one statement without a \
         trailing semicolon. {rules}\n\n{schema_block}",
        dialect = dialect.as_str(),
        rules = dialect_rules(dialect),
    )
}

/// The user message that asks the question, with any assumptions already resolved by
/// the glossary.
pub fn question_message(question: &str, assumptions: &[String]) -> String {
    let mut text = format!("Question: {question}");
    if !assumptions.is_empty() {
        text.push_str("\nAssume:");
        for assumption in assumptions {
            text.push_str(&format!("\n- {assumption}"));
        }
    }
    text
}

/// What to tell the model after a failure of this type, or None when the type is never
/// repaired (permission and read-only failures are the event to see, not to hide;
/// connection and unknown failures are not the query's fault).
pub fn repair_instruction(error_type: ErrorType) -> Option<&'static str> {
    let instruction = match error_type {
        ErrorType::SyntaxError => {
            "The statement does not parse. Fix the syntax at the position given; keep the \
             same meaning."
        }
        ErrorType::UnknownColumn => {
            "A column does not exist where you used it. Use only columns listed for each \
             table; if the column belongs to another table, join that table on its foreign \
             key as shown."
        }
        ErrorType::UnknownTable => {
            "A table does not exist. Use only the tables in the schema (more are shown now)."
        }
        ErrorType::AmbiguousColumn => {
            "A column name is ambiguous because several joined tables have it. Give every \
             table an alias and qualify EVERY column with its alias (for example b.status)."
        }
        ErrorType::UnknownFunction => {
            "A function does not exist in this database or takes other arguments. Use this \
             dialect's functions (see the rules) instead of another dialect's."
        }
        ErrorType::TypeMismatch => {
            "A value or comparison has the wrong type. Check the column types and sample \
             values below and add an explicit CAST where types differ."
        }
        ErrorType::GroupingError => {
            "Every selected column must either be inside an aggregate (SUM, COUNT, ...) or \
             listed in GROUP BY. Aggregates cannot be used in WHERE: use HAVING."
        }
        ErrorType::WindowingError => {
            "A window function cannot be used in WHERE, GROUP BY or HAVING. Compute it in a \
             subquery (or CTE) and filter on its result in the outer query."
        }
        ErrorType::CardinalityViolation => {
            "A scalar subquery returned more than one row. Filter it to exactly one row, \
             aggregate it, or join instead."
        }
        ErrorType::DivisionByZero => {
            "A division by zero happened. Guard the denominator with NULLIF(denominator, 0)."
        }
        ErrorType::Timeout => {
            "The query ran too long. Simplify it: aggregate before joining, drop joins the \
             question does not need, and narrow the range."
        }
        ErrorType::Rejected => {
            "The safety guard refused the statement for the reason given. Write one plain \
             SELECT over the listed tables and columns that avoids that reason."
        }
        ErrorType::PermissionDenied
        | ErrorType::ReadOnlyViolation
        | ErrorType::ConnectionError
        | ErrorType::Unknown => return None,
    };
    Some(instruction)
}

/// The instruction for an empty result whose text filter matched only when case and
/// spaces were ignored.
pub fn case_mismatch_instruction(findings: &[String]) -> String {
    format!(
        "The query returned no rows, but it does return rows when text is compared without \
         regard to case and spaces: the stored values are spelled differently. {} Use the \
         exact stored values.",
        findings.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_repairable_error_type_has_a_repair_instruction() {
        for error_type in ErrorType::ALL {
            assert_eq!(
                error_type.repairable(),
                repair_instruction(error_type).is_some(),
                "{error_type}: repairable types need an instruction, others must have none"
            );
        }
    }

    #[test]
    fn the_system_prompt_leads_with_instructions_and_ends_with_the_schema() {
        let prompt = system_prompt(SqlDialect::Sqlite, "<schema>x</schema>");
        assert!(prompt.starts_with("You are askdb."));
        assert!(prompt.ends_with("<schema>x</schema>"));
        assert!(prompt.contains("strftime"));
    }
}
