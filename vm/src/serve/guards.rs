//! What every page the server sends carries (the web page, a run's report): nothing from
//! elsewhere may load, the page is not framed, cached or sniffed, and its address (which may
//! hold the token) is not sent on.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

/// `body` with `status` and the headers every page carries.
pub fn guarded(status: StatusCode, body: Response) -> Response {
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    h.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    r
}
