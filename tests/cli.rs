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

/// `askdb ask` with the scripted model reading `script`.
fn ask_scripted(home: &Path, script: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_askdb"))
        .args(args)
        .env("ASKDB_HOME", home)
        .env("ASKDB_PROVIDER", "scripted")
        .env("ASKDB_SCRIPT", script)
        .env_remove("ASKDB_DATABASE_URL")
        .env_remove("ASKDB_NOTES")
        .env_remove("ASKDB_STRATEGY")
        .output()
        .expect("askdb runs")
}

#[test]
fn ask_continues_a_conversation_from_one_process_to_the_next() {
    let home = tempfile::tempdir().expect("temp dir");
    let script = home.path().join("script.jsonl");
    let first = "How many bills were voided in 2025?";
    let follow = "And in 2026?";
    std::fs::write(
        &script,
        [
            serde_json::json!({"question": first, "purpose": "write_sql", "reply": "```sql\nSELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2025'\n```"}),
            serde_json::json!({"question": follow, "purpose": "write_sql", "reply": "```sql\n-- Understood as: the number of bills voided in 2026\nSELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2026'\n```"}),
        ]
        .map(|line| line.to_string())
        .join("\n"),
    )
    .expect("writes the script");
    let started = ask_scripted(
        home.path(),
        &script,
        &[
            "--json",
            "ask",
            "-q",
            "--no-explain",
            first,
            "--conversation",
            "new",
        ],
    );
    assert!(started.status.success(), "{started:?}");
    let value = json(&started);
    assert_eq!(value["turn"], 1);
    let id = value["conversation_id"]
        .as_str()
        .expect("an id")
        .to_string();
    let followed = ask_scripted(
        home.path(),
        &script,
        &["ask", "-q", "--no-explain", follow, "--conversation", &id],
    );
    assert!(followed.status.success(), "{followed:?}");
    let text = stdout(&followed);
    assert!(
        text.contains("Understood as: the number of bills voided in 2026"),
        "{text}"
    );
    assert!(
        text.contains(&format!("conversation: {id} (turn 2)")),
        "{text}"
    );
    let unknown = ask_scripted(
        home.path(),
        &script,
        &[
            "ask",
            "-q",
            follow,
            "--conversation",
            "0123456789abcdef0123456789abcdef",
        ],
    );
    assert!(!unknown.status.success());
    let error = String::from_utf8_lossy(&unknown.stderr);
    assert!(error.contains("start a new one"), "{error}");
}

/// `askdb examples ...` with the person named, on `db` (the demo when None).
fn examples(home: &Path, db: Option<&Path>, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_askdb"));
    if let Some(db) = db {
        command.arg("--db").arg(format!("sqlite:{}", db.display()));
    }
    command
        .arg("examples")
        .args(args)
        .env("ASKDB_HOME", home)
        .env_remove("ASKDB_DATABASE_URL")
        .env_remove("ASKDB_NOTES")
        .env_remove("ASKDB_VERIFIED_BY")
        .env_remove("USER")
        .env_remove("LOGNAME")
        .output()
        .expect("askdb runs")
}

#[test]
fn examples_are_added_listed_exported_and_removed_and_the_gate_refuses_restricted_ones() {
    let home = tempfile::tempdir().expect("temp dir");
    let add = |question: &str, sql: &str| {
        examples(
            home.path(),
            None,
            &["--json", "add", question, sql, "--verified-by", "asha"],
        )
    };
    let output = add(
        "How many bills were voided?",
        "SELECT count(*) FROM bills WHERE status = 'VOID'",
    );
    assert!(output.status.success(), "{output:?}");
    let saved = json(&output);
    let id = saved["example"]["id"].as_i64().expect("an id");
    assert_eq!(
        saved["example"]["sql"],
        "SELECT count(*) FROM bills WHERE status = 'VOID' LIMIT 200"
    );
    assert_eq!(saved["example"]["verified_by"], "asha");
    assert_eq!(saved["example"]["tables"], serde_json::json!(["bills"]));

    for (sql, reason) in [
        ("SELECT name, phone FROM customers", "restricted_column"),
        ("SELECT * FROM askdb_query_log", "unknown_table"),
        ("UPDATE bills SET status = 'PAID'", "not_a_query"),
    ] {
        let output = add("Customer phones", sql);
        assert_eq!(output.status.code(), Some(1), "{sql}: {output:?}");
        assert_eq!(json(&output)["reason"], reason, "{sql}");
    }
    let output = examples(home.path(), None, &["add", "Who?", "SELECT 1"]);
    assert_eq!(output.status.code(), Some(2), "no person: {output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--verified-by"));

    let output = examples(home.path(), None, &["--json", "list"]);
    let listed = json(&output);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["question"], "How many bills were voided?");

    let output = examples(home.path(), None, &["export"]);
    let line: Value = serde_json::from_str(stdout(&output).trim()).expect("one JSON line");
    assert_eq!(line["question"], "How many bills were voided?");
    assert_eq!(line["verified_by"], "asha");

    let id_text = id.to_string();
    let output = examples(home.path(), None, &["remove", &id_text]);
    assert!(output.status.success(), "{output:?}");
    let output = examples(home.path(), None, &["remove", &id_text]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).starts_with(&format!("not removed: no example {id} ")),
        "{}",
        stdout(&output)
    );
    assert!(stdout(&examples(home.path(), None, &["list"])).contains("no verified examples"));
}

#[test]
fn an_import_with_a_bad_line_saves_nothing_unless_told_to_skip_it() {
    let home = tempfile::tempdir().expect("temp dir");
    let file = home.path().join("team.jsonl");
    std::fs::write(
        &file,
        concat!(
            "{\"question\": \"How many bills?\", \"sql\": \"SELECT count(*) FROM bills\"}\n",
            "{\"question\": \"Phones\", \"sql\": \"SELECT phone FROM customers\", \"verified_by\": \"ravi\"}\n",
            "{\"question\": \"broken\"\n",
            "{\"question\": \"How many customers?\", \"sql\": \"SELECT count(*) FROM customers\"}\n",
        ),
    )
    .expect("written");
    let path = file.display().to_string();
    let output = examples(
        home.path(),
        None,
        &["--json", "import", &path, "--verified-by", "asha"],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let report = json(&output);
    assert_eq!(report["saved"], Value::Bool(false));
    let lines: Vec<i64> = report["bad_lines"]
        .as_array()
        .expect("bad lines")
        .iter()
        .filter_map(|bad| bad["line"].as_i64())
        .collect();
    assert_eq!(lines, vec![2, 3]);
    assert!(report["bad_lines"][0]["error"]
        .as_str()
        .is_some_and(|error| error.contains("restricted_column")));
    assert!(stdout(&examples(home.path(), None, &["list"])).contains("no verified examples"));

    let output = examples(
        home.path(),
        None,
        &["import", &path, "--verified-by", "asha", "--skip-bad"],
    );
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout(&output).contains("imported 2 example(s); skipped 2 bad line(s)"),
        "{}",
        stdout(&output)
    );

    let csv = home.path().join("more.csv");
    std::fs::write(
        &csv,
        "question,sql,verified_by,notes\n\"How many bills?\",\"SELECT count(*) FROM bills WHERE status <> 'VOID'\",ravi,VOID bills never count\n",
    )
    .expect("written");
    let output = examples(
        home.path(),
        None,
        &["--json", "import", &csv.display().to_string()],
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(json(&output)["replaced"].as_array().map(Vec::len), Some(1));
    let listed = json(&examples(home.path(), None, &["--json", "list"]));
    let notes: Vec<&str> = listed
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|example| example["notes"].as_str())
        .collect();
    assert_eq!(notes, vec!["VOID bills never count"]);
}

#[test]
fn list_shows_an_example_set_aside_after_drift_and_export_leaves_it_out() {
    let home = tempfile::tempdir().expect("temp dir");
    let db = home.path().join("shop.sqlite");
    let connection = rusqlite::Connection::open(&db).expect("creates");
    connection
        .execute_batch("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price INTEGER);")
        .expect("written");
    for (question, sql) in [
        ("Item names", "SELECT name FROM items"),
        ("Item ids", "SELECT id FROM items"),
    ] {
        let output = examples(
            home.path(),
            Some(&db),
            &["add", question, sql, "--verified-by", "asha"],
        );
        assert!(output.status.success(), "{output:?}");
    }
    connection
        .execute_batch("ALTER TABLE items DROP COLUMN name;")
        .expect("altered");
    let output = examples(home.path(), Some(&db), &["list"]);
    let text = stdout(&output);
    assert!(
        text.contains("SET ASIDE: the guard now refuses its SQL"),
        "{text}"
    );
    assert!(
        text.contains("2 example(s), 0 in use, 2 set aside"),
        "{text}"
    );
    let output = examples(home.path(), Some(&db), &["--json", "list"]);
    let reasons: Vec<String> = json(&output)
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|example| example["set_aside"].as_str().map(str::to_string))
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[1].contains("column items.name was dropped"),
        "{reasons:?}"
    );
    assert_eq!(stdout(&examples(home.path(), Some(&db), &["export"])), "");
}

#[test]
fn list_unused_days_names_the_old_examples_no_logged_question_used() {
    let home = tempfile::tempdir().expect("temp dir");
    for (question, sql) in [
        ("How many bills?", "SELECT count(*) FROM bills"),
        ("How many customers?", "SELECT count(*) FROM customers"),
        ("How many suppliers?", "SELECT count(*) FROM suppliers"),
    ] {
        let output = examples(
            home.path(),
            None,
            &["add", question, sql, "--verified-by", "asha"],
        );
        assert!(output.status.success(), "{output:?}");
    }
    // The first two were verified long ago; the third today, too new to judge.
    let store = rusqlite::Connection::open(home.path().join("examples.sqlite")).expect("opens");
    store
        .execute_batch(
            "UPDATE askdb_examples SET verified_at = '2026-01-01 00:00:00' WHERE id IN (1, 2);",
        )
        .expect("backdated");
    // A question asked today used example 1 (its row as the query log writes it).
    let log = rusqlite::Connection::open(home.path().join("query_log.sqlite")).expect("opens");
    log.execute_batch(
        "CREATE TABLE askdb_query_log (id INTEGER PRIMARY KEY AUTOINCREMENT, \
         asked_at TEXT NOT NULL, question TEXT, examples TEXT); \
         INSERT INTO askdb_query_log (asked_at, question, examples) \
         VALUES ('2099-01-01 00:00:00', 'How many bills?', '1,9');",
    )
    .expect("logged");
    let output = examples(
        home.path(),
        None,
        &["--json", "list", "--unused-days", "30"],
    );
    assert!(output.status.success(), "{output:?}");
    let questions: Vec<String> = json(&output)
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|example| example["question"].as_str().map(str::to_string))
        .collect();
    assert_eq!(questions, vec!["How many customers?".to_string()]);
    let text = stdout(&examples(
        home.path(),
        None,
        &["list", "--unused-days", "30"],
    ));
    assert!(
        text.starts_with("1 example(s) in use that no question used since"),
        "{text}"
    );
}

/// `askdb eval run --through process|serve`: each agent question asked as a user asks
/// it (its own `askdb ask` process, or `POST /api/ask` on a server the run started),
/// graded like the harness's, the plain prompt beside it, the path named in the report.
#[test]
fn eval_runs_ask_the_agent_through_the_paths_users_take() {
    let home = tempfile::tempdir().expect("temp dir");
    let db = home.path().join("demo.sqlite");
    let built = askdb(
        home.path(),
        &["demo", "build", "--out", &db.display().to_string()],
    );
    assert!(built.status.success(), "{built:?}");
    let right = "How many bills are there?";
    let wrong = "How many customers are there?";
    let db_url = format!("sqlite:{}", db.display());
    let questions = home.path().join("questions.jsonl");
    let items = [
        serde_json::json!({"id": "bills", "question": right, "category": "simple", "expected": "answer",
               "golds": ["SELECT count(*) FROM bills"], "ordered": false, "db": db_url}),
        serde_json::json!({"id": "customers", "question": wrong, "category": "simple", "expected": "answer",
               "golds": ["SELECT count(*) FROM customers"], "ordered": false, "db": db_url}),
    ];
    std::fs::write(
        &questions,
        items
            .iter()
            .map(|item| format!("{item}\n"))
            .collect::<String>(),
    )
    .expect("questions");
    // Every call for a question gets the same reply: the bills question is answered
    // right, the customers question with the bills count (wrong) in both modes.
    let script = home.path().join("script.jsonl");
    std::fs::write(
        &script,
        [right, wrong]
            .map(|question| {
                serde_json::json!({"question": question, "purpose": "write_sql",
                    "reply": "```sql\nSELECT count(*) FROM bills\n```"})
                .to_string()
            })
            .join("\n"),
    )
    .expect("script");
    for (path, named) in [("process", "askdb ask"), ("serve", "POST /api/ask")] {
        let runs = home.path().join(format!("runs-{path}"));
        let output = Command::new(env!("CARGO_BIN_EXE_askdb"))
            .args(["eval", "run", "--questions"])
            .arg(&questions)
            .args(["--mode", "agent-plain", "--through", path, "--runs-dir"])
            .arg(&runs)
            .env("ASKDB_HOME", home.path())
            .env("ASKDB_PROVIDER", "scripted")
            .env("ASKDB_SCRIPT", &script)
            .env_remove("ASKDB_DATABASE_URL")
            .env_remove("ASKDB_STRATEGY")
            .output()
            .expect("askdb runs");
        let report = stdout(&output);
        assert!(output.status.success(), "{path}: {output:?}");
        assert!(
            report.contains(named),
            "{path}: the report names the path: {report}"
        );
        let run_dir = report
            .lines()
            .find_map(|line| line.strip_prefix("run folder: "))
            .map(|dir| Path::new(dir.trim()).to_path_buf())
            .expect("the run folder is named");
        let records: Vec<Value> = std::fs::read_to_string(run_dir.join("questions.jsonl"))
            .expect("records")
            .lines()
            .map(|line| serde_json::from_str(line).expect("a record"))
            .collect();
        let graded: Vec<(&str, &str, bool)> = records
            .iter()
            .map(|record| {
                (
                    record["id"].as_str().unwrap_or(""),
                    record["mode"].as_str().unwrap_or(""),
                    record["correct"].as_bool().unwrap_or(false),
                )
            })
            .collect();
        assert_eq!(
            graded,
            [
                ("bills", "agent", true),
                ("customers", "agent", false),
                ("bills", "plain", true),
                ("customers", "plain", false),
            ],
            "{path}: mode by mode, graded by the rows: {records:?}"
        );
        let latency = records[0]["latency_ms"].as_u64().unwrap_or(0);
        assert!(
            latency > 0,
            "{path}: the user's wait is recorded: {records:?}"
        );
    }
    let refused = askdb(
        home.path(),
        &[
            "eval",
            "run",
            "--set",
            "demo",
            "--mode",
            "all",
            "--through",
            "process",
        ],
    );
    assert_eq!(
        refused.status.code(),
        Some(2),
        "the baseline cannot replay a reply asked in another process"
    );
}

/// `askdb chat` in a pseudo-terminal: util-linux's `script` runs it on one and copies
/// what it writes (stdout and stderr alike, as a terminal shows them) to a pipe read
/// here, and what is written to its stdin to the terminal, as typing would.
struct Terminal {
    child: std::process::Child,
    keys: std::process::ChildStdin,
    screen: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Terminal {
    fn start(home: &Path, script: &Path, args: &str) -> Terminal {
        use std::io::Read;
        use std::process::Stdio;
        let binary = env!("CARGO_BIN_EXE_askdb");
        let command = format!("stty cols 120 rows 40; exec '{binary}' chat {args}");
        let mut child = Command::new("script")
            .args(["--quiet", "--return", "--command", &command, "/dev/null"])
            .env("ASKDB_HOME", home)
            .env("ASKDB_PROVIDER", "scripted")
            .env("ASKDB_SCRIPT", script)
            .env("TERM", "xterm")
            .env_remove("ASKDB_DATABASE_URL")
            .env_remove("ASKDB_NOTES")
            .env_remove("ASKDB_STRATEGY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("script runs (util-linux)");
        let keys = child.stdin.take().expect("stdin");
        let mut output = child.stdout.take().expect("stdout");
        let screen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = std::sync::Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(read) = output.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                if let Ok(mut text) = sink.lock() {
                    text.push_str(&String::from_utf8_lossy(&buffer[..read]));
                }
            }
        });
        Terminal {
            child,
            keys,
            screen,
        }
    }

    fn screen(&self) -> String {
        self.screen
            .lock()
            .map(|text| text.clone())
            .unwrap_or_default()
    }

    /// Waits until `needle` is on the screen after byte `from`; returns where it ends.
    fn wait_for(&self, needle: &str, from: usize) -> usize {
        let started = std::time::Instant::now();
        loop {
            let screen = self.screen();
            if let Some(at) = screen.get(from..).and_then(|rest| rest.find(needle)) {
                return from + at + needle.len();
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "{needle:?} never came after byte {from}; the screen:\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Waits for the prompt after `from`, then types `line` and Enter; returns where the
    /// screen ended before the line's answer.
    fn ask(&mut self, line: &str, from: usize) -> usize {
        use std::io::Write;
        let at = self.wait_for("askdb> ", from);
        self.keys
            .write_all(format!("{line}\r").as_bytes())
            .and_then(|()| self.keys.flush())
            .expect("typed");
        at
    }

    fn exit_code(&mut self) -> Option<i32> {
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(30) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        None
    }
}

#[test]
fn chat_asks_follow_ups_in_a_terminal_shows_sql_starts_over_and_quits() {
    let home = tempfile::tempdir().expect("temp dir");
    let script = home.path().join("script.jsonl");
    let first = "How many bills were voided in 2025?";
    let first_sql = "SELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2025'";
    let follow = "And in 2026?";
    let broken = "Which bills will be voided next year?";
    std::fs::write(
        &script,
        [
            serde_json::json!({"question": first, "purpose": "write_sql", "reply": format!("```sql\n{first_sql}\n```")}),
            // Answered only when the follow-up's prompt carries the first turn.
            serde_json::json!({"question": follow, "purpose": "write_sql", "prompt_contains": first, "reply": "```sql\n-- Understood as: the number of bills voided in 2026\nSELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2026'\n```"}),
            serde_json::json!({"question": broken, "purpose": "write_sql", "error": {"kind": "authentication", "message": "the key was refused"}}),
            serde_json::json!({"question": first, "purpose": "write_sql", "reply": format!("```sql\n{first_sql}\n```")}),
        ]
        .map(|line| line.to_string())
        .join("\n"),
    )
    .expect("writes the script");
    let mut terminal = Terminal::start(home.path(), &script, "--no-explain");

    let at = terminal.ask(first, 0);
    let at = terminal.wait_for("turn 1", at);
    let screen = terminal.screen();
    let id = screen[..at]
        .rsplit("conversation ")
        .next()
        .and_then(|rest| rest.split(',').next())
        .expect("the conversation's id")
        .to_string();
    assert_eq!(id.len(), 32, "{screen}");

    let at = terminal.ask(follow, at);
    let at = terminal.wait_for("Understood as: the number of bills voided in 2026", at);
    let at = terminal.wait_for(&format!("conversation {id}, turn 2"), at);

    let at = terminal.ask("/sql", at);
    let at = terminal.wait_for("strftime('%Y', txn_dt) = '2026'", at);

    // A model that fails: said, and the session goes on.
    let at = terminal.ask(broken, at);
    let at = terminal.wait_for("the key was refused", at);

    let at = terminal.ask("/new", at);
    let at = terminal.wait_for("starts a new conversation", at);
    let at = terminal.ask(first, at);
    let at = terminal.wait_for("turn 1", at);
    let screen = terminal.screen();
    assert!(
        !screen[..at].ends_with(&format!("{id}, turn 1")),
        "a new conversation: {screen}"
    );

    terminal.ask("/quit", at);
    assert_eq!(terminal.exit_code(), Some(0), "{}", terminal.screen());
    let history = std::fs::read_to_string(home.path().join("chat_history")).expect("history");
    for line in [first, follow, "/sql", broken, "/new", "/quit"] {
        assert!(history.contains(line), "{line} in {history}");
    }

    // Ctrl-D at the prompt ends a session too.
    let mut terminal = Terminal::start(home.path(), &script, "--no-explain");
    let at = terminal.wait_for("askdb> ", 0);
    {
        use std::io::Write;
        terminal.keys.write_all(b"\x04").expect("Ctrl-D");
        terminal.keys.flush().expect("sent");
    }
    assert_eq!(
        terminal.exit_code(),
        Some(0),
        "{}",
        &terminal.screen()[at..]
    );
}
