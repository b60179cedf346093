//! The PostgreSQL store on a real server, a scratch database per test: the in-memory
//! store's promises ([`super::tests::promises`]), and two stores over one database
//! standing for two replicas: a conversation continued on the other, one question at a
//! time across both, the owner check across both, and a replica's lost lease running
//! out by itself.

use std::sync::Arc;
use std::time::Duration;

use super::postgres::{ensure_tables, PostgresConversationStore};
use super::tests::{promises, turn};
use super::{ConversationError, ConversationStore, Limits};
use crate::scratch::Scratch;

/// A scratch database with the store's tables, or None after a SKIPPED line.
async fn database(test: &str) -> Option<(Scratch, deadpool_postgres::Pool)> {
    let scratch = Scratch::new(test, "conv")?;
    scratch.create_empty_database().await;
    let pool = scratch.pool();
    ensure_tables(&pool).await.expect("the tables are created");
    // A second time changes nothing: every statement creates only what is missing.
    ensure_tables(&pool).await.expect("applied again");
    Some((scratch, pool))
}

/// A replica: its own pool on the test's database.
fn replica(scratch: &Scratch, limits: Limits) -> Arc<dyn ConversationStore> {
    Arc::new(PostgresConversationStore::new(scratch.pool(), limits))
}

#[tokio::test]
async fn the_postgres_store_keeps_every_promise_of_the_memory_store() {
    let Some((_scratch, pool)) =
        database("the_postgres_store_keeps_every_promise_of_the_memory_store").await
    else {
        return;
    };
    promises::all(async |limits| {
        let client = pool.get().await.expect("connects");
        client
            .batch_execute("TRUNCATE askdb_state.conversations CASCADE")
            .await
            .expect("emptied");
        Arc::new(PostgresConversationStore::new(pool.clone(), limits)) as Arc<dyn ConversationStore>
    })
    .await;
}

#[tokio::test]
async fn a_conversation_begun_on_one_replica_continues_on_another_one_question_at_a_time() {
    let Some((scratch, _pool)) = database("a_conversation_continues_on_another_replica").await
    else {
        return;
    };
    let one = replica(&scratch, Limits::default());
    let two = replica(&scratch, Limits::default());
    let begun = one.begin(None, Some("ana")).await.expect("ana's, on one");
    // While one answers, two refuses the same conversation: busy lives in the database.
    assert_eq!(
        two.begin(Some(&begun.id), Some("ana")).await,
        Err(ConversationError::Busy {
            id: begun.id.to_string()
        })
    );
    // Another user is told it does not exist, on either replica.
    assert_eq!(
        two.begin(Some(&begun.id), Some("ben")).await,
        Err(ConversationError::NotFound {
            id: begun.id.to_string()
        })
    );
    one.end(&begun.id, Some(turn(1, "How many bills?"))).await;
    let continued = two
        .begin(Some(&begun.id), Some("ana"))
        .await
        .expect("continued on two");
    assert_eq!(continued.number, 2);
    assert_eq!(continued.context.turns.len(), 1);
    assert_eq!(continued.context.turns[0].question, "How many bills?");
    assert!(matches!(
        one.begin(Some(&begun.id), Some("ana")).await,
        Err(ConversationError::Busy { .. })
    ));
    two.end(&begun.id, Some(turn(2, "And last month?"))).await;
    let third = one
        .begin(Some(&begun.id), Some("ana"))
        .await
        .expect("back on one");
    assert_eq!(third.number, 3);
    let questions: Vec<&str> = third
        .context
        .turns
        .iter()
        .map(|turn| turn.question.as_str())
        .collect();
    assert_eq!(questions, vec!["How many bills?", "And last month?"]);
    assert_eq!(two.count().await, 1);
}

#[tokio::test]
async fn a_lease_left_by_a_replica_that_died_runs_out_by_itself() {
    let Some((scratch, pool)) = database("a_lease_left_by_a_replica_that_died_runs_out").await
    else {
        return;
    };
    // Long enough that the busy check below runs inside it on a loaded machine.
    let lease = Duration::from_secs(3);
    let dying = PostgresConversationStore::new(scratch.pool(), Limits::default()).with_lease(lease);
    let living: Arc<dyn ConversationStore> =
        Arc::new(PostgresConversationStore::new(pool, Limits::default()).with_lease(lease));
    let begun = dying.begin(None, None).await.expect("new");
    dying.end(&begun.id, Some(turn(1, "q1"))).await;
    let orphaned = dying.begin(Some(&begun.id), None).await.expect("second");
    // The replica dies here: its question never ends.
    drop(dying);
    assert!(matches!(
        living.begin(Some(&begun.id), None).await,
        Err(ConversationError::Busy { .. })
    ));
    tokio::time::sleep(lease + Duration::from_millis(400)).await;
    let taken = living
        .begin(Some(&begun.id), None)
        .await
        .expect("the lease ran out");
    assert_eq!(
        taken.number, orphaned.number,
        "the lost question left no turn"
    );
    living.end(&taken.id, Some(turn(2, "q2"))).await;
    // The dead replica's late end for the same turn records nothing twice.
    let late = PostgresConversationStore::new(scratch.pool(), Limits::default());
    late.end(&begun.id, Some(turn(2, "late"))).await;
    let next = living.begin(Some(&begun.id), None).await.expect("next");
    assert_eq!(next.number, 3);
    let questions: Vec<&str> = next
        .context
        .turns
        .iter()
        .map(|turn| turn.question.as_str())
        .collect();
    assert_eq!(questions, vec!["q1", "q2"]);
}

/// Two hundred follow-ups on one conversation, each `begin` and `end` two transactions
/// on a warm pool: numbers run on and the prompt keeps only the cap's worth of turns.
/// The time a turn takes is printed with `--nocapture` (decision 0080 quotes it); it is
/// a figure, not a verdict.
#[tokio::test]
async fn two_hundred_turns_number_on_and_keep_the_cap() {
    let Some((_scratch, pool)) = database("two_hundred_turns_number_on_and_keep_the_cap").await
    else {
        return;
    };
    let limits = Limits::default();
    let store = PostgresConversationStore::new(pool, limits);
    let first = store.begin(None, None).await.expect("new");
    store.end(&first.id, Some(turn(1, "q1"))).await;
    let mut times = Vec::new();
    let mut last = None;
    for number in 2..=201 {
        let started = std::time::Instant::now();
        let begun = store.begin(Some(&first.id), None).await.expect("turn");
        assert_eq!(begun.number, number);
        store.end(&begun.id, Some(turn(number, "q"))).await;
        times.push(started.elapsed());
        last = Some(begun);
    }
    let last = last.expect("asked");
    assert_eq!(last.context.turns.len(), limits.turns_kept);
    times.sort();
    eprintln!(
        "postgres turn (begin + end): p50 {:?}, p95 {:?}, n {}",
        times[times.len() / 2],
        times[times.len() * 95 / 100],
        times.len()
    );
}

/// Two replicas taking one conversation at the same moment: PostgreSQL orders them, one
/// gets it and the other is told it is busy, twenty times over.
#[tokio::test]
async fn two_replicas_racing_for_one_conversation_get_one_turn_and_one_busy() {
    let Some((scratch, _pool)) = database("two_replicas_racing_for_one_conversation").await else {
        return;
    };
    let one = replica(&scratch, Limits::default());
    let two = replica(&scratch, Limits::default());
    let begun = one.begin(None, None).await.expect("new");
    one.end(&begun.id, Some(turn(1, "q1"))).await;
    for round in 2..=21 {
        let (a, b) = tokio::join!(
            one.begin(Some(&begun.id), None),
            two.begin(Some(&begun.id), None)
        );
        let (winner, store) = match (a, b) {
            (Ok(won), Err(ConversationError::Busy { .. })) => (won, &one),
            (Err(ConversationError::Busy { .. }), Ok(won)) => (won, &two),
            other => panic!("round {round}: {other:?}"),
        };
        assert_eq!(winner.number, round);
        store.end(&winner.id, Some(turn(round, "q"))).await;
    }
}
