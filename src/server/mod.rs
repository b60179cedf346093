//! `askdb serve`: the HTTP API and the one-page web UI, both served by the binary.
//!
//! | route | does |
//! |---|---|
//! | `POST /api/ask` | `{question, mode, explain?, conversation_id?}` -> the agent's full result ([`crate::agent::AgentResult`]) with its `conversation_id` and `turn`; a known `conversation_id` makes the question a follow-up (404 when unknown, expired or another user's, 409 while it answers another) |
//! | `POST /api/ask/stream` | the same body (a `conversation_id` too) -> server-sent events: a `step` per agent step as it happens, then `result` (the same JSON as `POST /api/ask`) or `error` ([`stream`]) |
//! | `POST /api/sql` | `{sql}` -> the gate's `run_query` result (rows or a structured error) |
//! | `GET /api/schema` | tables with descriptions, row counts and columns |
//! | `GET /api/eval` | the newest committed evaluation summary, verbatim (404 when none) |
//! | `GET /api/local-model` | the local model's phase, download bytes and rate, load time ([`crate::local_model`]); 404 when another model is configured |
//! | `POST /api/local-model/start` | starts it in the background (202); once it answers, questions go to it |
//! | `GET /api/health` | read-only proven by a refused write, database, model, tables, the query log, schema drift, the trace collector |
//! | `GET /metrics` | counters in the Prometheus text format ([`metrics`]) |
//! | `GET /api/examples` | the database's verified examples, set-aside ones with the reason ([`examples`]) |
//! | `POST /api/examples` | `{question, sql, verified_by, notes?}`: a person saves an example; its SQL must pass the gate (201) |
//! | `DELETE /api/examples/{id}` | removes one (204) |
//! | `POST /api/answers/wrong` | `{question, sql?, examples, marked_by}`: a person marks an answer wrong; recorded with the verified examples it used, never saving one (201) |
//! | `GET /api/session` | `{sign_in, user}`: whether the page must sign in, and as whom ([`session`]) |
//! | `POST /api/session` | `{token}` -> an HttpOnly, SameSite=Strict session cookie the API then takes as it takes the token |
//! | `DELETE /api/session` | signs out (204) |
//! | `GET /api/openapi.json` | the OpenAPI description of the above |
//! | `GET /` and `/assets/*` | the page, its script, styles and the vendored Chart.js |
//!
//! Before any route, [`access`] refuses a Host the server does not answer for (421: a
//! DNS-rebinding page) and a POST a browser sends from another site (403), and once a
//! user exists ([`crate::users`]) a request without a live bearer token or session cookie
//! (401, health, the page and its sign-in aside); listening beyond loopback needs a user
//! or `--open-to-anyone` (decision 0022). Behind an authenticating reverse proxy
//! (`--trusted-proxy`), the user its header names signs in instead, from its addresses
//! alone (decision 0072).
//!
//! Like every other caller, the server reaches the database only through the
//! [`Gate`] and the model only through [`ModelClient::call`] (inside the agent). Bad input
//! gets a 4xx JSON error ([`error::AppError`]); a per-address token bucket and a cap on
//! questions in flight protect the model budget and answer 429/503 at once rather than
//! queueing ([`limits`]). Without a model the page and every route but `/api/ask` work, and
//! when none is configured the server offers to start the local model itself.

pub mod access;
pub mod api;
pub mod assets;
pub mod config;
pub mod error;
pub mod eval;
pub mod examples;
pub mod health;
pub mod limits;
pub mod metrics;
pub mod monitor;
pub mod openapi;
pub mod session;
pub mod steps;
pub mod stream;
pub mod team;
pub mod warm_up;

#[cfg(test)]
mod replica_tests;
#[cfg(test)]
mod team_tests;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Router};
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;

use crate::agent::{Agent, AgentError};
use crate::conversation::memory::InMemoryStore;
use crate::conversation::ConversationStore;
use crate::examples::{ExampleStore, SqliteExampleStore};
use crate::gate::Gate;
use crate::llm::{LlmError, ModelClient, ProviderConfig, SpendLedger};
use crate::local_model::{LocalModel, LocalModelStatus, ReadyModel};
use crate::querylog::QueryLog;
use crate::telemetry::Telemetry;
pub use config::{ServeArgs, ServerConfig};
use error::{AppError, BodyLimit};
use health::ModelCheck;
use limits::{AskSlots, RateLimiter};
use metrics::Metrics;
use monitor::{DriftStatus, QueryLogSetting};

/// How long past the ask timeout a shared reservation waits for its settlement before
/// it counts as spent: a question's last call ends by the timeout.
const RESERVATION_MARGIN: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether questions can be answered, and if not, what to tell the user.
enum ModelSetup {
    Ready(Arc<Agent>),
    Missing(String),
}

struct Shared {
    gate: Gate,
    /// Replaced once, when the local model this server started becomes ready.
    model: std::sync::RwLock<ModelSetup>,
    /// The local model this server offers (no provider configured) or was asked to use
    /// (`--local-model`); None when another model is configured.
    local_model: Option<Arc<LocalModel>>,
    /// The endpoint of the local model questions go to, once one was installed.
    local_model_url: tokio::sync::Mutex<Option<String>>,
    config: ServerConfig,
    /// The server's pace: per signed-in user, else per address; this process's
    /// buckets, or the replicas' shared ones.
    rate: Arc<dyn limits::Pace>,
    slots: AskSlots,
    /// The last model check, reused for [`health::MODEL_CHECK_TTL`]. An async mutex so
    /// concurrent health requests wait for one check instead of making several calls.
    model_check: tokio::sync::Mutex<Option<ModelCheck>>,
    /// Set only by tests (see [`AppState::substitute_read_only_probe`]).
    read_only_substitute: OnceLock<bool>,
    /// The query log's writer, or why there is none.
    query_log: Result<QueryLog, String>,
    metrics: Metrics,
    /// The tracer every question's trace is built with.
    telemetry: Telemetry,
    /// The last drift check ([`monitor::check_drift`]).
    drift: std::sync::Mutex<DriftStatus>,
    /// Where the database's verified examples are kept, when they are used.
    examples: Option<Arc<dyn ExampleStore>>,
    /// The model's first look at the schema at start ([`warm_up_in_background`]).
    warm_up: warm_up::WarmUp,
    /// The conversations questions continue.
    conversations: Arc<dyn ConversationStore>,
    /// The page's sign-in sessions and the failed sign-ins per address.
    sessions: Arc<session::Sessions>,
    /// The users' policies: a narrowed gate and agent each (decision 0076).
    team: team::Team,
}

/// Where the server keeps what outlives a question: its conversations and, when it uses
/// them, its verified examples.
pub struct Stores {
    pub conversations: Arc<dyn ConversationStore>,
    pub examples: Option<Arc<dyn ExampleStore>>,
}

impl Stores {
    /// The stores `config` asks for: with `--state-url`, the ones every replica shares in
    /// `askdb_state` (decision 0080), else [`Stores::of_one_process`].
    pub fn for_config(config: &ServerConfig) -> Stores {
        match &config.state {
            Some(shared) => Stores {
                conversations: Arc::new(
                    crate::conversation::postgres::PostgresConversationStore::new(
                        shared.pool().clone(),
                        config.conversations,
                    )
                    .with_lease(config.ask_timeout + RESERVATION_MARGIN),
                ),
                examples: Some(Arc::new(
                    crate::examples::postgres::PostgresExampleStore::new(shared.pool().clone()),
                )),
            },
            None => Stores::of_one_process(config),
        }
    }

    /// One process's own: conversations in its memory, examples in the SQLite file
    /// `--examples` names (none without it).
    pub fn of_one_process(config: &ServerConfig) -> Stores {
        Stores {
            conversations: Arc::new(InMemoryStore::new(config.conversations)),
            examples: config
                .examples
                .as_ref()
                .map(|path| Arc::new(SqliteExampleStore::new(path)) as Arc<dyn ExampleStore>),
        }
    }
}

/// Everything the handlers share. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    shared: Arc<Shared>,
}

impl AppState {
    /// The state over one database and the model the environment configured, or the
    /// reason there is none (`model` is what [`ModelClient::from_config`] returned):
    /// without a model, `/api/ask` answers 503 with that reason and how to fix it.
    /// Builds the agent's schema cards and linking index once, here.
    pub async fn new(
        gate: Gate,
        model: Result<ModelClient, LlmError>,
        config: ServerConfig,
    ) -> Result<AppState, ServeError> {
        // Offered only when nothing is configured: a configuration that does not work
        // is the user's to fix, not to replace silently.
        let local_model = match &model {
            Err(LlmError::NotConfigured) => Some(LocalModel::new(crate::home::data_dir())),
            _ => None,
        };
        AppState::with_local_model(gate, model, local_model, config).await
    }

    /// The state with this local model offered (`model` is then usually
    /// `Err(NotConfigured)`); what `--local-model` and the tests build.
    pub async fn with_local_model(
        gate: Gate,
        model: Result<ModelClient, LlmError>,
        local_model: Option<Arc<LocalModel>>,
        config: ServerConfig,
    ) -> Result<AppState, ServeError> {
        let stores = Stores::for_config(&config);
        AppState::with_stores(gate, model, local_model, config, stores).await
    }

    /// The state keeping its conversations and verified examples in `stores`: this
    /// process's own ([`Stores::of_one_process`]) or ones several replicas share
    /// (`conversation::postgres`, `examples::postgres`; decision 0080).
    pub async fn with_stores(
        gate: Gate,
        model: Result<ModelClient, LlmError>,
        local_model: Option<Arc<LocalModel>>,
        config: ServerConfig,
        stores: Stores,
    ) -> Result<AppState, ServeError> {
        let Stores {
            conversations,
            examples,
        } = stores;
        // Every policy narrows the gate once, here: one that would widen the notes stops
        // the server from starting.
        // With replicas, the ledger, the pace and the sessions are the shared state's,
        // chosen here once; no request path knows which (decision 0079).
        let model = match (&config.state, model) {
            (Some(shared), Ok(client)) => {
                let cap = client.ledger().cap_usd();
                let ttl = config.ask_timeout + RESERVATION_MARGIN;
                let store = crate::state::ledger::PgLedger::new(shared.clone(), ttl);
                Ok(client.with_ledger(Arc::new(SpendLedger::shared(Arc::new(store), cap))))
            }
            (_, model) => model,
        };
        let rate: Arc<dyn limits::Pace> = match &config.state {
            Some(shared) => Arc::new(limits::SharedPace::new(
                crate::state::pace::SharedBuckets::new(shared.clone()),
                config.asks_per_minute,
            )),
            None => Arc::new(RateLimiter::<limits::Asker>::new(config.asks_per_minute)),
        };
        let sessions = match &config.state {
            Some(shared) => session::Sessions::with_store(Arc::new(
                crate::state::sign_in::SharedSignIn::new(shared.clone()),
            )),
            None => session::Sessions::default(),
        };
        let spend_cap = model.as_ref().ok().map(|client| client.ledger().cap_usd());
        let team = team::Team::build(&gate, &config.policies, config.asks_per_minute, spend_cap)?;
        if let Ok(client) = &model {
            team.build_agents(client).await?;
        }
        let model = match model {
            Ok(client) => ModelSetup::Ready(Arc::new(with_examples(
                Agent::new(gate.clone(), client).await?,
                &examples,
            ))),
            Err(error) => ModelSetup::Missing(not_configured_help(&error, local_model.is_some())),
        };
        let query_log = match &config.query_log {
            QueryLogSetting::On(target) => Ok(QueryLog::start(target.clone())),
            QueryLogSetting::Off(reason) => Err(reason.clone()),
        };
        let telemetry = Telemetry::start(config.telemetry.clone());
        Ok(AppState {
            shared: Arc::new(Shared {
                rate,
                slots: AskSlots::new(config.max_concurrent_asks),
                gate,
                model: std::sync::RwLock::new(model),
                local_model,
                local_model_url: tokio::sync::Mutex::new(None),
                config,
                model_check: tokio::sync::Mutex::new(None),
                read_only_substitute: OnceLock::new(),
                query_log,
                metrics: Metrics::default(),
                telemetry,
                drift: std::sync::Mutex::new(DriftStatus::default()),
                warm_up: warm_up::WarmUp::default(),
                conversations,
                examples,
                sessions: Arc::new(sessions),
                team,
            }),
        })
    }

    /// Test hook: makes the health check report this result instead of running the
    /// write probe (`false`: as if the database had accepted the write). Reachable only
    /// from Rust, never from flags or the environment; the health details say that the
    /// result was substituted. A second call is ignored.
    #[doc(hidden)]
    pub fn substitute_read_only_probe(&self, refused: bool) {
        let _ = self.shared.read_only_substitute.set(refused);
    }

    pub fn gate(&self) -> &Gate {
        &self.shared.gate
    }

    /// Where verified examples are kept, when this server uses them.
    pub fn examples(&self) -> Option<&Arc<dyn ExampleStore>> {
        self.shared.examples.as_ref()
    }

    /// The page's sign-in sessions.
    pub fn sessions(&self) -> &session::Sessions {
        &self.shared.sessions
    }

    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    /// The query log's writer, when questions are logged.
    pub fn query_log(&self) -> Option<&QueryLog> {
        self.shared.query_log.as_ref().ok()
    }

    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// The tracer (off unless an OTLP endpoint is configured).
    pub fn telemetry(&self) -> &Telemetry {
        &self.shared.telemetry
    }

    /// The last drift check's outcome.
    pub fn drift_status(&self) -> DriftStatus {
        match self.shared.drift.lock() {
            Ok(status) => status.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Checks drift once now (when a watch is configured), then every `every` in the
    /// background for as long as the runtime lives.
    pub async fn start_drift_watch(&self) {
        let Some(watch) = self.config().drift.clone() else {
            return;
        };
        self.check_drift_now(&watch).await;
        if watch.every.is_zero() {
            return;
        }
        let state = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(watch.every);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                state.check_drift_now(&watch).await;
            }
        });
    }

    async fn check_drift_now(&self, watch: &monitor::DriftWatch) {
        let status = monitor::check_drift(watch).await;
        if status.drifted || status.error.is_some() {
            eprintln!("askdb serve: schema drift check: {}", status.detail);
        }
        match self.shared.drift.lock() {
            Ok(mut slot) => *slot = status,
            Err(poisoned) => *poisoned.into_inner() = status,
        }
    }

    fn with_model<T>(&self, f: impl FnOnce(&ModelSetup) -> T) -> T {
        match self.shared.model.read() {
            Ok(model) => f(&model),
            Err(poisoned) => f(&poisoned.into_inner()),
        }
    }

    fn agent(&self) -> Result<Arc<Agent>, AppError> {
        self.with_model(|model| match model {
            ModelSetup::Ready(agent) => Ok(Arc::clone(agent)),
            ModelSetup::Missing(help) => Err(AppError::ModelNotConfigured(
                match self.local_model_status() {
                    Some(status) if status.phase.is_starting() => format!(
                        "The local model is starting: {} Ask again when it is ready.",
                        status.message
                    ),
                    _ => help.clone(),
                },
            )),
        })
    }

    /// The gate a request is served through: its user's policy's narrowed gate, or the
    /// server's own when the user has no policy (or nobody signed in).
    pub fn gate_for(&self, user: Option<&access::SignedIn>) -> Result<Gate, AppError> {
        Ok(match self.shared.team.policed(user)? {
            Some(policed) => policed.gate.clone(),
            None => self.gate().clone(),
        })
    }

    /// The agent a request's question goes to: its user's policy's, or the server's.
    fn agent_for(&self, policy: Option<&str>) -> Result<Arc<Agent>, AppError> {
        let agent = self.agent()?;
        match policy {
            None => Ok(agent),
            Some(policy) => self.shared.team.agent(policy).ok_or_else(|| {
                AppError::Internal(format!("the agent of the policy {policy:?} is not ready"))
            }),
        }
    }

    fn model_client(&self) -> Option<ModelClient> {
        self.with_model(|model| match model {
            ModelSetup::Ready(agent) => Some(agent.client().clone()),
            ModelSetup::Missing(_) => None,
        })
    }

    fn model_missing_reason(&self) -> Option<String> {
        self.with_model(|model| match model {
            ModelSetup::Ready(_) => None,
            ModelSetup::Missing(help) => Some(help.clone()),
        })
    }

    /// The local model this server offers or uses, if any.
    pub fn local_model(&self) -> Option<&Arc<LocalModel>> {
        self.shared.local_model.as_ref()
    }

    /// The local model's status, when this server offers one.
    pub fn local_model_status(&self) -> Option<LocalModelStatus> {
        self.local_model().map(|model| model.status())
    }

    /// Starts the local model (or waits for the start under way) and, once it answers,
    /// makes it the model questions go to. Err: why it could not.
    pub async fn start_local_model(&self) -> Result<(), String> {
        let Some(local) = self.local_model() else {
            return Err("a model is configured, so the local model is not offered".to_string());
        };
        let ready = local.start().await?;
        // One agent per running model: a restarted model (a new port) gets a new one.
        let mut installed = self.shared.local_model_url.lock().await;
        if installed.as_deref() == Some(ready.base_url.as_str()) {
            return Ok(());
        }
        let client = local_model_client(&ready).map_err(|error| error.to_string())?;
        let agent = Agent::new(self.gate().clone(), client)
            .await
            .map_err(|error| format!("the agent could not be prepared: {error}"))?;
        self.shared
            .team
            .build_agents(agent.client())
            .await
            .map_err(|error| {
                format!("the agents of the users' policies could not be prepared: {error}")
            })?;
        let agent = with_examples(agent, &self.shared.examples);
        match self.shared.model.write() {
            Ok(mut model) => *model = ModelSetup::Ready(Arc::new(agent)),
            Err(poisoned) => *poisoned.into_inner() = ModelSetup::Ready(Arc::new(agent)),
        }
        *installed = Some(ready.base_url.clone());
        drop(installed);
        // The cached health check was about no model at all.
        *self.shared.model_check.lock().await = None;
        if self.config().warm_up {
            warm_up_in_background(self);
        }
        Ok(())
    }
}

/// The agent with the server's verified examples, when it has them.
fn with_examples(agent: Agent, examples: &Option<Arc<dyn ExampleStore>>) -> Agent {
    match examples {
        Some(store) => agent.with_examples(Arc::clone(store)),
        None => agent,
    }
}

/// The client of a local model that answers at `ready`: the OpenAI-compatible provider,
/// with the rest of the model settings (timeouts, attempts, cache) from the environment.
fn local_model_client(ready: &ReadyModel) -> Result<ModelClient, LlmError> {
    let config = ProviderConfig::from_lookup(|name| match name {
        "ASKDB_PROVIDER" => Some("openai".to_string()),
        "ASKDB_BASE_URL" => Some(ready.base_url.clone()),
        "ASKDB_MODEL" => Some(ready.model.clone()),
        // A key meant for a hosted service is never sent to the local server.
        "OPENAI_API_KEY" | "OPENAI_API_KEYS" => None,
        other => std::env::var(other).ok(),
    })?;
    ModelClient::from_config(&config)
}

/// What the user is told when no model can be asked: why, and how to get one
/// (`local_offered`: this server can start the local model itself).
pub fn not_configured_help(error: &LlmError, local_offered: bool) -> String {
    let why = match error {
        LlmError::NotConfigured => "No model is configured".to_string(),
        other => format!("The model configuration does not work ({other})"),
    };
    let local = if local_offered {
        "start the local model here (the button beside this message, or `askdb serve \
         --local-model`: a one-time download of about 1.1 GB, no key)"
    } else {
        "restart `askdb serve --local-model` for the local one"
    };
    format!(
        "{why}, so askdb cannot answer questions; the schema browser and the SQL console still \
         work. To ask questions, {local}; or restart `askdb serve` with Anthropic \
         (ASKDB_PROVIDER=anthropic and ANTHROPIC_API_KEY) or an OpenAI-compatible server \
         (ASKDB_PROVIDER=openai, ASKDB_BASE_URL, ASKDB_MODEL and OPENAI_API_KEY). The \
         README's \"Web UI and HTTP API\" section has examples."
    )
}

/// The whole application as if it listened on the configured address: API routes, the
/// page and its assets, the JSON fallbacks, the body limit, the host and cross-site
/// checks, security headers and the panic guard. Tested with `oneshot`, no socket.
pub fn app(state: AppState) -> Router {
    let listen = state.config().addr;
    app_on(state, listen)
}

/// The application listening on `listen` (the real port when the configured one is 0):
/// the host names it answers for are this address's ([`access::Access`]).
pub fn app_on(state: AppState, listen: SocketAddr) -> Router {
    let access = Arc::new(
        access::Access::new(listen, &state.config().allowed_hosts)
            .with_users(state.config().users.clone())
            .with_sessions(Arc::clone(&state.shared.sessions))
            .with_proxy(state.config().proxy.clone()),
    );
    let body_limit = state.config().max_body_bytes;
    let mut router = Router::new()
        .route("/api/ask", post(api::ask))
        .route("/api/ask/stream", post(stream::ask_stream))
        .route("/api/sql", post(api::sql))
        .route("/api/schema", get(api::schema))
        .route("/api/eval", get(api::eval))
        .route("/api/health", get(api::health))
        .route("/api/local-model", get(api::local_model_status))
        .route("/api/local-model/start", post(api::start_local_model))
        .route("/api/examples", get(examples::list).post(examples::save))
        .route("/api/examples/{id}", delete(examples::remove))
        .route("/api/answers/wrong", post(examples::mark_wrong))
        .route(
            "/api/session",
            get(session::status)
                .post(session::sign_in)
                .delete(session::sign_out),
        )
        .route("/api/openapi.json", get(api::openapi))
        .route("/metrics", get(api::metrics));
    for asset in assets::ASSETS {
        router = router.route(asset.path, get(move || async move { assets::serve(asset) }));
    }
    router
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(Extension(BodyLimit(body_limit)))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(axum::middleware::from_fn_with_state(access, access::guard))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(state)
}

/// A handler that panicked answers like any other internal error instead of dropping
/// the connection.
fn panic_response(_panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    AppError::Internal("a request handler panicked".to_string()).into_response()
}

/// Headers on every response: no sniffing, no framing, no referrer, and a content
/// security policy that allows only the page's own files (no inline script, no CDN).
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let fixed = [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
             frame-ancestors 'none'",
        ),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Why `askdb serve` could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
    #[error("cannot prepare the agent: {0}")]
    Agent(#[from] AgentError),
    #[error("{0}")]
    Policy(#[from] crate::gate::PolicyError),
    #[error("the server stopped: {0}")]
    Io(#[from] std::io::Error),
}

/// `askdb serve`: takes the model from the environment, listens on `config.addr`,
/// prints `askdb serve: listening on http://ADDR/` on stdout (the real port when the
/// configured one is 0) and serves until Ctrl-C or SIGTERM.
pub async fn run(gate: Gate, config: ServerConfig) -> Result<(), ServeError> {
    let addr = config.addr;
    let warm_up = config.warm_up;
    let start_local = config.local_model;
    let state = if start_local {
        if let Ok(provider) = std::env::var("ASKDB_PROVIDER") {
            if !provider.trim().is_empty() {
                eprintln!(
                    "askdb serve: --local-model: answering with the local model, not ASKDB_PROVIDER={provider}"
                );
            }
        }
        let local = LocalModel::new(crate::home::data_dir());
        AppState::with_local_model(gate, Err(LlmError::NotConfigured), Some(local), config).await?
    } else {
        let model = ProviderConfig::from_env().and_then(|config| ModelClient::from_config(&config));
        AppState::new(gate, model, config).await?
    };
    // The first drift check runs before the server answers, so health never reports a
    // schema it has not compared.
    state.start_drift_watch().await;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| ServeError::Bind { addr, error })?;
    let local = listener.local_addr()?;
    println!("askdb serve: listening on http://{local}/");
    eprintln!(
        "askdb serve: database {} ({} tables)",
        state.gate().label(),
        state.gate().list_tables().len()
    );
    match (state.model_client(), state.model_missing_reason()) {
        (Some(client), _) => eprintln!(
            "askdb serve: model {} {}",
            client.provider().name(),
            client.provider().model()
        ),
        (None, _) if start_local => eprintln!(
            "askdb serve: starting the local model (data in {}); the page works meanwhile",
            crate::home::data_dir().join("local-model").display()
        ),
        (None, Some(reason)) => eprintln!("askdb serve: {reason}"),
        (None, None) => {}
    }
    match (state.query_log(), &state.config().query_log) {
        (Some(log), _) => eprintln!("askdb serve: query log {}", log.target().describe()),
        (None, QueryLogSetting::Off(reason)) => eprintln!("askdb serve: no query log: {reason}"),
        (None, QueryLogSetting::On(_)) => {}
    }
    let telemetry = state.telemetry().clone();
    match (telemetry.config().traces_url(), &telemetry.config().problem) {
        (Some(url), _) => eprintln!(
            "askdb serve: traces to {}",
            crate::text::redact_password(&url)
        ),
        (None, Some(problem)) => eprintln!("askdb serve: no traces: {problem}"),
        (None, None) => {}
    }
    if warm_up {
        warm_up_in_background(&state);
    }
    if start_local {
        start_local_model_in_background(&state);
    }
    let running = state.clone();
    serve(listener, state, shutdown_signal()).await?;
    // The model askdb started ends with askdb (one it found running is left alone).
    if let Some(local) = running.local_model() {
        local.stop().await;
    }
    // The spans of the last questions; a collector that is down cannot hold the exit.
    telemetry.flush(std::time::Duration::from_secs(5)).await;
    Ok(())
}

/// Starts the local model without holding anyone up: its progress goes to stderr as it
/// changes (the page reads the same status from GET /api/local-model), and once it
/// answers, questions go to it. A start already under way is joined, not repeated.
pub fn start_local_model_in_background(state: &AppState) {
    let Some(local) = state.local_model() else {
        return;
    };
    if local.status().phase.is_starting() {
        return;
    }
    let state = state.clone();
    tokio::spawn(async move {
        let progress = tokio::spawn(print_local_model_progress(state.clone()));
        let outcome = state.start_local_model().await;
        progress.abort();
        match (outcome, state.local_model_status()) {
            (Ok(()), Some(status)) => eprintln!(
                "askdb serve: the local model {} answers at {} ({:.0} s); ask in the page",
                status.model.unwrap_or_default(),
                status.base_url.unwrap_or_default(),
                status.total_seconds.unwrap_or(0.0)
            ),
            (Ok(()), None) => {}
            (Err(error), _) => eprintln!("askdb serve: the local model could not start: {error}"),
        }
    });
}

/// Prints the local model's status line when its phase changes, and every few seconds
/// while it downloads or loads.
async fn print_local_model_progress(state: AppState) {
    let mut last_phase = None;
    let mut last_print = std::time::Instant::now();
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let Some(status) = state.local_model_status() else {
            return;
        };
        if !status.phase.is_starting() {
            return;
        }
        let changed = last_phase != Some(status.phase);
        if changed || last_print.elapsed() >= std::time::Duration::from_secs(5) {
            eprintln!("askdb serve: {}", status.message);
            last_phase = Some(status.phase);
            last_print = std::time::Instant::now();
        }
    }
}

/// Has a local model read the database's prompt prefix while the server already
/// answers, so the first question does not wait for it cold ([`warm_up`]). Only for
/// unmetered providers: a hosted model would bill the call, and its prompt cache expires
/// in minutes.
fn warm_up_in_background(state: &AppState) {
    let Ok(agent) = state.agent() else { return };
    if agent.client().provider().is_metered() {
        eprintln!(
            "askdb serve: {}none: a metered model is never warmed (every read is billed)",
            warm_up::LOG_PREFIX
        );
        return;
    }
    // Taken before the task starts, so no question slips in ahead of a restore.
    let Some(restoring) = state.shared.warm_up.begin() else {
        return;
    };
    let state = state.clone();
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        let end = state.shared.warm_up.run(&agent, restoring).await;
        eprintln!("askdb serve: {}", warm_up::log_line(&end, started));
    });
}

impl AppState {
    /// The warm-up's state: a question asks it whether the schema is still being read.
    pub(crate) fn warm_up(&self) -> &warm_up::WarmUp {
        &self.shared.warm_up
    }
}

/// Serves the application on a bound listener until `shutdown` completes; requests in
/// flight are finished first. Client addresses reach the handlers for the rate limit.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listen = listener.local_addr()?;
    axum::serve(
        listener,
        app_on(state, listen).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown_signal() {
    let interrupt = async {
        // Without a handler there is nothing to wait for; SIGTERM may still come.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
    eprintln!("askdb serve: shutting down after the requests in flight");
}
