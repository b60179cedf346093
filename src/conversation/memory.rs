//! Conversations in this process's memory, bounded three ways: a conversation idle
//! longer than the time to live is gone; past the cap on conversations a new one
//! replaces the one idle longest (never one answering a question); each keeps only the
//! turns its prompt can carry. Each remembers its owner ([`super::Owner`]). Each turn is bounded in size ([`Turn::from_result`]), so
//! memory stays flat however many questions arrive.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Instant;

use super::{
    ready, Begun, ConversationError, ConversationId, ConversationStore, Limits, Owner, StoreFuture,
};
use crate::agent::conversation::{Context, Turn};

struct Held {
    turns: VecDeque<Turn>,
    /// The number the next turn gets (turns dropped past the cap keep their numbers).
    next_number: u32,
    last_used: Instant,
    /// A question on it is being answered.
    answering: bool,
    /// The user who began it.
    owner: Option<String>,
}

/// The in-memory store.
pub struct InMemoryStore {
    limits: Limits,
    held: Mutex<HashMap<ConversationId, Held>>,
}

impl InMemoryStore {
    pub fn new(limits: Limits) -> InMemoryStore {
        InMemoryStore {
            limits,
            held: Mutex::new(HashMap::new()),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<ConversationId, Held>> {
        // A panic elsewhere while holding the lock leaves the map whole: every change
        // below is one insert, remove or field write.
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// [`ConversationStore::begin`] at a given time (the tests' clock).
    pub fn begin_at(
        &self,
        id: Option<&ConversationId>,
        owner: Owner<'_>,
        now: Instant,
    ) -> Result<Begun, ConversationError> {
        let mut held = self.held();
        let ttl = self.limits.ttl;
        let expired = |entry: &Held| {
            !entry.answering && now.saturating_duration_since(entry.last_used) >= ttl
        };
        if let Some(id) = id {
            let Some(entry) = held.get_mut(id) else {
                return Err(ConversationError::NotFound { id: id.to_string() });
            };
            // Another user's conversation does not exist for this one: checked before
            // anything that could tell it apart from an unknown id (expiry, busy).
            if entry.owner.as_deref() != owner {
                return Err(ConversationError::NotFound { id: id.to_string() });
            }
            if expired(entry) {
                held.remove(id);
                return Err(ConversationError::NotFound { id: id.to_string() });
            }
            if entry.answering {
                return Err(ConversationError::Busy { id: id.to_string() });
            }
            entry.answering = true;
            entry.last_used = now;
            return Ok(Begun {
                id: id.clone(),
                number: entry.next_number,
                context: Context::new(entry.turns.iter().cloned().collect()),
            });
        }
        held.retain(|_, entry| !expired(entry));
        if held.len() >= self.limits.max_conversations.max(1) {
            let idlest = held
                .iter()
                .filter(|(_, entry)| !entry.answering)
                .min_by_key(|(_, entry)| entry.last_used)
                .map(|(id, _)| id.clone());
            match idlest {
                Some(idlest) => {
                    held.remove(&idlest);
                }
                None => return Err(ConversationError::Full),
            }
        }
        let mut id = ConversationId::fresh();
        while held.contains_key(&id) {
            id = ConversationId::fresh();
        }
        held.insert(
            id.clone(),
            Held {
                turns: VecDeque::new(),
                next_number: 1,
                last_used: now,
                answering: true,
                owner: owner.map(str::to_string),
            },
        );
        Ok(Begun {
            id,
            number: 1,
            context: Context::default(),
        })
    }

    /// [`ConversationStore::end`] at a given time.
    pub fn end_at(&self, id: &ConversationId, turn: Option<Turn>, now: Instant) {
        let mut held = self.held();
        let Some(entry) = held.get_mut(id) else {
            return;
        };
        entry.answering = false;
        entry.last_used = now;
        match turn {
            Some(turn) => {
                entry.next_number = turn.number.saturating_add(1);
                entry.turns.push_back(turn);
                while entry.turns.len() > self.limits.turns_kept {
                    entry.turns.pop_front();
                }
            }
            // A first question that never ended leaves nothing to continue.
            None if entry.turns.is_empty() => {
                held.remove(id);
            }
            None => {}
        }
    }
}

impl InMemoryStore {
    /// How many conversations are held.
    pub fn held_count(&self) -> usize {
        self.held().len()
    }
}

impl ConversationStore for InMemoryStore {
    fn begin<'a>(
        &'a self,
        id: Option<&'a ConversationId>,
        owner: Owner<'a>,
    ) -> StoreFuture<'a, Result<Begun, ConversationError>> {
        ready(self.begin_at(id, owner, Instant::now()))
    }

    fn end<'a>(&'a self, id: &'a ConversationId, turn: Option<Turn>) -> StoreFuture<'a, ()> {
        self.end_at(id, turn, Instant::now());
        ready(())
    }

    fn count(&self) -> StoreFuture<'_, usize> {
        ready(self.held_count())
    }
}
