//! `askdb mcp` driven as MCP clients drive it: the real binary over real stdio, never
//! by calling Rust functions. Two real clients:
//!
//! - the official Python SDK (PyPI `mcp` 2.x: stdio_client + ClientSession) through
//!   `tests/mcp_clients/askdb_client.py`, which makes a list of calls (and, for the
//!   hostile corpus, one run_query per statement) in ONE session and prints one JSON
//!   verdict per line;
//! - the MCP Inspector CLI (npm `@modelcontextprotocol/inspector`, `--cli`), one process
//!   per method, with HOME pointed at a scratch folder.
//!
//! Both are installed once into `target/tmp/mcp-clients` (a venv and an npm prefix; a
//! marker file says an install finished). Without python3 or node, or when an install
//! fails, a test writes SKIPPED to stderr and returns, except under CI (env `CI` set),
//! where it fails. The PostgreSQL test creates its own uniquely named database and roles
//! with `askdb::admin::setup` (server `ASKDB_TEST_POSTGRES_URL` or
//! postgres@127.0.0.1:5432), drops them when it ends, and skips or fails the same way
//! when no server answers.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The Python SDK major the issue asks for.
const PYTHON_SDK_REQUIREMENT: &str = "mcp>=2,<3";
/// The Inspector major whose CLI has `--method` and `--tool-arg` as used here. It
/// declares Node >= 22 and warns on Node 20, where its CLI works.
const INSPECTOR_PACKAGE: &str = "@modelcontextprotocol/inspector@^2";

const TOOLS: [&str; 4] = ["describe_table", "list_tables", "run_query", "sample_rows"];
const HIDDEN_TABLE: &str = "askdb_query_log";
const MISSING_TABLE: &str = "no_such_table_xyz";

// ---------------------------------------------------------------------------------
// Processes, skips, the binary

fn askdb_bin() -> &'static str {
    env!("CARGO_BIN_EXE_askdb")
}

fn project_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

#[path = "support/ci.rs"]
mod ci;
#[path = "support/scratch.rs"]
mod scratch;

use ci::skip_or_fail as skip;
use scratch::{pg_connect, Scratch};

/// Runs a command to completion with stdin closed, reading both pipes on threads so a
/// full pipe never stalls the child; kills it after `timeout`.
fn run_with_timeout(mut command: Command, timeout: Duration) -> Result<Output, String> {
    let shown = format!("{command:?}");
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|error| format!("cannot start {shown}: {error}"))?;
    let stdout = read_on_thread(child.stdout.take());
    let stderr = read_on_thread(child.stderr.take());
    let status = wait_until(&mut child, timeout).map_err(|error| format!("{shown}: {error}"))?;
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

fn read_on_thread(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

fn wait_until(child: &mut Child, timeout: Duration) -> Result<ExitStatus, String> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("still running after {timeout:?}; killed"));
            }
            Err(error) => return Err(format!("cannot wait: {error}")),
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn file_sha256(path: &Path) -> String {
    let bytes = fs::read(path).expect("database file is readable");
    format!("{:x}", Sha256::digest(bytes))
}

/// `askdb demo build --out DIR/demo.sqlite`, plus the hidden query-log table with a row
/// in it, so "never listed" is tested against a table that really exists.
fn built_demo(dir: &Path) -> PathBuf {
    let path = dir.join("demo.sqlite");
    let output = Command::new(askdb_bin())
        .args(["demo", "build", "--out"])
        .arg(&path)
        .output()
        .expect("askdb demo build runs");
    assert!(output.status.success(), "demo build: {output:?}");
    let connection = rusqlite::Connection::open(&path).expect("demo opens for writing");
    connection
        .execute_batch(&format!(
            "CREATE TABLE {HIDDEN_TABLE} (id INTEGER PRIMARY KEY, question TEXT, decision TEXT);
             INSERT INTO {HIDDEN_TABLE} (question, decision) VALUES ('secret question', 'logged');"
        ))
        .expect("log table created");
    path
}

// ---------------------------------------------------------------------------------
// The real clients, installed once

fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-clients")
}

struct PythonSdk {
    python: PathBuf,
}

struct Inspector {
    bin: PathBuf,
}

/// The Python SDK in its venv, installed on first use (once per test process; the
/// OnceLock makes parallel tests wait for the one install).
fn python_sdk() -> Result<&'static PythonSdk, String> {
    if !ci::external_tests_wanted() {
        return Err(format!(
            "it installs the MCP Python SDK; set {}=1 to run it",
            ci::EXTERNAL_TESTS_VARIABLE
        ));
    }
    static SDK: OnceLock<Result<PythonSdk, String>> = OnceLock::new();
    SDK.get_or_init(install_python_sdk)
        .as_ref()
        .map_err(Clone::clone)
}

fn install_python_sdk() -> Result<PythonSdk, String> {
    let venv = cache_dir().join("python-venv");
    let python = venv.join("bin").join("python");
    let marker = venv.join("askdb-install-complete");
    if !marker.is_file() {
        // A half-made venv from an interrupted run is removed, not trusted.
        let _ = fs::remove_dir_all(&venv);
        fs::create_dir_all(cache_dir()).map_err(|error| error.to_string())?;
        let mut create = Command::new("python3");
        create.args(["-m", "venv"]).arg(&venv);
        checked(create, Duration::from_secs(180), "python3 -m venv")?;
        let mut install = Command::new(&python);
        install
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg(PYTHON_SDK_REQUIREMENT);
        checked(
            install,
            Duration::from_secs(600),
            &format!("pip install '{PYTHON_SDK_REQUIREMENT}'"),
        )?;
        fs::write(&marker, PYTHON_SDK_REQUIREMENT).map_err(|error| error.to_string())?;
    }
    let mut version = Command::new(&python);
    version.args([
        "-c",
        "import importlib.metadata as m; print(m.version('mcp'))",
    ]);
    let version = checked(version, Duration::from_secs(60), "reading the mcp version")?;
    let version = version.trim().to_string();
    if !version.starts_with("2.") {
        return Err(format!("the venv holds mcp {version}, not 2.x"));
    }
    let _ = writeln!(
        std::io::stderr(),
        "Python MCP SDK (PyPI mcp) {version} in {}",
        venv.display()
    );
    Ok(PythonSdk { python })
}

/// The Inspector in its npm prefix, installed on first use.
fn inspector() -> Result<&'static Inspector, String> {
    if !ci::external_tests_wanted() {
        return Err(format!(
            "it installs the MCP Inspector from npm; set {}=1 to run it",
            ci::EXTERNAL_TESTS_VARIABLE
        ));
    }
    static INSPECTOR: OnceLock<Result<Inspector, String>> = OnceLock::new();
    INSPECTOR
        .get_or_init(install_inspector)
        .as_ref()
        .map_err(Clone::clone)
}

fn install_inspector() -> Result<Inspector, String> {
    let prefix = cache_dir().join("inspector");
    let bin = prefix
        .join("node_modules")
        .join(".bin")
        .join("mcp-inspector");
    let marker = prefix.join("askdb-install-complete");
    let mut node = Command::new("node");
    node.arg("--version");
    let node_version = checked(node, Duration::from_secs(30), "node --version")?;
    if !marker.is_file() {
        let _ = fs::remove_dir_all(&prefix);
        let home = prefix.join("home");
        fs::create_dir_all(&home).map_err(|error| error.to_string())?;
        let mut install = Command::new("npm");
        install
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
            .arg("--prefix")
            .arg(&prefix)
            .arg("--cache")
            .arg(prefix.join("npm-cache"))
            .arg(INSPECTOR_PACKAGE)
            .env("HOME", &home);
        checked(
            install,
            Duration::from_secs(600),
            &format!("npm install {INSPECTOR_PACKAGE}"),
        )?;
        fs::write(&marker, INSPECTOR_PACKAGE).map_err(|error| error.to_string())?;
    }
    let manifest = prefix
        .join("node_modules")
        .join("@modelcontextprotocol")
        .join("inspector")
        .join("package.json");
    let manifest: Value = fs::read_to_string(&manifest)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .ok_or_else(|| format!("cannot read {}", manifest.display()))?;
    let version = manifest["version"].as_str().unwrap_or("?").to_string();
    if !bin.is_file() {
        return Err(format!("{} is missing after the install", bin.display()));
    }
    let _ = writeln!(
        std::io::stderr(),
        "MCP Inspector {version} on node {} in {}",
        node_version.trim(),
        prefix.display()
    );
    Ok(Inspector { bin })
}

/// Runs an install or probe step; its stdout, or a message with its stderr.
fn checked(command: Command, timeout: Duration, what: &str) -> Result<String, String> {
    let output = run_with_timeout(command, timeout)?;
    if output.status.success() {
        Ok(text(&output.stdout))
    } else {
        Err(format!(
            "{what} failed ({}): {}",
            output.status,
            text(&output.stderr).trim()
        ))
    }
}

// ---------------------------------------------------------------------------------
// One Python SDK session

/// What askdb_client.py printed: the session line, then one verdict per call.
struct Session {
    info: Value,
    calls: Vec<Value>,
    /// Everything the client printed: searched for leaked values.
    raw: String,
}

impl Session {
    fn call(&self, id: &str) -> &Value {
        self.calls
            .iter()
            .find(|call| call["id"] == id)
            .unwrap_or_else(|| panic!("no verdict for call {id}"))
    }

    /// A call that must have succeeded: its structured content.
    fn ok(&self, id: &str) -> &Value {
        let call = self.call(id);
        assert_eq!(call["is_error"], false, "{id} failed: {call}");
        &call["structured"]
    }

    /// A call that must be a tool error (isError true) with a structured error.
    fn refused(&self, id: &str) -> &Value {
        let call = self.call(id);
        assert_eq!(call["is_error"], true, "{id} was not refused: {call}");
        let structured = &call["structured"];
        assert_eq!(structured["ok"], false, "{id}: {call}");
        assert!(structured["error_type"].is_string(), "{id}: {call}");
        assert!(structured["message"].is_string(), "{id}: {call}");
        structured
    }
}

fn call(id: &str, tool: &str, arguments: Value) -> Value {
    json!({"id": id, "tool": tool, "arguments": arguments})
}

fn run_query(id: &str, sql: &str) -> Value {
    call(id, "run_query", json!({ "sql": sql }))
}

/// Runs askdb_client.py once: `calls` (and the corpus statements of `dialect`, when
/// given) in one session with `askdb SERVER_ARGS`.
fn python_session(
    sdk: &PythonSdk,
    calls: &[Value],
    corpus_dialect: Option<&str>,
    env: &[(&str, &str)],
    server_args: &[&str],
) -> Session {
    let scratch = tempfile::tempdir().expect("temp dir");
    let calls_path = scratch.path().join("calls.jsonl");
    let lines: Vec<String> = calls.iter().map(Value::to_string).collect();
    fs::write(&calls_path, lines.join("\n") + "\n").expect("calls written");
    let mut command = Command::new(&sdk.python);
    command
        .arg(project_path("tests/mcp_clients/askdb_client.py"))
        .arg("--calls")
        .arg(&calls_path);
    if let Some(dialect) = corpus_dialect {
        command
            .arg("--corpus")
            .arg(project_path("evals/hostile_sql.jsonl"))
            .args(["--dialect", dialect]);
    }
    for (key, value) in env {
        command.arg("--env").arg(format!("{key}={value}"));
    }
    command.arg("--").arg(askdb_bin()).args(server_args);
    let output = run_with_timeout(command, Duration::from_secs(300))
        .unwrap_or_else(|error| panic!("python client: {error}"));
    let stdout = text(&output.stdout);
    let stderr = text(&output.stderr);
    assert!(
        output.status.success(),
        "python client failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(
        !stderr.contains("Traceback") && !stderr.contains("panicked"),
        "a stack trace reached stderr:\n{stderr}"
    );
    let records: Vec<Value> = stdout
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("client line is not JSON ({error}): {line}"))
        })
        .collect();
    let info = records
        .iter()
        .find(|record| record["kind"] == "session")
        .cloned()
        .unwrap_or_else(|| panic!("no session line:\n{stdout}"));
    let calls: Vec<Value> = records
        .iter()
        .filter(|record| record["kind"] == "call")
        .cloned()
        .collect();
    let done = records
        .iter()
        .find(|record| record["kind"] == "done")
        .unwrap_or_else(|| panic!("the session did not finish:\n{stdout}"));
    assert_eq!(done["calls"], calls.len(), "every call has a verdict");
    for call in &calls {
        assert!(
            call.get("protocol_error").is_none(),
            "a protocol error instead of a tool result: {call}"
        );
    }
    Session {
        info,
        calls,
        raw: stdout,
    }
}

// ---------------------------------------------------------------------------------
// The hostile corpus and the restricted / hidden checks, shared by both dialects

#[derive(Deserialize)]
struct CorpusEntry {
    id: String,
    dialect: String,
    reason: String,
}

fn corpus_for(dialect: &str) -> Vec<CorpusEntry> {
    let text = fs::read_to_string(project_path("evals/hostile_sql.jsonl")).expect("corpus");
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).expect("corpus line"))
        .filter(|entry: &CorpusEntry| entry.dialect == "any" || entry.dialect == dialect)
        .collect()
}

/// Calls beside the corpus: the two named attacks, restricted columns through every
/// tool, the hidden log table through every tool, and a table that does not exist to
/// compare its refusals with.
fn probe_calls(dialect: &str) -> Vec<Value> {
    let mut calls = vec![
        call("tables", "list_tables", json!({})),
        call(
            "describe_customers",
            "describe_table",
            json!({"name": "customers"}),
        ),
        call(
            "describe_suppliers",
            "describe_table",
            json!({"name": "SUPPLIERS"}),
        ),
        call(
            "sample_customers",
            "sample_rows",
            json!({"name": "customers", "n": 20}),
        ),
        call(
            "sample_suppliers",
            "sample_rows",
            json!({"name": "suppliers", "n": 20}),
        ),
        run_query(
            "customers_allowed",
            "SELECT cust_id, cust_name FROM customers",
        ),
        run_query("pg_read_file", "SELECT * FROM pg_read_file('/etc/passwd')"),
        run_query("pg_read_file_call", "SELECT pg_read_file('/etc/passwd')"),
        run_query("stacked_commit_drop", "SELECT 1; COMMIT; DROP TABLE bills"),
        run_query("customer_phone", "SELECT phone FROM customers"),
        run_query(
            "customer_address",
            "SELECT cust_name, address FROM customers",
        ),
        run_query("supplier_phone", "SELECT s.phone FROM suppliers AS s"),
        run_query("customers_star", "SELECT * FROM customers"),
        run_query("suppliers_star", "SELECT x.* FROM suppliers x"),
        run_query(
            "natural_join",
            "SELECT * FROM customers NATURAL JOIN suppliers",
        ),
        call(
            "describe_log",
            "describe_table",
            json!({"name": HIDDEN_TABLE}),
        ),
        call(
            "describe_missing",
            "describe_table",
            json!({"name": MISSING_TABLE}),
        ),
        call("sample_log", "sample_rows", json!({"name": HIDDEN_TABLE})),
        call(
            "sample_missing",
            "sample_rows",
            json!({"name": MISSING_TABLE}),
        ),
        run_query("select_log", &format!("SELECT * FROM {HIDDEN_TABLE}")),
        run_query("select_missing", &format!("SELECT * FROM {MISSING_TABLE}")),
    ];
    if dialect == "postgres" {
        calls.extend([
            run_query("whole_row", "SELECT customers FROM customers"),
            run_query("row_to_json", "SELECT row_to_json(c) FROM customers c"),
            run_query("to_jsonb", "SELECT to_jsonb(s) FROM suppliers s"),
        ]);
    }
    calls
}

/// Every corpus statement refused with its recorded reason, the named attacks refused,
/// restricted columns and their values never returned, the log table never listed and
/// refused in the same words as a table that does not exist.
fn check_hostile_session(session: &Session, dialect: &str, restricted_values: &[String]) {
    let corpus = corpus_for(dialect);
    assert!(corpus.len() > 100, "{} {dialect} statements", corpus.len());
    let mut wrong = Vec::new();
    for entry in &corpus {
        let verdict = session.call(&entry.id);
        if verdict["is_error"] != true {
            wrong.push(format!("{} was not refused: {verdict}", entry.id));
        } else if verdict["structured"]["ok"] != false
            || verdict["structured"]["reason"] != entry.reason.as_str()
        {
            wrong.push(format!(
                "{} refused without the structured reason {}: {}",
                entry.id, entry.reason, verdict["structured"]
            ));
        } else if verdict["text"][0]
            .as_str()
            .is_none_or(|text| !text.starts_with("error: "))
        {
            wrong.push(format!(
                "{} has no readable error text: {verdict}",
                entry.id
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} hostile statements wrong over MCP ({dialect}):\n{}",
        wrong.len(),
        corpus.len(),
        wrong.join("\n")
    );

    for id in ["pg_read_file", "pg_read_file_call"] {
        session.refused(id);
    }
    assert!(!session.raw.contains("root:x:0:0"), "/etc/passwd leaked");
    assert_eq!(
        session.refused("stacked_commit_drop")["reason"],
        "multiple_statements"
    );

    // Restricted columns: refused by name, left out of describe and sample, and their
    // values appear nowhere in anything the client received.
    for id in [
        "customer_phone",
        "customer_address",
        "supplier_phone",
        "customers_star",
        "suppliers_star",
    ] {
        assert_eq!(session.refused(id)["reason"], "restricted_column", "{id}");
    }
    session.refused("natural_join");
    if dialect == "postgres" {
        for id in ["whole_row", "row_to_json", "to_jsonb"] {
            session.refused(id);
        }
    }
    for (id, table) in [
        ("describe_customers", "customers"),
        ("describe_suppliers", "suppliers"),
    ] {
        let described = session.ok(id);
        assert_eq!(described["name"], table);
        let columns = column_names(&described["columns"]);
        assert!(columns.len() >= 3, "{id}: {columns:?}");
        assert!(
            !columns.iter().any(|c| c == "phone" || c == "address"),
            "{id}: {columns:?}"
        );
        let create = described["create_table"].as_str().unwrap_or_default();
        assert!(
            !create.contains("phone") && !create.contains("address"),
            "{create}"
        );
    }
    for id in ["sample_customers", "sample_suppliers", "customers_allowed"] {
        let rows = session.ok(id);
        assert!(rows["row_count"].as_u64().unwrap_or(0) >= 5, "{id}: {rows}");
        let columns: Vec<String> = rows["columns"]
            .as_array()
            .map(|columns| {
                columns
                    .iter()
                    .filter_map(|c| c.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            !columns.iter().any(|c| c == "phone" || c == "address"),
            "{id}: {columns:?}"
        );
    }
    assert!(
        restricted_values.len() >= 100,
        "only {} restricted values to look for",
        restricted_values.len()
    );
    let leaked: Vec<&String> = restricted_values
        .iter()
        .filter(|value| session.raw.contains(value.as_str()))
        .collect();
    assert!(
        leaked.is_empty(),
        "restricted values reached the client: {leaked:?}"
    );

    // The hidden log table: not listed, and refused in the same words as a missing one.
    let names = column_names(&session.ok("tables")["tables"]);
    assert!(names.len() >= 10, "{names:?}");
    assert!(!names.iter().any(|name| name == HIDDEN_TABLE), "{names:?}");
    for (hidden, missing) in [
        ("describe_log", "describe_missing"),
        ("sample_log", "sample_missing"),
        ("select_log", "select_missing"),
    ] {
        let hidden_error = session.refused(hidden);
        let missing_error = session.refused(missing);
        assert_eq!(
            hidden_error["error_type"], missing_error["error_type"],
            "{hidden}"
        );
        let hidden_words = hidden_error["message"]
            .as_str()
            .unwrap_or_default()
            .replace(HIDDEN_TABLE, "T");
        let missing_words = missing_error["message"]
            .as_str()
            .unwrap_or_default()
            .replace(MISSING_TABLE, "T");
        assert_eq!(hidden_words, missing_words, "{hidden} vs {missing}");
    }
    assert!(
        !session.raw.contains("secret question"),
        "the log's rows leaked"
    );
}

/// The `name` fields of an array of objects.
fn column_names(items: &Value) -> Vec<String> {
    items
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------
// The Python SDK and the Inspector on the demo

#[test]
fn python_sdk_lists_the_four_tools_reads_the_demo_schema_and_gets_rows() {
    let test = "python_sdk_lists_the_four_tools_reads_the_demo_schema_and_gets_rows";
    let sdk = match python_sdk() {
        Ok(sdk) => sdk,
        Err(why) => return skip(test, &why),
    };
    let home = tempfile::tempdir().expect("temp dir");
    let home_text = home.path().to_string_lossy().into_owned();
    let calls = vec![
        call("tables", "list_tables", json!({})),
        call("describe", "describe_table", json!({"name": "Bills"})),
        call("sample_default", "sample_rows", json!({"name": "bills"})),
        call(
            "sample_two",
            "sample_rows",
            json!({"name": "products", "n": 2}),
        ),
        run_query("count", "SELECT count(*) AS n FROM bills"),
        run_query("capped", "SELECT bill_id FROM bills ORDER BY bill_id"),
        run_query("typo", "SELECT cust_nme FROM customers"),
        call(
            "describe_missing",
            "describe_table",
            json!({"name": "invoices"}),
        ),
        call("sample_missing", "sample_rows", json!({"name": "invoices"})),
    ];
    // The demo is built on first use under ASKDB_HOME, as for a new user.
    let session = python_session(sdk, &calls, None, &[("ASKDB_HOME", &home_text)], &["mcp"]);
    assert!(home.path().join("demo.sqlite").is_file());

    let info = &session.info;
    assert_eq!(info["server"]["name"], "askdb", "{info}");
    let instructions = info["instructions"].as_str().unwrap_or_default();
    assert!(instructions.contains("SQLite"), "{instructions}");
    let tools = info["tools"].as_array().expect("tools listed");
    let mut names = column_names(&info["tools"]);
    names.sort();
    assert_eq!(names, TOOLS, "{info}");
    for tool in tools {
        let name = tool["name"].as_str().unwrap_or_default();
        let description = tool["description"].as_str().unwrap_or_default();
        assert!(description.len() > 60, "{name}: {description:?}");
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{name}");
        let required = &tool["inputSchema"]["required"];
        let properties = &tool["inputSchema"]["properties"];
        match name {
            "list_tables" => assert_eq!(properties, &json!({}), "{tool}"),
            "describe_table" => {
                assert_eq!(required, &json!(["name"]), "{tool}");
                assert_eq!(properties["name"]["type"], "string", "{tool}");
            }
            "sample_rows" => {
                assert_eq!(required, &json!(["name"]), "{tool}");
                assert_eq!(properties["n"]["type"], "integer", "{tool}");
                assert_eq!(properties["n"]["default"], 3, "{tool}");
                assert_eq!(properties["n"]["maximum"], 20, "{tool}");
            }
            "run_query" => {
                assert_eq!(required, &json!(["sql"]), "{tool}");
                assert_eq!(properties["sql"]["type"], "string", "{tool}");
                assert!(description.contains("LIMIT"), "{description}");
            }
            other => panic!("unexpected tool {other}"),
        }
    }

    // list_tables: text table and structured list agree.
    let listed = session.call("tables");
    let table_names = column_names(&listed["structured"]["tables"]);
    assert!(
        table_names.contains(&"bills".to_string()),
        "{table_names:?}"
    );
    assert!(!table_names.contains(&HIDDEN_TABLE.to_string()));
    let listed_text = listed["text"][0].as_str().unwrap_or_default();
    assert!(
        listed_text.contains("\n- bills (~1400 rows): "),
        "{listed_text}"
    );

    // describe_table: the demo schema, structured and as CREATE TABLE.
    let described = session.ok("describe");
    assert_eq!(described["name"], "bills");
    let columns = column_names(&described["columns"]);
    for column in [
        "bill_id",
        "bill_no",
        "cust_id",
        "txn_dt",
        "total_amt",
        "status",
    ] {
        assert!(columns.contains(&column.to_string()), "{columns:?}");
    }
    assert_eq!(described["primary_key"], json!(["bill_id"]));
    let described_text = session.call("describe")["text"][0]
        .as_str()
        .unwrap_or_default();
    assert!(described_text.contains("CREATE TABLE"), "{described_text}");

    // sample_rows: n defaults to 3.
    assert_eq!(session.ok("sample_default")["row_count"], 3);
    assert_eq!(session.ok("sample_two")["row_count"], 2);

    // run_query: rows, with the SQL that ran and its forced LIMIT.
    let count = session.ok("count");
    assert_eq!(count["columns"], json!(["n"]));
    assert_eq!(count["rows"], json!([[1400]]));
    assert_eq!(count["row_count"], 1);
    assert_eq!(count["truncated"], false);
    assert_eq!(count["sql"], "SELECT count(*) AS n FROM bills LIMIT 200");
    let count_text = session.call("count")["text"][0]
        .as_str()
        .unwrap_or_default();
    assert!(count_text.contains("1400"), "{count_text}");
    assert!(
        count_text.contains("ran: SELECT count(*) AS n FROM bills LIMIT 200"),
        "{count_text}"
    );
    let capped = session.ok("capped");
    assert_eq!(capped["row_count"], 200);
    assert_eq!(capped["truncated"], true);
    assert!(capped["sql"]
        .as_str()
        .unwrap_or_default()
        .ends_with("LIMIT 200"));

    // A failing query: the database's error, typed and repairable, as a tool error.
    let typo = session.refused("typo");
    assert_eq!(typo["error_type"], "unknown_column", "{typo}");
    assert_eq!(typo["repairable"], true);
    assert!(typo["message"]
        .as_str()
        .unwrap_or_default()
        .contains("cust_nme"));

    // Unknown tables in describe and sample: a clear tool error.
    for id in ["describe_missing", "sample_missing"] {
        let error = session.refused(id);
        assert_eq!(error["error_type"], "unknown_table", "{id}: {error}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("invoices") && message.contains("list_tables"),
            "{message}"
        );
    }
}

/// The Inspector's exit code for a tool result with `isError: true` (its `TOOL_ERROR`).
const INSPECTOR_TOOL_ERROR: i32 = 5;

/// The Inspector CLI against `askdb mcp --db sqlite:PATH`; its stdout as JSON. A tool
/// error makes it exit with [`INSPECTOR_TOOL_ERROR`] after printing the result.
fn inspector_json(inspector: &Inspector, db: &Path, method: &[&str], tool_error: bool) -> Value {
    let home = tempfile::tempdir().expect("scratch HOME");
    let mut command = Command::new(&inspector.bin);
    command
        .arg("--cli")
        .arg(askdb_bin())
        .args(["mcp", "--db"])
        .arg(format!("sqlite:{}", db.display()))
        .args(method)
        // The Inspector keeps a catalog under HOME; a scratch HOME keeps it there.
        .env("HOME", home.path());
    let output = run_with_timeout(command, Duration::from_secs(120))
        .unwrap_or_else(|error| panic!("inspector: {error}"));
    let stdout = text(&output.stdout);
    let expected = if tool_error { INSPECTOR_TOOL_ERROR } else { 0 };
    assert_eq!(
        output.status.code(),
        Some(expected),
        "inspector {method:?} ({}):\n{stdout}\n{}",
        output.status,
        text(&output.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|error| panic!("inspector output is not JSON ({error}):\n{stdout}"))
}

#[test]
fn inspector_cli_lists_the_four_tools_reads_the_demo_schema_and_gets_rows() {
    let test = "inspector_cli_lists_the_four_tools_reads_the_demo_schema_and_gets_rows";
    let inspector = match inspector() {
        Ok(inspector) => inspector,
        Err(why) => return skip(test, &why),
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let db = built_demo(dir.path());

    // --strict: the Inspector also checks the tool schemas for portability problems.
    let listed = inspector_json(
        inspector,
        &db,
        &["--method", "tools/list", "--strict"],
        false,
    );
    let mut names = column_names(&listed["tools"]);
    names.sort();
    assert_eq!(names, TOOLS, "{listed}");
    for tool in listed["tools"].as_array().into_iter().flatten() {
        assert!(
            tool["description"].as_str().is_some_and(|d| d.len() > 60),
            "{tool}"
        );
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    }

    let tables = inspector_json(
        inspector,
        &db,
        &["--method", "tools/call", "--tool-name", "list_tables"],
        false,
    );
    let table_names = column_names(&tables["structuredContent"]["tables"]);
    assert!(table_names.contains(&"bills".to_string()), "{tables}");
    assert!(!table_names.contains(&HIDDEN_TABLE.to_string()), "{tables}");

    let described = inspector_json(
        inspector,
        &db,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "describe_table",
            "--tool-arg",
            "name=customers",
        ],
        false,
    );
    assert_eq!(described["isError"], false, "{described}");
    let columns = column_names(&described["structuredContent"]["columns"]);
    assert!(columns.contains(&"cust_name".to_string()), "{columns:?}");
    assert!(!columns.contains(&"phone".to_string()), "{columns:?}");

    let sampled = inspector_json(
        inspector,
        &db,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "sample_rows",
            "--tool-arg",
            "name=bills",
            "n=2",
        ],
        false,
    );
    assert_eq!(sampled["structuredContent"]["row_count"], 2, "{sampled}");

    let rows = inspector_json(
        inspector,
        &db,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "run_query",
            "--tool-arg",
            "sql=SELECT status, count(*) AS n FROM bills WHERE status = 'VOID' GROUP BY status",
        ],
        false,
    );
    assert_eq!(rows["isError"], false, "{rows}");
    let result = &rows["structuredContent"];
    assert_eq!(result["columns"], json!(["status", "n"]), "{rows}");
    assert_eq!(result["row_count"], 1, "{rows}");
    assert_eq!(result["rows"][0][0], "VOID", "{rows}");
    assert!(
        result["sql"]
            .as_str()
            .unwrap_or_default()
            .ends_with("LIMIT 200"),
        "{rows}"
    );
    let shown = rows["content"][0]["text"].as_str().unwrap_or_default();
    assert!(shown.contains("VOID") && shown.contains("ran: "), "{shown}");

    let refused = inspector_json(
        inspector,
        &db,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "run_query",
            "--tool-arg",
            "sql=DELETE FROM bills",
        ],
        true,
    );
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["structuredContent"]["reason"], "not_a_query",
        "{refused}"
    );
}

// ---------------------------------------------------------------------------------
// The hostile corpus over MCP: SQLite

#[test]
fn sqlite_hostile_corpus_over_mcp_is_refused_and_the_file_is_unchanged() {
    let test = "sqlite_hostile_corpus_over_mcp_is_refused_and_the_file_is_unchanged";
    let sdk = match python_sdk() {
        Ok(sdk) => sdk,
        Err(why) => return skip(test, &why),
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let db = built_demo(dir.path());
    let restricted_values: Vec<String> = {
        let connection = rusqlite::Connection::open(&db).expect("demo opens");
        let mut statement = connection
            .prepare(
                "SELECT phone FROM customers UNION ALL SELECT address FROM customers \
                 UNION ALL SELECT phone FROM suppliers",
            )
            .expect("restricted values query");
        statement
            .query_map([], |row| row.get::<_, Option<String>>(0))
            .expect("restricted values")
            .filter_map(|value| value.ok().flatten())
            .filter(|value| value.len() >= 6)
            .collect()
    };
    let before = file_sha256(&db);
    let db_url = format!("sqlite:{}", db.display());
    let session = python_session(
        sdk,
        &probe_calls("sqlite"),
        Some("sqlite"),
        &[],
        &["mcp", "--db", &db_url],
    );
    check_hostile_session(&session, "sqlite", &restricted_values);
    assert_eq!(before, file_sha256(&db), "the database file changed");
}

// ---------------------------------------------------------------------------------
// The hostile corpus over MCP: PostgreSQL, as the askdb_ro role

fn url_with_database(url: &str, database: &str) -> String {
    askdb::admin::url_with_database(url, database)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

impl Scratch {
    fn options(&self) -> askdb::admin::SetupOptions {
        use askdb::admin::{RoleSpec, SetupOptions};
        SetupOptions {
            admin_url: self.admin_url.clone(),
            database: self.database.clone(),
            read_only_role: RoleSpec::new(&self.read_only_role),
            log_role: RoleSpec::new(&self.log_role),
            example_rls: Vec::new(),
        }
    }
}

/// Row count and a digest of every row of every table in `public` (the demo tables and
/// the query log), plus the objects a write could add or change, read as the admin.
async fn pg_fingerprint(client: &tokio_postgres::Client) -> BTreeMap<String, String> {
    let mut sums = BTreeMap::new();
    let tables = client
        .query(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename",
            &[],
        )
        .await
        .expect("table list");
    for row in tables {
        let table: String = row.get(0);
        let sum = client
            .query_one(
                format!(
                    "SELECT count(*)::text || ':' || \
                     coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '') FROM \"{table}\" t"
                )
                .as_str(),
                &[],
            )
            .await
            .unwrap_or_else(|error| panic!("checksum of {table}: {error}"));
        sums.insert(table, sum.get::<_, String>(0));
    }
    for (name, sql) in [
        (
            "relations",
            "SELECT coalesce(string_agg(relname || ':' || relkind::text || ':' || relnatts, ',' \
             ORDER BY relname), '') FROM pg_class WHERE relnamespace = 'public'::regnamespace",
        ),
        (
            "functions",
            "SELECT count(*)::text FROM pg_proc WHERE pronamespace = 'public'::regnamespace",
        ),
        (
            "large_objects",
            "SELECT count(*)::text FROM pg_largeobject_metadata",
        ),
        ("roles", "SELECT count(*)::text FROM pg_roles"),
    ] {
        let row = client
            .query_one(sql, &[])
            .await
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        sums.insert(format!("#{name}"), row.get::<_, String>(0));
    }
    sums
}

#[test]
fn postgres_hostile_corpus_over_mcp_as_askdb_ro_is_refused_and_nothing_changes() {
    let test = "postgres_hostile_corpus_over_mcp_as_askdb_ro_is_refused_and_nothing_changes";
    let Some(scratch) = Scratch::new(test, "mcp") else {
        return;
    };
    let sdk = match python_sdk() {
        Ok(sdk) => sdk,
        Err(why) => return skip(test, &why),
    };
    let runtime = runtime();
    let report = runtime
        .block_on(askdb::admin::setup(&scratch.options()))
        .unwrap_or_else(|error| panic!("db setup: {error}"));
    let admin_in_db = url_with_database(&scratch.admin_url, &scratch.database);
    let (before, restricted_values) = runtime.block_on(async {
        let admin = pg_connect(&admin_in_db).await.expect("admin connects");
        admin
            .execute(
                &format!("INSERT INTO {HIDDEN_TABLE} (question, decision) VALUES ('secret question', 'logged')"),
                &[],
            )
            .await
            .expect("a row in the query log");
        let values: Vec<String> = admin
            .query(
                "SELECT phone::text FROM customers UNION ALL SELECT address::text FROM customers \
                 UNION ALL SELECT phone::text FROM suppliers",
                &[],
            )
            .await
            .expect("restricted values")
            .iter()
            .filter_map(|row| row.get::<_, Option<String>>(0))
            .filter(|value| value.len() >= 6)
            .collect();
        (pg_fingerprint(&admin).await, values)
    });

    let ro_url = report.read_only.connection_url().to_string();
    assert!(
        ro_url.contains(&scratch.read_only_role),
        "the askdb_ro role's URL"
    );
    let session = python_session(
        sdk,
        &probe_calls("postgres"),
        Some("postgres"),
        &[],
        &["mcp", "--db", &ro_url],
    );
    let instructions = session.info["instructions"].as_str().unwrap_or_default();
    assert!(instructions.contains("PostgreSQL"), "{instructions}");
    check_hostile_session(&session, "postgres", &restricted_values);

    let after = runtime.block_on(async {
        let admin = pg_connect(&admin_in_db).await.expect("admin connects");
        pg_fingerprint(&admin).await
    });
    assert!(
        before.contains_key(HIDDEN_TABLE) && before.len() >= 15,
        "{before:?}"
    );
    assert_eq!(before, after, "the database changed");
}

// ---------------------------------------------------------------------------------
// Startup and the protocol stream

/// Starts `askdb mcp ARGS` the way a client does (stdin a pipe held open) and waits for
/// it to exit by itself.
fn start_and_wait(args: &[&str]) -> Output {
    let mut child = Command::new(askdb_bin())
        .args(args)
        .env_remove("ASKDB_DATABASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("askdb starts");
    let stdin = child.stdin.take();
    let stdout = read_on_thread(child.stdout.take());
    let stderr = read_on_thread(child.stderr.take());
    let status = wait_until(&mut child, Duration::from_secs(30))
        .unwrap_or_else(|error| panic!("askdb {args:?} did not exit on its own: {error}"));
    drop(stdin);
    Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

#[test]
fn startup_problems_exit_non_zero_with_a_message_before_serving() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("missing").join("none.sqlite");
    let missing_url = format!("sqlite:{}", missing.display());
    for (args, expected) in [
        (
            vec!["mcp", "--db", "oracle://root@127.0.0.1/shop"],
            "unrecognised database URL",
        ),
        (
            // Port 1 again, for MySQL: a clear message, never a panic.
            vec![
                "mcp",
                "--db",
                "mysql://askdb_ro:secret@127.0.0.1:1/askdb_demo",
            ],
            "cannot open the database",
        ),
        (
            vec!["mcp", "--db", missing_url.as_str()],
            "cannot open the database",
        ),
        (
            // Port 1: nothing listens there, so the connection is refused at once.
            vec![
                "mcp",
                "--db",
                "postgres://askdb_ro:secret@127.0.0.1:1/askdb_demo",
            ],
            "cannot open the database",
        ),
    ] {
        let output = start_and_wait(&args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "{args:?}: {stderr}");
        assert!(
            output.stdout.is_empty(),
            "{args:?} wrote to stdout: {}",
            text(&output.stdout)
        );
        assert!(stderr.starts_with("askdb: "), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("secret"),
            "a password reached stderr: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// A minimal JSON-RPC exchange by hand, only to inspect the stream itself: every byte
/// on stdout is a JSON-RPC message, askdb's own lines go to stderr, and the server exits
/// 0 when the client closes stdin.
#[test]
fn stdout_carries_only_protocol_messages_and_closing_stdin_ends_the_server() {
    let home = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(askdb_bin())
        .arg("mcp")
        .env("ASKDB_HOME", home.path())
        .env_remove("ASKDB_DATABASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("askdb mcp starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let stderr = read_on_thread(child.stderr.take());
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "askdb-test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_query", "arguments": {"sql": "SELECT count(*) FROM bills; DROP TABLE bills"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "run_query", "arguments": {"sql": "SELECT count(*) FROM categories"}}}),
    ];
    for message in &messages {
        writeln!(stdin, "{message}").expect("request written");
    }
    stdin.flush().expect("flushed");
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for line in stdout.lines() {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut replies: BTreeMap<u64, Value> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while replies.len() < 3 {
        let line = lines_rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("a reply in time")
            .expect("stdout readable");
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|error| panic!("stdout line is not JSON ({error}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        if let Some(id) = message["id"].as_u64() {
            replies.insert(id, message);
        }
    }
    drop(stdin);
    let status = wait_until(&mut child, Duration::from_secs(30)).expect("exits after EOF");
    // Anything written after the replies must be protocol too.
    for line in lines_rx.try_iter().flatten() {
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|error| panic!("stdout line is not JSON ({error}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
    let stderr = text(&stderr.join().unwrap_or_default());
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(replies[&1]["result"]["serverInfo"]["name"], "askdb");
    let refused = &replies[&2]["result"];
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["structuredContent"]["reason"],
        "multiple_statements"
    );
    let rows = &replies[&3]["result"];
    assert_eq!(rows["isError"], false, "{rows}");
    assert_eq!(
        rows["structuredContent"]["sql"],
        "SELECT count(*) FROM categories LIMIT 200"
    );
    assert!(
        stderr.contains("askdb mcp: serving demo over stdio"),
        "{stderr}"
    );
}

/// The README's client configurations are valid JSON and start `askdb mcp`: the demo
/// one with `--db demo`, the PostgreSQL one as the askdb_ro role through the env.
#[test]
fn readme_client_configurations_start_askdb_mcp() {
    let readme = fs::read_to_string(project_path("README.md")).expect("README");
    let start = readme
        .find("## Use askdb from an MCP client")
        .expect("the README has the MCP section");
    let section = &readme[start..];
    let section = &section[..section[3..]
        .find("\n## ")
        .map_or(section.len(), |end| end + 3)];
    let mut servers = BTreeMap::new();
    for block in section.split("```json\n").skip(1) {
        let json_text = &block[..block.find("```").expect("closed code block")];
        let config: Value = serde_json::from_str(json_text)
            .unwrap_or_else(|error| panic!("README snippet is not JSON ({error}):\n{json_text}"));
        for (name, server) in config["mcpServers"].as_object().expect("mcpServers") {
            servers.insert(name.clone(), server.clone());
        }
    }
    let demo = &servers["askdb-demo"];
    assert!(demo["command"]
        .as_str()
        .is_some_and(|c| c.ends_with("/askdb")));
    assert_eq!(demo["args"], json!(["mcp", "--db", "demo"]));
    let postgres = &servers["askdb-postgres"];
    assert_eq!(postgres["args"], json!(["mcp"]));
    let url = postgres["env"]["ASKDB_DATABASE_URL"]
        .as_str()
        .unwrap_or_default();
    assert!(url.starts_with("postgres://askdb_ro:"), "{url}");
    assert!(
        section.contains("claude mcp add askdb-demo"),
        "Claude Code snippet"
    );
}
