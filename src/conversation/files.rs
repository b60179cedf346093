//! Conversations as files in askdb's data directory, for the command line: `askdb ask
//! --conversation ID` runs once per question, so a conversation must outlive the process
//! that began it. One `<id>.json` per conversation (its kept turns and the next turn's
//! number), written whole through a temporary file and a rename; a question being
//! answered holds `<id>.lock`, created only if absent, so two processes asking on one
//! conversation at once get [`ConversationError::Busy`]. The same bounds as the memory
//! store: a time to live from the file's last write, a cap on conversations (the one
//! idle longest removed), a cap on turns kept. A lock older than the time to live is left
//! by a process that died, and is taken over.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{
    ready, Begun, ConversationError, ConversationId, ConversationStore, Limits, Owner, StoreFuture,
};
use crate::agent::conversation::{Context, Turn};

#[derive(Debug, Default, Serialize, Deserialize)]
struct Saved {
    next_number: u32,
    turns: Vec<Turn>,
    /// The user who began it (absent in files written before owners were kept: those
    /// were all the command line's, which has none).
    #[serde(default)]
    owner: Option<String>,
}

/// The store of one directory.
pub struct FileStore {
    dir: PathBuf,
    limits: Limits,
}

fn storage(path: &Path, error: impl std::fmt::Display) -> ConversationError {
    ConversationError::Storage(format!("{}: {error}", path.display()))
}

/// How long ago a file was last written; None when it cannot be told.
fn age(path: &Path) -> Option<Duration> {
    let modified = std::fs::metadata(path)
        .and_then(|meta| meta.modified())
        .ok()?;
    SystemTime::now().duration_since(modified).ok()
}

impl FileStore {
    pub fn new(dir: PathBuf, limits: Limits) -> FileStore {
        FileStore { dir, limits }
    }

    /// The store in askdb's data directory (`conversations/`).
    pub fn in_data_dir(limits: Limits) -> FileStore {
        FileStore::new(crate::home::data_dir().join("conversations"), limits)
    }

    fn file(&self, id: &ConversationId) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    fn lock(&self, id: &ConversationId) -> PathBuf {
        self.dir.join(format!("{id}.lock"))
    }

    fn expired(&self, path: &Path) -> bool {
        age(path).is_some_and(|age| age >= self.limits.ttl)
    }

    /// Takes the conversation's lock; false when another question holds it.
    fn take_lock(&self, id: &ConversationId) -> Result<bool, ConversationError> {
        let lock = self.lock(id);
        if lock.exists() && self.expired(&lock) {
            // Left by a process that died while answering.
            let _ = std::fs::remove_file(&lock);
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock)
        {
            Ok(_) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(error) => Err(storage(&lock, error)),
        }
    }

    fn read(&self, id: &ConversationId) -> Result<Saved, ConversationError> {
        let path = self.file(id);
        let text = std::fs::read_to_string(&path).map_err(|error| storage(&path, error))?;
        serde_json::from_str(&text).map_err(|error| storage(&path, error))
    }

    fn write(&self, id: &ConversationId, saved: &Saved) -> Result<(), ConversationError> {
        let path = self.file(id);
        let temporary = self.dir.join(format!("{id}.json.part"));
        let text = serde_json::to_vec(saved).map_err(|error| storage(&path, error))?;
        std::fs::write(&temporary, text).map_err(|error| storage(&temporary, error))?;
        std::fs::rename(&temporary, &path).map_err(|error| storage(&path, error))
    }

    /// The ids held, each with its file's age.
    fn held(&self) -> Vec<(ConversationId, Option<Duration>)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().to_string();
                let id = ConversationId::parse(name.strip_suffix(".json")?).ok()?;
                Some((id, age(&entry.path())))
            })
            .collect()
    }

    fn remove(&self, id: &ConversationId) {
        let _ = std::fs::remove_file(self.file(id));
    }

    fn begin_new(&self, owner: Owner<'_>) -> Result<Begun, ConversationError> {
        let mut idle = Vec::new();
        for (id, age) in self.held() {
            if self.lock(&id).exists() {
                continue;
            }
            if age.is_some_and(|age| age >= self.limits.ttl) {
                self.remove(&id);
            } else {
                idle.push((id, age));
            }
        }
        let held = self.held().len();
        if held >= self.limits.max_conversations.max(1) {
            // The one idle longest makes room.
            idle.sort_by_key(|(_, age)| std::cmp::Reverse(*age));
            match idle.first() {
                Some((id, _)) => self.remove(id),
                None => return Err(ConversationError::Full),
            }
        }
        let mut id = ConversationId::fresh();
        while self.file(&id).exists() {
            id = ConversationId::fresh();
        }
        self.write(
            &id,
            &Saved {
                next_number: 1,
                turns: Vec::new(),
                owner: owner.map(str::to_string),
            },
        )?;
        if !self.take_lock(&id)? {
            return Err(ConversationError::Busy { id: id.to_string() });
        }
        Ok(Begun {
            id,
            number: 1,
            context: Context::default(),
        })
    }
}

impl ConversationStore for FileStore {
    fn begin<'a>(
        &'a self,
        id: Option<&'a ConversationId>,
        owner: Owner<'a>,
    ) -> StoreFuture<'a, Result<Begun, ConversationError>> {
        // A few small files: read and written where called, as the command line's one
        // question at a time needs nothing more.
        ready(self.begin_now(id, owner))
    }

    fn end<'a>(&'a self, id: &'a ConversationId, turn: Option<Turn>) -> StoreFuture<'a, ()> {
        self.end_now(id, turn);
        ready(())
    }

    fn count(&self) -> StoreFuture<'_, usize> {
        ready(self.held().len())
    }
}

impl FileStore {
    /// [`ConversationStore::begin`], done at once.
    pub fn begin_now(
        &self,
        id: Option<&ConversationId>,
        owner: Owner<'_>,
    ) -> Result<Begun, ConversationError> {
        std::fs::create_dir_all(&self.dir).map_err(|error| storage(&self.dir, error))?;
        let Some(id) = id else {
            return self.begin_new(owner);
        };
        let path = self.file(id);
        let not_found = || ConversationError::NotFound { id: id.to_string() };
        if !path.exists() {
            return Err(not_found());
        }
        // Another owner's conversation is unknown to this one, busy or not. The owner
        // never changes, so reading it before the lock is safe.
        if self.read(id)?.owner.as_deref() != owner {
            return Err(not_found());
        }
        if !self.take_lock(id)? {
            return Err(ConversationError::Busy { id: id.to_string() });
        }
        if self.expired(&path) {
            self.remove(id);
            let _ = std::fs::remove_file(self.lock(id));
            return Err(not_found());
        }
        let saved = match self.read(id) {
            Ok(saved) => saved,
            Err(error) => {
                let _ = std::fs::remove_file(self.lock(id));
                return Err(error);
            }
        };
        Ok(Begun {
            id: id.clone(),
            number: saved.next_number.max(1),
            context: Context::new(saved.turns),
        })
    }

    /// [`ConversationStore::end`], done at once.
    pub fn end_now(&self, id: &ConversationId, turn: Option<Turn>) {
        if let Ok(mut saved) = self.read(id) {
            match turn {
                Some(turn) => {
                    saved.next_number = turn.number.saturating_add(1);
                    saved.turns.push(turn);
                    let excess = saved.turns.len().saturating_sub(self.limits.turns_kept);
                    saved.turns.drain(..excess);
                    // A turn that cannot be saved is lost, the conversation kept as it
                    // was: the answer itself was already given.
                    let _ = self.write(id, &saved);
                }
                None if saved.turns.is_empty() => self.remove(id),
                None => {}
            }
        }
        let _ = std::fs::remove_file(self.lock(id));
    }

    /// How many conversations are held.
    pub fn held_count(&self) -> usize {
        self.held().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{AgentResult, Decision};

    fn store(dir: &Path, ttl: Duration, max: usize) -> FileStore {
        FileStore::new(
            dir.join("conversations"),
            Limits {
                ttl,
                max_conversations: max,
                turns_kept: 2,
            },
        )
    }

    fn turn(number: u32) -> Turn {
        Turn::from_result(
            number,
            &AgentResult::for_tests(&format!("q{number}"), Decision::Answer),
        )
    }

    #[test]
    fn a_conversation_outlives_its_store_and_keeps_its_capped_turns() {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = store(dir.path(), Duration::from_secs(600), 10);
        let begun = first.begin_now(None, None).expect("new");
        let id = begun.id.clone();
        assert!(
            matches!(
                first.begin_now(Some(&id), None),
                Err(ConversationError::Busy { .. })
            ),
            "one question at a time, across processes too"
        );
        first.end_now(&id, Some(turn(1)));
        drop(first);
        // Another process, the same directory.
        let second = store(dir.path(), Duration::from_secs(600), 10);
        for number in 2..=3 {
            let begun = second.begin_now(Some(&id), None).expect("continues");
            assert_eq!(begun.number, number);
            second.end_now(&id, Some(turn(number)));
        }
        let begun = second.begin_now(Some(&id), None).expect("continues");
        let kept: Vec<u32> = begun.context.turns.iter().map(|turn| turn.number).collect();
        assert_eq!(kept, vec![2, 3]);
        // A failed question leaves the conversation as it was.
        second.end_now(&id, None);
        assert_eq!(second.begin_now(Some(&id), None).expect("free").number, 4);
    }

    #[test]
    fn unknown_and_expired_conversations_are_not_found_and_the_cap_holds() {
        let dir = tempfile::tempdir().expect("temp dir");
        let expiring = store(dir.path(), Duration::from_millis(50), 2);
        let begun = expiring.begin_now(None, None).expect("new");
        expiring.end_now(&begun.id, Some(turn(1)));
        std::thread::sleep(Duration::from_millis(80));
        assert!(matches!(
            expiring.begin_now(Some(&begun.id), None),
            Err(ConversationError::NotFound { .. })
        ));
        assert!(matches!(
            expiring.begin_now(Some(&ConversationId::fresh()), None),
            Err(ConversationError::NotFound { .. })
        ));
        let capped = store(dir.path(), Duration::from_secs(600), 2);
        let mut ids = Vec::new();
        for _ in 0..3 {
            let begun = capped.begin_now(None, None).expect("new");
            capped.end_now(&begun.id, Some(turn(1)));
            ids.push(begun.id);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(capped.held_count(), 2);
        assert!(matches!(
            capped.begin_now(Some(&ids[0]), None),
            Err(ConversationError::NotFound { .. })
        ));
    }

    #[test]
    fn another_users_conversation_is_not_found_across_processes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = store(dir.path(), Duration::from_secs(600), 10);
        let begun = first.begin_now(None, Some("ana")).expect("ana's");
        let id = begun.id.clone();
        // Still answering: ben is not told it is busy.
        assert!(matches!(
            first.begin_now(Some(&id), Some("ben")),
            Err(ConversationError::NotFound { .. })
        ));
        first.end_now(&id, Some(turn(1)));
        let second = store(dir.path(), Duration::from_secs(600), 10);
        for other in [Some("ben"), None] {
            assert_eq!(
                second.begin_now(Some(&id), other),
                Err(ConversationError::NotFound { id: id.to_string() }),
                "{other:?}"
            );
        }
        assert_eq!(
            second
                .begin_now(Some(&id), Some("ana"))
                .expect("ana's")
                .number,
            2
        );
    }
}
