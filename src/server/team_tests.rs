//! Users with policies through the HTTP API (decisions 0076, 0077): two users signed in
//! with their tokens get their own gate for the same query text (schema, SQL console,
//! questions, the stream, the examples), a policy that would widen the notes stops the
//! server, a policy's pace is its own and its users' latencies are labelled with the
//! policy and the user, which only users without a policy read; on PostgreSQL the example
//! row-level security gives each user its own rows through `/api/sql`, `/api/ask` and
//! the stream, and no query can read or change `askdb.user`.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;

use super::*;
use crate::gate::{GateOptions, PolicyError, PolicyLimit, UserPolicy};
use crate::llm::scripted::ScriptedProvider;
use crate::llm::{PriceTable, SpendLedger};
use crate::users::UserFile;

/// Each scripted reply is used once: every question's reply is here once per ask the
/// tests make of it.
const SCRIPT: &str = r#"
{"question": "What is the total credit limit of our customers?", "purpose": "write_sql", "reply": {"sql": "SELECT sum(credit_limit) AS credit FROM customers"}}
{"question": "What is the total credit limit of our customers?", "purpose": "write_sql", "reply": {"sql": "SELECT sum(credit_limit) AS credit FROM customers"}}
{"question": "What is the total credit limit of our customers?", "purpose": "write_sql", "reply": {"sql": "SELECT sum(credit_limit) AS credit FROM customers"}}
{"question": "Which cities are our suppliers in?", "purpose": "write_sql", "reply": {"sql": "SELECT DISTINCT city FROM suppliers ORDER BY city"}}
{"question": "Which cities are our suppliers in?", "purpose": "write_sql", "reply": {"sql": "SELECT DISTINCT city FROM suppliers ORDER BY city"}}
{"question": "Which cities are our suppliers in?", "purpose": "write_sql", "reply": {"sql": "SELECT DISTINCT city FROM suppliers ORDER BY city"}}
{"question": "Which cities are our suppliers in?", "purpose": "write_sql", "reply": {"sql": "SELECT DISTINCT city FROM suppliers ORDER BY city"}}
{"question": "Which customers do we have?", "purpose": "write_sql", "reply": {"sql": "SELECT cust_name FROM customers ORDER BY cust_id"}}
{"question": "Which customers do we have?", "purpose": "write_sql", "reply": {"sql": "SELECT cust_name FROM customers ORDER BY cust_id"}}
{"question": "*", "purpose": "check", "reply": "ok"}
"#;

fn scripted() -> ModelClient {
    let provider = ScriptedProvider::parse(SCRIPT, "scripted").expect("script parses");
    ModelClient::new(
        std::sync::Arc::new(provider),
        &PriceTable::built_in().expect("prices"),
        std::sync::Arc::new(SpendLedger::in_memory(None)),
        None,
    )
    .expect("client")
}

async fn sqlite_demo(dir: &std::path::Path) -> Gate {
    let path = dir.join("demo.sqlite");
    crate::demo::write_sqlite(&path).expect("demo database");
    crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(path),
        GateOptions::default(),
    )
    .await
    .expect("gate")
}

fn policy(text: &str) -> UserPolicy {
    toml::from_str(text).expect("policy parses")
}

fn config(users: &UserFile, policies: &[(&str, &str)]) -> ServerConfig {
    ServerConfig {
        users: Some(users.clone().into()),
        explain: false,
        warm_up: false,
        policies: policies
            .iter()
            .map(|(name, text)| (name.to_string(), policy(text)))
            .collect::<BTreeMap<_, _>>(),
        ..ServerConfig::default()
    }
}

async fn call(state: &AppState, token: &str, request: Request<Body>) -> (StatusCode, Value) {
    let (status, text) = call_text(state, token, request).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn call_text(state: &AppState, token: &str, request: Request<Body>) -> (StatusCode, String) {
    let (mut parts, body) = request.into_parts();
    parts.headers.insert(
        header::AUTHORIZATION,
        format!("Bearer {token}").parse().expect("header"),
    );
    let response = app(state.clone())
        .oneshot(Request::from_parts(parts, body))
        .await
        .expect("infallible");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
        .await
        .expect("body");
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fn sql(text: &str) -> Request<Body> {
    Request::post("/api/sql")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({ "sql": text }).to_string()))
        .expect("request")
}

fn ask(question: &str) -> Request<Body> {
    Request::post("/api/ask")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({ "question": question }).to_string()))
        .expect("request")
}

fn schema() -> Request<Body> {
    Request::get("/api/schema")
        .body(Body::empty())
        .expect("request")
}

/// The tables and `table.column`s a schema response shows.
fn shown(body: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for table in body["tables"].as_array().into_iter().flatten() {
        let name = table["name"].as_str().unwrap_or_default();
        names.push(name.to_string());
        for column in table["columns"].as_array().into_iter().flatten() {
            names.push(format!(
                "{name}.{}",
                column["name"].as_str().unwrap_or_default()
            ));
        }
    }
    names
}

const CLERK: &str = "hidden_tables = [\"employees\"]\n\
                     restricted_columns = [\"customers.credit_limit\"]\n\
                     row_cap = 5\n";

#[tokio::test]
async fn two_users_get_their_own_verdict_for_the_same_text() {
    let dir = tempfile::tempdir().expect("dir");
    let users = UserFile::at(dir.path().join("users.json"));
    let ana = users.add("ana", None).expect("ana");
    let ben = users.add("ben", Some("clerk")).expect("ben");
    let gate = sqlite_demo(dir.path()).await;
    let state = AppState::new(gate, Ok(scripted()), config(&users, &[("clerk", CLERK)]))
        .await
        .expect("state");

    let (status, wide) = call(&state, &ana, schema()).await;
    assert_eq!(status, StatusCode::OK, "{wide}");
    let (status, narrow) = call(&state, &ben, schema()).await;
    assert_eq!(status, StatusCode::OK, "{narrow}");
    let (wide, narrow) = (shown(&wide), shown(&narrow));
    for name in ["employees", "customers.credit_limit"] {
        assert!(wide.iter().any(|shown| shown == name), "ana sees {name}");
        assert!(!narrow.iter().any(|shown| shown == name), "ben sees {name}");
    }
    assert!(narrow.iter().any(|shown| shown == "customers.cust_name"));

    let credit = "SELECT sum(credit_limit) AS credit FROM customers";
    let (status, body) = call(&state, &ana, sql(credit)).await;
    assert_eq!(
        (status, &body["ok"]),
        (StatusCode::OK, &json!(true)),
        "{body}"
    );
    let (status, body) = call(&state, &ben, sql(credit)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ok"], false, "{body}");
    assert_eq!(body["reason"], "restricted_column", "{body}");

    let names = "SELECT cust_name FROM customers ORDER BY cust_id";
    let (_, body) = call(&state, &ana, sql(names)).await;
    assert_eq!(body["row_count"], 120, "{body}");
    let (_, body) = call(&state, &ben, sql(names)).await;
    assert_eq!(
        (&body["row_count"], &body["truncated"]),
        (&json!(5), &json!(true)),
        "ben's policy caps rows at 5: {body}"
    );
    let (_, body) = call(&state, &ben, sql("SELECT emp_name FROM employees")).await;
    assert_eq!(body["error_type"], "rejected", "{body}");
    assert_eq!(body["reason"], "unknown_table", "{body}");

    // The same question: ana's answer has the rows; ben's agent never reads the column.
    let question = "What is the total credit limit of our customers?";
    let (status, body) = call(&state, &ana, ask(question)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "answer", "{body}");
    let total = body["rows"][0][0].clone();
    assert!(total.is_number(), "{body}");
    let (_, body) = call(&state, &ben, ask(question)).await;
    assert_ne!(body["decision"], "answer", "{body}");
    assert!(!body.to_string().contains(&total.to_string()), "{body}");

    // A user whose policy the server did not load (added since, or unreadable at start
    // with shared users) is refused on every route, never served under the notes alone.
    let late = users.add("cy", Some("late")).expect("cy");
    for request in [sql(names), schema(), ask(question)] {
        let (status, body) = call(&state, &late, request).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["error"], "policy_not_loaded", "{body}");
        let detail = body["detail"].as_str().unwrap_or("");
        assert!(
            detail.contains("access policy") && !detail.contains("late"),
            "{body}"
        );
        assert!(!body.to_string().contains(&total.to_string()), "{body}");
    }
}

/// The `result` event of a stream's body, or None when it ended without one.
fn streamed_result(text: &str) -> Option<Value> {
    let line = text.split("event: result\ndata: ").nth(1)?.lines().next()?;
    serde_json::from_str(line).ok()
}

fn stream(question: &str) -> Request<Body> {
    Request::post("/api/ask/stream")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({ "question": question }).to_string()))
        .expect("request")
}

#[tokio::test]
async fn two_policies_see_their_own_rows_and_columns_through_the_stream() {
    let dir = tempfile::tempdir().expect("dir");
    let users = UserFile::at(dir.path().join("users.json"));
    let ana = users.add("ana", None).expect("ana");
    let ben = users.add("ben", Some("clerk")).expect("ben");
    let gate = sqlite_demo(dir.path()).await;
    let state = AppState::new(gate, Ok(scripted()), config(&users, &[("clerk", CLERK)]))
        .await
        .expect("state");

    // The same question and the same reply: ana's rows are all there, ben's stop at
    // his policy's 5.
    let question = "Which customers do we have?";
    let (status, text) = call_text(&state, &ana, stream(question)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let wide = streamed_result(&text).unwrap_or_else(|| panic!("no result: {text}"));
    assert_eq!(
        (&wide["row_count"], &wide["truncated"]),
        (&json!(120), &json!(false)),
        "{wide}"
    );
    let (status, text) = call_text(&state, &ben, stream(question)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let narrow = streamed_result(&text).unwrap_or_else(|| panic!("no result: {text}"));
    assert_eq!(
        (&narrow["row_count"], &narrow["truncated"]),
        (&json!(5), &json!(true)),
        "{narrow}"
    );

    // A column ben's policy restricts: ana's stream answers it, ben's never shows it.
    let credit = "What is the total credit limit of our customers?";
    let (status, text) = call_text(&state, &ana, stream(credit)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let answered = streamed_result(&text).unwrap_or_else(|| panic!("no result: {text}"));
    assert_eq!(answered["decision"], "answer", "{answered}");
    let total = answered["rows"][0][0].to_string();
    assert!(answered["rows"][0][0].is_number(), "{answered}");
    let (status, text) = call_text(&state, &ben, stream(credit)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(
        !text.contains(&total),
        "ben's stream shows the total: {text}"
    );
    if let Some(result) = streamed_result(&text) {
        assert_ne!(result["decision"], "answer", "{result}");
    }
}

#[tokio::test]
async fn a_policys_user_neither_lists_nor_removes_an_example_it_cannot_see() {
    let dir = tempfile::tempdir().expect("dir");
    let users = UserFile::at(dir.path().join("users.json"));
    let ana = users.add("ana", None).expect("ana");
    let ben = users.add("ben", Some("clerk")).expect("ben");
    let gate = sqlite_demo(dir.path()).await;
    let config = ServerConfig {
        examples: Some(dir.path().join("examples.sqlite")),
        ..config(&users, &[("clerk", CLERK)])
    };
    let state = AppState::new(gate, Ok(scripted()), config)
        .await
        .expect("state");
    let save = |sql: &str, by: &str| {
        Request::post("/api/examples")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                json!({"question": "Who works here?", "sql": sql, "verified_by": by}).to_string(),
            ))
            .expect("request")
    };
    let list = || {
        Request::get("/api/examples")
            .body(Body::empty())
            .expect("request")
    };
    let employees = "SELECT emp_name FROM employees";
    let (status, saved) = call(&state, &ana, save(employees, "ana")).await;
    assert_eq!(status, StatusCode::CREATED, "{saved}");
    let id = saved["example"]["id"].as_i64().expect("an id");

    let (status, listed) = call(&state, &ana, list()).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    // Ben's policy hides employees: the example is not in his list, his delete is the
    // 404 of an id that does not exist, and he cannot save one on it either.
    let (status, listed) = call(&state, &ben, list()).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed, json!([]), "{listed}");
    assert!(!listed.to_string().contains("employees"));
    let delete = || {
        Request::delete(format!("/api/examples/{id}"))
            .body(Body::empty())
            .expect("request")
    };
    let (status, body) = call(&state, &ben, delete()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "no_such_example", "{body}");
    let (status, body) = call(&state, &ben, save(employees, "ben")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "example_refused", "{body}");
    // Ana's example is still hers to see.
    let (_, listed) = call(&state, &ana, list()).await;
    assert_eq!(listed[0]["id"], json!(id), "{listed}");
}

#[tokio::test]
async fn a_policy_that_widens_the_notes_stops_the_server() {
    let dir = tempfile::tempdir().expect("dir");
    let users = UserFile::at(dir.path().join("users.json"));
    let gate = sqlite_demo(dir.path()).await;
    let refused = |text: &'static str| {
        let (gate, users) = (gate.clone(), users.clone());
        async move {
            match AppState::new(gate, Ok(scripted()), config(&users, &[("p", text)])).await {
                Err(ServeError::Policy(error)) => error,
                Err(other) => panic!("{text}: refused for another reason: {other}"),
                Ok(_) => panic!("{text}: the server started"),
            }
        }
    };
    assert!(matches!(
        refused("tables = [\"customers\", \"askdb_query_log\"]").await,
        PolicyError::ShowsHiddenTable { .. }
    ));
    assert!(matches!(
        refused("[columns]\ncustomers = [\"cust_id\", \"phone\"]").await,
        PolicyError::UnrestrictsColumn { .. }
    ));
    assert!(matches!(
        refused("row_cap = 100000").await,
        PolicyError::RaisesLimit {
            limit: PolicyLimit::RowCap,
            ..
        }
    ));
    assert!(matches!(
        refused("asks_per_minute = 100000").await,
        PolicyError::RaisesLimit {
            limit: PolicyLimit::AsksPerMinute,
            ..
        }
    ));
    assert!(matches!(
        refused("hidden_tables = [\"no_such_table\"]").await,
        PolicyError::UnknownTable { .. }
    ));
    assert!(matches!(
        refused("spend_share = 0.5").await,
        PolicyError::ShareWithoutCap { .. }
    ));
}

#[tokio::test]
async fn a_policys_pace_is_its_users_own() {
    let dir = tempfile::tempdir().expect("dir");
    let users = UserFile::at(dir.path().join("users.json"));
    let ana = users.add("ana", None).expect("ana");
    let ben = users.add("ben", Some("slow")).expect("ben");
    let gate = sqlite_demo(dir.path()).await;
    let state = AppState::new(
        gate,
        Ok(scripted()),
        config(&users, &[("slow", "asks_per_minute = 1")]),
    )
    .await
    .expect("state");
    let question = "What is the total credit limit of our customers?";
    let (status, body) = call(&state, &ben, ask(question)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call(&state, &ben, ask(question)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    // The server's own pace still lets ana ask.
    let (status, body) = call(&state, &ana, ask(question)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Latencies are labelled by the user under a policy: ana, without a policy, reads
    // /metrics and sees that ben asked; her own questions carry no name (decision 0086).
    let metrics = || {
        Request::get("/metrics")
            .body(Body::empty())
            .expect("request")
    };
    let (status, text) = call_text(&state, &ana, metrics()).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    for series in [
        "askdb_question_seconds_count{policy=\"slow\",user=\"ben\"} 1",
        "askdb_question_seconds_count{policy=\"\",user=\"\"} 1",
        "askdb_model_latency_seconds_count{policy=\"slow\",user=\"ben\"} 1",
        "askdb_database_seconds_count{policy=\"slow\",user=\"ben\"} 1",
    ] {
        assert!(text.contains(series), "{series} in {text}");
    }
    assert!(!text.contains("\"ana\""), "{text}");
    // Ben, under a policy, reads nothing: not even his own series.
    let (status, own) = call_text(&state, &ben, metrics()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{own}");
    assert!(
        own.contains("metrics_need_a_user_without_a_policy") && !own.contains("askdb_"),
        "{own}"
    );
    // Nor through the page's session cookie, which signs him in as his token does.
    let cookie = super::tests::session_cookie(&state, &ben).await;
    let by_cookie = app(state.clone())
        .oneshot(
            Request::get("/metrics")
                .header(header::COOKIE, cookie)
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(by_cookie.status(), StatusCode::FORBIDDEN);
    // Without a live token there is nothing to read at all.
    let mut wrong = ben.clone();
    wrong.pop();
    wrong.push(if ben.ends_with('0') { '1' } else { '0' });
    let revoked = users.add("cy", None).expect("cy");
    users.revoke("cy").expect("revoked");
    for (what, token) in [("a wrong token", &wrong), ("a revoked token", &revoked)] {
        let (status, text) = call_text(&state, token, metrics()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {text}");
        assert!(!text.contains("askdb_") && !text.contains("slow"), "{text}");
    }
    let response = app(state.clone())
        .oneshot(metrics())
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "no token");
}

/// The demo on PostgreSQL with the example row-level security: ana sees Pune's
/// suppliers, ben Mumbai's. None when no server answers (a SKIPPED line).
async fn rls_demo(test: &str) -> Option<(crate::scratch::Scratch, Gate)> {
    let scratch = crate::scratch::Scratch::new(test, "team")?;
    let mut options = crate::admin::SetupOptions::new(&scratch.admin_url, &scratch.database);
    options.read_only_role = crate::admin::RoleSpec::new(&scratch.read_only_role);
    options.log_role = crate::admin::RoleSpec::new(&scratch.log_role);
    options.example_rls = vec![
        "ana=Pune".parse().expect("pair"),
        "ben=Mumbai".parse().expect("pair"),
    ];
    let report = crate::admin::setup(&options)
        .await
        .unwrap_or_else(|error| panic!("db setup failed: {error}"));
    let proved: Vec<&str> = report
        .proofs
        .iter()
        .map(|proof| proof.outcome.as_str())
        .collect();
    assert!(
        proved.contains(&"saw the cities [\"Pune\"] only"),
        "{proved:?}"
    );
    assert!(proved.contains(&"saw the cities [] only"), "{proved:?}");
    let gate = crate::database::open_gate(
        &crate::database::DatabaseUrl::Postgres(report.read_only.connection_url().to_string()),
        GateOptions::default(),
    )
    .await
    .expect("gate opens as the read-only role");
    Some((scratch, gate))
}

fn rows(outcome: &crate::gate::QueryOutcome) -> Value {
    match outcome {
        crate::gate::QueryOutcome::Rows(rows) => json!(rows.rows),
        crate::gate::QueryOutcome::Failed(error) => panic!("refused: {error}"),
    }
}

#[tokio::test]
async fn row_level_security_gives_each_user_its_own_rows() {
    let Some((_scratch, gate)) = rls_demo("row_level_security_gives_each_user_its_own_rows").await
    else {
        return;
    };
    use crate::gate::user::as_user;
    let cities = "SELECT DISTINCT city FROM suppliers ORDER BY city";
    let seen = |user: Option<&'static str>| {
        let gate = gate.clone();
        async move { rows(&as_user(user, gate.run_query(cities)).await) }
    };
    assert_eq!(seen(Some("ana")).await, json!([["Pune"]]));
    assert_eq!(seen(Some("ben")).await, json!([["Mumbai"]]));
    // The documented default: nobody signed in (or a user with no city) sees none.
    assert_eq!(seen(None).await, json!([]));
    assert_eq!(seen(Some("zed")).await, json!([]));
    // A join through the filtered table is filtered too.
    let joined = "SELECT DISTINCT s.city FROM products p JOIN suppliers s ON s.supp_id = p.supp_id";
    let outcome = as_user(Some("ben"), gate.run_query(joined)).await;
    assert_eq!(rows(&outcome), json!([["Mumbai"]]));

    // No statement may read or change the setting, as any user.
    for attack in [
        "SELECT current_setting('askdb.user') AS who",
        "SELECT current_setting('askdb.user', true) AS who",
        "SELECT set_config('askdb.user', 'ana', true) AS who",
        "SELECT city FROM suppliers WHERE set_config('askdb.user', 'ana', true) IS NOT NULL",
        "WITH s AS (SELECT set_config('askdb.user', 'ana', false)) SELECT city FROM suppliers, s",
    ] {
        let outcome = as_user(Some("ben"), gate.run_query(attack)).await;
        let crate::gate::QueryOutcome::Failed(error) = outcome else {
            panic!("{attack} ran")
        };
        assert_eq!(
            error.error_type,
            crate::gate::ErrorType::Rejected,
            "{attack}"
        );
    }

    // Through the HTTP API with tokens: the same SQL and the same question.
    let dir = tempfile::tempdir().expect("dir");
    let users = UserFile::at(dir.path().join("users.json"));
    let ana = users.add("ana", None).expect("ana");
    let ben = users.add("ben", None).expect("ben");
    let state = AppState::new(gate, Ok(scripted()), config(&users, &[]))
        .await
        .expect("state");
    for (token, city) in [(&ana, "Pune"), (&ben, "Mumbai")] {
        let (status, body) = call(&state, token, sql(cities)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["rows"], json!([[city]]), "{body}");
        let (status, body) = call(&state, token, ask("Which cities are our suppliers in?")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["rows"], json!([[city]]), "{body}");
        // The stream answers in a task of its own; the user goes with it.
        let stream = Request::post("/api/ask/stream")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                json!({ "question": "Which cities are our suppliers in?" }).to_string(),
            ))
            .expect("request");
        let (status, text) = call_text(&state, token, stream).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        let result = text
            .split("event: result\ndata: ")
            .nth(1)
            .and_then(|rest| rest.lines().next())
            .unwrap_or_else(|| panic!("no result event: {text}"));
        let result: Value = serde_json::from_str(result).expect("result JSON");
        assert_eq!(result["rows"], json!([[city]]), "{result}");
    }
}
