//! The page's sign-in (decision 0070): a user's token, typed once into the page, is
//! exchanged for a session cookie (`askdb_session`: HttpOnly, SameSite=Strict, Secure
//! when the page was served over TLS), so the token never sits in the page's script or
//! storage. A session is a random id (only its SHA-256 is kept), the user, an expiry;
//! every request on one checks again that the user is not revoked. Sessions are kept
//! behind [`SessionStore`], chosen once at start: in this process's memory
//! ([`LocalSessions`]), or in the state replicas share (`--state-url`,
//! [`crate::state::sign_in::SharedSignIn`], where revocations are read too).
//! Failed sign-ins (and wrong bearer tokens) are counted per client address in a
//! bounded map and refused for the rest of a window once too many; behind a trusted
//! proxy the client is the one it forwarded for ([`super::access::sign_in_client`],
//! decision 0081), so one client's failures do not lock out everyone behind the proxy.
//!
//! | route | does |
//! |---|---|
//! | `GET /api/session` | `{sign_in: open|required, user}`: whether the page must sign in, and as whom it is |
//! | `POST /api/session` | `{token}` -> the cookie and `{user}`; 401 for a wrong token, 429 after too many |
//! | `DELETE /api/session` | ends the session and clears the cookie (204) |

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::access::SignedIn;
use super::api::ClientIp;
use super::error::{ApiJson, AppError};
use super::AppState;
use crate::llm::BoxFuture;
use crate::state::sign_in::SharedSignIn;
use crate::users::{SignIn, Users};

/// The cookie's name.
pub const COOKIE: &str = "askdb_session";
/// How long a session lasts after its sign-in: a working day, then the token again.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// Sessions held at once; past it the one closest to its end makes room.
const MAX_SESSIONS: usize = 10_000;
/// Failed sign-ins one address may make in a window before it is refused.
pub const MAX_FAILURES: u32 = 5;
/// The window failed sign-ins are counted in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Addresses counted at once; past it new addresses share one count (still limited).
const MAX_TRACKED_ADDRESSES: usize = 10_000;

struct Session {
    user: String,
    expires: Instant,
}

#[derive(Clone, Copy)]
struct Failures {
    count: u32,
    since: Instant,
}

/// Where sessions are kept, and whom the shared state says was revoked. Each method
/// answers for every replica that shares the store.
pub trait SessionStore: Send + Sync {
    /// Keeps a session (`digest` of its cookie) for `user` for [`SESSION_TTL`].
    fn start<'a>(&'a self, digest: &'a str, user: &'a str) -> BoxFuture<'a, Result<(), AppError>>;
    /// The user of a live session.
    fn user<'a>(&'a self, digest: &'a str) -> BoxFuture<'a, Result<Option<String>, AppError>>;
    fn end<'a>(&'a self, digest: &'a str) -> BoxFuture<'a, Result<(), AppError>>;
    /// Ends every session of `user` (its token was revoked).
    fn end_user<'a>(&'a self, user: &'a str) -> BoxFuture<'a, Result<(), AppError>>;
    /// Whether a revocation outside this server's users store ended `user` (the shared
    /// state's list); the users store itself is read by the caller.
    fn is_revoked<'a>(&'a self, user: &'a str) -> BoxFuture<'a, Result<bool, AppError>>;
}

/// The sessions of one process, in memory.
#[derive(Default)]
pub struct LocalSessions {
    /// By the SHA-256 of the cookie's value: a memory dump holds no usable cookie.
    live: Mutex<HashMap<String, Session>>,
}

impl LocalSessions {
    fn insert(&self, digest: &str, user: &str, now: Instant) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live.len() >= MAX_SESSIONS {
            live.retain(|_, session| session.expires > now);
        }
        if live.len() >= MAX_SESSIONS {
            let soonest = live
                .iter()
                .min_by_key(|(_, session)| session.expires)
                .map(|(key, _)| key.clone());
            if let Some(key) = soonest {
                live.remove(&key);
            }
        }
        live.insert(
            digest.to_string(),
            Session {
                user: user.to_string(),
                expires: now + SESSION_TTL,
            },
        );
    }

    /// The user of a live session; an expired one is forgotten.
    fn user_at(&self, digest: &str, now: Instant) -> Option<String> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        match live.get(digest) {
            Some(session) if session.expires > now => Some(session.user.clone()),
            Some(_) => {
                live.remove(digest);
                None
            }
            None => None,
        }
    }
}

impl SessionStore for LocalSessions {
    fn start<'a>(&'a self, digest: &'a str, user: &'a str) -> BoxFuture<'a, Result<(), AppError>> {
        self.insert(digest, user, Instant::now());
        Box::pin(async { Ok(()) })
    }

    fn user<'a>(&'a self, digest: &'a str) -> BoxFuture<'a, Result<Option<String>, AppError>> {
        let user = self.user_at(digest, Instant::now());
        Box::pin(async move { Ok(user) })
    }

    fn end<'a>(&'a self, digest: &'a str) -> BoxFuture<'a, Result<(), AppError>> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.remove(digest);
        Box::pin(async { Ok(()) })
    }

    fn end_user<'a>(&'a self, user: &'a str) -> BoxFuture<'a, Result<(), AppError>> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|_, session| session.user != user);
        Box::pin(async { Ok(()) })
    }

    /// One process has only its users file, which the caller reads.
    fn is_revoked<'a>(&'a self, _user: &'a str) -> BoxFuture<'a, Result<bool, AppError>> {
        Box::pin(async { Ok(false) })
    }
}

fn shared_error(error: crate::state::StateError) -> AppError {
    AppError::SharedState(error.to_string())
}

impl SessionStore for SharedSignIn {
    fn start<'a>(&'a self, digest: &'a str, user: &'a str) -> BoxFuture<'a, Result<(), AppError>> {
        Box::pin(async move {
            SharedSignIn::start(self, digest, user, SESSION_TTL)
                .await
                .map_err(shared_error)
        })
    }

    fn user<'a>(&'a self, digest: &'a str) -> BoxFuture<'a, Result<Option<String>, AppError>> {
        Box::pin(async move { SharedSignIn::user(self, digest).await.map_err(shared_error) })
    }

    fn end<'a>(&'a self, digest: &'a str) -> BoxFuture<'a, Result<(), AppError>> {
        Box::pin(async move { SharedSignIn::end(self, digest).await.map_err(shared_error) })
    }

    fn end_user<'a>(&'a self, user: &'a str) -> BoxFuture<'a, Result<(), AppError>> {
        Box::pin(async move {
            SharedSignIn::end_user(self, user)
                .await
                .map_err(shared_error)
        })
    }

    fn is_revoked<'a>(&'a self, user: &'a str) -> BoxFuture<'a, Result<bool, AppError>> {
        Box::pin(async move {
            SharedSignIn::is_revoked(self, user)
                .await
                .map_err(shared_error)
        })
    }
}

/// The server's sessions (wherever they are kept) and this process's failed sign-ins
/// per address.
pub struct Sessions {
    store: Arc<dyn SessionStore>,
    failures: Mutex<HashMap<IpAddr, Failures>>,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::with_store(Arc::new(LocalSessions::default()))
    }
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sessions")
    }
}

fn digest(value: &str) -> String {
    Sha256::digest(value.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

impl Sessions {
    /// Sessions kept in `store`.
    pub fn with_store(store: Arc<dyn SessionStore>) -> Sessions {
        Sessions {
            store,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// A new session for `user`: the cookie's value, 32 random bytes in hex.
    pub async fn start(&self, user: &str) -> Result<String, AppError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|error| AppError::Internal(format!("no random bytes: {error}")))?;
        let value: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        self.store.start(&digest(&value), user).await?;
        Ok(value)
    }

    /// The user of a live session.
    pub async fn user(&self, cookie: &str) -> Result<Option<String>, AppError> {
        self.store.user(&digest(cookie)).await
    }

    /// Ends one session (signing out).
    pub async fn end(&self, cookie: &str) -> Result<(), AppError> {
        self.store.end(&digest(cookie)).await
    }

    /// Ends every session of `user` (its token was revoked).
    pub async fn end_user(&self, user: &str) -> Result<(), AppError> {
        self.store.end_user(user).await
    }

    /// Whether the shared state says `user` was revoked (never, for one process).
    pub async fn is_revoked(&self, user: &str) -> Result<bool, AppError> {
        self.store.is_revoked(user).await
    }

    /// The key an address is counted under: its own, or the shared one when the map
    /// is full of addresses still in their window.
    fn counted_as(
        failures: &mut HashMap<IpAddr, Failures>,
        client: IpAddr,
        now: Instant,
    ) -> IpAddr {
        if failures.contains_key(&client) || failures.len() < MAX_TRACKED_ADDRESSES {
            return client;
        }
        failures.retain(|_, seen| now.duration_since(seen.since) < FAILURE_WINDOW);
        if failures.len() < MAX_TRACKED_ADDRESSES {
            client
        } else {
            IpAddr::V4(Ipv4Addr::BROADCAST)
        }
    }

    /// Err(wait) while `client` has used up its failed sign-ins for this window.
    pub fn may_try(&self, client: IpAddr, now: Instant) -> Result<(), Duration> {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let key = Sessions::counted_as(&mut failures, client, now);
        match failures.get(&key) {
            Some(seen) if now.duration_since(seen.since) < FAILURE_WINDOW => {
                if seen.count >= MAX_FAILURES {
                    Err(FAILURE_WINDOW.saturating_sub(now.duration_since(seen.since)))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }

    /// Counts one failed sign-in of `client`.
    pub fn failed(&self, client: IpAddr, now: Instant) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let key = Sessions::counted_as(&mut failures, client, now);
        let entry = failures.entry(key).or_insert(Failures {
            count: 0,
            since: now,
        });
        if now.duration_since(entry.since) >= FAILURE_WINDOW {
            *entry = Failures {
                count: 0,
                since: now,
            };
        }
        entry.count = entry.count.saturating_add(1);
    }
}

/// The session cookie's value in a request's Cookie headers, if any.
pub fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// The user a session cookie signs in as: None without a cookie or with one that is
/// unknown or expired; a revoked user's sessions all end here (revoked in the users
/// file or, with replicas, in the shared state).
pub async fn cookie_user(
    sessions: &Sessions,
    users: &Users,
    headers: &HeaderMap,
) -> Result<Option<crate::users::Authenticated>, AppError> {
    let Some(cookie) = cookie_value(headers) else {
        return Ok(None);
    };
    let Some(user) = sessions.user(&cookie).await? else {
        return Ok(None);
    };
    let mut live = users.live(&user).await.map_err(AppError::from)?;
    let revoked_here = match live {
        Some(_) => false,
        // Not live: revoked in the users store, or a name it lacks (a session of a user
        // that is gone). Only a listed revocation ends the session's row; an unlisted
        // name is refused without it.
        None => users
            .list()
            .await
            .map_err(AppError::from)?
            .iter()
            .any(|listed| listed.name == user && listed.revoked.is_some()),
    };
    let revoked = revoked_here || (live.is_some() && sessions.is_revoked(&user).await?);
    if revoked {
        live = None;
        // Revoked for good: every session of the user ends, on every replica sharing
        // the sessions.
        sessions.end_user(&user).await?;
    }
    Ok(live)
}

/// The Set-Cookie value: `max_age` None clears the cookie. Secure when the page came
/// over TLS (its Origin is https): a cookie askdb set over plain http on loopback must
/// still come back.
fn set_cookie(
    value: &str,
    max_age: Option<Duration>,
    secure: bool,
) -> Result<HeaderValue, AppError> {
    let age = max_age.map_or(0, |age| age.as_secs());
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={age}{secure}"
    ))
    .map_err(|error| AppError::Internal(format!("cookie header: {error}")))
}

/// Whether the request came from a page served over TLS (a proxy in front of askdb
/// terminates it; askdb itself speaks plain HTTP): the browser's Origin says so, and
/// [`super::access`] has already refused an Origin askdb does not answer for.
fn over_tls(headers: &HeaderMap) -> bool {
    headers
        .get(header::ORIGIN)
        .and_then(|origin| origin.to_str().ok())
        .is_some_and(|origin| origin.to_ascii_lowercase().starts_with("https://"))
}

/// Whether sign-in is on, and as whom this request is.
#[derive(Debug, Serialize)]
pub struct SessionStatus {
    pub sign_in: SignIn,
    pub user: Option<String>,
}

/// The body of POST /api/session.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignInRequest {
    pub token: String,
}

impl std::fmt::Debug for SignInRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignInRequest { token: <hidden> }")
    }
}

async fn sign_in_state(state: &AppState) -> Result<Option<&Users>, AppError> {
    let Some(users) = state.config().users.as_ref() else {
        return Ok(None);
    };
    match users.sign_in().await {
        Ok(SignIn::Open) => Ok(None),
        Ok(SignIn::Required) => Ok(Some(users)),
        Err(error) => Err(AppError::from(error)),
    }
}

/// GET /api/session: whether sign-in is on, and who this request signed in as: the
/// session cookie's user, or the user a trusted proxy named ([`super::access`] put it
/// on the request), so the page behind such a proxy shows no token form.
pub async fn status(
    State(state): State<AppState>,
    proxied: Option<Extension<SignedIn>>,
    headers: HeaderMap,
) -> Result<Json<SessionStatus>, AppError> {
    let Some(users) = sign_in_state(&state).await? else {
        return Ok(Json(SessionStatus {
            sign_in: SignIn::Open,
            user: None,
        }));
    };
    let user = match proxied {
        Some(Extension(signed_in)) => Some(signed_in.name),
        None => cookie_user(state.sessions(), users, &headers)
            .await?
            .map(|user| user.name),
    };
    Ok(Json(SessionStatus {
        sign_in: SignIn::Required,
        user,
    }))
}

/// POST /api/session: the token for a cookie. Every failure is the same 401 sentence.
pub async fn sign_in(
    State(state): State<AppState>,
    ClientIp(client): ClientIp,
    headers: HeaderMap,
    ApiJson(request): ApiJson<SignInRequest>,
) -> Result<Response, AppError> {
    let Some(users) = sign_in_state(&state).await? else {
        return Err(AppError::NotFound {
            code: "sign_in_off",
            detail: "askdb has no users, so there is nothing to sign in to".to_string(),
        });
    };
    let sessions = state.sessions();
    let now = Instant::now();
    let client = super::access::sign_in_client(state.config().proxy.as_ref(), client, &headers);
    if let Err(retry_after) = sessions.may_try(client, now) {
        return Err(AppError::TooManySignIns { retry_after });
    }
    let user = users
        .authenticate(request.token.trim())
        .await
        .map_err(AppError::from)?;
    let Some(user) = user else {
        sessions.failed(client, now);
        return Err(AppError::Unauthorized);
    };
    if sessions.is_revoked(&user.name).await? {
        sessions.failed(client, now);
        return Err(AppError::Unauthorized);
    }
    let value = sessions.start(&user.name).await?;
    let cookie = set_cookie(&value, Some(SESSION_TTL), over_tls(&headers))?;
    let mut response =
        (StatusCode::OK, Json(serde_json::json!({"user": user.name}))).into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// DELETE /api/session: 204, the cookie cleared whether or not it was live.
pub async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    if let Some(cookie) = cookie_value(&headers) {
        state.sessions().end(&cookie).await?;
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie("", None, over_tls(&headers))?,
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_lives_until_its_end_sign_out_or_its_users_revocation() {
        let sessions = Sessions::default();
        let ana = sessions.start("ana").await.expect("started");
        let ben = sessions.start("ben").await.expect("started");
        assert_eq!(ana.len(), 64);
        assert_ne!(ana, ben);
        assert_eq!(
            sessions.user(&ana).await.expect("read").as_deref(),
            Some("ana")
        );
        assert_eq!(sessions.user("not-a-session").await.expect("read"), None);
        sessions.end_user("ben").await.expect("ended");
        assert_eq!(sessions.user(&ben).await.expect("read"), None);
        let again = sessions.start("ana").await.expect("started");
        sessions.end(&again).await.expect("ended");
        assert_eq!(sessions.user(&again).await.expect("read"), None);
    }

    #[test]
    fn a_local_session_expires_and_only_its_digest_is_kept() {
        let local = LocalSessions::default();
        let now = Instant::now();
        let cookie = "ab".repeat(32);
        local.insert(&digest(&cookie), "ana", now);
        assert_eq!(local.user_at(&digest(&cookie), now).as_deref(), Some("ana"));
        assert_eq!(
            local.user_at(&digest(&cookie), now + SESSION_TTL),
            None,
            "expired"
        );
        assert_eq!(
            local.user_at(&digest(&cookie), now),
            None,
            "an expired one is forgotten"
        );
        local.insert(&digest(&cookie), "ana", now);
        let live = local.live.lock().expect("lock");
        assert!(live.keys().all(|key| key.len() == 64 && *key != cookie));
    }

    #[test]
    fn failed_sign_ins_are_limited_per_address_for_a_window() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let attacker: IpAddr = "192.0.2.7".parse().expect("ip");
        let other: IpAddr = "192.0.2.8".parse().expect("ip");
        for _ in 0..MAX_FAILURES {
            assert!(sessions.may_try(attacker, now).is_ok());
            sessions.failed(attacker, now);
        }
        let wait = sessions.may_try(attacker, now).expect_err("limited");
        assert_eq!(wait, FAILURE_WINDOW);
        assert!(sessions.may_try(other, now).is_ok(), "per address");
        assert!(sessions.may_try(attacker, now + FAILURE_WINDOW).is_ok());
    }

    #[test]
    fn a_full_map_of_addresses_still_limits_new_ones() {
        let sessions = Sessions::default();
        let now = Instant::now();
        for n in 0..MAX_TRACKED_ADDRESSES as u32 {
            sessions.failed(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n)), now);
        }
        let newcomer: IpAddr = "198.51.100.1".parse().expect("ip");
        for _ in 0..MAX_FAILURES {
            sessions.failed(newcomer, now);
        }
        assert!(sessions.may_try(newcomer, now).is_err());
        assert!(sessions.failures.lock().expect("lock").len() <= MAX_TRACKED_ADDRESSES + 1);
    }

    #[test]
    fn the_cookie_is_read_among_others_and_written_strict() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("theme=dark; askdb_session=abc123; x=y"),
        );
        assert_eq!(cookie_value(&headers).as_deref(), Some("abc123"));
        assert_eq!(cookie_value(&HeaderMap::new()), None);
        let written = set_cookie("abc", Some(SESSION_TTL), false).expect("header");
        let written = written.to_str().expect("ascii");
        assert!(written.contains("HttpOnly") && written.contains("SameSite=Strict"));
        assert!(!written.contains("Secure"));
        let secure = set_cookie("abc", None, true).expect("header");
        assert!(secure
            .to_str()
            .expect("ascii")
            .ends_with("Max-Age=0; Secure"));
        let mut page = HeaderMap::new();
        page.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://askdb.example"),
        );
        assert!(over_tls(&page));
        page.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        assert!(!over_tls(&page));
    }

    #[test]
    fn the_sign_in_body_never_prints_its_token() {
        let request = SignInRequest {
            token: "askdb_secret".to_string(),
        };
        assert!(!format!("{request:?}").contains("secret"));
    }
}
