//! Answers marked wrong on the SQLite store and on PostgreSQL (a scratch database): what a
//! mark records, what `caused_wrong` counts, what a mark refuses, and that marking never
//! makes or changes an example.

use super::super::tests::{demo_file, draft, on_each_store, open, postgres_examples};
use super::super::{database_identity, remove, save, ExampleError, ExampleStore};
use super::*;

fn wrong(question: &str, examples: &[i64], by: &str) -> WrongDraft {
    WrongDraft {
        question: question.to_string(),
        sql: Some("SELECT count(*) AS n FROM customers".to_string()),
        examples: examples.to_vec(),
        marked_by: by.to_string(),
    }
}

async fn marked_answers_name_the_examples_they_used_on(store: &dyn ExampleStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = open(&demo_file(&dir)).await;
    let database = database_identity(gate.label());
    let blamed = save(
        &gate,
        store,
        &draft(
            "How many customers are there?",
            "SELECT count(*) FROM customers",
        ),
    )
    .await
    .expect("saved")
    .example;
    let innocent = save(
        &gate,
        store,
        &draft("How many bills are there?", "SELECT count(*) FROM bills"),
    )
    .await
    .expect("saved")
    .example;
    let before = store.list(&database).await.expect("lists");
    assert!(caused_wrong(&gate, store).await.expect("reads").is_empty());

    let first = mark(
        &gate,
        store,
        &wrong("How many customers in 2025?", &[blamed.id], "ana"),
    )
    .await
    .expect("marked");
    assert!(first.id > 0);
    assert_eq!(first.examples, vec![blamed.id]);
    assert_eq!(first.marked_by, "ana");
    // The same id twice is one use; the later mark is the latest.
    let second = mark(
        &gate,
        store,
        &wrong("Customers by city", &[blamed.id, blamed.id], "ben"),
    )
    .await
    .expect("marked");
    assert_eq!(second.examples, vec![blamed.id]);
    // An answer that used no example is recorded too, and blames none.
    mark(&gate, store, &wrong("Customers per year", &[], "ana"))
        .await
        .expect("marked");

    let listed = caused_wrong(&gate, store).await.expect("reads");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].example.id, blamed.id);
    assert_eq!(listed[0].wrong_answers, 2);
    assert_eq!(listed[0].latest_question, "Customers by city");
    assert_eq!(listed[0].latest_marked_by, "ben");
    assert!(listed.iter().all(|entry| entry.example.id != innocent.id));
    assert_eq!(store.wrong_marks(&database).await.expect("reads").len(), 3);

    // Marking made, replaced and set aside nothing.
    assert_eq!(store.list(&database).await.expect("lists"), before);
    // Another database's marks are not these.
    assert!(store
        .wrong_marks("another")
        .await
        .expect("reads")
        .is_empty());

    // A removed example has nothing left to prune.
    remove(&gate, store, blamed.id).await.expect("removed");
    assert!(caused_wrong(&gate, store).await.expect("reads").is_empty());
}

async fn a_mark_refuses_unknown_examples_and_bad_fields_on(store: &dyn ExampleStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = open(&demo_file(&dir)).await;
    let database = database_identity(gate.label());
    let known = save(
        &gate,
        store,
        &draft("How many suppliers?", "SELECT count(*) FROM suppliers"),
    )
    .await
    .expect("saved")
    .example;
    let unknown = known.id + 1_000;
    let error = mark(
        &gate,
        store,
        &wrong("How many suppliers?", &[known.id, unknown], "ana"),
    )
    .await
    .expect_err("an unknown id");
    assert!(
        matches!(&error, ExampleError::UnknownExamples(ids) if ids == &vec![unknown]),
        "{error}"
    );
    assert!(error.to_string().contains(&unknown.to_string()), "{error}");

    // A user whose policy hides the example cannot blame it (or learn it exists).
    let policy: crate::gate::UserPolicy =
        toml::from_str("hidden_tables = [\"suppliers\"]").expect("policy parses");
    let narrow = gate.narrowed("clerk", &policy).expect("narrowed");
    let error = mark(&narrow, store, &wrong("Suppliers", &[known.id], "clerk"))
        .await
        .expect_err("hidden from the clerk");
    assert!(matches!(error, ExampleError::UnknownExamples(_)), "{error}");

    let many: Vec<i64> = (1..=(MAX_EXAMPLES_PER_MARK as i64 + 1)).collect();
    let error = mark(&gate, store, &wrong("Suppliers", &many, "ana"))
        .await
        .expect_err("more than an answer uses");
    assert!(
        matches!(error, ExampleError::TooManyExamples { count: 17, .. }),
        "{error}"
    );
    for (draft, field) in [
        (wrong("Suppliers", &[known.id], "  "), "marked_by"),
        (wrong(" ", &[known.id], "ana"), "question"),
        (
            wrong(&"q".repeat(MAX_QUESTION_CHARS + 1), &[known.id], "ana"),
            "question",
        ),
        (
            WrongDraft {
                sql: Some("x".repeat(MAX_MARK_SQL_CHARS + 1)),
                ..wrong("Suppliers", &[known.id], "ana")
            },
            "sql",
        ),
    ] {
        let error = mark(&gate, store, &draft).await.expect_err(field);
        assert!(error.to_string().contains(field), "{field}: {error}");
    }
    // Nothing refused was recorded.
    assert!(store
        .wrong_marks(&database)
        .await
        .expect("reads")
        .is_empty());

    // The same user blaming an example its policy shows is recorded, in its name.
    let visible = save(
        &gate,
        store,
        &draft("How many customers?", "SELECT count(*) FROM customers"),
    )
    .await
    .expect("saved")
    .example;
    mark(&narrow, store, &wrong("Customers", &[visible.id], "clerk"))
        .await
        .expect("the clerk sees customers");
    let marks = store.wrong_marks(&database).await.expect("reads");
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert_eq!(
        (marks[0].examples.as_slice(), marks[0].marked_by.as_str()),
        ([visible.id].as_slice(), "clerk")
    );
}

#[tokio::test]
async fn marked_answers_name_the_examples_they_used() {
    on_each_store(
        "marked_answers_name_the_examples_they_used",
        marked_answers_name_the_examples_they_used_on,
    )
    .await;
}

#[tokio::test]
async fn a_mark_refuses_unknown_examples_and_bad_fields() {
    on_each_store(
        "a_mark_refuses_unknown_examples_and_bad_fields",
        a_mark_refuses_unknown_examples_and_bad_fields_on,
    )
    .await;
}

#[tokio::test]
async fn a_mark_made_on_one_replica_is_counted_on_another() {
    let Some((scratch, pool)) =
        postgres_examples("a_mark_made_on_one_replica_is_counted_on_another").await
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = open(&demo_file(&dir)).await;
    let one = crate::examples::PostgresExampleStore::new(pool);
    let two = crate::examples::PostgresExampleStore::new(scratch.pool());
    let example = save(
        &gate,
        &one,
        &draft("How many bills?", "SELECT count(*) FROM bills"),
    )
    .await
    .expect("saved on one")
    .example;
    mark(&gate, &one, &wrong("Bills in 2025", &[example.id], "ana"))
        .await
        .expect("marked on one");
    let listed = caused_wrong(&gate, &two).await.expect("read on two");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].example.id, example.id);
    assert_eq!(listed[0].latest_question, "Bills in 2025");
}
