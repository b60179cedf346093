//! Scripted-model tests of verified examples in the agent: worked examples come after the
//! schema (the system prompt is the same as without them), a set-aside example never
//! reaches the model, and the same question is answered by its verified SQL with no
//! model call (an empty script fails any call).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use super::super::events::{AgentEvent, ExampleRole, Recorder};
use super::super::strategy::{ExampleForm, Strategy};
use super::super::{Agent, AgentResult, AskOptions, Decision};
use crate::examples::{self, Draft, ExampleStore, SqliteExampleStore};
use crate::gate::GateOptions;
use crate::llm::scripted::ScriptedProvider;
use crate::llm::{ModelClient, PriceTable, Purpose, SpendLedger};

async fn gate(path: &Path) -> crate::gate::Gate {
    crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(path.to_path_buf()),
        GateOptions::default(),
    )
    .await
    .expect("the database opens")
}

async fn agent(path: &Path, script: &[(&str, &str)], store: Option<&SqliteExampleStore>) -> Agent {
    agent_with(path, script, store, Strategy::default()).await
}

async fn agent_with(
    path: &Path,
    script: &[(&str, &str)],
    store: Option<&SqliteExampleStore>,
    strategy: Strategy,
) -> Agent {
    let lines: Vec<String> = script
        .iter()
        .map(|(question, sql)| {
            json!({"question": question, "purpose": "write_sql", "reply": {"action": "sql", "sql": sql}})
                .to_string()
        })
        .collect();
    agent_scripted(path, &lines, store, strategy).await
}

/// An agent whose model replies with the scripted provider's `lines` as they are.
async fn agent_scripted(
    path: &Path,
    lines: &[String],
    store: Option<&SqliteExampleStore>,
    strategy: Strategy,
) -> Agent {
    let provider = ScriptedProvider::parse(&lines.join("\n"), "scripted").expect("script parses");
    let client = ModelClient::new(
        Arc::new(provider),
        &PriceTable::built_in().expect("prices"),
        Arc::new(SpendLedger::in_memory(None)),
        None,
    )
    .expect("client");
    let agent = Agent::with_strategy(gate(path).await, client, strategy)
        .await
        .expect("agent builds");
    match store {
        Some(store) => agent.with_examples(Arc::new(store.clone())),
        None => agent,
    }
}

/// Asks with the explanation on when `explain`: one more model call on the model's path.
async fn ask_with(agent: &Agent, question: &str, explain: bool) -> (AgentResult, Recorder) {
    let recorder = Recorder::default();
    let options = AskOptions {
        explain,
        ..AskOptions::default()
    };
    let result = agent
        .ask_observed(question, &options, &recorder)
        .await
        .expect("the agent ends in a decision");
    (result, recorder)
}

async fn ask(agent: &Agent, question: &str) -> (AgentResult, Recorder) {
    ask_with(agent, question, false).await
}

/// The messages of the first SQL-writing call.
fn first_prompt(recorder: &Recorder) -> Vec<String> {
    recorder
        .events()
        .into_iter()
        .find_map(|event| match event {
            AgentEvent::ModelCall {
                purpose: Purpose::WriteSql,
                prompt,
                ..
            } => Some(prompt),
            _ => None,
        })
        .expect("the model wrote SQL")
}

fn demo(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("demo.sqlite");
    crate::demo::write_sqlite(&path).expect("demo builds");
    path
}

/// The demo database and an empty example store beside it.
fn demo_with_store(dir: &tempfile::TempDir) -> (PathBuf, SqliteExampleStore) {
    let store = SqliteExampleStore::new(dir.path().join("examples.sqlite"));
    (demo(dir), store)
}

/// Saves one verified example of the demo database at `path`.
async fn save(
    path: &Path,
    store: &SqliteExampleStore,
    question: &str,
    sql: &str,
) -> examples::Saved {
    examples::save(&gate(path).await, store, &draft(question, sql))
        .await
        .expect("saved")
}

fn draft(question: &str, sql: &str) -> Draft {
    Draft {
        question: question.to_string(),
        sql: sql.to_string(),
        verified_by: "asha".to_string(),
        notes: Some("VOID bills are cancelled".to_string()),
    }
}

#[tokio::test]
async fn worked_examples_follow_the_schema_and_leave_the_system_prompt_as_it_was() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, store) = demo_with_store(&dir);
    let saved = save(
        &path,
        &store,
        "How many bills were voided in 2025?",
        "SELECT count(*) FROM bills WHERE status = 'VOID' AND txn_dt LIKE '2025%'",
    )
    .await;
    save(
        &path,
        &store,
        "Which suppliers are in Pune?",
        "SELECT supp_name FROM suppliers WHERE city = 'Pune'",
    )
    .await;
    let question = "How many bills were voided?";
    let sql = "SELECT count(*) FROM bills WHERE status = 'VOID'";

    let with = agent(&path, &[(question, sql)], Some(&store)).await;
    let (result, recorder) = ask(&with, question).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    let prompt = first_prompt(&recorder);
    assert!(
        !prompt[0].contains("Verified examples"),
        "the schema prefix is untouched"
    );
    let turn = &prompt[1];
    let example = turn
        .find("Example 1: How many bills were voided in 2025?")
        .expect("the example is shown");
    let asked = turn
        .find(&format!("Question: {question}"))
        .expect("the question");
    assert!(example < asked, "{turn}");
    assert!(turn.contains("Note: VOID bills are cancelled"), "{turn}");
    assert!(turn.contains(&saved.example.sql), "{turn}");
    assert!(
        !turn.contains("suppliers"),
        "an unlike example stays out: {turn}"
    );
    assert_eq!(result.examples.len(), 1);
    assert_eq!(result.examples[0].id, saved.example.id);
    assert_eq!(result.examples[0].role, ExampleRole::Prompt);
    assert_eq!(result.answered_from_example, None);
    assert!(result.trace.iter().any(|step| step.node == "examples"));

    let without = agent(&path, &[(question, sql)], None).await;
    let (_, plain) = ask(&without, question).await;
    assert_eq!(first_prompt(&plain)[0], prompt[0], "same cacheable prefix");
}

#[tokio::test]
async fn a_set_aside_example_never_reaches_the_model_nor_a_rerun() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("shop.sqlite");
    let connection = rusqlite::Connection::open(&path).expect("creates");
    connection
        .execute_batch(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price INTEGER);
             INSERT INTO items VALUES (1, 'pen', 10), (2, 'ink', 30);",
        )
        .expect("written");
    let store = SqliteExampleStore::new(dir.path().join("examples.sqlite"));
    let saved = save(
        &path,
        &store,
        "What are the item names?",
        "SELECT name FROM items ORDER BY name",
    )
    .await;
    connection
        .execute_batch("ALTER TABLE items RENAME COLUMN name TO title;")
        .expect("altered");

    let question = "What are the item names?";
    let with = agent(
        &path,
        &[(question, "SELECT title FROM items")],
        Some(&store),
    )
    .await;
    let (result, recorder) = ask(&with, question).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    assert_eq!(
        result.answered_from_example, None,
        "no re-run of a set-aside example"
    );
    assert!(result.examples.is_empty(), "{:?}", result.examples);
    let prompt = first_prompt(&recorder).join("\n");
    assert!(!prompt.contains("Verified examples"), "{prompt}");
    assert!(!prompt.contains(&saved.example.sql), "{prompt}");
    let stored = store
        .list(&examples::database_identity(with.gate().label()))
        .await
        .expect("lists");
    assert!(stored[0].set_aside.is_some(), "{stored:?}");
}

#[tokio::test]
async fn the_same_question_reruns_its_verified_sql_without_the_model() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, store) = demo_with_store(&dir);
    let saved = save(
        &path,
        &store,
        "How many bills were voided in 2025?",
        "SELECT count(*) AS voided FROM bills WHERE status = 'VOID' AND txn_dt LIKE '2025%'",
    )
    .await;
    // No script: any model call fails the question.
    let with = agent(&path, &[], Some(&store)).await;
    let (result, recorder) = ask_with(&with, "how many bills were VOIDED in 2025", true).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    assert!(result.model_calls.is_empty(), "{:?}", result.model_calls);
    assert_eq!(result.attempts, 0);
    assert_eq!(result.answered_from_example, Some(saved.example.id));
    assert_eq!(result.sql.as_deref(), Some(saved.example.sql.as_str()));
    assert_eq!(result.columns, vec!["voided".to_string()]);
    assert!(
        result.rows[0][0].as_i64().is_some_and(|n| n > 0),
        "{:?}",
        result.rows
    );
    assert_eq!(result.examples[0].role, ExampleRole::Rerun);
    let steps: Vec<&str> = recorder.events().iter().map(AgentEvent::step).collect();
    assert_eq!(steps, vec!["rules", "examples", "executed", "finished"]);

    // A near miss (no year) still goes to the model, with the example.
    let (result, _) = {
        let near = agent(
            &path,
            &[(
                "How many bills were voided?",
                "SELECT count(*) FROM bills WHERE status = 'VOID'",
            )],
            Some(&store),
        )
        .await;
        ask(&near, "How many bills were voided?").await
    };
    assert_eq!(result.answered_from_example, None);
    assert_eq!(result.model_calls.len(), 1, "{:?}", result.model_calls);
    assert_eq!(result.examples[0].role, ExampleRole::Prompt);
}

#[tokio::test]
async fn a_follow_up_with_a_verified_questions_words_is_not_answered_by_its_sql() {
    use super::super::conversation::{Context, Turn};
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, store) = demo_with_store(&dir);
    save(
        &path,
        &store,
        "And in 2025?",
        "SELECT count(*) AS customers FROM customers",
    )
    .await;
    let voided_2025 =
        "SELECT count(*) AS voided FROM bills WHERE status = 'VOID' AND txn_dt LIKE '2025%'";
    let follow = agent(&path, &[("And in 2025?", voided_2025)], Some(&store)).await;
    let earlier = AgentResult::for_tests("How many bills were voided in 2026?", Decision::Answer);
    let context = Context::new(vec![Turn::from_result(1, &earlier)]);
    let result = follow
        .ask_in_conversation(
            "And in 2025?",
            &context,
            &AskOptions::default(),
            &Recorder::default(),
        )
        .await
        .expect("answers");
    assert_eq!(result.answered_from_example, None, "{:?}", result.trace);
    assert_eq!(result.model_calls.len(), 1);
    assert_eq!(
        result.sql.as_deref().map(|sql| sql.contains("VOID")),
        Some(true)
    );
}

#[tokio::test]
async fn under_examples_turns_a_first_question_follows_exchanges_and_a_follow_up_a_block() {
    use super::super::conversation::{Context, Turn};
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, store) = demo_with_store(&dir);
    let closest = "SELECT count(*) FROM bills WHERE status = 'VOID' AND txn_dt LIKE '2025%'";
    let further = "SELECT count(*) FROM bills WHERE status = 'PAID'";
    for (question, sql) in [
        ("How many bills were voided in 2025?", closest),
        ("How many bills were paid?", further),
    ] {
        save(&path, &store, question, sql).await;
    }
    let question = "How many bills were voided?";
    let sql = "SELECT count(*) FROM bills WHERE status = 'VOID'";
    let turns = Strategy {
        examples: ExampleForm::Turns,
        ..Strategy::default()
    };
    let with = agent_with(&path, &[(question, sql)], Some(&store), turns).await;
    let (result, recorder) = ask(&with, question).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    assert_eq!(result.examples.len(), 2, "{:?}", result.examples);
    let prompt = first_prompt(&recorder);
    // The system prompt, two exchanges (the closest last), then the question alone.
    assert_eq!(prompt.len(), 6, "{prompt:#?}");
    assert!(prompt[1].starts_with("Question: How many bills were paid?"));
    assert!(prompt[2].contains(further) && prompt[2].starts_with("```sql"));
    assert!(prompt[3].starts_with("Question: How many bills were voided in 2025?"));
    assert!(prompt[3].contains("Note: VOID bills are cancelled"));
    assert!(prompt[4].contains(closest));
    assert_eq!(prompt[5], format!("Question: {question}"));
    let (_, plain) = ask(&agent(&path, &[(question, sql)], None).await, question).await;
    assert_eq!(first_prompt(&plain)[0], prompt[0], "same cacheable prefix");

    // A follow-up's exchanges are its conversation: its examples stay a block.
    let follow_up = "Only the voided bills of 2025?";
    let follow = agent_with(&path, &[(follow_up, closest)], Some(&store), turns).await;
    let earlier = AgentResult::for_tests("How many bills are there?", Decision::Answer);
    let context = Context::new(vec![Turn::from_result(1, &earlier)]);
    let recorder = Recorder::default();
    let result = follow
        .ask_in_conversation(follow_up, &context, &AskOptions::default(), &recorder)
        .await
        .expect("answers");
    assert!(!result.examples.is_empty(), "{:?}", result.trace);
    let prompt = first_prompt(&recorder);
    assert_eq!(
        prompt.len(),
        4,
        "system, the earlier turn, the follow-up: {prompt:#?}"
    );
    assert!(prompt[3].contains("Verified examples") && prompt[3].contains("Follow-up question"));
}

#[tokio::test]
async fn a_first_round_in_the_field_form_shows_its_example_exchanges_in_that_form() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, store) = demo_with_store(&dir);
    let example = "SELECT count(*) FROM bills WHERE status = 'VOID' AND txn_dt LIKE '2025%'";
    save(
        &path,
        &store,
        "How many bills were voided in 2025?",
        example,
    )
    .await;
    let question = "How many bills were voided?";
    let sql = "SELECT count(*) FROM bills WHERE status = 'VOID'";
    let lines = [
        json!({"question": question, "purpose": "write_sql", "reply": {"sql": sql}}).to_string(),
    ];
    let strategy: Strategy = "examples=turns,first=field".parse().expect("parses");
    let agent = agent_scripted(&path, &lines, Some(&store), strategy).await;
    let (result, recorder) = ask(&agent, question).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    let prompt = first_prompt(&recorder);
    assert_eq!(
        prompt.len(),
        4,
        "system, one exchange, the question: {prompt:#?}"
    );
    // The example's reply is written as the round asks the model to write its own.
    let shown = serde_json::from_str::<serde_json::Value>(&prompt[2]).expect("a JSON reply");
    let shown = shown["sql"].as_str().expect("the query as the field");
    assert!(shown.starts_with(example), "{shown}");
}

#[tokio::test]
async fn a_strategy_showing_one_example_shows_the_most_alike() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, store) = demo_with_store(&dir);
    let alike = save(
        &path,
        &store,
        "How many bills were voided in 2025?",
        "SELECT count(*) FROM bills WHERE status = 'VOID' AND txn_dt LIKE '2025%'",
    )
    .await;
    let less_alike = save(
        &path,
        &store,
        "How many bills are there?",
        "SELECT count(*) FROM bills",
    )
    .await;
    let question = "How many bills were voided?";
    let sql = "SELECT count(*) FROM bills WHERE status = 'VOID'";
    for (shown, expected) in [
        (3, vec![alike.example.id, less_alike.example.id]),
        (1, vec![alike.example.id]),
    ] {
        let strategy = Strategy {
            examples_shown: shown,
            ..Strategy::default()
        };
        let with = agent_with(&path, &[(question, sql)], Some(&store), strategy).await;
        let (result, recorder) = ask(&with, question).await;
        assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
        let ids: Vec<i64> = result.examples.iter().map(|example| example.id).collect();
        assert_eq!(ids, expected, "at most {shown}");
        let turn = &first_prompt(&recorder)[1];
        assert_eq!(
            turn.contains("How many bills are there?"),
            shown > 1,
            "{turn}"
        );
    }
}
