//! The model's first look at the database when `askdb serve` starts: the schema's prompt
//! prefix restored from the copy the model server saved at an earlier start, or read and
//! saved, in the background while the server already answers, and what a question
//! asked meanwhile does.
//!
//! A restore takes seconds, so a question waits for it. A first read of a large schema
//! takes a minute or more on a small machine (the demo's prefix: about 70 s on two
//! cores), so a question asked while it runs does not wait: it is asked with a compact
//! prompt (the few tables it links to and only their notes,
//! [`crate::agent::AskOptions::compact_prompt`]), and the read pauses while such
//! questions run, as both would share the same cores. The read starts again after them.
//! Decision record 0055.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{watch, Mutex, OwnedMutexGuard};

use crate::agent::Agent;
use crate::llm::Warmed;

/// The warm-up's state, shared by the server's handlers.
pub struct WarmUp {
    /// Held while a saved prefix is restored: a question waits for it.
    restoring: Arc<Mutex<()>>,
    /// The model is reading the schema for the first time: questions go linked.
    reading: AtomicBool,
    /// Questions asked while the schema is read and not finished yet.
    cold_questions: watch::Sender<usize>,
}

impl Default for WarmUp {
    fn default() -> Self {
        WarmUp {
            restoring: Arc::new(Mutex::new(())),
            reading: AtomicBool::new(false),
            cold_questions: watch::Sender::new(0),
        }
    }
}

/// A question asked while the schema is read: the read stays paused while it lives.
pub struct ColdQuestion<'w> {
    warm_up: &'w WarmUp,
}

impl Drop for ColdQuestion<'_> {
    fn drop(&mut self) {
        self.warm_up
            .cold_questions
            .send_modify(|count| *count = count.saturating_sub(1));
    }
}

/// What the warm-up did, for the server's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WarmUpEnd {
    Restored,
    Read {
        saved: bool,
        paused: u32,
    },
    /// Nothing to warm: the schema is linked per question.
    NoPrefix,
    Failed(String),
}

impl WarmUp {
    /// Waits while a saved prefix is restored, then says whether the question is cold:
    /// Some while the schema is being read for the first time (ask it with a compact
    /// prompt; the read pauses until the guard drops), None when the prefix is in the
    /// model's cache or no warm-up runs.
    pub async fn before_question(&self) -> Option<ColdQuestion<'_>> {
        drop(self.restoring.lock().await);
        if !self.reading.load(Ordering::SeqCst) {
            return None;
        }
        self.cold_questions.send_modify(|count| *count += 1);
        Some(ColdQuestion { warm_up: self })
    }

    /// Whether the model is reading the schema now (a question asked now is compact).
    #[cfg(test)]
    pub fn reading(&self) -> bool {
        self.reading.load(Ordering::SeqCst)
    }

    /// Takes the restore lock before the task starts, so no question slips in ahead of
    /// the restore; None when a warm-up already runs.
    pub fn begin(&self) -> Option<OwnedMutexGuard<()>> {
        self.restoring.clone().try_lock_owned().ok()
    }

    /// Restores or reads the prefix (`restoring` is the guard [`WarmUp::begin`] took),
    /// pausing the read while cold questions run.
    pub async fn run(&self, agent: &Agent, restoring: OwnedMutexGuard<()>) -> WarmUpEnd {
        if agent.restore_prefix(false).await {
            return WarmUpEnd::Restored;
        }
        // Set before the restore lock is let go: a question waiting on it sees the read.
        self.reading.store(true, Ordering::SeqCst);
        drop(restoring);
        let end = self.read(agent).await;
        self.reading.store(false, Ordering::SeqCst);
        end
    }

    async fn read(&self, agent: &Agent) -> WarmUpEnd {
        let mut cold = self.cold_questions.subscribe();
        let mut paused = 0;
        loop {
            if cold.wait_for(|count| *count == 0).await.is_err() {
                return WarmUpEnd::Failed("the server is stopping".to_string());
            }
            // Dropping the read when a question comes closes its request; the model
            // server stops reading at the end of the batch it is on.
            let question_came = async {
                let _ = cold.wait_for(|count| *count > 0).await;
            };
            tokio::select! {
                warmed = agent.warm_up() => {
                    return match warmed {
                        Ok(Some(Warmed::Read { saved })) => WarmUpEnd::Read { saved, paused },
                        Ok(Some(Warmed::Restored)) => WarmUpEnd::Restored,
                        Ok(None) => WarmUpEnd::NoPrefix,
                        Err(error) => WarmUpEnd::Failed(error.to_string()),
                    };
                }
                () = question_came => paused += 1,
            }
        }
    }
}

/// What every line of the server's log about the warm-up begins with.
pub use crate::llm::WARM_UP_LOG_PREFIX as LOG_PREFIX;

/// The server's log line for how the warm-up ended, after [`LOG_PREFIX`].
pub fn log_line(end: &WarmUpEnd, started: Instant) -> String {
    format!("{LOG_PREFIX}{}", ended_how(end, started))
}

fn ended_how(end: &WarmUpEnd, started: Instant) -> String {
    let seconds = started.elapsed().as_secs_f64();
    match end {
        WarmUpEnd::Restored => {
            format!("the model restored the schema it read at an earlier start ({seconds:.1} s)")
        }
        WarmUpEnd::Read { saved, paused } => format!(
            "the model has read the schema ({seconds:.1} s{}){}",
            match *paused {
                0 => String::new(),
                1 => ", paused once for a question".to_string(),
                n => format!(", paused {n} times for questions"),
            },
            if *saved {
                "; it keeps a copy for the next start"
            } else {
                ""
            }
        ),
        WarmUpEnd::NoPrefix => "nothing to read ahead: each question's prompt holds the tables \
                                it links to"
            .to_string(),
        WarmUpEnd::Failed(error) => format!("warming the model failed: {error}"),
    }
}
