//! The users `askdb serve` signs in, kept in the shared state for replicas (decision
//! 0083): the table `askdb_state.users` as a [`UserStore`]. What a user is, how its
//! token is made and hashed, which names and policies are allowed and what signs in are
//! `crate::users`'s, applied here to the table's rows. A replica trusts its copy of the
//! table for [`USERS_TTL`], so a user revoked through any replica's CLI is refused by
//! every replica within that, without a restart; an answer that would let a request
//! in unchecked or refuse it (no users yet, a token or name the copy lacks) is given
//! from the table itself, so a user just added is taken at once and the first user
//! added turns sign-in on at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use super::{SharedState, StateError};
use crate::users::{
    authenticate_in, live_in, new_user, sign_in_of, summaries, Authenticated, SignIn, UserRecord,
    UserStore, UserSummary, UsersError, UsersFuture,
};

/// How long a replica trusts its copy of the users: the revoked users' list is read as
/// often ([`super::sign_in::REVOCATIONS_TTL`]), so a revocation reaches every replica
/// in the same time either way.
pub const USERS_TTL: Duration = super::sign_in::REVOCATIONS_TTL;

/// The table, named once for the check that `askdb db setup` made it.
const TABLE: &str = "askdb_state.users";

/// What a user import did: the names copied, and the names already taken there (a user
/// of the table, or a name the shared state lists as revoked), left as they are: a
/// name is never overwritten.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Imported {
    pub added: Vec<String>,
    pub already_there: Vec<String>,
}

/// The shared users over one state database, with this replica's short-lived copy.
#[derive(Debug)]
pub struct SharedUsers {
    state: SharedState,
    cached: Mutex<Option<(Instant, Arc<Vec<UserRecord>>)>>,
}

fn shared(error: StateError) -> UsersError {
    UsersError::Shared(error.to_string())
}

impl SharedUsers {
    /// The users in `state`, once its users table is found: a state made by an
    /// `askdb db setup` older than the table is told to run it again, before the
    /// replica listens.
    pub async fn connect(state: SharedState) -> Result<SharedUsers, StateError> {
        let client = state.pool().get().await?;
        let found: Option<String> = client
            .query_one("SELECT to_regclass($1)::text", &[&TABLE])
            .await?
            .get(0);
        if found.is_none() {
            return Err(StateError::NoSchema {
                url: state.shown_url().to_string(),
                table: TABLE,
            });
        }
        Ok(SharedUsers {
            state,
            cached: Mutex::new(None),
        })
    }

    /// Every row, in the order the users were added, from a copy at most [`USERS_TTL`]
    /// old.
    async fn records(&self) -> Result<Arc<Vec<UserRecord>>, StateError> {
        self.records_within(USERS_TTL).await
    }

    /// Every row, from a copy at most `age` old (zero: from the table).
    async fn records_within(&self, age: Duration) -> Result<Arc<Vec<UserRecord>>, StateError> {
        let mut cached = self.cached.lock().await;
        if let Some((read, records)) = cached.as_ref() {
            if read.elapsed() < age {
                return Ok(Arc::clone(records));
            }
        }
        let client = self.state.pool().get().await?;
        let records: Vec<UserRecord> = client
            .query(
                "SELECT name, token_sha256, created, revoked, policy FROM askdb_state.users ORDER BY id",
                &[],
            )
            .await?
            .iter()
            .map(|row| UserRecord {
                name: row.get(0),
                token_sha256: row.get(1),
                created: row.get(2),
                revoked: row.get(3),
                policy: row.get(4),
            })
            .collect();
        let records = Arc::new(records);
        *cached = Some((Instant::now(), Arc::clone(&records)));
        Ok(records)
    }

    /// This replica's next read goes to the table: what it wrote itself is seen at once.
    async fn forget(&self) {
        *self.cached.lock().await = None;
    }

    /// Inserts `record` unless its name is taken: by a user of the table, revoked or
    /// not, or by a name the shared state lists as revoked (a user revoked before the
    /// users were shared), which every replica would refuse anyway. A record that is
    /// revoked is listed as revoked too, in the same transaction. True when inserted.
    async fn insert(&self, record: &UserRecord) -> Result<bool, StateError> {
        let mut client = self.state.pool().get().await?;
        let transaction = client.transaction().await?;
        let inserted = transaction
            .execute(
                "INSERT INTO askdb_state.users (name, token_sha256, created, revoked, policy)
                 SELECT $1, $2, $3, $4, $5
                 WHERE NOT EXISTS (SELECT 1 FROM askdb_state.revoked_users WHERE user_name = $1)
                 ON CONFLICT (name) DO NOTHING",
                &[
                    &record.name,
                    &record.token_sha256,
                    &record.created,
                    &record.revoked,
                    &record.policy,
                ],
            )
            .await?
            == 1;
        if inserted && record.revoked.is_some() {
            super::sign_in::record_revocation(&transaction, &record.name).await?;
        }
        transaction.commit().await?;
        Ok(inserted)
    }

    async fn add_user(&self, name: &str, policy: Option<&str>) -> Result<String, UsersError> {
        let (record, token) = new_user(name, policy)?;
        let inserted = self.insert(&record).await.map_err(shared)?;
        self.forget().await;
        if !inserted {
            return Err(UsersError::Exists(name.to_string()));
        }
        Ok(token)
    }

    /// Revokes a live user and, in the same transaction, lists it as revoked and ends
    /// its sessions (`super::sign_in`): a replica that still holds a copy of the users
    /// read before the revocation refuses the name from the revoked list.
    async fn revoke_user(&self, name: &str) -> Result<(), UsersError> {
        let revoked = async {
            let mut client = self.state.pool().get().await?;
            let transaction = client.transaction().await?;
            let changed = transaction
                .execute(
                    "UPDATE askdb_state.users SET revoked = $2 WHERE name = $1 AND revoked IS NULL",
                    &[&name, &crate::calendar::utc_now().0],
                )
                .await?;
            if changed == 0 {
                return Ok(false);
            }
            super::sign_in::record_revocation(&transaction, name).await?;
            transaction.commit().await?;
            Ok::<bool, StateError>(true)
        }
        .await
        .map_err(shared)?;
        self.forget().await;
        if !revoked {
            return Err(UsersError::Unknown(name.to_string()));
        }
        Ok(())
    }

    /// Copies users as another store holds them (hashes, never tokens) into the table:
    /// `askdb users --state-url URL import`, once per replica whose users file was its
    /// own before the users were shared. A name the table already has is left as the
    /// table has it; a revoked user is copied revoked, and listed as revoked.
    pub async fn import(&self, records: &[UserRecord]) -> Result<Imported, UsersError> {
        let mut imported = Imported::default();
        for record in records {
            if self.insert(record).await.map_err(shared)? {
                imported.added.push(record.name.clone());
            } else {
                imported.already_there.push(record.name.clone());
            }
        }
        self.forget().await;
        Ok(imported)
    }
}

/// What a copy answers, or, when it answers `miss`, what the table answers: a copy
/// that says "open" or "no such user" may only be older than the user just added.
async fn checked<T: PartialEq>(
    users: &SharedUsers,
    miss: T,
    answer: impl Fn(&[UserRecord]) -> T,
) -> Result<T, UsersError> {
    let copied = answer(&users.records().await.map_err(shared)?);
    if copied != miss {
        return Ok(copied);
    }
    let read = users.records_within(Duration::ZERO).await.map_err(shared)?;
    Ok(answer(&read))
}

impl UserStore for SharedUsers {
    fn sign_in(&self) -> UsersFuture<'_, SignIn> {
        Box::pin(checked(self, SignIn::Open, sign_in_of))
    }

    fn add<'a>(&'a self, name: &'a str, policy: Option<&'a str>) -> UsersFuture<'a, String> {
        Box::pin(self.add_user(name, policy))
    }

    fn list(&self) -> UsersFuture<'_, Vec<UserSummary>> {
        Box::pin(async move { Ok(summaries(&self.records().await.map_err(shared)?)) })
    }

    fn revoke<'a>(&'a self, name: &'a str) -> UsersFuture<'a, ()> {
        Box::pin(self.revoke_user(name))
    }

    fn authenticate<'a>(&'a self, token: &'a str) -> UsersFuture<'a, Option<Authenticated>> {
        Box::pin(checked(self, None, move |users| {
            authenticate_in(users, token)
        }))
    }

    fn live<'a>(&'a self, name: &'a str) -> UsersFuture<'a, Option<Authenticated>> {
        Box::pin(checked(self, None, move |users| live_in(users, name)))
    }
}
