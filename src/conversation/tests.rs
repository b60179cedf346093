//! The store's bounds, each on its own: the time to live, the cap on conversations, the
//! cap on turns kept, one question at a time per conversation, and a lease that gives
//! its conversation back however it ends.

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

fn turn(number: u32, question: &str) -> Turn {
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
    assert_eq!(store.len(), 0, "an expired conversation is dropped");
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
    assert_eq!(store.len(), 2);
    assert!(matches!(
        store.begin_at(Some(&old.id), None, t1),
        Err(ConversationError::NotFound { .. })
    ));
    // Both held are answering now: nothing can make room.
    assert_eq!(store.begin_at(None, None, t1), Err(ConversationError::Full));
    store.end_at(&busy.id, Some(turn(1, "b")), t1);
    store.end_at(&new.id, Some(turn(1, "n")), t1);
    assert!(store.begin_at(None, None, t1).is_ok());
    assert_eq!(store.len(), 2, "memory stays at the cap");
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
fn a_dropped_lease_gives_its_conversation_back_unchanged() {
    let store: Arc<dyn ConversationStore> = Arc::new(InMemoryStore::new(Limits::default()));
    let first = TurnLease::begin(&store, None, None).expect("new");
    let id = first.id().clone();
    first.finish(&AgentResult::for_tests("q1", Decision::Answer));
    {
        let failed = TurnLease::begin(&store, Some(&id), None).expect("second");
        assert_eq!(failed.number(), 2);
        assert!(matches!(
            TurnLease::begin(&store, Some(&id), None),
            Err(ConversationError::Busy { .. })
        ));
        // Dropped: the ask failed or its client went away.
    }
    let again = TurnLease::begin(&store, Some(&id), None).expect("free again");
    assert_eq!(again.number(), 2, "the failed question left no turn");
    assert_eq!(again.context().turns.len(), 1);
    drop(again);
    // A new conversation whose first question failed leaves nothing behind.
    let lost = TurnLease::begin(&store, None, None).expect("new");
    drop(lost);
    assert_eq!(store.len(), 1);
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
