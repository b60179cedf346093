//! API keys: [`ApiKey`] holds one secret and never shows it (Debug and Display print a
//! short fingerprint), and [`KeyRing`] holds a provider's keys in order with the state
//! of their daily budgets, so a key whose daily quota is spent is skipped until the next
//! UTC day.
//!
//! Keys come from the environment: `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` first, then
//! the comma-separated `ANTHROPIC_API_KEYS` / `OPENAI_API_KEYS`, duplicates dropped.

use std::fmt;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// One API key. The secret leaves this type only through [`ApiKey::expose`], which the
/// HTTP providers call to build a header marked sensitive.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    secret: String,
}

impl ApiKey {
    /// None for an empty or blank string.
    pub fn new(secret: impl Into<String>) -> Option<ApiKey> {
        let secret = secret.into().trim().to_string();
        if secret.is_empty() {
            None
        } else {
            Some(ApiKey { secret })
        }
    }

    /// The secret itself, for the request header and nothing else.
    pub fn expose(&self) -> &str {
        &self.secret
    }

    /// The first 8 hex digits of the key's SHA-256: tells keys apart in messages
    /// without revealing any character of them.
    pub fn fingerprint(&self) -> String {
        let digest = Sha256::digest(self.secret.as_bytes());
        digest
            .iter()
            .take(4)
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey(redacted, sha256:{})", self.fingerprint())
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key sha256:{}", self.fingerprint())
    }
}

/// Keys from the environment for `provider` (`ANTHROPIC` or `OPENAI`): `{P}_API_KEY`
/// first, then each of the comma-separated `{P}_API_KEYS`, without duplicates.
pub fn keys_from_env(env_prefix: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<ApiKey> {
    let mut keys: Vec<ApiKey> = Vec::new();
    let single = lookup(&format!("{env_prefix}_API_KEY"));
    let many = lookup(&format!("{env_prefix}_API_KEYS")).unwrap_or_default();
    let candidates = single
        .into_iter()
        .chain(many.split(',').map(str::to_string));
    for key in candidates.filter_map(ApiKey::new) {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

#[derive(Debug)]
struct KeyState {
    current: usize,
    /// Per key: the UTC day number on which its daily quota ran out.
    exhausted_on: Vec<Option<u64>>,
    /// Per key: the server refused it as invalid (never tried again in this process).
    rejected: Vec<bool>,
}

/// A provider's keys in order of preference, with which ones are spent for today.
pub struct KeyRing {
    keys: Vec<ApiKey>,
    state: Mutex<KeyState>,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRing")
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

fn utc_day() -> u64 {
    crate::calendar::unix_seconds() / 86_400
}

impl KeyRing {
    pub fn new(keys: Vec<ApiKey>) -> KeyRing {
        let count = keys.len();
        KeyRing {
            keys,
            state: Mutex::new(KeyState {
                current: 0,
                exhausted_on: vec![None; count],
                rejected: vec![false; count],
            }),
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KeyState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The key to use now with its index: the current one if usable today, else the next
    /// usable one. None when the ring is empty or every key is spent or rejected.
    pub fn current(&self) -> Option<(usize, ApiKey)> {
        let today = utc_day();
        let mut state = self.lock();
        let count = self.keys.len();
        for offset in 0..count {
            let index = (state.current + offset) % count;
            let spent_today = state.exhausted_on[index] == Some(today);
            if !spent_today && !state.rejected[index] {
                state.current = index;
                return Some((index, self.keys[index].clone()));
            }
        }
        None
    }

    /// Marks key `index` as out of daily quota until the next UTC day.
    pub fn mark_exhausted(&self, index: usize) {
        let today = utc_day();
        let mut state = self.lock();
        if let Some(slot) = state.exhausted_on.get_mut(index) {
            *slot = Some(today);
        }
    }

    /// Marks key `index` as refused by the server (invalid or revoked).
    pub fn mark_rejected(&self, index: usize) {
        let mut state = self.lock();
        if let Some(slot) = state.rejected.get_mut(index) {
            *slot = true;
        }
    }

    /// Fingerprints of the keys, for `askdb model check`.
    pub fn fingerprints(&self) -> Vec<String> {
        self.keys.iter().map(ApiKey::fingerprint).collect()
    }

    /// `text` with every key of the ring replaced by its redacted form: servers sometimes
    /// echo the key they were sent, and their messages end up in errors.
    pub fn scrub(&self, text: &str) -> String {
        let mut scrubbed = text.to_string();
        for key in &self.keys {
            if scrubbed.contains(key.expose()) {
                scrubbed = scrubbed.replace(key.expose(), &key.to_string());
            }
        }
        scrubbed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "sk-test-4f9a2c81d7e6b3a0";

    #[test]
    fn debug_and_display_never_show_the_secret() {
        let key = ApiKey::new(SECRET).expect("non-empty");
        let shown = format!("{key:?} {key} {:?}", KeyRing::new(vec![key.clone()]));
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(!shown.contains("4f9a"), "{shown}");
        assert!(shown.contains(&key.fingerprint()), "{shown}");
    }

    #[test]
    fn keys_come_single_first_then_the_list_without_duplicates() {
        let lookup = |name: &str| match name {
            "OPENAI_API_KEY" => Some("one".to_string()),
            "OPENAI_API_KEYS" => Some(" two, one ,,three ".to_string()),
            _ => None,
        };
        let keys = keys_from_env("OPENAI", &lookup);
        let secrets: Vec<&str> = keys.iter().map(ApiKey::expose).collect();
        assert_eq!(secrets, ["one", "two", "three"]);
    }

    #[test]
    fn an_exhausted_key_is_skipped_and_the_last_one_leaves_none() {
        let ring = KeyRing::new(vec![
            ApiKey::new("a").expect("key"),
            ApiKey::new("b").expect("key"),
        ]);
        assert_eq!(ring.current().map(|(index, _)| index), Some(0));
        ring.mark_exhausted(0);
        assert_eq!(ring.current().map(|(index, _)| index), Some(1));
        ring.mark_rejected(1);
        assert!(ring.current().is_none());
    }

    #[test]
    fn scrub_replaces_an_echoed_key() {
        let ring = KeyRing::new(vec![ApiKey::new(SECRET).expect("key")]);
        let text = ring.scrub(&format!("Incorrect API key provided: {SECRET}."));
        assert!(!text.contains(SECRET), "{text}");
        assert!(text.contains("key sha256:"), "{text}");
    }
}
