//! A person's "Wrong" through the API (`POST /api/answers/wrong`): the verified examples
//! an answer used are recorded against it and `examples::wrong::caused_wrong` names them;
//! an example no marked answer used is not named; the route never makes an example; it
//! refuses an unknown example, a name that is not the signed-in user's, a request with no
//! token once users exist, a cross-site page and an oversized body.

use super::*;
use crate::examples::wrong::caused_wrong;

fn with_examples(dir: &std::path::Path) -> ServerConfig {
    ServerConfig {
        explain: false,
        asks_per_minute: 0,
        examples: Some(dir.join("examples.sqlite")),
        ..ServerConfig::default()
    }
}

fn mark_body(question: &str, examples: &[i64], by: &str) -> String {
    json!({
        "question": question,
        "sql": "SELECT count(*) AS customers FROM customers",
        "examples": examples,
        "marked_by": by,
    })
    .to_string()
}

async fn saved(state: &AppState, question: &str, sql: &str) -> i64 {
    let body = json!({"question": question, "sql": sql, "verified_by": "asha"}).to_string();
    let (status, saved) = call(state, post_json("/api/examples", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "{saved}");
    saved["example"]["id"].as_i64().expect("an id")
}

#[tokio::test]
async fn wrong_on_an_answer_blames_the_examples_it_used_and_saves_none() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fixture = fixture(Some(SCRIPT), with_examples(dir.path())).await;
    let state = &fixture.state;
    let alike = saved(
        state,
        "How many customers do we have?",
        "SELECT count(*) AS customers FROM customers",
    )
    .await;
    let unrelated = saved(
        state,
        "How many bills were voided?",
        "SELECT count(*) FROM bills WHERE status = 'VOID'",
    )
    .await;
    let (status, answer) = call(
        state,
        post_json(
            "/api/ask",
            r#"{"question": "How many customers are there?", "mode": "agent"}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let used: Vec<i64> = answer["examples"]
        .as_array()
        .expect("the answer names its examples")
        .iter()
        .filter_map(|example| example["id"].as_i64())
        .collect();
    assert!(used.contains(&alike), "{answer}");
    assert!(!used.contains(&unrelated), "{answer}");
    let (_, before) = call(state, get("/api/examples")).await;

    // The page sends what the answer card holds: the question, the SQL, its examples.
    let (status, mark) = call(
        state,
        post_json(
            "/api/answers/wrong",
            &mark_body("How many customers are there?", &used, "ana"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{mark}");
    assert_eq!(mark["marked_by"], "ana");
    assert_eq!(mark["examples"], json!(used));

    let store = state.examples().expect("examples kept").as_ref();
    let blamed = caused_wrong(state.gate(), store).await.expect("reads");
    let ids: Vec<i64> = blamed.iter().map(|entry| entry.example.id).collect();
    assert!(ids.contains(&alike), "{ids:?}");
    assert!(!ids.contains(&unrelated), "{ids:?}");
    let entry = blamed
        .iter()
        .find(|entry| entry.example.id == alike)
        .expect("listed");
    assert_eq!(entry.wrong_answers, 1);
    assert_eq!(entry.latest_question, "How many customers are there?");

    // Marking saved, replaced and set aside nothing.
    let (_, after) = call(state, get("/api/examples")).await;
    assert_eq!(after, before);

    // An id the database has no example of is refused by number; nothing is recorded.
    let missing = alike.max(unrelated) + 100;
    let (status, body) = call(
        state,
        post_json(
            "/api/answers/wrong",
            &mark_body("How many customers are there?", &[missing], "ana"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "unknown_example");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains(&missing.to_string())),
        "{body}"
    );
    let database = crate::examples::database_identity(state.gate().label());
    assert_eq!(store.wrong_marks(&database).await.expect("reads").len(), 1);

    // No person, unknown fields, an oversized body: refused before anything is stored.
    let (status, body) = call(
        state,
        post_json(
            "/api/answers/wrong",
            r#"{"question": "How many customers are there?", "examples": []}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, body) = call(
        state,
        post_json(
            "/api/answers/wrong",
            r#"{"question": "q", "marked_by": "ana", "verified_by": "ana"}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let huge = mark_body(&"x".repeat(state.config().max_body_bytes), &[], "ana");
    let (status, body) = call(state, post_json("/api/answers/wrong", &huge)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(store.wrong_marks(&database).await.expect("reads").len(), 1);
}

#[tokio::test]
async fn marking_wrong_needs_a_person_of_this_site() {
    let dir = tempfile::tempdir().expect("temp dir");
    let users = crate::users::UserFile::at(dir.path().join("users.json"));
    let config = ServerConfig {
        users: Some(users.clone().into()),
        ..with_examples(dir.path())
    };
    let fixture = fixture(None, config).await;
    let state = &fixture.state;
    let token = users.add("ana", None).expect("ana");
    let request = |authorization: Option<&str>, origin: Option<&str>, by: &str| {
        let mut request = Request::post("/api/answers/wrong")
            .header(header::HOST, "127.0.0.1:8080")
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(token) = authorization {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(origin) = origin {
            request = request
                .header(header::ORIGIN, origin)
                .header("sec-fetch-site", "cross-site");
        }
        request
            .body(Body::from(mark_body("How many customers?", &[], by)))
            .expect("request")
    };
    let (status, body) = call(state, request(None, None, "ana")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "no token: {body}");
    let (status, body) = call(
        state,
        request(Some(&token), Some("https://attacker.example"), "ana"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "cross-site: {body}");
    let (status, body) = call(state, request(Some(&token), None, "ben")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "not_the_signed_in_user");
    let store = state.examples().expect("examples kept").as_ref();
    let database = crate::examples::database_identity(state.gate().label());
    assert!(store
        .wrong_marks(&database)
        .await
        .expect("reads")
        .is_empty());

    let (status, body) = call(state, request(Some(&token), None, "ana")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["marked_by"], "ana");
    assert_eq!(store.wrong_marks(&database).await.expect("reads").len(), 1);
}

#[tokio::test]
async fn without_an_examples_store_there_is_nothing_to_mark() {
    let fixture = fixture(None, ServerConfig::default()).await;
    let (status, body) = call(
        &fixture.state,
        post_json("/api/answers/wrong", &mark_body("q", &[], "ana")),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "examples_off");
}
