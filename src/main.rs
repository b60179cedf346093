//! The askdb command line: parses arguments, opens the gate, calls the library and
//! maps outcomes to exit codes. Everything else lives in the library.
//!
//! Exit codes: 0 success; 1 the statement was refused or failed (a structured error
//! was printed); 2 bad usage (from clap); 3 askdb could not do its job (database
//! unreachable, bad URL, unreadable file).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use askdb::gate::{DatabaseUrl, Gate, GateOptions, QueryOutcome};
use askdb::schema::SchemaNotes;
use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "askdb",
    version,
    about = "Ask a SQL database questions, safely."
)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct GlobalArgs {
    /// Database: `demo` (default), `sqlite:PATH`, a .sqlite/.db path, or postgres://...
    #[arg(
        long,
        global = true,
        env = "ASKDB_DATABASE_URL",
        default_value = "demo"
    )]
    db: String,
    /// Print stable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Schema notes for this database (TOML): descriptions, restricted columns, hidden tables.
    #[arg(long, global = true, env = "ASKDB_NOTES")]
    notes: Option<PathBuf>,
    /// Row cap forced into every query's LIMIT.
    #[arg(long, global = true, env = "ASKDB_ROW_CAP", default_value_t = askdb::gate::guard::DEFAULT_ROW_CAP)]
    row_cap: u64,
    /// Statement timeout in milliseconds.
    #[arg(
        long,
        global = true,
        env = "ASKDB_STATEMENT_TIMEOUT_MS",
        default_value_t = 5000
    )]
    timeout_ms: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Look at the database's tables.
    Schema {
        #[command(subcommand)]
        command: SchemaCommand,
    },
    /// Check or run SQL through the gate.
    Sql {
        #[command(subcommand)]
        command: SqlCommand,
    },
    /// The embedded demo database.
    Demo {
        #[command(subcommand)]
        command: DemoCommand,
    },
    /// Prepare a PostgreSQL database for askdb.
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Ask a question in plain English.
    Ask {
        question: String,
        /// One attempt, no repair, no diagnostic (for comparison).
        #[arg(long)]
        baseline: bool,
        /// Skip the model-written explanation (one call fewer).
        #[arg(long)]
        no_explain: bool,
    },
    /// Show what askdb would do with a question, before any model call.
    Plan { question: String },
    /// Evaluations: model-free checks and real-model runs.
    Eval {
        #[command(subcommand)]
        command: EvalCommand,
    },
    /// Serve the gate's four tools to an MCP client over stdio (stdout carries the
    /// protocol; messages go to stderr).
    Mcp,
    /// Serve the HTTP API and the web page (the model comes from ASKDB_PROVIDER, ...;
    /// without one, questions get 503 and everything else works).
    Serve(askdb::server::ServeArgs),
    /// The language model askdb asks (configured by ASKDB_PROVIDER, ASKDB_MODEL, ...).
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
}

#[derive(Subcommand)]
enum ModelCommand {
    /// Print the configured provider and model, then make one tiny call and report its
    /// latency, tokens and cost.
    Check,
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Every external gold query must pass the guard and keep its result when re-rendered.
    Guard {
        /// Write evals/results/guard_equivalence.json and regenerate the README table.
        #[arg(long)]
        write: bool,
    },
    /// Ask a golden set through the agent and grade it by execution.
    Run {
        /// demo, chinook, spider or defog.
        #[arg(long)]
        set: String,
        /// agent, baseline or both.
        #[arg(long, default_value = "both")]
        mode: String,
        /// Only the first N questions (after sampling).
        #[arg(long)]
        limit: Option<usize>,
        /// A fixed random sample of N questions.
        #[arg(long)]
        sample: Option<usize>,
        /// Seed of the sample.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Resume an interrupted run folder.
        #[arg(long)]
        resume: Option<PathBuf>,
        /// Where run folders go.
        #[arg(long, default_value = "evals/runs")]
        runs_dir: PathBuf,
    },
    /// Re-score a finished run without calling the model.
    Regrade { run: PathBuf },
    /// The CI gate: database unchanged, nothing unsafe ran, accuracy within tolerance.
    Gate {
        run: PathBuf,
        #[arg(long, default_value = "evals/gate.toml")]
        config: PathBuf,
    },
    /// Print a run's report.
    Report { run: PathBuf },
    /// Copy a run's summary into evals/results/ and regenerate the README results table.
    Publish { run: PathBuf },
    /// Linking recall without a model: Spider/BIRD tables.json + questions, or our demo set.
    Linking {
        #[arg(long)]
        tables: Option<PathBuf>,
        #[arg(long)]
        questions: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum SchemaCommand {
    /// List the visible tables with descriptions and row counts.
    Tables,
    /// Show one table's columns and keys.
    Describe { table: String },
    /// Show a few rows of a table (text cut to 40 characters; restricted columns never shown).
    Sample {
        table: String,
        #[arg(short = 'n', long, default_value_t = 3)]
        rows: u32,
    },
}

#[derive(Subcommand)]
enum SqlCommand {
    /// Check a statement with the guard only; reads stdin when no SQL is given.
    Check {
        sql: Option<String>,
        /// Check each line of FILE as its own statement; prints one JSON verdict per line.
        #[arg(long, conflicts_with = "sql")]
        batch: Option<PathBuf>,
    },
    /// Run a statement through the whole gate (guard, read-only connection, row cap).
    Run { sql: String },
}

#[derive(Subcommand)]
enum DemoCommand {
    /// Write the demo database to a SQLite file.
    Build {
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum DbCommand {
    /// Create (or refresh) the demo database, the query log and the askdb_ro and askdb_log
    /// roles, then prove both roles. Idempotent. Passwords come from ASKDB_RO_PASSWORD and
    /// ASKDB_LOG_PASSWORD, or are generated and printed once.
    Setup {
        /// A superuser URL (any database), e.g. postgres://postgres@127.0.0.1:5432/postgres
        #[arg(long, env = "ASKDB_ADMIN_URL", hide_env_values = true)]
        admin_url: String,
        /// The database to create or refresh.
        #[arg(long, default_value = askdb::db_setup::DEFAULT_DATABASE)]
        database: String,
    },
}

/// A failure of askdb itself (exit 3), as opposed to a refused or failed query (exit 1).
const EXIT_REFUSED: u8 = 1;
const EXIT_FAILURE: u8 = 3;

fn main() -> ExitCode {
    // reqwest is built without a TLS crypto provider of its own; install ring's first.
    askdb::llm::install_tls_provider();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("askdb: cannot start the runtime: {error}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("askdb: {error:#}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

async fn open_gate(global: &GlobalArgs) -> Result<Gate> {
    let url: DatabaseUrl = global.db.parse()?;
    let notes = match &global.notes {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read notes file {}", path.display()))?;
            let notes: SchemaNotes = toml::from_str(&text)
                .with_context(|| format!("notes file {} is not valid", path.display()))?;
            Some(notes)
        }
        None => None,
    };
    let options = GateOptions {
        row_cap: global.row_cap,
        statement_timeout: Duration::from_millis(global.timeout_ms),
        notes,
    };
    Gate::open(&url, options)
        .await
        .with_context(|| format!("database {url}"))
}

fn print_json(value: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let global = &cli.global;
    match cli.command {
        Command::Eval {
            command: EvalCommand::Guard { write },
        } => eval_guard(write, global.json).await,
        Command::Eval { command } => eval_command(command, global).await,
        Command::Ask {
            question,
            baseline,
            no_explain,
        } => ask_command(global, &question, baseline, !no_explain).await,
        Command::Plan { question } => plan_command(global, &question).await,
        Command::Model {
            command: ModelCommand::Check,
        } => model_check(global.json).await,
        Command::Db {
            command:
                DbCommand::Setup {
                    admin_url,
                    database,
                },
        } => db_setup(admin_url, database, global.json).await,
        Command::Demo {
            command: DemoCommand::Build { out },
        } => {
            askdb::demo::write_sqlite(&out)
                .with_context(|| format!("cannot write the demo database to {}", out.display()))?;
            if global.json {
                print_json(&serde_json::json!({"ok": true, "path": out}))?;
            } else {
                println!("demo database written to {}", out.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema { command } => {
            let gate = open_gate(global).await?;
            schema_command(&gate, command, global.json).await
        }
        Command::Sql { command } => {
            let gate = open_gate(global).await?;
            sql_command(&gate, command, global.json).await
        }
        Command::Mcp => {
            // The gate opens before serving: a bad URL or an unreachable database is a
            // message on stderr and exit 3, never a half-started session.
            let gate = open_gate(global).await?;
            askdb::mcp::serve_stdio(gate).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            let config = match args.resolve() {
                Ok(config) => config,
                Err(message) => {
                    eprintln!("askdb serve: {message}");
                    return Ok(ExitCode::from(2)); // bad usage, like clap's own errors
                }
            };
            let gate = open_gate(global).await?;
            askdb::server::run(gate, config).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn schema_command(gate: &Gate, command: SchemaCommand, json: bool) -> Result<ExitCode> {
    match command {
        SchemaCommand::Tables => {
            let tables = gate.list_tables();
            if json {
                print_json(&tables)?;
            } else {
                let rows: Vec<Vec<serde_json::Value>> = tables
                    .iter()
                    .map(|table| {
                        vec![
                            table.name.clone().into(),
                            table.row_count.into(),
                            table.description.clone().into(),
                        ]
                    })
                    .collect();
                let columns = ["table", "rows", "description"].map(String::from);
                print!("{}", askdb::text_table::render(&columns, &rows));
            }
        }
        SchemaCommand::Describe { table } => {
            let description = gate.describe_table(&table)?;
            if json {
                print_json(&description)?;
            } else {
                if !description.description.is_empty() {
                    println!("-- {}", description.description);
                }
                println!("{}", description.create_table);
                for column in &description.columns {
                    if let Some(note) = &column.description {
                        println!("-- {}: {note}", column.name);
                    }
                }
            }
        }
        SchemaCommand::Sample { table, rows } => {
            let result = gate.sample_rows(&table, rows).await?;
            if json {
                print_json(&result)?;
            } else {
                print!(
                    "{}",
                    askdb::text_table::render(&result.columns, &result.rows)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn sql_command(gate: &Gate, command: SqlCommand, json: bool) -> Result<ExitCode> {
    match command {
        SqlCommand::Check { sql, batch } => {
            if let Some(path) = batch {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let mut all_ok = true;
                for line in text.lines().filter(|line| !line.trim().is_empty()) {
                    let verdict = match gate.check(line) {
                        Ok(checked) => {
                            serde_json::json!({"ok": true, "reason": null, "sql": checked.sql})
                        }
                        Err(refusal) => {
                            all_ok = false;
                            serde_json::json!({"ok": false, "reason": refusal.reason, "message": refusal.message, "sql": line})
                        }
                    };
                    println!("{verdict}");
                }
                return Ok(exit_for(all_ok));
            }
            let sql = match sql {
                Some(sql) => sql,
                None => {
                    let mut text = String::new();
                    std::io::stdin()
                        .read_to_string(&mut text)
                        .context("cannot read SQL from stdin")?;
                    text
                }
            };
            match gate.check(&sql) {
                Ok(checked) => {
                    if json {
                        print_json(
                            &serde_json::json!({"ok": true, "sql": checked.sql, "limit": checked.limit, "tables": checked.tables}),
                        )?;
                    } else {
                        println!("ok: {}", checked.sql);
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(refusal) => {
                    if json {
                        print_json(
                            &serde_json::json!({"ok": false, "reason": refusal.reason, "message": refusal.message, "repairable": refusal.repairable}),
                        )?;
                    } else {
                        println!("refused ({}): {}", refusal.reason.as_str(), refusal.message);
                    }
                    Ok(ExitCode::from(EXIT_REFUSED))
                }
            }
        }
        SqlCommand::Run { sql } => {
            let outcome = gate.run_query(&sql).await;
            if json {
                print_json(&outcome)?;
            } else {
                match &outcome {
                    QueryOutcome::Rows(result) => {
                        print!(
                            "{}",
                            askdb::text_table::render(&result.columns, &result.rows)
                        );
                        let more = if result.truncated {
                            " (reached the row cap; more rows may exist)".to_string()
                        } else {
                            String::new()
                        };
                        println!("({} rows{more})", result.row_count);
                        println!("ran: {}", result.sql);
                    }
                    QueryOutcome::Failed(error) => {
                        println!("error: {error}");
                        println!("sql: {}", error.sql);
                    }
                }
            }
            Ok(exit_for(outcome.is_ok()))
        }
    }
}

async fn eval_guard(write: bool, json: bool) -> Result<ExitCode> {
    use askdb::eval::results::{self, GuardResults};
    let data_dir = askdb::home::shared_data_dir().map_err(anyhow::Error::msg)?;
    let mut reports = askdb::eval::guard_check::check_external_sqlite(&data_dir)
        .await
        .map_err(anyhow::Error::msg)?;
    // defog's PostgreSQL gold needs a server to load its dumps into scratch databases.
    let admin_url = askdb::eval::guard_check::admin_url();
    match askdb::db_setup::url_reachable(&admin_url).await {
        Ok(()) => reports.push(
            askdb::eval::guard_check::check_defog_postgres(&data_dir, &admin_url)
                .await
                .map_err(anyhow::Error::msg)?,
        ),
        Err(error) => eprintln!("askdb: defog PostgreSQL gold skipped: {error}"),
    }
    let all_same = reports.iter().all(|report| report.discrepancies.is_empty());
    let results = GuardResults::new(reports);
    if json {
        print_json(&results)?;
    } else {
        print!("{}", results::guard_block(&results));
        for report in &results.reports {
            for discrepancy in &report.discrepancies {
                println!(
                    "{} [{}]: {}",
                    discrepancy.id, discrepancy.db_name, discrepancy.problem
                );
            }
        }
    }
    if write {
        let root = results::project_root();
        let path = root.join(results::GUARD_RESULTS);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, serde_json::to_string_pretty(&results)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        results::update_readme_guard_block(&root.join("README.md"), &results)
            .map_err(anyhow::Error::msg)?;
        eprintln!("wrote {} and the README table", path.display());
    }
    Ok(exit_for(all_same))
}

async fn db_setup(admin_url: String, database: String, json: bool) -> Result<ExitCode> {
    use askdb::db_setup::{self, Password, SetupOptions};
    let mut options = SetupOptions::new(admin_url, database);
    let from_env = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|value| !value.is_empty())
            .map(Password::new)
    };
    options.read_only_role.password = from_env(db_setup::READ_ONLY_PASSWORD_ENV);
    options.log_role.password = from_env(db_setup::LOG_PASSWORD_ENV);
    let report = db_setup::setup(&options).await.context("db setup")?;
    let roles = [
        (&report.read_only, db_setup::READ_ONLY_PASSWORD_ENV, "--db"),
        (&report.log, db_setup::LOG_PASSWORD_ENV, "the query log"),
    ];
    if json {
        let role_json: Vec<serde_json::Value> = roles
            .iter()
            .map(|(login, env, _)| {
                serde_json::json!({
                    "role": login.role,
                    "url": login.display_url(),
                    "password_source": if login.password_generated { "generated" } else { *env },
                    // The only place a generated password is ever shown.
                    "generated_password": login.password_generated.then(|| login.password.expose()),
                })
            })
            .collect();
        print_json(&serde_json::json!({
            "ok": true,
            "database": report.database,
            "database_created": report.database_created,
            "tables": report.tables.iter().map(|(name, rows)| serde_json::json!({"name": name, "rows": rows})).collect::<Vec<_>>(),
            "roles": role_json,
            "proofs": report.proofs.iter().map(|proof| serde_json::json!({"role": proof.role, "attempt": proof.attempt, "outcome": proof.outcome})).collect::<Vec<_>>(),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: usize = report.tables.iter().map(|(_, rows)| rows).sum();
    println!(
        "database {}: {}",
        report.database,
        if report.database_created {
            "created"
        } else {
            "already existed, refreshed"
        }
    );
    println!(
        "demo tables: {} tables, {rows} rows, rebuilt from the deterministic generator",
        report.tables.len()
    );
    println!("query log: askdb_query_log (kept across runs)");
    println!("proofs passed:");
    for proof in &report.proofs {
        println!("  {}: {} -> {}", proof.role, proof.attempt, proof.outcome);
    }
    for (login, env, purpose) in roles {
        println!(
            "{} URL (for {purpose}): {}",
            login.role,
            login.display_url()
        );
        if login.password_generated {
            println!(
                "  generated password for {} (shown once; store it, or set {env} and re-run): {}",
                login.role,
                login.password.expose()
            );
        } else {
            println!("  password for {}: from {env}", login.role);
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn model_check(json: bool) -> Result<ExitCode> {
    use askdb::llm::{CallLog, Message, ModelClient, ModelRequest, ProviderConfig, Purpose};
    let config = ProviderConfig::from_env()?;
    let client = ModelClient::from_config(&config)?;
    let request = ModelRequest::new(
        Purpose::Check,
        "model check",
        vec![
            Message::system("Reply with the single word: ok"),
            Message::user("ping"),
        ],
    )
    .with_max_tokens(8);
    let outcome = client.call(&request, &CallLog::default()).await;
    let provider = client.provider();
    let keys: Vec<String> = config.keys.iter().map(|key| key.to_string()).collect();
    let cap = config.spend_cap_usd;
    if json {
        let mut report = serde_json::json!({
            "ok": outcome.is_ok(),
            "provider": provider.name(),
            "model": provider.model(),
            "base_url": config.display_base_url(),
            "keys": keys,
            "metered": provider.is_metered(),
            "spend_cap_usd": cap,
            "prices_as_of": client.prices_as_of(),
            "cache_dir": config.cache_dir,
        });
        match &outcome {
            Ok(reply) => {
                report["reply"] = reply.text.clone().into();
                report["served_by"] = reply.model.clone().into();
                report["latency_ms"] = (reply.latency.as_millis() as u64).into();
                report["input_tokens"] = reply.input_tokens.into();
                report["output_tokens"] = reply.output_tokens.into();
                report["cost_usd"] = reply.cost_usd.into();
                report["attempts"] = reply.attempts.into();
                report["from_cache"] = reply.from_cache.into();
            }
            Err(error) => {
                report["error_kind"] = error.kind().into();
                report["error"] = error.to_string().into();
            }
        }
        print_json(&report)?;
    } else {
        println!("provider: {}", provider.name());
        println!("model:    {}", provider.model());
        if !config.base_url.is_empty() {
            println!("base URL: {}", config.display_base_url());
        }
        if !keys.is_empty() {
            println!("keys:     {}", keys.join(", "));
        }
        match cap {
            Some(cap) => println!(
                "spend:    cap ${cap:.2}, prices as of {}",
                client.prices_as_of()
            ),
            None => println!("spend:    no cap, prices as of {}", client.prices_as_of()),
        }
        match &outcome {
            Ok(reply) => {
                println!("reply:    {:?} (from {})", reply.text.trim(), reply.model);
                println!(
                    "call:     {} ms, {} input + {} output tokens{}, ${:.6}, {} attempt(s){}",
                    reply.latency.as_millis(),
                    reply.input_tokens,
                    reply.output_tokens,
                    if reply.tokens_estimated {
                        " (estimated)"
                    } else {
                        ""
                    },
                    reply.cost_usd,
                    reply.attempts,
                    if reply.from_cache {
                        ", from the cache"
                    } else {
                        ""
                    },
                );
            }
            Err(error) => println!("call failed ({}): {error}", error.kind()),
        }
    }
    Ok(if outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILURE)
    })
}

async fn open_agent(global: &GlobalArgs) -> Result<askdb::agent::Agent> {
    let config = askdb::llm::ProviderConfig::from_env()?;
    let client = askdb::llm::ModelClient::from_config(&config)?;
    let gate = open_gate(global).await?;
    Ok(askdb::agent::Agent::new(gate, client).await?)
}

async fn ask_command(
    global: &GlobalArgs,
    question: &str,
    baseline: bool,
    explain: bool,
) -> Result<ExitCode> {
    use askdb::agent::{AskOptions, Decision, Mode};
    let agent = open_agent(global).await?;
    let options = AskOptions {
        mode: if baseline {
            Mode::Baseline
        } else {
            Mode::Agent
        },
        explain,
        ..AskOptions::default()
    };
    let result = agent.ask(question, &options).await?;
    if global.json {
        print_json(&result)?;
    } else {
        print!("{}", askdb::agent::render_text(&result));
    }
    Ok(exit_for(result.decision != Decision::GiveUp))
}

async fn plan_command(global: &GlobalArgs, question: &str) -> Result<ExitCode> {
    // Planning needs no model: build the index over the gate and select.
    let gate = open_gate(global).await?;
    let cards = askdb::schema::cards::build_cards(&gate).await?;
    let index = askdb::linking::SchemaIndex::build(&gate, &cards).await?;
    let plan = askdb::agent::plan(
        &gate,
        &cards,
        &index,
        question,
        &askdb::agent::AskOptions::default(),
    )?;
    if global.json {
        print_json(&plan)?;
    } else {
        print!("{}", askdb::agent::render_plan(&plan));
    }
    Ok(ExitCode::SUCCESS)
}

async fn eval_command(command: EvalCommand, global: &GlobalArgs) -> Result<ExitCode> {
    use askdb::eval::runner;
    match command {
        EvalCommand::Guard { write } => eval_guard(write, global.json).await,
        EvalCommand::Run {
            set,
            mode,
            limit,
            sample,
            seed,
            resume,
            runs_dir,
        } => {
            let modes = match mode.as_str() {
                "both" => vec![askdb::agent::Mode::Agent, askdb::agent::Mode::Baseline],
                other => vec![other
                    .parse::<askdb::agent::Mode>()
                    .map_err(anyhow::Error::msg)?],
            };
            let db = (global.db != "demo").then(|| global.db.clone());
            let modes_len = modes.len();
            let settings = runner::RunSettings {
                set,
                modes,
                limit,
                sample,
                seed,
                db,
                row_cap: runner::EVAL_ROW_CAP,
                budget_tokens: askdb::linking::DEFAULT_BUDGET_TOKENS,
                k: askdb::linking::DEFAULT_K,
                temperature: 0.0,
                explain: false,
                max_attempts: askdb::agent::MAX_ATTEMPTS,
                shared_first_reply: modes_len > 1,
            };
            let config = askdb::llm::ProviderConfig::from_env()?;
            let client = askdb::llm::ModelClient::from_config(&config)?;
            let run = runner::run(settings, client, &runs_dir, resume).await?;
            let summary = runner::write_summary(&run)?;
            print!("{}", runner::render_report(&summary));
            println!("run folder: {}", run.display());
            Ok(ExitCode::SUCCESS)
        }
        EvalCommand::Regrade { run } => {
            let summary = runner::regrade(&run).await?;
            print!("{}", runner::render_report(&summary));
            Ok(ExitCode::SUCCESS)
        }
        EvalCommand::Gate { run, config } => {
            let config = askdb::eval::gate::load_config(&config).map_err(anyhow::Error::msg)?;
            let checks = askdb::eval::gate::check_run(&run, &config)
                .await
                .map_err(anyhow::Error::msg)?;
            if global.json {
                print_json(&checks)?;
            } else {
                for check in &checks {
                    let mark = if check.passed { "pass" } else { "FAIL" };
                    println!("{mark}  {}: {}", check.name, check.detail);
                }
            }
            Ok(exit_for(checks.iter().all(|check| check.passed)))
        }
        EvalCommand::Report { run } => {
            let path = run.join("report.md");
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        EvalCommand::Publish { run } => {
            let written = askdb::eval::results::publish_run(&run).map_err(anyhow::Error::msg)?;
            println!("wrote {} and the README results table", written.display());
            Ok(ExitCode::SUCCESS)
        }
        EvalCommand::Linking { tables, questions } => {
            let report = match (tables, questions) {
                (Some(tables), Some(questions)) => askdb::linking::eval::evaluate_spider(
                    &tables,
                    &questions,
                    &askdb::linking::eval::DEFAULT_KS,
                )?,
                (None, None) => {
                    let gate = open_gate(global).await?;
                    let cards = askdb::schema::cards::build_cards(&gate).await?;
                    let index = askdb::linking::SchemaIndex::build(&gate, &cards).await?;
                    let items = askdb::linking::eval::demo_gold_items()?;
                    askdb::linking::eval::evaluate_items(
                        &index,
                        &items,
                        &askdb::linking::eval::DEFAULT_KS,
                    )
                }
                _ => {
                    anyhow::bail!("give both --tables and --questions, or neither for the demo set")
                }
            };
            if global.json {
                print_json(&report)?;
            } else {
                println!("{report}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn exit_for(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_REFUSED)
    }
}
