//! An optional on-disk cache of model replies (`ASKDB_CACHE_DIR`), keyed by the SHA-256
//! of the whole request: provider, model, endpoint, purpose, question, every message,
//! temperature, token limit and JSON schema. Any change to any of them is a miss. A hit
//! is free and takes no time, which makes re-running an evaluation cheap; replies made
//! at a temperature above zero are cached too, so a cached run replays the first sample.
//!
//! One file per reply, `<dir>/<first two hex digits>/<hash>.json`, written to a temporary
//! name and renamed so a reader never sees half a file. An unreadable entry is a miss.

use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{Completion, LlmError, ModelRequest};

/// The request as hashed: everything that can change the reply.
#[derive(Serialize)]
struct CacheKeyMaterial<'a> {
    /// Bumped when the meaning of an entry changes, so old entries stop matching.
    format: u32,
    provider: &'a str,
    model: &'a str,
    endpoint: &'a str,
    request: &'a ModelRequest,
}

/// A directory of cached replies.
#[derive(Debug, Clone)]
pub struct ResponseCache {
    dir: PathBuf,
}

impl ResponseCache {
    /// Opens (creating) the cache directory; fails now rather than at the first write.
    pub fn open(dir: &Path) -> Result<ResponseCache, LlmError> {
        std::fs::create_dir_all(dir).map_err(|error| {
            LlmError::Cache(format!("cannot create {}: {error}", dir.display()))
        })?;
        Ok(ResponseCache {
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The hex SHA-256 of the full request.
    pub fn key(
        &self,
        provider: &str,
        model: &str,
        endpoint: &str,
        request: &ModelRequest,
    ) -> String {
        let material = CacheKeyMaterial {
            format: 1,
            provider,
            model,
            endpoint,
            request,
        };
        // Serializing plain structs, strings and numbers cannot fail; were it ever to, the
        // Debug form still identifies the request exactly.
        let bytes = serde_json::to_vec(&material)
            .unwrap_or_else(|_| format!("{provider}|{model}|{endpoint}|{request:?}").into_bytes());
        Sha256::digest(&bytes)
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    fn path(&self, key: &str) -> PathBuf {
        let shard = key.get(..2).unwrap_or("00");
        self.dir.join(shard).join(format!("{key}.json"))
    }

    /// The cached completion for `key`, if there is a readable one.
    pub fn get(&self, key: &str) -> Option<Completion> {
        let text = std::fs::read_to_string(self.path(key)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Stores a completion under `key`.
    pub fn put(&self, key: &str, completion: &Completion) -> Result<(), LlmError> {
        let path = self.path(key);
        let cache_error = |what: &str, error: &dyn std::fmt::Display| {
            LlmError::Cache(format!("{what} {}: {error}", path.display()))
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|error| cache_error("cannot create the folder of", &error))?;
        }
        let text = serde_json::to_string_pretty(completion)
            .map_err(|error| cache_error("cannot encode", &error))?;
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&temporary, text).map_err(|error| cache_error("cannot write", &error))?;
        std::fs::rename(&temporary, &path)
            .map_err(|error| cache_error("cannot rename into", &error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, Purpose};

    fn request(question: &str) -> ModelRequest {
        ModelRequest::new(Purpose::WriteSql, question, vec![Message::user(question)])
    }

    fn completion() -> Completion {
        crate::llm::tests::completion("{\"sql\": \"SELECT 1\"}", "m", (12, 7))
    }

    #[test]
    fn every_part_of_the_request_changes_the_key() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cache = ResponseCache::open(dir.path()).expect("opens");
        let base = cache.key("openai", "m", "http://x", &request("q"));
        assert_eq!(base, cache.key("openai", "m", "http://x", &request("q")));
        assert_ne!(base, cache.key("openai", "m2", "http://x", &request("q")));
        assert_ne!(base, cache.key("anthropic", "m", "http://x", &request("q")));
        assert_ne!(base, cache.key("openai", "m", "http://y", &request("q")));
        assert_ne!(base, cache.key("openai", "m", "http://x", &request("q2")));
        let warmer = request("q").with_temperature(0.5);
        assert_ne!(base, cache.key("openai", "m", "http://x", &warmer));
        let shorter = request("q").with_max_tokens(10);
        assert_ne!(base, cache.key("openai", "m", "http://x", &shorter));
        let schema = request("q").with_json_schema(
            serde_json::json!({"type": "object"}),
            "Reply with JSON matching the JSON schema",
        );
        assert_ne!(base, cache.key("openai", "m", "http://x", &schema));
        let mut repair = request("q");
        repair.purpose = Purpose::RepairSql;
        assert_ne!(base, cache.key("openai", "m", "http://x", &repair));
    }

    #[test]
    fn a_stored_reply_comes_back_and_a_corrupt_one_is_a_miss() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cache = ResponseCache::open(dir.path()).expect("opens");
        let key = cache.key("openai", "m", "http://x", &request("q"));
        assert!(cache.get(&key).is_none());
        cache.put(&key, &completion()).expect("stored");
        assert_eq!(cache.get(&key), Some(completion()));
        std::fs::write(cache.path(&key), "{broken").expect("write");
        assert!(cache.get(&key).is_none());
    }
}
