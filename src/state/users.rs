//! The users `askdb serve` signs in, kept in the shared state for replicas (decision
//! 0083): the table `askdb_state.users` as a [`UserStore`]. What a user is, how its
//! token is made and hashed, which names and policies are allowed and what signs in are
//! `crate::users`'s, applied here to the table's rows. A replica trusts its copy of the
//! table for [`USERS_TTL`], so a user revoked through any replica's CLI is refused by
//! every replica within that, without a restart; an answer that would let a request
//! in unchecked or refuse it (no users yet, a token or name the copy lacks) is given
//! from a copy at most [`MISS_REREAD_AFTER`] old, so a user just added is taken, and
//! the first user added turns sign-in on, within that. One read of the table at a
//! time: every caller needing a newer copy waits for the same read.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use super::{SharedState, StateError};
use crate::users::{
    authenticate_in, live_in, new_user, sign_in_of, summaries, Authenticated, SignIn, UserRecord,
    UserStore, UserSummary, UsersError, UsersFuture,
};

/// How long a replica trusts its copy of the users: the revoked users' list is read as
/// often ([`super::sign_in::REVOCATIONS_TTL`]), so a revocation reaches every replica
/// in the same time either way.
pub const USERS_TTL: Duration = super::sign_in::REVOCATIONS_TTL;

/// How young a copy answers a miss (a token or name the copy lacks, no users yet)
/// without another read: wrong tokens and unknown proxy names cannot make a replica
/// read the table more than once in this time, and a user just added signs in once a
/// read this long after the add has been made.
pub const MISS_REREAD_AFTER: Duration = Duration::from_millis(250);

/// The table, named once for the check that `askdb db setup` made it.
const TABLE: &str = "askdb_state.users";

/// What a user import did, a name each in one list: never overwritten, a name keeps
/// the token the table has.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Imported {
    /// Copied as the file has them, revoked ones revoked.
    pub added: Vec<String>,
    /// Live in the file but listed as revoked by the shared state (revoked with
    /// `--state-url` before the users were shared): copied revoked, as every replica
    /// already refused them.
    pub added_revoked: Vec<String>,
    /// Revoked in the file and live in the table: revoked in the table too, since a
    /// revocation only narrows.
    pub revoked_there: Vec<String>,
    /// In the table already, left as they are.
    pub already_there: Vec<String>,
}

/// One read of the table, or its error as text (a state error is not `Clone`, and
/// every waiter of the read gets the same answer).
type Read = Result<(Instant, Arc<Vec<UserRecord>>), (Instant, String)>;

/// This replica's copy and the read under way, behind a lock never held across a
/// query.
#[derive(Debug, Default)]
struct Copy {
    /// The last answer of a read, ok or not, with when that read started.
    last: Option<Read>,
    /// The read every caller needing a newer copy waits for: one at a time.
    flight: Option<Arc<OnceCell<Read>>>,
}

/// The shared users over one state database, with this replica's short-lived copy.
#[derive(Debug)]
pub struct SharedUsers {
    state: SharedState,
    copy: Mutex<Copy>,
    /// [`USERS_TTL`] and [`MISS_REREAD_AFTER`], longer in tests that count reads.
    lifetime: Duration,
    miss_reread_after: Duration,
    /// How many times the table was read, for the tests of the single read.
    reads: std::sync::atomic::AtomicU64,
}

fn shared(error: StateError) -> UsersError {
    UsersError::Shared(error.to_string())
}

impl SharedUsers {
    /// The users in `state`, once its users table is found: a state made by an
    /// `askdb db setup` older than the table is told to run it again, before the
    /// replica listens.
    pub async fn connect(state: SharedState) -> Result<SharedUsers, StateError> {
        state.require_table(TABLE).await?;
        Ok(SharedUsers {
            state,
            copy: Mutex::new(Copy::default()),
            lifetime: USERS_TTL,
            miss_reread_after: MISS_REREAD_AFTER,
            reads: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The same store trusting its copy for `lifetime` and answering a miss from a copy
    /// as young as `miss_reread_after` (tests: long times show that concurrent requests
    /// share one read however slowly they run).
    #[cfg(test)]
    pub(crate) fn with_lifetimes(
        mut self,
        lifetime: Duration,
        miss_reread_after: Duration,
    ) -> SharedUsers {
        self.lifetime = lifetime;
        self.miss_reread_after = miss_reread_after;
        self
    }

    /// How many times this store read the table.
    #[cfg(test)]
    pub(crate) fn reads(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn copy(&self) -> MutexGuard<'_, Copy> {
        // The copy is replaced whole, so a panic elsewhere cannot leave it half written.
        match self.copy.lock() {
            Ok(copy) => copy,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Every row, in the order the users were added, from a copy at most [`USERS_TTL`]
    /// old.
    async fn records(&self) -> Result<Arc<Vec<UserRecord>>, UsersError> {
        self.records_within(self.lifetime).await
    }

    /// Every row, from a read that started at most `age` ago. One read at a time: a
    /// caller needing a newer copy while a read is under way waits for that read's
    /// answer, ok or not, so during a state outage concurrent requests wait for one
    /// timeout, not one each, and a failed read is the answer for
    /// [`MISS_REREAD_AFTER`] (or `age`, if shorter) before the table is tried again.
    async fn records_within(&self, age: Duration) -> Result<Arc<Vec<UserRecord>>, UsersError> {
        let flight = {
            let mut copy = self.copy();
            if let Some(last) = &copy.last {
                let fresh = match last {
                    Ok((read, _)) => read.elapsed() < age,
                    Err((read, _)) => read.elapsed() < age.min(self.miss_reread_after),
                };
                if fresh {
                    return answer(last);
                }
            }
            Arc::clone(copy.flight.get_or_insert_with(Default::default))
        };
        let read = flight.get_or_init(|| self.read()).await;
        let mut copy = self.copy();
        if copy
            .flight
            .as_ref()
            .is_some_and(|current| Arc::ptr_eq(current, &flight))
        {
            copy.flight = None;
            copy.last = Some(read.clone());
        }
        answer(read)
    }

    /// One read of the table, timed from its start: a change committed while it ran
    /// is seen by a copy at most the TTL after it.
    async fn read(&self) -> Read {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let started = Instant::now();
        let read = async {
            let client = self.state.pool().get().await?;
            let rows = client
                .query(
                    "SELECT name, token_sha256, created, revoked, policy FROM askdb_state.users ORDER BY id",
                    &[],
                )
                .await?;
            Ok::<_, StateError>(
                rows.iter()
                    .map(|row| UserRecord {
                        name: row.get(0),
                        token_sha256: row.get(1),
                        created: row.get(2),
                        revoked: row.get(3),
                        policy: row.get(4),
                    })
                    .collect::<Vec<_>>(),
            )
        };
        read.await
            .map(|records| (started, Arc::new(records)))
            .map_err(|error| (started, error.to_string()))
    }

    /// This replica's next read goes to the table: what it wrote itself is seen at
    /// once. A read under way is left to its waiters but not kept as the copy, since it
    /// may have started before the write.
    fn forget(&self) {
        let mut copy = self.copy();
        copy.last = None;
        copy.flight = None;
    }

    /// Inserts a new user unless its name is taken: by a user of the table, revoked or
    /// not, or by a name the shared state lists as revoked (a user revoked before the
    /// users were shared), which every replica would refuse anyway. True when inserted.
    async fn insert(&self, record: &UserRecord) -> Result<bool, StateError> {
        let client = self.state.pool().get().await?;
        let inserted = client
            .execute(
                "INSERT INTO askdb_state.users (name, token_sha256, created, revoked, policy)
                 SELECT $1, $2, $3, NULL, $4
                 WHERE NOT EXISTS (SELECT 1 FROM askdb_state.revoked_users WHERE user_name = $1)
                 ON CONFLICT (name) DO NOTHING",
                &[
                    &record.name,
                    &record.token_sha256,
                    &record.created,
                    &record.policy,
                ],
            )
            .await?
            == 1;
        Ok(inserted)
    }

    async fn add_user(&self, name: &str, policy: Option<&str>) -> Result<String, UsersError> {
        let (record, token) = new_user(name, policy)?;
        let inserted = self.insert(&record).await.map_err(shared)?;
        self.forget();
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
        self.forget();
        if !revoked {
            return Err(UsersError::Unknown(name.to_string()));
        }
        Ok(())
    }

    /// Copies users as another store holds them (hashes, never tokens) into the table:
    /// `askdb users --state-url URL import`, once per replica whose users file was its
    /// own before the users were shared. One transaction: an error leaves the table as
    /// it was. A name the table has keeps the table's row, but a revocation in the file
    /// is carried over (it only narrows, and a replica refuses to start while its file
    /// revokes a user the table lets in). A revoked user is copied revoked, and so is a
    /// live one the shared state lists as revoked: the state of decision 0079, where
    /// `askdb users --state-url URL revoke` listed the name and every replica refused it.
    pub async fn import(&self, records: &[UserRecord]) -> Result<Imported, UsersError> {
        let imported = async {
            let mut client = self.state.pool().get().await?;
            let transaction = client.transaction().await?;
            let mut imported = Imported::default();
            for record in records {
                let list = import_one(&transaction, record).await?;
                match list {
                    ImportedAs::Added => &mut imported.added,
                    ImportedAs::AddedRevoked => &mut imported.added_revoked,
                    ImportedAs::RevokedThere => &mut imported.revoked_there,
                    ImportedAs::AlreadyThere => &mut imported.already_there,
                }
                .push(record.name.clone());
            }
            transaction.commit().await?;
            Ok::<_, StateError>(imported)
        }
        .await
        .map_err(shared);
        self.forget();
        imported
    }
}

/// What an import did with one record.
enum ImportedAs {
    Added,
    AddedRevoked,
    RevokedThere,
    AlreadyThere,
}

/// One record of an import, in the import's transaction (see [`SharedUsers::import`]).
async fn import_one(
    transaction: &tokio_postgres::Transaction<'_>,
    record: &UserRecord,
) -> Result<ImportedAs, StateError> {
    // Locked, so a revocation through another replica cannot cross this one.
    let there = transaction
        .query_opt(
            "SELECT revoked IS NULL FROM askdb_state.users WHERE name = $1 FOR UPDATE",
            &[&record.name],
        )
        .await?;
    if let Some(row) = there {
        let live_there: bool = row.get(0);
        let Some(revoked) = record.revoked.as_ref().filter(|_| live_there) else {
            return Ok(ImportedAs::AlreadyThere);
        };
        transaction
            .execute(
                "UPDATE askdb_state.users SET revoked = $2 WHERE name = $1",
                &[&record.name, revoked],
            )
            .await?;
        super::sign_in::record_revocation(transaction, &record.name).await?;
        return Ok(ImportedAs::RevokedThere);
    }
    let listed: bool = transaction
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM askdb_state.revoked_users WHERE user_name = $1)",
            &[&record.name],
        )
        .await?
        .get(0);
    let revoked = match (&record.revoked, listed) {
        (Some(revoked), _) => Some(revoked.clone()),
        (None, true) => Some(crate::calendar::utc_now().0),
        (None, false) => None,
    };
    let inserted = transaction
        .execute(
            "INSERT INTO askdb_state.users (name, token_sha256, created, revoked, policy)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (name) DO NOTHING",
            &[
                &record.name,
                &record.token_sha256,
                &record.created,
                &revoked,
                &record.policy,
            ],
        )
        .await?
        == 1;
    if !inserted {
        // Added by another replica since the lookup above.
        return Ok(ImportedAs::AlreadyThere);
    }
    if revoked.is_some() {
        super::sign_in::record_revocation(transaction, &record.name).await?;
    }
    Ok(if record.revoked.is_none() && listed {
        ImportedAs::AddedRevoked
    } else {
        ImportedAs::Added
    })
}

/// How a replica's own users file disagrees with the shared table, which
/// `askdb serve --state-url` refuses to start over: names the table lacks, and users
/// the file revokes while the table lets them in. A name the table has revoked while
/// the file has it live is no disagreement: the table is the narrower.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Disagreement {
    pub missing: Vec<String>,
    pub live_there: Vec<String>,
}

impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut said = Vec::new();
        if !self.missing.is_empty() {
            said.push(format!(
                "lists users it does not have ({})",
                self.missing.join(", ")
            ));
        }
        if !self.live_there.is_empty() {
            said.push(format!(
                "revokes users it lets sign in ({})",
                self.live_there.join(", ")
            ));
        }
        f.write_str(&said.join(" and "))
    }
}

/// The [`Disagreement`] of a users file's users and the shared table's, or None.
pub fn disagreement(file: &[UserSummary], table: &[UserSummary]) -> Option<Disagreement> {
    let mut found = Disagreement::default();
    for user in file {
        match table.iter().find(|shared| shared.name == user.name) {
            None => found.missing.push(user.name.clone()),
            Some(shared) if user.revoked.is_some() && shared.revoked.is_none() => {
                found.live_there.push(user.name.clone());
            }
            Some(_) => {}
        }
    }
    (found != Disagreement::default()).then_some(found)
}

/// A read's answer, as its waiters each take it.
fn answer(read: &Read) -> Result<Arc<Vec<UserRecord>>, UsersError> {
    match read {
        Ok((_, records)) => Ok(Arc::clone(records)),
        Err((_, error)) => Err(UsersError::Shared(error.clone())),
    }
}

/// What a copy answers, or, when it answers `miss`, what a newer copy answers: a copy
/// that says "open" or "no such user" may only be older than the user just added. The
/// newer copy is at most [`MISS_REREAD_AFTER`] old, so misses cannot keep the table
/// busy.
async fn checked<T: PartialEq>(
    users: &SharedUsers,
    miss: T,
    answer: impl Fn(&[UserRecord]) -> T,
) -> Result<T, UsersError> {
    let copied = answer(&users.records().await?);
    if copied != miss {
        return Ok(copied);
    }
    let read = users.records_within(users.miss_reread_after).await?;
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
        Box::pin(async move { Ok(summaries(&self.records().await?)) })
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
