//! The guard's memory of what it accepted. A statement the database check accepted
//! under one policy is accepted again without asking the database, and a text the parser
//! check accepted is not parsed again, as long as the policy is the same (a policy change
//! makes a new id; a schema drift opens a new gate): a repeated statement then pays for
//! neither check. Both are pure functions of the text and the policy, so remembering
//! them changes no verdict. Refusals are not remembered: they are rare and cheap next to
//! what they prevent. The memory is bounded in bytes, since one statement may be 100 kB.
//!
//! The counts are process-wide, for `/metrics`: how many statements the database checked,
//! how many were answered from memory, how many the parser check accepted and the
//! database check refused (each a finding about the parser check), and how many
//! PostgreSQL backends outran their timeout and had to be terminated.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::guard::CheckedQuery;

/// How many bytes of statement text one gate's memory holds, per check; past it that
/// memory starts again, so it stays bounded whatever the traffic.
const REMEMBERED_BYTES: usize = 4 * 1024 * 1024;

static CHECKED: AtomicU64 = AtomicU64::new(0);
static REMEMBERED: AtomicU64 = AtomicU64::new(0);
static DISAGREEMENTS: AtomicU64 = AtomicU64::new(0);

/// The database check's counts since the process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DatabaseCheckCounts {
    /// Statements whose resolution the database was asked for.
    pub checked: u64,
    /// Statements accepted from memory, without asking the database.
    pub remembered: u64,
    /// Statements the parser check accepted and the database check refused.
    pub disagreements: u64,
    /// PostgreSQL backends that ignored the cancel past the client's deadline and were
    /// terminated (work a statement timeout could not stop).
    pub backends_terminated: u64,
    /// Such backends still running, or not confirmed stopped, after the termination.
    pub backends_unconfirmed: u64,
}

/// The counts now.
pub fn database_check_counts() -> DatabaseCheckCounts {
    let (backends_terminated, backends_unconfirmed) =
        super::executor::postgres::stubborn_backends();
    DatabaseCheckCounts {
        checked: CHECKED.load(Ordering::Relaxed),
        remembered: REMEMBERED.load(Ordering::Relaxed),
        disagreements: DISAGREEMENTS.load(Ordering::Relaxed),
        backends_terminated,
        backends_unconfirmed,
    }
}

/// Accepted statements of one gate, by policy id and text.
#[derive(Debug, Default)]
pub(crate) struct Verdicts {
    /// Texts that will run, accepted by the database check.
    accepted: Mutex<Bounded<HashSet<(u64, String)>>>,
    /// Texts as sent, accepted by the parser check, with what it made of them.
    parsed: Mutex<Bounded<HashMap<(u64, String), CheckedQuery>>>,
}

/// A memory and the bytes of text it holds.
#[derive(Debug, Default)]
struct Bounded<T> {
    entries: T,
    bytes: usize,
}

impl<T: Default> Bounded<T> {
    /// Makes room for `bytes` more, starting the memory again when it would pass the
    /// bound; false when one entry alone would.
    fn make_room(&mut self, bytes: usize) -> bool {
        if bytes > REMEMBERED_BYTES {
            return false;
        }
        if self.bytes + bytes > REMEMBERED_BYTES {
            *self = Self::default();
        }
        self.bytes += bytes;
        true
    }
}

impl Verdicts {
    /// Whether this text was accepted by the database check under this policy before;
    /// counted either way.
    pub fn accepted_before(&self, policy_id: u64, sql: &str) -> bool {
        let known = self
            .accepted
            .lock()
            .is_ok_and(|accepted| accepted.entries.contains(&(policy_id, sql.to_string())));
        if known {
            REMEMBERED.fetch_add(1, Ordering::Relaxed);
        } else {
            CHECKED.fetch_add(1, Ordering::Relaxed);
        }
        known
    }

    pub fn remember_accepted(&self, policy_id: u64, sql: &str) {
        if let Ok(mut accepted) = self.accepted.lock() {
            if accepted.make_room(sql.len()) {
                accepted.entries.insert((policy_id, sql.to_string()));
            }
        }
    }

    /// What the parser check made of this text under this policy, if it accepted it
    /// before.
    pub fn parsed_before(&self, policy_id: u64, sql: &str) -> Option<CheckedQuery> {
        self.parsed
            .lock()
            .ok()?
            .entries
            .get(&(policy_id, sql.to_string()))
            .cloned()
    }

    pub fn remember_parsed(&self, sql: &str, checked: &CheckedQuery) {
        if let Ok(mut parsed) = self.parsed.lock() {
            if parsed.make_room(sql.len() + checked.sql().len()) {
                parsed
                    .entries
                    .insert((checked.policy_id(), sql.to_string()), checked.clone());
            }
        }
    }

    /// The parser check accepted what the database check refused.
    pub fn count_disagreement(&self) {
        DISAGREEMENTS.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accepted_statement_is_remembered_per_policy_and_memory_stays_bounded_in_bytes() {
        let verdicts = Verdicts::default();
        assert!(!verdicts.accepted_before(1, "SELECT 1"));
        verdicts.remember_accepted(1, "SELECT 1");
        assert!(verdicts.accepted_before(1, "SELECT 1"));
        assert!(!verdicts.accepted_before(2, "SELECT 1"));
        let long = format!("SELECT '{}'", "x".repeat(90_000));
        for n in 0..(REMEMBERED_BYTES / long.len()) + 2 {
            verdicts.remember_accepted(1, &format!("{long} AS c{n}"));
        }
        let held = verdicts
            .accepted
            .lock()
            .map(|a| a.bytes)
            .unwrap_or(usize::MAX);
        assert!(held <= REMEMBERED_BYTES, "{held}");
        verdicts.remember_accepted(1, &"x".repeat(REMEMBERED_BYTES + 1));
        assert!(!verdicts.accepted_before(1, &"x".repeat(REMEMBERED_BYTES + 1)));
    }

    #[test]
    fn what_the_parser_check_made_of_a_text_is_remembered_per_policy() {
        use crate::gate::guard::{check, GuardPolicy, SqlDialect};
        use std::sync::Arc;
        let mut policy = GuardPolicy::new(SqlDialect::Sqlite);
        policy.allow_table("bills", ["bill_id"]);
        let policy = Arc::new(policy);
        let verdicts = Verdicts::default();
        let sent = "select 1 from bills";
        assert!(verdicts.parsed_before(policy.id(), sent).is_none());
        let checked = check(sent, &policy).expect("accepted");
        verdicts.remember_parsed(sent, &checked);
        assert_eq!(verdicts.parsed_before(policy.id(), sent), Some(checked));
        assert!(verdicts.parsed_before(policy.id() + 1, sent).is_none());
        assert!(verdicts
            .parsed_before(policy.id(), "SELECT 1 FROM bills")
            .is_none());
    }
}
