//! `askdb chat`: an interactive session over one database. Each line typed is a question,
//! asked as the next turn of one conversation; the conversation is kept in askdb's data
//! directory like `askdb ask --conversation`'s, so a script can continue it with that
//! flag. The live steps go to stderr as `askdb ask` writes them, the answer to stdout.
//! A line starting with `/` is one of the session's own commands ([`Command`]).
//!
//! Line editing and history come from rustyline; the history is kept in askdb's data
//! directory ([`HISTORY_FILE`]). Nothing typed ends the session but `/quit` or Ctrl-D:
//! an error (the model down, a question askdb cannot take, an expired conversation) is
//! printed and the next line is read. Ctrl-C at the prompt clears the line; while a
//! question is answered it stops that question and leaves the conversation as it was.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{Config, Editor};

use super::CliError;
use crate::agent::events::Observer;
use crate::agent::{Agent, AskOptions, Decision};
use crate::conversation::{ConversationError, ConversationId, ConversationStore, TurnLease};

/// The history's file in askdb's data directory.
pub const HISTORY_FILE: &str = "chat_history";

/// The most lines the history keeps.
const HISTORY_LINES: usize = 1_000;

/// What the session writes before each line it reads.
pub const PROMPT: &str = "askdb> ";

/// The session's own commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// The next question starts a new conversation.
    New,
    /// Shows the SQL of the last question.
    Sql,
    /// Lists the commands.
    Help,
    /// Ends the session (as Ctrl-D does).
    Quit,
}

impl Command {
    pub const ALL: [Command; 4] = [Command::New, Command::Sql, Command::Help, Command::Quit];

    /// The command as it is typed.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::New => "/new",
            Command::Sql => "/sql",
            Command::Help => "/help",
            Command::Quit => "/quit",
        }
    }

    fn summary(self) -> &'static str {
        match self {
            Command::New => "start a new conversation (the next question is not a follow-up)",
            Command::Sql => "show the SQL that answered the last question",
            Command::Help => "list these commands",
            Command::Quit => "end the session (Ctrl-D does too)",
        }
    }
}

/// One line as the session reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Nothing but blanks.
    Empty,
    Question(String),
    Command(Command),
    /// A `/word` that is no command.
    Unknown(String),
}

/// Reads one typed line.
pub fn parse(line: &str) -> Input {
    let line = line.trim();
    if line.is_empty() {
        return Input::Empty;
    }
    if !line.starts_with('/') {
        return Input::Question(line.to_string());
    }
    let word = line.split_whitespace().next().unwrap_or(line);
    match Command::ALL
        .into_iter()
        .find(|command| command.as_str().eq_ignore_ascii_case(word))
    {
        Some(command) => Input::Command(command),
        None => Input::Unknown(word.to_string()),
    }
}

/// The commands, one a line, as `/help` lists them.
pub fn help_text() -> String {
    Command::ALL
        .into_iter()
        .map(|command| format!("  {:<6} {}\n", command.as_str(), command.summary()))
        .collect()
}

/// The last question's end, for `/sql`.
struct Last {
    sql: Option<String>,
    decision: Decision,
}

/// A session's state between lines.
pub struct Session<'a> {
    agent: &'a Agent,
    store: Arc<dyn ConversationStore>,
    options: AskOptions,
    observer: &'a dyn Observer,
    /// The conversation the next question continues; None: it starts one.
    conversation: Option<ConversationId>,
    last: Option<Last>,
}

impl<'a> Session<'a> {
    /// A session asking `agent`, keeping its conversations in `store`, continuing
    /// `conversation` when given.
    pub fn new(
        agent: &'a Agent,
        store: Arc<dyn ConversationStore>,
        options: AskOptions,
        observer: &'a dyn Observer,
        conversation: Option<ConversationId>,
    ) -> Session<'a> {
        Session {
            agent,
            store,
            options,
            observer,
            conversation,
            last: None,
        }
    }

    /// Reads and answers lines until `/quit` or the end of input.
    pub async fn run(mut self) -> Result<(), CliError> {
        let history = history_path();
        let mut editor = open_editor(&history)?;
        eprintln!(
            "askdb chat on {}: type a question; /sql shows the last SQL, /new starts a new \
             conversation, /help lists the commands, /quit or Ctrl-D ends.",
            self.agent.gate().label()
        );
        loop {
            let (returned, line) = read_line(editor).await?;
            editor = returned;
            let line = match line {
                Ok(line) => line,
                // Ctrl-C at the prompt: the line is dropped, the session goes on.
                Err(ReadlineError::Interrupted) => continue,
                Err(ReadlineError::Eof) => break,
                Err(error) => return Err(CliError::Terminal(error.to_string())),
            };
            let input = parse(&line);
            if input != Input::Empty {
                remember(&mut editor, &history, line.trim());
            }
            match input {
                Input::Empty => {}
                Input::Command(Command::Quit) => break,
                Input::Command(command) => self.command(command),
                Input::Unknown(word) => {
                    eprintln!(
                        "askdb: {word} is not a command; these are:\n{}",
                        help_text()
                    )
                }
                Input::Question(question) => self.ask(&question).await,
            }
        }
        Ok(())
    }

    fn command(&mut self, command: Command) {
        match command {
            Command::New => {
                self.conversation = None;
                eprintln!("askdb: the next question starts a new conversation");
            }
            Command::Sql => match &self.last {
                None => eprintln!("askdb: no question was asked in this session yet"),
                Some(Last { sql: Some(sql), .. }) => print_out(&format!("{sql}\n")),
                Some(Last {
                    sql: None,
                    decision,
                }) => eprintln!(
                    "askdb: the last question ran no SQL (its decision: {})",
                    decision.as_str()
                ),
            },
            Command::Help => print_out(&help_text()),
            Command::Quit => {}
        }
    }

    /// Asks one question as the next turn; whatever goes wrong is printed, never raised.
    async fn ask(&mut self, question: &str) {
        let lease = match TurnLease::begin(&self.store, self.conversation.as_ref(), None).await {
            Ok(lease) => lease,
            Err(error) => {
                eprintln!("askdb: {error}");
                if matches!(error, ConversationError::NotFound { .. }) {
                    // Said, not done silently: the question was not asked.
                    self.conversation = None;
                    eprintln!("askdb: ask again to start a new conversation with it");
                }
                return;
            }
        };
        let asked =
            self.agent
                .ask_in_conversation(question, lease.context(), &self.options, self.observer);
        let result = tokio::select! {
            result = asked => result,
            () = interrupted() => {
                // The lease is dropped unfinished: the conversation is as it was.
                eprintln!("askdb: stopped; the conversation is as it was before the question");
                return;
            }
        };
        let mut result = match result {
            Ok(result) => result,
            Err(error) => {
                eprintln!("askdb: {error}");
                return;
            }
        };
        result.assumptions = crate::text::each_once(std::mem::take(&mut result.assumptions));
        let mut text = crate::agent::render_text(&result);
        if let Some(understood) = &result.understood_as {
            text.push_str(&format!("Understood as: {understood}\n"));
        }
        let (id, turn) = (lease.id().clone(), lease.number());
        lease.finish(&result).await;
        print_out(&text);
        eprintln!("askdb: conversation {id}, turn {turn}");
        self.conversation = Some(id);
        self.last = Some(Last {
            sql: result.sql,
            decision: result.decision,
        });
    }
}

/// The line editor with the saved history (none yet is fine).
fn open_editor(history: &std::path::Path) -> Result<Editor<(), FileHistory>, CliError> {
    let config = Config::builder()
        .max_history_size(HISTORY_LINES)
        .map_err(|error| CliError::Terminal(error.to_string()))?
        .history_ignore_dups(true)
        .map_err(|error| CliError::Terminal(error.to_string()))?
        .auto_add_history(false)
        .build();
    let mut editor: Editor<(), FileHistory> =
        Editor::with_config(config).map_err(|error| CliError::Terminal(error.to_string()))?;
    if history.exists() {
        if let Err(error) = editor.load_history(history) {
            eprintln!(
                "askdb: the history in {} cannot be read ({error}); starting without it",
                history.display()
            );
        }
    }
    Ok(editor)
}

/// Adds a line to the history and to its file; a file that cannot be written costs the
/// history, not the session.
fn remember(editor: &mut Editor<(), FileHistory>, history: &std::path::Path, line: &str) {
    if !matches!(editor.add_history_entry(line), Ok(true)) {
        return;
    }
    if let Some(dir) = history.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(error) = editor.append_history(history) {
        eprintln!(
            "askdb: the history cannot be saved in {} ({error})",
            history.display()
        );
    }
}

type Read = Result<String, ReadlineError>;

/// Reads one line on a blocking thread (the editor waits for the terminal), handing the
/// editor back with it.
async fn read_line(
    mut editor: Editor<(), FileHistory>,
) -> Result<(Editor<(), FileHistory>, Read), CliError> {
    tokio::task::spawn_blocking(move || {
        let line = editor.readline(PROMPT);
        (editor, line)
    })
    .await
    .map_err(|error| CliError::Terminal(error.to_string()))
}

/// Ctrl-C while a question is answered (the prompt reads its own). Never completes when
/// the signal cannot be listened for.
async fn interrupted() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Writes on stdout; a closed stdout loses the text, not the session.
fn print_out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

/// Where the history is kept.
pub fn history_path() -> PathBuf {
    crate::home::data_dir().join(HISTORY_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_questions_commands_or_unknown_commands() {
        assert_eq!(parse("   "), Input::Empty);
        assert_eq!(
            parse("  How many bills? "),
            Input::Question("How many bills?".to_string())
        );
        for command in Command::ALL {
            assert_eq!(parse(command.as_str()), Input::Command(command));
            assert_eq!(
                parse(&format!(" {} ", command.as_str().to_uppercase())),
                Input::Command(command)
            );
        }
        assert_eq!(parse("/sql please"), Input::Command(Command::Sql));
        assert_eq!(parse("/exit"), Input::Unknown("/exit".to_string()));
        assert_eq!(parse("/"), Input::Unknown("/".to_string()));
        let help = help_text();
        assert!(Command::ALL
            .into_iter()
            .all(|command| help.contains(command.as_str())));
    }
}
