//! What runs is what the guard checked, for this database: `Gate::run` refuses a query
//! checked under another gate's policy and never runs it, even when both gates read the
//! very same file (ARCHITECTURE.md, "what runs is what the guard checked").

use askdb::gate::{Database, ErrorType, Gate, GateOptions, QueryOutcome, RefusalReason};

#[tokio::test]
async fn a_query_checked_by_another_gate_is_refused_and_never_run() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("demo.sqlite");
    askdb::demo::write_sqlite(&path).expect("the demo is written");
    let database = Database::Sqlite(path);
    let checking = Gate::open(&database, GateOptions::default())
        .await
        .expect("the first gate opens");
    let running = Gate::open(&database, GateOptions::default())
        .await
        .expect("the second gate opens");
    let checked = checking
        .check("SELECT count(*) FROM bills")
        .expect("the guard accepts it");

    assert!(
        matches!(checking.run(&checked).await, QueryOutcome::Rows(_)),
        "the gate that checked it runs it"
    );
    match running.run(&checked).await {
        QueryOutcome::Rows(rows) => panic!("ran under a policy that never checked it: {rows:?}"),
        QueryOutcome::Failed(error) => {
            assert_eq!(error.error_type, ErrorType::Rejected, "{error:?}");
            assert_eq!(
                error.reason,
                Some(RefusalReason::ForeignPolicy),
                "{error:?}"
            );
            // A model cannot fix a query presented to the wrong database.
            assert!(!error.repairable, "{error:?}");
            assert!(
                error.message.contains("checked for another database"),
                "{error:?}"
            );
        }
    }
}
