//! Conversations in askdb's own PostgreSQL schema (`askdb_state`), shared by every
//! replica of `askdb serve` (decision 0080): a conversation begun on one replica
//! continues on any other, with the same bounds as the in-memory store (time to live,
//! cap on conversations held, cap on turns kept, the owner check) and the same one
//! question at a time.
//!
//! "Answering" lives in the database as a lease: `lease_until`, set by `begin` to the
//! database's clock plus [`DEFAULT_LEASE`] and cleared by `end`. A second question while
//! it lies ahead is [`ConversationError::Busy`] on every replica; a replica that dies
//! mid-question leaves a lease that runs out by itself, so no conversation stays locked.
//! Every time is the database's (`clock_timestamp()`), never a replica's, so replicas
//! whose clocks differ still agree on what has expired.
//!
//! Each `begin` and `end` is one transaction whose conversation row is locked
//! (`FOR UPDATE`); new conversations also take one transaction-scoped advisory lock, so
//! two replicas making room at once cannot both pass the cap.

use std::time::Duration;

use deadpool_postgres::Pool;

use super::{
    Begun, ConversationError, ConversationId, ConversationStore, Limits, Owner, StoreFuture,
};
use crate::agent::conversation::{Context, Turn};
// The schema's statement is the examples' store's, the lower layer of the two.
use crate::state::schema;

/// How long a question may hold its conversation before another may take it: a minute
/// past the server's default longest ask (`--ask-timeout-secs`, 600), so a live
/// question's lease never runs out; a server with a longer timeout passes its own
/// ([`PostgresConversationStore::with_lease`]).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(660);

/// The statements, in order.
pub const DDL: [&str; 4] = [
    schema::CREATE_SCHEMA,
    schema::CONVERSATIONS,
    schema::CONVERSATION_TURNS,
    schema::CONVERSATIONS_LAST_USED_INDEX,
];

/// The advisory lock key new conversations take (the bytes of "askdbcnv").
const NEW_CONVERSATION_LOCK: i64 = 0x6173_6b64_6263_6e76;

/// Applies [`DDL`]: each statement creates only what is missing.
pub async fn ensure_tables(pool: &Pool) -> Result<(), ConversationError> {
    let client = pool.get().await.map_err(storage)?;
    for statement in DDL {
        client.batch_execute(statement).await.map_err(storage)?;
    }
    Ok(())
}

fn storage(error: impl std::fmt::Display) -> ConversationError {
    ConversationError::Storage(format!("PostgreSQL: {error}"))
}

/// The store over one pool.
#[derive(Clone)]
pub struct PostgresConversationStore {
    pool: Pool,
    limits: Limits,
    lease: Duration,
}

impl PostgresConversationStore {
    /// The store; its tables must exist ([`ensure_tables`]).
    pub fn new(pool: Pool, limits: Limits) -> PostgresConversationStore {
        PostgresConversationStore {
            pool,
            limits,
            lease: DEFAULT_LEASE,
        }
    }

    /// The same store with a question holding its conversation for `lease` at most.
    pub fn with_lease(mut self, lease: Duration) -> PostgresConversationStore {
        self.lease = lease;
        self
    }

    async fn begin_turn(
        &self,
        id: Option<&ConversationId>,
        owner: Owner<'_>,
    ) -> Result<Begun, ConversationError> {
        let mut client = self.pool.get().await.map_err(storage)?;
        let transaction = client.transaction().await.map_err(storage)?;
        let ttl = self.limits.ttl.as_secs_f64();
        let lease = self.lease.as_secs_f64();
        let Some(id) = id else {
            transaction
                .execute(
                    "SELECT pg_catalog.pg_advisory_xact_lock($1)",
                    &[&NEW_CONVERSATION_LOCK],
                )
                .await
                .map_err(storage)?;
            // The expired ones first, as the memory store does; a conversation whose
            // question is answering never expires, one whose lease ran out does.
            transaction
                .execute(
                    "DELETE FROM askdb_state.conversations \
                     WHERE (lease_until IS NULL OR lease_until <= clock_timestamp()) \
                     AND last_used <= clock_timestamp() - $1::float8 * interval '1 second'",
                    &[&ttl],
                )
                .await
                .map_err(storage)?;
            let held: i64 = transaction
                .query_one("SELECT count(*) FROM askdb_state.conversations", &[])
                .await
                .map_err(storage)?
                .get(0);
            let cap = i64::try_from(self.limits.max_conversations.max(1)).unwrap_or(i64::MAX);
            if held >= cap {
                let replaced = transaction
                    .execute(
                        // The lease is tested again on the row deleted: a replica that
                        // took the conversation while this waited for its lock has made
                        // it answering, and the subquery's pick would not see that.
                        "DELETE FROM askdb_state.conversations WHERE id = (\
                         SELECT id FROM askdb_state.conversations \
                         WHERE lease_until IS NULL OR lease_until <= clock_timestamp() \
                         ORDER BY last_used LIMIT 1 FOR UPDATE SKIP LOCKED) \
                         AND (lease_until IS NULL OR lease_until <= clock_timestamp())",
                        &[],
                    )
                    .await
                    .map_err(storage)?;
                if replaced == 0 {
                    return Err(ConversationError::Full);
                }
            }
            let id = ConversationId::fresh();
            transaction
                .execute(
                    "INSERT INTO askdb_state.conversations \
                     (id, owner, next_number, last_used, lease_until) \
                     VALUES ($1, $2, 1, clock_timestamp(), \
                     clock_timestamp() + $3::float8 * interval '1 second')",
                    &[&id.as_str(), &owner, &lease],
                )
                .await
                .map_err(storage)?;
            transaction.commit().await.map_err(storage)?;
            return Ok(Begun {
                id,
                number: 1,
                context: Context::default(),
            });
        };
        let not_found = || ConversationError::NotFound { id: id.to_string() };
        let Some(row) = transaction
            .query_opt(
                "SELECT owner, next_number, \
                 lease_until IS NOT NULL AND lease_until > clock_timestamp(), \
                 last_used <= clock_timestamp() - $2::float8 * interval '1 second' \
                 FROM askdb_state.conversations WHERE id = $1 FOR UPDATE",
                &[&id.as_str(), &ttl],
            )
            .await
            .map_err(storage)?
        else {
            return Err(not_found());
        };
        let held_by: Option<String> = row.get(0);
        let next_number: i32 = row.get(1);
        let answering: bool = row.get(2);
        let idle_too_long: bool = row.get(3);
        // Another user's conversation does not exist for this one: checked before
        // anything that could tell it apart from an unknown id (expiry, busy).
        if held_by.as_deref() != owner {
            return Err(not_found());
        }
        if !answering && idle_too_long {
            transaction
                .execute(
                    "DELETE FROM askdb_state.conversations WHERE id = $1",
                    &[&id.as_str()],
                )
                .await
                .map_err(storage)?;
            transaction.commit().await.map_err(storage)?;
            return Err(not_found());
        }
        if answering {
            return Err(ConversationError::Busy { id: id.to_string() });
        }
        transaction
            .execute(
                "UPDATE askdb_state.conversations SET last_used = clock_timestamp(), \
                 lease_until = clock_timestamp() + $2::float8 * interval '1 second' WHERE id = $1",
                &[&id.as_str(), &lease],
            )
            .await
            .map_err(storage)?;
        let rows = transaction
            .query(
                "SELECT turn FROM askdb_state.conversation_turns \
                 WHERE conversation_id = $1 ORDER BY number",
                &[&id.as_str()],
            )
            .await
            .map_err(storage)?;
        let mut turns = Vec::with_capacity(rows.len());
        for row in rows {
            let text: String = row.get(0);
            turns.push(serde_json::from_str::<Turn>(&text).map_err(|error| {
                storage(format!("conversation {id}: an unreadable turn: {error}"))
            })?);
        }
        transaction.commit().await.map_err(storage)?;
        Ok(Begun {
            id: id.clone(),
            number: u32::try_from(next_number).unwrap_or(1).max(1),
            context: Context::new(turns),
        })
    }

    async fn end_turn(
        &self,
        id: &ConversationId,
        turn: Option<Turn>,
    ) -> Result<(), ConversationError> {
        let mut client = self.pool.get().await.map_err(storage)?;
        let transaction = client.transaction().await.map_err(storage)?;
        match turn {
            Some(turn) => {
                let number = i32::try_from(turn.number).unwrap_or(i32::MAX);
                let text = serde_json::to_string(&turn).map_err(storage)?;
                // Only the turn the lease was taken for: an end arriving after its lease
                // ran out and another question was recorded adds nothing.
                let taken = transaction
                    .execute(
                        "UPDATE askdb_state.conversations SET lease_until = NULL, \
                         last_used = clock_timestamp(), next_number = $2 + 1 \
                         WHERE id = $1 AND next_number = $2",
                        &[&id.as_str(), &number],
                    )
                    .await
                    .map_err(storage)?;
                if taken == 0 {
                    return Ok(());
                }
                transaction
                    .execute(
                        "INSERT INTO askdb_state.conversation_turns \
                         (conversation_id, number, turn) VALUES ($1, $2, $3)",
                        &[&id.as_str(), &number, &text],
                    )
                    .await
                    .map_err(storage)?;
                let kept = i32::try_from(self.limits.turns_kept).unwrap_or(i32::MAX);
                transaction
                    .execute(
                        "DELETE FROM askdb_state.conversation_turns \
                         WHERE conversation_id = $1 AND number <= $2::integer - $3::integer",
                        &[&id.as_str(), &number, &kept],
                    )
                    .await
                    .map_err(storage)?;
            }
            None => {
                // A first question that never ended leaves nothing to continue.
                transaction
                    .execute(
                        "DELETE FROM askdb_state.conversations c WHERE id = $1 \
                         AND NOT EXISTS (SELECT 1 FROM askdb_state.conversation_turns t \
                         WHERE t.conversation_id = c.id)",
                        &[&id.as_str()],
                    )
                    .await
                    .map_err(storage)?;
                transaction
                    .execute(
                        "UPDATE askdb_state.conversations SET lease_until = NULL, \
                         last_used = clock_timestamp() WHERE id = $1",
                        &[&id.as_str()],
                    )
                    .await
                    .map_err(storage)?;
            }
        }
        transaction.commit().await.map_err(storage)
    }
}

impl ConversationStore for PostgresConversationStore {
    fn begin<'a>(
        &'a self,
        id: Option<&'a ConversationId>,
        owner: Owner<'a>,
    ) -> StoreFuture<'a, Result<Begun, ConversationError>> {
        Box::pin(self.begin_turn(id, owner))
    }

    fn end<'a>(&'a self, id: &'a ConversationId, turn: Option<Turn>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            // The answer was already given; a turn that cannot be recorded is lost and
            // the lease runs out by itself, so the conversation is never stuck.
            if let Err(error) = self.end_turn(id, turn).await {
                eprintln!("askdb: conversation {id} could not be ended: {error}");
            }
        })
    }

    fn count(&self) -> StoreFuture<'_, usize> {
        Box::pin(async move {
            let Ok(client) = self.pool.get().await else {
                return 0;
            };
            client
                .query_one("SELECT count(*) FROM askdb_state.conversations", &[])
                .await
                .map(|row| usize::try_from(row.get::<_, i64>(0)).unwrap_or(0))
                .unwrap_or(0)
        })
    }
}
