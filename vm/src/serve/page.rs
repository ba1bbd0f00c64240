//! The web page at `/`: one self-contained page (its style and script inline, nothing from
//! elsewhere) with the list of runs and a live view of one run: its status, the inputs it
//! waits for as a form, cancel and resume, its events as they come, and its report (the
//! timeline with parallel branches side by side, every session's prompt, context, answer,
//! tool calls, tokens and cost), redrawn over the run's event stream. It uses the API like
//! any client.
//!
//! With a token, the page is opened once as `/?token=TOKEN`: the server keeps the token in an
//! HttpOnly cookie and sends the browser on to `/`, so the token leaves the address bar.

use super::auth::{self, Token};
use super::guards::guarded;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use std::sync::{Arc, OnceLock};

const TEMPLATE: &str = include_str!("page/index.html");
const STYLE: &str = include_str!("page/page.css");
const SCRIPT: &str = include_str!("page/page.js");

/// The page, its style (the report's, then its own) and script inlined.
fn page() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| {
        let style = format!("{}\n{STYLE}", crate::report::html::STYLE);
        TEMPLATE
            .replace("/*STYLE*/", &style)
            .replace("/*SCRIPT*/", SCRIPT)
    })
}

/// What the page says to a browser without the token.
const NEEDS_TOKEN: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\"><title>prosevm serve</title></head>\n<body><p>This server needs its token: open this page once as <code>/?token=TOKEN</code>.</p></body></html>\n";

/// The token a page's query gives (`?token=TOKEN`), percent-decoded, a `+` kept as a `+`:
/// the token is pasted as it is in its file, and a form's `+` for a space would turn a
/// token holding one into another.
fn token_in(query: Option<&str>) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let value = pair.strip_prefix("token=")?;
        Some(
            percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned(),
        )
    })
}

/// `GET /`: the page; with a token, only for a browser holding its cookie (given once for
/// `?token=`).
pub async fn show(
    State(token): State<Option<Arc<Token>>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let Some(token) = token else {
        return guarded(StatusCode::OK, Html(page()).into_response());
    };
    if let Some(given) = token_in(query.as_deref()) {
        if token.admits(&given) {
            let mut r = guarded(StatusCode::SEE_OTHER, ().into_response());
            let h = r.headers_mut();
            h.insert(header::LOCATION, header::HeaderValue::from_static("/"));
            if let Ok(cookie) = header::HeaderValue::from_str(&token.cookie()) {
                h.insert(header::SET_COOKIE, cookie);
            }
            return r;
        }
        return guarded(StatusCode::UNAUTHORIZED, Html(NEEDS_TOKEN).into_response());
    }
    if auth::allowed(Some(&token), &headers) {
        guarded(StatusCode::OK, Html(page()).into_response())
    } else {
        guarded(StatusCode::UNAUTHORIZED, Html(NEEDS_TOKEN).into_response())
    }
}
