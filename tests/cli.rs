//! The askdb binary as a user runs it: the demo database built on first use under
//! ASKDB_HOME, the gate's commands in text and JSON, and the documented exit codes.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn askdb(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_askdb"))
        .args(args)
        .env("ASKDB_HOME", home)
        .env_remove("ASKDB_DATABASE_URL")
        .env_remove("ASKDB_NOTES")
        .output()
        .expect("askdb runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {}", stdout(output)))
}

#[test]
fn sql_run_counts_the_demo_bills_and_builds_the_demo_on_first_use() {
    let home = tempfile::tempdir().expect("temp dir");
    let output = askdb(home.path(), &["sql", "run", "SELECT count(*) FROM bills"]);
    assert!(output.status.success(), "{output:?}");
    let text = stdout(&output);
    assert!(text.contains("1400"), "{text}");
    assert!(
        text.contains("ran: SELECT count(*) FROM bills LIMIT 200"),
        "{text}"
    );
    assert!(home.path().join("demo.sqlite").is_file());

    let output = askdb(
        home.path(),
        &["--json", "sql", "run", "SELECT count(*) AS n FROM bills"],
    );
    let value = json(&output);
    assert_eq!(value["ok"], Value::Bool(true));
    assert_eq!(value["columns"], serde_json::json!(["n"]));
    assert_eq!(value["rows"], serde_json::json!([[1400]]));
    assert_eq!(value["row_count"], serde_json::json!(1));
    assert_eq!(value["truncated"], Value::Bool(false));
}

#[test]
fn a_refused_or_failing_statement_exits_1_with_a_structured_error() {
    let home = tempfile::tempdir().expect("temp dir");
    let output = askdb(home.path(), &["--json", "sql", "run", "DELETE FROM bills"]);
    assert_eq!(output.status.code(), Some(1));
    let value = json(&output);
    assert_eq!(value["ok"], Value::Bool(false));
    assert_eq!(value["error_type"], "rejected");
    assert_eq!(value["reason"], "not_a_query");
    assert_eq!(value["repairable"], Value::Bool(false));

    let output = askdb(
        home.path(),
        &["--json", "sql", "run", "SELECT nope FROM bills"],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(json(&output)["error_type"], "unknown_column");
}

#[test]
fn sql_check_reads_arguments_stdin_and_batches() {
    let home = tempfile::tempdir().expect("temp dir");
    let output = askdb(home.path(), &["sql", "check", "SELECT bill_no FROM bills"]);
    assert!(output.status.success());
    assert_eq!(
        stdout(&output).trim(),
        "ok: SELECT bill_no FROM bills LIMIT 200"
    );

    let mut child = Command::new(env!("CARGO_BIN_EXE_askdb"))
        .args(["sql", "check"])
        .env("ASKDB_HOME", home.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawns");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(b"SELECT pg_sleep(10)")
            .expect("writes stdin");
    }
    let output = child.wait_with_output().expect("finishes");
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).starts_with("refused (denied_function)"),
        "{}",
        stdout(&output)
    );

    let batch = home.path().join("batch.sql");
    std::fs::write(
        &batch,
        "SELECT count(*) FROM customers\nSELECT phone FROM customers\n\nDROP TABLE bills\n",
    )
    .expect("writes batch");
    let output = askdb(
        home.path(),
        &[
            "sql",
            "check",
            "--batch",
            batch.to_str().expect("utf-8 path"),
        ],
    );
    assert_eq!(output.status.code(), Some(1), "one or more refused");
    let verdicts: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON verdict per line"))
        .collect();
    assert_eq!(verdicts.len(), 3);
    assert_eq!(verdicts[0]["ok"], Value::Bool(true));
    assert_eq!(
        verdicts[0]["sql"],
        "SELECT count(*) FROM customers LIMIT 200"
    );
    assert_eq!(verdicts[1]["reason"], "restricted_column");
    assert_eq!(verdicts[2]["reason"], "not_a_query");
}

#[test]
fn schema_commands_show_visible_tables_without_restricted_columns() {
    let home = tempfile::tempdir().expect("temp dir");
    let tables = json(&askdb(home.path(), &["--json", "schema", "tables"]));
    let names: Vec<&str> = tables
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|table| table["name"].as_str())
        .collect();
    assert_eq!(names.len(), 15, "{names:?}");
    assert!(names.contains(&"bills") && names.contains(&"store_settings"));

    let described = json(&askdb(
        home.path(),
        &["--json", "schema", "describe", "customers"],
    ));
    let create = described["create_table"]
        .as_str()
        .expect("CREATE TABLE text");
    assert!(create.starts_with("CREATE TABLE customers"), "{create}");
    assert!(
        !create.contains("phone") && !create.contains("address"),
        "{create}"
    );

    let sample = json(&askdb(
        home.path(),
        &["--json", "schema", "sample", "customers", "-n", "4"],
    ));
    assert_eq!(sample["row_count"], serde_json::json!(4));
    assert!(!sample["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .any(|column| column == "phone"));

    let missing = askdb(home.path(), &["schema", "describe", "nope"]);
    assert_eq!(missing.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no table named"));
}

#[test]
fn a_bad_database_url_fails_with_exit_3_and_a_clear_message() {
    let home = tempfile::tempdir().expect("temp dir");
    let output = askdb(home.path(), &["--db", "oracle://x/y", "schema", "tables"]);
    assert_eq!(output.status.code(), Some(3));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("unrecognised database URL"), "{message}");

    let output = askdb(
        home.path(),
        &["--db", "sqlite:/nonexistent/shop.db", "schema", "tables"],
    );
    assert_eq!(output.status.code(), Some(3));
    assert!(!Path::new("/nonexistent/shop.db").exists());
}

#[test]
fn demo_build_writes_identical_rows_twice() {
    let home = tempfile::tempdir().expect("temp dir");
    let first = home.path().join("one.sqlite");
    let second = home.path().join("two.sqlite");
    for path in [&first, &second] {
        let output = askdb(
            home.path(),
            &["demo", "build", "--out", path.to_str().expect("utf-8")],
        );
        assert!(output.status.success(), "{output:?}");
    }
    for table in [
        "bills",
        "bill_items",
        "payments",
        "customers",
        "bill_archive",
    ] {
        let sql = format!("SELECT * FROM {table} ORDER BY 1");
        let sql = if table == "customers" {
            "SELECT cust_id, cust_name, notes, credit_limit, created_dt FROM customers ORDER BY 1"
                .to_string()
        } else {
            sql
        };
        let rows = |path: &Path| {
            let db = format!("sqlite:{}", path.display());
            json(&askdb(
                home.path(),
                &[
                    "--json",
                    "--db",
                    &db,
                    "--row-cap",
                    "100000",
                    "sql",
                    "run",
                    &sql,
                ],
            ))["rows"]
                .clone()
        };
        let (a, b) = (rows(&first), rows(&second));
        assert!(a.as_array().is_some_and(|rows| !rows.is_empty()), "{table}");
        assert_eq!(a, b, "{table} differs between builds");
    }
}

#[test]
fn every_command_s_help_ends_with_an_example() {
    use clap::CommandFactory;
    fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
        let path = format!("{path} {}", command.get_name());
        let help = command
            .get_after_help()
            .map(|text| text.to_string())
            .unwrap_or_default();
        if !help.contains("Example") {
            missing.push(path.trim().to_string());
        }
        for sub in command.get_subcommands() {
            if sub.get_name() != "help" {
                walk(sub, &path, missing);
            }
        }
    }
    let mut missing = Vec::new();
    walk(&askdb::cli::args::Cli::command(), "", &mut missing);
    assert!(missing.is_empty(), "no example in --help: {missing:?}");

    let home = tempfile::tempdir().expect("temp dir");
    let help = askdb(home.path(), &["sql", "run", "--help"]);
    assert!(help.status.success(), "{help:?}");
    assert!(
        stdout(&help).contains("Example:\n  askdb sql run"),
        "{}",
        stdout(&help)
    );
}

#[test]
fn completions_are_generated_for_each_shell() {
    let home = tempfile::tempdir().expect("temp dir");
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef askdb"),
        ("fish", "complete -c askdb"),
    ] {
        let output = askdb(home.path(), &["completions", shell]);
        assert!(output.status.success(), "{shell}: {output:?}");
        let script = stdout(&output);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("serve"), "{shell} completes the commands");
    }
    let wrong = askdb(home.path(), &["completions", "cmd.exe"]);
    assert_eq!(
        wrong.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn eval_flags_checks_the_gold_answers_of_a_set_without_a_model() {
    let home = tempfile::tempdir().expect("temp dir");
    let output = askdb(home.path(), &["--json", "eval", "flags", "--gold", "demo"]);
    assert!(output.status.success(), "{output:?}");
    let report = json(&output);
    assert_eq!(report["set"], "demo");
    assert_eq!(report["checked"], 30, "{report}");
    assert_eq!(
        report["flagged"], 0,
        "no right answer of the demo set is flagged: {report}"
    );
    let usage = askdb(home.path(), &["eval", "flags"]);
    assert_eq!(usage.status.code(), Some(2), "a run or --gold is required");
}
