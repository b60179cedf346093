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

/// A stand-in OTLP/HTTP collector on loopback: its URL, and every request body it was
/// sent (protobuf, whose strings are written as they are).
fn collector() -> (String, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&received);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let sink = std::sync::Arc::clone(&sink);
            std::thread::spawn(move || {
                let Ok(mut reply) = stream.try_clone() else {
                    return;
                };
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let header = line.trim_end().to_ascii_lowercase();
                        if header.is_empty() {
                            break;
                        }
                        if let Some(value) = header.strip_prefix("content-length:") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    if let Ok(mut all) = sink.lock() {
                        all.extend_from_slice(&body);
                    }
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if reply.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, received)
}

/// The Set-Cookie header of a response, and the session cookie's value in it.
fn session_cookie(response: &reqwest::Response) -> (String, String) {
    let header = response
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let value = header
        .strip_prefix("askdb_session=")
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_default()
        .to_string();
    (header, value)
}

#[tokio::test]
async fn the_page_signs_in_for_a_cookie_and_an_attacker_gets_nothing_from_it() {
    let home = tempfile::tempdir().expect("temp dir");
    let add = |name: &str| -> String {
        let added = askdb_users(home.path(), &["--json", "add", name]);
        let added: Value = serde_json::from_slice(&added.stdout).expect("JSON");
        added["token"].as_str().expect("a token").to_string()
    };
    let (ana, ben) = (add("ana"), add("ben"));
    let script = home.path().join("script.jsonl");
    let line = json!({"question": QUESTION, "purpose": "write_sql", "reply": {"sql": COUNT}});
    std::fs::write(&script, format!("{line}\n")).expect("script");
    let (home_text, script) = (
        home.path().display().to_string(),
        script.display().to_string(),
    );
    let (traces_url, traces) = collector();
    let server = Server::start(
        &[
            "--db",
            "demo",
            "--explain",
            "false",
            "--allowed-host",
            "askdb.test",
        ],
        &[
            ("ASKDB_HOME", &home_text),
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &traces_url),
        ],
    );
    let http = client();
    let page = server.url.clone();
    let sql = json!({ "sql": COUNT });
    let (status, body, _) = send(http.get(server.at("/api/session"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"sign_in": "required", "user": null}));

    // A wrong token: the one sentence every refusal has.
    let mut wrong = ana.clone();
    wrong.pop();
    wrong.push(if ana.ends_with('0') { '1' } else { '0' });
    let (status, refused, text) = send(
        http.post(server.at("/api/session"))
            .header(ORIGIN, &page)
            .json(&json!({"token": wrong})),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{text}");
    assert_eq!(refused["error"], "unauthorized");
    assert!(!text.contains("ana") && !text.contains(&wrong), "{text}");

    // The right one: a strict, HttpOnly cookie, not Secure over plain http.
    let signed_in = |token: &str, origin: &str, host: Option<&str>| {
        let mut request = http
            .post(server.at("/api/session"))
            .header(ORIGIN, origin)
            .json(&json!({ "token": token }));
        if let Some(host) = host {
            request = request.header(HOST, host);
        }
        request.send()
    };
    let response = signed_in(&ana, &page, None).await.expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    let (header, cookie) = session_cookie(&response);
    assert!(
        header.contains("HttpOnly") && header.contains("SameSite=Strict"),
        "{header}"
    );
    assert!(!header.contains("Secure"), "{header}");
    assert_eq!(cookie.len(), 64, "{header}");
    assert!(!cookie.contains(&ana[6..]), "the cookie is not the token");
    let with_cookie = |value: &str| format!("askdb_session={value}");
    let (_, body, _) = send(
        http.get(server.at("/api/session"))
            .header("cookie", with_cookie(&cookie)),
    )
    .await;
    assert_eq!(body["user"], "ana");
    // Behind a TLS proxy (the page's Origin is https), the cookie is Secure.
    let response = signed_in(&ana, "https://askdb.test", Some("askdb.test"))
        .await
        .expect("an answer");
    let (header, _) = session_cookie(&response);
    assert!(header.ends_with("; Secure"), "{header}");

    // The cookie is taken where the token is: reading, and the page's own POSTs.
    let (status, _, text) = send(
        http.get(server.at("/api/schema"))
            .header("cookie", with_cookie(&cookie)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (status, body, text) = send(
        http.post(server.at("/api/ask"))
            .header("cookie", with_cookie(&cookie))
            .header(ORIGIN, &page)
            .json(&json!({"question": QUESTION})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(body["rows"], json!([[120]]));
    // A change on the cookie alone needs the page's Origin: none, a forged one, or the
    // browser's word that another site sent it are refused.
    for (what, origin, site) in [
        ("no Origin", None, None),
        ("a forged Origin", Some("https://attacker.example"), None),
        (
            "a cross-site fetch",
            Some(page.as_str()),
            Some("cross-site"),
        ),
    ] {
        let mut request = http
            .post(server.at("/api/sql"))
            .header("cookie", with_cookie(&cookie))
            .json(&sql);
        if let Some(origin) = origin {
            request = request.header(ORIGIN, origin);
        }
        if let Some(site) = site {
            request = request.header("sec-fetch-site", site);
        }
        let (status, body, text) = send(request).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{what}: {text}");
        assert_eq!(body["error"], "cross_site_request", "{what}");
        assert!(!text.contains("customers"), "{text}");
    }
    let (status, body, _) = send(
        http.post(server.at("/api/sql"))
            .header("cookie", with_cookie(&cookie))
            .header(ORIGIN, &page)
            .json(&sql),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["rows"], json!([[120]]));

    // A signed-in person confirms an example in their own name only.
    for (verified_by, expected) in [("mallory", 400), ("ana", 201)] {
        let (status, body, text) = send(
            http.post(server.at("/api/examples"))
                .header("cookie", with_cookie(&cookie))
                .header(ORIGIN, &page)
                .json(&json!({"question": QUESTION, "sql": COUNT, "verified_by": verified_by})),
        )
        .await;
        assert_eq!(status.as_u16(), expected, "{verified_by}: {text}");
        if expected == 400 {
            assert_eq!(body["error"], "not_the_signed_in_user", "{text}");
        } else {
            assert_eq!(body["example"]["verified_by"], "ana", "{text}");
        }
    }

    // A revoked user's cookie, a made-up one, a signed-out one: the same 401.
    let response = signed_in(&ben, &page, None).await.expect("an answer");
    let (_, ben_cookie) = session_cookie(&response);
    assert!(askdb_users(home.path(), &["revoke", "ben"])
        .status
        .success());
    let made_up = "0".repeat(64);
    let response = http
        .delete(server.at("/api/session"))
        .header("cookie", with_cookie(&cookie))
        .header(ORIGIN, &page)
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let (header, _) = session_cookie(&response);
    assert!(header.contains("Max-Age=0"), "{header}");
    for (what, value) in [
        ("a revoked user's cookie", &ben_cookie),
        ("a made-up cookie", &made_up),
        ("a signed-out cookie", &cookie),
    ] {
        let (status, body, text) = send(
            http.get(server.at("/api/schema"))
                .header("cookie", with_cookie(value)),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {text}");
        assert_eq!(body, refused, "{what}: no detail tells the cases apart");
    }

    // Neither a token nor a cookie reaches the server's log, the traces or the query log.
    let started = std::time::Instant::now();
    let exported = loop {
        let bytes = traces.lock().map(|all| all.clone()).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if text.contains(QUESTION) || started.elapsed() > std::time::Duration::from_secs(15) {
            break text;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(
        exported.contains(QUESTION),
        "the question's trace was exported"
    );
    for secret in [&ana, &ben, &cookie, &ben_cookie] {
        assert!(
            !exported.contains(secret.as_str()),
            "a secret in the traces"
        );
    }
    let log = home.path().join("query_log.sqlite");
    let started = std::time::Instant::now();
    while !log.exists() && started.elapsed() < std::time::Duration::from_secs(10) {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // The log file with its write-ahead and journal files, where recent rows may be.
    let logged: String = ["", "-wal", "-journal"]
        .iter()
        .filter_map(|suffix| std::fs::read(format!("{}{suffix}", log.display())).ok())
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .collect();
    assert!(logged.contains("ana"), "the query log names the user");
    for secret in [&ana, &ben, &cookie, &ben_cookie] {
        assert!(
            !logged.contains(secret.as_str()),
            "a secret in the query log"
        );
        assert!(
            !server.log().contains(secret.as_str()),
            "a secret in the log"
        );
    }

    // Brute force: after a few wrong tokens this address waits, even with a right one.
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let (status, _, _) = send(
            http.post(server.at("/api/session"))
                .header(ORIGIN, &page)
                .json(&json!({"token": wrong})),
        )
        .await;
        statuses.push(status.as_u16());
    }
    // One wrong token was sent above: four more 401s, then 429.
    assert_eq!(statuses, vec![401, 401, 401, 401, 429, 429]);
    let response = signed_in(&ana, &page, None).await.expect("an answer");
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(response.headers().contains_key("retry-after"));
    let text = response.text().await.unwrap_or_default();
    assert!(text.contains("too_many_sign_ins"), "{text}");
    let (status, _, _) = send(
        http.post(server.at("/api/sql"))
            .bearer_auth(&wrong)
            .json(&sql),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "guessing bearer tokens is slowed too"
    );
}

/// Adds a user through the CLI and returns its token.
fn add_user(home: &std::path::Path, name: &str) -> String {
    let added = askdb_users(home, &["--json", "add", name]);
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let added: Value = serde_json::from_slice(&added.stdout).expect("JSON");
    added["token"].as_str().expect("a token").to_string()
}

#[tokio::test]
async fn a_conversation_is_its_users_and_another_user_gets_the_unknown_ids_404() {
    let home = tempfile::tempdir().expect("temp dir");
    let ana = add_user(home.path(), "ana");
    let ben = add_user(home.path(), "ben");
    let follow = "And how many bills?";
    let script = home.path().join("script.jsonl");
    let lines = [
        json!({"question": QUESTION, "purpose": "write_sql", "reply": {"sql": COUNT}}),
        json!({"question": follow, "purpose": "write_sql", "reply": {"sql": "SELECT count(*) AS bills FROM bills"}}),
        json!({"question": "*", "purpose": "check", "reply": "ok"}),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&script, text).expect("script");
    let (home_text, script) = (
        home.path().display().to_string(),
        script.display().to_string(),
    );
    let server = Server::start(
        &["--db", "demo", "--explain", "false"],
        &[
            ("ASKDB_HOME", &home_text),
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script),
        ],
    );
    let http = client();
    let (status, body, text) = send(
        http.post(server.at("/api/ask"))
            .bearer_auth(&ana)
            .json(&json!({"question": QUESTION})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let id = body["conversation_id"].as_str().expect("an id").to_string();

    // Ben names ana's conversation, through the API and the stream: the 404 of an id
    // that never existed, word for word but the id, and no model call spent.
    let unknown = "0123456789abcdef0123456789abcdef";
    for path in ["/api/ask", "/api/ask/stream"] {
        let (status, body, text) = send(
            http.post(server.at(path))
                .bearer_auth(&ben)
                .json(&json!({"question": follow, "conversation_id": id})),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {text}");
        let (unknown_status, _, unknown_text) = send(
            http.post(server.at(path))
                .bearer_auth(&ben)
                .json(&json!({"question": follow, "conversation_id": unknown})),
        )
        .await;
        assert_eq!(unknown_status, StatusCode::NOT_FOUND);
        assert_eq!(
            text.replace(&id, "ID"),
            unknown_text.replace(unknown, "ID"),
            "{path}"
        );
        assert_eq!(body["error"], "unknown_conversation", "{text}");
        assert!(
            !text.contains("ana") && !text.contains("customers"),
            "{text}"
        );
    }
    // Ana continues her own: the follow-up carries the first turn.
    let (status, body, text) = send(
        http.post(server.at("/api/ask/stream"))
            .bearer_auth(&ana)
            .json(&json!({"question": follow, "conversation_id": id})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(body, Value::Null, "a stream, not JSON");
    let result = text
        .split("event: result\ndata: ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_else(|| panic!("no result event: {text}"));
    let result: Value = serde_json::from_str(result).expect("the result's JSON");
    assert_eq!(result["conversation_id"], id.as_str(), "{result}");
    assert_eq!(result["turn"], 2, "{result}");
    assert_eq!(result["rows"], json!([[1400]]), "{result}");
}

/// The query log's user names once it has `rows` rows (the log is written in the
/// background), oldest first.
async fn logged_users(home: &std::path::Path, rows: usize, server: &Server) -> Vec<Option<String>> {
    let log = home.join("query_log.sqlite");
    let started = std::time::Instant::now();
    loop {
        let read = rusqlite::Connection::open(&log)
            .ok()
            .and_then(|connection| {
                connection
                    .prepare("SELECT user_name FROM askdb_query_log ORDER BY id")
                    .and_then(|mut statement| {
                        statement
                            .query_map([], |row| row.get::<_, Option<String>>(0))?
                            .collect::<rusqlite::Result<Vec<_>>>()
                    })
                    .ok()
            });
        match read {
            Some(users) if users.len() >= rows => return users,
            _ if started.elapsed() > std::time::Duration::from_secs(10) => {
                panic!("no {rows} query-log rows: {}", server.log())
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
}

/// A client whose connections come from `from` (any address of 127.0.0.0/8 is this
/// machine's loopback).
fn client_from(from: &str) -> reqwest::Client {
    askdb::llm::install_tls_provider();
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .local_address(Some(from.parse().expect("an address")))
        .build()
        .expect("client")
}

#[tokio::test]
async fn the_proxy_user_header_is_believed_from_the_trusted_proxy_alone() {
    let home = tempfile::tempdir().expect("temp dir");
    let token = add_user(home.path(), "ana");
    let script = home.path().join("script.jsonl");
    let lines = [
        json!({"question": QUESTION, "purpose": "write_sql", "reply": {"sql": COUNT}}),
        json!({"question": "*", "purpose": "check", "reply": "ok"}),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&script, text).expect("script");
    let (home_text, script) = (
        home.path().display().to_string(),
        script.display().to_string(),
    );
    let env = [
        ("ASKDB_HOME", home_text.as_str()),
        ("ASKDB_PROVIDER", "scripted"),
        ("ASKDB_SCRIPT", script.as_str()),
    ];
    let server = Server::start(
        &[
            "--db",
            "demo",
            "--explain",
            "false",
            "--trusted-proxy",
            "127.0.0.2",
        ],
        &env,
    );
    let ask = json!({"question": QUESTION});
    let sql = json!({ "sql": COUNT });
    let proxy = client_from("127.0.0.2");
    let attacker = client_from("127.0.0.1");

    // The attacker names a user: refused, with or without a token of its own, on every
    // route, saying nothing of why.
    for (path, body) in [("/api/ask", &ask), ("/api/sql", &sql)] {
        for with_token in [false, true] {
            let mut request = attacker
                .post(server.at(path))
                .header("X-Forwarded-User", "ana")
                .json(body);
            if with_token {
                request = request.bearer_auth(&token);
            }
            let (status, body, text) = send(request).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {text}");
            assert_eq!(body["error"], "forbidden", "{text}");
            for leak in ["ana", "proxy", "127.0.0.2", "X-Forwarded-User", "header"] {
                assert!(!text.contains(leak), "{leak} in {text}");
            }
        }
    }
    let (status, _, text) = send(
        attacker
            .get(server.at("/api/schema"))
            .header("x-forwarded-user", "ana"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");

    // The proxy: a user askdb knows signs in; one it does not, or none, does not. A
    // change it signs in needs the page's Origin, as a cookie's does: the proxy's own
    // cookie rides along with whatever the browser sends.
    let (status, body, text) = send(
        proxy
            .post(server.at("/api/ask"))
            .header("X-Forwarded-User", "ana")
            .json(&ask),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no Origin: {text}");
    assert_eq!(body["error"], "cross_site_request", "{text}");
    let (status, body, text) = send(
        proxy
            .post(server.at("/api/ask"))
            .header("X-Forwarded-User", "ana")
            .header(ORIGIN, &server.url)
            .json(&ask),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(body["rows"], json!([[120]]));
    // The page behind the proxy is signed in as the proxy's user: no token form.
    let (status, body, text) = send(
        proxy
            .get(server.at("/api/session"))
            .header("X-Forwarded-User", "ana"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(body, json!({"sign_in": "required", "user": "ana"}));
    for request in [
        proxy
            .post(server.at("/api/sql"))
            .header("X-Forwarded-User", "mallory")
            .json(&sql),
        proxy.post(server.at("/api/sql")).json(&sql),
    ] {
        let (status, body, text) = send(request).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{text}");
        assert_eq!(body["error"], "unauthorized");
    }
    // A token still works through the proxy, and from anywhere.
    let (status, _, text) = send(
        proxy
            .post(server.at("/api/sql"))
            .bearer_auth(&token)
            .json(&sql),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    // The query log records the user the proxy named.
    assert_eq!(
        logged_users(home.path(), 1, &server).await,
        vec![Some("ana".to_string())]
    );

    // Trusting a proxy with no users to name is refused at start.
    let empty = tempfile::tempdir().expect("temp dir");
    let refused = Command::new(env!("CARGO_BIN_EXE_askdb"))
        .args(["serve", "--db", "demo", "--addr", "127.0.0.1:0"])
        .args(["--trusted-proxy", "127.0.0.2"])
        .env("ASKDB_HOME", empty.path())
        .env_remove("ASKDB_TRUSTED_PROXIES")
        .output()
        .expect("askdb runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("askdb users add"), "{stderr}");
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

/// The server's pace counts a signed-in user's questions, not their address's: behind
/// one proxy or NAT every user shares an address, and one user's burst must not refuse
/// the others.
#[tokio::test]
async fn the_pace_is_each_signed_in_users_own() {
    let home = tempfile::tempdir().expect("temp dir");
    let ana = add_user(home.path(), "ana");
    let ben = add_user(home.path(), "ben");
    let script = home.path().join("script.jsonl");
    // Each reply is used once: one for ana's question, one for ben's.
    let lines = [
        json!({"question": QUESTION, "purpose": "write_sql", "reply": {"sql": COUNT}}),
        json!({"question": QUESTION, "purpose": "write_sql", "reply": {"sql": COUNT}}),
        json!({"question": "*", "purpose": "check", "reply": "ok"}),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&script, text).expect("script");
    let (home_text, script) = (
        home.path().display().to_string(),
        script.display().to_string(),
    );
    let server = Server::start(
        &[
            "--db",
            "demo",
            "--explain",
            "false",
            "--asks-per-minute",
            "1",
        ],
        &[
            ("ASKDB_HOME", &home_text),
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script),
        ],
    );
    let http = client();
    let ask = |token: &str| {
        http.post(server.at("/api/ask"))
            .bearer_auth(token)
            .json(&json!({"question": QUESTION}))
    };
    let (status, _, text) = send(ask(&ana)).await;
    assert_eq!(status, StatusCode::OK, "ana's first: {text}");
    let (status, _, text) = send(ask(&ben)).await;
    assert_eq!(status, StatusCode::OK, "ben has his own pace: {text}");
    let (status, body, text) = send(ask(&ana)).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "ana's second: {text}"
    );
    assert_eq!(body["error"], "rate_limited", "{text}");
}

/// Behind a trusted proxy every request comes from the proxy's address: failed sign-ins
/// count against the client the proxy forwarded for (the right-most hop of
/// X-Forwarded-For it did not add itself), so one attacker's guesses lock out that
/// attacker alone; the header from anyone else changes nothing (decision 0081).
#[tokio::test]
async fn failed_sign_ins_behind_a_proxy_lock_out_their_own_client_alone() {
    let home = tempfile::tempdir().expect("temp dir");
    let token = add_user(home.path(), "ana");
    let script = home.path().join("script.jsonl");
    let line = json!({"question": "*", "purpose": "check", "reply": "ok"});
    std::fs::write(&script, format!("{line}\n")).expect("script");
    let (home_text, script) = (
        home.path().display().to_string(),
        script.display().to_string(),
    );
    let server = Server::start(
        &["--db", "demo", "--trusted-proxy", "127.0.0.2"],
        &[
            ("ASKDB_HOME", &home_text),
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script),
        ],
    );
    let proxy = client_from("127.0.0.2");
    let attacker = client_from("127.0.0.1");
    let mut wrong = token.clone();
    wrong.pop();
    wrong.push(if token.ends_with('0') { '1' } else { '0' });
    let page = server.url.clone();
    let sign_in = |http: &reqwest::Client, token: &str, forwarded: &str| {
        http.post(server.at("/api/session"))
            .header(ORIGIN, &page)
            .header("x-forwarded-for", forwarded)
            .json(&json!({ "token": token }))
    };
    let sql = json!({ "sql": COUNT });
    let console = |http: &reqwest::Client, token: &str, forwarded: &str| {
        http.post(server.at("/api/sql"))
            .bearer_auth(token)
            .header("x-forwarded-for", forwarded)
            .json(&sql)
    };

    // The attacker behind the proxy guesses: slowed after five, whatever it writes left
    // of the proxy's hop, with the right token too, and on bearer tokens as well.
    let mut statuses = Vec::new();
    for n in 0..5 {
        let (status, _, _) = send(sign_in(
            &proxy,
            &wrong,
            &format!("203.0.113.{n}, 198.51.100.7"),
        ))
        .await;
        statuses.push(status.as_u16());
    }
    for forwarded in ["198.51.100.7", "203.0.113.99, 198.51.100.7"] {
        let (status, _, _) = send(sign_in(&proxy, &wrong, forwarded)).await;
        statuses.push(status.as_u16());
    }
    assert_eq!(statuses, vec![401, 401, 401, 401, 401, 429, 429]);
    let (status, body, text) = send(sign_in(&proxy, &token, "198.51.100.7")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
    assert_eq!(body["error"], "too_many_sign_ins", "{text}");
    let (status, _, text) = send(console(&proxy, &wrong, "198.51.100.7")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");

    // Another client behind the same proxy is not locked out: it signs in, its token
    // works, and a typo of its own is a 401, not a 429.
    let (status, body, text) = send(sign_in(&proxy, &token, "198.51.100.8")).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(body["user"], "ana", "{text}");
    let (status, body, text) = send(console(&proxy, &token, "198.51.100.8")).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(body["rows"], json!([[120]]));
    let (status, _, text) = send(sign_in(&proxy, &wrong, "198.51.100.8")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{text}");
    // The proxy's own requests (no forwarded hop) are the proxy's count, not the attacker's.
    let (status, _, text) = send(
        proxy
            .post(server.at("/api/sql"))
            .bearer_auth(&token)
            .json(&sql),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");

    // From an address askdb does not trust, X-Forwarded-For is not read: naming the
    // locked-out client neither borrows its lock nor its count, and a new name for
    // each guess does not escape the attacker's own.
    let (status, _, text) = send(sign_in(&attacker, &wrong, "198.51.100.7")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{text}");
    let mut statuses = Vec::new();
    for n in 0..6 {
        let (status, _, _) = send(sign_in(
            &attacker,
            &wrong,
            &format!("198.51.100.{}", 20 + n),
        ))
        .await;
        statuses.push(status.as_u16());
    }
    assert_eq!(statuses, vec![401, 401, 401, 401, 429, 429]);
    let (status, _, text) = send(console(&attacker, &token, "198.51.100.9")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
    // Its guesses, forged as 198.51.100.9's, cost that client behind the proxy nothing.
    let (status, _, text) = send(sign_in(&attacker, &wrong, "198.51.100.9")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
    let (status, _, text) = send(sign_in(&proxy, &token, "198.51.100.9")).await;
    assert_eq!(status, StatusCode::OK, "{text}");
}
