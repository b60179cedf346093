//! Replicas over one shared state (`--state-url`, decision 0079): two `AppState`s in
//! one process, each with its own pool to the same PostgreSQL schema, as two
//! `askdb serve` processes would be. The spend cap holds under concurrent asks on both,
//! a session made on one is taken by the other, a revocation written to the state is
//! refused by the other within 5 s, and the pace is one bucket per asker for both. With
//! the users in the shared state (decision 0083), a user added by any replica's CLI signs
//! in on both, and revoked through one is refused by the other.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::Value;

use super::tests::{call, gate, post_json, session_cookie};
use super::*;
use crate::llm::scripted::ScriptedProvider;
use crate::llm::{PriceTable, SpendLedger};
use crate::scratch::{pg_connect, Scratch};
use crate::state::SharedState;
use crate::users::UserFile;

/// Scripted replies at $10 per million tokens in and out: a reply of 1,000 tokens in
/// and 100 out costs $0.011.
const PRICES: &str = r#"
prices_as_of = "2026-01-01"
[[model]]
provider = "scripted"
prefix = "scripted"
input = 10.0
output = 10.0
"#;

const QUESTION: &str = "How many customers are there?";

/// A scratch database holding the state schema, and its superuser URL.
async fn state_database(test: &str) -> Option<(Scratch, String)> {
    let scratch = Scratch::new(test, "state")?;
    scratch.create_empty_database().await;
    let url = crate::admin::url_with_database(&scratch.admin_url, &scratch.database);
    let client = pg_connect(&url)
        .await
        .expect("connects to the scratch database");
    crate::state::apply_schema(&client)
        .await
        .expect("state schema");
    Some((scratch, url))
}

/// A metered scripted model with `replies` answers to [`QUESTION`], each taking a
/// moment so asks overlap.
fn priced_model(replies: usize, cap_usd: Option<f64>) -> ModelClient {
    let line = r#"{"question": "*", "purpose": "write_sql", "reply": {"sql": "SELECT count(*) AS customers FROM customers"}, "input_tokens": 1000, "output_tokens": 100, "delay_ms": 20}
"#;
    let provider = ScriptedProvider::parse(&line.repeat(replies), "scripted")
        .expect("script parses")
        .metered(true);
    ModelClient::new(
        Arc::new(provider),
        &PriceTable::parse(PRICES, "the test's prices").expect("prices"),
        Arc::new(SpendLedger::in_memory(cap_usd)),
        None,
    )
    .expect("client")
}

/// One replica: its own demo file and gate, its own pool to the shared state.
async fn replica(
    dir: &std::path::Path,
    url: &str,
    model: Option<ModelClient>,
    config: ServerConfig,
) -> AppState {
    let own = tempfile::tempdir_in(dir).expect("replica's folder").keep();
    replica_over(&own, url, model, config).await
}

/// A replica over the demo file in `database_dir`: replicas given the same folder serve
/// the same database, as replicas of one deployment do.
async fn replica_over(
    database_dir: &std::path::Path,
    url: &str,
    model: Option<ModelClient>,
    config: ServerConfig,
) -> AppState {
    let own = database_dir;
    let shared = SharedState::connect(url).await.expect("shared state");
    let config = ServerConfig {
        state: Some(shared),
        explain: false,
        warm_up: false,
        ..config
    };
    let model = model.ok_or(LlmError::NotConfigured);
    let path = own.join("demo.sqlite");
    let gate = if path.exists() {
        crate::database::open_gate(
            &crate::database::DatabaseUrl::Sqlite(path),
            crate::gate::GateOptions::default(),
        )
        .await
        .expect("gate")
    } else {
        gate(own).await
    };
    AppState::with_local_model(gate, model, None, config)
        .await
        .expect("replica")
}

async fn spend_totals(url: &str) -> (f64, f64, i64) {
    let client = pg_connect(url).await.expect("connects");
    let row = client
        .query_one(
            "SELECT spent_usd::float8, reserved_usd::float8, calls FROM askdb_state.spend_total",
            &[],
        )
        .await
        .expect("totals");
    (row.get(0), row.get(1), row.get(2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spend_cap_holds_across_two_replicas_asked_at_once() {
    let test = "the_spend_cap_holds_across_two_replicas_asked_at_once";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let cap = 0.2;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = ServerConfig {
        asks_per_minute: 0,
        max_concurrent_asks: 64,
        ..ServerConfig::default()
    };
    let replicas = [
        replica(
            dir.path(),
            &url,
            Some(priced_model(40, Some(cap))),
            config.clone(),
        )
        .await,
        replica(dir.path(), &url, Some(priced_model(40, Some(cap))), config).await,
    ];
    let mut asks = tokio::task::JoinSet::new();
    for n in 0..60 {
        let state = replicas[n % 2].clone();
        asks.spawn(async move {
            let body = format!("{{\"question\": \"{QUESTION}\", \"mode\": \"baseline\"}}");
            call(&state, post_json("/api/ask", &body)).await
        });
    }
    let (mut answered, mut capped, mut paid) = (0, 0, 0.0);
    while let Some(outcome) = asks.join_next().await {
        let (status, body) = outcome.expect("ask task");
        match status {
            StatusCode::OK => {
                answered += 1;
                paid += body["cost_usd"].as_f64().expect("cost");
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(body["error"], "spend_cap_reached", "{body}");
                capped += 1;
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    let (spent, reserved, calls) = spend_totals(&url).await;
    assert!(
        answered > 0 && capped > 0,
        "{answered} answered, {capped} capped"
    );
    assert!(spent <= cap + 1e-9, "spent {spent} past the cap {cap}");
    assert!(reserved.abs() < 1e-9, "nothing left in flight: {reserved}");
    assert_eq!(calls, answered, "one settled call per answer");
    assert!(
        (spent - paid).abs() < 1e-9,
        "the shared ledger holds every answer's cost: {spent} against {paid}"
    );
}

/// The request with the Cookie or Authorization header, as a browser or a script sends.
fn with_header(path: &str, name: header::HeaderName, value: &str) -> Request<Body> {
    Request::get(path)
        .header(name, value)
        .body(Body::empty())
        .expect("request")
}

#[tokio::test]
async fn a_session_made_on_one_replica_is_taken_by_the_other_until_a_revocation_reaches_it() {
    let test = "a_session_made_on_one_replica_is_taken_by_the_other_until_a_revocation_reaches_it";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    // Two machines, two copies of the same users file.
    let (file_a, file_b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let token = UserFile::at(&file_a).add("ana", None).expect("user added");
    std::fs::copy(&file_a, &file_b).expect("copied");
    let config = |file: &std::path::Path| ServerConfig {
        users: Some(UserFile::at(file).into()),
        ..ServerConfig::default()
    };
    let a = replica(dir.path(), &url, None, config(&file_a)).await;
    let b = replica(dir.path(), &url, None, config(&file_b)).await;

    let cookie = session_cookie(&a, &token).await;
    let (status, body) = call(&b, with_header("/api/session", header::COOKIE, &cookie)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["user"], "ana", "the other replica knows the session");
    let bearer = format!("Bearer {token}");
    let (status, _) = call(
        &b,
        with_header("/api/schema", header::AUTHORIZATION, &bearer),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // `askdb users revoke ana --state-url`: replica A's file and the shared state.
    UserFile::at(&file_a).revoke("ana").expect("revoked");
    crate::state::sign_in::revoke(&url, "ana")
        .await
        .expect("revoked in the state");
    let revoked = Instant::now();
    loop {
        let (status, _) = call(
            &b,
            with_header("/api/schema", header::AUTHORIZATION, &bearer),
        )
        .await;
        if status == StatusCode::UNAUTHORIZED {
            break;
        }
        // The bench measures the delay (`benches/results/replicas.md`); a test on a
        // busy machine only holds that it comes, well within a generous deadline.
        assert!(
            revoked.elapsed() < Duration::from_secs(30),
            "replica B still takes the revoked token after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, body) = call(&b, with_header("/api/session", header::COOKIE, &cookie)).await;
    assert_eq!(
        body["user"],
        Value::Null,
        "the session ended with the token"
    );
    eprintln!("revocation reached replica B after {:?}", revoked.elapsed());
    assert!(
        UserFile::at(&file_b).is_live("ana").expect("read"),
        "replica B's own file never heard of the revocation"
    );
}

#[tokio::test]
async fn one_asker_has_one_bucket_across_replicas() {
    let test = "one_asker_has_one_bucket_across_replicas";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let config = ServerConfig {
        asks_per_minute: 3,
        ..ServerConfig::default()
    };
    let a = replica(dir.path(), &url, None, config.clone()).await;
    let b = replica(dir.path(), &url, None, config).await;
    let address: IpAddr = [192, 0, 2, 7].into();
    let asker = limits::Asker::of(None, address);
    for state in [&a, &b, &a] {
        let taken = state.shared.rate.take(&asker).await;
        assert!(taken.is_ok(), "{taken:?}");
    }
    let refused = b.shared.rate.take(&asker).await.expect_err("bucket empty");
    match refused {
        AppError::RateLimited { retry_after } => assert!(
            retry_after > Duration::ZERO && retry_after <= Duration::from_secs(20),
            "{retry_after:?}"
        ),
        other => panic!("expected rate_limited, got {other:?}"),
    }
    let user = limits::Asker::of(Some("ana"), address);
    assert!(
        a.shared.rate.take(&user).await.is_ok(),
        "a user has its own bucket"
    );
}

#[tokio::test]
async fn health_says_whether_the_shared_state_answers_without_its_password() {
    let test = "health_says_whether_the_shared_state_answers_without_its_password";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    // The test server trusts local connections, so a password is sent and ignored.
    let Some((scheme, rest)) = url.split_once("://") else {
        panic!("a URL: {url}");
    };
    let Some((user, host)) = rest.split_once('@') else {
        return;
    };
    let with_password = format!("{scheme}://{user}:s3cret-word@{host}");
    let dir = tempfile::tempdir().expect("temp dir");
    let state = replica(dir.path(), &with_password, None, ServerConfig::default()).await;
    let (_, body) = call(&state, super::tests::get("/api/health")).await;
    assert_eq!(body["shared_state_enabled"], true, "{body}");
    assert_eq!(body["shared_state_reachable"], true, "{body}");
    assert_eq!(body["authentication_configured"], false, "{body}");
    let detail = body["details"]["shared_state"].as_str().expect("detail");
    assert!(detail.contains("SELECT 1"), "{detail}");
    assert!(!body.to_string().contains("s3cret-word"), "{body}");
}

/// Users that cannot be read leave health unable to say whether sign-in is on: it
/// says null, not the "open" a failed read would otherwise look like.
#[tokio::test]
async fn health_leaves_sign_in_unknown_while_the_shared_users_cannot_be_read() {
    let test = "health_leaves_sign_in_unknown_while_the_shared_users_cannot_be_read";
    let Some((scratch, url)) = state_database(test).await else {
        return;
    };
    // Every request reads the table, so the answer below is the outage's.
    let store = crate::state::users::SharedUsers::connect(
        SharedState::connect(&url).await.expect("shared state"),
    )
    .await
    .expect("users table")
    .with_lifetimes(Duration::ZERO, Duration::ZERO);
    let config = ServerConfig {
        users: Some(crate::users::Users::new(Arc::new(store))),
        ..ServerConfig::default()
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let state = replica(dir.path(), &url, None, config).await;
    let (_, health) = call(&state, super::tests::get("/api/health")).await;
    assert_eq!(health["authentication_configured"], false, "{health}");

    let admin = pg_connect(&scratch.admin_url)
        .await
        .expect("admin connects");
    admin
        .batch_execute(&format!(
            "DROP DATABASE \"{}\" WITH (FORCE)",
            scratch.database
        ))
        .await
        .expect("the state goes away");
    let (_, health) = call(&state, super::tests::get("/api/health")).await;
    assert_eq!(health["shared_state_reachable"], false, "{health}");
    assert_eq!(health["authentication_configured"], Value::Null, "{health}");
}

/// With `--state-url` the conversations and the verified examples are the replicas'
/// shared stores (decision 0080): a conversation begun on one replica continues on the
/// other with its earlier turn, and an example saved on one is listed by the other and
/// answers there without a model call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_and_an_example_are_shared_by_the_replicas() {
    let test = "a_conversation_and_an_example_are_shared_by_the_replicas";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let config = ServerConfig {
        asks_per_minute: 0,
        ..ServerConfig::default()
    };
    // One database behind both, as a deployment's replicas have.
    let a = replica_over(
        dir.path(),
        &url,
        Some(priced_model(4, None)),
        config.clone(),
    )
    .await;
    let b = replica_over(dir.path(), &url, Some(priced_model(4, None)), config).await;
    let (status, first) = call(
        &a,
        post_json(
            "/api/ask",
            &serde_json::json!({"question": QUESTION}).to_string(),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let id = first["conversation_id"]
        .as_str()
        .expect("an id")
        .to_string();
    let follow_up =
        serde_json::json!({"question": "And of those, how many?", "conversation_id": id});
    let (status, second) = call(&b, post_json("/api/ask", &follow_up.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["conversation_id"], id.as_str());
    assert_eq!(second["turn"], 2, "replica B continued A's conversation");
    let unknown = serde_json::json!({"question": "And?", "conversation_id": "0".repeat(32)});
    let (status, _) = call(&b, post_json("/api/ask", &unknown.to_string())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let example = serde_json::json!({
        "question": "How many customers are on the books?",
        "sql": "SELECT count(*) AS on_the_books FROM customers",
        "verified_by": "asha"
    });
    let (status, saved) = call(&a, post_json("/api/examples", &example.to_string())).await;
    assert_eq!(status, StatusCode::CREATED, "{saved}");
    let (status, listed) = call(&b, super::tests::get("/api/examples")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed[0]["question"], example["question"], "{listed}");
    assert_eq!(listed[0]["verified_by"], "asha", "{listed}");
    let asked = serde_json::json!({"question": "How many customers are on the books?"});
    let (status, answered) = call(&b, post_json("/api/ask", &asked.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    assert_eq!(answered["answered_from_example"], saved["example"]["id"]);
}

/// The users of one replica's CLI (`askdb users --state-url URL ...`) or one replica's
/// server: a store of its own, with its own pool and copy of the table.
async fn shared_users(url: &str) -> crate::users::Users {
    let state = SharedState::connect(url).await.expect("shared state");
    let store = crate::state::users::SharedUsers::connect(state)
        .await
        .expect("users table");
    crate::users::Users::new(Arc::new(store))
}

/// Calls `request()` on `state` until it answers `want`: a replica reads the shared
/// users at most `USERS_TTL` old. The deadline is generous; only the change is asserted.
async fn until_status(
    state: &AppState,
    request: impl Fn() -> Request<Body>,
    want: StatusCode,
    what: &str,
) {
    let started = Instant::now();
    loop {
        let (status, _) = call(state, request()).await;
        if status == want {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{what}: still {status} after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// With `--state-url` the users are the shared table's (decision 0083): a user added by
/// any replica's CLI signs in on every replica without a restart, by token and by the
/// page's session; health says sign-in is on; revoked through one replica, the token is
/// refused by that one at once and by the other within its copy's lifetime.
#[tokio::test]
async fn a_shared_user_signs_in_on_every_replica_until_revoked_on_one() {
    let test = "a_shared_user_signs_in_on_every_replica_until_revoked_on_one";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let config_a = ServerConfig {
        users: Some(shared_users(&url).await),
        ..ServerConfig::default()
    };
    let config_b = ServerConfig {
        users: Some(shared_users(&url).await),
        ..ServerConfig::default()
    };
    let a = replica(dir.path(), &url, None, config_a).await;
    let b = replica(dir.path(), &url, None, config_b).await;
    let schema = || super::tests::get("/api/schema");
    for state in [&a, &b] {
        let (status, _) = call(state, schema()).await;
        assert_eq!(status, StatusCode::OK, "no user yet: open");
        let (_, health) = call(state, super::tests::get("/api/health")).await;
        assert_eq!(health["authentication_configured"], false, "{health}");
    }

    // `askdb users --state-url URL add ana`, on a third machine.
    let token = shared_users(&url)
        .await
        .add("ana", None)
        .await
        .expect("added");
    let bearer = format!("Bearer {token}");
    let with_token = || with_header("/api/schema", header::AUTHORIZATION, &bearer);
    for state in [&a, &b] {
        until_status(state, schema, StatusCode::UNAUTHORIZED, "sign-in required").await;
        let (status, body) = call(state, with_token()).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (_, health) = call(state, super::tests::get("/api/health")).await;
        assert_eq!(health["authentication_configured"], true, "{health}");
        let last = if token.ends_with('0') { '1' } else { '0' };
        let wrong = format!("Bearer {}{last}", &token[..token.len() - 1]);
        let (status, _) = call(
            state,
            with_header("/api/schema", header::AUTHORIZATION, &wrong),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }

    // The page signs in on B; its session is taken on A.
    let cookie = session_cookie(&b, &token).await;
    let (_, body) = call(&a, with_header("/api/session", header::COOKIE, &cookie)).await;
    assert_eq!(body["user"], "ana", "{body}");

    // Revoked through replica A's users: A refuses at once, B within its copy's life.
    a.config()
        .users
        .as_ref()
        .expect("users")
        .revoke("ana")
        .await
        .expect("revoked");
    let (status, _) = call(&a, with_token()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the revoking replica");
    until_status(
        &b,
        with_token,
        StatusCode::UNAUTHORIZED,
        "revoked token on B",
    )
    .await;
    let (_, body) = call(&b, with_header("/api/session", header::COOKIE, &cookie)).await;
    assert_eq!(
        body["user"],
        Value::Null,
        "the session ended with the token"
    );
    let (_, health) = call(&b, super::tests::get("/api/health")).await;
    assert_eq!(
        health["authentication_configured"], true,
        "revoking the last user never opens the replicas"
    );
    let (status, _) = call(&b, schema()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
