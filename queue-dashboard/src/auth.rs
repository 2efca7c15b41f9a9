//! Who may use the dashboard: the access token, and the CSRF token every
//! mutation carries.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use queue_core::Storage;

use crate::AppState;
use crate::layout;

/// The cookie that holds the access token after `?token=…`.
const COOKIE: &str = "queue_dashboard_token";

/// Lets a request through when no token is configured, or when it carries
/// the token as `Authorization: Bearer …` or in the cookie. A `?token=…`
/// query with the right token sets the cookie and redirects to the same
/// path without it. `/healthz` is always open.
pub(crate) async fn require_token<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = state.options.token.as_deref() else {
        return next.run(request).await;
    };
    if request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    if let Some(given) = query_token(request.uri().query()) {
        if !same(given, token) {
            return unauthorized();
        }
        let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
        let mut response = axum::response::Redirect::to(request.uri().path()).into_response();
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
        return response;
    }
    let headers = request.headers();
    if bearer(headers).is_some_and(|t| same(t, token))
        || cookie(headers).is_some_and(|t| same(t, token))
    {
        next.run(request).await
    } else {
        unauthorized()
    }
}

/// Whether a form's CSRF field matches this process's token.
pub(crate) fn csrf_ok<S>(state: &AppState<S>, given: &str) -> bool {
    same(given, &state.csrf)
}

fn unauthorized() -> Response {
    let body = layout::bare(
        "Token required",
        maud::html! {
            p { "This dashboard needs its access token." }
            form method="get" action="" {
                input type="password" name="token" placeholder="token" autofocus;
                button type="submit" { "Open" }
            }
        },
    );
    (StatusCode::UNAUTHORIZED, body).into_response()
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
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
    use super::{query_token, same};

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abd", "abc"));
        assert!(!same("ab", "abc"));
        assert_eq!(query_token(Some("a=1&token=xyz")), Some("xyz"));
        assert_eq!(query_token(Some("a=1")), None);
    }
}
