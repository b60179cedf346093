//! The JSON handlers: input is checked here (and answered with a 4xx [`AppError`] when
//! it is not acceptable) before anything reaches the gate or the model.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::OwnedSemaphorePermit;

use super::access::SignedIn;
use super::error::{empty_question, from_conversation, question_too_long, ApiJson, AppError};
use super::health::{self, HealthReport, MODEL_CHECK_TTL};
use super::limits::{BUSY_RETRY_AFTER, DATABASE_BUSY_RETRY_AFTER};
use super::metrics::Asker;
use super::AppState;
use crate::agent::events::{NoObserver, Observer};
use crate::agent::{AgentResult, AskOptions, Mode, MAX_QUESTION_CHARS};
use crate::conversation::{ConversationId, TurnLease};
use crate::gate::{ErrorType, QueryOutcome, TableDescription};

/// The address the request came from, for the per-client rate limit. It is the TCP
/// peer: forwarding headers are not trusted, since any client can write them. Requests
/// without one (handler tests through `oneshot`) share the unspecified address.
pub struct ClientIp(pub IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let ip = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip())
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        Ok(ClientIp(ip))
    }
}

/// The body of POST /api/ask.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskRequest {
    pub question: String,
    /// `agent` (default) or `baseline`.
    #[serde(default)]
    pub mode: Option<String>,
    /// Ask the model for a short explanation; the server's `--explain` by default.
    #[serde(default)]
    pub explain: Option<bool>,
    /// The conversation this question continues (as an earlier answer returned it);
    /// absent, the question starts a new one.
    #[serde(default)]
    pub conversation_id: Option<String>,
}

/// What POST /api/ask returns (and the stream's `result` event): the agent's result
/// with the conversation it belongs to and its turn there.
#[derive(Debug, Serialize)]
pub struct AskResponse {
    /// Send it back as `conversation_id` to ask a follow-up.
    pub conversation_id: String,
    /// 1 for a conversation's first question.
    pub turn: u32,
    #[serde(flatten)]
    pub result: AgentResult,
}

/// A question that passed every check before the agent runs: what to ask, how, and
/// the ask slot it holds until the answer is sent.
pub struct PreparedAsk {
    pub question: String,
    pub options: AskOptions,
    pub client: IpAddr,
    /// The user the request signed in as, for the query log and the database's
    /// row-level security; None without users.
    pub user: Option<String>,
    /// The user's policy (decision 0076): the question goes to its agent.
    pub policy: Option<String>,
    /// The conversation's turn, held until the answer is recorded; given back unchanged
    /// when the ask fails or its client goes.
    lease: Option<TurnLease>,
    _slot: OwnedSemaphorePermit,
}

/// Checks the input, then the model, a free slot and the client's rate, in that order
/// (so neither bad input nor a busy server costs a token). Shared by `POST /api/ask`
/// and `POST /api/ask/stream`, so both refuse the same requests in the same words.
pub async fn prepare_ask(
    state: &AppState,
    client: IpAddr,
    user: Option<Extension<SignedIn>>,
    request: &AskRequest,
) -> Result<PreparedAsk, AppError> {
    let question = request.question.trim();
    if question.is_empty() {
        return Err(empty_question());
    }
    let length = question.chars().count();
    if length > MAX_QUESTION_CHARS {
        return Err(question_too_long(length));
    }
    let mode = match request.mode.as_deref() {
        None => Mode::default(),
        Some(text) => text
            .parse::<Mode>()
            .map_err(|detail| AppError::BadRequest {
                code: "unknown_mode",
                detail,
            })?,
    };
    let signed_in = user.map(|Extension(signed_in)| signed_in);
    let policed = state.shared.team.policed(signed_in.as_ref())?;
    let agent = state.agent_for(policed.map(|policed| policed.name.as_str()))?;
    let user = signed_in.as_ref().map(|signed_in| signed_in.name.clone());
    // The conversation is part of the input: an unknown one, another user's (the same
    // 404) or one still answering is refused before a slot or a token is spent. Its
    // lease goes back if either is not free.
    let id = request
        .conversation_id
        .as_deref()
        .map(ConversationId::parse)
        .transpose()
        .map_err(from_conversation)?;
    let lease = TurnLease::begin(&state.shared.conversations, id.as_ref(), user.as_deref())
        .await
        .map_err(from_conversation)?;
    // The slot first: a client told "busy" has not spent a token of its rate. A
    // rate-limited request gives the slot back at once when it returns.
    let Some(slot) = state.shared.slots.try_take() else {
        state.metrics().refused("busy");
        return Err(AppError::Busy {
            retry_after: BUSY_RETRY_AFTER,
        });
    };
    let asker = super::limits::Asker::of(user.as_deref(), client);
    if let Err(refusal) = state.shared.rate.take(&asker).await {
        if matches!(refusal, AppError::RateLimited { .. }) {
            state.metrics().refused("rate_limited");
        }
        return Err(refusal);
    }
    // The user's policy: its own pace and its share of the spend cap.
    if let (Some(policed), Some(signed_in)) = (policed, &signed_in) {
        let cap = agent.client().ledger().cap_usd();
        if let Err(refusal) = policed.admit(&signed_in.name, cap, Instant::now()) {
            if matches!(refusal, AppError::RateLimited { .. }) {
                state.metrics().refused("rate_limited");
            }
            return Err(refusal);
        }
    }
    Ok(PreparedAsk {
        question: question.to_string(),
        options: AskOptions {
            mode,
            explain: request.explain.unwrap_or(state.config().explain),
            ..AskOptions::default()
        },
        client,
        policy: policed.map(|policed| policed.name.clone()),
        user,
        lease: Some(lease),
        _slot: slot,
    })
}

/// Reports each step to the server's metrics, the user's spend, the question's trace
/// and the caller's observer, in that order.
struct Fanout<'a>([&'a dyn Observer; 4]);

/// Counts each model call's cost against a policed user's share of the spend cap as the
/// call is made, so a question that fails, times out or loses its client still counts
/// what it spent.
struct SpendOf<'a> {
    policed: Option<&'a super::team::Policed>,
    user: Option<&'a str>,
}

impl Observer for SpendOf<'_> {
    fn observe(&self, event: &crate::agent::events::AgentEvent) {
        if let (
            Some(policed),
            Some(user),
            crate::agent::events::AgentEvent::ModelCall { cost_usd, .. },
        ) = (self.policed, self.user, event)
        {
            policed.record_spend(user, *cost_usd);
        }
    }
}

impl Observer for Fanout<'_> {
    fn observe(&self, event: &crate::agent::events::AgentEvent) {
        for observer in self.0 {
            observer.observe(event);
        }
    }
}

/// Runs the agent on a prepared question within the server's ask timeout, reporting
/// each step to the metrics, the trace and `observer`, ends the trace, writes the
/// query-log row (with the trace id), and makes the result ready to show (each
/// assumption once).
pub async fn run_ask(
    state: &AppState,
    prepared: &mut PreparedAsk,
    observer: &dyn Observer,
) -> Result<AskResponse, AppError> {
    let agent = state.agent_for(prepared.policy.as_deref())?;
    let lease = prepared
        .lease
        .take()
        .ok_or_else(|| AppError::Internal("the question was already asked".to_string()))?;
    let asked_at = std::time::SystemTime::now();
    let limit = state.config().ask_timeout;
    let trace = state
        .telemetry()
        .question(&prepared.question, prepared.options.mode.as_str());
    trace.conversation(lease.id().as_str(), lease.number());
    // Latencies are labelled by the user where a policy is in force; only users without
    // a policy read /metrics, so a clerk never learns who else asked (decision 0086).
    let asker = Asker::of(prepared.policy.as_deref(), prepared.user.as_deref());
    let metrics = state.metrics().for_asker(asker);
    let spend = SpendOf {
        policed: state
            .shared
            .team
            .policed_by_name(prepared.policy.as_deref()),
        user: prepared.user.as_deref(),
    };
    let all = Fanout([&metrics, &spend, &trace, observer]);
    let asked = async {
        // While the model reads the schema for the first time, the question is asked
        // with a compact prompt and the read waits for it (server::warm_up).
        let cold = state.warm_up().before_question().await;
        let mut options = prepared.options.clone();
        options.compact_prompt |= cold.is_some();
        // Every statement of the question runs for its user (the database's row-level
        // security reads it).
        let result = crate::gate::user::as_user(
            prepared.user.as_deref(),
            agent.ask_in_conversation(&prepared.question, lease.context(), &options, &all),
        )
        .await;
        drop(cold);
        result
    };
    let mut result = match tokio::time::timeout(limit, asked).await {
        Ok(Ok(result)) => result,
        Ok(Err(error)) => {
            trace.fail(&error.to_string());
            return Err(AppError::from_agent(error));
        }
        Err(_) => {
            trace.fail(&format!("no answer within {} s", limit.as_secs()));
            return Err(AppError::AskTimeout(limit));
        }
    };
    result.assumptions = crate::text::each_once(std::mem::take(&mut result.assumptions));
    result.trace_id = trace.trace_id();
    trace.finish(&result);
    state.metrics().question(&result, asker);
    let conversation_id = lease.id().to_string();
    let turn = lease.number();
    if let Some(log) = state.query_log() {
        let model = Some(agent.client().provider().model().to_string());
        let mut record = super::monitor::log_record(&result, asked_at, model);
        record.conversation_id = Some(conversation_id.clone());
        record.turn = Some(turn);
        record.user = prepared.user.clone();
        log.record(record);
    }
    // Recorded before the answer is sent, so a client's next question finds it.
    lease.finish(&result).await;
    eprintln!(
        "askdb serve: ask from {}: {:?} after {} attempt(s) in {} ms, ${:.4}",
        prepared.client, result.decision, result.attempts, result.latency_ms, result.cost_usd
    );
    Ok(AskResponse {
        conversation_id,
        turn,
        result,
    })
}

/// POST /api/ask: [`prepare_ask`], then the agent; the whole result at the end.
pub async fn ask(
    State(state): State<AppState>,
    ClientIp(client): ClientIp,
    user: Option<Extension<SignedIn>>,
    ApiJson(request): ApiJson<AskRequest>,
) -> Result<Json<AskResponse>, AppError> {
    let mut prepared = prepare_ask(&state, client, user, &request).await?;
    let response = run_ask(&state, &mut prepared, &NoObserver).await?;
    Ok(Json(response))
}

/// The body of POST /api/sql.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlRequest {
    pub sql: String,
}

/// POST /api/sql: the whole gate. A refused or failed statement is a 200 with the
/// structured error (`ok: false`), exactly as `run_query` returns it: the failure is
/// data for the console to show, not a failure of the request. The exception is a
/// statement that never ran because every database connection was taken: that is the
/// server being overloaded, a 503 with Retry-After like a busy ask.
pub async fn sql(
    State(state): State<AppState>,
    user: Option<Extension<SignedIn>>,
    ApiJson(request): ApiJson<SqlRequest>,
) -> Result<Json<QueryOutcome>, AppError> {
    let signed_in = user.map(|Extension(signed_in)| signed_in);
    let gate = state.gate_for(signed_in.as_ref())?;
    if request.sql.trim().is_empty() {
        return Err(AppError::BadRequest {
            code: "empty_sql",
            detail: "the SQL is empty: write one SELECT statement".to_string(),
        });
    }
    let user = signed_in.as_ref().map(|signed_in| signed_in.name.as_str());
    match crate::gate::user::as_user(user, gate.run_query(&request.sql)).await {
        QueryOutcome::Failed(error) if error.error_type == ErrorType::Busy => {
            Err(AppError::DatabaseBusy {
                retry_after: DATABASE_BUSY_RETRY_AFTER,
            })
        }
        outcome => Ok(Json(outcome)),
    }
}

/// What GET /api/schema returns.
#[derive(Debug, Serialize)]
pub struct SchemaResponse {
    pub database: String,
    pub dialect: String,
    /// Each table as `describe_table` gives it (restricted columns left out).
    pub tables: Vec<TableDescription>,
    /// The currency the notes declare (ISO 4217), or null: the page formats money with it.
    pub currency: Option<String>,
    /// The money columns' bare names, lower-cased: a result column of one of these
    /// names (or a sum of one, named after it) is shown in `currency`.
    pub money_columns: Vec<String>,
}

/// GET /api/schema: the visible tables as the gate describes them (restricted columns
/// and hidden tables never appear).
pub async fn schema(
    State(state): State<AppState>,
    user: Option<Extension<SignedIn>>,
) -> Result<Json<SchemaResponse>, AppError> {
    let signed_in = user.map(|Extension(signed_in)| signed_in);
    let gate = state.gate_for(signed_in.as_ref())?;
    let gate = &gate;
    let mut tables = Vec::new();
    for summary in gate.list_tables() {
        let described = gate
            .describe_table(&summary.name)
            .map_err(|error| AppError::Internal(format!("describe {}: {error}", summary.name)))?;
        tables.push(described);
    }
    Ok(Json(SchemaResponse {
        database: gate.label().to_string(),
        dialect: gate.dialect().as_str().to_string(),
        tables,
        currency: gate.notes().currency.clone(),
        money_columns: gate.notes().money_column_names(),
    }))
}

/// GET /api/eval: the newest committed summary, byte for byte, with its path in
/// `X-Askdb-Eval-Source`; 404 when there is none.
pub async fn eval(State(state): State<AppState>) -> Result<Response, AppError> {
    let dir = state.config().eval_dir.clone();
    let searched = dir
        .as_ref()
        .map(|dir| format!("below {}", dir.display()))
        .unwrap_or_else(|| "built into this binary".to_string());
    let found = tokio::task::spawn_blocking(move || match dir {
        Some(dir) => super::eval::latest_summary(&dir),
        None => super::eval::latest_embedded_summary(),
    })
    .await
    .map_err(|error| AppError::Internal(format!("eval summary search: {error}")))?;
    let Some(summary) = found else {
        return Err(AppError::NotFound {
            code: "no_evaluation",
            detail: format!(
                "no evaluation summary {searched}; `askdb eval run` writes one in its run \
                 folder (serve it with --eval-dir)"
            ),
        });
    };
    let mut response =
        ([(header::CONTENT_TYPE, "application/json")], summary.bytes).into_response();
    if let Ok(value) = HeaderValue::from_str(&summary.relative_path) {
        response.headers_mut().insert("x-askdb-eval-source", value);
    }
    Ok(response)
}

/// GET /api/local-model: the local model's phase, download progress and load time
/// (404 when another model is configured).
pub async fn local_model_status(State(state): State<AppState>) -> Response {
    match state.local_model_status() {
        Some(status) => Json(status).into_response(),
        None => local_model_not_offered().into_response(),
    }
}

/// POST /api/local-model/start: starts the local model in the background (the one-time
/// install and download, then the load) and answers 202 with its status at once; the
/// page follows GET /api/local-model. Starting a model that runs or is starting changes
/// nothing.
pub async fn start_local_model(State(state): State<AppState>) -> Response {
    if state.local_model().is_none() {
        return local_model_not_offered().into_response();
    }
    super::start_local_model_in_background(&state);
    let status = state.local_model_status();
    (StatusCode::ACCEPTED, Json(status)).into_response()
}

/// Why a server with a configured model has no local model routes.
pub const LOCAL_MODEL_NOT_OFFERED: &str = "this server uses the model it was configured with; \
                                           the local model is offered only when no model is configured";

fn local_model_not_offered() -> AppError {
    AppError::NotFound {
        code: "local_model_not_offered",
        detail: LOCAL_MODEL_NOT_OFFERED.to_string(),
    }
}

/// GET /api/health: 200 when every check passed, 503 otherwise, with the same body.
pub async fn health(State(state): State<AppState>) -> Response {
    let gate = state.gate();
    let substitute = state.shared.read_only_substitute.get().copied();
    let (database, read_only, model, query_log, tracing, shared_state) = tokio::join!(
        health::check_database(gate),
        health::check_read_only(gate, substitute),
        model_status(&state),
        health::check_query_log(state.query_log(), state.shared.query_log.as_ref().err()),
        state.telemetry().check(),
        health::check_shared_state(state.config().state.as_ref()),
    );
    let users_sign_in = match state.config().users.as_ref() {
        Some(users) => users.sign_in().await.map(Some),
        None => Ok(None),
    };
    // A trusted proxy always asks for a name; without one, users that could not be
    // read leave the answer unknown rather than a false "open".
    let authentication_configured = match (&state.config().proxy, users_sign_in) {
        (Some(_), _) => Some(true),
        (None, Ok(sign_in)) => Some(sign_in == Some(crate::users::SignIn::Required)),
        (None, Err(_)) => None,
    };
    let drift = state.drift_status();
    let (model_configured, model_reachable, model_detail) = model;
    let mut details = std::collections::BTreeMap::new();
    details.insert("database".to_string(), database.1);
    details.insert("read_only".to_string(), read_only.1);
    details.insert("model".to_string(), model_detail);
    details.insert("query_log".to_string(), query_log.detail.clone());
    details.insert("schema_drift".to_string(), drift.detail.clone());
    details.insert("tracing".to_string(), tracing.detail.clone());
    details.insert("shared_state".to_string(), shared_state.2.clone());
    let client = state.model_client();
    let client = client.as_ref();
    let query_log_ok = !query_log.enabled || query_log.writable;
    let drift_ok = !drift.enabled || (!drift.drifted && drift.error.is_none());
    let tracing_ok = !tracing.enabled || tracing.authenticated;
    let report = HealthReport {
        ok: database.0
            && read_only.0
            && model_configured
            && model_reachable
            && query_log_ok
            && drift_ok
            && tracing_ok
            && (!shared_state.0 || shared_state.1),
        read_only_confirmed: read_only.0,
        database_reachable: database.0,
        model_configured,
        model_reachable,
        tables: gate.list_tables().len(),
        database: gate.label().to_string(),
        dialect: gate.dialect().as_str().to_string(),
        provider: client.map(|client| client.provider().name().to_string()),
        model: client.map(|client| client.provider().model().to_string()),
        query_log_enabled: query_log.enabled,
        query_log_writable: query_log.writable,
        query_log_rows_written: query_log.written,
        query_log_write_failures: query_log.failed,
        schema_snapshot: drift.enabled,
        schema_drifted: drift.drifted,
        schema_differences: drift.differences.iter().map(ToString::to_string).collect(),
        tracing_enabled: tracing.enabled,
        tracing_authenticated: tracing.authenticated,
        traces_exported: tracing.exported,
        trace_export_failures: tracing.failed,
        details,
        local_model: state.local_model_status(),
        authentication_configured,
        shared_state_enabled: shared_state.0,
        shared_state_reachable: shared_state.1,
    };
    let status = if report.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(report)).into_response()
}

/// (configured, reachable, detail), from the cached check while it is fresh.
async fn model_status(state: &AppState) -> (bool, bool, String) {
    let Some(client) = state.model_client() else {
        let reason = match state.local_model_status() {
            Some(status) if status.phase.is_starting() => status.message,
            _ => state
                .model_missing_reason()
                .unwrap_or_else(|| "no model is configured".to_string()),
        };
        return (false, false, reason);
    };
    let mut cached = state.shared.model_check.lock().await;
    let fresh = cached
        .as_ref()
        .is_some_and(|check| check.at.elapsed() < MODEL_CHECK_TTL);
    if !fresh {
        *cached = Some(health::check_model(&client).await);
    }
    match cached.as_ref() {
        Some(check) => {
            let age = check.at.elapsed().as_secs();
            let when = if age == 0 {
                String::new()
            } else {
                format!(" ({age} s ago)")
            };
            (true, check.reachable, format!("{}{when}", check.detail))
        }
        None => (true, false, "the model check did not run".to_string()),
    }
}

/// GET /metrics: the counters in the Prometheus text format. Once users exist, only a
/// user without a policy reads them: the latencies name the users under policies, and a
/// user narrowed by one is not told who else asked (decision 0086).
pub async fn metrics(
    State(state): State<AppState>,
    user: Option<Extension<SignedIn>>,
) -> Result<Response, AppError> {
    if let Some(Extension(SignedIn {
        policy: Some(_), ..
    })) = &user
    {
        // The policy is not named: a policy given as a file is stored as its path.
        return Err(AppError::Forbidden {
            code: "metrics_need_a_user_without_a_policy",
            detail:
                "/metrics names the users under policies, so only a user without a policy reads it"
                    .to_string(),
        });
    }
    let (written, failed) = state
        .query_log()
        .map(|log| (log.counters().written(), log.counters().failed()))
        .unwrap_or((0, 0));
    let drift = state.drift_status();
    let database_check = crate::gate::database_check_counts();
    let extra = [
        super::metrics::Extra::counter(
            "askdb_guard_database_checks_total",
            "Statements whose resolution the database was asked for by the guard's database check.",
            database_check.checked as f64,
        ),
        super::metrics::Extra::counter(
            "askdb_guard_database_checks_remembered_total",
            "Statements the guard's database check accepted from memory (accepted before under the same policy).",
            database_check.remembered as f64,
        ),
        super::metrics::Extra::counter(
            "askdb_backends_terminated_total",
            "PostgreSQL backends that ignored the cancel past a statement's deadline and were terminated.",
            database_check.backends_terminated as f64,
        ),
        super::metrics::Extra::counter(
            "askdb_backends_unconfirmed_total",
            "PostgreSQL backends not confirmed stopped after their termination.",
            database_check.backends_unconfirmed as f64,
        ),
        super::metrics::Extra::counter(
            "askdb_guard_check_disagreements_total",
            "Statements the parser check accepted and the database check refused: each is a finding about the parser check.",
            database_check.disagreements as f64,
        ),
        super::metrics::Extra::counter(
            "askdb_query_log_rows_total",
            "Query log rows written.",
            written as f64,
        ),
        super::metrics::Extra::counter(
            "askdb_query_log_failures_total",
            "Query log rows that could not be written (counted, never failing an answer).",
            failed as f64,
        ),
        super::metrics::Extra::gauge(
            "askdb_schema_drifted",
            "1 when the live schema drifted from the snapshot at the last check.",
            if drift.drifted { 1.0 } else { 0.0 },
        ),
        super::metrics::Extra::gauge(
            "askdb_schema_differences",
            "Differences between the live schema and the snapshot at the last check.",
            drift.differences.len() as f64,
        ),
    ];
    Ok((
        [(header::CONTENT_TYPE, super::metrics::CONTENT_TYPE)],
        state.metrics().render(&extra),
    )
        .into_response())
}

/// GET /api/openapi.json.
pub async fn openapi() -> Json<serde_json::Value> {
    Json(super::openapi::document())
}

/// Any path the server does not have.
pub async fn not_found() -> AppError {
    AppError::NotFound {
        code: "not_found",
        detail: "no such path; GET /api/openapi.json lists the API".to_string(),
    }
}

pub async fn method_not_allowed() -> AppError {
    AppError::MethodNotAllowed
}

/// The body shape of every error, for the OpenAPI description's examples.
pub fn error_example(code: &str, detail: &str) -> serde_json::Value {
    json!({"error": code, "detail": detail})
}
