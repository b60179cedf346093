//! `askdb examples add|list|remove|import|export`: a person's hand on the library of
//! verified examples of the database `--db` names, kept in askdb's data directory (or,
//! with `--state-url`, in the store the replicas share). The checks are the library's
//! (`examples::save`, `examples::recheck`, `examples::wrong::caused_wrong`); this file
//! reads the arguments and files and words the reports.

use std::path::Path;

use serde::Serialize;

use super::args::{ExampleFormat, ExamplesCommand};
use super::{CliError, Exit, Output};
use crate::examples::import::{self, ExampleLine, FileFormat, LineError};
use crate::examples::{self, CausedWrong, Draft, Example, ExampleError, ExampleStore};
use crate::gate::Gate;

/// Runs one `askdb examples` command on the examples `store` keeps of `gate`'s database.
pub async fn run(
    gate: &Gate,
    store: &dyn ExampleStore,
    postgres: bool,
    command: ExamplesCommand,
) -> Result<Output, CliError> {
    match command {
        ExamplesCommand::Add {
            question,
            sql,
            verified_by,
            notes,
        } => {
            let draft = Draft {
                question,
                sql,
                verified_by: person(verified_by).ok_or_else(no_person)?,
                notes,
            };
            match examples::save(gate, store, &draft).await {
                Ok(saved) => {
                    let mut text = format!(
                        "saved example {}: {}\n  ran as: {}\n",
                        saved.example.id, saved.example.question, saved.example.sql
                    );
                    if !saved.replaced.is_empty() {
                        text.push_str(&format!("  replaces: {}\n", ids(&saved.replaced)));
                    }
                    Output::new(&saved, text, Exit::Success)
                }
                Err(error) => refused(error, "not saved"),
            }
        }
        ExamplesCommand::List {
            caused_wrong: true, ..
        } => {
            let blamed = examples::wrong::caused_wrong(gate, store).await?;
            let text = caused_wrong_text(&blamed, store);
            Output::new(&blamed, text, Exit::Success)
        }
        ExamplesCommand::List {
            unused_days: None, ..
        } => {
            let all = examples::recheck(gate, store).await?;
            let text = list_text(&all, store);
            Output::new(&all, text, Exit::Success)
        }
        ExamplesCommand::List {
            unused_days: Some(days),
            log_from,
            ..
        } => {
            let source = super::log_source(postgres, log_from, "--log-from")?;
            let since = crate::querylog::format_utc(
                std::time::SystemTime::now()
                    .checked_sub(std::time::Duration::from_secs(u64::from(days) * 86_400))
                    .unwrap_or(std::time::UNIX_EPOCH),
            );
            let used = crate::querylog::usage::examples_used_since(&source, &since).await?;
            let unused: Vec<Example> = examples::usable(gate, store)
                .await?
                .into_iter()
                .filter(|example| example.verified_at.as_str() < since.as_str())
                .filter(|example| !used.contains(&example.id))
                .collect();
            let mut text = format!(
                "{} example(s) in use that no question used since {since} (verified before then)\n",
                unused.len()
            );
            if !unused.is_empty() {
                text.push_str(&list_text(&unused, store));
            }
            Output::new(&unused, text, Exit::Success)
        }
        ExamplesCommand::Remove { id } => match examples::remove(gate, store, id).await {
            Ok(()) => Output::new(
                &serde_json::json!({"ok": true, "removed": id}),
                format!("removed example {id}\n"),
                Exit::Success,
            ),
            Err(error) => refused(error, "not removed"),
        },
        ExamplesCommand::Import {
            file,
            verified_by,
            format,
            skip_bad,
        } => import_file(gate, store, &file, person(verified_by), format, skip_bad).await,
        ExamplesCommand::Export { out } => {
            let usable = examples::usable(gate, store).await?;
            let jsonl = import::export_jsonl(&usable);
            let lines: Vec<ExampleLine> = usable.iter().map(ExampleLine::from).collect();
            match out {
                Some(path) => {
                    std::fs::write(&path, jsonl).map_err(|error| CliError::Read {
                        path: path.display().to_string(),
                        error,
                    })?;
                    Output::new(
                        &serde_json::json!({"ok": true, "path": path, "examples": lines.len()}),
                        format!("{} example(s) written to {}\n", lines.len(), path.display()),
                        Exit::Success,
                    )
                }
                None => Output::new(&lines, jsonl, Exit::Success),
            }
        }
    }
}

/// The person verifying: the flag, else the login name.
fn person(flag: Option<String>) -> Option<String> {
    flag.filter(|name| !name.trim().is_empty()).or_else(|| {
        ["USER", "LOGNAME"]
            .iter()
            .filter_map(|name| std::env::var(name).ok())
            .find(|name| !name.trim().is_empty())
    })
}

fn no_person() -> CliError {
    CliError::Settings(
        "name the person who verified the example with --verified-by (or ASKDB_VERIFIED_BY)"
            .to_string(),
    )
}

fn ids(ids: &[i64]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A refusal of the example itself (the guard's, a bad field, an unknown id) is exit 1
/// with the reason; a store that cannot be reached is askdb failing (exit 3).
fn refused(error: ExampleError, what: &str) -> Result<Output, CliError> {
    if let ExampleError::Store { .. } = error {
        return Err(error.into());
    }
    Output::new(
        &serde_json::json!({
            "ok": false,
            "error": error.to_string(),
            "reason": error.refusal_reason(),
        }),
        format!("{what}: {error}\n"),
        Exit::Refused,
    )
}

/// `--caused-wrong`: each example with how many answers marked wrong used it and the
/// latest of them, and how to remove it.
fn caused_wrong_text(blamed: &[CausedWrong], store: &dyn ExampleStore) -> String {
    if blamed.is_empty() {
        return format!(
            "no answer marked wrong used a verified example of this database ({})\n",
            store.describe()
        );
    }
    let mut text = String::new();
    for entry in blamed {
        let example = &entry.example;
        text.push_str(&format!(
            "{}  {}\n  {}\n  used by {} answer(s) marked wrong; latest \"{}\" by {} at {}\n",
            example.id,
            printable(&example.question),
            printable(&example.sql),
            entry.wrong_answers,
            printable(&entry.latest_question),
            printable(&entry.latest_marked_by),
            printable(&entry.latest_marked_at)
        ));
        if let Some(reason) = &example.set_aside {
            text.push_str(&format!("  SET ASIDE: {reason}\n"));
        }
    }
    text.push_str(&format!(
        "{} example(s) used by answers marked wrong; check each and remove a bad one with \
         `askdb examples remove ID`\n",
        blamed.len()
    ));
    text
}

/// `text` with each control character a space: a mark's question and name come from
/// whoever clicked Wrong, and must neither break the report's lines nor send escape
/// sequences to the operator's terminal.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn list_text(all: &[Example], store: &dyn ExampleStore) -> String {
    if all.is_empty() {
        return format!(
            "no verified examples for this database ({})\n",
            store.describe()
        );
    }
    let mut text = String::new();
    for example in all {
        let state = match &example.set_aside {
            Some(reason) => format!("  SET ASIDE: {reason}\n"),
            None => String::new(),
        };
        text.push_str(&format!(
            "{}  {}\n  {}\n  verified by {} at {}\n{state}",
            example.id, example.question, example.sql, example.verified_by, example.verified_at
        ));
        if let Some(notes) = &example.notes {
            text.push_str(&format!("  notes: {notes}\n"));
        }
    }
    let aside = all.iter().filter(|e| e.set_aside.is_some()).count();
    text.push_str(&format!(
        "{} example(s), {} in use, {aside} set aside\n",
        all.len(),
        all.len() - aside
    ));
    text
}

/// What an import did.
#[derive(Debug, Serialize)]
struct ImportReport {
    /// Whether anything was saved.
    saved: bool,
    imported: Vec<i64>,
    replaced: Vec<i64>,
    bad_lines: Vec<LineError>,
}

async fn import_file(
    gate: &Gate,
    store: &dyn ExampleStore,
    file: &Path,
    verified_by: Option<String>,
    format: Option<ExampleFormat>,
    skip_bad: bool,
) -> Result<Output, CliError> {
    let unreadable = |error: std::io::Error| CliError::Read {
        path: file.display().to_string(),
        error,
    };
    let size = std::fs::metadata(file).map_err(unreadable)?.len();
    if size > import::MAX_FILE_BYTES {
        return Err(CliError::Settings(format!(
            "{} is {size} bytes; an example file may be at most {} bytes",
            file.display(),
            import::MAX_FILE_BYTES
        )));
    }
    let text = std::fs::read_to_string(file).map_err(unreadable)?;
    let format = match format {
        Some(ExampleFormat::Jsonl) => FileFormat::Jsonl,
        Some(ExampleFormat::Csv) => FileFormat::Csv,
        None => FileFormat::of_path(file),
    };
    let (parsed, mut bad_lines) = import::parse(&text, format, verified_by.as_deref());
    let mut checked = Vec::with_capacity(parsed.len());
    for line in parsed {
        match examples::prepare(gate, &line.draft).await {
            Ok(example) => checked.push(example),
            Err(error) => bad_lines.push(LineError {
                line: line.line,
                error: error.to_string(),
            }),
        }
    }
    bad_lines.sort_by_key(|bad| bad.line);
    let mut text = String::new();
    for bad in &bad_lines {
        text.push_str(&format!("{}: {bad}\n", file.display()));
    }
    if !bad_lines.is_empty() && !skip_bad {
        text.push_str(&format!(
            "nothing imported: {} bad line(s) (fix them, or pass --skip-bad to import the {} good one(s))\n",
            bad_lines.len(),
            checked.len()
        ));
        let report = ImportReport {
            saved: false,
            imported: Vec::new(),
            replaced: Vec::new(),
            bad_lines,
        };
        return Output::new(&report, text, Exit::Refused);
    }
    let saved = examples::save_checked(gate, store, checked).await?;
    let report = ImportReport {
        saved: !saved.is_empty(),
        imported: saved.iter().map(|saved| saved.example.id).collect(),
        replaced: saved
            .iter()
            .flat_map(|saved| saved.replaced.iter().copied())
            .collect(),
        bad_lines,
    };
    text.push_str(&format!(
        "imported {} example(s){}{}\n",
        report.imported.len(),
        if report.replaced.is_empty() {
            String::new()
        } else {
            format!(", replacing {}", ids(&report.replaced))
        },
        if report.bad_lines.is_empty() {
            String::new()
        } else {
            format!("; skipped {} bad line(s)", report.bad_lines.len())
        }
    ));
    Output::new(&report, text, Exit::Success)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::args::{Cli, Command};
    use crate::examples::{PostgresExampleStore, SqliteExampleStore, WrongDraft};

    async fn demo_gate(dir: &tempfile::TempDir) -> Gate {
        let path = dir.path().join("demo.sqlite");
        crate::demo::write_sqlite(&path).expect("demo builds");
        crate::database::open_gate(
            &crate::database::DatabaseUrl::Sqlite(path),
            crate::gate::GateOptions::default(),
        )
        .await
        .expect("the database opens")
    }

    fn add(question: &str, sql: &str) -> ExamplesCommand {
        ExamplesCommand::Add {
            question: question.to_string(),
            sql: sql.to_string(),
            verified_by: Some("asha".to_string()),
            notes: None,
        }
    }

    fn list(caused_wrong: bool) -> ExamplesCommand {
        ExamplesCommand::List {
            unused_days: None,
            caused_wrong,
            log_from: None,
        }
    }

    /// `list --caused-wrong` on `store`: the example a marked answer used, with its count
    /// and latest question; never the unmarked one.
    async fn caused_wrong_lists_the_blamed_example_on(store: &dyn ExampleStore) {
        let dir = tempfile::tempdir().expect("temp dir");
        let gate = demo_gate(&dir).await;
        let exec = |command| run(&gate, store, false, command);
        let empty = exec(list(true)).await.expect("lists");
        assert!(
            empty.text.starts_with("no answer marked wrong"),
            "{}",
            empty.text
        );
        let blamed = exec(add("How many customers?", "SELECT count(*) FROM customers"))
            .await
            .expect("added");
        let blamed_id = blamed.json["example"]["id"].as_i64().expect("an id");
        exec(add("How many bills?", "SELECT count(*) FROM bills"))
            .await
            .expect("added");
        let draft = WrongDraft {
            question: "How many customers joined in 2025?".to_string(),
            sql: None,
            examples: vec![blamed_id],
            marked_by: "ana".to_string(),
        };
        examples::wrong::mark(&gate, store, &draft)
            .await
            .expect("marked");
        let listed = exec(list(true)).await.expect("lists");
        assert_eq!(listed.exit, Exit::Success);
        let rows = listed.json.as_array().expect("an array");
        assert_eq!(rows.len(), 1, "{}", listed.json);
        assert_eq!(rows[0]["example"]["id"], blamed_id);
        assert_eq!(rows[0]["wrong_answers"], 1);
        assert!(
            listed.text.contains("used by 1 answer(s) marked wrong")
                && listed.text.contains("How many customers joined in 2025?")
                && listed.text.contains("by ana"),
            "{}",
            listed.text
        );
        assert!(!listed.text.contains("How many bills?"), "{}", listed.text);
        // What the person typed reaches the report without its control characters.
        let typed = WrongDraft {
            question: "How many\ncustomers?\u{1b}[2J".to_string(),
            marked_by: "ben".to_string(),
            ..draft
        };
        examples::wrong::mark(&gate, store, &typed)
            .await
            .expect("marked");
        let listed = exec(list(true)).await.expect("lists");
        assert!(
            listed
                .text
                .contains("latest \"How many customers? [2J\" by ben"),
            "{}",
            listed.text
        );
        assert!(!listed.text.contains('\u{1b}'), "{}", listed.text);
        assert_eq!(listed.json[0]["latest_question"], typed.question);
        // The plain list still shows both.
        let all = exec(list(false)).await.expect("lists");
        assert_eq!(all.json.as_array().map(Vec::len), Some(2));
    }

    #[tokio::test]
    async fn caused_wrong_lists_the_blamed_example_on_the_local_and_the_shared_store() {
        let dir = tempfile::tempdir().expect("temp dir");
        caused_wrong_lists_the_blamed_example_on(&SqliteExampleStore::new(
            dir.path().join("examples.sqlite"),
        ))
        .await;
        let test = "caused_wrong_lists_the_blamed_example_on_the_local_and_the_shared_store";
        if let Some(scratch) = crate::scratch::Scratch::new(test, "examples") {
            scratch.create_empty_database().await;
            let pool = scratch.pool();
            crate::examples::postgres::ensure_tables(&pool)
                .await
                .expect("the tables are created");
            caused_wrong_lists_the_blamed_example_on(&PostgresExampleStore::new(pool)).await;
        }
    }

    #[test]
    fn caused_wrong_takes_a_state_url_and_refuses_unused_days_beside_it() {
        let parsed = Cli::try_parse_from([
            "askdb",
            "examples",
            "list",
            "--caused-wrong",
            "--state-url",
            "postgres://askdb_state@127.0.0.1/askdb",
        ])
        .expect("parses");
        match parsed.command {
            Command::Examples {
                state_url,
                command: ExamplesCommand::List { caused_wrong, .. },
            } => {
                assert!(caused_wrong);
                assert_eq!(
                    state_url.as_deref(),
                    Some("postgres://askdb_state@127.0.0.1/askdb")
                );
            }
            _ => panic!("not examples list"),
        }
        assert!(Cli::try_parse_from([
            "askdb",
            "examples",
            "list",
            "--caused-wrong",
            "--unused-days",
            "30",
        ])
        .is_err());
    }
}
