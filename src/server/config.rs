//! The settings of `askdb serve`: the flags and environment variables (parsed by clap in
//! two stages: raw [`ServeArgs`] -> a checked [`ServerConfig`]) and their defaults. The
//! database comes from the global `--db`; the model from `ASKDB_PROVIDER` and friends
//! ([`crate::llm::config`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Asks per client (IP address) per minute, by default.
pub const DEFAULT_ASKS_PER_MINUTE: u32 = 20;
/// Questions answered at the same time, by default: each holds model calls in flight.
pub const DEFAULT_MAX_CONCURRENT_ASKS: usize = 2;
/// The longest one question may take, by default, before the client gets a 504. A
/// small local model on two cores needs minutes for three attempts and an explanation.
pub const DEFAULT_ASK_TIMEOUT_SECS: u64 = 600;
/// The largest request body accepted, by default (a question is at most 2,000
/// characters; SQL for the console rarely passes a few kilobytes).
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024;

/// `askdb serve` flags; each also reads an environment variable.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (the address is printed). An
    /// address beyond this machine (0.0.0.0, a LAN address) needs --open-to-anyone.
    #[arg(long, env = "ASKDB_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Listen on an address beyond this machine although askdb has no sign-in: anyone
    /// who reaches the port can ask questions (spending the model budget) and run SQL.
    #[arg(long, env = "ASKDB_OPEN_TO_ANYONE", default_value_t = false)]
    pub open_to_anyone: bool,
    /// Another host name the server answers for (NAME or NAME:PORT; without a port, any
    /// port), repeatable or comma-separated. Always answered: the listening address,
    /// localhost, 127.0.0.1 and [::1] on the listening port. Others are refused (421).
    #[arg(
        long = "allowed-host",
        env = "ASKDB_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<super::access::AllowedHost>,
    /// An authenticating reverse proxy's address or network (10.0.0.5, 10.0.0.0/24),
    /// repeatable or comma-separated: a request from it that names a user in
    /// --proxy-user-header signs in as that user, who must exist (`askdb users add
    /// NAME`). The header from any other address is refused (403).
    #[arg(
        long = "trusted-proxy",
        env = "ASKDB_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<super::access::TrustedProxy>,
    /// The header a trusted proxy names the signed-in user in (oauth2-proxy's
    /// X-Forwarded-User; X-Auth-Request-User with its --set-xauthrequest).
    #[arg(long, env = "ASKDB_PROXY_USER_HEADER", default_value = super::access::DEFAULT_PROXY_USER_HEADER)]
    pub proxy_user_header: String,
    /// Questions one client (IP address) may ask per minute; 0 switches the limit off.
    #[arg(long, env = "ASKDB_ASKS_PER_MINUTE", default_value_t = DEFAULT_ASKS_PER_MINUTE)]
    pub asks_per_minute: u32,
    /// Questions answered at the same time; more get 503 with Retry-After.
    #[arg(long, env = "ASKDB_MAX_CONCURRENT_ASKS", default_value_t = DEFAULT_MAX_CONCURRENT_ASKS)]
    pub max_concurrent_asks: usize,
    /// Seconds one question may take before the client gets 504.
    #[arg(long, env = "ASKDB_ASK_TIMEOUT_SECS", default_value_t = DEFAULT_ASK_TIMEOUT_SECS)]
    pub ask_timeout_secs: u64,
    /// Largest request body in bytes; larger bodies get 413.
    #[arg(long, env = "ASKDB_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// A folder of evaluation summaries (GET /api/eval serves the newest summary.json
    /// below it, e.g. evals/runs). Default: the summaries published in evals/results when
    /// this binary was built, which it carries inside.
    #[arg(long, env = "ASKDB_EVAL_DIR")]
    pub eval_dir: Option<PathBuf>,
    /// Ask the model for a one-to-three sentence answer after the rows (one more call).
    #[arg(long, env = "ASKDB_EXPLAIN", default_value_t = true, action = clap::ArgAction::Set)]
    pub explain: bool,
    /// At start, have an unmetered (local) model read the schema prompt once, so the
    /// first question does not wait for the cold prompt.
    #[arg(long, env = "ASKDB_WARM_UP", default_value_t = true, action = clap::ArgAction::Set)]
    pub warm_up: bool,
    /// PostgreSQL databases: the log role's URL (`askdb_log`); without it no question is
    /// logged. SQLite databases log into askdb's data directory instead.
    #[arg(long, env = "ASKDB_LOG_DATABASE_URL", hide_env_values = true)]
    pub log_database_url: Option<String>,
    /// Write a query-log row per answered question.
    #[arg(long, env = "ASKDB_QUERY_LOG", default_value_t = true, action = clap::ArgAction::Set)]
    pub query_log: bool,
    /// The schema snapshot to check drift against (default: beside the notes file, else
    /// in askdb's data directory, where `askdb schema snapshot` writes it).
    #[arg(long, env = "ASKDB_SCHEMA_SNAPSHOT")]
    pub schema_snapshot: Option<PathBuf>,
    /// Seconds between drift checks (0: only the check at start).
    #[arg(long, env = "ASKDB_DRIFT_CHECK_SECS", default_value_t = super::monitor::DEFAULT_DRIFT_CHECK_SECS)]
    pub drift_check_secs: u64,
    /// Put prompt and reply text on the traces' generation spans (off: only models,
    /// tokens, cost and latency). Traces go where OTEL_EXPORTER_OTLP_ENDPOINT says.
    #[arg(long, env = "ASKDB_TRACE_CONTENT", default_value_t = false, action = clap::ArgAction::Set)]
    pub trace_content: bool,
    /// Start the local model at once and answer with it (Qwen2.5-Coder-1.5B on
    /// llama.cpp, no key): the first time installs llama.cpp's server and downloads the
    /// model (about 1.1 GB) into askdb's data directory, showing the progress here and in
    /// the page. askdb stops the model when it stops. Needs python3 with venv and pip.
    #[arg(long, env = "ASKDB_LOCAL_MODEL_START", default_value_t = false)]
    pub local_model: bool,
    /// Minutes a conversation is kept after its latest question; a follow-up after that
    /// gets 404 and starts over.
    #[arg(long, env = "ASKDB_CONVERSATION_TTL_MINS", default_value_t = DEFAULT_CONVERSATION_TTL_MINS)]
    pub conversation_ttl_mins: u64,
    /// Conversations held at once; past it a new one replaces the one idle longest.
    #[arg(long, env = "ASKDB_MAX_CONVERSATIONS", default_value_t = crate::conversation::DEFAULT_MAX_CONVERSATIONS)]
    pub max_conversations: usize,
    /// Several replicas acting as one: a PostgreSQL URL (the askdb_state role `askdb db
    /// setup` made) where the users, the spend ledger, the pace per asker and the
    /// sign-in sessions are kept for every replica (`askdb users --state-url` manages
    /// those users). Without it, all stay in this process and its users file.
    #[arg(long, env = "ASKDB_STATE_URL", hide_env_values = true)]
    pub state_url: Option<String>,
}

/// Minutes a conversation is kept after its latest question, by default.
pub const DEFAULT_CONVERSATION_TTL_MINS: u64 = crate::conversation::DEFAULT_TTL.as_secs() / 60;

/// Checked server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub addr: SocketAddr,
    /// Host names answered besides the listening address and loopback's
    /// ([`super::access::Access`]).
    pub allowed_hosts: Vec<super::access::AllowedHost>,
    /// The users (the users file, or with `--state-url` the replicas' shared table);
    /// once it holds a user, every route but health and the page needs a token. None:
    /// no sign-in (the in-process tests).
    pub users: Option<crate::users::Users>,
    /// The reverse proxy whose user header is believed, when one is trusted.
    pub proxy: Option<super::access::ProxySignIn>,
    /// 0: no per-client limit.
    pub asks_per_minute: u32,
    pub max_concurrent_asks: usize,
    pub ask_timeout: Duration,
    pub max_body_bytes: usize,
    /// None: the summaries built into the binary.
    pub eval_dir: Option<PathBuf>,
    /// The default of a request's `explain` field.
    pub explain: bool,
    /// Warm an unmetered model's prompt cache at start.
    pub warm_up: bool,
    /// Whether and where answered questions are logged (set by the CLI, which knows the
    /// database).
    pub query_log: super::monitor::QueryLogSetting,
    /// The drift watch, when the CLI configured one.
    pub drift: Option<super::monitor::DriftWatch>,
    /// Where traces go ([`crate::telemetry`]); off by default.
    pub telemetry: crate::telemetry::TelemetryConfig,
    /// Start the local model at once and use it, whatever ASKDB_PROVIDER says.
    pub local_model: bool,
    /// How long conversations live, how many are held, how many turns each keeps.
    pub conversations: crate::conversation::Limits,
    /// The verified examples' SQLite file (set by the CLI: askdb's data directory); None:
    /// questions use no examples and the examples routes answer 404.
    pub examples: Option<PathBuf>,
    /// The users' policies by the name their users store (decision 0076), read by the
    /// CLI at start; the server narrows its gate by each once.
    pub policies: std::collections::BTreeMap<String, crate::gate::UserPolicy>,
    /// The state replicas share (connected by the CLI from `--state-url`); None: the
    /// ledger, pace and sessions are this process's own.
    pub state: Option<crate::state::SharedState>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            allowed_hosts: Vec::new(),
            users: None,
            proxy: None,
            asks_per_minute: DEFAULT_ASKS_PER_MINUTE,
            max_concurrent_asks: DEFAULT_MAX_CONCURRENT_ASKS,
            ask_timeout: Duration::from_secs(DEFAULT_ASK_TIMEOUT_SECS),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            eval_dir: None,
            explain: true,
            warm_up: true,
            query_log: super::monitor::QueryLogSetting::default(),
            drift: None,
            telemetry: crate::telemetry::TelemetryConfig::off(),
            local_model: false,
            conversations: crate::conversation::Limits::default(),
            examples: None,
            policies: std::collections::BTreeMap::new(),
            state: None,
        }
    }
}

impl ServeArgs {
    /// The checked configuration, or a message naming the bad flag.
    /// `users`: the users (the file, or the shared table) and whether they sign anyone
    /// in; a server that signs users in may listen beyond loopback without
    /// `--open-to-anyone`.
    pub fn resolve(
        self,
        users: (crate::users::Users, crate::users::SignIn),
    ) -> Result<ServerConfig, String> {
        let (users, sign_in) = users;
        let signs_in = sign_in == crate::users::SignIn::Required;
        // With a shared state the users are its own, added with the same URL.
        let add_user = if self.state_url.is_some() {
            "askdb users --state-url URL add NAME"
        } else {
            "askdb users add NAME"
        };
        if !super::access::is_loopback_only(self.addr) && !self.open_to_anyone && !signs_in {
            return Err(format!(
                "--addr {addr} can be reached from other machines, and askdb serve has no \
                 users to sign in: anyone who reaches it could ask questions on your model \
                 budget and read the database. Listen on 127.0.0.1:{port} (the default), add \
                 a user with `{add_user}` (then every request needs its token), or \
                 pass --open-to-anyone (ASKDB_OPEN_TO_ANYONE=true) to listen on {addr} \
                 without sign-in anyway",
                addr = self.addr,
                port = self.addr.port(),
            ));
        }
        let proxy =
            super::access::ProxySignIn::new(self.trusted_proxies.clone(), &self.proxy_user_header)?;
        if proxy.is_some() && !signs_in {
            return Err(format!(
                "--trusted-proxy: the proxy names users askdb must know, and there are none \
                 yet; add each with `{add_user}` (the token it prints is not needed \
                 behind the proxy)"
            ));
        }
        if self.max_concurrent_asks == 0 {
            return Err(
                "--max-concurrent-asks must be at least 1 (ASKDB_MAX_CONCURRENT_ASKS)".to_string(),
            );
        }
        if self.ask_timeout_secs == 0 {
            return Err(
                "--ask-timeout-secs must be at least 1 (ASKDB_ASK_TIMEOUT_SECS)".to_string(),
            );
        }
        if self.max_body_bytes < 1024 {
            return Err(
                "--max-body-bytes must be at least 1024 (ASKDB_MAX_BODY_BYTES): a question alone can take 8 KB"
                    .to_string(),
            );
        }
        if self.conversation_ttl_mins == 0 || self.max_conversations == 0 {
            return Err(
                "--conversation-ttl-mins and --max-conversations must be at least 1 \
                 (ASKDB_CONVERSATION_TTL_MINS, ASKDB_MAX_CONVERSATIONS)"
                    .to_string(),
            );
        }
        Ok(ServerConfig {
            addr: self.addr,
            allowed_hosts: self.allowed_hosts,
            users: Some(users),
            proxy,
            asks_per_minute: self.asks_per_minute,
            max_concurrent_asks: self.max_concurrent_asks,
            ask_timeout: Duration::from_secs(self.ask_timeout_secs),
            max_body_bytes: self.max_body_bytes,
            eval_dir: self.eval_dir,
            explain: self.explain,
            warm_up: self.warm_up,
            query_log: super::monitor::QueryLogSetting::default(),
            drift: None,
            telemetry: crate::telemetry::TelemetryConfig {
                record_content: self.trace_content,
                ..crate::telemetry::TelemetryConfig::from_env()
            },
            local_model: self.local_model,
            conversations: crate::conversation::Limits {
                ttl: Duration::from_secs(self.conversation_ttl_mins.saturating_mul(60)),
                max_conversations: self.max_conversations,
                ..crate::conversation::Limits::default()
            },
            examples: None,
            policies: std::collections::BTreeMap::new(),
            state: None,
        })
    }
}
