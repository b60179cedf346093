//! The spend ledger: dollars spent on model calls, with a hard cap. Before a call the
//! caller reserves the most the call can cost; the reservation is refused when what is
//! spent plus what calls in flight have reserved plus this estimate would pass the cap.
//! So the cap holds even for concurrent calls, and a refused call is never made.
//!
//! In memory by default (one process, one cap). With `ASKDB_SPEND_LEDGER=path` every
//! call is appended to that file as a JSON line and the spend already in the file counts
//! against the cap, so the cap spans runs; delete or move the file to start over.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::{Completion, LlmError, Purpose};

#[derive(Debug, Default)]
struct LedgerState {
    spent_usd: f64,
    reserved_usd: f64,
    calls: u64,
}

/// One line of a ledger file.
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
}

/// Money spent on model calls, with an optional hard cap in dollars.
#[derive(Debug)]
pub struct SpendLedger {
    cap_usd: Option<f64>,
    file: Option<PathBuf>,
    state: Mutex<LedgerState>,
}

impl SpendLedger {
    /// A ledger for this process only.
    pub fn in_memory(cap_usd: Option<f64>) -> SpendLedger {
        SpendLedger {
            cap_usd,
            file: None,
            state: Mutex::new(LedgerState::default()),
        }
    }

    /// A ledger kept in a JSONL file; what the file records already counts against the cap.
    pub fn open(path: &Path, cap_usd: Option<f64>) -> Result<SpendLedger, LlmError> {
        let mut state = LedgerState::default();
        match std::fs::read_to_string(path) {
            Ok(text) => {
                for (number, line) in text.lines().enumerate() {
                    if line.trim().is_empty() {
                        continue;
                    }
                    // A line that does not parse would make the ledger undercount, and an
                    // undercounting ledger is no cap at all: refuse it.
                    let entry: LedgerEntry = serde_json::from_str(line).map_err(|error| {
                        LlmError::Ledger(format!("{} line {}: {error}", path.display(), number + 1))
                    })?;
                    state.spent_usd += entry.cost_usd;
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
        Ok(SpendLedger {
            cap_usd,
            file: Some(path.to_path_buf()),
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
    /// would be passed.
    pub fn reserve(&self, estimate_usd: f64) -> Result<Reservation<'_>, LlmError> {
        let estimate_usd = if estimate_usd.is_finite() {
            estimate_usd.max(0.0)
        } else {
            0.0
        };
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
        state.reserved_usd += estimate_usd;
        Ok(Reservation {
            ledger: self,
            estimate_usd,
            settled: false,
        })
    }

    fn release(&self, estimate_usd: f64) {
        let mut state = self.lock();
        state.reserved_usd = (state.reserved_usd - estimate_usd).max(0.0);
    }
}

/// Money set aside for one call in flight. Settle it with the real cost; dropped
/// unsettled (the call failed), it gives the money back.
#[derive(Debug)]
pub struct Reservation<'a> {
    ledger: &'a SpendLedger,
    estimate_usd: f64,
    settled: bool,
}

impl Reservation<'_> {
    /// Books the call's real cost (and appends it to the ledger file, if any).
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
        let entry = LedgerEntry {
            at: crate::calendar::unix_seconds(),
            provider: provider.to_string(),
            model: completion.model.clone(),
            purpose,
            input_tokens: completion.input_tokens,
            output_tokens: completion.output_tokens,
            cost_usd,
        };
        let line =
            serde_json::to_string(&entry).map_err(|error| LlmError::Ledger(error.to_string()))?;
        if let Some(parent) = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|error| {
                LlmError::Ledger(format!("cannot create {}: {error}", parent.display()))
            })?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|error| {
                LlmError::Ledger(format!("cannot open {}: {error}", path.display()))
            })?;
        writeln!(file, "{line}")
            .map_err(|error| LlmError::Ledger(format!("cannot write {}: {error}", path.display())))
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.ledger.release(self.estimate_usd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion() -> Completion {
        Completion {
            text: "ok".into(),
            input_tokens: 10,
            output_tokens: 2,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            tokens_estimated: false,
            truncated: false,
            model: "m".into(),
            attempts: 1,
            alternatives: Vec::new(),
        }
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
}
