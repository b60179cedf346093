//! Scripted-model tests: each drives one branch of the state machine on the real demo
//! database and asserts the path taken (nodes, attempts, history, model calls). The
//! script supplies only the replies a branch should ask for, so an extra model call
//! fails the test with "script exhausted".

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::gate::GateOptions;
use crate::llm::scripted::ScriptedProvider;
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
    Agent::new(gate, client).await.expect("agent builds")
}

fn nodes(result: &AgentResult) -> Vec<&str> {
    result.trace.iter().map(|step| step.node.as_str()).collect()
}

fn count(result: &AgentResult, node: &str) -> usize {
    nodes(result).iter().filter(|n| **n == node).count()
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
    assert_eq!(result.history[0].error_type, "empty_result");
    assert!(result.row_count > 0);
    let probe = result
        .trace
        .iter()
        .find(|step| step.note.contains("case-insensitive probe matches"))
        .expect("the probe ran");
    assert!(probe.note.contains("'PAID'"), "{}", probe.note);
    assert_eq!(result.model_calls.len(), 2);
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
            line(q, "write_sql", sql_reply("SELECT bill_no, status FROM bills JOIN purchase_orders ON bills.emp_id = purchase_orders.supp_id")),
            line(q, "repair_sql", sql_reply("SELECT b.bill_no, b.status FROM bills b JOIN purchase_orders p ON b.emp_id = p.supp_id")),
        ],
    )
    .await;
    let result = agent.ask(q, &AskOptions::default()).await.expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(result.history[0].error_type, "ambiguous_column");
    let strategy = result
        .trace
        .iter()
        .find(|step| step.node == "prepare_repair")
        .expect("a repair was prepared");
    assert!(
        strategy.note.contains("qualify EVERY column"),
        "{}",
        strategy.note
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
    assert_eq!(result.history[0].error_type, "unknown_column");
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
    let result = agent.ask(q, &AskOptions::default()).await.expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    let types: Vec<&str> = result
        .history
        .iter()
        .map(|a| a.error_type.as_str())
        .collect();
    assert_eq!(types, vec!["grouping_error", "windowing_error"]);
    let strategies: Vec<&str> = result
        .trace
        .iter()
        .filter(|step| step.node == "prepare_repair")
        .map(|step| step.note.as_str())
        .collect();
    assert_eq!(strategies.len(), 2);
    assert_ne!(strategies[0], strategies[1]);
    assert!(strategies[0].contains("GROUP BY"));
    assert!(strategies[1].contains("subquery"));
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
        ],
    )
    .await;
    let result = agent
        .ask(q, &AskOptions::default())
        .await
        .expect("declines");
    assert_eq!(result.decision, Decision::Decline, "{:?}", result.reason);
    assert_eq!(result.model_calls.len(), 2);
    assert_eq!(result.history.len(), 2);
    let reason = result.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("email") && reason.contains("does not hold"),
        "{reason}"
    );
    assert_eq!(result.history[0].error_type, "unknown_column");
    assert_eq!(result.history[1].error_type, "unknown_column");
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
                    "SELECT c.cust_name FROM bills b JOIN customers c ON c.cust_id = b.cust_id",
                ),
            ),
        ],
    )
    .await;
    let result = agent.ask(q, &AskOptions::default()).await.expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(
        result.attempts, 2,
        "the identical reply did not spend an attempt"
    );
    assert_eq!(result.model_calls.len(), 3);
    assert_eq!(count(&result, "execute"), 2, "{:?}", nodes(&result));
    assert!(result
        .trace
        .iter()
        .any(|step| step.note.contains("identical")));
}

#[tokio::test]
async fn permission_denied_is_never_repaired() {
    let fixture = demo();
    let agent = agent(&fixture.path, &[]).await;
    let mut state = State {
        question: "q".to_string(),
        mode: Mode::Agent,
        started: Instant::now(),
        selection: None,
        widen: 0,
        forced_tables: BTreeSet::new(),
        assumptions: Vec::new(),
        attempts: 1,
        history: Vec::new(),
        failed_sql: Vec::new(),
        feedback: None,
        identical_nudges: 0,
        absent_columns: Vec::new(),
        diagnostic_used: false,
        first_attempt_ok: None,
        first_sql: None,
        trace: Vec::new(),
        result: None,
    };
    for error_type in [ErrorType::PermissionDenied, ErrorType::ReadOnlyViolation] {
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
        let node = agent.inspect(&mut state, QueryOutcome::Failed(error)).await;
        assert!(
            matches!(node, Node::GiveUp(_)),
            "{error_type} must not be repaired"
        );
    }
}

#[tokio::test]
async fn a_write_request_is_declined_and_nothing_runs() {
    let fixture = demo();
    let before = file_hash(&fixture.path);
    let declined = "Delete the cancelled purchase orders";
    let sneaky = "Mark every unpaid bill as paid";
    let agent = agent(
        &fixture.path,
        &[
            line(
                declined,
                "write_sql",
                json!({"action": "decline", "reason": "askdb only reads data"}),
            ),
            line(
                sneaky,
                "write_sql",
                sql_reply("UPDATE bills SET status = 'PAID' WHERE status = 'UNPAID'"),
            ),
        ],
    )
    .await;
    let result = agent
        .ask(declined, &AskOptions::default())
        .await
        .expect("declines");
    assert_eq!(result.decision, Decision::Decline);
    assert_eq!((result.attempts, result.model_calls.len()), (0, 1));
    assert_eq!(count(&result, "execute"), 0);
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
    let system = agent.system_prompt_for(&selection);
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
    let reasons: Vec<&str> = result.history.iter().map(|a| a.message.as_str()).collect();
    assert_eq!(reasons.len(), 2);
    assert!(
        reasons.iter().all(|r| r.contains("restricted_column")),
        "{reasons:?}"
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
    assert_eq!(result.chart.kind, "bar");
    assert_eq!(result.unverified_numbers, vec!["9999".to_string()]);
    assert_eq!(result.model_calls.len(), 2);
}

#[test]
fn replies_are_read_tolerantly() {
    assert_eq!(
        parse_reply("```json\n{\"action\": \"sql\", \"sql\": \"SELECT 1\"}\n```"),
        Reply::Sql {
            sql: "SELECT 1".into(),
            assumptions: vec![]
        }
    );
    assert_eq!(
        parse_reply("```sql\nSELECT 2\n```"),
        Reply::Sql {
            sql: "SELECT 2".into(),
            assumptions: vec![]
        }
    );
    assert!(matches!(parse_reply("I cannot help"), Reply::Malformed(_)));
    assert!(matches!(
        parse_reply(
            "{\"action\": \"clarify\", \"question\": \"Which?\", \"options\": [\"a\", \"b\"]}"
        ),
        Reply::Clarify(_)
    ));
    assert_eq!(
        parse_reply("{\"action\": \"decline\", \"reason\": \"writes\"}"),
        Reply::Decline("writes".into())
    );
}

#[test]
fn unknown_column_names_are_read_from_both_dialects() {
    assert_eq!(
        unknown_column_name("no such column: b.cust_nme").as_deref(),
        Some("cust_nme")
    );
    assert_eq!(
        unknown_column_name("column \"cust_nme\" does not exist").as_deref(),
        Some("cust_nme")
    );
    assert_eq!(
        unknown_column_name("column b.cust_nme does not exist").as_deref(),
        Some("cust_nme")
    );
    assert_eq!(unknown_column_name("something else"), None);
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
    let result = agent.ask(q, &AskOptions::default()).await.expect("answers");
    assert_eq!(result.decision, Decision::Answer);
    assert_eq!(
        result.history[0].message,
        "the reply was cut off at the token limit"
    );
    let strategy = result
        .trace
        .iter()
        .find(|step| step.node == "prepare_repair")
        .expect("a repair");
    assert!(strategy.note.contains("shorter"), "{}", strategy.note);
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
