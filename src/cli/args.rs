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
        /// Ask in a conversation kept in askdb's data directory: `new` starts one (its id
        /// is printed), an id an earlier answer printed continues it as a follow-up.
        #[arg(long, value_name = "ID|new")]
        conversation: Option<String>,
    },
    /// An interactive session: each line a question, each question a follow-up of the
    /// ones before it (line editing and history; /new, /sql, /help, /quit).
    #[command(
        after_help = "Each answer goes to stdout and its steps to stderr, as for `askdb ask`; the history is kept in askdb's data directory.\n\nExamples:\n  askdb chat\n  askdb --db postgres://askdb_ro@127.0.0.1/shop chat --no-explain\n  askdb chat --conversation 0123456789abcdef0123456789abcdef"
    )]
    Chat {
        /// One attempt, no repair, no diagnostic (for comparison).
        #[arg(long)]
        baseline: bool,
        /// Skip the model-written explanation (one call fewer).
        #[arg(long)]
        no_explain: bool,
        /// How the agent asks: key=value pairs over the defaults (see `agent::strategy`).
        #[arg(long, env = "ASKDB_STRATEGY", default_value = "")]
        strategy: String,
        /// Do not write each step on stderr as it happens.
        #[arg(long, short = 'q')]
        quiet: bool,
        /// Continue a conversation an earlier `askdb ask --conversation` or chat printed.
        #[arg(long, value_name = "ID")]
        conversation: Option<String>,
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
        after_help = "Examples:\n  askdb serve --local-model          answer with a local model, no key (first start downloads 1.1 GB)\n  askdb serve --addr 127.0.0.1:8080\n  askdb serve --addr 0.0.0.0:8080 --trusted-proxy 10.0.0.5 --allowed-host askdb.example.com\n                                     behind oauth2-proxy at 10.0.0.5: its X-Forwarded-User signs in users `askdb users add` made"
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
    /// Verified examples: questions a person confirmed, with the SQL that answered them,
    /// kept per database in askdb's data directory. Similar questions get them as worked
    /// examples; the same question is answered by running the verified SQL again.
    #[command(
        after_help = "Examples:\n  askdb examples add \"How many bills were voided?\" \"SELECT count(*) FROM bills WHERE status = 'VOID'\" --verified-by asha\n  askdb examples import team-examples.jsonl --verified-by asha\n  askdb examples list\n  askdb examples list --caused-wrong --state-url postgres://askdb_state@db.internal/askdb\n  askdb examples export > examples.jsonl"
    )]
    Examples {
        /// The state replicas share (`askdb serve --state-url`): the examples, and the
        /// answers marked wrong, of every replica. Default: askdb's data directory.
        #[arg(long, env = "ASKDB_STATE_URL", hide_env_values = true, global = true)]
        state_url: Option<String>,
        #[command(subcommand)]
        command: ExamplesCommand,
    },
    /// The language model askdb asks (configured by ASKDB_PROVIDER, ASKDB_MODEL, ...).
    #[command(after_help = "Example:\n  askdb model check")]
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// The users `askdb serve` signs in: once one exists, every request but health and
    /// the page needs `Authorization: Bearer TOKEN`.
    #[command(
        after_help = "Examples:\n  askdb users add ana\n  askdb users --state-url postgres://askdb_state:PASSWORD@db:5432/askdb_demo add ana"
    )]
    Users {
        /// The state replicas share (`askdb serve --state-url`): the users are then that
        /// state's, the same for every replica; one added or revoked is taken or
        /// refused by every replica within seconds.
        #[arg(long, env = "ASKDB_STATE_URL", hide_env_values = true)]
        state_url: Option<String>,
        #[command(subcommand)]
        command: UsersCommand,
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
    /// SParC's multi-turn dev set, asked as conversations in three modes side by side
    /// (agent, plain, alone; `--mode` does not apply).
    Sparc,
}

impl SetName {
    pub fn as_str(self) -> &'static str {
        match self {
            SetName::Demo => "demo",
            SetName::Chinook => "chinook",
            SetName::Spider => "spider",
            SetName::Defog => "defog",
            SetName::Sparc => "sparc",
        }
    }
}

/// Where `askdb eval run`'s questions find verified examples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExamplesChoice {
    None,
    LeaveOneOut,
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
    /// Agent and plain (what `--through process` can ask: no baseline replay).
    AgentPlain,
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
        after_help = "Examples:\n  askdb eval run --set demo --mode both\n  askdb eval run --set spider --sample 150 --seed 7 --mode all\n  askdb eval run --set sparc --sample 100 --seed 7"
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
        /// Where questions find verified examples: none, or leave-one-out (the other
        /// questions of each one's database, copies of its gold SQL left out). Compare a
        /// run with them to one without with `askdb eval compare`.
        #[arg(long, value_enum, default_value = "none")]
        examples: ExamplesChoice,
        /// Where the agent is asked: in the harness (one warm agent per database), or
        /// one `askdb ask --json` process per question, as a user or a script runs it
        /// (the latency is then the process's wall time).
        #[arg(long, value_enum, default_value = "harness")]
        through: crate::eval::runner::AskPath,
        /// Resume an interrupted run folder.
        #[arg(long)]
        resume: Option<PathBuf>,
        /// Where run folders go.
        #[arg(long, default_value = "evals/runs")]
        runs_dir: PathBuf,
    },
    /// The agent of one run against the agent of another on the same questions, paired,
    /// with a bootstrap interval (e.g. with verified examples against without); `--json`
    /// adds both runs' settings and the ids of the questions each alone got right.
    /// `--mode baseline` pairs the first attempts instead (runs asked with
    /// `--mode baseline`, one knob of the first attempt against another).
    #[command(
        after_help = "Example:\n  askdb eval compare evals/runs/spider/20261205-with evals/runs/spider/20261205-without"
    )]
    Compare {
        run: PathBuf,
        other: PathBuf,
        /// Which mode's records to pair: agent, baseline or plain.
        #[arg(long, default_value = "agent")]
        mode: crate::agent::Mode,
    },
    /// Copy Spider's dev databases from their SQLite files onto a MySQL or MariaDB server
    /// (databases `spider_<name>`, replaced when present), to ask Spider there with
    /// `askdb --db mysql://... eval run --set spider`.
    #[command(after_help = "Example:\n  askdb eval copy-spider --to mysql://root@127.0.0.1:3306/")]
    CopySpider {
        /// The server, as its administrator.
        #[arg(long)]
        to: String,
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
    /// Verified-example retrieval without a model: each Spider dev question held out,
    /// the others of its database as examples (copies of its gold SQL left out); how
    /// often each weighing's best example reads the gold's tables, and how often the
    /// direct re-run fires and returns the gold's rows.
    #[command(after_help = "Example:\n  askdb eval example-retrieval")]
    ExampleRetrieval,
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
pub enum UsersCommand {
    /// Add a user and print its token, once: askdb keeps only its SHA-256.
    #[command(
        after_help = "Example:\n  askdb users add ana\n  askdb users add ben --policy sales"
    )]
    Add {
        /// Letters, digits, '.', '-' or '_'.
        name: String,
        /// The user's policy, which can only narrow the notes: a name (read from
        /// policies/NAME.toml beside the notes file, or in askdb's data directory) or a
        /// path to a TOML file. Checked when askdb serve starts.
        #[arg(long)]
        policy: Option<String>,
    },
    /// List the users, revoked ones too (never their tokens).
    #[command(after_help = "Example:\n  askdb users list")]
    List,
    /// Revoke a user's token; a running server refuses it from the next request (with
    /// --state-url, every replica within seconds).
    #[command(
        after_help = "Examples:\n  askdb users revoke ana\n  askdb users --state-url postgres://askdb_state:PASSWORD@db:5432/askdb_demo revoke ana"
    )]
    Revoke { name: String },
    /// Copy this machine's users file into the shared state (--state-url): names,
    /// token hashes, policies and revocations; their tokens keep working. Names the
    /// state already has are left as they are there, except that a revocation in the
    /// file is carried over; a name the state lists as revoked is copied revoked. One
    /// transaction: an error copies nothing.
    #[command(
        after_help = "Example:\n  askdb users --state-url postgres://askdb_state:PASSWORD@db:5432/askdb_demo import"
    )]
    Import,
}

#[derive(Subcommand)]
pub enum LogCommand {
    /// What to watch in the query log: error types by frequency, give-up and refusal
    /// rates, mean attempts per success by day, runs of zero-row answers.
    #[command(
        after_help = "Examples:\n  askdb log stats --from postgres://postgres@127.0.0.1:5432/shop\n  askdb log stats --user ana"
    )]
    Stats {
        /// A URL that may read the log: a PostgreSQL URL (the administrator's; the log
        /// role may only insert) or a SQLite log file. Default: askdb's own SQLite log,
        /// for SQLite databases and the demo.
        #[arg(long, env = "ASKDB_LOG_READ_URL", hide_env_values = true)]
        from: Option<String>,
        /// Only the questions this user asked (signed in to `askdb serve` by token or
        /// by a trusted proxy).
        #[arg(long)]
        user: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum ExamplesCommand {
    /// Save a question with the SQL that answers it; the SQL must pass the gate.
    #[command(
        after_help = "Example:\n  askdb examples add \"Revenue in 2025\" \"SELECT sum(total_amt) FROM bills WHERE status <> 'VOID'\" --verified-by asha --notes \"VOID bills never count\""
    )]
    Add {
        question: String,
        sql: String,
        /// Who confirmed it (default: $USER).
        #[arg(long, env = "ASKDB_VERIFIED_BY")]
        verified_by: Option<String>,
        /// What a reader should know ("revenue excludes refunds").
        #[arg(long)]
        notes: Option<String>,
    },
    /// List this database's examples, set-aside ones with the reason (each is checked
    /// against today's schema first).
    #[command(
        after_help = "Examples:\n  askdb examples list --json\n  askdb examples list --unused-days 90\n  askdb examples list --caused-wrong"
    )]
    List {
        /// Only the examples in use that no question logged in the last N days used
        /// (verified before then): candidates to prune.
        #[arg(long, conflicts_with = "caused_wrong")]
        unused_days: Option<u32>,
        /// Only the examples that answers a person marked Wrong used, the most often
        /// blamed first, with how many and the latest such question: candidates to
        /// check and remove.
        #[arg(long)]
        caused_wrong: bool,
        /// With --unused-days on PostgreSQL: a URL that may read the query log (as for
        /// `askdb log stats --from`); SQLite databases use askdb's own log.
        #[arg(long, env = "ASKDB_LOG_READ_URL", hide_env_values = true)]
        log_from: Option<String>,
    },
    /// Remove one example by its id.
    #[command(after_help = "Example:\n  askdb examples remove 7")]
    Remove { id: i64 },
    /// Import examples from JSONL (one object a line: question, sql, and optionally
    /// verified_by, notes) or CSV (a header naming the same columns). Nothing is saved
    /// when a line is bad, unless --skip-bad.
    #[command(
        after_help = "Example:\n  askdb examples import team-examples.csv --verified-by asha"
    )]
    Import {
        file: PathBuf,
        /// Who confirmed the lines that do not say (default: $USER).
        #[arg(long, env = "ASKDB_VERIFIED_BY")]
        verified_by: Option<String>,
        /// The file's format (default: by its extension, `.csv` or JSONL).
        #[arg(long, value_enum)]
        format: Option<ExampleFormat>,
        /// Save the good lines and report the bad ones, instead of saving nothing.
        #[arg(long)]
        skip_bad: bool,
    },
    /// Write this database's examples in use as JSONL (what `import` reads).
    #[command(after_help = "Example:\n  askdb examples export --out examples.jsonl")]
    Export {
        /// Where to write them (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// The formats `askdb examples import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExampleFormat {
    Jsonl,
    Csv,
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
    /// roles (users on MySQL and MariaDB), then prove both roles; on PostgreSQL also the
    /// replicas' shared state (schema and role askdb_state, for `serve --state-url`).
    /// Idempotent. Passwords come from ASKDB_RO_PASSWORD, ASKDB_LOG_PASSWORD and
    /// ASKDB_STATE_PASSWORD, or are generated and printed once.
    #[command(
        after_help = "Example:\n  askdb db setup --admin-url postgres://postgres@127.0.0.1:5432/postgres --database askdb_demo"
    )]
    Setup {
        /// A superuser URL (any database), e.g. postgres://postgres@127.0.0.1:5432/postgres
        /// or mysql://root@127.0.0.1:3306/
        #[arg(long, env = "ASKDB_ADMIN_URL", hide_env_values = true)]
        admin_url: String,
        /// The database to create or refresh.
        #[arg(long, default_value = crate::admin::DEFAULT_DATABASE)]
        database: String,
        /// Create the example row-level security: USER sees only the suppliers of CITY
        /// (askdb sets the signed-in user as askdb.user); repeat for each user. With no
        /// user signed in, no supplier is visible.
        #[arg(long = "example-rls", value_name = "USER=CITY")]
        example_rls: Vec<crate::admin::UserCity>,
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
