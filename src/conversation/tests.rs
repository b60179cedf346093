//! The store's bounds, each on its own: the time to live, the cap on conversations, the
//! cap on turns kept, one question at a time per conversation, and a lease that gives
//! its conversation back however it ends. The in-memory store is shown on its own clock;
//! [`promises`] then holds every store to the same behaviours through the trait, on the
//! real clock: the in-memory store here, PostgreSQL in `postgres_tests.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::memory::InMemoryStore;
use super::*;
use crate::agent::conversation::TurnOutcome;
use crate::agent::Decision;

fn limits(ttl_s: u64, max_conversations: usize, turns_kept: usize) -> Limits {
    Limits {
        ttl: Duration::from_secs(ttl_s),
        max_conversations,
        turns_kept,
    }
}

pub(super) fn turn(number: u32, question: &str) -> Turn {
    let mut result = AgentResult::for_tests(question, Decision::Answer);
    result.sql = Some(format!("SELECT {number}"));
    Turn::from_result(number, &result)
}

#[test]
fn ids_are_fresh_and_only_their_own_form_is_read() {
    let a = ConversationId::fresh();
    let b = ConversationId::fresh();
    assert_ne!(a, b);
    assert_eq!(a.as_str().len(), 32);
    assert_eq!(ConversationId::parse(a.as_str()), Ok(a.clone()));
    for bad in [
        "",
        "1234",
        "ZZ",
        &"g".repeat(32),
        &a.as_str().to_uppercase(),
    ] {
        assert!(
            matches!(
                ConversationId::parse(bad),
                Err(ConversationError::NotFound { .. })
            ),
            "{bad:?} is no id"
        );
    }
}

#[test]
fn a_conversation_continues_with_its_earlier_turns_numbered_in_order() {
    let store = InMemoryStore::new(Limits::default());
    let now = Instant::now();
    let first = store.begin_at(None, None, now).expect("a new conversation");
    assert_eq!(first.number, 1);
    assert!(!first.context.is_follow_up());
    store.end_at(&first.id, Some(turn(1, "How many bills?")), now);
    let second = store
        .begin_at(Some(&first.id), None, now)
        .expect("continues");
    assert_eq!(second.number, 2);
    assert_eq!(second.context.turns.len(), 1);
    assert_eq!(second.context.turns[0].question, "How many bills?");
    assert_eq!(second.context.turns[0].outcome, TurnOutcome::Answered);
}

#[test]
fn an_expired_or_unknown_conversation_is_not_found() {
    let store = InMemoryStore::new(limits(60, 10, 6));
    let now = Instant::now();
    let begun = store.begin_at(None, None, now).expect("new");
    store.end_at(&begun.id, Some(turn(1, "q")), now);
    let later = now + Duration::from_secs(59);
    let again = store
        .begin_at(Some(&begun.id), None, later)
        .expect("still alive");
    store.end_at(&again.id, Some(turn(2, "q2")), later);
    // The time to live counts from the latest question.
    let expired = later + Duration::from_secs(60);
    assert!(matches!(
        store.begin_at(Some(&begun.id), None, expired),
        Err(ConversationError::NotFound { .. })
    ));
    assert_eq!(store.held_count(), 0, "an expired conversation is dropped");
    let unknown = ConversationId::fresh();
    let error = store
        .begin_at(Some(&unknown), None, now)
        .expect_err("unknown");
    assert!(error.to_string().contains("start a new one"), "{error}");
}

#[test]
fn a_second_question_while_one_is_answered_is_refused_and_then_taken() {
    let store = InMemoryStore::new(Limits::default());
    let now = Instant::now();
    let begun = store.begin_at(None, None, now).expect("new");
    store.end_at(&begun.id, Some(turn(1, "q")), now);
    let second = store.begin_at(Some(&begun.id), None, now).expect("second");
    assert_eq!(
        store.begin_at(Some(&begun.id), None, now),
        Err(ConversationError::Busy {
            id: begun.id.to_string()
        })
    );
    store.end_at(&second.id, Some(turn(2, "q2")), now);
    let third = store
        .begin_at(Some(&begun.id), None, now)
        .expect("free again");
    assert_eq!(third.number, 3);
}

#[test]
fn past_the_cap_a_new_conversation_replaces_the_idlest_never_a_busy_one() {
    let store = InMemoryStore::new(limits(3_600, 2, 6));
    let t0 = Instant::now();
    let old = store.begin_at(None, None, t0).expect("old");
    store.end_at(&old.id, Some(turn(1, "old")), t0);
    let busy = store.begin_at(None, None, t0).expect("busy, never ended");
    let t1 = t0 + Duration::from_secs(5);
    let new = store
        .begin_at(None, None, t1)
        .expect("replaces the idle one");
    assert_eq!(store.held_count(), 2);
    assert!(matches!(
        store.begin_at(Some(&old.id), None, t1),
        Err(ConversationError::NotFound { .. })
    ));
    // Both held are answering now: nothing can make room.
    assert_eq!(store.begin_at(None, None, t1), Err(ConversationError::Full));
    store.end_at(&busy.id, Some(turn(1, "b")), t1);
    store.end_at(&new.id, Some(turn(1, "n")), t1);
    assert!(store.begin_at(None, None, t1).is_ok());
    assert_eq!(store.held_count(), 2, "memory stays at the cap");
}

#[test]
fn a_conversation_keeps_only_the_turns_its_prompt_can_carry() {
    let store = InMemoryStore::new(limits(3_600, 10, 3));
    let now = Instant::now();
    let mut id = None;
    for number in 1..=5 {
        let begun = store.begin_at(id.as_ref(), None, now).expect("turn");
        assert_eq!(begun.number, number);
        assert!(begun.context.turns.len() <= 3);
        store.end_at(&begun.id, Some(turn(number, &format!("q{number}"))), now);
        id = Some(begun.id);
    }
    let begun = store.begin_at(id.as_ref(), None, now).expect("sixth");
    let kept: Vec<u32> = begun.context.turns.iter().map(|turn| turn.number).collect();
    assert_eq!(kept, vec![3, 4, 5]);
    assert_eq!(begun.number, 6);
}

#[test]
fn another_users_conversation_is_not_found_even_while_it_answers() {
    let store = InMemoryStore::new(Limits::default());
    let now = Instant::now();
    let anas = store.begin_at(None, Some("ana"), now).expect("ana's");
    let unknown = ConversationId::fresh();
    let not_found = |id: &ConversationId| ConversationError::NotFound { id: id.to_string() };
    // Answering: ana herself is told it is busy, anyone else that it does not exist.
    assert!(matches!(
        store.begin_at(Some(&anas.id), Some("ana"), now),
        Err(ConversationError::Busy { .. })
    ));
    for other in [Some("ben"), None, Some("Ana")] {
        assert_eq!(
            store.begin_at(Some(&anas.id), other, now),
            Err(not_found(&anas.id)),
            "{other:?}"
        );
    }
    store.end_at(&anas.id, Some(turn(1, "How many bills?")), now);
    assert_eq!(
        store.begin_at(Some(&anas.id), Some("ben"), now),
        Err(not_found(&anas.id))
    );
    assert_eq!(
        store.begin_at(Some(&unknown), Some("ben"), now),
        Err(not_found(&unknown)),
        "the same error as an id that never existed"
    );
    let continued = store
        .begin_at(Some(&anas.id), Some("ana"), now)
        .expect("ana continues");
    assert_eq!(continued.number, 2);
    // A conversation begun without users is nobody's: a signed-in user cannot take it.
    let nobodys = store.begin_at(None, None, now).expect("nobody's");
    store.end_at(&nobodys.id, Some(turn(1, "q")), now);
    assert_eq!(
        store.begin_at(Some(&nobodys.id), Some("ana"), now),
        Err(not_found(&nobodys.id))
    );
}

#[tokio::test]
async fn the_in_memory_store_keeps_every_promise() {
    promises::all(async |limits| {
        Arc::new(InMemoryStore::new(limits)) as Arc<dyn ConversationStore>
    })
    .await;
}

/// What every store promises, through [`ConversationStore`] alone, each behaviour on a
/// fresh store from `make`.
pub(super) mod promises {
    use super::*;

    pub async fn all(make: impl AsyncFn(Limits) -> Arc<dyn ConversationStore>) {
        turns_continue_numbered_and_capped(&make(limits(3_600, 10, 3)).await).await;
        one_question_at_a_time_and_a_dropped_lease_gives_back(&make(Limits::default()).await).await;
        unknown_and_expired_are_not_found(&make(limits(1, 10, 6)).await).await;
        past_the_cap_the_idlest_is_replaced_never_a_busy_one(&make(limits(3_600, 2, 6)).await)
            .await;
        another_users_conversation_is_not_found(&make(Limits::default()).await).await;
    }

    fn not_found(id: &ConversationId) -> ConversationError {
        ConversationError::NotFound { id: id.to_string() }
    }

    pub async fn turns_continue_numbered_and_capped(store: &Arc<dyn ConversationStore>) {
        let mut id = None;
        for number in 1..=5 {
            let begun = store.begin(id.as_ref(), None).await.expect("turn");
            assert_eq!(begun.number, number);
            assert_eq!(
                begun.context.turns.len(),
                usize::try_from(number - 1).unwrap_or(0).min(3)
            );
            store
                .end(&begun.id, Some(turn(number, &format!("q{number}"))))
                .await;
            id = Some(begun.id);
        }
        let begun = store.begin(id.as_ref(), None).await.expect("sixth");
        let kept: Vec<u32> = begun.context.turns.iter().map(|turn| turn.number).collect();
        assert_eq!(kept, vec![3, 4, 5], "only the turns its prompt can carry");
        assert_eq!(begun.context.turns[2].question, "q5");
        assert_eq!(begun.number, 6);
        store.end(&begun.id, None).await;
    }

    pub async fn one_question_at_a_time_and_a_dropped_lease_gives_back(
        store: &Arc<dyn ConversationStore>,
    ) {
        let first = TurnLease::begin(store, None, None).await.expect("new");
        let id = first.id().clone();
        assert_eq!(
            store.begin(Some(&id), None).await,
            Err(ConversationError::Busy { id: id.to_string() }),
            "the first question is still answering"
        );
        first
            .finish(&AgentResult::for_tests("q1", Decision::Answer))
            .await;
        {
            let failed = TurnLease::begin(store, Some(&id), None)
                .await
                .expect("second");
            assert_eq!(failed.number(), 2);
            assert!(matches!(
                TurnLease::begin(store, Some(&id), None).await,
                Err(ConversationError::Busy { .. })
            ));
            // Dropped: the ask failed or its client went away.
        }
        // A store that waits ends the dropped lease in a task of its own.
        let again = eventually(|| TurnLease::begin(store, Some(&id), None)).await;
        assert_eq!(again.number(), 2, "the failed question left no turn");
        assert_eq!(again.context().turns.len(), 1);
        drop(again);
        let held = eventually(|| TurnLease::begin(store, Some(&id), None)).await;
        drop(held);
        // A new conversation whose first question failed leaves nothing behind.
        let before = eventually_len(store, 1).await;
        let lost = TurnLease::begin(store, None, None).await.expect("new");
        assert_eq!(store.count().await, before + 1);
        drop(lost);
        assert_eq!(eventually_len(store, before).await, before);
    }

    pub async fn unknown_and_expired_are_not_found(store: &Arc<dyn ConversationStore>) {
        // The store's time to live is one second.
        let begun = store.begin(None, None).await.expect("new");
        store.end(&begun.id, Some(turn(1, "q"))).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let again = store
            .begin(Some(&begun.id), None)
            .await
            .expect("still alive");
        store.end(&again.id, Some(turn(2, "q2"))).await;
        // The time to live counts from the latest question.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let third = store.begin(Some(&begun.id), None).await.expect("alive");
        store.end(&third.id, Some(turn(3, "q3"))).await;
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        assert_eq!(
            store.begin(Some(&begun.id), None).await,
            Err(not_found(&begun.id))
        );
        assert_eq!(store.count().await, 0, "an expired conversation is dropped");
        let unknown = ConversationId::fresh();
        let error = store
            .begin(Some(&unknown), None)
            .await
            .expect_err("unknown");
        assert!(error.to_string().contains("start a new one"), "{error}");
    }

    pub async fn past_the_cap_the_idlest_is_replaced_never_a_busy_one(
        store: &Arc<dyn ConversationStore>,
    ) {
        // At most two conversations.
        let old = store.begin(None, None).await.expect("old");
        store.end(&old.id, Some(turn(1, "old"))).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let busy = store.begin(None, None).await.expect("busy, never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
        let new = store
            .begin(None, None)
            .await
            .expect("replaces the idle one");
        assert_eq!(store.count().await, 2);
        assert_eq!(
            store.begin(Some(&old.id), None).await,
            Err(not_found(&old.id))
        );
        // Both held are answering now: nothing can make room.
        assert_eq!(store.begin(None, None).await, Err(ConversationError::Full));
        store.end(&busy.id, Some(turn(1, "b"))).await;
        store.end(&new.id, Some(turn(1, "n"))).await;
        let last = store.begin(None, None).await.expect("room again");
        assert_eq!(store.count().await, 2, "the store stays at the cap");
        store.end(&last.id, Some(turn(1, "l"))).await;
        assert_eq!(
            store.begin(Some(&busy.id), None).await,
            Err(not_found(&busy.id)),
            "the idlest made room"
        );
    }

    pub async fn another_users_conversation_is_not_found(store: &Arc<dyn ConversationStore>) {
        let anas = store.begin(None, Some("ana")).await.expect("ana's");
        let unknown = ConversationId::fresh();
        // Answering: ana herself is told it is busy, anyone else that it does not exist.
        assert!(matches!(
            store.begin(Some(&anas.id), Some("ana")).await,
            Err(ConversationError::Busy { .. })
        ));
        for other in [Some("ben"), None, Some("Ana")] {
            assert_eq!(
                store.begin(Some(&anas.id), other).await,
                Err(not_found(&anas.id)),
                "{other:?}"
            );
        }
        store.end(&anas.id, Some(turn(1, "How many bills?"))).await;
        assert_eq!(
            store.begin(Some(&anas.id), Some("ben")).await,
            Err(not_found(&anas.id))
        );
        assert_eq!(
            store.begin(Some(&unknown), Some("ben")).await,
            Err(not_found(&unknown)),
            "the same error as an id that never existed"
        );
        let continued = store
            .begin(Some(&anas.id), Some("ana"))
            .await
            .expect("ana continues");
        assert_eq!(continued.number, 2);
        store.end(&anas.id, None).await;
        // A conversation begun without users is nobody's: a signed-in user cannot take it.
        let nobodys = store.begin(None, None).await.expect("nobody's");
        store.end(&nobodys.id, Some(turn(1, "q"))).await;
        assert_eq!(
            store.begin(Some(&nobodys.id), Some("ana")).await,
            Err(not_found(&nobodys.id))
        );
    }

    /// A lease begun once an earlier dropped one has been given back (at once for a
    /// store that never waits; after its task for one that does).
    async fn eventually<F, Fut>(begin: F) -> TurnLease
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<TurnLease, ConversationError>>,
    {
        for _ in 0..100 {
            match begin().await {
                Ok(lease) => return lease,
                Err(ConversationError::Busy { .. }) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(error) => panic!("{error}"),
            }
        }
        panic!("the dropped lease was never given back");
    }

    /// The store's count once it is `expected` (or the last count seen, after 2 s).
    async fn eventually_len(store: &Arc<dyn ConversationStore>, expected: usize) -> usize {
        let mut held = store.count().await;
        for _ in 0..100 {
            if held == expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            held = store.count().await;
        }
        held
    }
}
