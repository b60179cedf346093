//! `GET /metrics`: counters in the Prometheus text exposition format (version 0.0.4),
//! written by hand: a handful of counter families with labels and two summaries need no
//! client library. The agent's steps reach [`Metrics`] through its [`Observer`] (model
//! calls, guard refusals, database errors, repairs); the ask handler adds each
//! question's decision, attempts and cost, and the refusals it answers itself (rate
//! limit, busy).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use crate::agent::events::{AgentEvent, Observer};
use crate::agent::failure::NextKind;
use crate::agent::{AgentResult, Decision};

/// The content type Prometheus expects for the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Counters keyed by one label value.
type Labelled = BTreeMap<String, u64>;

#[derive(Debug, Default)]
struct Counters {
    questions: Labelled,
    attempts_sum: u64,
    attempts_count: u64,
    repairs: Labelled,
    model_calls: Labelled,
    model_latency_seconds_sum: f64,
    model_latency_count: u64,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: f64,
    guard_refusals: Labelled,
    database_errors: Labelled,
    refused_requests: Labelled,
}

/// A family known only to the caller (the query log's counts, the drift gauge).
#[derive(Debug, Clone, Copy)]
pub struct Extra<'a> {
    pub name: &'a str,
    pub help: &'a str,
    pub kind: &'a str,
    pub value: f64,
}

impl<'a> Extra<'a> {
    pub fn counter(name: &'a str, help: &'a str, value: f64) -> Self {
        Extra {
            name,
            help,
            kind: "counter",
            value,
        }
    }

    pub fn gauge(name: &'a str, help: &'a str, value: f64) -> Self {
        Extra {
            name,
            help,
            kind: "gauge",
            value,
        }
    }
}

/// Everything `/metrics` reports, shared by the handlers.
#[derive(Debug, Default)]
pub struct Metrics {
    counters: Mutex<Counters>,
}

impl Metrics {
    fn with(&self, change: impl FnOnce(&mut Counters)) {
        if let Ok(mut counters) = self.counters.lock() {
            change(&mut counters);
        }
    }

    /// One answered question: its decision, attempts, tokens and cost.
    pub fn question(&self, result: &AgentResult) {
        let decision = result.decision.as_str().to_string();
        self.with(|c| {
            *c.questions.entry(decision).or_default() += 1;
            c.attempts_sum += u64::from(result.attempts);
            c.attempts_count += 1;
            c.input_tokens += result.tokens.input;
            c.output_tokens += result.tokens.output;
            c.cost_usd += result.cost_usd;
        });
    }

    /// A request answered without asking: `rate_limited` or `busy`.
    pub fn refused(&self, why: &str) {
        self.with(|c| *c.refused_requests.entry(why.to_string()).or_default() += 1);
    }

    /// The text exposition, with the caller's `extra` families after askdb's own.
    pub fn render(&self, extra: &[Extra<'_>]) -> String {
        let counters = match self.counters.lock() {
            Ok(counters) => counters,
            Err(poisoned) => poisoned.into_inner(),
        };
        let c = &*counters;
        let mut out = String::new();
        labelled(
            &mut out,
            "askdb_questions_total",
            "Questions answered through POST /api/ask, by decision.",
            "decision",
            &c.questions,
            &Decision::ALL.map(Decision::as_str),
        );
        summary(
            &mut out,
            "askdb_question_attempts",
            "Generation rounds per question.",
            c.attempts_sum as f64,
            c.attempts_count,
        );
        labelled(
            &mut out,
            "askdb_repairs_total",
            "Repairs asked of the model, by the failure that caused them.",
            "error_type",
            &c.repairs,
            &[],
        );
        labelled(
            &mut out,
            "askdb_model_calls_total",
            "Model calls, by purpose.",
            "purpose",
            &c.model_calls,
            &[],
        );
        summary(
            &mut out,
            "askdb_model_latency_seconds",
            "Latency of model calls.",
            c.model_latency_seconds_sum,
            c.model_latency_count,
        );
        let mut tokens = Labelled::new();
        tokens.insert("input".to_string(), c.input_tokens);
        tokens.insert("output".to_string(), c.output_tokens);
        labelled(
            &mut out,
            "askdb_model_tokens_total",
            "Model tokens spent on questions, input and output.",
            "direction",
            &tokens,
            &[],
        );
        family(
            &mut out,
            "askdb_cost_usd_total",
            "counter",
            "Model cost of questions in US dollars, as askdb prices it.",
        );
        let _ = writeln!(out, "askdb_cost_usd_total {}", number(c.cost_usd));
        labelled(
            &mut out,
            "askdb_guard_refusals_total",
            "Candidate statements the guard refused, by reason.",
            "reason",
            &c.guard_refusals,
            &[],
        );
        labelled(
            &mut out,
            "askdb_database_errors_total",
            "Candidate statements the database failed, by error type.",
            "error_type",
            &c.database_errors,
            &[],
        );
        labelled(
            &mut out,
            "askdb_refused_requests_total",
            "Questions refused before asking: rate limited or every slot busy.",
            "reason",
            &c.refused_requests,
            &["busy", "rate_limited"],
        );
        for family_ in extra {
            family(&mut out, family_.name, family_.kind, family_.help);
            let _ = writeln!(out, "{} {}", family_.name, number(family_.value));
        }
        out
    }
}

impl Observer for Metrics {
    fn observe(&self, event: &AgentEvent) {
        match event {
            AgentEvent::ModelCall {
                elapsed_ms,
                purpose,
                ..
            } => self.with(|c| {
                *c.model_calls
                    .entry(purpose.as_str().to_string())
                    .or_default() += 1;
                c.model_latency_seconds_sum += *elapsed_ms as f64 / 1000.0;
                c.model_latency_count += 1;
            }),
            AgentEvent::Guard {
                accepted: false,
                detail,
                ..
            } => {
                let reason = refusal_reason(detail);
                self.with(|c| *c.guard_refusals.entry(reason).or_default() += 1);
            }
            AgentEvent::Executed {
                error_type: Some(error_type),
                ..
            } => self.with(|c| {
                *c.database_errors
                    .entry(error_type.as_str().to_string())
                    .or_default() += 1
            }),
            AgentEvent::Failed {
                kind,
                next: NextKind::Repair,
                ..
            } => {
                let kind = kind.as_str().to_string();
                self.with(|c| *c.repairs.entry(kind).or_default() += 1);
            }
            _ => {}
        }
    }
}

/// The reason code in a guard event's detail (`restricted_column: ...`), or `other`.
fn refusal_reason(detail: &str) -> String {
    let code: String = detail
        .chars()
        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
        .collect();
    if code.is_empty() {
        "other".to_string()
    } else {
        code
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A counter family with one label; `always` values are shown at 0 before they occur,
/// so a rate over them is defined from the start.
fn labelled(
    out: &mut String,
    name: &str,
    help: &str,
    label: &str,
    values: &Labelled,
    always: &[&str],
) {
    family(out, name, "counter", help);
    let mut all = values.clone();
    for value in always {
        all.entry((*value).to_string()).or_default();
    }
    for (value, count) in &all {
        let _ = writeln!(out, "{name}{{{label}=\"{}\"}} {count}", escape(value));
    }
}

fn summary(out: &mut String, name: &str, help: &str, sum: f64, count: u64) {
    family(out, name, "summary", help);
    let _ = writeln!(out, "{name}_sum {}", number(sum));
    let _ = writeln!(out, "{name}_count {count}");
}

/// A label value escaped as the format requires.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(value: f64) -> String {
    if value.is_finite() {
        format!("{value}")
    } else {
        "NaN".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_reasons_read_from_the_detail() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(
            refusal_reason("restricted_column: customers.phone"),
            "restricted_column"
        );
        assert_eq!(refusal_reason("Refused"), "other");
        let metrics = Metrics::default();
        metrics.refused("busy");
        let text = metrics.render(&[Extra::gauge("askdb_up", "Whether askdb runs.", 1.0)]);
        assert!(text.contains("askdb_refused_requests_total{reason=\"busy\"} 1"));
        assert!(text.contains("askdb_refused_requests_total{reason=\"rate_limited\"} 0"));
        assert!(text.contains("askdb_questions_total{decision=\"give_up\"} 0"));
        assert!(text.contains("# TYPE askdb_up gauge\naskdb_up 1\n"));
    }
}
