//! The users replicas share (`--state-url`, decision 0083), driven as an operator runs
//! them: `askdb users --state-url URL` on one machine and two `askdb serve --state-url`
//! processes, each with its own data directory, over one real PostgreSQL state. A user
//! added on one machine signs in on both servers without a restart, revoked on another
//! it is refused by both; a replica whose own users file the state lacks refuses to
//! start until the file is imported, and the shared users decide whether a server may
//! listen beyond loopback. A replica on a state that lacks one of its tables refuses to
//! start, naming the table and `askdb db setup`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

#[path = "support/ci.rs"]
mod ci;
#[path = "support/scratch.rs"]
mod scratch;
#[path = "support/serve.rs"]
mod serve;
use scratch::{pg_connect, Scratch};
use serve::{http_client as client, Server};

/// `askdb users ARGS` with `home` as the data directory, and the state `url` when given.
fn askdb_users(home: &Path, url: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_askdb"));
    command
        .arg("users")
        .env("ASKDB_HOME", home)
        .env_remove("ASKDB_STATE_URL");
    if let Some(url) = url {
        command.args(["--state-url", url]);
    }
    command.args(args).output().expect("askdb runs")
}

/// The token `askdb users [--state-url URL] --json add NAME` printed.
fn added(home: &Path, url: Option<&str>, name: &str) -> String {
    let output = askdb_users(home, url, &["--json", "add", name]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let body: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    body["token"].as_str().expect("a token").to_string()
}

/// `askdb serve ARGS --state-url URL`, which must refuse to start: its exit code and
/// stderr (killed after 60 s if it started after all).
fn serve_refused(home: &Path, url: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_askdb"))
        .args([
            "serve",
            "--db",
            "demo",
            "--state-url",
            url,
            "--warm-up",
            "false",
        ])
        .args(args)
        .env("ASKDB_HOME", home)
        .env_remove("ASKDB_OPEN_TO_ANYONE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("askdb starts");
    let started = Instant::now();
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("askdb serve started although it had to refuse");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().expect("stderr");
    (
        status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// GET /api/schema on `server` with `token` (or none): the status.
async fn schema(http: &reqwest::Client, server: &Server, token: Option<&str>) -> StatusCode {
    let mut request = http.get(server.at("/api/schema"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.expect("an answer").status()
}

/// Asks until `server` answers `want` for `token`: a replica reads the shared users at
/// most 2 s old. Only the change is asserted, within a generous deadline.
async fn until(http: &reqwest::Client, server: &Server, token: &str, want: StatusCode) {
    let started = Instant::now();
    loop {
        let status = schema(http, server, Some(token)).await;
        if status == want {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still {status} after 30 s, wanted {want}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A scratch database holding the state schema: its names, its superuser URL and a
/// connection to it. None after a SKIPPED line when no server answers.
async fn state_database(
    test: &str,
    kind: &str,
) -> Option<(Scratch, String, tokio_postgres::Client)> {
    let scratch = Scratch::new(test, kind)?;
    scratch.create_empty_database().await;
    let url = askdb::admin::url_with_database(&scratch.admin_url, &scratch.database);
    let state = pg_connect(&url).await.expect("connects");
    askdb::state::apply_schema(&state).await.expect("schema");
    Some((scratch, url, state))
}

#[tokio::test]
async fn users_added_and_revoked_on_any_machine_are_every_replicas() {
    let test = "users_added_and_revoked_on_any_machine_are_every_replicas";
    let Some((_scratch, url, state)) = state_database(test, "susers").await else {
        return;
    };
    let (machine_a, machine_b) = (
        tempfile::tempdir().expect("temp dir"),
        tempfile::tempdir().expect("temp dir"),
    );
    let (a, b) = (machine_a.path(), machine_b.path());
    let url_arg = Some(url.as_str());

    // No shared user yet: beyond loopback only with --open-to-anyone.
    let (code, stderr) = serve_refused(a, &url, &["--addr", "0.0.0.0:0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--open-to-anyone")
            && stderr.contains("askdb users --state-url URL add NAME"),
        "{stderr}"
    );

    // Machine B's own users file, from before the users were shared: B refuses to
    // start until it is imported, rather than serve without ben.
    let ben = added(b, None, "ben");
    let (code, stderr) = serve_refused(b, &url, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("ben") && stderr.contains("import"),
        "{stderr}"
    );
    let nowhere = askdb_users(b, None, &["import"]);
    let stderr = String::from_utf8_lossy(&nowhere.stderr);
    assert_eq!(nowhere.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--state-url"), "{stderr}");
    let imported = askdb_users(b, url_arg, &["import"]);
    let text = String::from_utf8_lossy(&imported.stdout);
    assert!(imported.status.success(), "{text}");
    assert!(text.contains("1 user(s) copied"), "{text}");

    // A shared user, and the file's refusals in the same words (machine B's file
    // holds an ana of its own for the taken name).
    let ana = added(a, url_arg, "ana");
    added(b, None, "ana");
    for (what, args) in [
        ("a bad name", ["add", "a b"]),
        ("a taken name", ["add", "ana"]),
        ("an unknown user", ["revoke", "nobody"]),
    ] {
        let shared = askdb_users(a, url_arg, &args);
        let file = askdb_users(b, None, &args);
        assert!(!shared.status.success(), "{what}");
        assert!(!shared.stderr.is_empty(), "{what}");
        assert_eq!(
            String::from_utf8_lossy(&shared.stderr),
            String::from_utf8_lossy(&file.stderr),
            "{what}"
        );
    }
    let stored: Vec<String> = state
        .query("SELECT token_sha256 FROM askdb_state.users", &[])
        .await
        .expect("rows")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(stored.len(), 2);
    for hash in &stored {
        assert!(
            !hash.contains(&ana[6..]) && !hash.contains(&ben[6..]),
            "{hash}"
        );
    }

    // Two replicas, each its own data directory; users exist, so every address.
    let start = |home: &Path| {
        let home = home.display().to_string();
        Server::start(
            &["--db", "demo", "--addr", "0.0.0.0:0", "--state-url", &url],
            &[("ASKDB_HOME", &home)],
        )
    };
    let (server_a, server_b) = (start(a), start(b));
    let http = client();
    for server in [&server_a, &server_b] {
        assert_eq!(schema(&http, server, None).await, StatusCode::UNAUTHORIZED);
        assert_eq!(schema(&http, server, Some(&ana)).await, StatusCode::OK);
        assert_eq!(
            schema(&http, server, Some(&ben)).await,
            StatusCode::OK,
            "the imported token works on a replica whose file never had it"
        );
    }

    // Added on machine A while both run: taken by B without a restart.
    let carla = added(a, url_arg, "carla");
    until(&http, &server_b, &carla, StatusCode::OK).await;
    // Revoked on machine B: refused by A.
    let revoked = askdb_users(b, url_arg, &["revoke", "carla"]);
    assert!(
        revoked.status.success(),
        "{}",
        String::from_utf8_lossy(&revoked.stderr)
    );
    until(&http, &server_a, &carla, StatusCode::UNAUTHORIZED).await;
    assert_eq!(schema(&http, &server_a, Some(&ana)).await, StatusCode::OK);
    let listed = askdb_users(a, url_arg, &["list"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 3, "{listed}");
    assert!(
        lines[0].starts_with("ben\t") && lines[1].starts_with("ana\t"),
        "{listed}"
    );
    assert!(
        lines[2].starts_with("carla\t") && lines[2].contains("revoked"),
        "{listed}"
    );
}

#[tokio::test]
async fn a_replica_refuses_to_start_on_a_state_that_lacks_a_table() {
    let test = "a_replica_refuses_to_start_on_a_state_that_lacks_a_table";
    let Some((_scratch, url, state)) = state_database(test, "stables").await else {
        return;
    };
    // A state made before decision 0084's table: the replica says so before it listens,
    // not at the first Wrong mark.
    state
        .batch_execute("DROP TABLE askdb_state.wrong_marks")
        .await
        .expect("dropped");
    let home = tempfile::tempdir().expect("temp dir");
    let (code, stderr) = serve_refused(home.path(), &url, &[]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("askdb_state.wrong_marks") && stderr.contains("askdb db setup"),
        "{stderr}"
    );
}
