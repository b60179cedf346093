//! Who may reach `askdb serve` (decision 0022): the host names it answers for (a page
//! that rebinds its own DNS name to askdb's address is refused by its Host), the origins
//! that may send it requests that change or spend anything (a cross-site POST is
//! refused), and whether it may listen beyond this machine at all. Every request passes
//! [`guard`] before any route sees it.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::AppError;
use crate::users::{SignIn, UserFile};

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

/// Where the server listens and the names it answers for: built once per listener.
#[derive(Debug, Clone)]
pub struct Access {
    hosts: Vec<AllowedHost>,
    /// The users file, when the server signs users in ([`crate::users`]).
    users: Option<UserFile>,
    /// Listening on every interface: any IP address with the listening port is one of
    /// this machine's. A literal address cannot be rebound; only a name can.
    any_address_on: Option<u16>,
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
            any_address_on,
        }
    }

    /// The same, asking for a token of one of `users` once any user exists.
    pub fn with_users(self, users: Option<UserFile>) -> Access {
        Access { users, ..self }
    }

    /// The user a request signs in as: None when no user exists (sign-in is off) or the
    /// route is public (health, the page and its files); Err(401) for a request without a
    /// live token in its Authorization header, or with anything in its URL's query (a
    /// token there ends up in logs and browser history).
    fn signed_in(
        &self,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Result<Option<SignedIn>, AppError> {
        let Some(users) = &self.users else {
            return Ok(None);
        };
        let public =
            path == "/api/health" || super::assets::ASSETS.iter().any(|asset| asset.path == path);
        if public {
            return Ok(None);
        }
        let sign_in = users
            .sign_in()
            .map_err(|error| AppError::Internal(error.to_string()))?;
        if sign_in == SignIn::Open {
            return Ok(None);
        }
        if query.is_some_and(|query| !query.is_empty()) {
            return Err(AppError::Unauthorized);
        }
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(AppError::Unauthorized);
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
        match users.authenticate(token) {
            Ok(Some(user)) => Ok(Some(SignedIn {
                name: user.name,
                policy: user.policy,
            })),
            Ok(None) => Err(AppError::Unauthorized),
            Err(error) => Err(AppError::Internal(error.to_string())),
        }
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
    pub fn refusal(&self, method: &Method, headers: &HeaderMap) -> Option<AppError> {
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

/// The middleware: refuses what [`Access::refusal`] refuses and, when users exist, a
/// request without a live token ([`Access::signed_in`]); passes the rest on with the
/// user it signed in as.
pub async fn guard(
    State(access): State<std::sync::Arc<Access>>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(refusal) = access.refusal(request.method(), request.headers()) {
        return refusal.into_response();
    }
    let uri = request.uri().clone();
    match access.signed_in(uri.path(), uri.query(), request.headers()) {
        Ok(Some(user)) => {
            request.extensions_mut().insert(user);
            next.run(request).await
        }
        Ok(None) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_str(value).expect("value"),
            );
        }
        map
    }

    fn refused(access: &Access, method: Method, pairs: &[(&str, &str)]) -> Option<&'static str> {
        access
            .refusal(&method, &headers(pairs))
            .map(|error| error.code())
    }

    #[test]
    fn hosts_are_allowed_by_list_on_the_listening_port() {
        let access = Access::new(
            "127.0.0.1:8080".parse().expect("addr"),
            &[
                "askdb.example.com".parse().expect("host"),
                "team.example:9000".parse().expect("host"),
            ],
        );
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
            "askdb.example.com",
            "askdb.example.com:443",
            "team.example:9000",
        ] {
            assert_eq!(
                refused(&access, Method::GET, &[("host", host)]),
                None,
                "{host}"
            );
        }
        for host in [
            "attacker.example:8080",
            "localhost",
            "localhost:8081",
            "127.0.0.1",
            "127.0.0.2:8080",
            "localhost.:8080",
            "team.example:9001",
            "team.example",
            "user@localhost:8080",
            "localhost:8080/",
            "localhost:",
            "",
            "0.0.0.0:8080",
        ] {
            assert_eq!(
                refused(&access, Method::GET, &[("host", host)]),
                Some("unknown_host"),
                "{host}"
            );
        }
        // Two Host headers: one allowed does not excuse the other.
        assert_eq!(
            refused(
                &access,
                Method::GET,
                &[("host", "localhost:8080"), ("host", "attacker.example")]
            ),
            Some("unknown_host")
        );
        // No Host at all: not a browser (decision 0022).
        assert_eq!(refused(&access, Method::POST, &[]), None);
    }

    #[test]
    fn listening_everywhere_answers_any_address_but_no_unlisted_name() {
        let access = Access::new("0.0.0.0:8080".parse().expect("addr"), &[]);
        assert_eq!(
            refused(&access, Method::GET, &[("host", "192.0.2.7:8080")]),
            None
        );
        assert_eq!(
            refused(&access, Method::GET, &[("host", "[2001:db8::7]:8080")]),
            None
        );
        assert_eq!(
            refused(&access, Method::GET, &[("host", "192.0.2.7:8081")]),
            Some("unknown_host")
        );
        assert_eq!(
            refused(&access, Method::GET, &[("host", "rebound.example:8080")]),
            Some("unknown_host")
        );
        let own = Access::new("[2001:db8::7]:8080".parse().expect("addr"), &[]);
        assert_eq!(
            refused(&own, Method::GET, &[("host", "[2001:db8::7]:8080")]),
            None
        );
        assert_eq!(
            refused(&own, Method::GET, &[("host", "192.0.2.7:8080")]),
            Some("unknown_host")
        );
    }

    #[test]
    fn a_post_from_another_site_is_refused_and_one_from_the_page_is_not() {
        let access = Access::new("127.0.0.1:8080".parse().expect("addr"), &[]);
        let host = ("host", "127.0.0.1:8080");
        let page = [
            host,
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ];
        assert_eq!(refused(&access, Method::POST, &page), None);
        assert_eq!(
            refused(
                &access,
                Method::POST,
                &[host, ("origin", "http://localhost:8080")]
            ),
            None
        );
        // curl, scripts, the MCP bridge: neither header.
        assert_eq!(refused(&access, Method::POST, &[host]), None);
        for attack in [
            vec![host, ("origin", "https://attacker.example")],
            vec![host, ("origin", "http://localhost:3000")],
            vec![host, ("origin", "null")],
            vec![host, ("origin", "file://")],
            vec![host, ("origin", "http://127.0.0.1:8080.attacker.example")],
            vec![host, ("sec-fetch-site", "cross-site")],
            vec![host, ("sec-fetch-site", "same-site")],
            vec![host, ("sec-fetch-site", "anything")],
            vec![
                host,
                ("origin", "http://127.0.0.1:8080"),
                ("sec-fetch-site", "cross-site"),
            ],
            vec![
                host,
                ("origin", "http://127.0.0.1:8080"),
                ("origin", "https://attacker.example"),
            ],
        ] {
            assert_eq!(
                refused(&access, Method::POST, &attack),
                Some("cross_site_request"),
                "{attack:?}"
            );
            assert_eq!(
                refused(&access, Method::DELETE, &attack),
                Some("cross_site_request")
            );
            // Reading is left to the browser's same-origin rule.
            assert_eq!(refused(&access, Method::GET, &attack), None, "{attack:?}");
        }
    }

    #[test]
    fn an_allowed_host_flag_must_be_a_host_and_port() {
        for bad in [
            "",
            "*",
            "http://askdb.example",
            "askdb.example/x",
            "a@b",
            "askdb.example:x",
            "::1",
        ] {
            assert!(bad.parse::<AllowedHost>().is_err(), "{bad}");
        }
        let host: AllowedHost = "Askdb.Example:8443".parse().expect("host");
        assert_eq!(host.to_string(), "askdb.example:8443");
        assert!(is_loopback_only("[::1]:1".parse().expect("addr")));
        assert!(!is_loopback_only("0.0.0.0:1".parse().expect("addr")));
    }
}
