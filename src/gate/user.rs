//! Whom the gate's work is for (decision 0077): the signed-in user's name, set by the
//! server around a request's work and read by the PostgreSQL executor, which sets it as
//! the transaction-local `askdb.user` inside every read-only transaction so the
//! database's own row-level security policies filter rows per user. Only askdb sets it,
//! with a bound parameter; the guard refuses `set_config` and `current_setting` in any
//! statement, so a query can neither change nor read it. Work outside a scope (the CLI,
//! a task spawned away from the request) runs with no user: the setting is empty, and an
//! RLS policy's default for that applies.

use std::future::Future;
use std::sync::Arc;

/// The name PostgreSQL's transaction-local setting carries.
pub const USER_SETTING: &str = "askdb.user";

tokio::task_local! {
    static SIGNED_IN: Option<Arc<str>>;
}

/// Runs `work` on behalf of `user` (None: nobody signed in).
pub async fn as_user<F: Future>(user: Option<&str>, work: F) -> F::Output {
    SIGNED_IN.scope(user.map(Arc::from), work).await
}

/// The user the current work is for, if any.
pub(crate) fn current() -> Option<Arc<str>> {
    SIGNED_IN.try_with(Clone::clone).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_user_is_known_inside_its_scope_only() {
        assert_eq!(current(), None);
        let inside = as_user(Some("ana"), async { current() }).await;
        assert_eq!(inside.as_deref(), Some("ana"));
        let nested = as_user(Some("ana"), as_user(None, async { current() })).await;
        assert_eq!(nested, None);
        assert_eq!(current(), None);
    }
}
