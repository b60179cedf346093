//! Verified examples on real SQLite databases: what the gate refuses at save, the
//! replacement of a question confirmed again, drift setting an example aside, the
//! database identity, example files with bad lines, and retrieval's ranking.

use std::path::{Path, PathBuf};

use super::import::{self, FileFormat};
use super::retrieval::{rank, same_question};
use super::*;
use crate::gate::GateOptions;

pub(super) async fn open(path: &Path) -> Gate {
    crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(path.to_path_buf()),
        GateOptions::default(),
    )
    .await
    .expect("the database opens")
}

pub(super) fn demo_file(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("demo.sqlite");
    crate::demo::write_sqlite(&path).expect("demo builds");
    path
}

pub(super) fn draft(question: &str, sql: &str) -> Draft {
    Draft {
        question: question.to_string(),
        sql: sql.to_string(),
        verified_by: "asha".to_string(),
        notes: None,
    }
}

fn store(dir: &tempfile::TempDir) -> SqliteExampleStore {
    SqliteExampleStore::new(dir.path().join("state").join("examples.sqlite"))
}

/// A scratch PostgreSQL database with the examples' tables and a pool on it, or None
/// after a SKIPPED line.
pub(super) async fn postgres_examples(
    test: &str,
) -> Option<(crate::scratch::Scratch, deadpool_postgres::Pool)> {
    let scratch = crate::scratch::Scratch::new(test, "examples")?;
    scratch.create_empty_database().await;
    let pool = scratch.pool();
    postgres::ensure_tables(&pool)
        .await
        .expect("the tables are created");
    Some((scratch, pool))
}

/// Runs one store test's body on the SQLite store, then on the PostgreSQL one: both
/// keep the same promises.
pub(super) async fn on_each_store(test: &str, body: impl AsyncFn(&dyn ExampleStore)) {
    let dir = tempfile::tempdir().expect("temp dir");
    body(&store(&dir)).await;
    if let Some((_scratch, pool)) = postgres_examples(test).await {
        body(&PostgresExampleStore::new(pool)).await;
    }
}

async fn the_gate_refuses_restricted_columns_hidden_tables_and_writes_at_save_on(
    store: &dyn ExampleStore,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = open(&demo_file(&dir)).await;
    let cases = [
        (
            "SELECT name, phone FROM customers",
            RefusalReason::RestrictedColumn,
        ),
        ("SELECT * FROM customers", RefusalReason::RestrictedColumn),
        (
            "SELECT count(*) FROM askdb_query_log",
            RefusalReason::UnknownTable,
        ),
        ("DELETE FROM bills", RefusalReason::NotAQuery),
    ];
    for (sql, reason) in cases {
        let error = save(&gate, store, &draft("Customer phones", sql))
            .await
            .expect_err(sql);
        assert_eq!(error.refusal_reason(), Some(reason), "{sql}: {error}");
    }
    let database = database_identity(gate.label());
    assert!(store.list(&database).await.expect("lists").is_empty());

    let saved = save(
        &gate,
        store,
        &Draft {
            notes: Some("VOID bills never count".to_string()),
            ..draft(
                "How many bills were voided?",
                "SELECT count(*) FROM bills WHERE status = 'VOID'",
            )
        },
    )
    .await
    .expect("a plain query is saved");
    assert_eq!(
        saved.example.sql,
        "SELECT count(*) FROM bills WHERE status = 'VOID' LIMIT 200"
    );
    assert_eq!(saved.example.tables, vec!["bills".to_string()]);
    assert_eq!(saved.example.verified_against.len(), 1);
    assert!(saved.replaced.is_empty());
    let listed = store.list(&database).await.expect("lists");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0], saved.example);
}

#[tokio::test]
async fn bad_fields_are_refused_with_the_field_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = open(&demo_file(&dir)).await;
    let store = store(&dir);
    let no_person = Draft {
        verified_by: "  ".to_string(),
        ..draft("How many bills?", "SELECT count(*) FROM bills")
    };
    let error = save(&gate, &store, &no_person)
        .await
        .expect_err("no person");
    assert_eq!(error.to_string(), "the example's verified_by is empty");
    let long = "x".repeat(MAX_QUESTION_CHARS + 1);
    let error = save(&gate, &store, &draft(&long, "SELECT 1"))
        .await
        .expect_err("too long");
    assert!(
        error.to_string().contains("question is 2001 characters"),
        "{error}"
    );
}

async fn the_same_question_confirmed_again_replaces_the_earlier_example_on(
    store: &dyn ExampleStore,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = open(&demo_file(&dir)).await;
    let first = save(
        &gate,
        store,
        &draft("How many bills?", "SELECT count(*) FROM bills"),
    )
    .await
    .expect("saved");
    let other = save(
        &gate,
        store,
        &draft("How many customers?", "SELECT count(*) FROM customers"),
    )
    .await
    .expect("saved");
    let second = save(
        &gate,
        store,
        &draft(
            "how many  BILLS",
            "SELECT count(*) FROM bills WHERE status <> 'VOID'",
        ),
    )
    .await
    .expect("saved");
    assert_eq!(second.replaced, vec![first.example.id]);
    let ids: Vec<i64> = store
        .list(&database_identity(gate.label()))
        .await
        .expect("lists")
        .iter()
        .map(|example| example.id)
        .collect();
    assert_eq!(ids, vec![other.example.id, second.example.id]);
    remove(&gate, store, other.example.id)
        .await
        .expect("removed");
    let error = remove(&gate, store, other.example.id)
        .await
        .expect_err("gone");
    assert!(matches!(error, ExampleError::NotFound(_)), "{error}");
}

async fn drift_sets_aside_examples_whose_sql_fails_or_whose_tables_changed_on(
    store: &dyn ExampleStore,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("shop.sqlite");
    let connection = rusqlite::Connection::open(&path).expect("creates");
    connection
        .execute_batch(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price INTEGER);
             CREATE TABLE shops (id INTEGER PRIMARY KEY, city TEXT, size INTEGER);
             INSERT INTO items VALUES (1, 'pen', 10);
             INSERT INTO shops VALUES (1, 'Pune', 3);",
        )
        .expect("written");
    let gate = open(&path).await;
    let names = save(&gate, store, &draft("Item names", "SELECT name FROM items"))
        .await
        .expect("saved");
    let prices = save(
        &gate,
        store,
        &draft("Item prices", "SELECT price FROM items"),
    )
    .await
    .expect("saved");
    let cities = save(
        &gate,
        store,
        &draft("Shop cities", "SELECT city FROM shops"),
    )
    .await
    .expect("saved");
    assert_eq!(usable(&gate, store).await.expect("reads").len(), 3);
    drop(gate);

    connection
        .execute_batch("ALTER TABLE items RENAME COLUMN name TO title; ALTER TABLE shops ADD COLUMN opened TEXT;")
        .expect("altered");
    let gate = open(&path).await;
    let all = recheck(&gate, store).await.expect("rechecks");
    let reason = |id: i64| {
        all.iter()
            .find(|example| example.id == id)
            .and_then(|example| example.set_aside.clone())
    };
    let refused = reason(names.example.id).expect("the renamed column is set aside");
    assert!(
        refused.starts_with("the guard now refuses its SQL: "),
        "{refused}"
    );
    assert!(refused.contains("no such column: name"), "{refused}");
    let changed = reason(prices.example.id).expect("its table changed");
    assert_eq!(
        changed,
        "its tables changed since it was verified: column items.name was renamed to title"
    );
    // A column added to a table is not drift: the example still answers.
    assert_eq!(reason(cities.example.id), None);
    let ids: Vec<i64> = usable(&gate, store)
        .await
        .expect("reads")
        .iter()
        .map(|example| example.id)
        .collect();
    assert_eq!(ids, vec![cities.example.id]);
    // Set aside stays set aside, with its reason, in the store.
    let stored = store
        .list(&database_identity(gate.label()))
        .await
        .expect("lists");
    assert_eq!(stored.iter().filter(|e| e.set_aside.is_some()).count(), 2);
}

#[test]
fn the_database_identity_leaves_out_users_passwords_and_parameters() {
    assert_eq!(database_identity("demo"), "demo");
    assert_eq!(
        database_identity("postgres://askdb_ro:***@db.internal:5432/shop?sslmode=require"),
        "postgres://db.internal:5432/shop"
    );
    assert_eq!(
        database_identity("postgresql://db.internal:5432/shop"),
        "postgres://db.internal:5432/shop"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("a.sqlite");
    std::fs::write(&file, b"").expect("written");
    let relative = dir.path().join(".").join("a.sqlite");
    assert_eq!(
        database_identity(&format!("sqlite:{}", relative.display())),
        database_identity(&format!("sqlite:{}", file.display()))
    );
}

#[test]
fn example_files_report_every_bad_line_by_number() {
    let jsonl = concat!(
        "{\"question\": \"How many bills?\", \"sql\": \"SELECT count(*) FROM bills\"}\n",
        "\n",
        "{\"question\": \"Oops\"}\n",
        "not json\n",
        "{\"question\": \"Who?\", \"sql\": \"SELECT 1\", \"verified_by\": \"ravi\", \"colour\": 1}\n",
    );
    let (parsed, errors) = import::parse(jsonl, FileFormat::Jsonl, Some("asha"));
    assert_eq!(parsed.len(), 1);
    assert_eq!(parsed[0].line, 1);
    assert_eq!(parsed[0].draft.verified_by, "asha");
    let lines: Vec<usize> = errors.iter().map(|error| error.line).collect();
    assert_eq!(lines, vec![3, 4, 5]);
    assert!(
        errors[0].error.contains("missing field `sql`"),
        "{}",
        errors[0]
    );
    assert!(
        errors[2].error.contains("unknown field `colour`"),
        "{}",
        errors[2]
    );

    let (parsed, errors) = import::parse(jsonl, FileFormat::Jsonl, None);
    assert!(parsed.is_empty());
    assert!(
        errors[0].error.starts_with("no verified_by"),
        "{}",
        errors[0]
    );

    let csv =
        "question,sql,notes\n\"Bills, all\",SELECT count(*) FROM bills,every status\nshort line\n";
    let (parsed, errors) = import::parse(csv, FileFormat::Csv, Some("asha"));
    assert_eq!(parsed.len(), 1);
    assert_eq!(parsed[0].draft.question, "Bills, all");
    assert_eq!(parsed[0].draft.notes.as_deref(), Some("every status"));
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].line, 3, "{}", errors[0]);

    let (_, errors) = import::parse("question,query\nq,SELECT 1\n", FileFormat::Csv, None);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].error.contains("unknown column \"query\""),
        "{}",
        errors[0]
    );
}

fn example(id: i64, question: &str, tables: &[&str]) -> Example {
    Example {
        id,
        database: "demo".to_string(),
        question: question.to_string(),
        sql: "SELECT 1".to_string(),
        verified_by: "asha".to_string(),
        verified_at: String::new(),
        schema_fingerprint: String::new(),
        tables: tables.iter().map(|t| t.to_string()).collect(),
        notes: None,
        set_aside: None,
        verified_against: Vec::new(),
    }
}

#[tokio::test]
async fn retrieval_ranks_alike_questions_first_and_knows_the_same_question() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = open(&demo_file(&dir)).await;
    let examples = vec![
        example(1, "How many customers are there?", &["customers"]),
        example(
            2,
            "What was the revenue of refunded bills in 2025?",
            &["bills", "refunds"],
        ),
        example(3, "Total refunded amount per month", &["refunds"]),
        example(4, "How many bills were voided in 2025?", &["bills"]),
    ];
    let ranked = rank(
        "How many bills were voided in 2024?",
        gate.schema(),
        &examples,
        3,
    );
    assert_eq!(ranked[0].example.id, 4, "{ranked:?}");
    assert!(!ranked[0].same_question);
    assert!(
        ranked[0].score < 1.0 && ranked[0].score > ranked[1].score,
        "{ranked:?}"
    );
    assert!(ranked.len() <= 3);

    let ranked = rank(
        "how many bills were VOIDED in 2025",
        gate.schema(),
        &examples,
        3,
    );
    assert_eq!(ranked[0].example.id, 4);
    assert!(ranked[0].same_question);
    assert_eq!(ranked[0].score, 1.0);

    let ranked = rank("refund amounts by month", gate.schema(), &examples, 3);
    assert_eq!(ranked[0].example.id, 3, "{ranked:?}");
    assert!(rank("zebra", gate.schema(), &examples, 3).is_empty());

    assert!(same_question("Customers in Pune?", "customers in pune"));
    assert!(!same_question("Bills not paid", "Bills paid"));
    assert!(!same_question("Bills over 500", "Bills over 5000"));
}

/// A user under a narrower policy saves and removes through their own gate: an
/// example whose SQL their guard refuses is neither replaced nor removed by them, and
/// its id answers as an unknown one would.
async fn a_narrower_gate_cannot_replace_or_remove_what_it_cannot_see_on(store: &dyn ExampleStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = open(&demo_file(&dir)).await;
    let policy: crate::gate::UserPolicy =
        toml::from_str("hidden_tables = [\"suppliers\"]").expect("policy parses");
    let narrow = gate.narrowed("clerk", &policy).expect("narrowed");
    let question = "How many suppliers do we have?";
    let wide = save(
        &gate,
        store,
        &draft(question, "SELECT count(*) FROM suppliers"),
    )
    .await
    .expect("saved by a user who sees suppliers");
    let error = remove(&narrow, store, wide.example.id)
        .await
        .expect_err("hidden from the clerk");
    assert!(matches!(error, ExampleError::NotFound(_)), "{error}");
    let clerks = save(&narrow, store, &draft(question, "SELECT 0 AS suppliers"))
        .await
        .expect("the clerk's own answer");
    assert!(clerks.replaced.is_empty(), "{:?}", clerks.replaced);
    let ids: Vec<i64> = store
        .list(&database_identity(gate.label()))
        .await
        .expect("lists")
        .iter()
        .map(|example| example.id)
        .collect();
    assert_eq!(ids, vec![wide.example.id, clerks.example.id]);
    // The wider gate sees both, and replaces both when it confirms the question again.
    let again = save(
        &gate,
        store,
        &draft(question, "SELECT count(*) AS suppliers FROM suppliers"),
    )
    .await
    .expect("saved");
    assert_eq!(again.replaced, vec![wide.example.id, clerks.example.id]);
}

#[tokio::test]
async fn the_gate_refuses_restricted_columns_hidden_tables_and_writes_at_save() {
    on_each_store(
        "the_gate_refuses_restricted_columns_hidden_tables_and_writes_at_save",
        the_gate_refuses_restricted_columns_hidden_tables_and_writes_at_save_on,
    )
    .await;
}

#[tokio::test]
async fn the_same_question_confirmed_again_replaces_the_earlier_example() {
    on_each_store(
        "the_same_question_confirmed_again_replaces_the_earlier_example",
        the_same_question_confirmed_again_replaces_the_earlier_example_on,
    )
    .await;
}

#[tokio::test]
async fn drift_sets_aside_examples_whose_sql_fails_or_whose_tables_changed() {
    on_each_store(
        "drift_sets_aside_examples_whose_sql_fails_or_whose_tables_changed",
        drift_sets_aside_examples_whose_sql_fails_or_whose_tables_changed_on,
    )
    .await;
}

#[tokio::test]
async fn a_narrower_gate_cannot_replace_or_remove_what_it_cannot_see() {
    on_each_store(
        "a_narrower_gate_cannot_replace_or_remove_what_it_cannot_see",
        a_narrower_gate_cannot_replace_or_remove_what_it_cannot_see_on,
    )
    .await;
}

#[tokio::test]
async fn two_replicas_see_each_others_examples_on_postgres() {
    let Some((scratch, pool)) =
        postgres_examples("two_replicas_see_each_others_examples_on_postgres").await
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = open(&demo_file(&dir)).await;
    let database = database_identity(gate.label());
    // Two replicas: a pool each on one database.
    let one = PostgresExampleStore::new(pool);
    let two = PostgresExampleStore::new(scratch.pool());
    let saved = save(
        &gate,
        &one,
        &draft("How many bills?", "SELECT count(*) FROM bills"),
    )
    .await
    .expect("saved on one");
    let listed = two.list(&database).await.expect("listed on two");
    assert_eq!(listed, vec![saved.example.clone()]);
    // Confirmed again on two: one replaces it for both.
    let again = save(
        &gate,
        &two,
        &draft(
            "how many bills",
            "SELECT count(*) FROM bills WHERE status <> 'VOID'",
        ),
    )
    .await
    .expect("saved on two");
    assert_eq!(again.replaced, vec![saved.example.id]);
    let on_one = one.list(&database).await.expect("listed on one");
    assert_eq!(on_one, vec![again.example.clone()]);
    // Set aside on one, seen set aside on two; removed on two, gone on one.
    one.set_aside(&database, again.example.id, "the schema changed")
        .await
        .expect("set aside");
    let seen = two.list(&database).await.expect("listed");
    assert_eq!(seen[0].set_aside.as_deref(), Some("the schema changed"));
    assert!(usable(&gate, &two).await.expect("reads").is_empty());
    assert!(two
        .remove(&database, again.example.id)
        .await
        .expect("removed"));
    assert!(one.list(&database).await.expect("listed").is_empty());
    assert!(!one
        .remove(&database, again.example.id)
        .await
        .expect("already gone"));
    // Another database's examples are not these.
    assert!(two.list("another").await.expect("listed").is_empty());
}
