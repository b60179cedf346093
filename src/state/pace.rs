//! The askers' token buckets shared by replicas: the same bucket as
//! `server::limits::RateLimiter` (`per_minute` tokens, refilled evenly over a minute,
//! one a question), kept as a row per asker and taken in one statement, so concurrent
//! questions from one asker on several replicas queue on that row's lock and never
//! take the same token twice. The clock is the database's, so replicas' clocks need
//! not agree.

use std::time::Duration;

use super::{SharedState, StateError};

/// The shared buckets over one state database.
#[derive(Debug, Clone)]
pub struct SharedBuckets {
    state: SharedState,
}

impl SharedBuckets {
    pub fn new(state: SharedState) -> SharedBuckets {
        SharedBuckets { state }
    }

    /// Takes a token for `asker`, or says how long until one is available. 0 per
    /// minute takes nothing.
    pub async fn take(
        &self,
        asker: &str,
        per_minute: u32,
    ) -> Result<Result<(), Duration>, StateError> {
        if per_minute == 0 {
            return Ok(Ok(()));
        }
        let capacity = f64::from(per_minute);
        let client = self.state.pool().get().await?;
        // A new asker starts full; a known one is refilled for the time since its last
        // question and pays one token, or the row is left as it was.
        let taken = client
            .query_opt(
                "INSERT INTO askdb_state.rate_buckets AS b (asker, tokens, updated_at)
                 VALUES ($1, $2::float8 - 1, clock_timestamp())
                 ON CONFLICT (asker) DO UPDATE SET
                     tokens = least($2::float8, b.tokens + extract(epoch FROM clock_timestamp() - b.updated_at)::float8 * $2::float8 / 60.0) - 1,
                     updated_at = clock_timestamp()
                 WHERE least($2::float8, b.tokens + extract(epoch FROM clock_timestamp() - b.updated_at)::float8 * $2::float8 / 60.0) >= 1
                 RETURNING tokens",
                &[&asker, &capacity],
            )
            .await?;
        if taken.is_some() {
            return Ok(Ok(()));
        }
        let tokens: f64 = client
            .query_opt(
                "SELECT least($2::float8, tokens + extract(epoch FROM clock_timestamp() - updated_at)::float8 * $2::float8 / 60.0)
                 FROM askdb_state.rate_buckets WHERE asker = $1",
                &[&asker, &capacity],
            )
            .await?
            .map_or(0.0, |row| row.get(0));
        let per_second = capacity / 60.0;
        Ok(Err(Duration::from_secs_f64(
            ((1.0 - tokens) / per_second).max(0.0),
        )))
    }
}
