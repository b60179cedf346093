//! Who may reach `askdb serve`, over real HTTP against the real binary (decision 0022):
//! a DNS-rebinding page (a forged Host) and cross-site POSTs (a foreign Origin,
//! `Sec-Fetch-Site: cross-site`) are refused, the page's same-origin requests and
//! curl-style requests without either header still work, the operator's
//! `--allowed-host` is answered, and listening beyond loopback needs `--open-to-anyone`.

use std::process::Command;

use reqwest::header::{HOST, ORIGIN};
use reqwest::StatusCode;
use serde_json::{json, Value};

#[path = "support/serve.rs"]
mod serve;
use serve::{http_client as client, Server};

const COUNT: &str = "SELECT count(*) AS customers FROM customers";
const QUESTION: &str = "How many customers are there?";

async fn send(request: reqwest::RequestBuilder) -> (StatusCode, Value, String) {
    let response = request.send().await.expect("an answer");
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, body, text)
}

#[tokio::test]
async fn a_rebinding_page_and_cross_site_posts_are_refused_and_the_page_still_works() {
    let server = Server::start(&["--db", "demo", "--allowed-host", "askdb.test"], &[]);
    let http = client();
    let port = server
        .url
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let sql = json!({ "sql": COUNT });

    // DNS rebinding: the browser thinks it talks to the attacker's own name.
    let rebound = format!("attacker.example:{port}");
    for path in ["/", "/api/schema", "/api/health", "/assets/app.js"] {
        let (status, body, text) = send(http.get(server.at(path)).header(HOST, &rebound)).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{path}: {text}");
        assert_eq!(body["error"], "unknown_host", "{path}: {text}");
        assert!(
            !text.contains("attacker") && !text.contains("localhost"),
            "{text}"
        );
    }
    let (status, body, _) = send(
        http.post(server.at("/api/sql"))
            .header(HOST, &rebound)
            .header(ORIGIN, format!("http://{rebound}"))
            .header("sec-fetch-site", "same-origin")
            .json(&sql),
    )
    .await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{body}");

    // Cross-site POSTs: a foreign Origin, or the browser's own word that it is one.
    for (origin, site) in [
        (Some("https://attacker.example"), None),
        (None, Some("cross-site")),
        (Some("https://attacker.example"), Some("cross-site")),
        (Some("null"), None),
    ] {
        for path in [
            "/api/sql",
            "/api/ask",
            "/api/ask/stream",
            "/api/local-model/start",
        ] {
            let mut request = http.post(server.at(path)).json(&sql);
            if let Some(origin) = origin {
                request = request.header(ORIGIN, origin);
            }
            if let Some(site) = site {
                request = request.header("sec-fetch-site", site);
            }
            let (status, body, text) = send(request).await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{path} {origin:?} {site:?}: {text}"
            );
            assert_eq!(body["error"], "cross_site_request", "{text}");
            assert!(!text.contains("customers"), "{text}");
        }
    }

    // The page's own fetches: same-origin, with its Origin.
    let (status, body, text) = send(
        http.post(server.at("/api/sql"))
            .header(ORIGIN, &server.url)
            .header("sec-fetch-site", "same-origin")
            .json(&sql),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(body["rows"], json!([[120]]));
    // curl, scripts and the MCP bridge: neither header.
    let (status, body, text) = send(http.post(server.at("/api/sql")).json(&sql)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(body["rows"], json!([[120]]));
    // The name the operator added, and localhost on the listening port.
    for host in ["askdb.test".to_string(), format!("localhost:{port}")] {
        let (status, _, text) = send(http.get(server.at("/api/schema")).header(HOST, &host)).await;
        assert_eq!(status, StatusCode::OK, "{host}: {text}");
    }
    let (status, _, text) = send(
        http.post(server.at("/api/sql"))
            .header(HOST, "askdb.test")
            .header(ORIGIN, "https://askdb.test")
            .json(&sql),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
}

#[tokio::test]
async fn listening_beyond_this_machine_needs_open_to_anyone() {
    let home = tempfile::tempdir().expect("temp dir");
    let refused = Command::new(env!("CARGO_BIN_EXE_askdb"))
        .args(["serve", "--db", "demo", "--addr", "0.0.0.0:0"])
        .env("ASKDB_HOME", home.path())
        .env_remove("ASKDB_OPEN_TO_ANYONE")
        .env_remove("ASKDB_ADDR")
        .output()
        .expect("askdb runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--open-to-anyone"), "{stderr}");
    assert!(stderr.contains("0.0.0.0:0"), "{stderr}");
    assert!(
        !String::from_utf8_lossy(&refused.stdout).contains("listening"),
        "it must not have listened"
    );

    // Said explicitly, it listens, and answers on loopback and on an address literal.
    let server = Server::start(
        &["--db", "demo", "--addr", "0.0.0.0:0", "--open-to-anyone"],
        &[],
    );
    assert!(server.url.starts_with("http://0.0.0.0:"), "{}", server.url);
    let port = server
        .url
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let http = client();
    let local = format!("http://127.0.0.1:{port}/api/schema");
    let (status, _, text) = send(http.get(&local)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (status, _, text) = send(
        http.get(&local)
            .header(HOST, format!("rebound.example:{port}")),
    )
    .await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{text}");
}

fn askdb_users(home: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_askdb"))
        .arg("users")
        .args(args)
        .env("ASKDB_HOME", home)
        .output()
        .expect("askdb runs")
}

#[tokio::test]
async fn with_users_every_request_needs_a_live_bearer_token() {
    let home = tempfile::tempdir().expect("temp dir");
    let added = askdb_users(home.path(), &["--json", "add", "ana"]);
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let added: Value = serde_json::from_slice(&added.stdout).expect("JSON");
    let token = added["token"].as_str().expect("a token").to_string();
    let revoked = askdb_users(home.path(), &["--json", "add", "ben"]);
    let revoked: Value = serde_json::from_slice(&revoked.stdout).expect("JSON");
    let revoked = revoked["token"].as_str().expect("a token").to_string();
    assert!(askdb_users(home.path(), &["revoke", "ben"])
        .status
        .success());
    let stored = std::fs::read_to_string(home.path().join("users.json")).expect("users file");
    assert!(
        !stored.contains(&token) && !stored.contains(&revoked),
        "{stored}"
    );
    let listed = String::from_utf8_lossy(&askdb_users(home.path(), &["list"]).stdout).into_owned();
    assert!(
        listed.contains("ana") && listed.contains("revoked"),
        "{listed}"
    );
    assert!(!listed.contains(&token), "{listed}");

    // A user exists: listening beyond loopback needs no --open-to-anyone.
    let home_text = home.path().display().to_string();
    let script = home.path().join("script.jsonl");
    let lines = [
        json!({"question": QUESTION, "purpose": "write_sql", "reply": {"sql": COUNT}}),
        json!({"question": "*", "purpose": "check", "reply": "ok"}),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&script, text).expect("script");
    let script = script.display().to_string();
    let server = Server::start(
        &["--db", "demo", "--addr", "0.0.0.0:0", "--explain", "false"],
        &[
            ("ASKDB_HOME", &home_text),
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script),
        ],
    );
    let port = server
        .url
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let base = format!("http://127.0.0.1:{port}");
    let http = client();
    let sql = json!({ "sql": COUNT });
    let mut wrong = token.clone();
    wrong.pop();
    wrong.push(if token.ends_with('0') { '1' } else { '0' });
    for (what, request) in [
        ("no token", http.post(format!("{base}/api/sql")).json(&sql)),
        (
            "a wrong token",
            http.post(format!("{base}/api/sql"))
                .bearer_auth(&wrong)
                .json(&sql),
        ),
        (
            "a revoked token",
            http.post(format!("{base}/api/sql"))
                .bearer_auth(&revoked)
                .json(&sql),
        ),
        (
            "a token in the query string",
            http.post(format!("{base}/api/sql?access_token={token}"))
                .json(&sql),
        ),
        (
            "the schema without a token",
            http.get(format!("{base}/api/schema")),
        ),
    ] {
        let (status, body, text) = send(request).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {text}");
        assert_eq!(body["error"], "unauthorized", "{what}: {text}");
    }
    let (status, body, text) = send(
        http.post(format!("{base}/api/sql"))
            .bearer_auth(&token)
            .json(&sql),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(body["rows"], json!([[120]]));
    let (status, _, text) = send(http.get(format!("{base}/"))).await;
    assert_eq!(status, StatusCode::OK, "the page stays open: {text}");

    // The query log records who asked.
    let (status, body, text) = send(
        http.post(format!("{base}/api/ask"))
            .bearer_auth(&token)
            .json(&json!({"question": QUESTION, "mode": "agent"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(body["rows"], json!([[120]]));
    let log = home.path().join("query_log.sqlite");
    let started = std::time::Instant::now();
    let users = loop {
        let read = rusqlite::Connection::open(&log)
            .ok()
            .and_then(|connection| {
                connection
                    .prepare("SELECT user_name FROM askdb_query_log")
                    .and_then(|mut statement| {
                        statement
                            .query_map([], |row| row.get::<_, Option<String>>(0))?
                            .collect::<rusqlite::Result<Vec<_>>>()
                    })
                    .ok()
            });
        match read {
            Some(users) if !users.is_empty() => break users,
            _ if started.elapsed() > std::time::Duration::from_secs(10) => {
                panic!("no query-log row: {}", server.log())
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    };
    assert_eq!(users, vec![Some("ana".to_string())]);
    assert!(
        !server.log().contains(&token),
        "a token never reaches the log"
    );
}

/// `askdb serve` run to its exit within 60 s (it must refuse to start); its stderr.
fn serve_refused(home: &std::path::Path) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_askdb"))
        .args(["serve", "--db", "demo", "--addr", "127.0.0.1:0"])
        .env("ASKDB_HOME", home)
        .env("ASKDB_PROVIDER", "scripted")
        .env("ASKDB_SCRIPT", home.join("script.jsonl"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("askdb runs");
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(!status.success(), "serve ended without an error");
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                std::io::Read::read_to_string(&mut pipe, &mut stderr).expect("stderr");
            }
            return stderr;
        }
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("askdb serve started with a policy that widens the notes");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[tokio::test]
async fn a_users_policy_narrows_what_it_sees_and_one_that_widens_stops_serve() {
    let home = tempfile::tempdir().expect("temp dir");
    let policies = home.path().join("policies");
    std::fs::create_dir_all(&policies).expect("policies folder");
    std::fs::write(
        policies.join("clerk.toml"),
        "hidden_tables = [\"employees\"]\nrow_cap = 3\n",
    )
    .expect("policy");
    std::fs::write(
        home.path().join("script.jsonl"),
        format!(
            "{}\n",
            json!({"question": "*", "purpose": "check", "reply": "ok"})
        ),
    )
    .expect("script");
    let added = askdb_users(home.path(), &["--json", "add", "ana", "--policy", "clerk"]);
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let added: Value = serde_json::from_slice(&added.stdout).expect("JSON");
    let clerk = added["token"].as_str().expect("a token").to_string();
    let added = askdb_users(home.path(), &["--json", "add", "ben"]);
    let added: Value = serde_json::from_slice(&added.stdout).expect("JSON");
    let plain = added["token"].as_str().expect("a token").to_string();
    let listed = String::from_utf8_lossy(&askdb_users(home.path(), &["list"]).stdout).into_owned();
    assert!(listed.contains("policy clerk"), "{listed}");

    let home_text = home.path().display().to_string();
    let script = home.path().join("script.jsonl").display().to_string();
    let server = Server::start(
        &["--db", "demo", "--explain", "false"],
        &[
            ("ASKDB_HOME", &home_text),
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script),
        ],
    );
    let http = client();
    let base = server.url.trim_end_matches('/').to_string();
    let names = json!({ "sql": "SELECT cust_name FROM customers" });
    let employees = json!({ "sql": "SELECT emp_name FROM employees" });
    for (token, rows, employees_refused) in [(&clerk, 3, true), (&plain, 120, false)] {
        let (status, body, text) = send(
            http.post(format!("{base}/api/sql"))
                .bearer_auth(token)
                .json(&names),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{text}");
        assert_eq!(body["row_count"], rows, "{text}");
        let (_, body, text) = send(
            http.post(format!("{base}/api/sql"))
                .bearer_auth(token)
                .json(&employees),
        )
        .await;
        assert_eq!(body["ok"] == false, employees_refused, "{text}");
    }
    drop(server);

    // A policy that names a restricted column as shown: serve refuses to start.
    let wide = home.path().join("wide.toml");
    std::fs::write(&wide, "[columns]\ncustomers = [\"cust_id\", \"phone\"]\n").expect("policy");
    let wide = wide.display().to_string();
    let added = askdb_users(home.path(), &["add", "cy", "--policy", &wide]);
    assert!(added.status.success());
    let stderr = serve_refused(home.path());
    assert!(
        stderr.contains("customers.phone") && stderr.contains("only narrow"),
        "{stderr}"
    );
}
