//! The database check's memory and its counts. A statement the database check accepted
//! under one policy is accepted again without asking the database, as long as the gate
//! and its policy are the same (a policy change makes a new id; a schema drift opens a
//! new gate): a repeated statement then pays nothing for the check. Refusals are not
//! remembered: they are rare and cheap next to what they prevent.
//!
//! The counts are process-wide, for `/metrics`: how many statements the database checked,
//! how many were answered from memory, how many the parser check accepted and the
//! database check refused (each a finding about the parser check), and how many
//! PostgreSQL backends outran their timeout and had to be terminated.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How many accepted statements one gate remembers; past it the memory starts again, so
/// it stays bounded whatever the traffic.
const REMEMBERED_STATEMENTS: usize = 4_096;

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
    accepted: Mutex<HashSet<(u64, String)>>,
}

impl Verdicts {
    /// Whether this text was accepted under this policy before; counted either way.
    pub fn accepted_before(&self, policy_id: u64, sql: &str) -> bool {
        let known = self
            .accepted
            .lock()
            .is_ok_and(|accepted| accepted.contains(&(policy_id, sql.to_string())));
        if known {
            REMEMBERED.fetch_add(1, Ordering::Relaxed);
        } else {
            CHECKED.fetch_add(1, Ordering::Relaxed);
        }
        known
    }

    pub fn remember_accepted(&self, policy_id: u64, sql: &str) {
        if let Ok(mut accepted) = self.accepted.lock() {
            if accepted.len() >= REMEMBERED_STATEMENTS {
                accepted.clear();
            }
            accepted.insert((policy_id, sql.to_string()));
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
    fn an_accepted_statement_is_remembered_per_policy_and_memory_stays_bounded() {
        let verdicts = Verdicts::default();
        assert!(!verdicts.accepted_before(1, "SELECT 1"));
        verdicts.remember_accepted(1, "SELECT 1");
        assert!(verdicts.accepted_before(1, "SELECT 1"));
        assert!(!verdicts.accepted_before(2, "SELECT 1"));
        for n in 0..REMEMBERED_STATEMENTS + 1 {
            verdicts.remember_accepted(1, &format!("SELECT {n}"));
        }
        let held = verdicts.accepted.lock().map(|a| a.len()).unwrap_or(0);
        assert!(held <= REMEMBERED_STATEMENTS, "{held}");
    }
}
