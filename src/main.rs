//! The askdb binary: parses the command line, runs the library's command, prints its
//! report (text, or JSON with `--json`) and maps how it ended to an exit code. The
//! commands themselves live in [`askdb::cli`].
//!
//! Exit codes: 0 success; 1 the statement was refused or failed (a structured error
//! was printed), a question was given up, or a check failed (`schema drift`: the schema
//! drifted); 2 bad usage (from clap, or a flag value that does not resolve); 3 askdb
//! could not do its job (database unreachable, bad URL, unreadable file).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use askdb::cli::{self, args::Cli, Exit, Output};
use clap::Parser;

const EXIT_REFUSED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_FAILURE: u8 = 3;

fn main() -> ExitCode {
    // reqwest is built without a TLS crypto provider of its own; install ring's first.
    askdb::llm::install_tls_provider();
    let cli = Cli::parse();
    let json = cli.global.json;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Room for the guard to check on the thread that asks (see gate::guard's runner).
        .thread_stack_size(askdb::gate::RUNTIME_STACK_BYTES)
        .build()
        .context("cannot start the runtime")
    {
        Ok(runtime) => runtime,
        Err(error) => return fail(&error),
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(output) => print(&output, json),
        Err(error) if error.is_usage() => {
            eprintln!("askdb: {error}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(error) => fail(&anyhow::Error::new(error)),
    }
}

/// Prints a command's report; a closed pipe (`askdb ... | head`) ends quietly.
fn print(output: &Output, json: bool) -> ExitCode {
    let text = if json {
        match serde_json::to_string_pretty(&output.json) {
            Ok(text) => format!("{text}\n"),
            Err(error) => return fail(&anyhow::Error::new(error).context("cannot print JSON")),
        }
    } else {
        output.text.clone()
    };
    if !(json && output.json.is_null()) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush());
    }
    match output.exit {
        Exit::Success => ExitCode::SUCCESS,
        Exit::Refused => ExitCode::from(EXIT_REFUSED),
        Exit::Failure => ExitCode::from(EXIT_FAILURE),
    }
}

fn fail(error: &anyhow::Error) -> ExitCode {
    eprintln!("askdb: {error:#}");
    ExitCode::from(EXIT_FAILURE)
}
