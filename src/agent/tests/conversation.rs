//! Follow-up questions on the demo database with scripted replies: each test asks a
//! conversation turn by turn, carrying each result's turn into the next question's
//! context as a store would, and asserts what the model was shown and how the rules
//! and the gate treated the follow-up.

use super::*;
use crate::agent::conversation::{Context, Turn, TurnOutcome, TURNS_IN_FULL, TURNS_IN_PROMPT};

/// A follow-up's scripted reply: its restatement, then the query, in the SQL block.
fn restated(understood: &str, sql: &str) -> serde_json::Value {
    json!(format!(
        "```sql\n-- Understood as: {understood}\n{sql}\n```"
    ))
}

/// Asks `question` after `turns`, recording the steps; the turn it makes is appended.
async fn ask_turn(
    agent: &Agent,
    turns: &mut Vec<Turn>,
    question: &str,
) -> (AgentResult, events::Recorder) {
    let recorder = events::Recorder::default();
    let context = Context::new(turns.clone());
    let result = agent
        .ask_in_conversation(question, &context, &AskOptions::default(), &recorder)
        .await
        .expect("the agent ends in a decision");
    let number = u32::try_from(turns.len() + 1).expect("few turns");
    turns.push(Turn::from_result(number, &result));
    (result, recorder)
}

/// The messages of the question's first SQL call.
fn first_prompt(recorder: &events::Recorder) -> Vec<String> {
    recorder
        .events()
        .iter()
        .find_map(|event| match event {
            events::AgentEvent::ModelCall {
                purpose, prompt, ..
            } if *purpose == Purpose::WriteSql => Some(prompt.clone()),
            _ => None,
        })
        .expect("the model was asked")
}

/// Everything after the system prompt of the question's first SQL call, in order.
fn conversation_text(recorder: &events::Recorder) -> String {
    first_prompt(recorder)[1..].join("\n\n")
}

const VOIDED: &str = "How many bills were voided in 2025?";
const VOIDED_SQL: &str =
    "SELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2025'";

#[tokio::test]
async fn a_follow_up_that_narrows_sees_the_earlier_sql_and_shape_but_no_rows() {
    let fixture = demo();
    let first = "List the voided bills of 2025";
    let first_sql = "SELECT bill_no, total_amt FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2025'";
    let narrow = "Only the ones above 5000";
    let narrow_sql = "SELECT bill_no, total_amt FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2025' AND total_amt > 5000";
    let agent = agent(
        &fixture.path,
        &[
            line(first, "write_sql", sql_reply(first_sql)),
            line(
                narrow,
                "write_sql",
                restated(
                    "the voided bills of 2025 with a total above 5000",
                    narrow_sql,
                ),
            ),
        ],
    )
    .await;
    let mut turns = Vec::new();
    let (earlier, first_steps) = ask_turn(&agent, &mut turns, first).await;
    assert_eq!(earlier.decision, Decision::Answer);
    assert!(earlier.row_count > 1, "{}", earlier.row_count);
    assert_eq!(
        earlier.understood_as, None,
        "a first question is not restated"
    );
    let (result, recorder) = ask_turn(&agent, &mut turns, narrow).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    assert_eq!(result.question, narrow);
    assert_eq!(
        result.understood_as.as_deref(),
        Some("the voided bills of 2025 with a total above 5000")
    );
    assert!(result
        .sql
        .as_deref()
        .is_some_and(|sql| sql.contains("total_amt > 5000")));
    assert!(result.row_count < earlier.row_count);
    let prompt = first_prompt(&recorder);
    // The first question's prompt is this one's prefix, byte for byte, and its reply
    // follows as the model wrote it: a server that kept both reads only what is new.
    let before = first_prompt(&first_steps);
    assert_eq!(prompt[..2], before[..]);
    assert_eq!(prompt.len(), 4, "{prompt:?}");
    assert!(prompt[2].contains(first_sql), "{prompt:?}");
    assert_eq!(turns[0].reply.as_deref(), Some(prompt[2].as_str()));
    let asked = &prompt[3];
    assert!(
        asked.contains(&format!(
            "That query returned {} rows; columns: bill_no, total_amt",
            earlier.row_count
        )),
        "{asked}"
    );
    assert!(
        asked.contains(&format!("Follow-up question: {narrow}")),
        "{asked}"
    );
    // By default what to write is said once in the system prompt, shared with first
    // questions, so the follow-up's message is its result shape and question alone.
    assert!(prompt[0].contains("-- Understood as:"), "{}", prompt[0]);
    assert!(!asked.contains("Understood as"), "{asked}");
    assert_eq!(turns[1].asked.as_deref(), Some(asked.as_str()));
    let shown_bill = earlier.rows[0][0].as_str().expect("a bill number");
    assert!(
        prompt.iter().all(|message| !message.contains(shown_bill)),
        "rows never reach the prompt: {asked}"
    );
    // What ran is the query alone: the restatement never reaches the guard.
    assert!(!result
        .sql
        .as_deref()
        .unwrap_or_default()
        .contains("Understood"));
}

/// A follow-up that changes the measure of [`VOIDED`], and its query.
const MEASURE: &str = "And what was their total amount?";
const MEASURE_SQL: &str = "SELECT SUM(total_amt) AS total FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2025'";

/// [`VOIDED`] answered, then [`MEASURE`] answered with its restatement.
fn measure_script() -> Vec<String> {
    vec![
        line(VOIDED, "write_sql", sql_reply(VOIDED_SQL)),
        line(
            MEASURE,
            "write_sql",
            restated("the total amount of the bills voided in 2025", MEASURE_SQL),
        ),
    ]
}

#[tokio::test]
async fn a_follow_up_that_changes_the_measure_keeps_the_earlier_period() {
    let fixture = demo();
    let measure = MEASURE;
    let agent = agent(&fixture.path, &measure_script()).await;
    let mut turns = Vec::new();
    ask_turn(&agent, &mut turns, VOIDED).await;
    let (result, _) = ask_turn(&agent, &mut turns, measure).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    assert_eq!(result.columns, vec!["total".to_string()]);
    assert!(
        result
            .assumptions
            .iter()
            .any(|assumption| assumption.contains("names its period (2025)")),
        "the earlier question's period stands: {:?}",
        result.assumptions
    );
    assert_eq!(turns[1].outcome, TurnOutcome::Answered);
    assert_eq!(
        turns[1].understood_as.as_deref(),
        Some("the total amount of the bills voided in 2025")
    );
}

#[tokio::test]
async fn a_follow_up_can_refer_back_two_turns() {
    let fixture = demo();
    let customers = "How many customers are there?";
    let back = "Back to the voided bills: how many were there in 2026?";
    let agent = agent(
        &fixture.path,
        &[
            line(VOIDED, "write_sql", sql_reply(VOIDED_SQL)),
            line(
                customers,
                "write_sql",
                restated("the number of customers", "SELECT COUNT(*) AS n FROM customers"),
            ),
            line(
                back,
                "write_sql",
                restated(
                    "the number of bills voided in 2026",
                    "SELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2026'",
                ),
            ),
        ],
    )
    .await;
    let mut turns = Vec::new();
    ask_turn(&agent, &mut turns, VOIDED).await;
    let (_, second_steps) = ask_turn(&agent, &mut turns, customers).await;
    let (result, recorder) = ask_turn(&agent, &mut turns, back).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    assert_eq!(
        result.understood_as.as_deref(),
        Some("the number of bills voided in 2026")
    );
    let prompt = first_prompt(&recorder);
    let asked = conversation_text(&recorder);
    let first_at = asked.find(VOIDED_SQL).expect("turn 1's SQL is shown");
    let second_at = asked.find("FROM customers").expect("turn 2's SQL is shown");
    assert!(first_at < second_at, "oldest first: {asked}");
    // The system prompt, each earlier turn as its message and reply, the follow-up.
    assert_eq!(prompt.len(), 6, "{prompt:?}");
    assert!(prompt[1].contains(VOIDED) && prompt[3].contains(customers));
    // The turn before's prompt is this one's prefix, then the reply it got as written.
    let before = first_prompt(&second_steps);
    assert_eq!(prompt[..before.len()], before[..]);
    assert_eq!(turns[1].reply.as_deref(), Some(prompt[4].as_str()));
}

#[tokio::test]
async fn after_a_declined_write_a_new_question_is_answered_and_more_of_the_write_is_not() {
    let fixture = demo();
    let delete = "Delete those bills";
    let read = "How many were there in 2026?";
    let more = "and the 2026 ones too";
    let agent = agent(
        &fixture.path,
        &[
            line(VOIDED, "write_sql", sql_reply(VOIDED_SQL)),
            line(
                read,
                "write_sql",
                restated(
                    "the number of bills voided in 2026",
                    "SELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2026'",
                ),
            ),
        ],
    )
    .await;
    let mut turns = Vec::new();
    ask_turn(&agent, &mut turns, VOIDED).await;
    let (declined, _) = ask_turn(&agent, &mut turns, delete).await;
    assert_eq!(declined.decision, Decision::Decline);
    assert!(
        declined.model_calls.is_empty(),
        "declined before any model call"
    );
    assert_eq!(turns[1].outcome, TurnOutcome::Declined);
    assert_eq!(turns[1].sql, None);
    let (result, recorder) = ask_turn(&agent, &mut turns, read).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    let prompt = first_prompt(&recorder);
    assert!(prompt[3].contains("Delete those bills"), "{prompt:?}");
    assert_eq!(prompt[4], "Declined; nothing ran.");
    assert!(
        !prompt[5].contains("That query returned"),
        "a declined turn returned nothing: {prompt:?}"
    );
    // Continuing the declined write without a question of its own is the write again.
    let mut after_decline = turns[..2].to_vec();
    let (again, _) = ask_turn(&agent, &mut after_decline, more).await;
    assert_eq!(again.decision, Decision::Decline);
    assert!(
        again
            .reason
            .as_deref()
            .is_some_and(|reason| reason.contains("continues an earlier request to change data")),
        "{:?}",
        again.reason
    );
    assert!(again.model_calls.is_empty());
}

#[tokio::test]
async fn after_a_give_up_the_follow_up_reads_the_question_not_the_failed_sql() {
    let fixture = demo();
    let hard = "What was the voided amount of 2025 for each employee?";
    // Misspellings of a real column: repairable, and not data the database lacks.
    let bad = "SELECT emp_id, SUM(totl_amt) FROM bills GROUP BY emp_id";
    let follow = "And in 2026?";
    let mut script: Vec<String> = vec![line(hard, "write_sql", sql_reply(bad))];
    for spelling in ["total_amnt", "totalamt"] {
        script.push(line(
            hard,
            "repair_sql",
            sql_reply(&format!(
                "SELECT emp_id, SUM({spelling}) FROM bills GROUP BY emp_id"
            )),
        ));
    }
    script.push(line(
        follow,
        "write_sql",
        restated(
            "the voided amount of 2026 for each employee",
            "SELECT emp_id, SUM(total_amt) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2026' GROUP BY emp_id",
        ),
    ));
    let agent = agent(&fixture.path, &script).await;
    let mut turns = Vec::new();
    let (gave_up, attempts) = ask_turn(&agent, &mut turns, hard).await;
    assert_eq!(gave_up.decision, Decision::GiveUp, "{:?}", gave_up.trace);
    // A repair shows the failed reply as the model wrote it, fenced as written, so a
    // server that kept the reply reads it from its cache.
    let calls: Vec<(Purpose, Vec<String>, Vec<String>)> = attempts
        .events()
        .iter()
        .filter_map(|event| match event {
            events::AgentEvent::ModelCall {
                purpose,
                prompt,
                replies,
                ..
            } => Some((*purpose, prompt.clone(), replies.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(calls[0].0, Purpose::WriteSql);
    assert_eq!(calls[1].0, Purpose::RepairSql);
    assert!(calls[0].2[0].contains(bad));
    assert_eq!(
        calls[1].1[2],
        crate::agent::prompts::closed_reply(&calls[0].2[0])
    );
    assert_eq!(turns[0].outcome, TurnOutcome::GaveUp);
    let (result, recorder) = ask_turn(&agent, &mut turns, follow).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    let asked = conversation_text(&recorder);
    assert!(asked.contains(hard), "{asked}");
    assert!(asked.contains("Not answered"), "{asked}");
    assert!(
        !asked.contains("totl_amt"),
        "failed SQL is not carried: {asked}"
    );
}

#[tokio::test]
async fn a_write_request_as_a_follow_up_is_declined_before_any_model_call() {
    let fixture = demo();
    let agent = agent(
        &fixture.path,
        &[line(VOIDED, "write_sql", sql_reply(VOIDED_SQL))],
    )
    .await;
    let mut turns = Vec::new();
    ask_turn(&agent, &mut turns, VOIDED).await;
    for write in ["Delete those", "Set them all to PAID"] {
        let (result, _) = ask_turn(&agent, &mut turns, write).await;
        assert_eq!(result.decision, Decision::Decline, "{write}");
        assert!(result.model_calls.is_empty(), "{write}: no model call");
        assert_eq!(result.sql, None);
    }
}

#[tokio::test]
async fn a_follow_ups_hostile_sql_is_refused_by_the_gate_like_any_other() {
    let fixture = demo();
    let follow = "And the ones in 2026?";
    let hostile = [
        "DELETE FROM bills WHERE status = 'VOID'",
        "SELECT phone FROM customers",
        "SELECT name FROM sqlite_master",
    ];
    let mut script = vec![line(VOIDED, "write_sql", sql_reply(VOIDED_SQL))];
    script.push(line(follow, "write_sql", restated("x", hostile[0])));
    script.push(line(follow, "repair_sql", restated("x", hostile[1])));
    script.push(line(follow, "repair_sql", restated("x", hostile[2])));
    let agent = agent_with(&fixture.path, &script, "n=1").await;
    let mut turns = Vec::new();
    ask_turn(&agent, &mut turns, VOIDED).await;
    let (result, _) = ask_turn(&agent, &mut turns, follow).await;
    assert_ne!(result.decision, Decision::Answer);
    assert_eq!(result.sql, None);
    assert!(
        result.history.iter().all(|attempt| !attempt.was_executed()),
        "nothing hostile ran: {:?}",
        result.history
    );
}

#[tokio::test]
async fn a_reply_to_a_clarification_asks_the_earlier_question_clarified() {
    let fixture = demo();
    let vague = "Who are our best customers?";
    let clarified = format!("{vague} (most bills or orders)");
    let agent = agent(
        &fixture.path,
        &[line(
            &clarified,
            "write_sql",
            sql_reply("SELECT cust_id, COUNT(*) AS bills FROM bills GROUP BY cust_id ORDER BY bills DESC LIMIT 5"),
        )],
    )
    .await;
    let mut turns = Vec::new();
    let (asked_back, _) = ask_turn(&agent, &mut turns, vague).await;
    assert_eq!(asked_back.decision, Decision::Clarify);
    let (result, _) = ask_turn(&agent, &mut turns, "most bills or orders").await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    assert_eq!(result.question, "most bills or orders");
    assert_eq!(result.understood_as.as_deref(), Some(clarified.as_str()));
}

#[tokio::test]
async fn a_long_conversation_carries_only_the_capped_turns() {
    let fixture = demo();
    let follow = "And how many customers?";
    let agent = agent(
        &fixture.path,
        &[line(
            follow,
            "write_sql",
            restated(
                "the number of customers",
                "SELECT COUNT(*) AS n FROM customers",
            ),
        )],
    )
    .await;
    let mut turns: Vec<Turn> = (1..=8)
        .map(|number| {
            let mut result =
                AgentResult::for_tests(&format!("Question number {number}?"), Decision::Answer);
            result.sql = Some(format!("SELECT {number} AS turn_{number}"));
            result.understood_as = Some(format!("standalone question {number}"));
            Turn::from_result(number, &result)
        })
        .collect();
    let (result, recorder) = ask_turn(&agent, &mut turns, follow).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    let prompt = first_prompt(&recorder);
    let asked = conversation_text(&recorder);
    let dropped = 8 - TURNS_IN_PROMPT;
    let summarised = TURNS_IN_PROMPT - TURNS_IN_FULL;
    // The system prompt, a message and a reply per turn in full, the follow-up; the
    // summarised turns open the first message.
    assert_eq!(prompt.len(), 1 + 2 * TURNS_IN_FULL + 1, "{prompt:?}");
    assert!(
        prompt[1].starts_with("Earlier in this conversation"),
        "{prompt:?}"
    );
    for number in 1..=8usize {
        let asked_in_full = asked.contains(&format!("Question number {number}?"));
        let summary = asked.contains(&format!("- standalone question {number}\n"));
        let with_sql = asked.contains(&format!("AS turn_{number}"));
        if number <= dropped {
            assert!(
                !asked_in_full && !summary && !with_sql,
                "turn {number} is dropped: {asked}"
            );
        } else if number <= dropped + summarised {
            assert!(
                summary && !asked_in_full && !with_sql,
                "turn {number} is summarised: {asked}"
            );
        } else {
            assert!(
                asked_in_full && with_sql,
                "turn {number} is in full: {asked}"
            );
        }
    }
}

#[tokio::test]
async fn the_hostile_corpus_written_for_a_follow_up_never_runs_or_answers() {
    let fixture = demo();
    let corpus = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("evals")
            .join("hostile_sql.jsonl"),
    )
    .expect("the hostile corpus");
    let entries: Vec<(String, String)> = corpus
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("a corpus line"))
        .filter(|entry| matches!(entry["dialect"].as_str(), Some("any" | "sqlite")))
        .map(|entry| {
            (
                entry["id"].as_str().unwrap_or_default().to_string(),
                entry["sql"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(entries.len() >= 100, "{} lines", entries.len());
    let question = |id: &str| format!("And the ones in 2026? ({id})");
    let decline = json!("```sql\n-- DECLINE: nothing else to try\n```");
    let mut script = Vec::new();
    for (id, sql) in &entries {
        script.push(line(&question(id), "write_sql", sql_reply(sql)));
        for _ in 0..2 {
            script.push(line(&question(id), "repair_sql", decline.clone()));
        }
    }
    let agent = agent_with(&fixture.path, &script, "n=1").await;
    let mut earlier = AgentResult::for_tests(VOIDED, Decision::Answer);
    earlier.sql = Some(VOIDED_SQL.to_string());
    earlier.columns = vec!["voided".to_string()];
    earlier.row_count = 1;
    let context = Context::new(vec![Turn::from_result(1, &earlier)]);
    let mut wrong = Vec::new();
    let mut refused = 0;
    for (id, sql) in &entries {
        let result = agent
            .ask_in_conversation(
                &question(id),
                &context,
                &AskOptions::default(),
                &events::NoObserver,
            )
            .await
            .expect("a decision");
        let ran = result.history.iter().any(|attempt| attempt.was_executed());
        // Refused by the guard: a refusal of its own, or one worded as the database's
        // error (a parse failure, an unknown name), which carries the guard's reason.
        refused += usize::from(result.history.iter().any(|attempt| {
            attempt.reason.is_some()
                || attempt.error_type == FailureKind::Database(crate::gate::ErrorType::Rejected)
        }));
        if result.decision == Decision::Answer || ran || result.model_calls.is_empty() {
            wrong.push(format!("{id} {:?} (ran: {ran}): {sql}", result.decision));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Every line but the two with no statement at all reached the gate and was refused.
    assert!(
        refused + 2 >= entries.len(),
        "{refused} of {} refused by the gate",
        entries.len()
    );
}

#[tokio::test]
async fn a_follow_up_links_the_tables_of_the_questions_it_continues() {
    let fixture = demo();
    // Alone, these words link bills, payments, products and suppliers, not the orders.
    let narrow = "Only the ones above 5000";
    let agent = agent_with(
        &fixture.path,
        &[line(
            narrow,
            "write_sql",
            restated(
                "the purchase orders with an id above 5",
                "SELECT po_id, order_dt FROM purchase_orders WHERE po_id > 5",
            ),
        )],
        "schema=linked",
    )
    .await;
    let mut earlier = AgentResult::for_tests("List the purchase orders", Decision::Answer);
    earlier.sql = Some("SELECT po_id, order_dt FROM purchase_orders".to_string());
    let context = Context::new(vec![Turn::from_result(1, &earlier)]);
    let result = agent
        .ask_in_conversation(
            narrow,
            &context,
            &AskOptions::default(),
            &events::NoObserver,
        )
        .await
        .expect("a decision");
    assert_eq!(result.schema_mode, events::SchemaMode::Linked);
    assert!(
        result
            .schema_tables
            .iter()
            .any(|table| table == "purchase_orders"),
        "{:?}",
        result.schema_tables
    );
}

#[tokio::test]
async fn a_follow_up_under_follow_prefill_is_told_once_in_the_system_prompt() {
    let fixture = demo();
    let measure = MEASURE;
    let agent = agent_with(
        &fixture.path,
        &[
            line(VOIDED, "write_sql", sql_reply(VOIDED_SQL)),
            // What a server that continues the begun reply sends: the rest of the
            // marker's line and the query, the block's start put before it.
            json!({"question": MEASURE, "purpose": "write_sql", "continues": true,
                   "reply": format!(" the total amount of the bills voided in 2025\n{MEASURE_SQL}\n```")})
            .to_string(),
        ],
        "follow=prefill",
    )
    .await;
    let mut turns = Vec::new();
    let (first, first_steps) = ask_turn(&agent, &mut turns, VOIDED).await;
    assert_eq!(first.decision, Decision::Answer);
    let (result, recorder) = ask_turn(&agent, &mut turns, measure).await;
    assert_eq!(result.decision, Decision::Answer, "{:?}", result.reason);
    assert_eq!(
        result.understood_as.as_deref(),
        Some("the total amount of the bills voided in 2025")
    );
    // The instruction is in the system prompt every question reads from the cache, the
    // same for the first question and the follow-up, and the follow-up's own message is
    // its result's shape and its question.
    let prompt = first_prompt(&recorder);
    assert_eq!(prompt[0], first_prompt(&first_steps)[0]);
    assert!(
        prompt[0].contains("A follow-up question is read in the context"),
        "{}",
        prompt[0]
    );
    let asked = prompt.last().expect("a message");
    assert!(
        asked.contains(&format!("Follow-up question: {measure}")),
        "{asked}"
    );
    assert!(!asked.contains("Understood as"), "{asked}");
    assert!(!asked.contains("Write one SELECT"), "{asked}");
    // The reply kept for the next turn's prompt is the one the server holds: begun
    // with the block and the marker.
    assert!(
        turns[1]
            .reply
            .as_deref()
            .is_some_and(|reply| reply.starts_with("```sql\n-- Understood as: the total")),
        "{:?}",
        turns[1].reply
    );
    assert_eq!(
        result
            .sql
            .as_deref()
            .map(|sql| sql.contains("SUM(total_amt)")),
        Some(true)
    );
}
