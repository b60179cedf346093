//! The access rules on their own: the hosts and origins askdb answers for, the
//! `--allowed-host` and `--trusted-proxy` values, the proxy's user header, and the
//! forwarded client a failed sign-in counts against.

use super::*;
use crate::users::UserFile;
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
        .refusal(&method, &Uri::from_static("/api/ask"), &headers(pairs))
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
    // HTTP/2's :authority and an absolute-form target are the request's URI
    // authority: a foreign one is refused whatever Host says, an allowed one passes.
    let with_uri = |uri: &'static str, pairs: &[(&str, &str)]| {
        access
            .refusal(&Method::GET, &Uri::from_static(uri), &headers(pairs))
            .map(|error| error.code())
    };
    for uri in [
        "http://attacker.example:8080/api/session",
        "http://user@localhost:8080/api/session",
        "http://localhost:8081/metrics",
    ] {
        assert_eq!(with_uri(uri, &[]), Some("unknown_host"), "{uri}");
        assert_eq!(
            with_uri(uri, &[("host", "localhost:8080")]),
            Some("unknown_host"),
            "{uri} with an allowed Host"
        );
    }
    assert_eq!(with_uri("http://localhost:8080/api/session", &[]), None);
    assert_eq!(
        with_uri(
            "http://team.example:9000/metrics",
            &[("host", "localhost:8080")]
        ),
        None
    );
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

#[test]
fn a_trusted_proxy_is_an_address_or_a_network_never_everyone() {
    let one: TrustedProxy = "10.0.0.5".parse().expect("address");
    assert!(one.contains("10.0.0.5".parse().expect("ip")));
    assert!(one.contains("::ffff:10.0.0.5".parse().expect("mapped")));
    assert!(!one.contains("10.0.0.6".parse().expect("ip")));
    let net: TrustedProxy = "10.0.0.0/24".parse().expect("network");
    assert!(net.contains("10.0.0.255".parse().expect("ip")));
    assert!(!net.contains("10.0.1.0".parse().expect("ip")));
    assert!(!net.contains("::1".parse().expect("ip")));
    let v6: TrustedProxy = "fd00::/8".parse().expect("v6 network");
    assert!(v6.contains("fd12::7".parse().expect("ip")));
    assert!(!v6.contains("fe80::1".parse().expect("ip")));
    assert!(!v6.contains("10.0.0.5".parse().expect("ip")));
    let host: TrustedProxy = "::1".parse().expect("v6 address");
    assert!(host.contains("::1".parse().expect("ip")));
    assert_eq!(host.to_string(), "::1/128");
    for bad in [
        "",
        "proxy.example",
        "10.0.0.0/33",
        "10.0.0.0/x",
        "10.0.0.0/",
        "::/129",
    ] {
        assert!(bad.parse::<TrustedProxy>().is_err(), "{bad}");
    }
    for everyone in ["0.0.0.0/0", "::/0"] {
        let error = everyone.parse::<TrustedProxy>().expect_err(everyone);
        assert!(error.contains("every address"), "{error}");
    }
    assert!(ProxySignIn::new(vec![one], "Authorization").is_err());
    assert!(ProxySignIn::new(vec![one], "not a header").is_err());
    assert!(ProxySignIn::new(Vec::new(), DEFAULT_PROXY_USER_HEADER)
        .expect("fine")
        .is_none());
}

#[test]
fn the_proxy_user_header_names_a_live_user_only_from_a_trusted_proxy() {
    let dir = tempfile::tempdir().expect("temp dir");
    let users = UserFile::at(dir.path().join("users.json"));
    let token = users.add("ana", None).expect("ana");
    users.add("ben", None).expect("ben");
    users.revoke("ben").expect("revoked");
    let proxy = ProxySignIn::new(
        vec!["192.0.2.10".parse().expect("proxy")],
        "X-Auth-Request-User",
    )
    .expect("valid");
    let access = Access::new("127.0.0.1:8080".parse().expect("addr"), &[])
        .with_users(Some(users.into()))
        .with_proxy(proxy);
    let bearer = format!("Bearer {token}");
    let bearer = bearer.as_str();
    let proxy_ip: IpAddr = "192.0.2.10".parse().expect("ip");
    let other: IpAddr = "192.0.2.11".parse().expect("ip");
    // The file's futures are ready: a runtime of one thread polls them.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let named = |peer: Option<IpAddr>, pairs: &[(&str, &str)]| {
        let headers = headers(pairs);
        runtime
            .block_on(access.proxy_user(peer, &headers))
            .map_err(|error| error.code())
    };
    assert_eq!(
        named(Some(proxy_ip), &[("x-auth-request-user", "ana")]),
        Ok(Some(SignedIn {
            name: "ana".to_string(),
            policy: None
        }))
    );
    // Without the header the proxy signs no one in: the token decides, as for anyone.
    assert_eq!(named(Some(proxy_ip), &[]), Ok(None));
    assert_eq!(named(Some(other), &[("authorization", bearer)]), Ok(None));
    // The header from anyone else: refused, with a valid token or none, and from a
    // request with no peer address at all.
    for peer in [Some(other), None, Some("127.0.0.1".parse().expect("ip"))] {
        assert_eq!(
            named(peer, &[("x-auth-request-user", "ana")]),
            Err("forbidden"),
            "{peer:?}"
        );
        assert_eq!(
            named(
                peer,
                &[("x-auth-request-user", "ana"), ("authorization", bearer)]
            ),
            Err("forbidden")
        );
    }
    // From the proxy: no live user, or two names, is not signed in.
    for bad in [
        vec![("x-auth-request-user", "carla")],
        vec![("x-auth-request-user", "ben")],
        vec![("x-auth-request-user", "")],
        vec![
            ("x-auth-request-user", "ana"),
            ("x-auth-request-user", "ana"),
        ],
    ] {
        assert_eq!(named(Some(proxy_ip), &bad), Err("unauthorized"), "{bad:?}");
    }
    // Another header name than the configured one means nothing.
    assert_eq!(named(Some(other), &[("x-forwarded-user", "ana")]), Ok(None));
}
#[test]
fn failures_count_against_the_forwarded_client_only_behind_a_trusted_proxy() {
    let proxy = ProxySignIn::new(
        vec![
            "192.0.2.10".parse().expect("proxy"),
            "10.0.0.0/24".parse().expect("inner proxies"),
        ],
        DEFAULT_PROXY_USER_HEADER,
    )
    .expect("valid");
    let proxy = proxy.as_ref();
    let ip = |text: &str| -> IpAddr { text.parse().expect("ip") };
    let from =
        |peer: &str, pairs: &[(&str, &str)]| sign_in_client(proxy, ip(peer), &headers(pairs));
    // The proxy's own hop names the client.
    assert_eq!(
        from("192.0.2.10", &[("x-forwarded-for", "198.51.100.7")]),
        ip("198.51.100.7")
    );
    // What the client wrote left of it is never read: the right-most untrusted hop.
    for forged in [
        "203.0.113.1, 198.51.100.7",
        "192.0.2.10, 198.51.100.7",
        "not an address, 198.51.100.7",
    ] {
        assert_eq!(
            from("192.0.2.10", &[("x-forwarded-for", forged)]),
            ip("198.51.100.7"),
            "{forged}"
        );
    }
    // Through a chain of trusted proxies, in one header or several, with ports.
    assert_eq!(
        from(
            "10.0.0.3",
            &[
                ("x-forwarded-for", "203.0.113.1"),
                ("x-forwarded-for", "198.51.100.7:51000, 192.0.2.10")
            ]
        ),
        ip("198.51.100.7")
    );
    assert_eq!(
        from(
            "::ffff:192.0.2.10",
            &[("x-forwarded-for", "[2001:db8::7]:443")]
        ),
        ip("2001:db8::7")
    );
    // Only trusted hops: the left-most, the proxy that was the client.
    assert_eq!(
        from("192.0.2.10", &[("x-forwarded-for", "10.0.0.3")]),
        ip("10.0.0.3")
    );
    // No header, or a right-most hop that is not an address: the proxy itself.
    assert_eq!(from("192.0.2.10", &[]), ip("192.0.2.10"));
    for garbage in [
        "198.51.100.7, unknown",
        "198.51.100.7,",
        "",
        "198.51.100.7 x",
    ] {
        assert_eq!(
            from("192.0.2.10", &[("x-forwarded-for", garbage)]),
            ip("192.0.2.10"),
            "{garbage:?}"
        );
    }
    // From anyone else the header changes nothing, and with no proxy trusted neither.
    for peer in ["192.0.2.11", "127.0.0.1"] {
        assert_eq!(from(peer, &[("x-forwarded-for", "198.51.100.7")]), ip(peer));
    }
    assert_eq!(
        sign_in_client(
            None,
            ip("192.0.2.10"),
            &headers(&[("x-forwarded-for", "198.51.100.7")])
        ),
        ip("192.0.2.10")
    );
}
