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

/// A failure of askdb itself (exit 3), as opposed to a refused or failed query (exit 1).
const EXIT_REFUSED: u8 = 1;
const EXIT_FAILURE: u8 = 3;

fn main() -> ExitCode {
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

fn exit_for(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_REFUSED)
    }
}
