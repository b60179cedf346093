//! The spend ledger: dollars spent on model calls, with a hard cap. Before a call the
//! caller reserves the most the call can cost; the reservation is refused when what is
//! spent plus what calls in flight have reserved plus this estimate would pass the cap.
//! So the cap holds even for concurrent calls, and a refused call is never made.
//!
//! In memory by default (one process, one cap). With `ASKDB_SPEND_LEDGER=path` every
//! call is appended to that file as a JSON line and the spend already in the file counts
//! against the cap, so the cap spans runs; delete or move the file to start over.
//!
//! A file ledger is written ahead: the reservation is appended before the call is made,
//! and a call whose reservation cannot be written (an unwritable file, a full disk) is
//! refused, so no call is ever made that the file does not count. After the call a
//! settled line replaces the reservation's worst case with the real cost (or a release
//! line gives it back when the call failed). A reservation that is never settled (the
//! process died, or the disk filled up after the call) keeps counting at its worst case
//! when the file is read again: the ledger may overcount, never undercount.
//!
//! Shared by several `askdb serve` replicas (`--state-url`, decision 0079), the ledger
//! keeps its reservations behind [`SharedSpend`] (PostgreSQL's implementation is
//! `state::ledger`): the reservation and the settlement are each one transaction there,
//! so the cap holds across replicas as it holds across tasks here. The caller does not
//! know which: [`SpendLedger::reserve_call`] and [`Reservation::settle_call`] take
//! either path.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use std::sync::Arc;

use super::{BoxFuture, Completion, LlmError, Purpose};
use crate::calendar::unix_seconds;

#[derive(Debug, Default)]
struct LedgerState {
    spent_usd: f64,
    reserved_usd: f64,
    calls: u64,
    /// Reservations made by this process, for their ids.
    next_reservation: u64,
}

/// One settled call in a ledger file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// Unix seconds.
    pub at: u64,
    pub provider: String,
    pub model: String,
    pub purpose: Purpose,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    /// The reservation this call settles (absent in files written before reservations
    /// were written ahead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

/// A reservation written before its call: counted at `estimate_usd` until settled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReservedLine {
    reserve: String,
    at: u64,
    purpose: Purpose,
    estimate_usd: f64,
}

/// A reservation whose call failed: it costs nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleasedLine {
    release: String,
    at: u64,
}

/// Any line of a ledger file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
enum LedgerLine {
    Settled(LedgerEntry),
    Reserved(ReservedLine),
    Released(ReleasedLine),
}

/// What a ledger has booked: settled (and expired) spend, money set aside by calls in
/// flight, calls counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SpendTotals {
    pub spent_usd: f64,
    pub reserved_usd: f64,
    pub calls: u64,
}

/// A ledger kept outside this process and shared with other replicas. Each method is
/// one transaction where it is kept: a reservation checks the cap and books the worst
/// case together, so two replicas can never both take the last room under the cap.
pub trait SharedSpend: Send + Sync + std::fmt::Debug {
    /// Books `estimate_usd` for a call about to be made (its id), or refuses with
    /// [`LlmError::SpendCapReached`] when `cap_usd` would be passed.
    fn reserve(
        &self,
        cap_usd: Option<f64>,
        estimate_usd: f64,
        purpose: Purpose,
    ) -> BoxFuture<'_, Result<i64, LlmError>>;
    /// Replaces reservation `id`'s worst case with the call's real cost.
    fn settle<'a>(&'a self, id: i64, entry: &'a LedgerEntry)
        -> BoxFuture<'a, Result<(), LlmError>>;
    /// Gives reservation `id` back: its call failed and cost nothing.
    fn release(&self, id: i64) -> BoxFuture<'_, Result<(), LlmError>>;
    /// Everything booked by every replica.
    fn totals(&self) -> BoxFuture<'_, Result<SpendTotals, LlmError>>;
}

/// Money spent on model calls, with an optional hard cap in dollars.
#[derive(Debug)]
pub struct SpendLedger {
    cap_usd: Option<f64>,
    file: Option<PathBuf>,
    /// Where reservations are kept when replicas share the ledger; the counts in
    /// `state` are then this process's share only.
    shared: Option<Arc<dyn SharedSpend>>,
    /// Makes this process's reservation ids unique in a file other runs share.
    session: String,
    state: Mutex<LedgerState>,
}

impl SpendLedger {
    /// A ledger for this process only.
    pub fn in_memory(cap_usd: Option<f64>) -> SpendLedger {
        SpendLedger {
            cap_usd,
            file: None,
            shared: None,
            session: String::new(),
            state: Mutex::new(LedgerState::default()),
        }
    }

    /// A ledger every replica shares through `store`, with this replica's cap.
    pub fn shared(store: Arc<dyn SharedSpend>, cap_usd: Option<f64>) -> SpendLedger {
        SpendLedger {
            shared: Some(store),
            ..SpendLedger::in_memory(cap_usd)
        }
    }

    /// Whether the ledger is shared with other replicas.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Everything booked: by every replica when the ledger is shared, else here.
    pub async fn totals(&self) -> Result<SpendTotals, LlmError> {
        if let Some(shared) = &self.shared {
            return shared.totals().await;
        }
        let state = self.lock();
        Ok(SpendTotals {
            spent_usd: state.spent_usd,
            reserved_usd: state.reserved_usd,
            calls: state.calls,
        })
    }

    /// Reserves `estimate_usd` for a call about to be made, wherever the ledger is
    /// kept: [`SpendLedger::reserve_for`] here, one transaction when it is shared.
    pub async fn reserve_call(
        &self,
        estimate_usd: f64,
        purpose: Purpose,
    ) -> Result<Reservation<'_>, LlmError> {
        let Some(shared) = &self.shared else {
            return self.reserve_for(estimate_usd, purpose);
        };
        let estimate_usd = finite_estimate(estimate_usd);
        let id = shared.reserve(self.cap_usd, estimate_usd, purpose).await?;
        self.lock().reserved_usd += estimate_usd;
        Ok(Reservation {
            ledger: self,
            estimate_usd,
            id: None,
            shared: Some(id),
            settled: false,
        })
    }

    /// A ledger kept in a JSONL file; what the file records already counts against the
    /// cap, reservations never settled at their worst case.
    pub fn open(path: &Path, cap_usd: Option<f64>) -> Result<SpendLedger, LlmError> {
        // Only a regular file can be a ledger: reading a device such as /dev/zero
        // would never end.
        if let Ok(metadata) = std::fs::metadata(path) {
            if !metadata.is_file() {
                return Err(LlmError::Ledger(format!(
                    "{} is not a regular file",
                    path.display()
                )));
            }
        }
        let mut state = LedgerState::default();
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let mut open_reservations: HashMap<String, f64> = HashMap::new();
                for (number, line) in text.lines().enumerate() {
                    if line.trim().is_empty() {
                        continue;
                    }
                    // A line that does not parse would make the ledger undercount, and an
                    // undercounting ledger is no cap at all: refuse it.
                    let parsed: LedgerLine = serde_json::from_str(line).map_err(|error| {
                        LlmError::Ledger(format!("{} line {}: {error}", path.display(), number + 1))
                    })?;
                    match parsed {
                        LedgerLine::Settled(entry) => {
                            if let Some(id) = &entry.reservation {
                                open_reservations.remove(id);
                            }
                            state.spent_usd += entry.cost_usd;
                            state.calls += 1;
                        }
                        LedgerLine::Reserved(reserved) => {
                            open_reservations.insert(reserved.reserve, reserved.estimate_usd);
                        }
                        LedgerLine::Released(released) => {
                            open_reservations.remove(&released.release);
                        }
                    }
                }
                // A call that may have been made but was never settled counts as made,
                // at the most it could have cost.
                for estimate in open_reservations.values() {
                    state.spent_usd += estimate;
                    state.calls += 1;
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(LlmError::Ledger(format!(
                    "cannot read {}: {error}",
                    path.display()
                )))
            }
        }
        let started = crate::calendar::unix_millis();
        Ok(SpendLedger {
            cap_usd,
            file: Some(path.to_path_buf()),
            shared: None,
            session: format!("{}-{started}", std::process::id()),
            state: Mutex::new(state),
        })
    }

    fn lock(&self) -> MutexGuard<'_, LedgerState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn cap_usd(&self) -> Option<f64> {
        self.cap_usd
    }

    /// Dollars spent so far (calls settled, in this process and, for a file ledger,
    /// before it).
    pub fn spent_usd(&self) -> f64 {
        self.lock().spent_usd
    }

    /// Calls settled so far.
    pub fn calls(&self) -> u64 {
        self.lock().calls
    }

    /// Reserves `estimate_usd` for a call about to be made, or refuses when the cap
    /// would be passed or, for a file ledger, when the reservation cannot be written.
    pub fn reserve(&self, estimate_usd: f64) -> Result<Reservation<'_>, LlmError> {
        self.reserve_for(estimate_usd, Purpose::Check)
    }

    /// [`SpendLedger::reserve`], recording which step the call is for.
    pub fn reserve_for(
        &self,
        estimate_usd: f64,
        purpose: Purpose,
    ) -> Result<Reservation<'_>, LlmError> {
        let estimate_usd = finite_estimate(estimate_usd);
        let mut state = self.lock();
        if let Some(cap_usd) = self.cap_usd {
            let committed = state.spent_usd + state.reserved_usd;
            // At the cap no call is made, even a free-looking one.
            if committed >= cap_usd || committed + estimate_usd > cap_usd {
                return Err(LlmError::SpendCapReached {
                    cap_usd,
                    spent_usd: state.spent_usd,
                    reserved_usd: state.reserved_usd,
                    estimate_usd,
                });
            }
        }
        let mut id = None;
        if let Some(path) = &self.file {
            state.next_reservation += 1;
            let reservation = format!("{}-{}", self.session, state.next_reservation);
            let line = ReservedLine {
                reserve: reservation.clone(),
                at: unix_seconds(),
                purpose,
                estimate_usd,
            };
            // Written while the lock is held, so concurrent reservations cannot
            // interleave inside a line. Fail closed: no line, no call.
            append_line(path, &line).map_err(|error| {
                LlmError::Ledger(format!(
                    "{error}; the call was not made, because a call the ledger cannot count is never made"
                ))
            })?;
            id = Some(reservation);
        }
        state.reserved_usd += estimate_usd;
        Ok(Reservation {
            ledger: self,
            estimate_usd,
            id,
            shared: None,
            settled: false,
        })
    }

    fn release(&self, estimate_usd: f64, id: Option<&str>, shared_id: Option<i64>) {
        let mut state = self.lock();
        state.reserved_usd = (state.reserved_usd - estimate_usd).max(0.0);
        if let (Some(shared), Some(id)) = (&self.shared, shared_id) {
            // Drop cannot wait: the release runs on its own. Lost (no runtime, the
            // state unreachable), the reservation expires and counts at its worst case:
            // an overcount, never an undercount.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let shared = Arc::clone(shared);
                runtime.spawn(async move {
                    let _ = shared.release(id).await;
                });
            }
        }
        if let (Some(path), Some(id)) = (&self.file, id) {
            // Best effort: without the line the reservation keeps counting at its worst
            // case when the file is read again, which overcounts but never undercounts.
            let _ = append_line(
                path,
                &ReleasedLine {
                    release: id.to_string(),
                    at: unix_seconds(),
                },
            );
        }
    }
}

/// A negative or non-finite estimate reserves nothing rather than freeing room.
fn finite_estimate(estimate_usd: f64) -> f64 {
    if estimate_usd.is_finite() {
        estimate_usd.max(0.0)
    } else {
        0.0
    }
}

/// Appends one JSON line to the ledger file, creating its folder and the file when
/// missing. One `write` call per line, so a line is never split by another writer.
fn append_line(path: &Path, line: &impl Serialize) -> Result<(), String> {
    let mut text = serde_json::to_string(line).map_err(|error| error.to_string())?;
    text.push('\n');
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| format!("cannot open {}: {error}", path.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|error| format!("cannot write {}: {error}", path.display()))
}

/// Money set aside for one call in flight. Settle it with the real cost; dropped
/// unsettled (the call failed), it gives the money back.
#[derive(Debug)]
pub struct Reservation<'a> {
    ledger: &'a SpendLedger,
    estimate_usd: f64,
    /// The reservation's id in the ledger file (None in memory).
    id: Option<String>,
    /// The reservation's id in the shared ledger, when replicas share it.
    shared: Option<i64>,
    settled: bool,
}

impl Reservation<'_> {
    /// Books the call's real cost wherever the ledger is kept. Shared, a settlement
    /// that cannot be written is not an error either: the reservation stays booked at
    /// its worst case and expires as spent.
    pub async fn settle_call(
        mut self,
        cost_usd: f64,
        purpose: Purpose,
        provider: &str,
        completion: &Completion,
    ) -> Result<(), LlmError> {
        let (Some(shared), Some(id)) = (&self.ledger.shared, self.shared) else {
            return self.settle(cost_usd, purpose, provider, completion);
        };
        self.settled = true;
        {
            let mut state = self.ledger.lock();
            state.reserved_usd = (state.reserved_usd - self.estimate_usd).max(0.0);
            state.spent_usd += cost_usd;
            state.calls += 1;
        }
        let entry = ledger_entry(cost_usd, purpose, provider, completion, None);
        // Ignored on purpose (see above): the reply was paid for and is returned.
        let _ = shared.settle(id, &entry).await;
        Ok(())
    }

    /// Books the call's real cost (and appends it to the ledger file, if any). The call
    /// has been made by now, so a line that cannot be written is not an error: the
    /// reservation written ahead already counts it at its worst case.
    pub fn settle(
        mut self,
        cost_usd: f64,
        purpose: Purpose,
        provider: &str,
        completion: &Completion,
    ) -> Result<(), LlmError> {
        self.settled = true;
        {
            let mut state = self.ledger.lock();
            state.reserved_usd = (state.reserved_usd - self.estimate_usd).max(0.0);
            state.spent_usd += cost_usd;
            state.calls += 1;
        }
        let Some(path) = &self.ledger.file else {
            return Ok(());
        };
        let entry = ledger_entry(cost_usd, purpose, provider, completion, self.id.clone());
        // Ignored on purpose (see above): the reply was paid for and is returned.
        let _ = append_line(path, &entry);
        Ok(())
    }
}

/// The settled line of one call.
fn ledger_entry(
    cost_usd: f64,
    purpose: Purpose,
    provider: &str,
    completion: &Completion,
    reservation: Option<String>,
) -> LedgerEntry {
    LedgerEntry {
        at: unix_seconds(),
        provider: provider.to_string(),
        model: completion.model.clone(),
        purpose,
        input_tokens: completion.input_tokens,
        output_tokens: completion.output_tokens,
        cost_usd,
        reservation,
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.ledger
                .release(self.estimate_usd, self.id.as_deref(), self.shared);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion() -> Completion {
        crate::llm::tests::completion("ok", "m", (10, 2))
    }

    #[test]
    fn the_cap_refuses_a_call_that_could_cross_it() {
        let ledger = SpendLedger::in_memory(Some(1.0));
        ledger
            .reserve(0.6)
            .expect("room")
            .settle(0.6, Purpose::WriteSql, "p", &completion())
            .expect("settled");
        let refused = ledger.reserve(0.5).expect_err("0.6 + 0.5 > 1.0");
        assert_eq!(refused.kind(), "spend_cap_reached");
        assert!(ledger.reserve(0.3).is_ok());
    }

    #[test]
    fn reservations_in_flight_count_and_a_dropped_one_gives_the_money_back() {
        let ledger = SpendLedger::in_memory(Some(1.0));
        let first = ledger.reserve(0.7).expect("room");
        assert!(ledger.reserve(0.4).is_err(), "0.7 in flight + 0.4 > 1.0");
        drop(first);
        assert!(ledger.reserve(0.4).is_ok());
        assert_eq!(ledger.spent_usd(), 0.0);
    }

    #[test]
    fn at_the_cap_even_a_free_call_is_refused() {
        let ledger = SpendLedger::in_memory(Some(0.5));
        ledger
            .reserve(0.5)
            .expect("room")
            .settle(0.5, Purpose::WriteSql, "p", &completion())
            .expect("settled");
        assert!(ledger.reserve(0.0).is_err());
    }

    #[test]
    fn a_file_ledger_carries_spend_across_runs() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("spend.jsonl");
        let first = SpendLedger::open(&path, Some(1.0)).expect("opens");
        first
            .reserve(0.25)
            .expect("room")
            .settle(0.25, Purpose::RepairSql, "anthropic", &completion())
            .expect("settled");
        let second = SpendLedger::open(&path, Some(1.0)).expect("reopens");
        assert!((second.spent_usd() - 0.25).abs() < 1e-12);
        assert_eq!(second.calls(), 1);
        std::fs::write(&path, "not json\n").expect("write");
        assert!(SpendLedger::open(&path, Some(1.0)).is_err());
    }

    #[test]
    fn a_file_ledger_writes_the_reservation_before_the_call_and_settles_it_after() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("spend.jsonl");
        let ledger = SpendLedger::open(&path, Some(1.0)).expect("opens");
        let reservation = ledger.reserve_for(0.4, Purpose::WriteSql).expect("room");
        let text = std::fs::read_to_string(&path).expect("written ahead");
        assert!(text.contains("\"reserve\""), "{text}");
        // Read now, as if the process had died in the call: the worst case counts.
        let crashed = SpendLedger::open(&path, Some(1.0)).expect("reopens");
        assert!((crashed.spent_usd() - 0.4).abs() < 1e-12);
        assert_eq!(crashed.calls(), 1);
        reservation
            .settle(0.1, Purpose::WriteSql, "p", &completion())
            .expect("settled");
        let settled = SpendLedger::open(&path, Some(1.0)).expect("reopens");
        assert!(
            (settled.spent_usd() - 0.1).abs() < 1e-12,
            "the real cost replaces the estimate"
        );
        assert_eq!(settled.calls(), 1);
        drop(ledger.reserve_for(0.3, Purpose::RepairSql).expect("room"));
        let released = SpendLedger::open(&path, Some(1.0)).expect("reopens");
        assert!(
            (released.spent_usd() - 0.1).abs() < 1e-12,
            "a failed call costs nothing"
        );
        assert_eq!(released.calls(), 1);
    }

    #[test]
    fn a_reservation_that_cannot_be_written_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let folder = dir.path().join("ledger");
        let ledger = SpendLedger::open(&folder.join("spend.jsonl"), None).expect("opens");
        // The folder becomes a file: nothing can be written below it, even by root.
        std::fs::write(&folder, "x").expect("write");
        let refused = ledger.reserve(0.0).expect_err("unwritable");
        assert_eq!(refused.kind(), "ledger");
        assert!(refused.to_string().contains("was not made"), "{refused}");
        assert_eq!(ledger.calls(), 0);
    }

    #[test]
    fn a_ledger_on_a_device_is_refused_instead_of_read_forever() {
        let device = Path::new("/dev/zero");
        if device.exists() {
            assert!(SpendLedger::open(device, None).is_err());
        }
    }

    #[test]
    fn ledger_files_from_before_reservations_still_count() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("spend.jsonl");
        std::fs::write(
            &path,
            "{\"at\":1,\"provider\":\"anthropic\",\"model\":\"m\",\"purpose\":\"write_sql\",\"input_tokens\":1,\"output_tokens\":1,\"cost_usd\":0.5}\n",
        )
        .expect("write");
        let ledger = SpendLedger::open(&path, Some(1.0)).expect("opens");
        assert!((ledger.spent_usd() - 0.5).abs() < 1e-12);
        assert_eq!(ledger.calls(), 1);
    }
}
