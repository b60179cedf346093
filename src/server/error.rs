//! Every failure the HTTP API answers with, as one enum that becomes a JSON body
//! `{"error": code, "detail": sentence}` with the right status (and Retry-After where a
//! retry makes sense). Internal failures are logged to stderr in full and shown to the
//! client only as a generic sentence: database messages, paths and provider replies do
//! not leave the server through an error.
//!
//! [`ApiJson`] is the JSON body extractor of the API: axum's own, with its rejections
//! (malformed JSON, wrong fields, missing content type, oversized body) turned into the
//! same JSON errors instead of plain text.

use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::agent::{AgentError, MAX_QUESTION_CHARS};
use crate::llm::LlmError;

#[derive(Debug)]
pub enum AppError {
    /// 400: the request is readable but its content is not acceptable.
    BadRequest { code: &'static str, detail: String },
    /// 422: well-formed JSON with missing or mistyped fields.
    InvalidRequest(String),
    /// 415: the body is not declared as JSON.
    UnsupportedMediaType,
    /// 413: the body is larger than the configured limit.
    PayloadTooLarge { limit: usize },
    /// 404.
    NotFound { code: &'static str, detail: String },
    /// 405.
    MethodNotAllowed,
    /// 421: the request names a host askdb does not answer for (DNS rebinding).
    MisdirectedHost,
    /// 401: sign-in is on and the request has no live token in its Authorization header.
    Unauthorized,
    /// 403: the signed-in user may not read what the route serves (a user under a policy
    /// asking for `/metrics`); the sentence says why.
    Forbidden { code: &'static str, detail: String },
    /// 403: a browser sent a request that changes or spends something from another site.
    CrossSite,
    /// 403: a request named its user in the proxy's user header without coming from a
    /// trusted proxy (decision 0072). Says nothing of why.
    UntrustedProxyHeader,
    /// 409: the request conflicts with one under way (a conversation still answering).
    Conflict { code: &'static str, detail: String },
    /// 429: this client asked too often.
    RateLimited { retry_after: Duration },
    /// 429: this address failed to sign in too often in a short while.
    TooManySignIns { retry_after: Duration },
    /// 503: every ask slot is taken.
    Busy { retry_after: Duration },
    /// 503: no model is configured; says how to configure one.
    ModelNotConfigured(String),
    /// 503: the spend cap would be crossed.
    SpendCapReached,
    /// 503: the spend ledger cannot be written, so no model call is made (fail closed).
    /// The text is logged, never sent.
    SpendLedger(String),
    /// 503: every database connection was in use and none came free in time.
    DatabaseBusy { retry_after: Duration },
    /// 503: the state replicas share (`--state-url`) did not answer, so nothing that
    /// needs it (a pace, a session) is decided. The text is logged, never sent.
    SharedState(String),
    /// 503: the signed-in user's policy is not loaded by this server (added after it
    /// started, or unreadable then): the user is refused, never served under the notes
    /// alone. The user is told why, never the policy's value (a file policy is a path);
    /// the operator's log names both and says what to do.
    PolicyNotLoaded { user: String, policy: String },
    /// 502: the model could not be asked (timeouts, quota, authentication, ...).
    Model(LlmError),
    /// 504: the question took longer than the server allows.
    AskTimeout(Duration),
    /// 500: anything else; the text is logged, never sent.
    Internal(String),
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            AppError::InvalidRequest(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AppError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::NotFound { .. } => StatusCode::NOT_FOUND,
            AppError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            AppError::MisdirectedHost => StatusCode::MISDIRECTED_REQUEST,
            AppError::Forbidden { .. } | AppError::CrossSite | AppError::UntrustedProxyHeader => {
                StatusCode::FORBIDDEN
            }
            AppError::Unauthorized => StatusCode::UNAUTHORIZED,
            AppError::Conflict { .. } => StatusCode::CONFLICT,
            AppError::RateLimited { .. } | AppError::TooManySignIns { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            AppError::Busy { .. }
            | AppError::ModelNotConfigured(_)
            | AppError::SpendCapReached
            | AppError::SpendLedger(_)
            | AppError::SharedState(_)
            | AppError::PolicyNotLoaded { .. }
            | AppError::DatabaseBusy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Model(_) => StatusCode::BAD_GATEWAY,
            AppError::AskTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine-readable code of the body's `error` field.
    pub fn code(&self) -> &'static str {
        match self {
            AppError::BadRequest { code, .. }
            | AppError::NotFound { code, .. }
            | AppError::Forbidden { code, .. }
            | AppError::Conflict { code, .. } => code,
            AppError::InvalidRequest(_) => "invalid_request",
            AppError::UnsupportedMediaType => "unsupported_media_type",
            AppError::PayloadTooLarge { .. } => "payload_too_large",
            AppError::MethodNotAllowed => "method_not_allowed",
            AppError::MisdirectedHost => "unknown_host",
            AppError::CrossSite => "cross_site_request",
            AppError::UntrustedProxyHeader => "forbidden",
            AppError::Unauthorized => "unauthorized",
            AppError::RateLimited { .. } => "rate_limited",
            AppError::TooManySignIns { .. } => "too_many_sign_ins",
            AppError::Busy { .. } => "busy",
            AppError::ModelNotConfigured(_) => "model_not_configured",
            AppError::SpendCapReached => "spend_cap_reached",
            AppError::SpendLedger(_) => "spend_ledger_unavailable",
            AppError::SharedState(_) => "shared_state_unavailable",
            AppError::PolicyNotLoaded { .. } => "policy_not_loaded",
            AppError::DatabaseBusy { .. } => "database_busy",
            AppError::Model(_) => "model_unavailable",
            AppError::AskTimeout(_) => "ask_timeout",
            AppError::Internal(_) => "internal_error",
        }
    }

    /// The sentence shown to the client.
    pub fn detail(&self) -> String {
        match self {
            AppError::BadRequest { detail, .. }
            | AppError::NotFound { detail, .. }
            | AppError::Forbidden { detail, .. }
            | AppError::Conflict { detail, .. } => detail.clone(),
            AppError::InvalidRequest(detail) => detail.clone(),
            AppError::UnsupportedMediaType => {
                "send the body as JSON with Content-Type: application/json".to_string()
            }
            AppError::PayloadTooLarge { limit } => {
                format!("the request body is larger than the limit of {limit} bytes")
            }
            AppError::MethodNotAllowed => {
                "this path does not take that method; GET /api/openapi.json lists the API"
                    .to_string()
            }
            // Neither names the host or origin the request came with, nor the ones allowed.
            AppError::MisdirectedHost => {
                "this server does not answer for the host name this request was sent to"
                    .to_string()
            }
            // One sentence for every failure: no token, a wrong one, a revoked one.
            AppError::Unauthorized => {
                "sign in, or send Authorization: Bearer TOKEN with a token from askdb users add"
                    .to_string()
            }
            AppError::CrossSite => {
                "a request from another site may not change or spend anything here".to_string()
            }
            // Neither the header, its value nor the proxies trusted.
            AppError::UntrustedProxyHeader => "askdb does not accept this request".to_string(),
            AppError::RateLimited { retry_after } => format!(
                "too many questions from this address; try again in {} s",
                retry_after.as_secs().max(1)
            ),
            AppError::TooManySignIns { retry_after } => format!(
                "too many failed sign-ins from this address; try again in {} s",
                retry_after.as_secs().max(1)
            ),
            AppError::Busy { retry_after } => format!(
                "askdb is answering as many questions as it allows at once; try again in {} s",
                retry_after.as_secs().max(1)
            ),
            AppError::ModelNotConfigured(how) => how.clone(),
            AppError::SpendCapReached => {
                "the model spend cap is reached, so no more questions can be answered until it is raised (ASKDB_SPEND_CAP_USD)"
                    .to_string()
            }
            AppError::SpendLedger(_) => {
                "the spend ledger cannot be written (ASKDB_SPEND_LEDGER, or the shared state of --state-url), so askdb makes no model call it could not count; the server log says why"
                    .to_string()
            }
            AppError::SharedState(_) => {
                "the state askdb's replicas share does not answer; try again shortly (the server log says why)"
                    .to_string()
            }
            // Not the policy's value: a policy given as a file is stored as its path.
            AppError::PolicyNotLoaded { .. } => {
                "this server has not loaded your access policy, so it answers nothing for you until the operator restarts it with the policy in place"
                    .to_string()
            }
            AppError::DatabaseBusy { retry_after } => format!(
                "every database connection is in use, so the statement did not run; try again in {} s",
                retry_after.as_secs().max(1)
            ),
            AppError::Model(error) => format!(
                "the model could not be asked ({}); try again later",
                error.kind()
            ),
            AppError::AskTimeout(limit) => format!(
                "no answer within {} s; try a simpler question or try again later",
                limit.as_secs()
            ),
            AppError::Internal(_) => {
                "askdb could not answer this request; the server log has the details".to_string()
            }
        }
    }

    /// Writes what the client is not told on the server's stderr (internal failures,
    /// the ledger's and the model's errors in full).
    pub fn log(&self) {
        match self {
            AppError::Internal(text) => eprintln!("askdb serve: internal error: {text}"),
            AppError::SpendLedger(text) => eprintln!("askdb serve: no model call: {text}"),
            AppError::SharedState(text) => eprintln!("askdb serve: shared state: {text}"),
            AppError::PolicyNotLoaded { user, policy } => eprintln!(
                "askdb serve: user {user:?} refused: its policy {policy:?} is not loaded by this \
                 server (added after it started, or its file could not be read then: see the \
                 start of this log); restart it with the policy file in place"
            ),
            AppError::Model(error) => eprintln!("askdb serve: model call failed: {error}"),
            _ => {}
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            AppError::RateLimited { retry_after }
            | AppError::TooManySignIns { retry_after }
            | AppError::Busy { retry_after }
            | AppError::DatabaseBusy { retry_after } => Some(*retry_after),
            _ => None,
        }
    }

    /// A question the agent refused before asking anything, or a failure of the ask.
    pub fn from_agent(error: AgentError) -> AppError {
        match error {
            AgentError::EmptyQuestion => empty_question(),
            AgentError::QuestionTooLong(length) => question_too_long(length),
            AgentError::Model(LlmError::SpendCapReached { .. }) => AppError::SpendCapReached,
            AgentError::Model(error @ LlmError::Ledger(_)) => {
                AppError::SpendLedger(error.to_string())
            }
            AgentError::Model(error) => AppError::Model(error),
            AgentError::Gate(error) => AppError::Internal(format!("database: {error}")),
        }
    }
}

/// A question that cannot continue the conversation it names.
pub fn from_conversation(error: crate::conversation::ConversationError) -> AppError {
    use crate::conversation::ConversationError;
    let detail = error.to_string();
    match error {
        ConversationError::NotFound { .. } => AppError::NotFound {
            code: "unknown_conversation",
            detail,
        },
        ConversationError::Busy { .. } => AppError::Conflict {
            code: "conversation_busy",
            detail,
        },
        ConversationError::Full => AppError::Busy {
            retry_after: super::limits::BUSY_RETRY_AFTER,
        },
        ConversationError::Storage(text) => AppError::Internal(text),
    }
}

pub fn empty_question() -> AppError {
    AppError::BadRequest {
        code: "empty_question",
        detail: "the question is empty: write what you want to know".to_string(),
    }
}

pub fn question_too_long(length: usize) -> AppError {
    AppError::BadRequest {
        code: "question_too_long",
        detail: format!(
            "the question is {length} characters long; the limit is {MAX_QUESTION_CHARS}"
        ),
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        self.log();
        let body = json!({"error": self.code(), "detail": self.detail()});
        let mut response = (status, Json(body)).into_response();
        if matches!(self, AppError::Unauthorized) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(wait) = self.retry_after() {
            // Whole seconds, rounded up: a client that waits exactly this long succeeds.
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            if let Ok(value) = HeaderValue::from_str(&seconds.max(1).to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

/// The users could not be read: the shared table's outage is the shared state's 503,
/// like a session's; a users file that cannot be read is the server's own fault.
impl From<crate::users::UsersError> for AppError {
    fn from(error: crate::users::UsersError) -> AppError {
        match error {
            crate::users::UsersError::Shared(text) => AppError::SharedState(text),
            other => AppError::Internal(other.to_string()),
        }
    }
}

impl From<JsonRejection> for AppError {
    fn from(rejection: JsonRejection) -> AppError {
        match &rejection {
            JsonRejection::JsonSyntaxError(_) => AppError::BadRequest {
                code: "malformed_json",
                detail: rejection.body_text(),
            },
            JsonRejection::JsonDataError(_) => AppError::InvalidRequest(rejection.body_text()),
            JsonRejection::MissingJsonContentType(_) => AppError::UnsupportedMediaType,
            _ if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                // The limit itself is filled in by the handler's caller; the
                // rejection does not carry it.
                AppError::PayloadTooLarge { limit: 0 }
            }
            _ => AppError::BadRequest {
                code: "unreadable_body",
                detail: rejection.body_text(),
            },
        }
    }
}

/// The API's JSON body extractor: axum's `Json`, with rejections as [`AppError`].
pub struct ApiJson<T>(pub T);

/// The body limit, stored in the router's state so a 413 can say what it is.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limit = request.extensions().get::<BodyLimit>().copied();
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => match AppError::from(rejection) {
                AppError::PayloadTooLarge { .. } => Err(AppError::PayloadTooLarge {
                    limit: limit.map_or(0, |BodyLimit(bytes)| bytes),
                }),
                other => Err(other),
            },
        }
    }
}
