//! Conversations kept between questions: who may continue one, what a follow-up is
//! asked with, and the bounds that keep them small. One trait, [`ConversationStore`],
//! with the in-memory implementation of one process ([`memory::InMemoryStore`], the
//! server's) and files in askdb's data directory ([`files::FileStore`], the command
//! line's, whose every question is a process of its own) and askdb's own PostgreSQL
//! schema ([`postgres::PostgresConversationStore`], shared by several replicas of
//! `askdb serve`, decision 0080). The trait's methods return futures so a store can wait
//! on its server without holding a runtime thread.
//!
//! A question takes a [`TurnLease`] before the agent runs: a new conversation, or the
//! next turn of a known one with its earlier turns ([`crate::agent::conversation::Context`]).
//! While a lease is held the conversation is answering, and a second question on it is
//! refused ([`ConversationError::Busy`]), never interleaved. The lease records the turn
//! when the answer is in ([`TurnLease::finish`]); dropped without it (an error, a
//! timeout, a client gone) it leaves the conversation as it was.
//!
//! A conversation belongs to the user who began it (`askdb serve`'s signed-in user; None
//! when no users exist). Continuing it as anyone else is refused exactly as an unknown
//! id is ([`ConversationError::NotFound`]), before the busy check, so another user learns
//! neither that it exists nor that it is answering.

pub mod files;
pub mod memory;
pub mod postgres;

use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::agent::conversation::{Context, Turn, TURNS_IN_PROMPT};
use crate::agent::AgentResult;

/// How long a conversation is kept after its latest question.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 60);

/// The most conversations one process holds.
pub const DEFAULT_MAX_CONVERSATIONS: usize = 1_000;

/// The bounds of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A conversation not asked anything for this long is gone.
    pub ttl: Duration,
    /// The most conversations held; a new one then replaces the one idle longest.
    pub max_conversations: usize,
    /// The most turns a conversation keeps: the ones its prompt can carry.
    pub turns_kept: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            ttl: DEFAULT_TTL,
            max_conversations: DEFAULT_MAX_CONVERSATIONS,
            turns_kept: TURNS_IN_PROMPT,
        }
    }
}

/// A conversation's id: 32 lower-case hex digits, unguessable, so one user cannot
/// continue another's conversation by counting.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConversationId(String);

/// The length of an id in hex digits.
const ID_DIGITS: usize = 32;

impl ConversationId {
    /// A fresh id: two SipHash outputs under the process's random keys (seeded by the
    /// operating system), of a counter and the time, so ids neither repeat nor follow
    /// one another.
    pub fn fresh() -> ConversationId {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or_default();
        let half = |salt: u64| {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(salt);
            hasher.write_u64(count);
            hasher.write_u128(nanos);
            hasher.finish()
        };
        ConversationId(format!("{:016x}{:016x}", half(1), half(2)))
    }

    /// An id as a client sent it; refused unless it has an id's form.
    pub fn parse(text: &str) -> Result<ConversationId, ConversationError> {
        let text = text.trim();
        let well_formed = text.len() == ID_DIGITS
            && text
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if well_formed {
            Ok(ConversationId(text.to_string()))
        } else {
            Err(ConversationError::NotFound {
                id: crate::text::cut_text(text, 40),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ConversationId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a question cannot continue a conversation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversationError {
    /// Unknown, expired or replaced: the server answers 404.
    #[error(
        "no conversation {id}: it expired after a while without a question, or never existed; \
         ask without its id to start a new one"
    )]
    NotFound { id: String },
    /// A question on it is still being answered: the server answers 409.
    #[error(
        "conversation {id} is still answering its previous question; ask again once it has \
         answered"
    )]
    Busy { id: String },
    /// Every conversation held is answering a question, so none can make room: 503.
    #[error("askdb holds as many conversations as it allows and each is answering a question")]
    Full,
    /// The store could not be read or written (a file store's directory, a database).
    #[error("the conversation store failed: {0}")]
    Storage(String),
}

/// A turn begun: the conversation, the turn's number and the earlier turns it continues.
#[derive(Debug, Clone, PartialEq)]
pub struct Begun {
    pub id: ConversationId,
    pub number: u32,
    pub context: Context,
}

/// Who a conversation belongs to: the signed-in user who began it, or None when the
/// server signs no one in (and for the command line).
pub type Owner<'a> = Option<&'a str>;

/// What a store's method returns: a future, so a networked store can wait on its server.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where conversations live between questions.
///
/// A store that needs no waiting (memory, files) does its work when the method is
/// called and returns a ready future, so a dropped [`TurnLease`] gives its conversation
/// back before `drop` returns.
pub trait ConversationStore: Send + Sync {
    /// Begins a turn: of a new conversation (`id` None) that `owner` then owns, or of
    /// `id`, refused when that is unknown, expired or another owner's (all three
    /// [`ConversationError::NotFound`]), or is answering a question.
    fn begin<'a>(
        &'a self,
        id: Option<&'a ConversationId>,
        owner: Owner<'a>,
    ) -> StoreFuture<'a, Result<Begun, ConversationError>>;

    /// Ends the turn `begin` gave: records it (`Some`) or leaves the conversation as it
    /// was (`None`). Either way the conversation takes questions again.
    fn end<'a>(&'a self, id: &'a ConversationId, turn: Option<Turn>) -> StoreFuture<'a, ()>;

    /// How many conversations are held.
    fn count(&self) -> StoreFuture<'_, usize>;
}

/// A ready future: what the stores that never wait return.
fn ready<'a, T: Send + 'a>(value: T) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

/// A turn in flight: holds its conversation busy until it is finished or dropped.
pub struct TurnLease {
    store: Arc<dyn ConversationStore>,
    begun: Begun,
    ended: bool,
}

impl TurnLease {
    /// Begins a turn in `store` as `owner` ([`ConversationStore::begin`]).
    pub async fn begin(
        store: &Arc<dyn ConversationStore>,
        id: Option<&ConversationId>,
        owner: Owner<'_>,
    ) -> Result<TurnLease, ConversationError> {
        // In a task of its own: a request dropped while a shared store begins the turn
        // (the client went away) must not leave the conversation answering until its
        // lease runs out, so a turn begun for nobody is given back at once.
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let task_store = Arc::clone(store);
        let id = id.cloned();
        let owner = owner.map(str::to_string);
        tokio::spawn(async move {
            let begun = task_store.begin(id.as_ref(), owner.as_deref()).await;
            if let Err(Ok(begun)) = sender.send(begun) {
                task_store.end(&begun.id, None).await;
            }
        });
        let begun = receiver.await.map_err(|_| {
            ConversationError::Storage(
                "the conversation store stopped while beginning a turn".into(),
            )
        })??;
        Ok(TurnLease {
            store: Arc::clone(store),
            begun,
            ended: false,
        })
    }

    pub fn id(&self) -> &ConversationId {
        &self.begun.id
    }

    /// The turn's number: 1 for a conversation's first question.
    pub fn number(&self) -> u32 {
        self.begun.number
    }

    /// The earlier turns this question continues.
    pub fn context(&self) -> &Context {
        &self.begun.context
    }

    /// Records the answered (or declined, given up, clarified) turn.
    pub async fn finish(mut self, result: &AgentResult) {
        self.ended = true;
        let turn = Turn::from_result(self.begun.number, result);
        // In a task of its own, so the turn is recorded and the conversation freed even
        // when the request that asked is dropped while this waits.
        let store = Arc::clone(&self.store);
        let id = self.begun.id.clone();
        let _ = tokio::spawn(async move { store.end(&id, Some(turn)).await }).await;
    }
}

impl Drop for TurnLease {
    /// Gives the conversation back unchanged. `drop` cannot wait on a runtime: there
    /// the end is polled once (a store that never waits is done then) and what is left
    /// runs as a task of its own; outside a runtime it runs to its end on a thread of its
    /// own. Should even that be lost (the process ends), a shared store's lease expires
    /// by itself.
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let store = Arc::clone(&self.store);
        let id = self.begun.id.clone();
        let mut ending: StoreFuture<'static, ()> =
            Box::pin(async move { store.end(&id, None).await });
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let mut context = std::task::Context::from_waker(std::task::Waker::noop());
                if ending.as_mut().poll(&mut context).is_pending() {
                    runtime.spawn(ending);
                }
            }
            Err(_) => {
                let _ = std::thread::spawn(move || {
                    if let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        runtime.block_on(ending);
                    }
                })
                .join();
            }
        }
    }
}

#[cfg(test)]
mod postgres_tests;
#[cfg(test)]
mod tests;
