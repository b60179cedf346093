//! The command line, in two stages as ripgrep does it: clap parses raw flags
//! ([`args`]), [`config`] resolves them into settings (a database URL, gate options,
//! typed modes), and each command here is a library call that returns an [`Output`]:
//! a `Serialize` report as JSON, the same report as text, and how the run ended. The
//! binary (`src/main.rs`) only parses, calls [`run`], prints and maps [`Exit`] to a
//! process exit code.

pub mod args;
pub mod chat;
pub mod config;
mod examples;
mod reports;
mod users;

use std::io::Read;
use std::path::Path;

use serde::Serialize;

use crate::agent::events::{AgentEvent, NoObserver, Observer};
use crate::agent::prompts;
use crate::agent::strategy::Strategy;
use crate::agent::{Agent, AgentError, AskOptions, Decision, Mode};
use crate::conversation::files::FileStore;
use crate::conversation::{ConversationError, ConversationId, ConversationStore, TurnLease};
use crate::database::DatabaseError;
use crate::eval::runner::{self, EvalError};
use crate::gate::{Gate, GateError};
use crate::linking::cards::build_cards;
use crate::linking::SchemaIndex;
use crate::llm::{CallLog, LlmError, ModelClient, ProviderConfig};
use args::{
    Cli, Command, DbCommand, DemoCommand, EvalCommand, LogCommand, ModelCommand, SchemaCommand,
    SqlCommand,
};
use config::Settings;
pub use reports::{ModelCheckReport, SetupView, SqlCheckReport, SqlCheckVerdict};

/// How a command ended; the binary maps it to the documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: the command did its job.
    Success,
    /// 1: a statement was refused by the guard or failed in the database (a structured
    /// error was printed), a question was given up, or a check failed (`schema drift`
    /// found drift).
    Refused,
    /// 3: askdb could not do its job (bad URL, unreachable database, unreadable file).
    Failure,
}

impl Exit {
    fn from_ok(ok: bool) -> Exit {
        if ok {
            Exit::Success
        } else {
            Exit::Refused
        }
    }
}

/// What a command produced: the report as JSON and as text, and how it ended.
#[derive(Debug, Clone)]
pub struct Output {
    pub json: serde_json::Value,
    pub text: String,
    pub exit: Exit,
}

impl Output {
    fn new(report: &impl Serialize, text: String, exit: Exit) -> Result<Output, CliError> {
        Ok(Output {
            json: serde_json::to_value(report)
                .map_err(|error| CliError::Report(error.to_string()))?,
            text,
            exit,
        })
    }

    /// A command that printed as it ran (`serve`, `mcp`, `sql check --batch`).
    fn done(exit: Exit) -> Output {
        Output {
            json: serde_json::Value::Null,
            text: String::new(),
            exit,
        }
    }
}

/// Why a command could not do its job (exit 3; clap's own usage errors are exit 2).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Database(#[from] DatabaseError),
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error(transparent)]
    Model(#[from] LlmError),
    #[error(transparent)]
    Eval(#[from] EvalError),
    #[error(transparent)]
    EvalGate(#[from] crate::eval::gate::EvalGateError),
    #[error(transparent)]
    Linking(#[from] crate::linking::eval::LinkingEvalError),
    #[error(transparent)]
    Setup(#[from] crate::admin::SetupError),
    #[error(transparent)]
    Demo(#[from] crate::demo::DemoError),
    #[error(transparent)]
    SharedData(#[from] crate::home::SharedDataMissing),
    #[error(transparent)]
    Server(#[from] crate::server::ServeError),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    #[error(transparent)]
    Mcp(#[from] crate::mcp::McpError),
    #[error(transparent)]
    Drift(#[from] crate::drift::DriftError),
    #[error(transparent)]
    QueryLog(#[from] crate::querylog::LogError),
    #[error(transparent)]
    Conversation(#[from] ConversationError),
    #[error(transparent)]
    Examples(#[from] crate::examples::ExampleError),
    #[error(transparent)]
    Users(#[from] crate::users::UsersError),
    #[error("the terminal failed: {0}")]
    Terminal(String),
    #[error("{0}")]
    Settings(String),
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("cannot write the report: {0}")]
    Report(String),
}

impl CliError {
    /// Bad flag values found while resolving settings: usage errors, like clap's.
    pub fn is_usage(&self) -> bool {
        matches!(self, CliError::Settings(_))
    }
}

fn read_file(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|error| CliError::Read {
        path: path.display().to_string(),
        error,
    })
}

/// Runs one parsed command line.
pub async fn run(cli: Cli) -> Result<Output, CliError> {
    if let Command::Completions { shell } = cli.command {
        return Ok(completions(shell));
    }
    let settings = Settings::resolve(&cli.global)?;
    match cli.command {
        Command::Schema { command } => {
            let notes = cli.global.notes.clone();
            schema(&settings.open_gate().await?, command, notes.as_deref()).await
        }
        Command::Log {
            command: LogCommand::Stats { from, user },
        } => log_stats(&settings, from, user).await,
        Command::Sql { command } => sql(&settings.open_gate().await?, command).await,
        Command::Demo {
            command: DemoCommand::Build { out },
        } => {
            crate::demo::write_sqlite(&out)?;
            Output::new(
                &serde_json::json!({"ok": true, "path": out}),
                format!("demo database written to {}\n", out.display()),
                Exit::Success,
            )
        }
        Command::Db {
            command:
                DbCommand::Setup {
                    admin_url,
                    database,
                    example_rls,
                },
        } => db_setup(admin_url, database, example_rls).await,
        Command::Ask {
            question,
            baseline,
            no_explain,
            strategy,
            quiet,
            conversation,
        } => {
            let strategy = config::parse_strategy(&strategy)?;
            // The conversation before the agent: an unknown id costs no model start.
            let lease = match conversation.as_deref() {
                None => None,
                Some(text) => {
                    let store: std::sync::Arc<dyn ConversationStore> = std::sync::Arc::new(
                        FileStore::in_data_dir(crate::conversation::Limits::default()),
                    );
                    let id = match text.trim() {
                        "new" => None,
                        id => Some(ConversationId::parse(id)?),
                    };
                    Some(TurnLease::begin(&store, id.as_ref(), None).await?)
                }
            };
            let agent = open_agent(&settings, strategy).await?;
            let options = ask_options(baseline, no_explain);
            let context = lease
                .as_ref()
                .map(|lease| lease.context().clone())
                .unwrap_or_default();
            let observer: &dyn Observer = if quiet { &NoObserver } else { &StepsOnStderr };
            let mut result = agent
                .ask_in_conversation(&question, &context, &options, observer)
                .await?;
            result.assumptions = crate::text::each_once(std::mem::take(&mut result.assumptions));
            let mut text = crate::agent::render_text(&result);
            let exit = Exit::from_ok(result.decision != Decision::GiveUp);
            match lease {
                None => Output::new(&result, text, exit),
                Some(lease) => {
                    let (conversation_id, turn) = (lease.id().to_string(), lease.number());
                    lease.finish(&result).await;
                    if let Some(understood) = &result.understood_as {
                        text.push_str(&format!("Understood as: {understood}\n"));
                    }
                    text.push_str(&format!(
                        "conversation: {conversation_id} (turn {turn}); continue it with --conversation {conversation_id}\n"
                    ));
                    let report = crate::server::api::AskResponse {
                        conversation_id,
                        turn,
                        result,
                    };
                    Output::new(&report, text, exit)
                }
            }
        }
        Command::Chat {
            baseline,
            no_explain,
            strategy,
            quiet,
            conversation,
        } => {
            let strategy = config::parse_strategy(&strategy)?;
            let conversation = conversation
                .as_deref()
                .map(ConversationId::parse)
                .transpose()?;
            let store: std::sync::Arc<dyn ConversationStore> = std::sync::Arc::new(
                FileStore::in_data_dir(crate::conversation::Limits::default()),
            );
            let agent = open_agent(&settings, strategy).await?;
            let options = ask_options(baseline, no_explain);
            let observer: &dyn Observer = if quiet { &NoObserver } else { &StepsOnStderr };
            chat::Session::new(&agent, store, options, observer, conversation)
                .run()
                .await?;
            Ok(Output::done(Exit::Success))
        }
        Command::Plan { question } => {
            // Planning needs no model: build the index over the gate and select.
            let gate = settings.open_gate().await?;
            let cards = build_cards(&gate).await?;
            let index = SchemaIndex::build(&gate, &cards).await?;
            let plan =
                crate::agent::plan(&gate, &cards, &index, &question, &AskOptions::default())?;
            let text = crate::agent::render_plan(&plan);
            Output::new(&plan, text, Exit::Success)
        }
        Command::Eval { command } => eval(&settings, command).await,
        Command::Mcp => {
            // The database answers before serving: a bad URL, an unreachable server or a
            // refused login is a message on stderr and exit 3, never a half-started
            // session. Its catalogs are read while the client initializes.
            let opening = settings.connect_gate().await?;
            crate::mcp::serve_stdio(opening, settings.row_cap()).await?;
            Ok(Output::done(Exit::Success))
        }
        Command::Serve(args) => {
            let log_url = args.log_database_url.clone();
            let log_on = args.query_log;
            let snapshot = args.schema_snapshot.clone();
            let every = std::time::Duration::from_secs(args.drift_check_secs);
            // With a shared state the users are its table's, so it is reached first: who
            // signs in decides whether the server may listen beyond loopback.
            let state = match args.state_url.as_deref() {
                Some(url) => {
                    let state = crate::state::SharedState::connect(url).await?;
                    state.require_replica_tables().await?;
                    Some(state)
                }
                None => None,
            };
            let users = users::for_serve(state.as_ref()).await?;
            let mut config = args.resolve(users).map_err(CliError::Settings)?;
            let shared = state.is_some();
            config.state = state;
            config.policies =
                users::load_policies(config.users.as_ref(), cli.global.notes.as_deref(), shared)
                    .await?;
            let gate = settings.open_gate().await?;
            config.query_log = query_log_setting(&settings, &gate, log_on, log_url);
            config.examples = Some(
                crate::examples::SqliteExampleStore::in_data_dir()
                    .path()
                    .to_path_buf(),
            );
            config.drift = Some(crate::server::monitor::DriftWatch {
                snapshot: snapshot.unwrap_or_else(|| {
                    crate::drift::default_path(cli.global.notes.as_deref(), gate.label())
                }),
                url: settings.url.clone(),
                options: settings.gate.clone(),
                every,
            });
            crate::server::run(gate, config).await?;
            Ok(Output::done(Exit::Success))
        }
        Command::Examples { state_url, command } => {
            let postgres = matches!(
                settings.url,
                crate::database::DatabaseUrl::Postgres(_) | crate::database::DatabaseUrl::Mysql(_)
            );
            // The store `askdb serve` uses with the same settings: the replicas' shared
            // one with a state URL, else the file in askdb's data directory.
            let store: Box<dyn crate::examples::ExampleStore> =
                match state_url.filter(|url| !url.trim().is_empty()) {
                    Some(url) => {
                        let state = crate::state::SharedState::connect(&url).await?;
                        // The tables a command reads, so an older state is told to run
                        // `askdb db setup` again rather than given a bare query error.
                        state
                            .require_table(crate::state::schema::EXAMPLES_TABLE)
                            .await?;
                        if matches!(
                            command,
                            args::ExamplesCommand::List {
                                caused_wrong: true,
                                ..
                            }
                        ) {
                            state
                                .require_table(crate::state::schema::WRONG_MARKS_TABLE)
                                .await?;
                        }
                        Box::new(crate::examples::PostgresExampleStore::new(
                            state.pool().clone(),
                        ))
                    }
                    None => Box::new(crate::examples::SqliteExampleStore::in_data_dir()),
                };
            examples::run(
                &settings.open_gate().await?,
                store.as_ref(),
                postgres,
                command,
            )
            .await
        }
        Command::Model {
            command: ModelCommand::Check,
        } => model_check().await,
        Command::Completions { shell } => Ok(completions(shell)),
        Command::Users { state_url, command } => users::run(command, state_url.as_deref()).await,
    }
}

/// `askdb ask`'s progress: each step's line on stderr as it happens, in the words the
/// page's live steps use ([`crate::server::steps`]).
struct StepsOnStderr;

impl Observer for StepsOnStderr {
    fn observe(&self, event: &AgentEvent) {
        eprintln!("{}", crate::server::steps::line(event));
    }
}

/// `askdb completions SHELL`: the completion script clap_complete writes from the
/// command line's own definition, so it never falls behind a new flag.
fn completions(shell: clap_complete::Shell) -> Output {
    use clap::CommandFactory;
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "askdb", &mut script);
    let text = String::from_utf8_lossy(&script).into_owned();
    Output {
        json: serde_json::Value::String(text.clone()),
        text,
        exit: Exit::Success,
    }
}

/// How `askdb ask` and `askdb chat` ask: the agent or its first attempt alone, with or
/// without the written explanation.
fn ask_options(baseline: bool, no_explain: bool) -> AskOptions {
    AskOptions {
        mode: if baseline {
            Mode::Baseline
        } else {
            Mode::Agent
        },
        explain: !no_explain,
        ..AskOptions::default()
    }
}

async fn open_agent(settings: &Settings, strategy: Strategy) -> Result<Agent, CliError> {
    let client = ModelClient::from_config(&ProviderConfig::from_env()?)?;
    let gate = settings.open_gate().await?;
    // `askdb ask` answers with the examples people verified on this database.
    let examples = std::sync::Arc::new(crate::examples::SqliteExampleStore::in_data_dir());
    Ok(Agent::with_strategy(gate, client, strategy)
        .await?
        .with_examples(examples))
}

/// Where `askdb serve` logs questions: PostgreSQL, MySQL and MariaDB databases over the
/// log role's URL (none given: off, with the reason), SQLite databases into askdb's data
/// directory.
fn query_log_setting(
    settings: &Settings,
    gate: &Gate,
    on: bool,
    log_url: Option<String>,
) -> crate::server::monitor::QueryLogSetting {
    use crate::querylog::{LogTarget, LOG_DATABASE_URL_ENV};
    use crate::server::monitor::QueryLogSetting;
    if !on {
        return QueryLogSetting::Off("the query log is switched off (--query-log false)".into());
    }
    use crate::database::DatabaseUrl;
    match (&settings.url, log_url.filter(|url| !url.trim().is_empty())) {
        (DatabaseUrl::Postgres(_) | DatabaseUrl::Mysql(_), Some(url)) => {
            QueryLogSetting::On(LogTarget::for_url(url))
        }
        (DatabaseUrl::Postgres(_) | DatabaseUrl::Mysql(_), None) => QueryLogSetting::Off(format!(
            "no log role URL: set {LOG_DATABASE_URL_ENV} (the askdb_log URL `askdb db setup` \
             prints) to log questions"
        )),
        _ => QueryLogSetting::On(LogTarget::sqlite_in_data_dir(gate.label())),
    }
}

async fn log_stats(
    settings: &Settings,
    from: Option<String>,
    user: Option<String>,
) -> Result<Output, CliError> {
    use crate::querylog::stats;
    let postgres = matches!(
        settings.url,
        crate::database::DatabaseUrl::Postgres(_) | crate::database::DatabaseUrl::Mysql(_)
    );
    let source = log_source(postgres, from, "--from")?;
    let user = user.map(|name| name.trim().to_string());
    if user.as_deref() == Some("") {
        return Err(CliError::Settings(
            "--user needs a name (askdb users list shows them)".to_string(),
        ));
    }
    let rows = stats::read(&source, user.as_deref()).await?;
    let mut figures = stats::compute(&rows);
    figures.user = user;
    let text = stats::render(&figures);
    Output::new(&figures, text, Exit::Success)
}

/// Where the query log is read: the URL given (`flag` names the flag), else askdb's own
/// SQLite log; a PostgreSQL database's log needs a URL, since its log role may only
/// insert.
fn log_source(
    postgres: bool,
    from: Option<String>,
    flag: &str,
) -> Result<crate::querylog::stats::LogSource, CliError> {
    use crate::querylog::stats::LogSource;
    match from.filter(|text| !text.trim().is_empty()) {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Ok(LogSource::Postgres(url))
        }
        Some(url) if crate::text::mysql_url(&url).is_some() => Ok(LogSource::Mysql(url)),
        Some(path) => Ok(LogSource::Sqlite(
            path.strip_prefix("sqlite:").unwrap_or(&path).into(),
        )),
        None if postgres => Err(CliError::Settings(format!(
            "a PostgreSQL or MySQL query log can only be read with {flag} URL (a role that may SELECT \
             askdb_query_log, such as the administrator; askdb_log may only insert)"
        ))),
        None => Ok(LogSource::Sqlite(
            crate::home::data_dir().join(crate::querylog::SQLITE_LOG_FILE),
        )),
    }
}

async fn schema(
    gate: &Gate,
    command: SchemaCommand,
    notes: Option<&Path>,
) -> Result<Output, CliError> {
    match command {
        SchemaCommand::Snapshot { out } => {
            let path = out.unwrap_or_else(|| crate::drift::default_path(notes, gate.label()));
            let snapshot = crate::drift::snapshot(gate);
            crate::drift::write(&snapshot, &path)?;
            let columns: usize = snapshot.tables.iter().map(|t| t.columns.len()).sum();
            Output::new(
                &serde_json::json!({"ok": true, "path": path, "tables": snapshot.tables.len(), "columns": columns}),
                format!(
                    "schema snapshot written to {} ({} tables, {columns} columns)\n",
                    path.display(),
                    snapshot.tables.len()
                ),
                Exit::Success,
            )
        }
        SchemaCommand::Drift { snapshot } => {
            let path = snapshot.unwrap_or_else(|| crate::drift::default_path(notes, gate.label()));
            let saved = crate::drift::read(&path)?;
            let differences = crate::drift::check(gate, &saved);
            let mut text = if differences.is_empty() {
                format!(
                    "no drift: the live schema matches the snapshot taken {} ({})\n",
                    saved.taken_at,
                    path.display()
                )
            } else {
                format!(
                    "drift: {} difference(s) from the snapshot taken {} ({})\n",
                    differences.len(),
                    saved.taken_at,
                    path.display()
                )
            };
            for difference in &differences {
                text.push_str(&format!("  {difference}\n"));
            }
            Output::new(
                &serde_json::json!({
                    "drifted": !differences.is_empty(),
                    "snapshot": path,
                    "taken_at": saved.taken_at,
                    "differences": differences,
                }),
                text,
                Exit::from_ok(differences.is_empty()),
            )
        }
        SchemaCommand::Tables => {
            let tables = gate.list_tables();
            let text = reports::tables_text(&tables);
            Output::new(&tables, text, Exit::Success)
        }
        SchemaCommand::Describe { table } => {
            let description = gate.describe_table(&table)?;
            let text = reports::description_text(&description);
            Output::new(&description, text, Exit::Success)
        }
        SchemaCommand::Sample { table, rows } => {
            let result = gate.sample_rows(&table, rows).await?;
            let text = crate::text_table::render(&result.columns, &result.rows);
            Output::new(&result, text, Exit::Success)
        }
    }
}

async fn sql(gate: &Gate, command: SqlCommand) -> Result<Output, CliError> {
    match command {
        SqlCommand::Check {
            batch: Some(path), ..
        } => {
            // One JSON verdict per line, printed as it is reached: a long file shows
            // progress and a broken pipe loses nothing already decided.
            let mut all_ok = true;
            for line in read_file(&path)?
                .lines()
                .filter(|line| !line.trim().is_empty())
            {
                let verdict = SqlCheckVerdict::of(line, gate.check(line));
                all_ok &= verdict.ok;
                let line = serde_json::to_string(&verdict)
                    .map_err(|error| CliError::Report(error.to_string()))?;
                crate::cli::reports::print_line(&line);
            }
            Ok(Output::done(Exit::from_ok(all_ok)))
        }
        SqlCommand::Check { sql, batch: None } => {
            let sql = match sql {
                Some(sql) => sql,
                None => {
                    let mut text = String::new();
                    std::io::stdin()
                        .read_to_string(&mut text)
                        .map_err(|error| CliError::Read {
                            path: "stdin".to_string(),
                            error,
                        })?;
                    text
                }
            };
            let report = SqlCheckReport::of(gate.check(&sql));
            let text = report.text();
            let exit = Exit::from_ok(report.is_ok());
            Output::new(&report, text, exit)
        }
        SqlCommand::Run { sql } => {
            let outcome = gate.run_query(&sql).await;
            let text = reports::outcome_text(&outcome);
            Output::new(&outcome, text, Exit::from_ok(outcome.is_ok()))
        }
    }
}

async fn db_setup(
    admin_url: String,
    database: String,
    example_rls: Vec<crate::admin::UserCity>,
) -> Result<Output, CliError> {
    use crate::admin::{self, Password, SetupOptions};
    let mut options = SetupOptions::new(admin_url, database);
    options.example_rls = example_rls;
    let from_env = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|value| !value.is_empty())
            .map(Password::new)
    };
    options.read_only_role.password = from_env(admin::READ_ONLY_PASSWORD_ENV);
    options.log_role.password = from_env(admin::LOG_PASSWORD_ENV);
    let report = admin::setup(&options).await?;
    let mut view = SetupView::of(&report);
    // The replicas' shared state lives in PostgreSQL only (decision 0079).
    if crate::text::mysql_url(&options.admin_url).is_none() {
        let mut role = admin::RoleSpec::new(admin::DEFAULT_STATE_ROLE);
        role.password = from_env(admin::STATE_PASSWORD_ENV);
        let state = admin::setup_state(&options.admin_url, &options.database, &role).await?;
        view = view.with_state(&state);
    }
    let text = view.text();
    Output::new(&view, text, Exit::Success)
}

async fn model_check() -> Result<Output, CliError> {
    let config = ProviderConfig::from_env()?;
    let client = ModelClient::from_config(&config)?;
    let request = prompts::model_check_request("model check");
    let outcome = client.call(&request, &CallLog::default()).await;
    let report = ModelCheckReport::of(&config, &client, &outcome);
    let text = report.text();
    let exit = if outcome.is_ok() {
        Exit::Success
    } else {
        Exit::Failure
    };
    Output::new(&report, text, exit)
}

async fn eval(settings: &Settings, command: EvalCommand) -> Result<Output, CliError> {
    match command {
        EvalCommand::Guard { write, repo } => {
            use crate::eval::guard_check;
            use crate::eval::results::{self, GuardResults};
            let data_dir = crate::home::shared_data_dir()?;
            let mut reports = guard_check::check_external_sqlite(&data_dir).await?;
            // defog's PostgreSQL gold needs a server to load its dumps into databases of
            // their own.
            let admin_url = guard_check::admin_url();
            match crate::admin::url_reachable(&admin_url).await {
                Ok(()) => {
                    reports.push(guard_check::check_defog_postgres(&data_dir, &admin_url).await?)
                }
                Err(error) => eprintln!("askdb: defog PostgreSQL gold skipped: {error}"),
            }
            // Spider's MySQL-style gold on MySQL or MariaDB, its databases copied there.
            let mysql_url = guard_check::mysql_admin_url();
            match crate::admin::mysql_reachable(&mysql_url).await {
                Ok(()) => {
                    reports.push(guard_check::check_spider_mysql(&data_dir, &mysql_url).await?)
                }
                Err(error) => eprintln!("askdb: Spider MySQL gold skipped: {error}"),
            }
            let all_same = reports.iter().all(|report| report.discrepancies.is_empty());
            let results = GuardResults::new(reports);
            let mut text = results::guard_block(&results);
            for report in &results.reports {
                for discrepancy in &report.discrepancies {
                    text.push_str(&format!(
                        "{} [{}]: {}\n",
                        discrepancy.id, discrepancy.db_name, discrepancy.problem
                    ));
                }
            }
            if write {
                let path = results::write_guard_results(&repo, &results)?;
                eprintln!("wrote {} and the README table", path.display());
            }
            Output::new(&results, text, Exit::from_ok(all_same))
        }
        EvalCommand::Run {
            set,
            questions,
            mode,
            strategy,
            which,
            examples,
            through,
            resume,
            runs_dir,
        } => {
            if set == Some(args::SetName::Sparc) {
                let sparc_settings = crate::eval::sparc::SparcSettings {
                    sample: which.sample,
                    sample_offset: which.sample_offset,
                    seed: which.seed,
                    limit: which.limit,
                    strategy: config::parse_strategy(&strategy)?.to_string(),
                    row_cap: runner::EVAL_ROW_CAP,
                };
                let data_dir = crate::home::shared_data_dir()
                    .map_err(|missing| runner::EvalError::Data(missing.to_string()))?;
                let client = ModelClient::from_config(&ProviderConfig::from_env()?)?;
                let (dir, report) = crate::eval::sparc::run(
                    &sparc_settings,
                    &client,
                    &data_dir,
                    &runs_dir,
                    resume.as_deref(),
                )
                .await?;
                let text = format!(
                    "{}\n{}\nrun folder: {}\n",
                    crate::eval::sparc::render(&report.summary),
                    crate::eval::sparc::databases_text(&report.database_hashes),
                    dir.display()
                );
                return Output::new(&report, text, Exit::Success);
            }
            let examples = match examples {
                args::ExamplesChoice::None => runner::ExampleSource::None,
                args::ExamplesChoice::LeaveOneOut => runner::ExampleSource::LeaveOneOut,
            };
            let run_settings = settings.run_settings(
                set,
                questions,
                mode,
                &strategy,
                which.limit,
                which.sampling(),
                examples,
                through,
            )?;
            let client = ModelClient::from_config(&ProviderConfig::from_env()?)?;
            // Traces where OTEL_EXPORTER_OTLP_ENDPOINT says, each with its verdict; the
            // last ones are sent before the command returns.
            let telemetry =
                crate::telemetry::Telemetry::start(crate::telemetry::TelemetryConfig::from_env());
            let run = runner::run(run_settings, client, &runs_dir, resume, &telemetry).await;
            telemetry.flush(std::time::Duration::from_secs(10)).await;
            let run = run?;
            let summary = runner::write_summary(&run)?;
            let text = format!(
                "{}run folder: {}\n",
                runner::render_report(&summary),
                run.display()
            );
            Output::new(&summary, text, Exit::Success)
        }
        EvalCommand::CopySpider { to } => {
            if crate::text::mysql_url(&to).is_none() {
                return Err(runner::EvalError::Data(format!(
                    "--to takes a mysql:// or mariadb:// URL, not {}",
                    crate::text::redact_password(&to)
                ))
                .into());
            }
            let data_dir = crate::home::shared_data_dir()
                .map_err(|missing| runner::EvalError::Data(missing.to_string()))?;
            let queries = crate::eval::external::load_spiderman(&data_dir)
                .map_err(|error| runner::EvalError::Data(error.to_string()))?;
            let names: std::collections::BTreeSet<String> =
                queries.into_iter().map(|query| query.db_name).collect();
            let mut copied = Vec::new();
            let mut text = String::new();
            for name in names {
                let database = crate::eval::external::spider_mysql_database(&name);
                let source = crate::eval::external::spiderman_db_path(&data_dir, &name);
                let report = crate::admin::copy_sqlite_into_mysql(&source, &to, &database).await?;
                let rows: usize = report.tables.iter().map(|(_, rows)| rows).sum();
                text.push_str(&format!(
                    "{database}: {} tables, {rows} rows, {} keys{}\n",
                    report.tables.len(),
                    report.keys,
                    if report.keys_left_out.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " ({} left out: {})",
                            report.keys_left_out.len(),
                            report.keys_left_out.join("; ")
                        )
                    }
                ));
                copied.push(serde_json::json!({
                    "database": database,
                    "tables": report.tables.len(),
                    "rows": rows,
                    "keys": report.keys,
                    "keys_left_out": report.keys_left_out,
                }));
            }
            Output::new(&copied, text, Exit::Success)
        }
        EvalCommand::Pool {
            set,
            strategy,
            candidates,
            temperature,
            variants,
            which,
            resume,
            runs_dir,
        } => {
            let variants = variants
                .iter()
                .map(|text| config::parse_strategy(text).map(|strategy| strategy.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            let pool_settings = crate::eval::pool::PoolSettings {
                set: set.as_str().to_string(),
                sample: which.sample,
                seed: which.seed,
                sample_offset: which.sample_offset,
                limit: which.limit,
                strategy: config::parse_strategy(&strategy)?.to_string(),
                candidates,
                temperature,
                variants,
            };
            let client = ModelClient::from_config(&ProviderConfig::from_env()?)?;
            let dir = crate::eval::pool::run_pool(pool_settings, client, &runs_dir, resume).await?;
            let records = crate::eval::pool::read_pool(&dir)?;
            let text = format!(
                "{} question(s) pooled\npool folder: {}\n",
                records.len(),
                dir.display()
            );
            Output::new(
                &serde_json::json!({"pool": dir, "questions": records.len()}),
                text,
                Exit::Success,
            )
        }
        EvalCommand::Regrade { run } => {
            let summary = runner::regrade(&run).await?;
            let text = runner::render_report(&summary);
            Output::new(&summary, text, Exit::Success)
        }
        EvalCommand::Gate { run, config, repo } => {
            let config = crate::eval::gate::load_config(&config)?;
            let checks = crate::eval::gate::check_run(&run, &config, &repo).await?;
            let text: String = checks
                .iter()
                .map(|check| {
                    let mark = if check.passed { "pass" } else { "FAIL" };
                    format!("{mark}  {}: {}\n", check.name, check.detail)
                })
                .collect();
            let exit = Exit::from_ok(checks.iter().all(|check| check.passed));
            Output::new(&checks, text, exit)
        }
        EvalCommand::Flags {
            gold: Some(set),
            limit,
            ..
        } => {
            let report = crate::eval::flags::gold_flags(&set, limit).await?;
            let text = crate::eval::flags::render_gold(&report);
            Output::new(&report, text, Exit::Success)
        }
        EvalCommand::Flags { run, .. } => {
            let run = run.unwrap_or_default();
            runner::read_manifest(&run)?;
            let figures = crate::eval::flags::figures(&runner::read_records(&run)?);
            let text = crate::eval::flags::render(&figures);
            Output::new(&figures, text, Exit::Success)
        }
        EvalCommand::Report { run } => {
            let text = read_file(&run.join("report.md"))?;
            Output::new(&serde_json::json!({"report": text}), text, Exit::Success)
        }
        EvalCommand::Publish { run, repo } => {
            let written = crate::eval::results::publish_run(&run, &repo)?;
            Output::new(
                &serde_json::json!({"ok": true, "summary": written}),
                format!("wrote {} and the README results table\n", written.display()),
                Exit::Success,
            )
        }
        EvalCommand::Compare { run, other, mode } => {
            let comparison = runner::compare_runs(&run, &other, mode)?;
            let text = runner::render_comparison(&comparison);
            Output::new(&comparison, text, Exit::Success)
        }
        EvalCommand::ExampleRetrieval => {
            use crate::eval::example_retrieval;
            let report = example_retrieval::measure(&crate::home::shared_data_dir()?).await?;
            let text = example_retrieval::render(&report);
            Output::new(&report, text, Exit::Success)
        }
        EvalCommand::Linking { tables, questions } => {
            use crate::linking::eval as linking_eval;
            let report = match (tables, questions) {
                (Some(tables), Some(questions)) => {
                    linking_eval::evaluate_spider(&tables, &questions, &linking_eval::DEFAULT_KS)?
                }
                _ => {
                    let gate = settings.open_gate().await?;
                    let cards = build_cards(&gate).await?;
                    let index = SchemaIndex::build(&gate, &cards).await?;
                    let items = linking_eval::demo_gold_items()?;
                    linking_eval::evaluate_items(&index, &items, &linking_eval::DEFAULT_KS)
                }
            };
            let text = format!("{report}\n");
            Output::new(&report, text, Exit::Success)
        }
    }
}
