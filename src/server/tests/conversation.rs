//! Conversations through the API, handler by handler: a follow-up continues the
//! conversation an answer named, an unknown or expired one is a 404 with a sentence, a
//! question racing another on one conversation is a 409, the stream carries the same
//! fields, and the query log records the conversation and the turn.

use std::time::Duration;

use super::*;
use crate::gate::QUERY_LOG_TABLE;
use crate::querylog::{LogTarget, SQLITE_LOG_FILE};

const FIRST: &str = "How many bills were voided in 2025?";
const FOLLOW: &str = "And in 2026?";

fn script(follow_delay_ms: u64) -> String {
    let lines = [
        json!({"question": FIRST, "purpose": "write_sql", "reply": "```sql\nSELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2025'\n```"}),
        json!({"question": FOLLOW, "purpose": "write_sql", "delay_ms": follow_delay_ms, "reply": "```sql\n-- Understood as: the number of bills voided in 2026\nSELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2026'\n```"}),
        json!({"question": FOLLOW, "purpose": "write_sql", "reply": "```sql\n-- Understood as: the number of bills voided in 2026\nSELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2026'\n```"}),
        json!({"question": "*", "purpose": "check", "reply": "ok"}),
    ];
    lines.map(|line| line.to_string()).join("\n")
}

fn quiet() -> ServerConfig {
    ServerConfig {
        explain: false,
        asks_per_minute: 0,
        ..ServerConfig::default()
    }
}

fn ask_body(question: &str, conversation: Option<&str>) -> String {
    let mut body = json!({"question": question});
    if let Some(id) = conversation {
        body["conversation_id"] = json!(id);
    }
    body.to_string()
}

#[tokio::test]
async fn a_follow_up_continues_the_conversation_its_answer_named_and_is_logged_as_its_turn() {
    let log_dir = tempfile::tempdir().expect("temp dir");
    let log_path = log_dir.path().join(SQLITE_LOG_FILE);
    let config = ServerConfig {
        query_log: monitor::QueryLogSetting::On(LogTarget::Sqlite {
            path: log_path.clone(),
            database: "demo".to_string(),
        }),
        ..quiet()
    };
    let fixture = fixture(Some(&script(0)), config).await;
    let (status, first) = call(
        &fixture.state,
        post_json("/api/ask", &ask_body(FIRST, None)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let id = first["conversation_id"]
        .as_str()
        .expect("an id")
        .to_string();
    assert_eq!(id.len(), 32);
    assert_eq!(first["turn"], 1);
    assert!(first.get("understood_as").is_none(), "{first}");
    let (status, second) = call(
        &fixture.state,
        post_json("/api/ask", &ask_body(FOLLOW, Some(&id))),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["conversation_id"], id.as_str());
    assert_eq!(second["turn"], 2);
    assert_eq!(second["question"], FOLLOW);
    assert_eq!(
        second["understood_as"],
        "the number of bills voided in 2026"
    );
    assert!(second["sql"]
        .as_str()
        .is_some_and(|sql| sql.contains("'2026'")));
    // A question without the id starts a conversation of its own.
    let (_, other) = call(
        &fixture.state,
        post_json("/api/ask", &ask_body(FOLLOW, None)),
    )
    .await;
    assert_ne!(other["conversation_id"], id.as_str());
    assert_eq!(other["turn"], 1);
    let log = fixture.state.query_log().expect("logged");
    let started = std::time::Instant::now();
    while log.counters().written() < 3 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let read = rusqlite::Connection::open(&log_path).expect("the log");
    let rows: Vec<(String, Option<String>, Option<i64>)> = read
        .prepare(&format!(
            "SELECT question, conversation_id, turn FROM {QUERY_LOG_TABLE} ORDER BY id"
        ))
        .expect("prepares")
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .expect("reads")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows[0], (FIRST.to_string(), Some(id.clone()), Some(1)));
    assert_eq!(rows[1], (FOLLOW.to_string(), Some(id.clone()), Some(2)));
}

#[tokio::test]
async fn an_unknown_malformed_or_expired_conversation_is_a_404_with_a_sentence() {
    let config = ServerConfig {
        conversations: crate::conversation::Limits {
            ttl: Duration::from_millis(300),
            ..crate::conversation::Limits::default()
        },
        ..quiet()
    };
    let fixture = fixture(Some(&script(0)), config).await;
    for id in ["0123456789abcdef0123456789abcdef", "not-an-id", ""] {
        let (status, body) = call(
            &fixture.state,
            post_json("/api/ask", &ask_body(FOLLOW, Some(id))),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id:?}: {body}");
        assert_eq!(body["error"], "unknown_conversation");
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("start a new one")),
            "{body}"
        );
    }
    let (_, first) = call(
        &fixture.state,
        post_json("/api/ask", &ask_body(FIRST, None)),
    )
    .await;
    let id = first["conversation_id"]
        .as_str()
        .expect("an id")
        .to_string();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (status, body) = call(
        &fixture.state,
        post_json("/api/ask/stream", &ask_body(FOLLOW, Some(&id))),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "expired, also on the stream: {body}"
    );
    assert_eq!(body["error"], "unknown_conversation");
}

#[tokio::test]
async fn a_question_racing_another_on_one_conversation_is_a_409_never_interleaved() {
    let fixture = fixture(Some(&script(600)), quiet()).await;
    let (_, first) = call(
        &fixture.state,
        post_json("/api/ask", &ask_body(FIRST, None)),
    )
    .await;
    let id = first["conversation_id"]
        .as_str()
        .expect("an id")
        .to_string();
    let slow = {
        let state = fixture.state.clone();
        let body = ask_body(FOLLOW, Some(&id));
        tokio::spawn(async move { call(&state, post_json("/api/ask", &body)).await })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let (status, racing) = call(
        &fixture.state,
        post_json("/api/ask", &ask_body(FOLLOW, Some(&id))),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{racing}");
    assert_eq!(racing["error"], "conversation_busy");
    let (status, answered) = slow.await.expect("the first ask ends");
    assert_eq!(status, StatusCode::OK, "{answered}");
    assert_eq!(answered["turn"], 2);
    // Once it answered, the conversation takes the next question as turn 3.
    let (status, next) = call(
        &fixture.state,
        post_json("/api/ask", &ask_body(FOLLOW, Some(&id))),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{next}");
    assert_eq!(next["turn"], 3);
}

#[tokio::test]
async fn the_streams_result_names_the_conversation_and_the_turn() {
    let fixture = fixture(Some(&script(0)), quiet()).await;
    let (_, first) = call(
        &fixture.state,
        post_json("/api/ask", &ask_body(FIRST, None)),
    )
    .await;
    let id = first["conversation_id"]
        .as_str()
        .expect("an id")
        .to_string();
    let response = app(fixture.state.clone())
        .oneshot(post_json("/api/ask/stream", &ask_body(FOLLOW, Some(&id))))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
        .await
        .expect("body");
    let text = String::from_utf8_lossy(&bytes);
    let result = text
        .split("\n\n")
        .find_map(|event| {
            event
                .strip_prefix("event: result\ndata: ")
                .and_then(|data| serde_json::from_str::<Value>(data).ok())
        })
        .unwrap_or_else(|| panic!("a result event: {text}"));
    assert_eq!(result["conversation_id"], id.as_str());
    assert_eq!(result["turn"], 2);
    assert_eq!(
        result["understood_as"],
        "the number of bills voided in 2026"
    );
}
