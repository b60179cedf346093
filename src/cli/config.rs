//! The second stage of the command line: raw flags resolved into settings before any
//! work starts. A notes file is read and parsed here, the database URL is parsed here,
//! and the evaluation modes become typed values, so a bad value is a message and exit 2
//! or 3 before a database is opened or a model is called.

use std::path::PathBuf;
use std::time::Duration;

use super::args::{GlobalArgs, ModeChoice, SetName};
use super::CliError;
use crate::agent::strategy::Strategy;
use crate::agent::Mode;
use crate::database::{connect_gate, open_gate, DatabaseUrl};
use crate::eval::runner::{self, RunSettings};
use crate::gate::{Gate, GateOptions, OpeningGate};
use crate::schema::SchemaNotes;

/// The global settings every command shares.
#[derive(Debug, Clone)]
pub struct Settings {
    pub url: DatabaseUrl,
    pub gate: GateOptions,
    /// `--db` was given (or set in the environment) as something other than the demo.
    pub database_named: bool,
}

impl Settings {
    pub fn resolve(global: &GlobalArgs) -> Result<Settings, CliError> {
        let url: DatabaseUrl = global.db.parse()?;
        let notes = match &global.notes {
            Some(path) => {
                let text = super::read_file(path)?;
                let notes: SchemaNotes = toml::from_str(&text).map_err(|error| {
                    CliError::Settings(format!(
                        "notes file {} is not valid: {error}",
                        path.display()
                    ))
                })?;
                Some(notes)
            }
            None => None,
        };
        Ok(Settings {
            database_named: url != DatabaseUrl::Demo,
            url,
            gate: GateOptions {
                row_cap: global.row_cap,
                statement_timeout: Duration::from_millis(global.timeout_ms),
                notes,
                ..GateOptions::default()
            },
        })
    }

    pub async fn open_gate(&self) -> Result<Gate, CliError> {
        Ok(open_gate(&self.url, self.gate.clone()).await?)
    }

    /// The gate up to the database's answer; its catalogs are read when it is finished.
    pub async fn connect_gate(&self) -> Result<OpeningGate, CliError> {
        Ok(connect_gate(&self.url, self.gate.clone()).await?)
    }

    /// The row cap every query's LIMIT is held to.
    pub fn row_cap(&self) -> u64 {
        self.gate.row_cap
    }

    /// The settings of `askdb eval run`, from its flags.
    #[allow(clippy::too_many_arguments)]
    pub fn run_settings(
        &self,
        set: Option<SetName>,
        questions: Option<PathBuf>,
        mode: ModeChoice,
        strategy: &str,
        limit: Option<usize>,
        sampling: runner::Sampling,
        examples: runner::ExampleSource,
        ask_path: runner::AskPath,
    ) -> Result<RunSettings, CliError> {
        let modes = modes_of(mode);
        if !ask_path.is_harness() && modes.contains(&Mode::Baseline) {
            return Err(CliError::Settings(
                "--through process|serve asks the agent outside the harness, so the baseline \
                 cannot replay its first reply: use --mode agent, plain or agent-plain"
                    .to_string(),
            ));
        }
        if ask_path == runner::AskPath::Serve && !strategy.trim().is_empty() {
            return Err(CliError::Settings(
                "--through serve asks as `askdb serve` does, with the default strategy: leave \
                 --strategy out"
                    .to_string(),
            ));
        }
        let set = match (set, questions) {
            (_, Some(path)) => format!("file:{}", path.display()),
            (Some(set), None) => set.as_str().to_string(),
            // clap requires one of the two.
            (None, None) => SetName::Demo.as_str().to_string(),
        };
        let strategy = parse_strategy(strategy)?;
        Ok(RunSettings {
            strategy: strategy.to_string(),
            set,
            // With several modes the baseline replays the agent's first reply, so the
            // two differ by the loop alone.
            shared_first_reply: modes.contains(&Mode::Agent) && modes.contains(&Mode::Baseline),
            modes,
            limit,
            sample: sampling.size,
            seed: sampling.seed,
            sample_offset: sampling.offset,
            db: self.database_named.then(|| self.url.as_argument()),
            row_cap: runner::EVAL_ROW_CAP,
            budget_tokens: crate::linking::DEFAULT_BUDGET_TOKENS,
            k: crate::linking::DEFAULT_K,
            temperature: 0.0,
            explain: false,
            max_attempts: crate::agent::MAX_ATTEMPTS,
            examples,
            ask_path,
        })
    }
}

/// A `--strategy` value over the defaults; a bad one is a usage error.
pub fn parse_strategy(text: &str) -> Result<Strategy, CliError> {
    text.parse::<Strategy>()
        .map_err(|error| CliError::Settings(error.to_string()))
}

/// The agent modes a `--mode` choice asks each question in, in asking order.
pub fn modes_of(choice: ModeChoice) -> Vec<Mode> {
    match choice {
        ModeChoice::Agent => vec![Mode::Agent],
        ModeChoice::Baseline => vec![Mode::Baseline],
        ModeChoice::Plain => vec![Mode::Plain],
        ModeChoice::Both => vec![Mode::Agent, Mode::Baseline],
        ModeChoice::All => vec![Mode::Agent, Mode::Baseline, Mode::Plain],
        ModeChoice::AgentPlain => vec![Mode::Agent, Mode::Plain],
    }
}
