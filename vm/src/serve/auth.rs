//! Who may use the server. With a token (`--token-file`), every `/v1` request must carry it,
//! as `Authorization: Bearer TOKEN` or, from the web page, as the `prose_token` cookie the
//! page set when it was opened with `?token=TOKEN` (the cookie holds the token's SHA-256, so
//! any token fits in a cookie); anything else gets 401. Tokens are compared in constant time
//! (their SHA-256 digests, so not even the length shows).

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The cookie that carries the token for the web page.
pub const COOKIE: &str = "prose_token";

/// The longest token file read: a token is a secret of some dozens of characters.
pub const MAX_TOKEN_FILE: u64 = 4 << 10;

/// The server's token (its digest: the token itself is not kept).
#[derive(Clone)]
pub struct Token([u8; 32]);

/// The fewest characters a token may have: one that can be guessed guards nothing.
pub const MIN_TOKEN_LEN: usize = 16;

impl Token {
    /// The token in the file at `path`: its text without surrounding white space, at least
    /// [`MIN_TOKEN_LEN`] characters, in a regular file of at most [`MAX_TOKEN_FILE`] bytes
    /// that only its owner may read.
    pub fn read(path: &std::path::Path) -> Result<Token, String> {
        let token = read_secret("--token-file", "token", path)?;
        Token::new(&token)
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

    /// Whether `cookie` is the page's cookie for this token (its digest in hex), in
    /// constant time.
    fn admits_cookie(&self, cookie: &str) -> bool {
        let Some(digest) = unhex(cookie) else {
            return false;
        };
        self.0.ct_eq(&digest).into()
    }

    /// The value of the page's cookie: the token's digest in hex.
    fn cookie_value(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The `Set-Cookie` value keeping this token for the web page: not readable by scripts,
    /// sent only to this server's pages.
    pub fn cookie(&self) -> String {
        format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            self.cookie_value()
        )
    }
}

/// The secret (a `what`: a token, a signing secret) in the file at `path`, named by `flag` in
/// errors: its text without surrounding white space, at least [`MIN_TOKEN_LEN`] characters,
/// in a regular file of at most [`MAX_TOKEN_FILE`] bytes that only its owner may read.
pub fn read_secret(flag: &str, what: &str, path: &std::path::Path) -> Result<String, String> {
    let shown = path.display();
    let text = bytecode_spec::bounded::read_to_string(path, MAX_TOKEN_FILE)
        .map_err(|e| format!("{flag} {shown}: {e}"))?;
    if let Some(mode) = exposed_mode(path) {
        return Err(format!(
            "{flag} {shown}: other users can read it (mode {mode:03o}); make it private first: chmod 600 {shown}"
        ));
    }
    match text.trim() {
        "" => Err(format!("{flag} {shown}: the file holds no {what}")),
        t if t.chars().count() < MIN_TOKEN_LEN => Err(format!(
            "{flag} {shown}: the {what} has {} characters, fewer than the {MIN_TOKEN_LEN} a {what} needs (for example: openssl rand -base64 32)",
            t.chars().count()
        )),
        t => Ok(t.to_string()),
    }
}

/// The permission bits of `path` when its group or others may read it.
fn exposed_mode(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o044 != 0).then_some(mode)
}

/// 32 bytes from 64 hex digits.
fn unhex(s: &str) -> Option<[u8; 32]> {
    let bytes = s.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

/// What a request carries to prove it may pass.
enum Given<'a> {
    Bearer(&'a str),
    Cookie(&'a str),
}

/// The token a request carries: a bearer token, else the page's cookie.
fn carried(headers: &HeaderMap) -> Option<Given<'_>> {
    if let Some(bearer) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(Given::Bearer(bearer.trim()));
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .map(Given::Cookie)
}

/// Whether a request with `headers` may pass, with the server's `token` (none: everyone).
pub fn allowed(token: Option<&Token>, headers: &HeaderMap) -> bool {
    match (token, carried(headers)) {
        (None, _) => true,
        (Some(t), Some(Given::Bearer(b))) => t.admits(b),
        (Some(t), Some(Given::Cookie(c))) => t.admits_cookie(c),
        (Some(_), None) => false,
    }
}

/// Whether `host` (a request's `Host` header) names this machine's loopback address:
/// `localhost`, `127.0.0.1` or `[::1]`, with any port.
pub fn is_loopback_name(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The middleware of a server without a token (which listens only on a loopback address):
/// a request must name the loopback address as its host, so that no web page can reach the
/// server through a name of its own that it points at this machine (DNS rebinding).
pub async fn loopback_names_only(request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().host())
        .unwrap_or("");
    if is_loopback_name(host) {
        return next.run(request).await;
    }
    (
        StatusCode::FORBIDDEN,
        axum::Json(super::api::ErrorBody {
            error: format!(
                "this server answers to localhost, 127.0.0.1 and [::1] only, not {host:?} (a server with --token-file answers to any name)"
            ),
        }),
    )
        .into_response()
}

/// The middleware refusing what a web page elsewhere could make a browser send (a form
/// posted to this server, a `fetch` without CORS): a request that may change something
/// (not GET, HEAD or OPTIONS) whose `Origin` is not this server's, or that a browser marks
/// cross-site, is refused (403), and so is one whose body is not the API's kind: JSON, or
/// an artifact's bytes (415). A browser sends neither without a preflight this server never
/// answers, so no page can reach a server without a token, nor use a token's cookie.
pub async fn same_origin(request: Request, next: Next) -> Response {
    use axum::http::Method;
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return next.run(request).await;
    }
    let headers = request.headers();
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let host = text(header::HOST).unwrap_or("");
    let foreign = |origin: &str| {
        origin
            .split_once("://")
            .map(|(_, authority)| authority.trim_end_matches('/'))
            .is_none_or(|authority| !authority.eq_ignore_ascii_case(host))
    };
    let refusal = if text(header::ORIGIN).is_some_and(foreign) {
        Some((
            StatusCode::FORBIDDEN,
            format!(
                "a request from {} to {host} is refused: this server takes what changes it only from its own page or from clients that are not browsers",
                text(header::ORIGIN).unwrap_or("")
            ),
        ))
    } else if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"cross-site")
    {
        Some((
            StatusCode::FORBIDDEN,
            "a cross-site request is refused".to_string(),
        ))
    } else {
        match text(header::CONTENT_TYPE) {
            Some(kind) if !is_api_content(kind) => Some((
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "a body of type {kind:?} is refused: the API takes application/json (and application/octet-stream for an artifact)"
                ),
            )),
            _ => None,
        }
    };
    match refusal {
        None => next.run(request).await,
        Some((status, error)) => {
            (status, axum::Json(super::api::ErrorBody { error })).into_response()
        }
    }
}

/// Whether a `Content-Type` is one the API takes: JSON, or bytes (an artifact).
fn is_api_content(kind: &str) -> bool {
    let essence = kind.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
        || essence.eq_ignore_ascii_case("application/octet-stream")
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_api_takes_json_and_bytes_only() {
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/octet-stream",
        ] {
            assert!(is_api_content(ok), "{ok}");
        }
        for refused in [
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/plain",
            "",
        ] {
            assert!(!is_api_content(refused), "{refused}");
        }
    }

    #[test]
    fn loopback_names_are_told_from_others() {
        for host in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:9",
            "[::1]:80",
            "[::1]",
            "LOCALHOST",
        ] {
            assert!(is_loopback_name(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8080",
            "10.0.0.1:80",
            "",
            "localhost.evil:80",
            "[::2]:80",
        ] {
            assert!(!is_loopback_name(host), "{host}");
        }
    }

    #[test]
    fn a_token_file_is_a_regular_file_of_a_few_kilobytes() {
        let e = Token::read(std::path::Path::new("/dev/zero"))
            .err()
            .expect("a device");
        assert!(e.contains("a character device, not a regular file"), "{e}");
        let dir = std::env::temp_dir().join(format!("prose-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("token");
        std::fs::write(&file, "x".repeat(MAX_TOKEN_FILE as usize + 1)).expect("write");
        let e = Token::read(&file).err().expect("too long");
        assert!(e.contains(&format!("{MAX_TOKEN_FILE} bytes")), "{e}");
        std::fs::write(&file, " correct horse battery staple\n").expect("write");
        // Only its owner may read it.
        assert!(Token::read(&file)
            .err()
            .expect("shared")
            .contains("chmod 600"));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("mode");
        assert!(Token::read(&file)
            .expect("read")
            .admits("correct horse battery staple"));
        std::fs::write(&file, "s3cret\n").expect("write");
        assert!(Token::read(&file)
            .err()
            .expect("short")
            .contains("fewer than the 16"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn only_the_token_passes_by_header_or_cookie() {
        let t = Token::new("s3cret; x").expect("token");
        let mut h = HeaderMap::new();
        assert!(!allowed(Some(&t), &h));
        assert!(allowed(None, &h));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret;"),
        );
        assert!(!allowed(Some(&t), &h));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret; x"),
        );
        assert!(allowed(Some(&t), &h));
        // The cookie the page was given, and nothing else, passes.
        let set = t.cookie();
        let value = set
            .strip_prefix("prose_token=")
            .and_then(|v| v.split(';').next())
            .expect("value");
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"));
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=b; prose_token={value}")).expect("header"),
        );
        assert!(allowed(Some(&t), &h));
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("prose_token=s3cret; x"),
        );
        assert!(!allowed(Some(&t), &h));
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("prose_token_x={value}")).expect("header"),
        );
        assert!(!allowed(Some(&t), &h));
        assert!(Token::new("").is_none());
    }
}
