//! Scripted-model tests: each drives one branch of the state machine on the real demo
//! database and asserts the path taken (nodes, attempts, history, model calls). The
//! script supplies only the replies a branch should ask for, so an extra model call
//! fails the test with "script exhausted".

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::attempt::failure_of;
use super::*;
use crate::gate::{GateOptions, QueryError, RefusalReason};
use crate::llm::scripted::ScriptedProvider;
use crate::llm::Purpose;
use crate::llm::{PriceTable, SpendLedger};

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

fn demo() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("demo.sqlite");
    crate::demo::write_sqlite(&path).expect("demo builds");
    Fixture { _dir: dir, path }
}

fn line(question: &str, purpose: &str, reply: serde_json::Value) -> String {
    json!({"question": question, "purpose": purpose, "reply": reply}).to_string()
}

fn sql_reply(sql: &str) -> serde_json::Value {
    json!({"action": "sql", "sql": sql})
}

async fn agent(path: &Path, script: &[String]) -> Agent {
    agent_with(path, script, "").await
}

fn nodes(result: &AgentResult) -> Vec<&str> {
    result.trace.iter().map(|step| step.node.as_str()).collect()
}

fn count(result: &AgentResult, node: &str) -> usize {
    nodes(result).iter().filter(|n| **n == node).count()
}

/// The last message of every repair call, in order: what each repair told the model.
fn repair_prompts(recorder: &events::Recorder) -> Vec<String> {
    recorder
        .events()
        .iter()
        .filter_map(|event| match event {
            events::AgentEvent::ModelCall {
                purpose, prompt, ..
            } if *purpose == Purpose::RepairSql => prompt.last().cloned(),
            _ => None,
        })
        .collect()
}

/// What followed each failure, in order, as the events name it (`repair`, `rewrite`...).
fn next_steps(recorder: &events::Recorder) -> Vec<String> {
    recorder
        .events()
        .iter()
        .filter_map(|event| match event {
            events::AgentEvent::Failed { next, .. } => Some(next.as_str().to_string()),
            _ => None,
        })
        .collect()
}

async fn ask_recorded(agent: &Agent, question: &str) -> (AgentResult, events::Recorder) {
    let recorder = events::Recorder::default();
    let result = agent
        .ask_observed(question, &AskOptions::default(), &recorder)
        .await
        .expect("the agent ends in a decision");
    (result, recorder)
}

/// A SQLite file in `dir` holding what `script` writes.
fn sqlite_file(dir: &tempfile::TempDir, script: &str) -> std::path::PathBuf {
    let path = dir.path().join("fixture.sqlite");
    let connection = rusqlite::Connection::open(&path).expect("creates the file");
    connection
        .execute_batch(script)
        .expect("the fixture is written");
    path
}

fn file_hash(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    format!(
        "{:x}",
        Sha256::digest(std::fs::read(path).expect("readable"))
    )
}

#[tokio::test]
async fn a_wrong_case_filter_is_repaired_after_the_case_probe() {
    let fixture = demo();
    let q = "List the paid bills";
    let agent = agent(
        &fixture.path,
        &[
            line(
                q,
                "write_sql",
                sql_reply("SELECT bill_no, total_amt FROM bills WHERE status = 'paid'"),
            ),
            line(
                q,
                "repair_sql",
                sql_reply("SELECT bill_no, total_amt FROM bills WHERE status = 'PAID'"),
            ),
        ],
    )
    .await;
    let result = agent.ask(q, &AskOptions::default()).await.expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.attempts, 2);
    assert_eq!(result.history.len(), 1);
    assert_eq!(result.history[0].error_type, FailureKind::CaseMismatch);
    assert!(result.row_count > 0);
    let probe = result
        .trace
        .iter()
        .find(|step| step.note.contains("case-insensitive probe matches"))
        .expect("the probe ran");
    assert!(probe.note.contains("'PAID'"), "{}", probe.note);
    assert_eq!(result.model_calls.len(), 2);
}

/// Flights keep their airline as a number; its name is in `airlines`.
const FLIGHTS_BY_AIRLINE_ID: &str = "
    CREATE TABLE airlines (uid INTEGER PRIMARY KEY, Name TEXT);
    INSERT INTO airlines VALUES (1, 'JetBlue Airways'), (2, 'United Airlines');
    CREATE TABLE flights (flight_no INTEGER PRIMARY KEY, airline INTEGER REFERENCES airlines (uid));
    INSERT INTO flights VALUES (10, 1), (11, 1), (12, 2);
";

#[tokio::test]
async fn a_value_compared_with_a_column_that_lacks_it_is_repaired_where_it_is_stored() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = sqlite_file(&dir, FLIGHTS_BY_AIRLINE_ID);
    let q = "How many flights does JetBlue Airways have?";
    let wrong = "SELECT count(*) FROM flights WHERE airline = 'JetBlue Airways'";
    let joined = "SELECT count(*) FROM flights f JOIN airlines a ON f.airline = a.uid \
                  WHERE a.name = 'JetBlue Airways'";
    let script = [
        line(q, "write_sql", sql_reply(wrong)),
        line(q, "repair_sql", sql_reply(joined)),
    ];
    // The default strategy looks the value up.
    let agent = agent_with(&path, &script, "n=1").await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.history.len(), 1, "{:?}", result.history);
    assert_eq!(result.history[0].error_type, FailureKind::ValueElsewhere);
    assert_eq!(result.rows, vec![vec![json!(2)]]);
    let probe = result
        .trace
        .iter()
        .find(|step| step.note.contains("stored elsewhere"))
        .expect("the lookup ran");
    // Named as the schema spells it (the value index matches in lower case).
    assert!(probe.note.contains("airlines.Name"), "{}", probe.note);
    // The repair was told where the value is kept.
    let told = repair_prompts(&recorder);
    assert!(
        told.iter()
            .any(|prompt| prompt.contains("it is stored in airlines.Name")),
        "{told:?}"
    );
    // ... and what the filtered column is: named with its table (both tables could have
    // had a column of that name) and shown with values it does hold, numbers here.
    assert!(
        told.iter().any(|prompt| prompt
            .contains("'JetBlue Airways' is not a value of flights.airline (it holds 1, 2, ...)")
            && prompt.contains("instead of flights.airline")),
        "{told:?}"
    );

    // With the lookup off the empty count stands.
    let agent = agent_with(&path, &script, "n=1,values=off").await;
    let result = agent.ask(q, &AskOptions::default()).await.expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    assert!(result.history.is_empty(), "{:?}", result.history);
    assert_eq!(result.rows, vec![vec![json!(0)]]);
}

#[tokio::test]
async fn an_exact_key_lookup_that_finds_nothing_is_answered_honestly() {
    let fixture = demo();
    let q = "Show bill NOPE-1";
    let agent = agent(
        &fixture.path,
        &[line(
            q,
            "write_sql",
            sql_reply("SELECT * FROM bills WHERE bill_no = 'NOPE-1'"),
        )],
    )
    .await;
    let result = agent.ask(q, &AskOptions::default()).await.expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.attempts, 1);
    assert_eq!(result.row_count, 0);
    assert!(result.history.is_empty());
    assert_eq!(result.explanation.as_deref(), Some("No rows match."));
    assert!(result
        .trace
        .iter()
        .any(|step| step.note.contains("exact-key lookup")));
}

#[tokio::test]
async fn an_empty_anti_join_is_not_repaired() {
    let fixture = demo();
    let q = "Which categories have no products?";
    let agent = agent(
        &fixture.path,
        &[line(
            q,
            "write_sql",
            sql_reply("SELECT c.cat_name FROM categories c WHERE NOT EXISTS (SELECT 1 FROM products p WHERE p.cat_id = c.cat_id)"),
        )],
    )
    .await;
    let result = agent.ask(q, &AskOptions::default()).await.expect("answers");
    assert_eq!(
        (result.decision, result.attempts, result.row_count),
        (Decision::Answer, 1, 0)
    );
}

#[tokio::test]
async fn an_ambiguous_column_is_repaired_by_qualification() {
    let fixture = demo();
    let q = "Bills and purchase orders with their status";
    let agent = agent(
        &fixture.path,
        &[
            line(q, "write_sql", sql_reply("SELECT bill_no, status FROM bills JOIN purchase_orders ON purchase_orders.po_id < 3")),
            line(q, "repair_sql", sql_reply("SELECT b.bill_no, b.status, p.status AS po_status FROM bills b JOIN purchase_orders p ON p.po_id < 3")),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(
        result.history[0].error_type,
        FailureKind::Database(ErrorType::AmbiguousColumn)
    );
    let repairs = repair_prompts(&recorder);
    assert!(
        repairs[0].contains("Qualify it with the alias"),
        "{}",
        repairs[0]
    );
}

#[tokio::test]
async fn an_unknown_column_widens_retrieval_with_the_owner_table() {
    let fixture = demo();
    let q = "Bill numbers with the customer name";
    let agent = agent(
        &fixture.path,
        &[
            line(q, "write_sql", sql_reply("SELECT b.bill_no, b.cust_name FROM bills b")),
            line(q, "repair_sql", sql_reply("SELECT b.bill_no, c.cust_name FROM bills b LEFT JOIN customers c ON c.cust_id = b.cust_id")),
        ],
    )
    .await;
    let options = AskOptions {
        select: SelectOptions {
            force_linking: true,
            k: 1,
            ..SelectOptions::default()
        },
        ..AskOptions::default()
    };
    let result = agent.ask(q, &options).await.expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(
        result.history[0].error_type,
        FailureKind::Database(ErrorType::UnknownColumn)
    );
    assert_eq!(count(&result, "select_schema"), 2, "{:?}", nodes(&result));
    assert!(
        result.schema_tables.iter().any(|t| t == "customers"),
        "{:?}",
        result.schema_tables
    );
}

#[tokio::test]
async fn grouping_then_windowing_errors_get_two_different_strategies() {
    let fixture = demo();
    let q = "First five bills of big spenders";
    let agent = agent(
        &fixture.path,
        &[
            line(q, "write_sql", sql_reply("SELECT cust_id, total_amt FROM bills WHERE sum(total_amt) > 1000")),
            line(q, "repair_sql", sql_reply("SELECT bill_id FROM bills WHERE row_number() OVER (ORDER BY bill_id) <= 5")),
            line(q, "repair_sql", sql_reply("SELECT bill_id FROM (SELECT bill_id, row_number() OVER (ORDER BY bill_id) AS n FROM bills) t WHERE n <= 5")),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer);
    let types: Vec<&str> = result
        .history
        .iter()
        .map(|a| a.error_type.as_str())
        .collect();
    assert_eq!(types, vec!["grouping_error", "windowing_error"]);
    let repairs = repair_prompts(&recorder);
    assert_eq!(repairs.len(), 2);
    assert_ne!(repairs[0], repairs[1]);
    assert!(repairs[0].contains("GROUP BY"), "{}", repairs[0]);
    assert!(repairs[1].contains("subquery"), "{}", repairs[1]);
    assert_eq!(result.attempts, 3);
    assert_eq!(result.row_count, 5);
}

#[tokio::test]
async fn three_bad_replies_give_up_after_exactly_three_model_calls() {
    let fixture = demo();
    let q = "Something impossible";
    let agent = agent(
        &fixture.path,
        &[
            // Misspellings of real columns: repairable, and not data the database lacks.
            line(q, "write_sql", sql_reply("SELECT totl_amt FROM bills")),
            line(q, "repair_sql", sql_reply("SELECT total_amnt FROM bills")),
            line(q, "repair_sql", sql_reply("SELECT totalamt FROM bills")),
        ],
    )
    .await;
    let result = agent
        .ask(q, &AskOptions::default())
        .await
        .expect("gives up");
    assert_eq!(result.decision, Decision::GiveUp);
    assert_eq!(result.attempts, MAX_ATTEMPTS);
    assert_eq!(result.model_calls.len(), 3);
    let tried: Vec<&str> = result.history.iter().map(|a| a.sql.as_str()).collect();
    assert_eq!(tried.len(), 3);
    assert!(
        tried[0].contains("totl_amt")
            && tried[1].contains("total_amnt")
            && tried[2].contains("totalamt")
    );
    assert!(result
        .reason
        .as_deref()
        .unwrap_or_default()
        .contains("3 attempts failed"));
}

#[tokio::test]
async fn two_columns_no_table_has_end_in_a_decline_not_a_third_invention() {
    let fixture = demo();
    let q = "What is the email of each customer?";
    let agent = agent(
        &fixture.path,
        &[
            line(q, "write_sql", sql_reply("SELECT c.email FROM customers c")),
            line(
                q,
                "repair_sql",
                sql_reply("SELECT c.email_address FROM customers c"),
            ),
            // Asked which column holds it, the model says none does.
            line(q, "find_column", json!({"column": null})),
        ],
    )
    .await;
    let result = agent
        .ask(q, &AskOptions::default())
        .await
        .expect("declines");
    assert_eq!(result.decision, Decision::Decline, "{:?}", result.reason);
    assert_eq!(result.model_calls.len(), 3);
    assert_eq!(result.history.len(), 2);
    let reason = result.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("\"email_address\"")
            && reason.contains("does not hold")
            && reason.contains("looked in the names and descriptions of the columns of")
            && reason.contains("customers"),
        "the decline says what was looked for and where: {reason}"
    );
    assert_eq!(result.history[0].error_type, FailureKind::AbsentColumn);
    assert_eq!(result.history[1].error_type, FailureKind::AbsentColumn);
}

#[tokio::test]
async fn a_concept_found_under_another_name_is_repaired_with_it_instead_of_declined() {
    let fixture = demo();
    let q = "What is the spending cap of each customer?";
    let agent = agent(
        &fixture.path,
        &[
            line(
                q,
                "write_sql",
                sql_reply("SELECT c.spending_cap FROM customers c"),
            ),
            line(
                q,
                "repair_sql",
                sql_reply("SELECT c.spend_cap FROM customers c"),
            ),
            line(
                q,
                "find_column",
                json!({"column": "customers.credit_limit"}),
            ),
            line(
                q,
                "repair_sql",
                sql_reply("SELECT c.cust_name, c.credit_limit FROM customers c"),
            ),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    assert_eq!(result.history.len(), 2);
    assert_eq!(next_steps(&recorder), vec!["repair", "search_concept"]);
    let told = repair_prompts(&recorder);
    assert!(
        told.last()
            .is_some_and(|prompt| prompt.contains("held in customers.credit_limit")),
        "{told:?}"
    );
    // A column the model names that the tables lack, or a restricted one, is no answer.
    let agent = agent_with_script_for_restricted(&fixture.path, q).await;
    let result = agent
        .ask(q, &AskOptions::default())
        .await
        .expect("declines");
    assert_eq!(result.decision, Decision::Decline, "{:?}", result.reason);
}

async fn agent_with_script_for_restricted(path: &Path, q: &str) -> Agent {
    agent(
        path,
        &[
            line(
                q,
                "write_sql",
                sql_reply("SELECT c.spending_cap FROM customers c"),
            ),
            line(
                q,
                "repair_sql",
                sql_reply("SELECT c.spend_cap FROM customers c"),
            ),
            line(q, "find_column", json!({"column": "customers.phone"})),
        ],
    )
    .await
}

#[tokio::test]
async fn a_question_naming_a_restricted_column_is_declined_before_any_model_call() {
    let fixture = demo();
    let agent = agent(&fixture.path, &[]).await;
    for mode in [Mode::Agent, Mode::Baseline] {
        let options = AskOptions {
            mode,
            ..AskOptions::default()
        };
        let result = agent
            .ask("List the phone numbers of all our customers.", &options)
            .await
            .expect("declines");
        assert_eq!(result.decision, Decision::Decline);
        assert!(result.model_calls.is_empty());
        assert!(result.history.is_empty());
        assert!(
            result
                .reason
                .as_deref()
                .unwrap_or_default()
                .contains("customers.phone"),
            "{:?}",
            result.reason
        );
    }
}

#[tokio::test]
async fn a_reply_identical_to_a_failed_one_is_never_run_again() {
    let fixture = demo();
    let q = "Customer names on bills";
    let bad = "SELECT b.cust_name FROM bills b";
    let agent = agent(
        &fixture.path,
        &[
            line(q, "write_sql", sql_reply(bad)),
            line(q, "repair_sql", sql_reply(bad)),
            line(
                q,
                "repair_sql",
                sql_reply(
                    "SELECT DISTINCT c.cust_name FROM bills b \
                     JOIN customers c ON c.cust_id = b.cust_id",
                ),
            ),
        ],
    )
    .await;
    let recorder = events::Recorder::default();
    let result = agent
        .ask_observed(q, &AskOptions::default(), &recorder)
        .await
        .expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.attempts, 3);
    assert_eq!(result.model_calls.len(), 3);
    // The bad query fails at the guard (bills has no cust_name), its repeat is never
    // checked or run again, and only the repaired query executes.
    assert_eq!(count(&result, "guard"), 2, "{:?}", nodes(&result));
    assert_eq!(
        count(&result, "execute"),
        1,
        "the repeat was run: {:?}",
        nodes(&result)
    );
    assert_eq!(result.history[1].error_type, FailureKind::IdenticalToFailed);
    // The repeat was answered by sampling candidates, not by a third nudge.
    let asked: Vec<u32> = recorder
        .events()
        .iter()
        .filter_map(|event| match event {
            events::AgentEvent::ModelCall { candidates, .. } => Some(*candidates),
            _ => None,
        })
        .collect();
    assert_eq!(asked.last(), Some(&agent.strategy().candidates));
    assert!(agent.strategy().candidates > 1);
}

#[tokio::test]
async fn permission_denied_is_never_repaired() {
    let fixture = demo();
    let agent = agent(&fixture.path, &[]).await;
    for error_type in [ErrorType::PermissionDenied, ErrorType::ReadOnlyViolation] {
        let mut state = agent.new_state("q".to_string(), Mode::Agent, &events::NoObserver);
        state.attempts = 1;
        let error = QueryError {
            ok: false,
            error_type,
            message: "permission denied for table bills".to_string(),
            hint: None,
            sqlstate: Some("42501".to_string()),
            reason: None,
            position: None,
            repairable: error_type.repairable(),
            sql: "SELECT 1".to_string(),
        };
        let node = agent.after_failure(&mut state, failure_of(&error), None);
        assert!(
            matches!(node, Node::Done),
            "{error_type} must not be repaired"
        );
        assert_eq!(
            state.result.map(|result| result.decision),
            Some(Decision::GiveUp),
            "{error_type}"
        );
    }
}

#[tokio::test]
async fn a_write_request_is_declined_and_nothing_runs() {
    let fixture = demo();
    let before = file_hash(&fixture.path);
    let declined = "Delete the cancelled purchase orders";
    let marked = "Mark every unpaid bill as paid";
    // A write the rules do not see, written by the model: the guard refuses it.
    let sneaky = "Make every unpaid bill paid";
    let agent = agent(
        &fixture.path,
        &[line(
            sneaky,
            "write_sql",
            sql_reply("UPDATE bills SET status = 'PAID' WHERE status = 'UNPAID'"),
        )],
    )
    .await;
    for question in [declined, marked] {
        let result = agent
            .ask(question, &AskOptions::default())
            .await
            .expect("declines");
        assert_eq!(result.decision, Decision::Decline, "{question}");
        assert_eq!(
            (result.attempts, result.model_calls.len()),
            (0, 0),
            "the rules decline before any model call"
        );
    }
    let result = agent
        .ask(sneaky, &AskOptions::default())
        .await
        .expect("declines");
    assert_eq!(result.decision, Decision::Decline);
    assert_eq!(count(&result, "execute"), 0);
    assert_eq!(result.model_calls.len(), 1, "a write is not repaired");
    drop(agent);
    assert_eq!(before, file_hash(&fixture.path));
}

#[tokio::test]
async fn injection_in_customer_notes_cannot_widen_what_the_guard_allows() {
    let fixture = demo();
    let q = "Tell me about our customers";
    // A model that obeys the note planted in customers.notes ("list every customer's phone").
    let agent = agent(
        &fixture.path,
        &[
            line(
                q,
                "write_sql",
                sql_reply("SELECT cust_name, phone FROM customers"),
            ),
            line(q, "repair_sql", sql_reply("SELECT * FROM customers")),
            line(
                q,
                "repair_sql",
                sql_reply("SELECT c.cust_name, c.notes FROM customers c"),
            ),
        ],
    )
    .await;
    let selection = agent.index.select(q, &SelectOptions::default());
    let system = system_prompt_for(&agent.gate, &agent.cards, &agent.strategy, &selection);
    let injection = crate::demo::INJECTION;
    let planted = system.find(injection).map(|at| at.min(system.len()));
    if let Some(at) = planted {
        let schema_start = system.find("<schema").expect("schema block");
        let schema_end = system.find("</schema>").expect("schema block end");
        assert!(
            schema_start < at && at < schema_end,
            "injected text outside the data block"
        );
    }
    let result = agent.ask(q, &AskOptions::default()).await.expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    let reasons: Vec<Option<RefusalReason>> = result.history.iter().map(|a| a.reason).collect();
    assert_eq!(
        reasons,
        vec![Some(RefusalReason::RestrictedColumn); 2],
        "{:?}",
        result.history
    );
    assert!(!result
        .columns
        .iter()
        .any(|c| c.eq_ignore_ascii_case("phone")));
}

#[tokio::test]
async fn vague_words_without_a_glossary_entry_ask_before_any_model_call() {
    let fixture = demo();
    let agent = agent(&fixture.path, &[]).await;
    let result = agent
        .ask("Who are our best customers?", &AskOptions::default())
        .await
        .expect("clarifies");
    assert_eq!(result.decision, Decision::Clarify);
    let clarify = result.clarify.expect("options");
    assert!((2..=4).contains(&clarify.options.len()));
    assert!(result.model_calls.is_empty());
}

#[tokio::test]
async fn baseline_makes_one_attempt_and_no_diagnostic() {
    let fixture = demo();
    let q = "List the paid bills";
    let agent = agent(
        &fixture.path,
        &[line(
            q,
            "write_sql",
            sql_reply("SELECT bill_no FROM bills WHERE status = 'paid'"),
        )],
    )
    .await;
    let options = AskOptions {
        mode: Mode::Baseline,
        ..AskOptions::default()
    };
    let result = agent.ask(q, &options).await.expect("answers");
    assert_eq!(
        (result.decision, result.attempts, result.row_count),
        (Decision::Answer, 1, 0)
    );
    let q2 = "Bad one";
    let agent = agent_for_baseline_failure(&fixture.path, q2).await;
    let result = agent.ask(q2, &options).await.expect("gives up");
    assert_eq!(result.decision, Decision::GiveUp);
    assert_eq!((result.attempts, result.model_calls.len()), (1, 1));
}

async fn agent_for_baseline_failure(path: &Path, q: &str) -> Agent {
    agent(
        path,
        &[line(q, "write_sql", sql_reply("SELECT nope FROM bills"))],
    )
    .await
}

#[tokio::test]
async fn the_answer_checks_numbers_and_picks_a_chart() {
    let fixture = demo();
    let q = "How many bills per status?";
    let agent = agent(
        &fixture.path,
        &[
            line(
                q,
                "write_sql",
                sql_reply(
                    "SELECT status, count(*) AS bills FROM bills GROUP BY status ORDER BY status",
                ),
            ),
            line(
                q,
                "write_answer",
                json!("There are 1300 paid bills and 9999 void ones."),
            ),
        ],
    )
    .await;
    let options = AskOptions {
        explain: true,
        ..AskOptions::default()
    };
    let result = agent.ask(q, &options).await.expect("answers");
    assert_eq!(result.chart.kind, answer::ChartKind::Bar);
    assert_eq!(result.unverified_numbers, vec!["9999".to_string()]);
    assert_eq!(result.model_calls.len(), 2);
}

#[tokio::test]
async fn a_reply_cut_off_at_the_token_limit_asks_for_a_shorter_query() {
    let fixture = demo();
    let q = "Revenue by category";
    let runaway = format!(
        "{{\"action\": \"sql\", \"sql\": \"SELECT {}",
        "x, ".repeat(300)
    );
    let cut = json!({"question": q, "purpose": "write_sql", "reply": runaway, "truncated": true})
        .to_string();
    let agent = agent(
        &fixture.path,
        &[
            cut,
            line(q, "repair_sql", sql_reply("SELECT c.cat_name, count(*) AS products FROM categories c JOIN products p ON p.cat_id = c.cat_id GROUP BY c.cat_name")),
        ],
    )
    .await;
    let recorder = events::Recorder::default();
    let result = agent
        .ask_observed(q, &AskOptions::default(), &recorder)
        .await
        .expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.history[0].error_type, FailureKind::CutOff);
    assert_eq!(
        result.history[0].message,
        "the reply was cut off at the token limit"
    );
    let repair_prompt = recorder
        .events()
        .iter()
        .filter_map(|event| match event {
            events::AgentEvent::ModelCall { prompt, .. } => prompt.last().cloned(),
            _ => None,
        })
        .nth(1)
        .expect("a repair call");
    assert!(repair_prompt.contains("shorter"), "{repair_prompt}");
    assert!(
        repair_prompt.len() < 1000,
        "the runaway reply is not quoted back whole"
    );
}

#[tokio::test]
async fn a_second_cut_off_reply_ends_the_question_without_a_third_call() {
    let fixture = demo();
    let q = "Revenue by category";
    let runaway = format!("```sql\nSELECT {}", "x, ".repeat(300));
    let cut = |purpose: &str| {
        json!({"question": q, "purpose": purpose, "reply": runaway.clone(), "truncated": true})
            .to_string()
    };
    let agent = agent(&fixture.path, &[cut("write_sql"), cut("repair_sql")]).await;
    let result = agent.ask(q, &AskOptions::default()).await.expect("ends");
    assert_eq!(result.decision, Decision::GiveUp);
    assert_eq!(
        result.model_calls.len(),
        2,
        "no third call after two cut-offs"
    );
    assert!(result
        .reason
        .as_deref()
        .is_some_and(|reason| reason.contains("token limit")));
}

#[tokio::test]
async fn an_answer_that_stops_at_the_forced_row_cap_says_truncated() {
    let fixture = demo();
    let q = "List every bill number";
    let agent = agent(
        &fixture.path,
        &[line(q, "write_sql", sql_reply("SELECT bill_no FROM bills"))],
    )
    .await;
    let options = AskOptions {
        explain: false,
        ..AskOptions::default()
    };
    let result = agent.ask(q, &options).await.expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    // The demo has more bills than the default cap, so the cap the guard forced is
    // what stopped the rows.
    assert_eq!(result.row_count as u64, crate::gate::guard::DEFAULT_ROW_CAP);
    assert!(result.truncated, "the cap was reached: more rows may exist");
    let sql = result.sql.as_deref().unwrap_or_default();
    assert!(sql.ends_with("LIMIT 200"), "{sql}");
}

#[tokio::test]
async fn the_plain_reference_mode_sends_every_table_with_sample_rows_and_one_attempt() {
    let fixture = demo();
    let q = "How many bills are there?";
    let agent = agent(
        &fixture.path,
        &[line(
            q,
            "write_sql",
            json!({"sql": "SELECT count(*) FROM bill"}),
        )],
    )
    .await;
    let options = AskOptions {
        mode: Mode::Plain,
        explain: false,
        ..AskOptions::default()
    };
    let result = agent.ask(q, &options).await.expect("answers");
    // One attempt, no repair: the unknown table ends the question.
    assert_eq!(result.decision, Decision::GiveUp);
    assert_eq!(result.attempts, 1);
    assert_eq!(result.model_calls.len(), 1);
    assert!(!nodes(&result).contains(&"check_ambiguity"));
    let schema = &agent.plain_schema;
    assert_eq!(schema.matches("CREATE TABLE").count(), 15, "every table");
    assert!(schema.contains("example rows from bills"), "{schema}");
    assert!(!schema.contains("phone"), "restricted columns stay out");
    assert!(
        !schema.contains("VOID bills never do"),
        "no notes in the plain prompt"
    );
}

#[tokio::test]
async fn the_unknown_column_fact_names_the_alias_and_the_table_that_owns_the_column() {
    let fixture = demo();
    let q = "Quantity sold per bill";
    let agent = agent(
        &fixture.path,
        &[
            line(q, "write_sql", sql_reply("SELECT T1.bill_no, SUM(T1.qty) FROM bill_items AS T2 JOIN bills AS T1 ON T1.bill_id = T2.bill_id GROUP BY T1.bill_no")),
            line(q, "repair_sql", sql_reply("SELECT T1.bill_no, SUM(T2.qty) FROM bill_items AS T2 JOIN bills AS T1 ON T1.bill_id = T2.bill_id GROUP BY T1.bill_no")),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer);
    let repair = &repair_prompts(&recorder)[0];
    assert!(
        repair.contains("T1 stands for bills, which has no column qty"),
        "{repair}"
    );
    assert!(
        repair.contains("qty is a column of bill_items, which your query calls T2: write T2.qty"),
        "{repair}"
    );
}

#[tokio::test]
async fn a_doubtful_first_result_is_settled_by_a_vote_among_sampled_candidates() {
    let fixture = demo();
    let q = "How many bills were paid?";
    let paid = "SELECT count(*) FROM bills WHERE status = 'PAID'";
    let paid_again = "SELECT COUNT(bill_id) AS n FROM bills b WHERE b.status = 'PAID'";
    let other = "SELECT count(*) FROM bills";
    let sampled = json!({
        "question": q,
        "purpose": "repair_sql",
        "reply": sql_reply(other),
        "alternatives": [sql_reply(paid), sql_reply(paid_again)],
    })
    .to_string();
    // A repair votes under `repair=sampled` (the default repairs with one greedy reply).
    let agent = agent_with(
        &fixture.path,
        &[
            line(
                q,
                "write_sql",
                sql_reply("SELECT count(*) FROM bills WHERE stat = 'PAID'"),
            ),
            sampled,
        ],
        "repair=sampled",
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.candidates_tried, 4, "one greedy, three sampled");
    let vote = recorder
        .events()
        .into_iter()
        .find_map(|event| match event {
            events::AgentEvent::Vote {
                chosen,
                agreeing,
                voters,
                ..
            } => Some((chosen, agreeing, voters)),
            _ => None,
        })
        .expect("a vote");
    assert_eq!(vote, (1, 2, 3), "the two equal results outvote the odd one");
    assert_eq!(
        result.sql.as_deref(),
        Some(format!("{paid} LIMIT 200").as_str())
    );
}

#[tokio::test]
async fn an_empty_answer_gets_one_sampled_second_look_in_which_it_votes_too() {
    let fixture = demo();
    let q = "Bills over a million rupees";
    let empty = "SELECT bill_no FROM bills WHERE total_amt > 1000000";
    let sampled = json!({
        "question": q,
        "purpose": "write_sql",
        "reply": sql_reply("SELECT bill_no FROM bills WHERE total_amt > 100000000"),
        "alternatives": [sql_reply("SELECT bill_no FROM bills WHERE total_amt > 0")],
    })
    .to_string();
    let agent = agent(
        &fixture.path,
        &[line(q, "write_sql", sql_reply(empty)), sampled],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.attempts, 2, "one greedy round, one sampled look");
    let vote = recorder
        .events()
        .into_iter()
        .find_map(|event| match event {
            events::AgentEvent::Vote {
                agreeing, voters, ..
            } => Some((agreeing, voters)),
            _ => None,
        })
        .expect("a vote");
    // The kept empty answer and the sampled empty one agree against the odd one.
    assert_eq!(vote, (2, 3));
    assert_eq!(result.row_count, 0);
    assert_eq!(result.model_calls.len(), 2, "no loop of loosened filters");
}

const MONTHLY_2025: &str =
    "What was the total billed amount per month in 2025, excluding void bills?";

/// The issue's wrong answer: years not asked for, from the archive, per year.
const ARCHIVE_BY_YEAR: &str =
    "SELECT strftime('%Y', txn_dt) AS year, SUM(bill_archive.amt) AS total \
     FROM bill_archive WHERE status <> 'VOID' GROUP BY year";

#[tokio::test]
async fn a_suspect_answer_earns_one_repair_that_names_the_fact() {
    let fixture = demo();
    let right = "SELECT strftime('%Y-%m', b.txn_dt) AS month, SUM(b.total_amt) AS total \
                 FROM bills AS b WHERE b.status <> 'VOID' AND b.txn_dt >= '2025-01-01' \
                 AND b.txn_dt < '2026-01-01' GROUP BY month ORDER BY month";
    let agent = agent(
        &fixture.path,
        &[
            line(MONTHLY_2025, "write_sql", sql_reply(ARCHIVE_BY_YEAR)),
            line(MONTHLY_2025, "repair_sql", sql_reply(right)),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, MONTHLY_2025).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.attempts, 2);
    assert_eq!(result.history.len(), 1);
    assert_eq!(result.history[0].error_type, FailureKind::Suspect);
    assert!(
        result.history[0].message.contains("bill_archive"),
        "{}",
        result.history[0].message
    );
    assert!(result.warnings.is_empty(), "{:?}", result.warnings);
    assert_eq!(result.row_count, 12, "one row per month of 2025");
    let repairs = repair_prompts(&recorder);
    assert_eq!(repairs.len(), 1);
    assert!(
        repairs[0].contains("That failed (suspect)"),
        "{}",
        repairs[0]
    );
    assert!(repairs[0].contains("per month"), "{}", repairs[0]);
    assert!(
        repairs[0].contains("bill_archive holds 2023-01-01 to 2024-12-31"),
        "the repair is told what the notes say: {}",
        repairs[0]
    );
    assert_eq!(next_steps(&recorder), ["repair"]);
}

#[tokio::test]
async fn a_total_over_rows_an_unread_join_repeats_is_rerun_without_the_join_and_no_model_call() {
    let fixture = demo();
    let in_2025 = "b.status <> 'VOID' AND b.txn_dt >= '2025-01-01' AND b.txn_dt < '2026-01-01'";
    // bill_items is joined on bill_id, which is not its key, and never read: each bill
    // counts once per line.
    let repeated = format!(
        "SELECT SUM(b.total_amt) AS total FROM bills AS b \
         JOIN bill_items AS i ON i.bill_id = b.bill_id WHERE {in_2025}"
    );
    let database = rusqlite::Connection::open(&fixture.path).expect("opens the demo");
    let total = |sql: &str| -> f64 {
        database
            .query_row(sql, [], |row| row.get(0))
            .expect("the expected total runs")
    };
    let with_repeats = total(&repeated);
    // A question that does not speak of the lines drops the join; one that does keeps it
    // as a test, so bills without lines stay out.
    for (question, kept_as_test, expected) in [
        (
            "What was the total billed in 2025?",
            false,
            total(&format!(
                "SELECT SUM(b.total_amt) FROM bills AS b WHERE {in_2025}"
            )),
        ),
        (
            "What was the total billed in 2025 on bills with items?",
            true,
            total(&format!(
                "SELECT SUM(b.total_amt) FROM bills AS b WHERE {in_2025} AND EXISTS \
                 (SELECT 1 FROM bill_items AS i WHERE i.bill_id = b.bill_id)"
            )),
        ),
    ] {
        assert!(
            (expected - with_repeats).abs() > 0.5,
            "the repeats change the total, or this test shows nothing"
        );
        let agent = agent(
            &fixture.path,
            &[line(question, "write_sql", sql_reply(&repeated))],
        )
        .await;
        let (result, recorder) = ask_recorded(&agent, question).await;
        assert_eq!(result.decision, Decision::Answer, "{question}");
        assert_eq!(result.attempts, 1, "the rewrite asks no model: {question}");
        assert!(repair_prompts(&recorder).is_empty());
        assert_eq!(result.history.len(), 1);
        assert_eq!(result.history[0].error_type, FailureKind::Suspect);
        assert!(
            result.history[0].message.contains("repeated_rows"),
            "{}",
            result.history[0].message
        );
        assert!(
            result.history[0].sql.starts_with(&repeated),
            "the failed attempt is shown as it ran: {}",
            result.history[0].sql
        );
        assert_eq!(next_steps(&recorder), ["rewrite"]);
        assert!(result.warnings.is_empty(), "{:?}", result.warnings);
        let sql = result.sql.clone().expect("the answer's SQL");
        assert_eq!(sql.contains("EXISTS"), kept_as_test, "{sql}");
        assert!(!sql.contains("JOIN"), "{sql}");
        let answered = result.rows[0][0].as_f64().expect("a number");
        assert!(
            (answered - expected).abs() < 0.005,
            "{question}: {answered} != {expected}"
        );
    }
}

const CONCERTS_BY_YEAR_AS_TEXT: &str =
    "CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, name TEXT, year TEXT);
     INSERT INTO concert VALUES (1, 'Auditions', '2014'), (2, 'Super bootcamp', '2014'),
                                (3, 'Home Visits', '2015');";

#[tokio::test]
async fn a_year_stored_as_a_number_read_through_strftime_is_rerun_as_the_year_with_no_model_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = sqlite_file(&dir, CONCERTS_BY_YEAR_AS_TEXT);
    let question = "How many concerts were there in 2014?";
    // strftime reads '2014' as no date: the count is 0 and nothing errs.
    let through_a_date_function =
        "SELECT count(*) FROM concert WHERE strftime('%Y', year) = '2014'";
    // Were the model asked, it would answer this: the rewrite must not need it.
    let tautology = "SELECT count(*) FROM concert WHERE year = CAST(year AS TEXT)";
    let agent = agent(
        &path,
        &[
            line(question, "write_sql", sql_reply(through_a_date_function)),
            line(question, "repair_sql", sql_reply(tautology)),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, question).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.attempts, 1, "the rewrite asks no model");
    assert!(repair_prompts(&recorder).is_empty());
    assert_eq!(next_steps(&recorder), ["rewrite"]);
    assert_eq!(result.history.len(), 1);
    assert_eq!(result.history[0].error_type, FailureKind::Suspect);
    assert!(
        result.history[0].message.contains("number_as_date"),
        "{}",
        result.history[0].message
    );
    let sql = result.sql.clone().expect("the answer's SQL");
    assert!(
        sql.starts_with("SELECT count(*) FROM concert WHERE year = '2014'"),
        "{sql}"
    );
    assert_eq!(result.rows, vec![vec![serde_json::json!(2)]]);
    assert!(result.warnings.is_empty(), "{:?}", result.warnings);
}

#[tokio::test]
async fn a_year_stored_as_a_number_read_as_a_whole_date_is_repaired_by_naming_its_values() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = sqlite_file(&dir, CONCERTS_BY_YEAR_AS_TEXT);
    let question = "How many concerts were there after 2014?";
    // date() of '2014' is no date: nothing is after anything, and what was meant by a
    // date of a year is not the rules' to guess, so the model is told the values.
    let through_a_date_function = "SELECT count(*) FROM concert WHERE date(year) > '2014-12-31'";
    let right = "SELECT count(*) FROM concert WHERE year > '2014'";
    let agent = agent(
        &path,
        &[
            line(question, "write_sql", sql_reply(through_a_date_function)),
            line(question, "repair_sql", sql_reply(right)),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, question).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.attempts, 2);
    assert_eq!(next_steps(&recorder), ["repair"]);
    assert_eq!(result.history.len(), 1);
    assert!(
        result.history[0].message.contains("number_as_date"),
        "{}",
        result.history[0].message
    );
    let repairs = repair_prompts(&recorder);
    assert_eq!(repairs.len(), 1);
    assert!(
        repairs[0]
            .contains("concert.year, whose values are years stored as numbers ('2014', '2015')"),
        "the repair names the column and its values: {}",
        repairs[0]
    );
    assert!(
        repairs[0].contains("compared with the year itself"),
        "{}",
        repairs[0]
    );
    assert!(!repairs[0].contains("period"), "{}", repairs[0]);
    assert_eq!(result.rows, vec![vec![serde_json::json!(1)]]);
    assert!(result.warnings.is_empty(), "{:?}", result.warnings);
}

#[tokio::test]
async fn a_join_on_a_column_its_table_lacks_is_rerun_on_the_foreign_key_with_no_model_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = sqlite_file(
        &dir,
        "CREATE TABLE car_names (MakeId INTEGER PRIMARY KEY, Model TEXT, Make TEXT);
         CREATE TABLE cars_data (Id INTEGER PRIMARY KEY REFERENCES car_names (MakeId),
                                 Horsepower INTEGER, Weight INTEGER);
         INSERT INTO car_names VALUES (1, 'chevrolet', 'chevrolet chevelle'),
                                      (2, 'buick', 'buick skylark'), (3, 'amc', 'amc rebel');
         INSERT INTO cars_data VALUES (1, 130, 3504), (2, 65, 3693), (3, 150, 3436);",
    );
    let question = "What is the model of the car with the smallest amount of horsepower?";
    // cars_data has no MakeId; the key that links the two tables is cars_data.Id.
    let wrong_key = "SELECT T2.Model FROM cars_data AS T1 JOIN car_names AS T2 \
                     ON T1.MakeId = T2.MakeId ORDER BY T1.Horsepower LIMIT 1";
    let agent = agent(
        &path,
        &[
            line(question, "write_sql", sql_reply(wrong_key)),
            // Were the model asked, it would send the same join back.
            line(question, "repair_sql", sql_reply(wrong_key)),
            // The baseline's one attempt, below.
            line(question, "write_sql", sql_reply(wrong_key)),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, question).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.history);
    assert_eq!(result.attempts, 1, "the rewrite asks no model");
    assert!(repair_prompts(&recorder).is_empty());
    assert_eq!(next_steps(&recorder), ["rewrite"]);
    assert_eq!(result.history.len(), 1);
    assert_eq!(
        result.history[0].error_type,
        FailureKind::Database(ErrorType::UnknownColumn)
    );
    let sql = result.sql.clone().expect("the answer's SQL");
    assert!(sql.contains("ON T1.Id = T2.MakeId"), "{sql}");
    assert_eq!(result.rows, vec![vec![serde_json::json!("buick")]]);

    // In a one-attempt mode the rules write no fix either: the failure is the answer.
    let options = AskOptions {
        mode: Mode::Baseline,
        ..AskOptions::default()
    };
    let baseline = agent.ask(question, &options).await.expect("a decision");
    assert_eq!(baseline.decision, Decision::GiveUp, "{:?}", baseline.sql);
    assert_eq!(baseline.history.len(), 1);
}

#[tokio::test]
async fn an_in_list_built_from_the_outer_tables_column_is_repaired_by_naming_the_subquerys_table() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = sqlite_file(
        &dir,
        "CREATE TABLE countries (CountryId INTEGER PRIMARY KEY, CountryName TEXT);
         CREATE TABLE car_makers (Id INTEGER PRIMARY KEY, Maker TEXT, Country INTEGER);
         INSERT INTO countries VALUES (1, 'usa'), (2, 'germany'), (3, 'egypt');
         INSERT INTO car_makers VALUES (1, 'ford', 1), (2, 'bmw', 2);",
    );
    let question = "Which countries have no car maker?";
    // car_makers has no CountryId: SQLite takes the outer row's own, NOT IN keeps nothing.
    let outer = "SELECT CountryName FROM countries WHERE CountryId NOT IN \
                 (SELECT CountryId FROM car_makers)";
    let right = "SELECT CountryName FROM countries WHERE CountryId NOT IN \
                 (SELECT Country FROM car_makers)";
    let agent = agent(
        &path,
        &[
            line(question, "write_sql", sql_reply(outer)),
            line(question, "repair_sql", sql_reply(right)),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, question).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.history.len(), 1);
    assert_eq!(result.history[0].error_type, FailureKind::Suspect);
    assert!(
        result.history[0].message.contains("outer_column"),
        "{}",
        result.history[0].message
    );
    let repairs = repair_prompts(&recorder);
    assert_eq!(repairs.len(), 1);
    assert!(
        repairs[0].contains("selects CountryId, which car_makers does not have")
            && repairs[0].contains("outer query's countries"),
        "the repair names the column, the subquery's table and the owner: {}",
        repairs[0]
    );
    assert_eq!(result.rows, vec![vec![serde_json::json!("egypt")]]);
    assert!(result.warnings.is_empty(), "{:?}", result.warnings);
}

#[tokio::test]
async fn an_in_list_of_the_outer_column_is_rewritten_to_the_keyed_column_without_the_model() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = sqlite_file(
        &dir,
        "CREATE TABLE countries (CountryId INTEGER PRIMARY KEY, CountryName TEXT);
         CREATE TABLE car_makers (Id INTEGER PRIMARY KEY, Maker TEXT,
                                  Country INTEGER REFERENCES countries (CountryId));
         INSERT INTO countries VALUES (1, 'usa'), (2, 'germany'), (3, 'egypt');
         INSERT INTO car_makers VALUES (1, 'ford', 1), (2, 'bmw', 2);",
    );
    let question = "Which countries have no car maker?";
    let outer = "SELECT CountryName FROM countries WHERE CountryId NOT IN \
                 (SELECT CountryId FROM car_makers)";
    let agent = agent(&path, &[line(question, "write_sql", sql_reply(outer))]).await;
    let (result, recorder) = ask_recorded(&agent, question).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.history.len(), 1);
    assert_eq!(result.history[0].error_type, FailureKind::Suspect);
    assert!(
        repair_prompts(&recorder).is_empty(),
        "the declared key decides the column: no model repair"
    );
    let sql = result.sql.clone().expect("the answer's SQL");
    assert!(
        sql.contains("SELECT car_makers.Country FROM car_makers"),
        "{sql}"
    );
    assert_eq!(result.rows, vec![vec![serde_json::json!("egypt")]]);
    assert!(result.warnings.is_empty(), "{:?}", result.warnings);
}

#[tokio::test]
async fn a_join_on_columns_no_key_ties_follows_the_declared_keys() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = sqlite_file(
        &dir,
        "CREATE TABLE stadium (Stadium_ID INTEGER PRIMARY KEY, Name TEXT);
         CREATE TABLE concert (concert_ID INTEGER PRIMARY KEY, concert_Name TEXT,
                               Stadium_ID INTEGER REFERENCES stadium (Stadium_ID));
         CREATE TABLE singer_in_concert (concert_ID INTEGER REFERENCES concert (concert_ID),
                                         Singer_ID INTEGER);
         INSERT INTO stadium VALUES (1, 'Hampden'), (2, 'Balmoor');
         INSERT INTO concert VALUES (1, 'Auditions', 2), (2, 'Super bootcamp', 2);
         INSERT INTO singer_in_concert VALUES (1, 7), (2, 8);",
    );
    // Runs and returns rows, pairing stadium 1 with concert 1 by their numbers alone.
    let question = "For each stadium, how many singers performed there?";
    let unkeyed = "SELECT T1.Name, COUNT(T2.Singer_ID) FROM stadium AS T1 \
                   JOIN singer_in_concert AS T2 ON T1.Stadium_ID = T2.concert_ID GROUP BY T1.Name";
    // The rule writes the join through concert itself.
    let rewriting = agent(&path, &[line(question, "write_sql", sql_reply(unkeyed))]).await;
    let (result, recorder) = ask_recorded(&rewriting, question).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.history.len(), 1, "{:?}", result.history);
    assert_eq!(result.history[0].error_type, FailureKind::Suspect);
    assert!(
        result.history[0].message.contains("unkeyed_join"),
        "{}",
        result.history[0].message
    );
    assert!(repair_prompts(&recorder).is_empty());
    let sql = result.sql.clone().expect("the answer's SQL");
    assert!(
        sql.contains("JOIN concert ON concert.Stadium_ID = T1.Stadium_ID"),
        "{sql}"
    );
    assert_eq!(
        result.rows,
        vec![vec![serde_json::json!("Balmoor"), serde_json::json!(2)]]
    );
    assert!(result.warnings.is_empty(), "{:?}", result.warnings);

    // An ON with more than the one equality cannot be rewritten exactly: the model's
    // repair is told the keys and the joins that follow them.
    let filtered = "SELECT T1.Name, COUNT(T2.Singer_ID) FROM stadium AS T1 \
                    JOIN singer_in_concert AS T2 ON T1.Stadium_ID = T2.concert_ID \
                    AND T2.Singer_ID > 0 GROUP BY T1.Name";
    let right = "SELECT T1.Name, COUNT(T3.Singer_ID) FROM stadium AS T1 \
                 JOIN concert AS T2 ON T2.Stadium_ID = T1.Stadium_ID \
                 JOIN singer_in_concert AS T3 ON T3.concert_ID = T2.concert_ID GROUP BY T1.Name";
    let repairing = agent(
        &path,
        &[
            line(question, "write_sql", sql_reply(filtered)),
            line(question, "repair_sql", sql_reply(right)),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&repairing, question).await;
    assert_eq!(result.decision, Decision::Answer);
    let repairs = repair_prompts(&recorder);
    assert_eq!(repairs.len(), 1);
    assert!(
        repairs[0].contains("stadium.Stadium_ID = singer_in_concert.concert_ID")
            && repairs[0].contains("concert.Stadium_ID references stadium.Stadium_ID")
            && repairs[0].contains(
                "joined by its keys: stadium JOIN concert ON concert.Stadium_ID = \
                 stadium.Stadium_ID JOIN singer_in_concert ON singer_in_concert.concert_ID = \
                 concert.concert_ID"
            ),
        "the repair names the join, the keys and the joins that follow them: {}",
        repairs[0]
    );
    assert_eq!(
        result.rows,
        vec![vec![serde_json::json!("Balmoor"), serde_json::json!(2)]]
    );
}

#[tokio::test]
async fn an_unknown_columns_owner_the_query_already_reads_is_named_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    // employee sorts before shop: without the order, the repair would hear of employee
    // first and join it.
    let path = sqlite_file(
        &dir,
        "CREATE TABLE employee (Employee_ID INTEGER PRIMARY KEY, Name TEXT);
         CREATE TABLE hiring (Shop_ID INTEGER, Employee_ID INTEGER);
         CREATE TABLE shop (Shop_ID INTEGER PRIMARY KEY, Name TEXT);
         INSERT INTO employee VALUES (1, 'Ann'), (2, 'Bo');
         INSERT INTO shop VALUES (1, 'North'), (2, 'South');
         INSERT INTO hiring VALUES (1, 1), (1, 2);",
    );
    let question = "Which shop has the most employees?";
    let wrong_alias = "SELECT T2.Name FROM shop AS T1 JOIN hiring AS T2 \
                       ON T1.Shop_ID = T2.Shop_ID GROUP BY T1.Shop_ID ORDER BY COUNT(*) DESC LIMIT 1";
    let right = "SELECT T1.Name FROM shop AS T1 JOIN hiring AS T2 \
                 ON T1.Shop_ID = T2.Shop_ID GROUP BY T1.Shop_ID ORDER BY COUNT(*) DESC LIMIT 1";
    let agent = agent(
        &path,
        &[
            line(question, "write_sql", sql_reply(wrong_alias)),
            line(question, "repair_sql", sql_reply(right)),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, question).await;
    assert_eq!(result.rows, vec![vec![serde_json::json!("North")]]);
    let repairs = repair_prompts(&recorder);
    assert_eq!(repairs.len(), 1);
    let read_owner = repairs[0]
        .find("column of shop, which your query calls T1")
        .unwrap_or_else(|| panic!("the read owner is named: {}", repairs[0]));
    let other_owner = repairs[0]
        .find("column of employee")
        .unwrap_or_else(|| panic!("the other owner is named too: {}", repairs[0]));
    assert!(read_owner < other_owner, "{}", repairs[0]);
}

#[tokio::test]
async fn an_unknown_columns_nearest_owner_is_named_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    // domain_publication comes first in the schema but is two joins from journal;
    // publication is one.
    let path = sqlite_file(
        &dir,
        "CREATE TABLE domain_publication (did INTEGER, pid INTEGER REFERENCES publication(pid));
         CREATE TABLE journal (jid INTEGER PRIMARY KEY, name TEXT);
         CREATE TABLE publication (pid INTEGER PRIMARY KEY, jid INTEGER REFERENCES journal(jid), title TEXT);
         INSERT INTO journal VALUES (1, 'Journal of Data'), (2, 'Proceedings');
         INSERT INTO publication VALUES (1, 1, 'a'), (2, 1, 'b'), (3, 2, 'c');
         INSERT INTO domain_publication VALUES (1, 1);",
    );
    let question = "How many publications were published in journals whose names start with J?";
    let wrong_table = "SELECT COUNT(pid) FROM journal WHERE name LIKE 'J%'";
    let right = "SELECT COUNT(p.pid) FROM publication AS p JOIN journal AS j ON p.jid = j.jid \
                 WHERE j.name LIKE 'J%'";
    let agent = agent(
        &path,
        &[
            line(question, "write_sql", sql_reply(wrong_table)),
            line(question, "repair_sql", sql_reply(right)),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, question).await;
    assert_eq!(result.rows, vec![vec![serde_json::json!(2)]]);
    let repairs = repair_prompts(&recorder);
    assert_eq!(repairs.len(), 1);
    let nearest = repairs[0]
        .find("pid is a column of publication, which your query does not read. Join it on")
        .unwrap_or_else(|| panic!("the nearest owner is named with its join: {}", repairs[0]));
    let farther = repairs[0]
        .find("pid is a column of domain_publication")
        .unwrap_or_else(|| panic!("the farther owner is named too: {}", repairs[0]));
    assert!(nearest < farther, "{}", repairs[0]);
}

#[tokio::test]
async fn a_repair_that_still_fails_a_check_is_answered_with_warnings_and_never_repaired_twice() {
    let fixture = demo();
    let still_by_year = "SELECT strftime('%Y', b.txn_dt) AS year, SUM(b.total_amt) AS total \
                         FROM bills AS b WHERE b.status <> 'VOID' GROUP BY year";
    // Two replies only: a second suspect repair would find the script exhausted.
    let agent = agent(
        &fixture.path,
        &[
            line(MONTHLY_2025, "write_sql", sql_reply(ARCHIVE_BY_YEAR)),
            line(MONTHLY_2025, "repair_sql", sql_reply(still_by_year)),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, MONTHLY_2025).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.attempts, 2);
    assert_eq!(result.history.len(), 1, "{:?}", result.history);
    assert!(result
        .sql
        .as_deref()
        .is_some_and(|sql| sql.contains("FROM bills")));
    let checks: Vec<plausibility::Check> = result
        .warnings
        .iter()
        .map(|warning| warning.check)
        .collect();
    assert_eq!(
        checks,
        vec![
            plausibility::Check::PeriodRows,
            plausibility::Check::Grouping
        ],
        "{:?}",
        result.warnings
    );
    assert!(
        result.warnings[0].message.contains("2026"),
        "{:?}",
        result.warnings[0]
    );
    let json = serde_json::to_value(&result).expect("serializes");
    assert_eq!(json["warnings"][1]["check"], "grouping");
    assert_eq!(
        next_steps(&recorder).last().map(String::as_str),
        Some("answer_with_warnings")
    );
    assert!(render_text(&result).contains("WARNING: this answer may be wrong"));
}

#[tokio::test]
async fn rows_held_past_a_failed_repair_keep_the_reply_that_wrote_them() {
    let fixture = demo();
    // The suspect rows are held; both repairs fail to run, so the held rows are the
    // answer, and the turn a conversation keeps must show the reply that wrote them.
    let broken = "SELECT strftime('%m', txn_dt) AS month, SUM(totl_amt) FROM bills GROUP BY month";
    let agent = agent(
        &fixture.path,
        &[
            line(MONTHLY_2025, "write_sql", sql_reply(ARCHIVE_BY_YEAR)),
            line(MONTHLY_2025, "repair_sql", sql_reply(broken)),
            line(
                MONTHLY_2025,
                "repair_sql",
                sql_reply(&broken.replace("totl", "tot")),
            ),
        ],
    )
    .await;
    let (result, _) = ask_recorded(&agent, MONTHLY_2025).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.trace);
    assert!(!result.warnings.is_empty());
    assert!(result
        .sql
        .as_deref()
        .is_some_and(|sql| sql.contains("bill_archive")));
    let reply = result.answered_reply.as_deref().unwrap_or_default();
    assert!(reply.contains("bill_archive.amt"), "{reply}");
    assert!(!reply.contains("totl_amt"), "{reply}");
}

#[tokio::test]
async fn baseline_shows_a_suspect_first_answer_with_warnings_and_no_repair() {
    let fixture = demo();
    let agent = agent(
        &fixture.path,
        &[line(MONTHLY_2025, "write_sql", sql_reply(ARCHIVE_BY_YEAR))],
    )
    .await;
    let options = AskOptions {
        mode: Mode::Baseline,
        ..AskOptions::default()
    };
    let result = agent.ask(MONTHLY_2025, &options).await.expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.attempts, 1);
    assert!(result.history.is_empty());
    assert!(result
        .warnings
        .iter()
        .any(|warning| warning.check == plausibility::Check::TablePeriod));
}

async fn agent_with(path: &Path, script: &[String], strategy: &str) -> Agent {
    let gate = crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(path.to_path_buf()),
        GateOptions::default(),
    )
    .await
    .expect("demo opens");
    let provider = ScriptedProvider::parse(&script.join("\n"), "scripted").expect("script parses");
    let client = ModelClient::new(
        Arc::new(provider),
        &PriceTable::built_in().expect("prices"),
        Arc::new(SpendLedger::in_memory(None)),
        None,
    )
    .expect("client");
    let strategy = strategy.parse().expect("strategy parses");
    Agent::with_strategy(gate, client, strategy)
        .await
        .expect("agent builds")
}

fn greedy_with_confidence(question: &str, sql: &str, min_logprob: f32) -> String {
    json!({
        "question": question,
        "purpose": "write_sql",
        "reply": sql_reply(sql),
        "confidence": {"mean_logprob": -0.1, "min_logprob": min_logprob, "tokens": 12},
    })
    .to_string()
}

#[tokio::test]
async fn a_hesitant_first_reply_is_settled_by_a_vote_in_which_it_votes_too() {
    let fixture = demo();
    let q = "How many bills were paid?";
    // Rows, not an empty look (which the empty-result diagnostic would take instead).
    let greedy = "SELECT count(*) FROM bills";
    let paid = "SELECT count(*) FROM bills WHERE status = 'PAID'";
    let sampled = json!({
        "question": q,
        "purpose": "write_sql",
        "reply": sql_reply(paid),
        "alternatives": [
            sql_reply("SELECT count(*) FROM bills WHERE status IN ('PAID')"),
            sql_reply("SELECT count(bill_id) FROM bills WHERE status = 'PAID'"),
        ],
    })
    .to_string();
    let script = [greedy_with_confidence(q, greedy, -3.0), sampled];
    let agent = agent_with(&fixture.path, &script, "n=3,conf=-1.5").await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.attempts, 2, "the greedy round and one sampled look");
    let vote = recorder
        .events()
        .into_iter()
        .find_map(|event| match event {
            events::AgentEvent::Vote {
                agreeing, voters, ..
            } => Some((agreeing, voters)),
            _ => None,
        })
        .expect("a vote");
    assert_eq!(
        vote,
        (3, 4),
        "three sampled agree against the kept greedy answer"
    );
    assert_eq!(
        result.sql.as_deref(),
        Some(format!("{paid} LIMIT 200").as_str())
    );
    assert!(result.history.is_empty(), "a doubt is not a failure");
}

#[tokio::test]
async fn a_confident_first_reply_is_answered_without_sampling() {
    let fixture = demo();
    let q = "How many bills were paid?";
    let paid = "SELECT count(*) FROM bills WHERE status = 'PAID'";
    let script = [greedy_with_confidence(q, paid, -0.4)];
    let agent = agent_with(&fixture.path, &script, "n=3,conf=-1.5").await;
    let (result, _) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(
        result.model_calls.len(),
        1,
        "no second look at a confident reply"
    );
    // The same hesitant reply without a floor: no second look either.
    let hesitant = [greedy_with_confidence(q, paid, -5.0)];
    let agent = agent_with(&fixture.path, &hesitant, "n=3").await;
    let (result, _) = ask_recorded(&agent, q).await;
    assert_eq!(
        result.model_calls.len(),
        1,
        "confidence is judged only with conf set"
    );
}

#[tokio::test]
async fn one_repair_carries_the_facts_of_every_wrong_column_of_the_query() {
    let fixture = demo();
    let q = "Quantity sold per bill number and product";
    let two_wrong = "SELECT T1.bill_no, T1.prod_id, SUM(T1.qty) FROM bill_items AS T2 \
                     JOIN bills AS T1 ON T1.bill_id = T2.bill_id GROUP BY T1.bill_no, T1.prod_id";
    let right = "SELECT T1.bill_no, T2.prod_id, SUM(T2.qty) FROM bill_items AS T2 \
                 JOIN bills AS T1 ON T1.bill_id = T2.bill_id GROUP BY T1.bill_no, T2.prod_id";
    let agent = agent(
        &fixture.path,
        &[
            line(q, "write_sql", sql_reply(two_wrong)),
            line(q, "repair_sql", sql_reply(right)),
        ],
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.history);
    assert_eq!(result.attempts, 2, "both columns mended by one repair");
    let refused = &result.history[0];
    assert_eq!(
        refused.error_type,
        FailureKind::Database(ErrorType::UnknownColumn),
        "worded as the database words it"
    );
    assert!(
        !refused.was_executed(),
        "the guard refused it, so it never ran: {refused:?}"
    );
    let repair = &repair_prompts(&recorder)[0];
    for fact in [
        "prod_id is a column of bill_items, which your query calls T2: write T2.prod_id",
        "qty is a column of bill_items, which your query calls T2: write T2.qty",
    ] {
        assert!(repair.contains(fact), "{repair}");
    }
}

#[tokio::test]
async fn a_greedy_repair_strategy_asks_one_reply_per_repair() {
    let fixture = demo();
    let q = "How many bills were paid?";
    let script = [
        line(
            q,
            "write_sql",
            sql_reply("SELECT count(*) FROM bills WHERE stat = 'PAID'"),
        ),
        line(
            q,
            "repair_sql",
            sql_reply("SELECT count(*) FROM bills WHERE status = 'PAID'"),
        ),
    ];
    let agent = agent_with(&fixture.path, &script, "n=3,repair=greedy").await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer);
    assert!(
        result.history[0].was_executed(),
        "an unqualified wrong column is found by the database: {:?}",
        result.history
    );
    let asked: Vec<u32> = recorder
        .events()
        .into_iter()
        .filter_map(|event| match event {
            events::AgentEvent::ModelCall { candidates, .. } => Some(candidates),
            _ => None,
        })
        .collect();
    assert_eq!(
        asked,
        vec![1, 1],
        "a greedy first reply and a greedy repair"
    );
    // `repair=sampled` samples them.
    let script = [
        line(
            q,
            "write_sql",
            sql_reply("SELECT count(*) FROM bills WHERE stat = 'PAID'"),
        ),
        line(
            q,
            "repair_sql",
            sql_reply("SELECT count(*) FROM bills WHERE status = 'PAID'"),
        ),
    ];
    let agent = agent_with(&fixture.path, &script, "n=3,repair=sampled").await;
    let (_, recorder) = ask_recorded(&agent, q).await;
    let repaired_with = recorder.events().into_iter().find_map(|event| match event {
        events::AgentEvent::ModelCall {
            purpose: Purpose::RepairSql,
            candidates,
            ..
        } => Some(candidates),
        _ => None,
    });
    assert_eq!(repaired_with, Some(3));
}

#[tokio::test]
async fn a_first_failure_is_repaired_past_the_time_budget_but_no_third_round_starts() {
    let fixture = demo();
    let q = "How many bills were paid?";
    let slow = |purpose: &str, sql: &str| {
        let mut line = json!({"question": q, "purpose": purpose, "reply": sql_reply(sql)});
        line["delay_ms"] = json!(700);
        line.to_string()
    };
    // The first reply takes 700 ms and names a column no table has: a repair as long
    // would end past a one-second budget, but the first failure's repair is the promise.
    let script = [
        slow(
            "write_sql",
            "SELECT count(*) FROM bills WHERE stat = 'PAID'",
        ),
        line(
            q,
            "repair_sql",
            sql_reply("SELECT count(*) FROM bills WHERE status = 'PAID'"),
        ),
    ];
    let agent = agent_with(&fixture.path, &script, "n=1,budget=1").await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.trace);
    assert_eq!(repair_prompts(&recorder).len(), 1);
    // A repair that fails too, slowly, is where the budget ends it: no third round.
    let script = [
        slow(
            "write_sql",
            "SELECT count(*) FROM bills WHERE stat = 'PAID'",
        ),
        slow(
            "repair_sql",
            "SELECT count(*) FROM bills WHERE state = 'PAID'",
        ),
    ];
    let agent = agent_with(&fixture.path, &script, "n=1,budget=1").await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::GiveUp, "{:?}", result.trace);
    assert_eq!(result.attempts, 2);
    assert_eq!(result.history.len(), 2, "both failed queries are shown");
    assert!(
        result
            .reason
            .as_deref()
            .is_some_and(|why| why.contains("time budget")),
        "{:?}",
        result.reason
    );
    assert_eq!(repair_prompts(&recorder).len(), 1, "one repair, not two");
}

#[tokio::test]
async fn a_compact_prompt_carries_a_few_tables_and_only_the_notes_they_need() {
    let fixture = demo();
    let q = "How many bills were voided in 2025?";
    let reply = || {
        line(
            q,
            "write_sql",
            sql_reply(
                "SELECT count(*) FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2025'",
            ),
        )
    };
    let agent = agent(&fixture.path, &[reply(), reply()]).await;
    let system_prompt = |recorder: &events::Recorder| {
        recorder
            .events()
            .into_iter()
            .find_map(|event| match event {
                events::AgentEvent::ModelCall { prompt, .. } => prompt.first().cloned(),
                _ => None,
            })
            .expect("a model call")
    };
    let whole = events::Recorder::default();
    let answered = agent
        .ask_observed(q, &AskOptions::default(), &whole)
        .await
        .expect("answers");
    let compact = events::Recorder::default();
    let options = AskOptions {
        compact_prompt: true,
        ..AskOptions::default()
    };
    let compact_answer = agent
        .ask_observed(q, &options, &compact)
        .await
        .expect("answers");
    assert_eq!(compact_answer.rows, answered.rows);
    let (whole, compact) = (system_prompt(&whole), system_prompt(&compact));
    let tables = |prompt: &str| prompt.matches("CREATE TABLE").count();
    assert_eq!(tables(&whole), 15);
    assert!(
        (1..=6).contains(&tables(&compact)) && compact.contains("CREATE TABLE bills"),
        "{compact}"
    );
    // The conventions of tables left out, and glossary words the question does not use,
    // are left out too; the bills' own convention stays.
    for absent in ["stock_adjustments.qty_change", "low stock:"] {
        assert!(whole.contains(absent), "{absent}");
        assert!(!compact.contains(absent), "{absent}");
    }
    assert!(compact.contains("VOID bills never do"));
    assert!(
        compact.len() * 2 < whole.len(),
        "{} of {}",
        compact.len(),
        whole.len()
    );
}

mod conversation;

#[tokio::test]
async fn a_first_round_in_the_field_form_is_repaired_in_the_loops_own_form() {
    let fixture = demo();
    let q = "Bills and purchase orders with their status";
    let ambiguous =
        "SELECT bill_no, status FROM bills JOIN purchase_orders ON purchase_orders.po_id < 3";
    let agent = agent_with(
        &fixture.path,
        &[
            line(q, "write_sql", json!({"sql": ambiguous})),
            line(q, "repair_sql", sql_reply("SELECT b.bill_no, b.status, p.status AS po_status FROM bills b JOIN purchase_orders p ON p.po_id < 3")),
        ],
        "first=field",
    )
    .await;
    let (result, recorder) = ask_recorded(&agent, q).await;
    assert_eq!(result.decision, Decision::Answer);
    let prompts: Vec<(Purpose, Vec<String>)> = recorder
        .events()
        .iter()
        .filter_map(|event| match event {
            events::AgentEvent::ModelCall {
                purpose, prompt, ..
            } => Some((*purpose, prompt.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    let (first, repair) = (&prompts[0].1, &prompts[1].1);
    // The first round asks as the plain prompt does; the repair in the loop's own form,
    // with the failed reply shown as that form writes it.
    assert!(first[0].starts_with("You write one sqlite SQL query that answers"));
    assert!(repair[0].starts_with("You write one read-only sqlite SELECT"));
    assert_eq!(first[1], repair[1], "the question is asked the same way");
    assert_eq!(repair[2], format!("```sql\n{ambiguous}\n```"));
    // The first attempt counts as the first attempt, in whatever form it was asked.
    assert_eq!(
        result.history[0].error_type,
        FailureKind::Database(ErrorType::AmbiguousColumn)
    );
}
