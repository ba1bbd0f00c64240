//! Who may use the server. With a token (`--token-file`), every `/v1` request must carry it,
//! as `Authorization: Bearer TOKEN` or, from the web page, in the `prose_token` cookie the
//! page set when it was opened with `?token=TOKEN`; anything else gets 401. Tokens are
//! compared in constant time (their SHA-256 digests, so not even the length shows).

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The cookie that carries the token for the web page.
pub const COOKIE: &str = "prose_token";

/// The server's token (its digest: the token itself is not kept).
#[derive(Clone)]
pub struct Token([u8; 32]);

impl Token {
    /// The token in the file at `path`: its text without surrounding white space, which must
    /// not be empty.
    pub fn read(path: &std::path::Path) -> Result<Token, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--token-file {}: {e}", path.display()))?;
        Token::new(text.trim())
            .ok_or_else(|| format!("--token-file {}: the file holds no token", path.display()))
    }

    /// `token`, if not empty.
    pub fn new(token: &str) -> Option<Token> {
        (!token.is_empty()).then(|| Token(Sha256::digest(token.as_bytes()).into()))
    }

    /// Whether `given` is the token, in time that does not depend on where they differ.
    pub fn admits(&self, given: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        self.0.ct_eq(&digest).into()
    }
}

/// The token a request carries: a bearer token, else the page's cookie.
pub fn carried(headers: &HeaderMap) -> Option<&str> {
    if let Some(bearer) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(bearer.trim());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// Whether a request with `headers` may pass, with the server's `token` (none: everyone).
pub fn allowed(token: Option<&Token>, headers: &HeaderMap) -> bool {
    match token {
        None => true,
        Some(t) => carried(headers).is_some_and(|given| t.admits(given)),
    }
}

/// The middleware guarding `/v1`: 401 without the token.
pub async fn guard(
    State(token): State<Option<Arc<Token>>>,
    request: Request,
    next: Next,
) -> Response {
    if allowed(token.as_deref(), request.headers()) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        axum::Json(super::api::ErrorBody {
            error: "this server needs its token: Authorization: Bearer TOKEN".into(),
        }),
    )
        .into_response()
}

/// The `Set-Cookie` value keeping `token` for the web page: not readable by scripts, sent
/// only to this server's pages.
pub fn cookie(token: &str) -> String {
    format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn only_the_token_passes_by_header_or_cookie() {
        let t = Token::new("s3cret").expect("token");
        let mut h = HeaderMap::new();
        assert!(!allowed(Some(&t), &h));
        assert!(allowed(None, &h));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cre"),
        );
        assert!(!allowed(Some(&t), &h));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret"),
        );
        assert!(allowed(Some(&t), &h));
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; prose_token=s3cret"),
        );
        assert!(allowed(Some(&t), &h));
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("prose_token_x=s3cret"),
        );
        assert!(!allowed(Some(&t), &h));
        assert!(Token::new("").is_none());
    }
}
