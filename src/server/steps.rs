//! The agent's step events ([`AgentEvent`]) as a person reads them: one sentence per
//! step with its time. The page's live steps (`POST /api/ask/stream` sends the sentence
//! with each event) and `askdb ask`'s progress on stderr both use [`summary`], so the two
//! say the same thing in the same words.

use serde_json::Value;

use crate::agent::events::{AgentEvent, ExampleRole, RulesOutcome};
use crate::agent::failure::{FailureKind, NextKind};
use crate::agent::Decision;
use crate::llm::Purpose;
use crate::text::cut_text;

/// Longest database message or refusal quoted in a sentence.
const MESSAGE_CHARS: usize = 240;

/// Tables named in the schema step before "and N more".
const TABLES_NAMED: usize = 8;

/// Milliseconds as the page and the CLI show them: `0.4 s`, `12.0 s`.
pub fn seconds(ms: u64) -> String {
    // Tenths of a second, in integers: exact for any u64 (no float rounding).
    format!("{}.{} s", ms / 1000, (ms % 1000) / 100)
}

fn plural(count: usize, one: &str, many: &str) -> String {
    crate::text::counted(count as u64, one, many)
}

/// The 1-based candidate, named only when a round tried several.
fn candidate_name(candidate: usize) -> String {
    if candidate == 0 {
        "the SQL".to_string()
    } else {
        format!("candidate {}", candidate + 1)
    }
}

/// One sentence saying what the step did.
pub fn summary(event: &AgentEvent) -> String {
    match event {
        AgentEvent::Rules {
            outcome,
            assumptions,
            ..
        } => {
            let verdict = match outcome {
                RulesOutcome::Decline => "a rule declines it",
                RulesOutcome::Clarify => "a vague word needs clarifying",
                RulesOutcome::Continue => "no rule stops it",
            };
            if assumptions.is_empty() {
                format!("Read the question: {verdict}")
            } else {
                format!(
                    "Read the question: {verdict}; assuming {}",
                    assumptions.join("; ")
                )
            }
        }
        AgentEvent::Examples {
            available, used, ..
        } => {
            let rerun = used
                .iter()
                .find(|example| example.role == ExampleRole::Rerun);
            match rerun {
                Some(example) => format!(
                    "The same question was verified before (example {}): running its SQL again, without the model",
                    example.id
                ),
                None if used.is_empty() => format!(
                    "No verified example is like this question ({} in use)",
                    available
                ),
                None => format!(
                    "Showing the model {}: {}",
                    plural(used.len(), "verified example", "verified examples"),
                    used.iter()
                        .map(|example| format!("{} ({:.2})", example.id, example.score))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
        AgentEvent::SchemaSelected {
            mode,
            tables,
            prompt_tokens,
            ..
        } => {
            let mut names: Vec<&str> = tables
                .iter()
                .take(TABLES_NAMED)
                .map(|table| table.table.as_str())
                .collect();
            let more = tables.len().saturating_sub(TABLES_NAMED);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            if names.is_empty() {
                names.push("none");
            }
            format!(
                "Chose {} ({mode} schema, about {prompt_tokens} prompt tokens): {}{more}",
                plural(tables.len(), "table", "tables"),
                names.join(", ")
            )
        }
        AgentEvent::ModelCall {
            purpose,
            input_tokens,
            output_tokens,
            candidates,
            truncated,
            ..
        } => {
            let what = match purpose {
                Purpose::WriteSql => "The model wrote SQL".to_string(),
                Purpose::RepairSql => "The model rewrote the SQL after the failure".to_string(),
                Purpose::WriteAnswer => "The model wrote the answer".to_string(),
                other => format!("The model was asked ({other})"),
            };
            let mut facts = vec![format!("{input_tokens} tokens in, {output_tokens} out")];
            if *candidates > 1 {
                facts.push(format!("{candidates} candidates"));
            }
            if *truncated > 0 {
                facts.push(format!("{truncated} cut off at the token limit"));
            }
            format!("{what} ({})", facts.join(", "))
        }
        AgentEvent::Guard {
            candidate,
            accepted,
            detail,
            ..
        } => {
            if *accepted {
                format!("The guard accepted {}", candidate_name(*candidate))
            } else {
                format!(
                    "The guard refused {}: {}",
                    candidate_name(*candidate),
                    cut_text(detail, MESSAGE_CHARS)
                )
            }
        }
        AgentEvent::Executed {
            rows,
            error_type,
            error,
            ..
        } => match rows {
            Some(count) => format!("The database returned {}", plural(*count, "row", "rows")),
            None => format!(
                "The database refused it ({}): {}",
                error_type.map_or("unknown", |error_type| error_type.as_str()),
                cut_text(error.as_deref().unwrap_or("no message"), MESSAGE_CHARS)
            ),
        },
        AgentEvent::Vote {
            chosen,
            agreeing,
            voters,
            ..
        } => format!(
            "{agreeing} of {voters} candidates agree on the result; kept candidate {}",
            chosen + 1
        ),
        AgentEvent::EmptyProbe { finding, .. } => {
            format!(
                "No rows, so askdb checked why: {}",
                cut_text(finding, MESSAGE_CHARS)
            )
        }
        AgentEvent::Failed {
            kind,
            message,
            next,
            rewrite,
            ..
        } => {
            let then = match next {
                NextKind::Repair => "asking the model to repair it".to_string(),
                NextKind::Resample => "asking for other candidates".to_string(),
                NextKind::Decline => "declining".to_string(),
                NextKind::GiveUp => "giving up".to_string(),
                NextKind::AnswerWithWarnings => "answering with a warning".to_string(),
                // The rewrite says what it changes: a join taken out, a column of years
                // compared as the year, a join put on its foreign key.
                NextKind::Rewrite => match rewrite {
                    Some(change) => format!("running the rules' rewrite ({change})"),
                    None => "running the rules' rewrite".to_string(),
                },
                NextKind::Diagnose => "checking why there are no rows".to_string(),
                NextKind::Answer => "answering as it is".to_string(),
                NextKind::SearchConcept => {
                    "looking for what it names under another name".to_string()
                }
            };
            let what = if *kind == FailureKind::Suspect {
                "The rows do not fit the question"
            } else {
                "Attempt failed"
            };
            format!(
                "{what} ({}): {}; {then}",
                kind.as_str(),
                cut_text(message, MESSAGE_CHARS)
            )
        }
        AgentEvent::Finished {
            decision,
            attempts,
            rows,
            ..
        } => {
            let attempts = plural(*attempts as usize, "attempt", "attempts");
            match decision {
                Decision::Answer => format!(
                    "Answered after {attempts}: {}",
                    plural(*rows, "row", "rows")
                ),
                Decision::Clarify => "Asks for clarification".to_string(),
                Decision::Decline => "Declined".to_string(),
                Decision::GiveUp => format!("Gave up after {attempts}"),
            }
        }
    }
}

/// When the step began (ms since the question arrived), and how long it took when the
/// event says.
pub fn timing(event: &AgentEvent) -> (u64, Option<u64>) {
    match event {
        AgentEvent::Rules {
            started_ms,
            elapsed_ms,
            ..
        }
        | AgentEvent::Examples {
            started_ms,
            elapsed_ms,
            ..
        }
        | AgentEvent::SchemaSelected {
            started_ms,
            elapsed_ms,
            ..
        }
        | AgentEvent::ModelCall {
            started_ms,
            elapsed_ms,
            ..
        }
        | AgentEvent::Guard {
            started_ms,
            elapsed_ms,
            ..
        }
        | AgentEvent::Executed {
            started_ms,
            elapsed_ms,
            ..
        }
        | AgentEvent::EmptyProbe {
            started_ms,
            elapsed_ms,
            ..
        } => (*started_ms, Some(*elapsed_ms)),
        AgentEvent::Vote { started_ms, .. }
        | AgentEvent::Failed { started_ms, .. }
        | AgentEvent::Finished { started_ms, .. } => (*started_ms, None),
    }
}

/// The line `askdb ask` writes on stderr for a step: `  1.2 s  The model wrote SQL (...)`.
pub fn line(event: &AgentEvent) -> String {
    let (started, took) = timing(event);
    let took = match took {
        Some(ms) if ms >= 100 => format!(" [{}]", seconds(ms)),
        _ => String::new(),
    };
    format!("{:>8}  {}{took}", seconds(started), summary(event))
}

/// The event as the stream sends it: the event's own JSON (`step`, `started_ms`, ...)
/// with `summary`, the sentence above. A model call's prompt is replaced by how many
/// messages it had: it repeats the whole schema on every call, and the page does not
/// show it.
pub fn stream_json(event: &AgentEvent) -> Value {
    let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
    if let Value::Object(fields) = &mut value {
        if let Some(Value::Array(messages)) = fields.remove("prompt") {
            fields.insert("prompt_messages".to_string(), Value::from(messages.len()));
        }
        fields.insert("summary".to_string(), Value::from(summary(event)));
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::events::{ChosenTable, SchemaMode};
    use crate::gate::ErrorType;

    #[test]
    fn seconds_are_tenths_without_rounding_up() {
        assert_eq!(seconds(0), "0.0 s");
        assert_eq!(seconds(1_299), "1.2 s");
        assert_eq!(seconds(61_000), "61.0 s");
    }

    #[test]
    fn every_step_reads_as_a_sentence() {
        let schema = AgentEvent::SchemaSelected {
            started_ms: 3,
            elapsed_ms: 1,
            mode: SchemaMode::Whole,
            tables: vec![
                ChosenTable {
                    table: "bills".to_string(),
                    score: 1.0,
                },
                ChosenTable {
                    table: "customers".to_string(),
                    score: 0.5,
                },
            ],
            prompt_tokens: 1200,
        };
        assert_eq!(
            summary(&schema),
            "Chose 2 tables (whole schema, about 1200 prompt tokens): bills, customers"
        );
        let failed = AgentEvent::Failed {
            started_ms: 900,
            kind: FailureKind::Database(ErrorType::UnknownColumn),
            message: "no such column: c.customer_name".to_string(),
            next: NextKind::Repair,
            rewrite: None,
        };
        assert_eq!(
            summary(&failed),
            "Attempt failed (unknown_column): no such column: c.customer_name; asking the \
             model to repair it"
        );
        let executed = AgentEvent::Executed {
            started_ms: 1_500,
            elapsed_ms: 250,
            candidate: 0,
            sql: "SELECT 1".to_string(),
            rows: Some(1),
            error_type: None,
            error: None,
            sqlstate: None,
            hint: None,
        };
        assert_eq!(
            line(&executed),
            "   1.5 s  The database returned 1 row [0.2 s]"
        );
    }

    #[test]
    fn verified_examples_say_whether_the_model_was_skipped() {
        use crate::agent::events::UsedExample;
        let used = |id: i64, score: f64, role: ExampleRole| UsedExample {
            id,
            question: "How many bills?".to_string(),
            score,
            role,
        };
        let rerun = AgentEvent::Examples {
            started_ms: 1,
            elapsed_ms: 150,
            available: 4,
            used: vec![used(7, 1.0, ExampleRole::Rerun)],
        };
        assert_eq!(
            summary(&rerun),
            "The same question was verified before (example 7): running its SQL again, without the model"
        );
        assert_eq!(timing(&rerun), (1, Some(150)));
        let shown = AgentEvent::Examples {
            started_ms: 1,
            elapsed_ms: 2,
            available: 4,
            used: vec![
                used(3, 0.8125, ExampleRole::Prompt),
                used(2, 0.4, ExampleRole::Prompt),
            ],
        };
        assert_eq!(
            summary(&shown),
            "Showing the model 2 verified examples: 3 (0.81), 2 (0.40)"
        );
        let none = AgentEvent::Examples {
            started_ms: 1,
            elapsed_ms: 2,
            available: 4,
            used: Vec::new(),
        };
        assert_eq!(
            summary(&none),
            "No verified example is like this question (4 in use)"
        );
    }

    #[test]
    fn a_rewrite_is_described_by_what_it_changes() {
        let rewrite = |kind: FailureKind, change: &str| AgentEvent::Failed {
            started_ms: 900,
            kind,
            message: "m".to_string(),
            next: NextKind::Rewrite,
            rewrite: Some(change.to_string()),
        };
        assert_eq!(
            summary(&rewrite(FailureKind::Suspect, "without the repeating join")),
            "The rows do not fit the question (suspect): m; running the rules' rewrite \
             (without the repeating join)"
        );
        assert_eq!(
            summary(&rewrite(
                FailureKind::Database(ErrorType::UnknownColumn),
                "the join on the foreign key that links its tables"
            )),
            "Attempt failed (unknown_column): m; running the rules' rewrite (the join on \
             the foreign key that links its tables)"
        );
        // Every next step has its own words.
        let mut words: Vec<String> = NextKind::ALL
            .into_iter()
            .map(|next| {
                summary(&AgentEvent::Failed {
                    started_ms: 0,
                    kind: FailureKind::EmptyResult,
                    message: "m".to_string(),
                    next,
                    rewrite: None,
                })
            })
            .collect();
        words.sort();
        words.dedup();
        assert_eq!(words.len(), NextKind::ALL.len());
    }

    #[test]
    fn the_stream_leaves_the_prompt_out_and_adds_the_sentence() {
        let call = AgentEvent::ModelCall {
            started_ms: 10,
            elapsed_ms: 800,
            purpose: Purpose::WriteSql,
            model: "scripted".to_string(),
            input_tokens: 900,
            output_tokens: 40,
            cost_usd: 0.0,
            candidates: 1,
            truncated: 0,
            prompt: vec!["system".to_string(), "question".to_string()],
            replies: vec!["{\"sql\": \"SELECT 1\"}".to_string()],
        };
        let value = stream_json(&call);
        assert_eq!(value["step"], "model_call");
        assert!(value.get("prompt").is_none());
        assert_eq!(value["prompt_messages"], 2);
        assert_eq!(
            value["summary"],
            "The model wrote SQL (900 tokens in, 40 out)"
        );
        assert_eq!(value["started_ms"], 10);
    }
}
