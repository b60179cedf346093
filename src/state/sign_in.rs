//! Sign-in state shared by replicas: the page's sessions (by the SHA-256 of the
//! cookie's value, as in memory) and the users whose tokens were revoked. A session
//! made on one replica is found by every other; a revocation written by
//! `askdb users revoke --state-url ...` is read by each replica at most
//! [`REVOCATIONS_TTL`] after it was written (the list is cached that long, so a busy
//! server reads it once every few seconds, not once a request).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use super::{SharedState, StateError};

/// How long a replica trusts its copy of the revoked users: well inside the 5 s in
/// which a revocation must reach every replica.
pub const REVOCATIONS_TTL: Duration = Duration::from_secs(2);

/// Sessions and revocations over one state database.
#[derive(Debug)]
pub struct SharedSignIn {
    state: SharedState,
    revoked: Mutex<Option<(Instant, BTreeSet<String>)>>,
}

impl SharedSignIn {
    pub fn new(state: SharedState) -> SharedSignIn {
        SharedSignIn {
            state,
            revoked: Mutex::new(None),
        }
    }

    /// Stores a session (`digest` of its cookie) for `user` until `ttl` from now; the
    /// expired ones are swept on the way.
    pub async fn start(&self, digest: &str, user: &str, ttl: Duration) -> Result<(), StateError> {
        let client = self.state.pool().get().await?;
        client
            .execute(
                "DELETE FROM askdb_state.sessions WHERE expires_at < now()",
                &[],
            )
            .await?;
        client
            .execute(
                "INSERT INTO askdb_state.sessions (digest, user_name, expires_at)
                 VALUES ($1, $2, now() + make_interval(secs => $3))
                 ON CONFLICT (digest) DO UPDATE SET user_name = excluded.user_name, expires_at = excluded.expires_at",
                &[&digest, &user, &ttl.as_secs_f64()],
            )
            .await?;
        Ok(())
    }

    /// The user of a live session.
    pub async fn user(&self, digest: &str) -> Result<Option<String>, StateError> {
        let client = self.state.pool().get().await?;
        let row = client
            .query_opt(
                "SELECT user_name FROM askdb_state.sessions WHERE digest = $1 AND expires_at > now()",
                &[&digest],
            )
            .await?;
        Ok(row.map(|row| row.get(0)))
    }

    /// Ends one session.
    pub async fn end(&self, digest: &str) -> Result<(), StateError> {
        let client = self.state.pool().get().await?;
        client
            .execute(
                "DELETE FROM askdb_state.sessions WHERE digest = $1",
                &[&digest],
            )
            .await?;
        Ok(())
    }

    /// Ends every session of `user`.
    pub async fn end_user(&self, user: &str) -> Result<(), StateError> {
        let client = self.state.pool().get().await?;
        client
            .execute(
                "DELETE FROM askdb_state.sessions WHERE user_name = $1",
                &[&user],
            )
            .await?;
        Ok(())
    }

    /// Whether `user`'s token was revoked, from a copy at most [`REVOCATIONS_TTL`] old.
    pub async fn is_revoked(&self, user: &str) -> Result<bool, StateError> {
        let mut cached = self.revoked.lock().await;
        if let Some((read, names)) = cached.as_ref() {
            if read.elapsed() < REVOCATIONS_TTL {
                return Ok(names.contains(user));
            }
        }
        let client = self.state.pool().get().await?;
        let names: BTreeSet<String> = client
            .query("SELECT user_name FROM askdb_state.revoked_users", &[])
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let revoked = names.contains(user);
        *cached = Some((Instant::now(), names));
        Ok(revoked)
    }
}

/// Records `user`'s revocation in the shared state at `url` and ends its sessions
/// there: every replica refuses the name within [`REVOCATIONS_TTL`], whichever store
/// its users are in.
pub async fn revoke(url: &str, user: &str) -> Result<(), StateError> {
    let state = SharedState::connect(url).await?;
    let mut client = state.pool().get().await?;
    let transaction = client.transaction().await?;
    record_revocation(&transaction, user).await?;
    transaction.commit().await?;
    Ok(())
}

/// Within the caller's transaction: `user` joins the revoked list and its sessions end.
pub(crate) async fn record_revocation(
    transaction: &tokio_postgres::Transaction<'_>,
    user: &str,
) -> Result<(), StateError> {
    transaction
        .execute(
            "INSERT INTO askdb_state.revoked_users (user_name) VALUES ($1) ON CONFLICT (user_name) DO NOTHING",
            &[&user],
        )
        .await?;
    transaction
        .execute(
            "DELETE FROM askdb_state.sessions WHERE user_name = $1",
            &[&user],
        )
        .await?;
    Ok(())
}
