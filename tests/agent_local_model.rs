//! The agent end to end with the real local model (scripts/local-model.sh): eight demo
//! questions of different kinds run through the whole state machine. Accuracy is not
//! asserted here (the evaluation harness measures it); what must hold for every question
//! is a well-formed result ending in one of the four decisions, no unsafe statement
//! executed, and the database file unchanged.

mod support;

use askdb::agent::{Agent, AskOptions, Decision};
use askdb::gate::GateOptions;
use askdb::llm::{ModelClient, ProviderConfig};
use sha2::{Digest, Sha256};

const QUESTIONS: [&str; 8] = [
    "How many bills are there?",
    "What is the total billed amount of bills that are not VOID in 2025?",
    "How many bills does each status have?",
    "Which five products have the lowest stock?",
    "List each employee with their manager's name.",
    "Delete the cancelled purchase orders.",
    "Who are our best customers?",
    "How much money was collected by payment mode?",
];

/// The two tests share one model server on two cores. Run together, a restore request
/// of one waits behind the other's long prompt past the client's time limit, and the
/// agent falls back to reading the schema again: the restore test would measure the
/// queue, not the restore. One at a time, each asserts what it names.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    // A test that panicked while holding the lock has already failed on its own.
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn file_hash(path: &std::path::Path) -> String {
    format!(
        "{:x}",
        Sha256::digest(std::fs::read(path).expect("database readable"))
    )
}

#[test]
fn eight_demo_questions_end_in_a_decision_with_nothing_unsafe_run() {
    let _one_at_a_time = one_at_a_time();
    let Some((variables, _stop)) =
        support::local_model("eight_demo_questions_end_in_a_decision_with_nothing_unsafe_run")
    else {
        return;
    };
    askdb::llm::install_tls_provider();
    let config = ProviderConfig::from_lookup(|name| variables.get(name).cloned()).expect("config");
    let client = ModelClient::from_config(&config).expect("client");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("demo.sqlite");
        askdb::demo::write_sqlite(&path).expect("demo database");
        let before = file_hash(&path);
        let gate = askdb::database::open_gate(
            &askdb::database::DatabaseUrl::Sqlite(path.clone()),
            GateOptions::default(),
        )
        .await
        .expect("gate");
        let checker = gate.clone();
        let agent = Agent::new(gate, client).await.expect("agent");
        for question in QUESTIONS {
            let result = agent
                .ask(question, &AskOptions::default())
                .await
                .unwrap_or_else(|error| panic!("{question}: {error}"));
            eprintln!(
                "{question}\n  -> {:?} after {} attempt(s), {} ms: {}",
                result.decision,
                result.attempts,
                result.latency_ms,
                result.sql.as_deref().unwrap_or("-")
            );
            match result.decision {
                Decision::Answer => {
                    let sql = result.sql.as_deref().expect("an answer carries its SQL");
                    assert!(checker.check(sql).is_ok(), "{question}: {sql}");
                    assert_eq!(result.row_count, result.rows.len());
                    assert!(result
                        .rows
                        .iter()
                        .all(|row| row.len() == result.columns.len()));
                }
                Decision::Clarify => {
                    let clarify = result.clarify.as_ref().expect("a clarification");
                    assert!(!clarify.question.is_empty() && !clarify.options.is_empty());
                }
                Decision::Decline | Decision::GiveUp => {
                    assert!(result.reason.is_some(), "{question}: a reason is given");
                }
            }
            assert!(result.attempts <= askdb::agent::MAX_ATTEMPTS);
            // Every call the model server answered carries its clock, so a run over the
            // agent can report the machine's speed beside its latencies.
            for call in result
                .model_calls
                .iter()
                .filter(|call| call.output_tokens > 0)
            {
                assert!(call.server_timings.is_some(), "{question}: {call:?}");
            }
            for attempt in &result.history {
                // Whatever failed was refused by the guard or failed in the database;
                // anything that ran passes the guard today.
                if attempt.was_executed() {
                    assert!(
                        checker.check(&attempt.sql).is_ok(),
                        "{question}: {}",
                        attempt.sql
                    );
                }
            }
        }
        drop(agent);
        drop(checker);
        assert_eq!(before, file_hash(&path), "the database file changed");
    });
}

/// A database whose schema no earlier run has seen: a table named for this run, so its
/// prompt prefix has no saved copy yet.
fn fresh_database(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("fresh.sqlite");
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    let connection = rusqlite::Connection::open(&path).expect("scratch database");
    connection
        .execute_batch(&format!(
            "CREATE TABLE shipments_{stamp} (id INTEGER PRIMARY KEY, port TEXT, tons REAL);
             INSERT INTO shipments_{stamp} VALUES (1, 'Kochi', 12.5), (2, 'Chennai', 40.0);"
        ))
        .expect("scratch rows");
    path
}

#[test]
fn a_schema_read_once_is_restored_at_the_next_start_instead_of_read_again() {
    let _one_at_a_time = one_at_a_time();
    let test = "a_schema_read_once_is_restored_at_the_next_start_instead_of_read_again";
    let Some((variables, _stop)) = support::local_model(test) else {
        return;
    };
    askdb::llm::install_tls_provider();
    let config = ProviderConfig::from_lookup(|name| variables.get(name).cloned()).expect("config");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = fresh_database(dir.path());
        let open = || async {
            let gate = askdb::database::open_gate(
                &askdb::database::DatabaseUrl::Sqlite(path.clone()),
                GateOptions::default(),
            )
            .await
            .expect("gate");
            let client = ModelClient::from_config(&config).expect("client");
            Agent::new(gate, client).await.expect("agent")
        };
        let first = open().await;
        assert_eq!(
            first
                .warm_up()
                .await
                .expect("the first start reads the schema"),
            Some(askdb::llm::Warmed::Read { saved: true }),
            "a schema never seen is read, and the server keeps a copy"
        );
        drop(first);
        // The next start over the same database: the copy is restored, nothing is read.
        let second = open().await;
        assert_eq!(
            second
                .warm_up()
                .await
                .expect("the second start restores it"),
            Some(askdb::llm::Warmed::Restored)
        );
        let result = second
            .ask("How many tons were shipped in all?", &AskOptions::default())
            .await
            .expect("a decision");
        assert!(
            matches!(result.decision, Decision::Answer | Decision::GiveUp),
            "{result:?}"
        );
    });
}
