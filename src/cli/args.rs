//! The command line as clap parses it: raw flags only. [`super::config`] resolves them
//! into settings before any work starts; nothing here opens a database or calls a model.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "askdb",
    version,
    about = "Ask a SQL database questions, safely.",
    after_help = "Examples:\n  askdb serve --local-model                    the web page on http://127.0.0.1:8080 over the demo, with a local model\n  askdb ask \"How many bills were voided in 2025?\"\n  askdb sql run \"SELECT count(*) FROM bills\"\n  askdb --db postgres://askdb_ro@127.0.0.1/shop schema tables"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args)]
pub struct GlobalArgs {
    /// Database: `demo` (default), `sqlite:PATH`, a .sqlite/.db path, postgres://..., or mysql://... (also mariadb://)
    #[arg(
        long,
        global = true,
        env = "ASKDB_DATABASE_URL",
        default_value = "demo"
    )]
    pub db: String,
    /// Print stable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Schema notes for this database (TOML): descriptions, restricted columns, hidden tables.
    #[arg(long, global = true, env = "ASKDB_NOTES")]
    pub notes: Option<PathBuf>,
    /// Row cap forced into every query's LIMIT.
    #[arg(long, global = true, env = "ASKDB_ROW_CAP", default_value_t = crate::gate::guard::DEFAULT_ROW_CAP)]
    pub row_cap: u64,
    /// Statement timeout in milliseconds.
    #[arg(
        long,
        global = true,
        env = "ASKDB_STATEMENT_TIMEOUT_MS",
        default_value_t = 5000
    )]
    pub timeout_ms: u64,
}

#[derive(Subcommand)]
pub enum Command {
    /// Look at the database's tables.
    #[command(after_help = "Example:\n  askdb schema describe bills")]
    Schema {
        #[command(subcommand)]
        command: SchemaCommand,
    },
    /// Check or run SQL through the gate.
    #[command(
        after_help = "Example:\n  askdb sql run \"SELECT status, count(*) FROM bills GROUP BY status\""
    )]
    Sql {
        #[command(subcommand)]
        command: SqlCommand,
    },
    /// The embedded demo database.
    #[command(after_help = "Example:\n  askdb demo build --out shop.sqlite")]
    Demo {
        #[command(subcommand)]
        command: DemoCommand,
    },
    /// Prepare a PostgreSQL database for askdb.
    #[command(
        after_help = "Example:\n  askdb db setup --admin-url postgres://postgres@127.0.0.1:5432/postgres"
    )]
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Ask a question in plain English.
    #[command(
        after_help = "Each step (tables chosen, SQL written, guard verdict, rows or the error, each repair) is written on stderr as it happens; --quiet leaves it out.\n\nExample:\n  askdb ask \"What was the total billed per month in 2025?\""
    )]
    Ask {
        question: String,
        /// One attempt, no repair, no diagnostic (for comparison).
        #[arg(long)]
        baseline: bool,
        /// Skip the model-written explanation (one call fewer).
        #[arg(long)]
        no_explain: bool,
        /// How the agent asks: key=value pairs over the defaults (see `agent::strategy`),
        /// e.g. `n=1` or `reply=json,alias=on`.
        #[arg(long, env = "ASKDB_STRATEGY", default_value = "")]
        strategy: String,
        /// Do not write each step on stderr as it happens.
        #[arg(long, short = 'q')]
        quiet: bool,
    },
    /// Show what askdb would do with a question, before any model call.
    #[command(after_help = "Example:\n  askdb plan \"Top 5 customers by revenue\"")]
    Plan { question: String },
    /// Evaluations: model-free checks and real-model runs.
    #[command(after_help = "Example:\n  askdb eval run --set spider --sample 150 --mode both")]
    Eval {
        #[command(subcommand)]
        command: EvalCommand,
    },
    /// Serve the gate's four tools to an MCP client over stdio (stdout carries the
    /// protocol; messages go to stderr).
    #[command(
        after_help = "Example (an MCP client's server command):\n  askdb --db postgres://askdb_ro@127.0.0.1/shop mcp"
    )]
    Mcp,
    /// Serve the HTTP API and the web page (the model comes from ASKDB_PROVIDER, ...,
    /// or `--local-model` starts one on this machine; without one, the page offers the
    /// local model and everything but questions works).
    #[command(
        after_help = "Examples:\n  askdb serve --local-model          answer with a local model, no key (first start downloads 1.1 GB)\n  askdb serve --addr 127.0.0.1:8080"
    )]
    Serve(crate::server::ServeArgs),
    /// The query log `askdb serve` writes (one row per answered question).
    #[command(
        after_help = "Example:\n  askdb log stats --from postgres://postgres@127.0.0.1:5432/askdb_demo"
    )]
    Log {
        #[command(subcommand)]
        command: LogCommand,
    },
    /// The language model askdb asks (configured by ASKDB_PROVIDER, ASKDB_MODEL, ...).
    #[command(after_help = "Example:\n  askdb model check")]
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Print a shell completion script on stdout.
    #[command(
        after_help = "Examples:\n  askdb completions bash > ~/.local/share/bash-completion/completions/askdb\n  askdb completions zsh > \"${fpath[1]}/_askdb\"\n  askdb completions fish > ~/.config/fish/completions/askdb.fish"
    )]
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Print the configured provider and model, then make one tiny call and report its
    /// latency, tokens and cost.
    #[command(
        after_help = "Example:\n  ASKDB_PROVIDER=anthropic ANTHROPIC_API_KEY=sk-ant-... askdb model check"
    )]
    Check,
}

/// The sets `askdb eval run` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SetName {
    Demo,
    Chinook,
    Spider,
    Defog,
}

impl SetName {
    pub fn as_str(self) -> &'static str {
        match self {
            SetName::Demo => "demo",
            SetName::Chinook => "chinook",
            SetName::Spider => "spider",
            SetName::Defog => "defog",
        }
    }
}

/// Which modes `askdb eval run` asks each question in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeChoice {
    /// The agent: repairs, diagnostic, up to three attempts.
    Agent,
    /// The agent's first attempt alone.
    Baseline,
    /// The reference prompt: every table with three sample rows, one attempt.
    Plain,
    /// Agent and baseline (the baseline replays the agent's first reply).
    Both,
    /// Agent, baseline and plain.
    All,
}

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Every external gold query must pass the guard and keep its result when re-rendered.
    #[command(after_help = "Example:\n  askdb eval guard --write")]
    Guard {
        /// Write evals/results/guard_equivalence.json and regenerate the README table
        /// (run from the repository's root, or give --repo).
        #[arg(long)]
        write: bool,
        /// The askdb repository whose results and README --write updates.
        #[arg(long, default_value = ".")]
        repo: PathBuf,
    },
    /// Ask a golden set through the agent and grade it by execution.
    #[command(
        after_help = "Examples:\n  askdb eval run --set demo --mode both\n  askdb eval run --set spider --sample 150 --seed 7 --mode all"
    )]
    Run {
        /// The set to ask.
        #[arg(long, value_enum, required_unless_present = "questions")]
        set: Option<SetName>,
        /// A custom set instead: one JSON question per line (see `eval::runner::EvalItem`).
        #[arg(long, conflicts_with = "set")]
        questions: Option<PathBuf>,
        /// Which modes to ask each question in.
        #[arg(long, value_enum, default_value = "both")]
        mode: ModeChoice,
        /// How the agent asks: key=value pairs over the defaults (see `agent::strategy`),
        /// e.g. `n=1` or `reply=json,alias=on`; `json-actions` is the strategy before the
        /// redesign.
        #[arg(long, default_value = "")]
        strategy: String,
        #[command(flatten)]
        which: WhichQuestions,
        /// Resume an interrupted run folder.
        #[arg(long)]
        resume: Option<PathBuf>,
        /// Where run folders go.
        #[arg(long, default_value = "evals/runs")]
        runs_dir: PathBuf,
    },
    /// Every candidate of each question's first round (the agent's greedy reply, sampled
    /// replies, the plain prompt's reply), run and graded, to measure how to choose among
    /// them (`scripts/selection-figures.py POOL`).
    #[command(
        after_help = "Example:\n  askdb eval pool --set spider --sample 100 --seed 7 --sample-offset 150 -n 5"
    )]
    Pool {
        #[arg(long, value_enum)]
        set: SetName,
        /// The agent's strategy over the defaults (its prompt).
        #[arg(long, default_value = "")]
        strategy: String,
        /// Sampled replies per question.
        #[arg(short = 'n', long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=8))]
        candidates: u32,
        /// Temperature of the sampled replies.
        #[arg(long, default_value_t = 0.7)]
        temperature: f32,
        /// Another strategy whose greedy reply joins the pool (repeatable), e.g.
        /// `--variant hints=fit`.
        #[arg(long = "variant")]
        variants: Vec<String>,
        #[command(flatten)]
        which: WhichQuestions,
        /// Resume an interrupted pool folder.
        #[arg(long)]
        resume: Option<PathBuf>,
        #[arg(long, default_value = "evals/runs")]
        runs_dir: PathBuf,
    },
    /// Re-score a finished run without calling the model.
    #[command(after_help = "Example:\n  askdb eval regrade evals/runs/demo-20261201-001755")]
    Regrade { run: PathBuf },
    /// The CI gate: database unchanged, nothing unsafe ran, accuracy within tolerance.
    #[command(after_help = "Example:\n  askdb eval gate evals/runs/demo-20261201-001755")]
    Gate {
        run: PathBuf,
        #[arg(long, default_value = "evals/gate.toml")]
        config: PathBuf,
        /// The folder the config's paths are relative to.
        #[arg(long, default_value = ".")]
        repo: PathBuf,
    },
    /// Print a run's report.
    #[command(after_help = "Example:\n  askdb eval report evals/runs/demo-20261201-001755")]
    Report { run: PathBuf },
    /// How the answer checks did in a run, without the model: wrong answers shown with a
    /// warning, right answers wrongly flagged, per mode.
    #[command(
        after_help = "Examples:\n  askdb eval flags evals/runs/demo-20261201-001755\n  askdb eval flags --gold spider"
    )]
    Flags {
        #[arg(required_unless_present = "gold")]
        run: Option<PathBuf>,
        /// Instead of a run: check every gold answer of a set (right by construction),
        /// so the count is of right answers wrongly flagged.
        #[arg(long, conflicts_with = "run")]
        gold: Option<String>,
        /// With --gold: the first N questions only.
        #[arg(long, requires = "gold")]
        limit: Option<usize>,
    },
    /// Copy a run's summary into evals/results/ and regenerate the README results table.
    #[command(after_help = "Example:\n  askdb eval publish evals/runs/demo-20261201-001755")]
    Publish {
        run: PathBuf,
        /// The askdb repository to publish into.
        #[arg(long, default_value = ".")]
        repo: PathBuf,
    },
    /// Linking recall without a model: Spider/BIRD tables.json + questions, or our demo set.
    #[command(
        after_help = "Examples:\n  askdb eval linking\n  askdb eval linking --tables ../shared/data/spider/tables.json --questions ../shared/data/spider/dev.json"
    )]
    Linking {
        #[arg(long, requires = "questions")]
        tables: Option<PathBuf>,
        #[arg(long, requires = "tables")]
        questions: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub enum SchemaCommand {
    /// List the visible tables with descriptions and row counts.
    #[command(after_help = "Example:\n  askdb --db sqlite:shop.db schema tables --json")]
    Tables,
    /// Show one table's columns and keys.
    #[command(after_help = "Example:\n  askdb schema describe bills")]
    Describe { table: String },
    /// Show a few rows of a table (text cut to 40 characters; restricted columns never shown).
    #[command(after_help = "Example:\n  askdb schema sample customers -n 5")]
    Sample {
        table: String,
        #[arg(short = 'n', long, default_value_t = 3)]
        rows: u32,
    },
    /// Write the live schema (tables, columns, types with precision and scale, keys) as
    /// the snapshot drift is checked against: beside the notes file, else in askdb's
    /// data directory.
    #[command(
        after_help = "Example:\n  askdb --db postgres://askdb_ro@127.0.0.1/shop schema snapshot --out shop.snapshot.json"
    )]
    Snapshot {
        /// Where to write it instead.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Compare the live schema with the snapshot and the notes. Exit 0 unchanged, 1
    /// drifted (each difference listed), 3 when it cannot tell.
    #[command(
        after_help = "Example (cron: mail when the schema moved):\n  askdb --db postgres://askdb_ro@127.0.0.1/shop schema drift --snapshot shop.snapshot.json || echo drifted"
    )]
    Drift {
        /// The snapshot to compare with (default: where `schema snapshot` writes it).
        #[arg(long)]
        snapshot: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub enum LogCommand {
    /// What to watch in the query log: error types by frequency, give-up and refusal
    /// rates, mean attempts per success by day, runs of zero-row answers.
    #[command(
        after_help = "Example:\n  askdb log stats --from postgres://postgres@127.0.0.1:5432/shop"
    )]
    Stats {
        /// A URL that may read the log: a PostgreSQL URL (the administrator's; the log
        /// role may only insert) or a SQLite log file. Default: askdb's own SQLite log,
        /// for SQLite databases and the demo.
        #[arg(long, env = "ASKDB_LOG_READ_URL", hide_env_values = true)]
        from: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum SqlCommand {
    /// Check a statement with the guard only; reads stdin when no SQL is given.
    #[command(
        after_help = "Examples:\n  askdb sql check \"SELECT * FROM bills\"\n  askdb sql check --batch statements.sql --json"
    )]
    Check {
        sql: Option<String>,
        /// Check each line of FILE as its own statement; prints one JSON verdict per line.
        #[arg(long, conflicts_with = "sql")]
        batch: Option<PathBuf>,
    },
    /// Run a statement through the whole gate (guard, read-only connection, row cap).
    #[command(
        after_help = "Example:\n  askdb sql run \"SELECT status, count(*) FROM bills GROUP BY status\""
    )]
    Run { sql: String },
}

#[derive(Subcommand)]
pub enum DemoCommand {
    /// Write the demo database to a SQLite file.
    #[command(after_help = "Example:\n  askdb demo build --out shop.sqlite")]
    Build {
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
pub enum DbCommand {
    /// Create (or refresh) the demo database, the query log and the askdb_ro and askdb_log
    /// roles, then prove both roles. Idempotent. Passwords come from ASKDB_RO_PASSWORD and
    /// ASKDB_LOG_PASSWORD, or are generated and printed once.
    #[command(
        after_help = "Example:\n  askdb db setup --admin-url postgres://postgres@127.0.0.1:5432/postgres --database askdb_demo"
    )]
    Setup {
        /// A superuser URL (any database), e.g. postgres://postgres@127.0.0.1:5432/postgres
        #[arg(long, env = "ASKDB_ADMIN_URL", hide_env_values = true)]
        admin_url: String,
        /// The database to create or refresh.
        #[arg(long, default_value = crate::admin::DEFAULT_DATABASE)]
        database: String,
    },
}

/// Which questions of a set an evaluation asks (`eval run`, `eval pool`).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct WhichQuestions {
    /// Only the first N questions (after sampling).
    #[arg(long)]
    pub limit: Option<usize>,
    /// A fixed random sample of N questions.
    #[arg(long)]
    pub sample: Option<usize>,
    /// Seed of the sample.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Skip the first K questions of the seeded shuffle: `--sample 150 --seed 7
    /// --sample-offset 150` is a second sample that shares no question with the first
    /// (a tuning set beside a held-out one).
    #[arg(long, default_value_t = 0, requires = "sample")]
    pub sample_offset: usize,
}

impl WhichQuestions {
    /// The seeded sample these flags ask for (the limit applies after it).
    pub fn sampling(&self) -> crate::eval::runner::Sampling {
        crate::eval::runner::Sampling {
            size: self.sample,
            seed: self.seed,
            offset: self.sample_offset,
        }
    }
}
