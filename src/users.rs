//! The users `askdb serve` signs in (decision 0022): each a name and the SHA-256 of a
//! bearer token. A token is 32 random bytes from the operating system, shown once by
//! `askdb users add` and never stored; a presented token is hashed and compared with
//! every stored hash in constant time. A revoked user stays listed, so revoking the last
//! one never turns sign-in off.
//!
//! Where users are kept is a [`UserStore`]: `users.json` in askdb's data directory
//! ([`UserFile`]), or, for replicas, the shared state's table
//! (`crate::state::users::SharedUsers`, decision 0083). What a user is, how a token is
//! made and hashed, which names and policies are allowed and what signs in are decided
//! here once, over [`UserRecord`]s, whichever store holds them.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What every token starts with: a secret scanner and a reader can tell it is askdb's.
const TOKEN_PREFIX: &str = "askdb_";
/// Random bytes in a token.
const TOKEN_BYTES: usize = 32;
/// The longest user name.
const MAX_NAME_CHARS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("cannot write {path}: {error}")]
    Write { path: String, error: std::io::Error },
    #[error("{path} is not a users file askdb wrote: {error}")]
    Malformed { path: String, error: String },
    #[error("a user name is 1 to {MAX_NAME_CHARS} letters, digits, '.', '-' or '_' (got {0:?})")]
    BadName(String),
    #[error("there is already a user {0:?}; revoke it first or choose another name")]
    Exists(String),
    #[error("there is no user {0:?} (askdb users list shows them)")]
    Unknown(String),
    #[error("the operating system gave no random bytes for a token: {0}")]
    Random(String),
    #[error(
        "--policy {0:?} is neither a policy name (letters, digits, '.', '-', '_': \
         policies/NAME.toml beside the notes) nor a policy file that exists"
    )]
    BadPolicy(String),
    /// The shared state's users table could not be read or written (its error, with
    /// any password redacted, as text: this layer cannot name the state's error type).
    #[error("the shared users: {0}")]
    Shared(String),
}

/// One user as stored, in the file or the shared table: never the token, only its hash.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UserRecord {
    pub name: String,
    /// Hex SHA-256 of the whole token text.
    pub token_sha256: String,
    pub created: String,
    #[serde(default)]
    pub revoked: Option<String>,
    /// The user's policy (decision 0076): a name (`policies/NAME.toml` beside the
    /// notes) or an absolute path; None: the notes alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    users: Vec<UserRecord>,
}

/// A user as `askdb users list` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct UserSummary {
    pub name: String,
    pub created: String,
    /// When the user was revoked; None while the token works.
    pub revoked: Option<String>,
    /// The user's policy, as `users add --policy` stored it.
    pub policy: Option<String>,
}

/// Who a live token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    pub name: String,
    /// The user's policy, as stored; None: the notes alone.
    pub policy: Option<String>,
}

/// Whether the server asks for a token (`open` / `required` in `GET /api/session`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignIn {
    /// No user was ever added: whoever reaches the server may use it.
    Open,
    /// Users exist (revoked ones count): every route but health and the page needs one.
    Required,
}

/// The users file.
#[derive(Debug, Clone)]
pub struct UserFile {
    path: PathBuf,
}

impl UserFile {
    /// `users.json` in askdb's data directory.
    pub fn in_data_dir() -> UserFile {
        UserFile::at(crate::home::data_dir().join("users.json"))
    }

    pub fn at(path: impl Into<PathBuf>) -> UserFile {
        UserFile { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<Stored, UsersError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Stored::default())
            }
            Err(error) => {
                return Err(UsersError::Read {
                    path: self.path.display().to_string(),
                    error,
                })
            }
        };
        serde_json::from_str(&text).map_err(|error| UsersError::Malformed {
            path: self.path.display().to_string(),
            error: error.to_string(),
        })
    }

    /// Writes the whole file anew beside the old one, then renames it over: a reader
    /// never sees half a file. Readable by its owner only.
    fn write(&self, stored: &Stored) -> Result<(), UsersError> {
        let failed = |error| UsersError::Write {
            path: self.path.display().to_string(),
            error,
        };
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent).map_err(failed)?;
        }
        let text = serde_json::to_string_pretty(stored)
            .map_err(|error| failed(std::io::Error::other(error)))?;
        let partial = self.path.with_extension("json.partial");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&partial).map_err(failed)?;
        std::io::Write::write_all(&mut file, format!("{text}\n").as_bytes()).map_err(failed)?;
        file.sync_all().map_err(failed)?;
        std::fs::rename(&partial, &self.path).map_err(failed)
    }

    /// Whether the server asks for a token.
    pub fn sign_in(&self) -> Result<SignIn, UsersError> {
        Ok(sign_in_of(&self.read()?.users))
    }

    /// Adds a user and returns its token, the only time it exists outside the client.
    /// `policy`: a policy name, or a path to a policy file (stored absolute).
    pub fn add(&self, name: &str, policy: Option<&str>) -> Result<String, UsersError> {
        let (record, token) = new_user(name, policy)?;
        let mut stored = self.read()?;
        if stored.users.iter().any(|user| user.name == name) {
            return Err(UsersError::Exists(name.to_string()));
        }
        stored.users.push(record);
        self.write(&stored)?;
        Ok(token)
    }

    /// Every user, revoked ones too, in the order they were added.
    pub fn list(&self) -> Result<Vec<UserSummary>, UsersError> {
        Ok(summaries(&self.read()?.users))
    }

    /// Every user as stored (hashes, never tokens), in the order they were added: what
    /// `askdb users --state-url URL import` copies into the shared table.
    pub fn records(&self) -> Result<Vec<UserRecord>, UsersError> {
        Ok(self.read()?.users)
    }

    /// Revokes a user's token for good; the name stays listed as revoked.
    pub fn revoke(&self, name: &str) -> Result<(), UsersError> {
        let mut stored = self.read()?;
        let Some(user) = stored
            .users
            .iter_mut()
            .find(|user| user.name == name && user.revoked.is_none())
        else {
            return Err(UsersError::Unknown(name.to_string()));
        };
        user.revoked = Some(crate::calendar::utc_now().0);
        self.write(&stored)
    }

    /// The user whose live token this is, or None ([`authenticate_in`]).
    pub fn authenticate(&self, token: &str) -> Result<Option<Authenticated>, UsersError> {
        Ok(authenticate_in(&self.read()?.users, token))
    }

    /// The live user called `name`, with its policy ([`live_in`]).
    pub fn live(&self, name: &str) -> Result<Option<Authenticated>, UsersError> {
        Ok(live_in(&self.read()?.users, name))
    }

    /// Whether `name` is a live user ([`UserFile::live`]).
    pub fn is_live(&self, name: &str) -> Result<bool, UsersError> {
        self.live(name).map(|user| user.is_some())
    }
}

/// Whether a server whose store holds `users` asks for a token: once any user was
/// added, revoked ones included, so revoking the last never opens the server.
pub fn sign_in_of(users: &[UserRecord]) -> SignIn {
    if users.is_empty() {
        SignIn::Open
    } else {
        SignIn::Required
    }
}

/// A new user's record and its token, the only time the token exists outside the
/// client: the name and policy checked, 32 random bytes from the operating system, only
/// their SHA-256 in the record. Whether the name is taken is the store's to say.
pub fn new_user(name: &str, policy: Option<&str>) -> Result<(UserRecord, String), UsersError> {
    check_name(name)?;
    let policy = policy.map(stored_policy).transpose()?;
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|error| UsersError::Random(error.to_string()))?;
    let token = format!("{TOKEN_PREFIX}{}", hex(&bytes));
    let record = UserRecord {
        name: name.to_string(),
        token_sha256: token_sha256(&token),
        created: crate::calendar::utc_now().0,
        revoked: None,
        policy,
    };
    Ok((record, token))
}

/// Hex SHA-256 of a token's whole text: all that is ever stored of it.
pub fn token_sha256(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// The users as `askdb users list` shows them.
pub fn summaries(users: &[UserRecord]) -> Vec<UserSummary> {
    users
        .iter()
        .map(|user| UserSummary {
            name: user.name.clone(),
            created: user.created.clone(),
            revoked: user.revoked.clone(),
            policy: user.policy.clone(),
        })
        .collect()
}

/// The live user whose token this is, or None. Every stored hash is compared, each in
/// constant time, so the time taken says nothing of which one (nearly) matched.
pub fn authenticate_in(users: &[UserRecord], token: &str) -> Option<Authenticated> {
    let presented = token_sha256(token);
    let mut found = None;
    for user in users {
        let same: bool = presented
            .as_bytes()
            .ct_eq(user.token_sha256.as_bytes())
            .into();
        if same && user.revoked.is_none() {
            found = Some(Authenticated {
                name: user.name.clone(),
                policy: user.policy.clone(),
            });
        }
    }
    found
}

/// The live user called `name`, with its policy: None for a revoked, removed or unknown
/// name, or one outside the allow-list. What a trusted proxy's user header must name
/// (decision 0072), and what a session of a revoked user ends with.
pub fn live_in(users: &[UserRecord], name: &str) -> Option<Authenticated> {
    if check_name(name).is_err() {
        return None;
    }
    users
        .iter()
        .find(|user| user.name == name && user.revoked.is_none())
        .map(|user| Authenticated {
            name: user.name.clone(),
            policy: user.policy.clone(),
        })
}

/// What a [`UserStore`]'s methods return: a store that never waits (the file) returns
/// a ready one.
pub type UsersFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, UsersError>> + Send + 'a>>;

/// Where the users are kept. Every store gives the file's answers: the same checks of
/// names and policies, a taken name refused (revoked ones stay taken), revocation for
/// good, [`sign_in_of`], [`authenticate_in`] and [`live_in`] over its records.
pub trait UserStore: Send + Sync + std::fmt::Debug {
    /// Whether the server asks for a token.
    fn sign_in(&self) -> UsersFuture<'_, SignIn>;
    /// Adds a user and returns its token, shown this once.
    fn add<'a>(&'a self, name: &'a str, policy: Option<&'a str>) -> UsersFuture<'a, String>;
    /// Every user, revoked ones too, in the order they were added.
    fn list(&self) -> UsersFuture<'_, Vec<UserSummary>>;
    /// Revokes a live user's token for good; [`UsersError::Unknown`] for any other name.
    fn revoke<'a>(&'a self, name: &'a str) -> UsersFuture<'a, ()>;
    /// The live user whose token this is.
    fn authenticate<'a>(&'a self, token: &'a str) -> UsersFuture<'a, Option<Authenticated>>;
    /// The live user called `name`.
    fn live<'a>(&'a self, name: &'a str) -> UsersFuture<'a, Option<Authenticated>>;
}

fn ready<'a, T: Send + 'a>(value: Result<T, UsersError>) -> UsersFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

/// The file is read and written when a method is called: its futures are ready.
impl UserStore for UserFile {
    fn sign_in(&self) -> UsersFuture<'_, SignIn> {
        ready(UserFile::sign_in(self))
    }

    fn add<'a>(&'a self, name: &'a str, policy: Option<&'a str>) -> UsersFuture<'a, String> {
        ready(UserFile::add(self, name, policy))
    }

    fn list(&self) -> UsersFuture<'_, Vec<UserSummary>> {
        ready(UserFile::list(self))
    }

    fn revoke<'a>(&'a self, name: &'a str) -> UsersFuture<'a, ()> {
        ready(UserFile::revoke(self, name))
    }

    fn authenticate<'a>(&'a self, token: &'a str) -> UsersFuture<'a, Option<Authenticated>> {
        ready(UserFile::authenticate(self, token))
    }

    fn live<'a>(&'a self, name: &'a str) -> UsersFuture<'a, Option<Authenticated>> {
        ready(UserFile::live(self, name))
    }
}

/// The users a server signs in, wherever they are kept. Cheap to clone: clones share
/// the store.
#[derive(Debug, Clone)]
pub struct Users(Arc<dyn UserStore>);

impl Users {
    pub fn new(store: Arc<dyn UserStore>) -> Users {
        Users(store)
    }

    pub async fn sign_in(&self) -> Result<SignIn, UsersError> {
        self.0.sign_in().await
    }

    pub async fn add(&self, name: &str, policy: Option<&str>) -> Result<String, UsersError> {
        self.0.add(name, policy).await
    }

    pub async fn list(&self) -> Result<Vec<UserSummary>, UsersError> {
        self.0.list().await
    }

    pub async fn revoke(&self, name: &str) -> Result<(), UsersError> {
        self.0.revoke(name).await
    }

    pub async fn authenticate(&self, token: &str) -> Result<Option<Authenticated>, UsersError> {
        self.0.authenticate(token).await
    }

    pub async fn live(&self, name: &str) -> Result<Option<Authenticated>, UsersError> {
        self.0.live(name).await
    }

    pub async fn is_live(&self, name: &str) -> Result<bool, UsersError> {
        Ok(self.0.live(name).await?.is_some())
    }
}

impl From<UserFile> for Users {
    fn from(file: UserFile) -> Users {
        Users(Arc::new(file))
    }
}

/// The policy as stored: a name as it is (checked like a user name), a file as its
/// absolute path (it must exist, so a typo is caught now rather than at serve).
fn stored_policy(policy: &str) -> Result<String, UsersError> {
    let path = Path::new(policy);
    let looks_like_file = policy.contains(std::path::MAIN_SEPARATOR) || policy.ends_with(".toml");
    if !looks_like_file {
        return check_name(policy)
            .map(|()| policy.to_string())
            .map_err(|_| UsersError::BadPolicy(policy.to_string()));
    }
    std::fs::canonicalize(path)
        .ok()
        .filter(|path| path.is_file())
        .map(|path| path.display().to_string())
        .ok_or_else(|| UsersError::BadPolicy(policy.to_string()))
}

/// Where a stored policy is read from: an absolute path as it is, a name as
/// `policies/NAME.toml` in `beside` (the notes file's folder, or askdb's data directory).
pub fn policy_path(policy: &str, beside: &Path) -> PathBuf {
    let path = Path::new(policy);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        beside.join("policies").join(format!("{policy}.toml"))
    }
}

/// A name by allow-list: it is printed in logs and the query log as it is.
fn check_name(name: &str) -> Result<(), UsersError> {
    let fine = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if fine {
        Ok(())
    } else {
        Err(UsersError::BadName(name.to_string()))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_works_until_revoked_and_only_its_hash_is_stored() {
        let dir = tempfile::tempdir().expect("temp dir");
        let users = UserFile::at(dir.path().join("users.json"));
        assert_eq!(users.sign_in().expect("read"), SignIn::Open);
        let token = users.add("ana", None).expect("added");
        let other = users.add("ben", Some("sales")).expect("added");
        assert!(token.starts_with(TOKEN_PREFIX) && token.len() == TOKEN_PREFIX.len() + 64);
        assert_ne!(token, other);
        let file = std::fs::read_to_string(users.path()).expect("file");
        assert!(!file.contains(&token[TOKEN_PREFIX.len()..]), "{file}");
        let signed = |token: &str| users.authenticate(token).expect("read");
        assert_eq!(
            signed(&token),
            Some(Authenticated {
                name: "ana".into(),
                policy: None
            })
        );
        assert_eq!(
            signed(&other),
            Some(Authenticated {
                name: "ben".into(),
                policy: Some("sales".into())
            })
        );
        let mut wrong = token.clone();
        wrong.pop();
        wrong.push('x');
        for bad in [wrong.as_str(), "", "askdb_", &token[TOKEN_PREFIX.len()..]] {
            assert_eq!(users.authenticate(bad).expect("read"), None, "{bad}");
        }
        assert!(matches!(users.add("ana", None), Err(UsersError::Exists(_))));
        assert!(users.is_live("ana").expect("read"));
        for not_users in ["carla", "", "ana ", "ANA", "ana\n"] {
            assert!(!users.is_live(not_users).expect("read"), "{not_users:?}");
        }
        users.revoke("ana").expect("revoked");
        assert!(!users.is_live("ana").expect("read"), "revoked");
        assert_eq!(users.authenticate(&token).expect("read"), None);
        assert!(!users.is_live("ana").expect("read"));
        assert!(!users.is_live("nobody").expect("read"));
        assert!(matches!(users.revoke("ana"), Err(UsersError::Unknown(_))));
        users.revoke("ben").expect("revoked");
        // Every user revoked: the server still asks for a token.
        assert_eq!(users.sign_in().expect("read"), SignIn::Required);
        let listed = users.list().expect("list");
        assert_eq!(listed.len(), 2);
        assert!(listed.iter().all(|user| user.revoked.is_some()));
    }

    #[test]
    fn names_are_allowed_by_list() {
        for bad in ["", "a b", "ana\n", "x/y", "ana;drop", &"a".repeat(65), "é"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["ana", "ana.lopez", "team-1", "ci_bot"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn a_policy_is_a_name_or_a_file_that_exists() {
        let dir = tempfile::tempdir().expect("temp dir");
        let users = UserFile::at(dir.path().join("users.json"));
        let file = dir.path().join("team.toml");
        std::fs::write(&file, "row_cap = 10\n").expect("policy");
        users
            .add("ana", Some(&file.display().to_string()))
            .expect("a file that exists");
        let missing = dir.path().join("missing.toml").display().to_string();
        for bad in [missing.as_str(), "no such.toml", "a b", "x/../y"] {
            assert!(
                matches!(users.add("ben", Some(bad)), Err(UsersError::BadPolicy(_))),
                "{bad}"
            );
        }
        let listed = users.list().expect("list");
        let stored = listed[0].policy.clone().expect("stored");
        assert!(Path::new(&stored).is_absolute(), "{stored}");
        assert_eq!(
            policy_path(&stored, Path::new("/elsewhere")),
            Path::new(&stored)
        );
        assert_eq!(
            policy_path("sales", Path::new("/notes")),
            Path::new("/notes/policies/sales.toml")
        );
    }

    #[test]
    fn a_file_that_is_not_a_users_file_is_an_error_not_an_open_server() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("users.json");
        std::fs::write(&path, "not json").expect("write");
        assert!(matches!(
            UserFile::at(&path).sign_in(),
            Err(UsersError::Malformed { .. })
        ));
    }
}
