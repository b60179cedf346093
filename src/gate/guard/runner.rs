//! Where a check runs. On the caller's own thread when at least [`INLINE_STACK_BYTES`] of
//! its stack remain (the deepest statements the bounds allow need well under that; a test
//! checks them on a stack of exactly that size), else on long-lived guard threads with a
//! [`GUARD_STACK_BYTES`] stack, so a deep tree never meets a small stack. A thread per
//! check spent most of the guard's time creating the thread and unmapping its stack, and
//! handing a check to another thread costs two wake-ups (decision 0030).
//!
//! The guard threads start on the first check that needs them, one per core (at most
//! [`MAX_WORKERS`]), and take jobs from one queue. A check that panics becomes a refusal
//! (the guard threads go on). Should they not start, such a check falls back to a scoped
//! thread of its own.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};

use super::{CheckedQuery, GuardPolicy, Refusal, RefusalReason};

/// The stack each guard thread runs on (reserved, not touched: a check uses a small
/// part of it).
pub const GUARD_STACK_BYTES: usize = 64 * 1024 * 1024;

/// The stack a check may need at most, with a wide margin: the deepest statements the
/// bounds allow fit in a quarter of it in a debug build.
pub const INLINE_STACK_BYTES: usize = 4 * 1024 * 1024;

/// The stack the binary gives its runtime's threads, so the checks a server makes run
/// on the thread that asked.
pub const RUNTIME_STACK_BYTES: usize = 2 * INLINE_STACK_BYTES;

/// The most guard threads, whatever the core count.
pub const MAX_WORKERS: usize = 8;

type Verdict = Result<CheckedQuery, Refusal>;

struct Job {
    sql: String,
    policy: Arc<GuardPolicy>,
    reply: SyncSender<Verdict>,
}

/// The queue the guard threads take jobs from; None when no thread could start.
fn queue() -> Option<&'static Mutex<Sender<Job>>> {
    static QUEUE: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (sender, receiver) = mpsc::channel::<Job>();
            let receiver = Arc::new(Mutex::new(receiver));
            let wanted = std::thread::available_parallelism()
                .map(usize::from)
                .unwrap_or(1)
                .clamp(1, MAX_WORKERS);
            let mut started = 0;
            for index in 0..wanted {
                let receiver = Arc::clone(&receiver);
                let spawned = std::thread::Builder::new()
                    .name(format!("askdb-guard-{index}"))
                    .stack_size(GUARD_STACK_BYTES)
                    .spawn(move || serve(&receiver));
                if spawned.is_ok() {
                    started += 1;
                }
            }
            (started > 0).then(|| Mutex::new(sender))
        })
        .as_ref()
}

/// One guard thread: takes jobs until the queue is gone.
fn serve(receiver: &Mutex<Receiver<Job>>) {
    loop {
        let job = match receiver.lock() {
            Ok(receiver) => receiver.recv(),
            // A poisoned lock only means another guard thread panicked while taking a
            // job (never while checking): the receiver itself is intact.
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        let Ok(job) = job else { return };
        let verdict = checked_or_refused(&job.sql, &job.policy);
        // The caller may have gone (its thread ended); nothing waits for this verdict.
        let _ = job.reply.send(verdict);
    }
}

fn could_not_check() -> Refusal {
    Refusal::new(
        RefusalReason::TooLong,
        "the guard could not check this statement; send a shorter one",
    )
}

/// Runs the check, turning a panic inside it into a refusal.
fn checked_or_refused(sql: &str, policy: &GuardPolicy) -> Verdict {
    catch_unwind(AssertUnwindSafe(|| super::check_here(sql, policy)))
        .unwrap_or_else(|_| Err(could_not_check()))
}

/// Checks `sql` here when the stack allows it, else on a guard thread.
pub(super) fn run(sql: &str, policy: &Arc<GuardPolicy>) -> Verdict {
    if stacker::remaining_stack().is_some_and(|remaining| remaining >= INLINE_STACK_BYTES) {
        return checked_or_refused(sql, policy);
    }
    on_a_guard_thread(sql, policy)
}

/// Checks `sql` on a guard thread and waits for the verdict.
fn on_a_guard_thread(sql: &str, policy: &Arc<GuardPolicy>) -> Verdict {
    if let Some(queue) = queue() {
        let (reply, verdict) = mpsc::sync_channel(1);
        let job = Job {
            sql: sql.to_string(),
            policy: Arc::clone(policy),
            reply,
        };
        let sent = match queue.lock() {
            Ok(sender) => sender.send(job).is_ok(),
            Err(poisoned) => poisoned.into_inner().send(job).is_ok(),
        };
        if sent {
            if let Ok(verdict) = verdict.recv() {
                return verdict;
            }
        }
    }
    on_a_thread_of_its_own(sql, policy)
}

/// The fallback: a scoped thread with the same stack, for this check only.
fn on_a_thread_of_its_own(sql: &str, policy: &GuardPolicy) -> Verdict {
    std::thread::scope(|scope| {
        match std::thread::Builder::new()
            .name("askdb-guard".to_string())
            .stack_size(GUARD_STACK_BYTES)
            .spawn_scoped(scope, || checked_or_refused(sql, policy))
        {
            Ok(worker) => worker.join().unwrap_or_else(|_| Err(could_not_check())),
            Err(_) => Err(could_not_check()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::guard::bounds;
    use crate::gate::SqlDialect;

    fn policy() -> Arc<GuardPolicy> {
        let mut policy = GuardPolicy::new(SqlDialect::Sqlite);
        policy.allow_table("bills", ["bill_id", "status"]);
        Arc::new(policy)
    }

    #[test]
    fn checks_from_many_threads_each_get_their_own_verdict() {
        let policy = policy();
        std::thread::scope(|scope| {
            for index in 0..8 {
                let policy = Arc::clone(&policy);
                scope.spawn(move || {
                    for round in 0..50 {
                        let sql =
                            format!("SELECT bill_id FROM bills WHERE bill_id = {index}{round}");
                        let checked = run(&sql, &policy).expect("a plain query passes");
                        assert!(
                            checked.sql().contains(&format!("= {index}{round}")),
                            "{sql} came back as {}",
                            checked.sql()
                        );
                        let refused = run(
                            &format!("DELETE FROM bills WHERE bill_id = {index}"),
                            &policy,
                        )
                        .expect_err("a write is refused");
                        assert_eq!(refused.reason, RefusalReason::NotAQuery);
                    }
                });
            }
        });
    }

    #[test]
    fn a_check_gives_the_same_verdict_wherever_it_runs() {
        let policy = policy();
        for sql in [
            "SELECT status, count(*) FROM bills GROUP BY status",
            "SELECT * FROM bills; DROP TABLE bills",
            "SELECT secret FROM vault",
        ] {
            let shown = |verdict: Verdict| match verdict {
                Ok(checked) => checked.sql().to_string(),
                Err(refusal) => format!("refused: {:?}", refusal.reason),
            };
            let here = shown(checked_or_refused(sql, &policy));
            assert_eq!(here, shown(on_a_guard_thread(sql, &policy)), "{sql}");
            assert_eq!(here, shown(on_a_thread_of_its_own(sql, &policy)), "{sql}");
        }
        assert!(queue().is_some(), "the guard threads started");
    }

    /// The deepest statements each bound allows: operator chains, set operations and
    /// casts at [`bounds::MAX_OPERATORS`], and nesting up to the parser's recursion limit
    /// (parentheses, subqueries, calls, CASE, derived tables), alone and around a chain.
    fn deepest_statements() -> Vec<String> {
        let operators = bounds::MAX_OPERATORS;
        let mut statements = vec![
            format!("SELECT {}", vec!["1"; operators].join("+")),
            format!("SELECT 1{}", "::int".repeat(operators)),
            format!("SELECT {}1", "NOT ".repeat(operators)),
            format!("SELECT {}1", "-".repeat(operators)),
            format!("SELECT 1{}", " IS NULL".repeat(operators)),
            format!("SELECT 'a'{}", " COLLATE \"C\"".repeat(operators)),
            format!("SELECT 1{}", " UNION SELECT 1".repeat(operators)),
            format!("SELECT 1{}", " EXCEPT SELECT 1".repeat(operators)),
            format!(
                "SELECT * FROM (VALUES (1)) AS t(a){}",
                " CROSS JOIN (VALUES (1)) AS t(a)".repeat(operators)
            ),
        ];
        for nest in 1..=bounds::PARSER_RECURSION_LIMIT {
            let open = |prefix: &str| prefix.repeat(nest);
            let close = |suffix: &str| suffix.repeat(nest);
            let chain = vec!["1"; operators - nest].join("+");
            statements.extend([
                format!("SELECT {}1{}", open("(SELECT "), close(")")),
                format!("SELECT {}1{}", open("("), close(")")),
                format!("SELECT {}1{}", open("abs("), close(")")),
                format!("SELECT {}1{}", open("CASE WHEN true THEN "), close(" END")),
                format!("SELECT {}{chain}{}", open("(SELECT "), close(")")),
                format!(
                    "SELECT * FROM {}(SELECT {chain}) AS t{}",
                    open("(SELECT * FROM "),
                    close(") AS t")
                ),
            ]);
        }
        statements
    }

    #[test]
    fn the_deepest_statements_the_bounds_allow_fit_the_inline_stack() {
        // A check runs on the caller's thread only when this much stack remains: on a
        // stack of exactly this size every deepest statement is checked to a verdict (an
        // overflow would abort the test process).
        for dialect in [SqlDialect::Postgres, SqlDialect::Sqlite] {
            let policy = GuardPolicy::new(dialect);
            let accepted = std::thread::scope(|scope| {
                std::thread::Builder::new()
                    .stack_size(INLINE_STACK_BYTES)
                    .spawn_scoped(scope, || {
                        deepest_statements()
                            .iter()
                            .filter(|sql| crate::gate::guard::check_here(sql, &policy).is_ok())
                            .count()
                    })
                    .expect("a thread with the inline stack")
                    .join()
                    .expect("no panic")
            });
            // Most of them pass: the walk, the printing, the second parse and the drop
            // all ran on their whole tree.
            assert!(accepted >= 150, "{dialect:?}: only {accepted} accepted");
        }
    }
}
