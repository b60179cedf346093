//! Who may reach `askdb serve` (decision 0022): the host names it answers for (a page
//! that rebinds its own DNS name to askdb's address is refused by its Host, or by the
//! request's URI authority, where HTTP/2 and absolute-form targets name it), the origins
//! that may send it requests that change or spend anything (a cross-site POST is
//! refused), whether it may listen beyond this machine at all, and who a request signs
//! in as: a bearer token's user, the page's session cookie ([`super::session`], decision
//! 0070; a request that changes or spends anything on a cookie alone must carry the
//! page's own Origin), or the user an authenticating reverse proxy names in its header,
//! believed only from the proxy addresses configured ([`ProxySignIn`], decision 0072).
//! Every request passes [`guard`] before any route sees it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::uri::Authority;
use axum::http::{header, HeaderMap, HeaderName, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::AppError;
use super::session::Sessions;
use crate::users::{SignIn, Users};

/// One host name (or IP address) askdb answers for, with the one port it answers on,
/// or any port (a name given without one: behind a proxy the Host keeps the proxy's
/// port, or none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    /// Lower-cased; an IPv6 address in brackets, as a Host header writes it.
    host: String,
    port: Option<u16>,
}

impl FromStr for AllowedHost {
    type Err = String;

    /// `NAME`, `NAME:PORT`, `IP`, `IP:PORT` or `[IPv6]:PORT`: what a Host header holds.
    fn from_str(text: &str) -> Result<AllowedHost, String> {
        let refuse = || {
            format!(
                "--allowed-host {text:?} is not a host name with an optional port \
                 (askdb.example.com, askdb.example.com:8080, 192.0.2.7:8080, [2001:db8::7]:8080)"
            )
        };
        let (host, port) = split_authority(text.trim()).ok_or_else(refuse)?;
        // A bare IPv6 address has colons Authority reads as a port; it needs brackets.
        if host.is_empty() || host == "*" {
            return Err(refuse());
        }
        Ok(AllowedHost { host, port })
    }
}

impl std::fmt::Display for AllowedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

/// The host and port of an authority (`host[:port]`), the host lower-cased; None when it
/// is not one (a path, user information, an empty or malformed port).
fn split_authority(text: &str) -> Option<(String, Option<u16>)> {
    if text.is_empty() || text.contains(['@', '/', '?', '#']) {
        return None;
    }
    let authority = Authority::from_str(text).ok()?;
    // `host:` and `host:x` parse with no port: a port written must be a number.
    let port_written = match text.rfind(']') {
        Some(end) => text[end..].contains(':'),
        None => text.contains(':'),
    };
    if port_written && authority.port_u16().is_none() {
        return None;
    }
    let host = authority.host().to_ascii_lowercase();
    if host.is_empty() {
        return None;
    }
    Some((host, authority.port_u16()))
}

/// An address (or a network of them) an authenticating reverse proxy sends from:
/// `IP` or `IP/PREFIX`, IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustedProxy {
    network: IpAddr,
    prefix: u8,
}

impl FromStr for TrustedProxy {
    type Err = String;

    fn from_str(text: &str) -> Result<TrustedProxy, String> {
        let text = text.trim();
        let refuse = || {
            format!(
                "--trusted-proxy {text:?} is not an IP address or network (10.0.0.5, \
                 10.0.0.0/24, ::1, fd00::/8)"
            )
        };
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address.parse().map_err(|_| refuse())?;
        let network = network.to_canonical();
        let bits = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(prefix) => prefix
                .parse::<u8>()
                .ok()
                .filter(|prefix| *prefix <= bits)
                .ok_or_else(refuse)?,
        };
        if prefix == 0 {
            return Err(format!(
                "--trusted-proxy {text} trusts every address, so anyone could name any user; \
                 give the proxy's own address"
            ));
        }
        Ok(TrustedProxy { network, prefix })
    }
}

impl std::fmt::Display for TrustedProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl TrustedProxy {
    /// Whether `peer` is this address or in this network (an IPv4 address written as
    /// IPv6, `::ffff:10.0.0.5`, is the IPv4 address).
    pub fn contains(&self, peer: IpAddr) -> bool {
        // The bits that differ, shifted past the ones the prefix leaves free.
        let differ_within = |differ: u128, bits: u8| differ >> (bits - self.prefix) == 0;
        match (self.network, peer.to_canonical()) {
            (IpAddr::V4(network), IpAddr::V4(peer)) => {
                differ_within(u128::from(u32::from(network) ^ u32::from(peer)), 32)
            }
            (IpAddr::V6(network), IpAddr::V6(peer)) => {
                differ_within(u128::from(network) ^ u128::from(peer), 128)
            }
            _ => false,
        }
    }
}

/// The user header of an authenticating reverse proxy, by default oauth2-proxy's.
pub const DEFAULT_PROXY_USER_HEADER: &str = "x-forwarded-user";

/// Headers askdb reads for itself, which cannot also name the proxy's user.
const HEADERS_NOT_FOR_USERS: [HeaderName; 5] = [
    header::AUTHORIZATION,
    header::HOST,
    header::ORIGIN,
    header::COOKIE,
    header::CONTENT_TYPE,
];

/// Sign-in by an authenticating reverse proxy (decision 0072): a request from one of
/// `proxies` that carries `header` signs in as the user it names, who must be a live
/// user of the server's users; the header from any other address refuses the request.
#[derive(Debug, Clone)]
pub struct ProxySignIn {
    proxies: Vec<TrustedProxy>,
    header: HeaderName,
}

impl ProxySignIn {
    /// The sign-in, or a message naming the bad flag. None when no proxy is trusted.
    pub fn new(proxies: Vec<TrustedProxy>, header: &str) -> Result<Option<ProxySignIn>, String> {
        let header = HeaderName::from_str(header.trim())
            .map_err(|_| format!("--proxy-user-header {header:?} is not an HTTP header name"))?;
        if HEADERS_NOT_FOR_USERS.contains(&header) {
            return Err(format!(
                "--proxy-user-header {header} is a header askdb reads for itself; give the \
                 one the proxy writes the user in (X-Forwarded-User, X-Auth-Request-User)"
            ));
        }
        Ok((!proxies.is_empty()).then_some(ProxySignIn { proxies, header }))
    }

    pub fn header(&self) -> &HeaderName {
        &self.header
    }

    fn trusts(&self, peer: IpAddr) -> bool {
        self.proxies.iter().any(|proxy| proxy.contains(peer))
    }

    /// The client a request from `peer` is from (decision 0081). From a trusted proxy,
    /// the right-most hop of `X-Forwarded-For` that no trusted proxy covers: each proxy
    /// appends the address it was reached from, so hops left of the first untrusted one
    /// are whatever the client wrote and are never read. From any other peer the header
    /// means nothing: the peer is the client. A hop that is not an address stops the
    /// walk at the last trusted hop, so a proxy that forwards garbage is counted as
    /// itself, never as a name an attacker chose.
    fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return peer;
        }
        let mut hops = Vec::new();
        for value in headers.get_all(FORWARDED_FOR) {
            let Ok(value) = value.to_str() else {
                return peer;
            };
            hops.extend(value.split(','));
        }
        let mut client = peer;
        for hop in hops.iter().rev() {
            let Some(hop) = forwarded_address(hop) else {
                return client;
            };
            client = hop;
            if !self.trusts(hop) {
                break;
            }
        }
        client
    }
}

/// The header a reverse proxy appends the address it was reached from to.
const FORWARDED_FOR: &str = "x-forwarded-for";

/// One hop of `X-Forwarded-For`: an address, or one written with a port as some
/// proxies do (`192.0.2.7:51000`, `[2001:db8::7]:51000`).
fn forwarded_address(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    let address = hop
        .parse::<IpAddr>()
        .or_else(|_| hop.parse::<SocketAddr>().map(|address| address.ip()))
        .ok()?;
    Some(address.to_canonical())
}

/// The client whose failed sign-ins a request counts against: `peer`, or the client a
/// trusted proxy forwarded for ([`ProxySignIn::client`]). Behind one proxy every user
/// shares its address, and one client's failures must not lock the others out.
pub fn sign_in_client(proxy: Option<&ProxySignIn>, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
    match proxy {
        Some(proxy) => proxy.client(peer, headers),
        None => peer,
    }
}

/// Where the server listens and the names it answers for: built once per listener.
#[derive(Debug, Clone)]
pub struct Access {
    hosts: Vec<AllowedHost>,
    /// The users, when the server signs users in ([`crate::users`]).
    users: Option<Users>,
    /// The reverse proxy that may name the user, when one is trusted.
    proxy: Option<ProxySignIn>,
    /// Listening on every interface: any IP address with the listening port is one of
    /// this machine's. A literal address cannot be rebound; only a name can.
    any_address_on: Option<u16>,
    /// The page's sessions, and the failed sign-ins per address.
    sessions: Arc<Sessions>,
}

impl Access {
    /// The names a server listening on `listen` answers for: its own address,
    /// `localhost`, `127.0.0.1` and `[::1]` on its port, and the operator's `extra`.
    pub fn new(listen: SocketAddr, extra: &[AllowedHost]) -> Access {
        let port = Some(listen.port());
        let mut hosts: Vec<AllowedHost> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|host| AllowedHost {
                host: (*host).to_string(),
                port,
            })
            .collect();
        let any_address_on = listen.ip().is_unspecified().then_some(listen.port());
        if !listen.ip().is_unspecified() {
            hosts.push(AllowedHost {
                host: host_of_ip(listen.ip()),
                port,
            });
        }
        hosts.extend(extra.iter().cloned());
        Access {
            hosts,
            users: None,
            proxy: None,
            any_address_on,
            sessions: Arc::new(Sessions::default()),
        }
    }

    /// The same, asking for a token of one of `users` once any user exists.
    pub fn with_users(self, users: Option<Users>) -> Access {
        Access { users, ..self }
    }

    /// The same, with the sessions the page's sign-in starts (the server's own).
    pub fn with_sessions(self, sessions: Arc<Sessions>) -> Access {
        Access { sessions, ..self }
    }

    /// The same, believing the user `proxy` names in requests from its addresses.
    pub fn with_proxy(self, proxy: Option<ProxySignIn>) -> Access {
        Access { proxy, ..self }
    }

    /// The user a trusted proxy names: None when no proxy is trusted or the request
    /// carries no user header; 403 for the header from any other address (a client
    /// naming itself whoever it likes), whatever else the request carries; 401 for a
    /// proxy naming no live user, or naming one twice.
    async fn proxy_user(
        &self,
        peer: Option<IpAddr>,
        headers: &HeaderMap,
    ) -> Result<Option<SignedIn>, AppError> {
        let Some(proxy) = &self.proxy else {
            return Ok(None);
        };
        let mut values = headers.get_all(&proxy.header).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if !peer.is_some_and(|peer| proxy.trusts(peer)) {
            return Err(AppError::UntrustedProxyHeader);
        }
        if values.next().is_some() {
            return Err(AppError::Unauthorized);
        }
        let (Ok(name), Some(users)) = (value.to_str(), &self.users) else {
            return Err(AppError::Unauthorized);
        };
        let name = name.trim();
        match users.live(name).await {
            Ok(Some(user)) => Ok(Some(SignedIn::from(user))),
            Ok(None) => Err(AppError::Unauthorized),
            Err(error) => Err(AppError::from(error)),
        }
    }

    /// The user a request signs in as: None when no user exists (sign-in is off) or the
    /// route is public (health, the page and its files, the sign-in itself); Err(401) for
    /// a request without a live token in its Authorization header or a live session
    /// cookie, or with anything in its URL's query (a token there ends up in logs and
    /// browser history); Err(429) for a token from a `client` ([`sign_in_client`]) that
    /// failed too often; Err(403) for a change on a cookie alone without the page's Origin.
    async fn signed_in(
        &self,
        method: &Method,
        uri: &axum::http::Uri,
        headers: &HeaderMap,
        client: IpAddr,
    ) -> Result<Option<SignedIn>, AppError> {
        let Some(users) = &self.users else {
            return Ok(None);
        };
        let (path, query) = (uri.path(), uri.query());
        let public = path == "/api/health"
            || path == "/api/session"
            || super::assets::ASSETS.iter().any(|asset| asset.path == path);
        if public {
            return Ok(None);
        }
        let sign_in = users.sign_in().await.map_err(AppError::from)?;
        if sign_in == SignIn::Open {
            return Ok(None);
        }
        if query.is_some_and(|query| !query.is_empty()) {
            return Err(AppError::Unauthorized);
        }
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let value = match (values.next(), values.next()) {
            (Some(value), None) => value,
            (None, _) => return self.cookie_signed_in(users, method, headers).await,
            (Some(_), Some(_)) => return Err(AppError::Unauthorized),
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|value| value.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        let Some(token) = token else {
            return Err(AppError::Unauthorized);
        };
        // A wrong token here is a guess like a wrong one in the sign-in form.
        let now = Instant::now();
        if let Err(retry_after) = self.sessions.may_try(client, now) {
            return Err(AppError::TooManySignIns { retry_after });
        }
        match users.authenticate(token).await {
            Ok(Some(user)) => Ok(Some(SignedIn::from(user))),
            Ok(None) => {
                self.sessions.failed(client, now);
                Err(AppError::Unauthorized)
            }
            Err(error) => Err(AppError::from(error)),
        }
    }

    /// The user of the request's session cookie. A cookie goes with every request the
    /// browser sends to askdb, so a change made on one alone must also carry an Origin
    /// askdb answers for ([`Access::refusal`] has refused any other): a request with
    /// neither header is a script's, and a script sends its token.
    async fn cookie_signed_in(
        &self,
        users: &Users,
        method: &Method,
        headers: &HeaderMap,
    ) -> Result<Option<SignedIn>, AppError> {
        let Some(user) = super::session::cookie_user(&self.sessions, users, headers).await? else {
            return Err(AppError::Unauthorized);
        };
        if !is_safe(method) && headers.get(header::ORIGIN).is_none() {
            return Err(AppError::CrossSite);
        }
        Ok(Some(SignedIn::from(user)))
    }

    /// 401 for a user the shared state says was revoked: this replica's users (its
    /// file, or its copy of the shared table) may not know yet (decisions 0079, 0083).
    /// Without replicas, nothing to check.
    async fn not_revoked(&self, user: &SignedIn) -> Result<(), AppError> {
        if self.sessions.is_revoked(&user.name).await? {
            return Err(AppError::Unauthorized);
        }
        Ok(())
    }

    /// Whether `authority` (a Host header, or the host and port of an Origin with the
    /// scheme's default port filled in) is one askdb answers for.
    fn answers_for(&self, host: &str, port: u16) -> bool {
        let listed = self
            .hosts
            .iter()
            .any(|allowed| allowed.host == host && allowed.port.is_none_or(|p| p == port));
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        listed || (self.any_address_on == Some(port) && literal.parse::<IpAddr>().is_ok())
    }

    fn host_allowed(&self, host: &str) -> bool {
        match split_authority(host) {
            // A Host without a port came on HTTP's default port.
            Some((host, port)) => self.answers_for(&host, port.unwrap_or(80)),
            None => false,
        }
    }

    /// An Origin header's value (`scheme://host[:port]`) is one of askdb's own pages.
    fn origin_allowed(&self, origin: &str) -> bool {
        let (default_port, rest) = if let Some(rest) = origin.strip_prefix("http://") {
            (80, rest)
        } else if let Some(rest) = origin.strip_prefix("https://") {
            (443, rest)
        } else {
            // `null` (a sandboxed frame, a file, a redirect) and every other scheme.
            return false;
        };
        match split_authority(rest) {
            Some((host, port)) => self.answers_for(&host, port.unwrap_or(default_port)),
            None => false,
        }
    }

    /// Why `request` is refused before any route sees it, if it is.
    pub fn refusal(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Option<AppError> {
        // HTTP/2 names the host in :authority, which reaches the request's URI and not
        // its Host header, and so does an HTTP/1.1 absolute-form target: either is
        // checked as a Host header is, or a foreign host would pass unread.
        if let Some(authority) = uri.authority() {
            if !self.host_allowed(authority.as_str()) {
                return Some(AppError::MisdirectedHost);
            }
        }
        // A browser always sends Host (a page cannot remove it), so a request without
        // one is not the rebinding page this check is for (decision 0022).
        let hosts = headers.get_all(header::HOST);
        let mut count = 0;
        for host in hosts {
            count += 1;
            let allowed = host.to_str().is_ok_and(|host| self.host_allowed(host));
            if !allowed || count > 1 {
                return Some(AppError::MisdirectedHost);
            }
        }
        if is_safe(method) {
            return None;
        }
        for site in headers.get_all("sec-fetch-site") {
            // Only the page itself (same-origin) or the user's own navigation (none).
            let own = matches!(site.to_str(), Ok("same-origin" | "none"));
            if !own {
                return Some(AppError::CrossSite);
            }
        }
        for origin in headers.get_all(header::ORIGIN) {
            let own = origin
                .to_str()
                .is_ok_and(|origin| self.origin_allowed(&origin.to_ascii_lowercase()));
            if !own {
                return Some(AppError::CrossSite);
            }
        }
        None
    }
}

/// Methods that neither change nor spend anything here: every route that does is a
/// POST, and any method not listed is treated as one that does.
fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// How an IP address is written in a Host header.
fn host_of_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// Whether listening on `addr` reaches only this machine.
pub fn is_loopback_only(addr: SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// The user a request signed in as, in the request's extensions for the handlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    pub name: String,
    /// The user's policy as stored (decision 0076); None: the notes alone.
    pub policy: Option<String>,
}

impl From<crate::users::Authenticated> for SignedIn {
    fn from(user: crate::users::Authenticated) -> SignedIn {
        SignedIn {
            name: user.name,
            policy: user.policy,
        }
    }
}

/// The middleware: refuses what [`Access::refusal`] refuses, a user header not from a
/// trusted proxy ([`Access::proxy_user`]) and, when users exist, a request that neither
/// a trusted proxy nor a live token signs in ([`Access::signed_in`]); passes the rest on
/// with the user it signed in as.
pub async fn guard(
    State(access): State<Arc<Access>>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(refusal) = access.refusal(request.method(), request.uri(), request.headers()) {
        return refusal.into_response();
    }
    let peer = request
        .extensions()
        .get::<ConnectInfo<std::net::SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip());
    match access.proxy_user(peer, request.headers()).await {
        // The proxy signs a browser in with a cookie of its own, which rides along with
        // any request the browser sends: a change needs the page's Origin, as on
        // askdb's own cookie ([`Access::cookie_signed_in`]).
        Ok(Some(_))
            if !is_safe(request.method()) && !request.headers().contains_key(header::ORIGIN) =>
        {
            return AppError::CrossSite.into_response();
        }
        Ok(Some(user)) => {
            if let Err(refusal) = access.not_revoked(&user).await {
                return refusal.into_response();
            }
            request.extensions_mut().insert(user);
            return next.run(request).await;
        }
        Ok(None) => {}
        Err(refusal) => return refusal.into_response(),
    }
    let uri = request.uri().clone();
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let client = sign_in_client(access.proxy.as_ref(), client, request.headers());
    match access
        .signed_in(request.method(), &uri, request.headers(), client)
        .await
    {
        Ok(Some(user)) => {
            if let Err(refusal) = access.not_revoked(&user).await {
                return refusal.into_response();
            }
            request.extensions_mut().insert(user);
            next.run(request).await
        }
        Ok(None) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

#[cfg(test)]
mod tests;
