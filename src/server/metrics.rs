//! `GET /metrics`: the Prometheus text exposition format (version 0.0.4). Counters with
//! one label are written here; latencies are histograms on the Prometheus client crate
//! (question, model call and database time, labelled by `policy` and `user` where a
//! policy is in force, both empty otherwise; and attempts per question), so they add up
//! across replicas, which summaries do not. A user's name is in a series only when a
//! policy narrows that user, and only users without a policy may read `/metrics` once
//! users exist (decision 0086): a clerk never learns who else asked. The agent's steps
//! reach [`Metrics`] through its [`Observer`] (model calls, guard refusals, database
//! errors, repairs), or through [`Metrics::for_asker`] for a user under a policy; the ask
//! handler adds each question's decision, attempts, latency and cost, and the refusals it
//! answers itself.

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
    repairs: Labelled,
    model_calls: Labelled,
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

/// Upper bounds of the question latency buckets, in seconds: a question takes from a
/// fraction of a second (a remembered example) to the ask timeout.
const QUESTION_BUCKETS: [f64; 10] = [0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0];
/// A model call: a cached reply to a long reasoning reply.
const MODEL_BUCKETS: [f64; 10] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 60.0];
/// A statement on the database: a millisecond to the statement timeout.
const DATABASE_BUCKETS: [f64; 11] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];
/// Generation rounds per question (at most 3 rounds, each with a few candidates).
const ATTEMPT_BUCKETS: [f64; 6] = [1.0, 2.0, 3.0, 4.0, 6.0, 10.0];

/// The histograms, registered once.
struct Histograms {
    registry: prometheus::Registry,
    question: prometheus::HistogramVec,
    model: prometheus::HistogramVec,
    database: prometheus::HistogramVec,
    attempts: prometheus::Histogram,
}

impl Histograms {
    fn new() -> Result<Histograms, prometheus::Error> {
        let registry = prometheus::Registry::new();
        let labelled = |name: &str, help: &str, buckets: &[f64]| {
            let vec = prometheus::HistogramVec::new(
                prometheus::HistogramOpts::new(name, help).buckets(buckets.to_vec()),
                &["policy", "user"],
            )?;
            registry.register(Box::new(vec.clone()))?;
            // The unlabelled series exists from the start, so a rate over it is defined.
            vec.with_label_values(&Asker::default().values());
            Ok::<_, prometheus::Error>(vec)
        };
        let question = labelled(
            "askdb_question_seconds",
            "Time to answer a question through POST /api/ask, by the asking user's policy and, under a policy, the user.",
            &QUESTION_BUCKETS,
        )?;
        let model = labelled(
            "askdb_model_latency_seconds",
            "Latency of model calls, by the asking user's policy and, under a policy, the user.",
            &MODEL_BUCKETS,
        )?;
        let database = labelled(
            "askdb_database_seconds",
            "Time a candidate statement took on the database, by the asking user's policy and, under a policy, the user.",
            &DATABASE_BUCKETS,
        )?;
        let attempts = prometheus::Histogram::with_opts(
            prometheus::HistogramOpts::new(
                "askdb_question_attempts",
                "Generation rounds per question.",
            )
            .buckets(ATTEMPT_BUCKETS.to_vec()),
        )?;
        registry.register(Box::new(attempts.clone()))?;
        Ok(Histograms {
            registry,
            question,
            model,
            database,
            attempts,
        })
    }
}

/// Everything `/metrics` reports, shared by the handlers.
pub struct Metrics {
    counters: Mutex<Counters>,
    /// None only if the client crate refused a family (it does not for these names).
    histograms: Option<Histograms>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            counters: Mutex::new(Counters::default()),
            histograms: Histograms::new().ok(),
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Who a question's latencies are labelled with: the signed-in user's policy and, where
/// a policy is in force, the user's name; both empty for a user without a policy and for
/// nobody signed in (decision 0086). Users under policies are the operator's list, so
/// the labels stay bounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asker<'a> {
    policy: &'a str,
    user: &'a str,
}

impl<'a> Asker<'a> {
    /// The labels of a question asked by `user` under `policy` (either may be absent).
    pub fn of(policy: Option<&'a str>, user: Option<&'a str>) -> Asker<'a> {
        match policy {
            Some(policy) => Asker {
                policy,
                user: user.unwrap_or(""),
            },
            None => Asker::default(),
        }
    }

    /// The label values in the order the histograms declare them.
    fn values(&self) -> [&'a str; 2] {
        [self.policy, self.user]
    }
}

/// The metrics as the observer of one question: its model calls and database time are
/// labelled with its [`Asker`].
pub struct AskerMetrics<'a> {
    metrics: &'a Metrics,
    asker: Asker<'a>,
}

impl Observer for AskerMetrics<'_> {
    fn observe(&self, event: &AgentEvent) {
        self.metrics.observe_as(event, self.asker);
    }
}

impl Metrics {
    /// This question's observer, labelled with who asked it.
    pub fn for_asker<'a>(&'a self, asker: Asker<'a>) -> AskerMetrics<'a> {
        AskerMetrics {
            metrics: self,
            asker,
        }
    }

    fn with(&self, change: impl FnOnce(&mut Counters)) {
        if let Ok(mut counters) = self.counters.lock() {
            change(&mut counters);
        }
    }

    /// One answered question of `asker`: its decision, attempts, latency, tokens and cost.
    pub fn question(&self, result: &AgentResult, asker: Asker<'_>) {
        let decision = result.decision.as_str().to_string();
        if let Some(histograms) = &self.histograms {
            histograms.attempts.observe(f64::from(result.attempts));
            histograms
                .question
                .with_label_values(&asker.values())
                .observe(result.latency_ms as f64 / 1000.0);
        }
        self.with(|c| {
            *c.questions.entry(decision).or_default() += 1;
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
        if let Some(histograms) = &self.histograms {
            let encoded = prometheus::TextEncoder::new()
                .encode_to_string(&histograms.registry.gather())
                .unwrap_or_default();
            out.push_str(&encoded);
        }
        for family_ in extra {
            family(&mut out, family_.name, family_.kind, family_.help);
            let _ = writeln!(out, "{} {}", family_.name, number(family_.value));
        }
        out
    }
}

impl Observer for Metrics {
    fn observe(&self, event: &AgentEvent) {
        self.observe_as(event, Asker::default());
    }
}

impl Metrics {
    /// An agent event of a question of `asker`.
    fn observe_as(&self, event: &AgentEvent, asker: Asker<'_>) {
        if let Some(histograms) = &self.histograms {
            match event {
                AgentEvent::ModelCall { elapsed_ms, .. } => histograms
                    .model
                    .with_label_values(&asker.values())
                    .observe(*elapsed_ms as f64 / 1000.0),
                AgentEvent::Executed { elapsed_ms, .. } => histograms
                    .database
                    .with_label_values(&asker.values())
                    .observe(*elapsed_ms as f64 / 1000.0),
                _ => {}
            }
        }
        match event {
            AgentEvent::ModelCall { purpose, .. } => self.with(|c| {
                *c.model_calls
                    .entry(purpose.as_str().to_string())
                    .or_default() += 1;
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
        // The histograms are there before anything was observed.
        assert!(
            text.contains("# TYPE askdb_model_latency_seconds histogram"),
            "{text}"
        );
        assert!(text.contains("askdb_question_attempts_count 0"), "{text}");
        assert!(
            text.contains("askdb_database_seconds_count{policy=\"\",user=\"\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn latencies_are_histograms_labelled_by_user_only_under_a_policy() {
        let metrics = Metrics::default();
        let call = AgentEvent::ModelCall {
            started_ms: 0,
            elapsed_ms: 300,
            purpose: crate::llm::Purpose::WriteSql,
            model: "m".to_string(),
            input_tokens: 1,
            output_tokens: 1,
            cost_usd: 0.0,
            candidates: 1,
            truncated: 0,
            prompt: Vec::new(),
            replies: Vec::new(),
        };
        metrics.observe(&call);
        // A user without a policy is counted with everyone else: no name.
        metrics
            .for_asker(Asker::of(None, Some("owner")))
            .observe(&call);
        metrics
            .for_asker(Asker::of(Some("clerk"), Some("asha")))
            .observe(&call);
        metrics
            .for_asker(Asker::of(Some("clerk"), Some("asha")))
            .observe(&call);
        let text = metrics.render(&[]);
        assert!(
            text.contains("askdb_model_latency_seconds_count{policy=\"\",user=\"\"} 2"),
            "{text}"
        );
        assert!(!text.contains("owner"), "{text}");
        assert!(
            text.contains("askdb_model_latency_seconds_count{policy=\"clerk\",user=\"asha\"} 2"),
            "{text}"
        );
        assert!(
            text.contains(
                "askdb_model_latency_seconds_bucket{policy=\"clerk\",user=\"asha\",le=\"0.5\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "askdb_model_latency_seconds_bucket{policy=\"clerk\",user=\"asha\",le=\"0.25\"} 0"
            ),
            "{text}"
        );
        assert!(
            text.contains("askdb_model_calls_total{purpose=\"write_sql\"} 4"),
            "{text}"
        );
    }
}
