//! Who may use the dashboard: the `Host` check that defeats DNS rebinding,
//! the access token and its login form, and the CSRF token every mutation
//! carries.

use std::net::IpAddr;
use std::sync::Arc;

use axum::Form;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use queue_core::Storage;
use serde::Deserialize;

use crate::layout;
use crate::{AppState, OptionsError};

/// The cookie that holds the access token after a login.
const COOKIE: &str = "queue_dashboard_token";

/// Where the login form posts.
pub(crate) const LOGIN_PATH: &str = "/login";

/// A host a request may name: lower-case, with its port if one was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    /// Parses `host`, `host:port`, `[v6]` or `[v6]:port`; `None` for
    /// anything else (a bare IPv6 address, a bad port, stray characters).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let (host, rest) = if text.starts_with('[') {
            let end = text.find(']')?;
            text.split_at(end + 1)
        } else {
            text.split_at(text.find(':').unwrap_or(text.len()))
        };
        let port = match rest {
            "" => None,
            rest => Some(rest.strip_prefix(':')?.parse::<u16>().ok()?),
        };
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-._:[]".contains(c);
        (!host.is_empty() && host.chars().all(allowed)).then_some(Self { host, port })
    }

    /// `localhost` or a loopback address: names no DNS answer can move.
    fn is_loopback(&self) -> bool {
        self.host == "localhost"
            || self
                .host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// Whether a request naming `self` matches the allowed entry `entry`
    /// (an entry without a port allows every port).
    fn matches(&self, entry: &Self) -> bool {
        self.host == entry.host && entry.port.is_none_or(|port| self.port == Some(port))
    }
}

/// The allowed hosts of the options, parsed; a typed error for an entry
/// that is not `host` or `host:port`.
pub(crate) fn allowed_hosts(entries: &[String]) -> Result<Vec<Authority>, OptionsError> {
    entries
        .iter()
        .map(|entry| {
            Authority::parse(entry.trim()).ok_or_else(|| OptionsError::AllowedHost(entry.clone()))
        })
        .collect()
}

/// Refuses the token's absence or a token a cookie cannot carry.
pub(crate) fn check_token(token: &str) -> Result<(), OptionsError> {
    if token.trim().is_empty() {
        return Err(OptionsError::BlankToken);
    }
    // RFC 6265's cookie-octet: visible ASCII but `"`, `,`, `;` and `\`.
    match token
        .chars()
        .find(|&c| !c.is_ascii_graphic() || "\",;\\".contains(c))
    {
        Some(c) => Err(OptionsError::TokenCharacter(c)),
        None => Ok(()),
    }
}

/// Without a token, lets a request through only when its `Host` is a
/// loopback name or address, or one of the allowed hosts: a page on
/// another site whose name an attacker re-points at 127.0.0.1 (DNS
/// rebinding) sends its own name, and is refused with 421. With a token
/// every request needs the token, which such a page does not have.
pub(crate) async fn check_host<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    request: Request,
    next: Next,
) -> Response {
    if state.options.token.is_some() {
        return next.run(request).await;
    }
    let named = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
    let Some(named) = named else {
        return misdirected("a request without a Host header".to_owned());
    };
    match Authority::parse(named.trim()) {
        Some(authority)
            if authority.is_loopback()
                || state.allowed_hosts.iter().any(|a| authority.matches(a)) =>
        {
            next.run(request).await
        }
        _ => misdirected(format!("the host {named:?}")),
    }
}

fn misdirected(what: String) -> Response {
    let body = format!(
        "This dashboard does not answer to {what}: only localhost, 127.0.0.1, [::1] and its allowed hosts (--allowed-host).\n"
    );
    (StatusCode::MISDIRECTED_REQUEST, body).into_response()
}

/// Lets a request through when no token is configured, or when it carries
/// the token as `Authorization: Bearer …` or in the cookie a login sets.
/// `/healthz`, the style sheet and the login itself are always open; a
/// token in the query string is not looked at.
pub(crate) async fn require_token<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = state.options.token.as_deref() else {
        return next.run(request).await;
    };
    let path = request.uri().path();
    if path == "/healthz"
        || path == layout::STYLE_PATH
        || (path == LOGIN_PATH && request.method() == Method::POST)
    {
        return next.run(request).await;
    }
    let headers = request.headers();
    if bearer(headers).is_some_and(|t| same(t, token))
        || cookie(headers).is_some_and(|t| same(t, token))
    {
        return next.run(request).await;
    }
    // After the login, back to the page asked for (a GET), else the overview.
    let back = if request.method() == Method::GET {
        request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned()
    } else {
        "/".to_owned()
    };
    login_page(&back)
}

/// The login form's fields.
#[derive(Debug, Deserialize)]
pub(crate) struct Login {
    #[serde(default)]
    token: String,
    #[serde(default)]
    next: String,
}

/// `POST /login`: the right token sets the cookie and goes on to `next`;
/// a wrong one shows the form again.
pub(crate) async fn login<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    headers: HeaderMap,
    Form(form): Form<Login>,
) -> Response {
    let next = local_path(&form.next);
    let Some(token) = state.options.token.as_deref() else {
        return Redirect::to(next).into_response();
    };
    if !same(&form.token, token) {
        return login_page(next);
    }
    let mut cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
    if state.options.secure_cookie || forwarded_https(&headers) {
        cookie.push_str("; Secure");
    }
    let mut response = Redirect::to(next).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Whether a proxy in front says the browser came over HTTPS. Believing it
/// from anyone is safe: `Secure` only keeps the cookie off plain HTTP.
fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(',').next())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

/// `next` when it is a path on this site, else the overview: a login never
/// redirects elsewhere.
fn local_path(next: &str) -> &str {
    let local = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && next.bytes().all(|b| b.is_ascii_graphic());
    if local { next } else { "/" }
}

/// Whether a form's CSRF field matches this process's token.
pub(crate) fn csrf_ok<S>(state: &AppState<S>, given: &str) -> bool {
    same(given, &state.csrf)
}

fn login_page(next: &str) -> Response {
    let body = layout::bare(
        "Token required",
        maud::html! {
            p { "This dashboard needs its access token." }
            form method="post" action=(LOGIN_PATH) {
                input type="hidden" name="next" value=(next);
                input type="password" name="token" placeholder="token" autocomplete="current-password" autofocus;
                button type="submit" { "Open" }
            }
        },
    );
    (StatusCode::UNAUTHORIZED, body).into_response()
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// Compares in time independent of where the strings differ.
fn same(given: &str, expected: &str) -> bool {
    let (given, expected) = (given.as_bytes(), expected.as_bytes());
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::{Authority, local_path, same};

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abd", "abc"));
        assert!(!same("ab", "abc"));
    }

    #[test]
    fn hosts_parse_with_and_without_ports() {
        let parse = |text| Authority::parse(text).map(|a| (a.host, a.port));
        assert_eq!(
            parse("LocalHost:8080"),
            Some(("localhost".to_owned(), Some(8080)))
        );
        assert_eq!(parse("[::1]:80"), Some(("[::1]".to_owned(), Some(80))));
        assert_eq!(parse("127.0.0.1"), Some(("127.0.0.1".to_owned(), None)));
        assert_eq!(parse("::1"), None, "a bare IPv6 address is no Host");
        assert_eq!(parse("a:b"), None);
        assert_eq!(parse("a b"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn a_login_goes_on_only_to_a_path_here() {
        assert_eq!(local_path("/history?queue=a"), "/history?queue=a");
        assert_eq!(local_path("//evil.example/"), "/");
        assert_eq!(local_path("/\\evil.example/"), "/");
        assert_eq!(local_path("https://evil.example/"), "/");
    }
}
