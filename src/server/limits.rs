//! What protects the model budget: a token bucket per client address (so one client
//! cannot spend everyone's budget) and a cap on questions answered at once (so a burst
//! from many clients queues nowhere: the extra ones are told to come back, never kept
//! waiting). Both answer at once; neither ever blocks a request.
//!
//! The pace is kept behind [`Pace`], chosen once at start: this process's
//! [`RateLimiter`], or the buckets replicas share (`--state-url`, [`SharedPace`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::AppError;
use crate::llm::BoxFuture;
use crate::state::pace::SharedBuckets;

/// Buckets kept before idle ones are dropped: bounds memory under a flood of addresses.
const MAX_TRACKED_CLIENTS: usize = 10_000;

/// How long a busy client is told to wait: a question takes seconds, not minutes.
pub const BUSY_RETRY_AFTER: Duration = Duration::from_secs(5);

/// How long a client is told to wait when every database connection was taken: the
/// pool turns over within a statement timeout.
pub const DATABASE_BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// Whose questions a server's pace counts: a signed-in user's, wherever they come from
/// (behind a proxy every user shares its address), else an address's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Asker {
    User(String),
    Address(IpAddr),
}

impl Asker {
    pub fn of(user: Option<&str>, address: IpAddr) -> Asker {
        match user {
            Some(name) => Asker::User(name.to_string()),
            None => Asker::Address(address),
        }
    }

    /// The asker as the shared buckets' key: a user and an address never collide.
    pub fn key(&self) -> String {
        match self {
            Asker::User(name) => format!("user:{name}"),
            Asker::Address(address) => format!("address:{address}"),
        }
    }
}

/// A server's pace: takes one question's token for an asker, or refuses with
/// [`AppError::RateLimited`] (or [`AppError::SharedState`] when the shared buckets do
/// not answer: no question is let through uncounted).
pub trait Pace: Send + Sync {
    fn take<'a>(&'a self, asker: &'a Asker) -> BoxFuture<'a, Result<(), AppError>>;
}

impl Pace for RateLimiter<Asker> {
    fn take<'a>(&'a self, asker: &'a Asker) -> BoxFuture<'a, Result<(), AppError>> {
        let taken = self
            .check(asker.clone(), Instant::now())
            .map_err(|retry_after| AppError::RateLimited { retry_after });
        Box::pin(async move { taken })
    }
}

/// The pace every replica shares: the same bucket per asker, kept in the shared state.
#[derive(Debug, Clone)]
pub struct SharedPace {
    buckets: SharedBuckets,
    per_minute: u32,
}

impl SharedPace {
    pub fn new(buckets: SharedBuckets, per_minute: u32) -> SharedPace {
        SharedPace {
            buckets,
            per_minute,
        }
    }
}

impl Pace for SharedPace {
    fn take<'a>(&'a self, asker: &'a Asker) -> BoxFuture<'a, Result<(), AppError>> {
        Box::pin(async move {
            match self.buckets.take(&asker.key(), self.per_minute).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(retry_after)) => Err(AppError::RateLimited { retry_after }),
                Err(error) => Err(AppError::SharedState(error.to_string())),
            }
        })
    }
}

/// A token bucket per client (an address; a signed-in user's name under a policy):
/// `per_minute` tokens at most, refilled evenly over a minute, one token per question.
/// 0 per minute switches the limit off.
#[derive(Debug)]
pub struct RateLimiter<K = IpAddr> {
    per_minute: u32,
    buckets: Mutex<HashMap<K, Bucket>>,
}

impl<K: std::hash::Hash + Eq> RateLimiter<K> {
    pub fn new(per_minute: u32) -> RateLimiter<K> {
        RateLimiter {
            per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token for `client`, or says how long until one is available.
    pub fn check(&self, client: K, now: Instant) -> Result<(), Duration> {
        if self.per_minute == 0 {
            return Ok(());
        }
        let capacity = f64::from(self.per_minute);
        let per_second = capacity / 60.0;
        // A poisoned lock only means another request panicked mid-update; the counts
        // are still usable.
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if buckets.len() >= MAX_TRACKED_CLIENTS && !buckets.contains_key(&client) {
            // Drop buckets that have refilled completely: they hold no information.
            buckets.retain(|_, bucket| {
                let idle = now.saturating_duration_since(bucket.updated).as_secs_f64();
                bucket.tokens + idle * per_second < capacity
            });
        }
        let bucket = buckets.entry(client).or_insert(Bucket {
            tokens: capacity,
            updated: now,
        });
        let idle = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + idle * per_second).min(capacity);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_second))
        }
    }
}

/// At most `n` questions in flight; [`AskSlots::try_take`] never waits.
#[derive(Debug, Clone)]
pub struct AskSlots {
    semaphore: Arc<Semaphore>,
}

impl AskSlots {
    pub fn new(n: usize) -> AskSlots {
        AskSlots {
            semaphore: Arc::new(Semaphore::new(n)),
        }
    }

    /// A slot held until the permit is dropped, or None when all are taken.
    pub fn try_take(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.semaphore).try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_its_burst_then_waits_for_the_refill() {
        let limiter = RateLimiter::new(3);
        let client: IpAddr = [127, 0, 0, 1].into();
        let other: IpAddr = [127, 0, 0, 2].into();
        let start = Instant::now();
        for _ in 0..3 {
            assert!(limiter.check(client, start).is_ok());
        }
        let wait = limiter.check(client, start).expect_err("bucket empty");
        // 3 per minute: one token every 20 s.
        assert!(
            wait > Duration::from_secs(19) && wait <= Duration::from_secs(20),
            "{wait:?}"
        );
        assert!(
            limiter.check(other, start).is_ok(),
            "clients have their own buckets"
        );
        assert!(limiter
            .check(client, start + Duration::from_secs(20))
            .is_ok());
        assert!(limiter
            .check(client, start + Duration::from_secs(21))
            .is_err());
    }

    #[test]
    fn zero_per_minute_means_no_limit() {
        let limiter = RateLimiter::<IpAddr>::new(0);
        let now = Instant::now();
        for _ in 0..100 {
            assert!(limiter.check([10, 0, 0, 1].into(), now).is_ok());
        }
    }

    #[test]
    fn slots_are_refused_not_waited_for_and_come_back_when_dropped() {
        let slots = AskSlots::new(1);
        let held = slots.try_take().expect("one slot");
        assert!(slots.try_take().is_none());
        drop(held);
        assert!(slots.try_take().is_some());
    }
}
