//! Handler tests through `app(state).oneshot(request)`, no socket: status codes and JSON
//! bodies of every route and every bad input, on a demo database file and a scripted
//! model. tests/http_api.rs drives the real binary over HTTP.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;

use super::*;
use crate::gate::GateOptions;
use crate::llm::scripted::ScriptedProvider;
use crate::llm::{PriceTable, SpendLedger};

struct Fixture {
    _dir: tempfile::TempDir,
    state: AppState,
}

pub(super) async fn gate(dir: &std::path::Path) -> Gate {
    let path = dir.join("demo.sqlite");
    crate::demo::write_sqlite(&path).expect("demo database");
    crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(path),
        GateOptions::default(),
    )
    .await
    .expect("gate")
}

fn scripted(script: &str) -> ModelClient {
    let provider = ScriptedProvider::parse(script, "scripted").expect("script parses");
    ModelClient::new(
        std::sync::Arc::new(provider),
        &PriceTable::built_in().expect("prices"),
        std::sync::Arc::new(SpendLedger::in_memory(None)),
        None,
    )
    .expect("client")
}

async fn fixture(model: Option<&str>, config: ServerConfig) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = gate(dir.path()).await;
    let model = match model {
        Some(script) => Ok(scripted(script)),
        None => Err(LlmError::NotConfigured),
    };
    let state = AppState::new(gate, model, config).await.expect("state");
    Fixture { _dir: dir, state }
}

pub(super) async fn call(state: &AppState, request: Request<Body>) -> (StatusCode, Value) {
    let response = app(state.clone())
        .oneshot(request)
        .await
        .expect("infallible");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
        .await
        .expect("body");
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, value)
}

/// Signs in on `state` with `token` as the page does (POST /api/session) and returns
/// the session cookie it sets, as a `Cookie` header's value.
pub(super) async fn session_cookie(state: &AppState, token: &str) -> String {
    let response = app(state.clone())
        .oneshot(post_json(
            "/api/session",
            &json!({ "token": token }).to_string(),
        ))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    response
        .headers()
        .get(header::SET_COOKIE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .expect("a session cookie")
        .to_string()
}

pub(super) fn post_json(path: &str, body: &str) -> Request<Body> {
    Request::post(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .expect("request")
}

pub(super) fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).expect("request")
}

const SCRIPT: &str = r#"
{"question": "How many customers are there?", "purpose": "write_sql", "reply": {"sql": "SELECT count(*) AS customers FROM customers"}}
{"question": "*", "purpose": "check", "reply": "ok"}
"#;

#[tokio::test]
async fn an_answer_comes_back_as_the_agents_full_result() {
    let config = ServerConfig {
        explain: false,
        ..ServerConfig::default()
    };
    let fixture = fixture(Some(SCRIPT), config).await;
    let (status, body) = call(
        &fixture.state,
        post_json(
            "/api/ask",
            r#"{"question": "How many customers are there?", "mode": "agent"}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "answer");
    assert_eq!(body["rows"], json!([[120]]));
    assert_eq!(
        body["sql"],
        "SELECT count(*) AS customers FROM customers LIMIT 200"
    );
    for field in [
        "attempts",
        "history",
        "tables_used",
        "assumptions",
        "chart",
        "tokens",
        "cost_usd",
        "latency_ms",
    ] {
        assert!(body.get(field).is_some(), "{field} missing: {body}");
    }
}

#[tokio::test]
async fn bad_input_gets_a_json_4xx_with_a_code_and_a_detail() {
    let config = ServerConfig {
        max_body_bytes: 4096,
        ..ServerConfig::default()
    };
    let fixture = fixture(Some(SCRIPT), config).await;
    let long = "x".repeat(crate::agent::MAX_QUESTION_CHARS + 1);
    let cases = [
        (
            post_json("/api/ask", r#"{"question": "   "}"#),
            400,
            "empty_question",
        ),
        (
            post_json("/api/ask", &json!({ "question": long }).to_string()),
            400,
            "question_too_long",
        ),
        (
            post_json("/api/ask", r#"{"question": "hi", "mode": "turbo"}"#),
            400,
            "unknown_mode",
        ),
        (
            post_json("/api/ask", r#"{"question": "hi""#),
            400,
            "malformed_json",
        ),
        (
            post_json("/api/ask", r#"{"questoin": "hi"}"#),
            422,
            "invalid_request",
        ),
        (
            post_json(
                "/api/ask",
                &json!({"question": "y".repeat(5000)}).to_string(),
            ),
            413,
            "payload_too_large",
        ),
        (
            Request::post("/api/ask")
                .body(Body::from(r#"{"question": "hi"}"#))
                .expect("request"),
            415,
            "unsupported_media_type",
        ),
        (post_json("/api/sql", r#"{"sql": ""}"#), 400, "empty_sql"),
        (get("/api/ask"), 405, "method_not_allowed"),
        (get("/api/nothing"), 404, "not_found"),
    ];
    for (request, want_status, want_code) in cases {
        let path = request.uri().to_string();
        let (status, body) = call(&fixture.state, request).await;
        assert_eq!(status.as_u16(), want_status, "{path}: {body}");
        assert_eq!(body["error"], want_code, "{path}: {body}");
        assert!(
            body["detail"].as_str().is_some_and(|text| !text.is_empty()),
            "{path}: {body}"
        );
    }
    let (_, body) = call(
        &fixture.state,
        post_json(
            "/api/ask",
            &json!({"question": "y".repeat(5000)}).to_string(),
        ),
    )
    .await;
    assert!(
        body["detail"].as_str().unwrap_or_default().contains("4096"),
        "{body}"
    );
}

/// A request as a browser on `page` sends it to the server at 127.0.0.1:8080 (the
/// default address `app` answers as).
fn from_browser(
    method: &str,
    path: &str,
    host: &str,
    origin: Option<&str>,
    site: &str,
) -> Request<Body> {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, host)
        .header("sec-fetch-site", site);
    if let Some(origin) = origin {
        request = request.header(header::ORIGIN, origin);
    }
    let body = if method == "POST" {
        request = request.header(header::CONTENT_TYPE, "application/json");
        Body::from(if path == "/api/sql" {
            r#"{"sql": "SELECT count(*) AS n FROM customers"}"#
        } else {
            r#"{"question": "How many customers are there?", "mode": "agent"}"#
        })
    } else {
        Body::empty()
    };
    request.body(body).expect("request")
}

#[tokio::test]
async fn a_rebinding_page_and_a_cross_site_post_are_refused_before_any_route() {
    let config = ServerConfig {
        explain: false,
        ..ServerConfig::default()
    };
    let fixture = fixture(Some(SCRIPT), config).await;
    let own = "127.0.0.1:8080";
    let page = Some("http://127.0.0.1:8080");
    let attacker = Some("https://attacker.example");
    let refusals = [
        // DNS rebinding: the attacker's name now points here; the browser calls it
        // same-origin, but the Host is the attacker's.
        from_browser(
            "GET",
            "/api/schema",
            "attacker.example:8080",
            Some("http://attacker.example:8080"),
            "same-origin",
        ),
        from_browser("GET", "/", "attacker.example:8080", None, "none"),
        from_browser(
            "POST",
            "/api/sql",
            "attacker.example:8080",
            Some("http://attacker.example:8080"),
            "same-origin",
        ),
        from_browser("GET", "/api/nothing", "attacker.example", None, "none"),
        // Cross-site requests that spend or change something, on every POST route.
        from_browser("POST", "/api/sql", own, attacker, "cross-site"),
        from_browser("POST", "/api/ask", own, attacker, "cross-site"),
        from_browser("POST", "/api/ask/stream", own, attacker, "cross-site"),
        from_browser("POST", "/api/answers/wrong", own, attacker, "cross-site"),
        from_browser(
            "POST",
            "/api/local-model/start",
            own,
            attacker,
            "cross-site",
        ),
        // A foreign Origin alone, and Sec-Fetch-Site alone.
        from_browser("POST", "/api/sql", own, attacker, "same-origin"),
        from_browser("POST", "/api/sql", own, None, "cross-site"),
        from_browser("POST", "/api/sql", own, Some("null"), "same-origin"),
    ];
    for request in refusals {
        let what = format!(
            "{} {} {:?}",
            request.method(),
            request.uri(),
            request.headers()
        );
        let response = app(fixture.state.clone())
            .oneshot(request)
            .await
            .expect("infallible");
        let status = response.status();
        assert!(
            status == StatusCode::MISDIRECTED_REQUEST || status == StatusCode::FORBIDDEN,
            "{what}: {status}"
        );
        assert_eq!(
            response.headers()[header::X_FRAME_OPTIONS],
            "DENY",
            "{what}"
        );
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .expect("body");
        let body: Value = serde_json::from_slice(&bytes).expect("a JSON error");
        let want = if status == StatusCode::FORBIDDEN {
            "cross_site_request"
        } else {
            "unknown_host"
        };
        assert_eq!(body["error"], want, "{what}: {body}");
        let text = String::from_utf8_lossy(&bytes);
        for leak in ["attacker", "127.0.0.1", "localhost", "8080", "rows"] {
            assert!(!text.contains(leak), "{what} leaks {leak}: {text}");
        }
    }

    // The page itself, as the browser sends its same-origin fetches, still works.
    let (status, body) = call(
        &fixture.state,
        from_browser("GET", "/api/schema", own, None, "same-origin"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call(
        &fixture.state,
        from_browser("POST", "/api/sql", own, page, "same-origin"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rows"], json!([[120]]));
    let (status, body) = call(
        &fixture.state,
        from_browser(
            "POST",
            "/api/ask",
            "localhost:8080",
            Some("http://localhost:8080"),
            "same-origin",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rows"], json!([[120]]));
    // curl and scripts: a Host, neither Origin nor Sec-Fetch-Site.
    let curl = Request::post("/api/sql")
        .header(header::HOST, own)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            r#"{"sql": "SELECT count(*) AS n FROM customers"}"#,
        ))
        .expect("request");
    let (status, body) = call(&fixture.state, curl).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // No Host at all (HTTP/1.0): no browser sends that (decision 0022).
    let (status, body) = call(
        &fixture.state,
        post_json("/api/sql", r#"{"sql": "SELECT 1 AS one"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn the_host_names_follow_the_configured_address_and_the_operators_list() {
    let config = ServerConfig {
        addr: "127.0.0.1:9123".parse().expect("addr"),
        allowed_hosts: vec!["askdb.example.com".parse().expect("host")],
        ..ServerConfig::default()
    };
    let fixture = fixture(None, config).await;
    for (host, want) in [
        ("127.0.0.1:9123", StatusCode::OK),
        ("[::1]:9123", StatusCode::OK),
        ("askdb.example.com", StatusCode::OK),
        ("askdb.example.com:443", StatusCode::OK),
        ("127.0.0.1:8080", StatusCode::MISDIRECTED_REQUEST),
        ("other.example.com", StatusCode::MISDIRECTED_REQUEST),
    ] {
        let request = Request::get("/api/schema")
            .header(header::HOST, host)
            .body(Body::empty())
            .expect("request");
        let (status, body) = call(&fixture.state, request).await;
        assert_eq!(status, want, "{host}: {body}");
    }
}

#[tokio::test]
async fn once_a_user_exists_every_route_but_health_and_the_page_needs_a_live_token() {
    let users_dir = tempfile::tempdir().expect("temp dir");
    let users = crate::users::UserFile::at(users_dir.path().join("users.json"));
    let config = ServerConfig {
        users: Some(users.clone().into()),
        ..ServerConfig::default()
    };
    let fixture = fixture(None, config).await;
    // No user yet: nobody is asked for a token.
    let (status, body) = call(&fixture.state, get("/api/schema")).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let token = users.add("ana", None).expect("ana");
    let revoked = users.add("ben", None).expect("ben");
    users.revoke("ben").expect("revoked");
    let with = |path: &str, authorization: &[&str]| {
        let mut request = Request::get(path);
        for value in authorization {
            request = request.header(header::AUTHORIZATION, *value);
        }
        request.body(Body::empty()).expect("request")
    };
    let bearer = format!("Bearer {token}");
    let mut wrong = token.clone();
    wrong.pop();
    wrong.push(if token.ends_with('0') { '1' } else { '0' });
    let refused = [
        with("/api/schema", &[]),
        with("/api/schema", &[&format!("Bearer {wrong}")]),
        with("/api/schema", &[&format!("Bearer {revoked}")]),
        with("/api/schema", &[&format!("Basic {token}")]),
        with("/api/schema", &[&token]),
        with("/api/schema", &["Bearer "]),
        with("/api/schema", &[&bearer, &format!("Bearer {wrong}")]),
        // A token in the URL is refused even with a good one in the header.
        with(&format!("/api/schema?access_token={token}"), &[]),
        with(&format!("/api/schema?token={token}"), &[&bearer]),
        with("/metrics", &[]),
        with("/api/openapi.json", &[]),
        with("/api/nothing", &[]),
        Request::post("/api/sql")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"sql": "SELECT 1 AS one"}"#))
            .expect("request"),
    ];
    let mut bodies = std::collections::BTreeSet::new();
    for request in refused {
        let what = format!("{} {}", request.method(), request.uri());
        let response = app(fixture.state.clone())
            .oneshot(request)
            .await
            .expect("infallible");
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{what}");
        assert_eq!(
            response.headers()[header::WWW_AUTHENTICATE],
            "Bearer",
            "{what}"
        );
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .expect("body");
        bodies.insert(String::from_utf8_lossy(&bytes).into_owned());
    }
    assert_eq!(bodies.len(), 1, "one answer for every failure: {bodies:?}");
    assert!(bodies
        .iter()
        .all(|body| !body.contains("ana") && !body.contains("ben")));

    // Health and the page stay open; a live token opens the rest.
    for path in ["/", "/assets/app.js"] {
        let (status, _) = call(&fixture.state, get(path)).await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }
    let (status, _) = call(&fixture.state, get("/api/health")).await;
    assert_ne!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = call(&fixture.state, with("/api/schema", &[&bearer])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call(
        &fixture.state,
        Request::post("/api/sql")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::AUTHORIZATION, format!("bearer {token}"))
            .body(Body::from(
                r#"{"sql": "SELECT count(*) AS n FROM customers"}"#,
            ))
            .expect("request"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rows"], json!([[120]]));
}

#[tokio::test]
async fn without_a_model_ask_says_how_to_configure_one_and_the_rest_works() {
    let fixture = fixture(None, ServerConfig::default()).await;
    let (status, body) = call(
        &fixture.state,
        post_json(
            "/api/ask",
            r#"{"question": "How many customers are there?"}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"], "model_not_configured");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("ASKDB_PROVIDER") && detail.contains("--local-model"),
        "{detail}"
    );
    let (status, body) = call(
        &fixture.state,
        post_json("/api/sql", r#"{"sql": "SELECT count(*) FROM customers"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rows"], json!([[120]]));
    let (status, body) = call(&fixture.state, get("/api/health")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["ok"], false);
    assert_eq!(body["model_configured"], false);
    assert_eq!(body["database_reachable"], true);
    assert_eq!(body["read_only_confirmed"], true, "{body}");
}

#[tokio::test]
async fn the_sql_console_returns_rows_or_the_structured_error_as_data() {
    let fixture = fixture(None, ServerConfig::default()).await;
    let (status, body) = call(
        &fixture.state,
        post_json("/api/sql", r#"{"sql": "DELETE FROM customers"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ok"], false);
    assert_eq!(body["error_type"], "rejected");
    assert_eq!(body["reason"], "not_a_query");
    let (_, body) = call(
        &fixture.state,
        post_json("/api/sql", r#"{"sql": "SELECT cust_nme FROM customers"}"#),
    )
    .await;
    assert_eq!(body["error_type"], "unknown_column", "{body}");
}

#[tokio::test]
async fn the_page_and_its_assets_are_embedded_with_a_strict_policy() {
    let fixture = fixture(None, ServerConfig::default()).await;
    for asset in assets::ASSETS {
        let response = app(fixture.state.clone())
            .oneshot(get(asset.path))
            .await
            .expect("infallible");
        assert_eq!(response.status(), StatusCode::OK, "{}", asset.path);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            asset.content_type,
            "{}",
            asset.path
        );
        let policy = response.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .expect("ascii");
        assert!(policy.contains("script-src 'self'"), "{policy}");
    }
    let page = String::from_utf8_lossy(assets::ASSETS[0].body);
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "no CDN"
    );
    let scripts: Vec<_> = assets::ASSETS
        .iter()
        .filter(|asset| asset.path.ends_with(".js") && !asset.path.contains("/vendor/"))
        .collect();
    assert!(scripts.len() >= 3, "app.js, account.js, verify.js");
    for script in scripts {
        let text = String::from_utf8_lossy(script.body);
        assert!(
            !text.contains("innerHTML") && !text.contains("localStorage.setItem(\"askdb.token"),
            "{}: data enters the page as text only, and no token is stored",
            script.path
        );
        assert!(
            page.contains(&format!("src=\"{}\"", script.path)),
            "{} is loaded by the page",
            script.path
        );
    }
}

#[tokio::test]
async fn the_openapi_description_covers_every_api_route() {
    let fixture = fixture(None, ServerConfig::default()).await;
    let (status, document) = call(&fixture.state, get("/api/openapi.json")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(document["openapi"], "3.1.0");
    for (method, path) in openapi::API_ROUTES {
        assert!(
            document["paths"][path][method].is_object(),
            "{method} {path} is not described"
        );
        // The route exists: anything but the JSON 404 of unknown paths.
        let request = Request::builder()
            .method(method.to_uppercase().as_str())
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from("{}"))
            .expect("request");
        let (status, body) = call(&fixture.state, request).await;
        assert!(
            !(status == StatusCode::NOT_FOUND && body["error"] == "not_found"),
            "{method} {path} is not routed"
        );
    }
}

#[tokio::test]
async fn eval_serves_the_newest_summary_verbatim_or_404() {
    let results = tempfile::tempdir().expect("temp dir");
    let config = ServerConfig {
        eval_dir: Some(results.path().to_path_buf()),
        ..ServerConfig::default()
    };
    let fixture = fixture(None, config).await;
    let (status, body) = call(&fixture.state, get("/api/eval")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "no_evaluation");
    let run = results.path().join("demo").join("run-1");
    std::fs::create_dir_all(&run).expect("mkdir");
    let text = "{\"set\": \"demo\", \"generated_at\": \"2026-11-30 10:00:00\", \"modes\": {}}\n";
    std::fs::write(run.join("summary.json"), text).expect("write");
    let response = app(fixture.state.clone())
        .oneshot(get("/api/eval"))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["x-askdb-eval-source"],
        "demo/run-1/summary.json"
    );
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("body");
    assert_eq!(bytes, text.as_bytes());
}

#[tokio::test]
async fn with_no_model_configured_the_local_model_is_offered_started_and_its_failure_shown() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = gate(dir.path()).await;
    // A start that fails at once (no such Python): the route, the background start and
    // the status are real; only the download is avoided.
    let local = crate::local_model::LocalModel::with_script_env(
        dir.path().join("home"),
        vec![(
            "ASKDB_PYTHON".to_string(),
            "/nonexistent/python3".to_string(),
        )],
    );
    let state = AppState::with_local_model(
        gate,
        Err(LlmError::NotConfigured),
        Some(local),
        ServerConfig::default(),
    )
    .await
    .expect("state");
    let (status, body) = call(&state, get("/api/local-model")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["phase"], "not_started");
    let (_, health) = call(&state, get("/api/health")).await;
    assert_eq!(health["local_model"]["phase"], "not_started", "{health}");
    let (status, body) = call(&state, post_json("/api/local-model/start", "{}")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let mut phase = Value::Null;
    for _ in 0..200 {
        let (_, body) = call(&state, get("/api/local-model")).await;
        phase = body["phase"].clone();
        if phase == "failed" {
            let message = body["message"].as_str().unwrap_or_default();
            assert!(message.contains("not found"), "{message}");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(phase, "failed");
    // Questions still get the help, not a hang.
    let (status, body) = call(
        &state,
        post_json(
            "/api/ask",
            r#"{"question": "How many customers are there?"}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"], "model_not_configured");
}

#[tokio::test]
async fn with_a_model_configured_the_local_model_is_not_offered() {
    let fixture = fixture(Some(SCRIPT), ServerConfig::default()).await;
    for request in [
        get("/api/local-model"),
        post_json("/api/local-model/start", "{}"),
    ] {
        let (status, body) = call(&fixture.state, request).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_eq!(body["error"], "local_model_not_offered");
    }
    let (_, health) = call(&fixture.state, get("/api/health")).await;
    assert!(health["local_model"].is_null(), "{health}");
}

#[tokio::test]
async fn a_question_asked_while_the_schema_is_first_read_goes_linked_and_pauses_the_read() {
    // The first read of the schema is slow (30 s), the read after the pause quick; a
    // question asked meanwhile is answered from its linked tables without waiting. The
    // question's model call takes half a second, so the read sees it whatever the
    // scheduler runs first (a question that comes and goes between two looks of the
    // read holds nothing back and is rightly not counted as a pause).
    let script = r#"
{"question": "warm-up", "purpose": "write_sql", "reply": "1", "delay_ms": 30000}
{"question": "warm-up", "purpose": "write_sql", "reply": "1", "delay_ms": 100}
{"question": "How many customers are there?", "purpose": "write_sql", "reply": {"sql": "SELECT count(*) AS customers FROM customers"}, "delay_ms": 500}
{"question": "How many customers are there?", "purpose": "write_sql", "reply": {"sql": "SELECT count(*) AS customers FROM customers"}}
"#;
    let config = ServerConfig {
        explain: false,
        ..ServerConfig::default()
    };
    let fixture = fixture(Some(script), config).await;
    let state = &fixture.state;
    // The warm-up as `warm_up_in_background` runs it, with its end kept for the test.
    let agent = state.agent().expect("a model");
    let restoring = state.warm_up().begin().expect("no warm-up runs yet");
    let warm_up = {
        let state = state.clone();
        tokio::spawn(async move { state.warm_up().run(&agent, restoring).await })
    };
    let ask = || {
        post_json(
            "/api/ask",
            r#"{"question": "How many customers are there?", "mode": "agent"}"#,
        )
    };
    let selection = |body: &Value| {
        body["trace"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|step| step["node"] == "select_schema")
            .and_then(|step| step["note"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (status, cold) = call(state, ask()).await;
    assert_eq!(status, StatusCode::OK, "{cold}");
    assert_eq!(cold["rows"], json!([[120]]));
    assert!(
        selection(&cold).starts_with("linked"),
        "{}",
        selection(&cold)
    );
    assert!(
        state.warm_up().reading(),
        "the read goes on after the question"
    );
    // The read starts again after the question and ends.
    assert_eq!(
        warm_up.await.expect("the warm-up ends"),
        warm_up::WarmUpEnd::Read {
            saved: false,
            paused: 1
        }
    );
    let (status, warm) = call(state, ask()).await;
    assert_eq!(status, StatusCode::OK, "{warm}");
    assert!(
        selection(&warm).starts_with("whole"),
        "{}",
        selection(&warm)
    );
}

mod conversation;
mod wrong;
#[tokio::test]
async fn a_person_saves_an_example_through_the_api_and_an_answer_never_saves_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = ServerConfig {
        explain: false,
        examples: Some(dir.path().join("examples.sqlite")),
        ..ServerConfig::default()
    };
    // One scripted reply only: the second ask of the question must not call the model.
    let fixture = fixture(Some(SCRIPT), config).await;
    let state = &fixture.state;
    let ask = || {
        post_json(
            "/api/ask",
            r#"{"question": "How many customers are there?", "mode": "agent"}"#,
        )
    };
    let (status, answered) = call(state, ask()).await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    assert_eq!(answered["rows"], json!([[120]]));
    let (status, listed) = call(state, get("/api/examples")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed, json!([]), "an answer that ran is not an example");

    let save = |body: Value| post_json("/api/examples", &body.to_string());
    let (status, body) = call(
        state,
        save(json!({"question": "How many customers are there?", "sql": "SELECT count(*) AS customers FROM customers"})),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "no person: {body}"
    );
    let (status, body) = call(
        state,
        save(json!({"question": "Phones", "sql": "SELECT phone FROM customers", "verified_by": "asha"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "example_refused");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("restricted_column")),
        "{body}"
    );
    let (status, body) = call(
        state,
        save(json!({"question": "Log rows", "sql": "SELECT count(*) FROM askdb_query_log", "verified_by": "asha"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "example_refused");

    let (status, saved) = call(
        state,
        save(json!({
            "question": "How many customers are there?",
            "sql": "SELECT count(*) AS n FROM customers",
            "verified_by": "asha",
            "notes": "every customer, walk-ins included"
        })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{saved}");
    let id = saved["example"]["id"].as_i64().expect("an id");
    let (_, listed) = call(state, get("/api/examples")).await;
    assert_eq!(listed[0]["verified_by"], "asha");

    let (status, again) = call(state, ask()).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["answered_from_example"], json!(id));
    assert_eq!(again["columns"], json!(["n"]));
    assert_eq!(again["model_calls"], json!([]));

    let delete = || {
        Request::delete(format!("/api/examples/{id}"))
            .body(Body::empty())
            .expect("request")
    };
    let response = app(state.clone())
        .oneshot(delete())
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let (status, body) = call(state, delete()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "no_such_example");
}

#[tokio::test]
async fn without_users_the_page_needs_no_sign_in() {
    let fixture = fixture(None, ServerConfig::default()).await;
    let (status, body) = call(&fixture.state, get("/api/session")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, serde_json::json!({"sign_in": "open", "user": null}));
    let (status, body) = call(
        &fixture.state,
        post_json("/api/session", r#"{"token": "askdb_guess"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "sign_in_off");
}
