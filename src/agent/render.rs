//! The terminal form of an agent result and of a plan: the answer, the SQL, the failed
//! attempts with their error types, the chart kind, and the rows (NULL shown as NULL).

use std::fmt::Write;

use super::{AgentResult, Decision, Plan};

/// An agent result as text for the terminal.
pub fn render_text(result: &AgentResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "decision: {:?}", result.decision);
    match result.decision {
        Decision::Answer => {
            for warning in &result.warnings {
                let _ = writeln!(
                    out,
                    "\nWARNING: this answer may be wrong: {} ({})",
                    warning.message, warning.check
                );
            }
            if let Some(explanation) = &result.explanation {
                let _ = writeln!(out, "\n{explanation}");
                if !result.unverified_numbers.is_empty() {
                    let _ = writeln!(
                        out,
                        "(not found in the rows, treat as unchecked: {})",
                        result.unverified_numbers.join(", ")
                    );
                }
            }
            if let Some(id) = result.answered_from_example {
                let _ = writeln!(
                    out,
                    "\nAnswered from verified example {id}: its SQL ran again on today's data, without the model."
                );
            } else if !result.examples.is_empty() {
                let ids: Vec<String> = result.examples.iter().map(|e| e.id.to_string()).collect();
                let _ = writeln!(
                    out,
                    "\nVerified examples shown to the model: {}",
                    ids.join(", ")
                );
            }
            if let Some(sql) = &result.sql {
                let _ = writeln!(out, "\nSQL: {sql}");
            }
            let _ = writeln!(out);
            out.push_str(&crate::text_table::render(&result.columns, &result.rows));
            let _ = writeln!(
                out,
                "({} rows{})",
                result.row_count,
                if result.truncated {
                    ", more may exist"
                } else {
                    ""
                }
            );
            let _ = writeln!(
                out,
                "chart: {} ({})",
                result.chart.kind, result.chart.reason
            );
        }
        Decision::Clarify => {
            if let Some(clarify) = &result.clarify {
                let _ = writeln!(out, "\n{}", clarify.question);
                for (number, option) in clarify.options.iter().enumerate() {
                    let _ = writeln!(out, "  {}. {option}", number + 1);
                }
            }
        }
        Decision::Decline | Decision::GiveUp => {
            if let Some(reason) = &result.reason {
                let _ = writeln!(out, "\n{reason}");
            }
        }
    }
    if !result.assumptions.is_empty() {
        let _ = writeln!(out, "\nassumptions:");
        for assumption in &result.assumptions {
            let _ = writeln!(out, "  - {assumption}");
        }
    }
    if !result.history.is_empty() {
        let _ = writeln!(out, "\nfailed attempts:");
        for (number, attempt) in result.history.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {}. [{}] {}\n     {}",
                number + 1,
                attempt.error_type,
                attempt.sql,
                attempt.message
            );
        }
    }
    let _ = writeln!(
        out,
        "\nattempts {}, model calls {}, tokens {} in / {} out, ${:.4}, {} ms",
        result.attempts,
        result.model_calls.len(),
        result.tokens.input,
        result.tokens.output,
        result.cost_usd,
        result.latency_ms
    );
    out
}

/// A plan as text for the terminal.
pub fn render_plan(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "question: {}", plan.question);
    match &plan.ambiguity.clarify {
        Some(clarify) => {
            let _ = writeln!(out, "ambiguity: would ask \"{}\"", clarify.question);
            for option in &clarify.options {
                let _ = writeln!(out, "  - {option}");
            }
        }
        None => {
            let _ = writeln!(out, "ambiguity: none unresolved");
        }
    }
    for assumption in &plan.ambiguity.assumptions {
        let _ = writeln!(out, "assumption: {assumption}");
    }
    let _ = writeln!(
        out,
        "schema: {} ({} of {} tokens), {} table(s):",
        plan.selection.mode.as_str(),
        plan.selection.prompt_tokens,
        plan.selection.whole_tokens,
        plan.selection.tables.len()
    );
    for table in &plan.selection.tables {
        let _ = writeln!(
            out,
            "  {:<24} {:>7.2}  {:?}",
            table.table, table.score, table.reason
        );
    }
    let _ = writeln!(out, "prompt tokens (estimated): {}", plan.prompt_tokens);
    out
}
