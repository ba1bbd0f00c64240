//! HTTP GET for the npm and program registries: the workspace's one HTTP stack (reqwest,
//! blocking, rustls with the *ring* provider and the platform's certificate verifier). The
//! proxy variables (`HTTPS_PROXY`, `NO_PROXY`, ...) apply, as reqwest reads them. Bodies are
//! read up to a limit, so a hostile server cannot exhaust memory.

use super::{Failure, FetchError};
use std::io::Read;
use std::time::Duration;

/// How long one request may take, body included.
const TIMEOUT: Duration = Duration::from_secs(120);

/// A response: its status and body.
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The body (at most the limit asked for).
    pub body: Vec<u8>,
}

/// An HTTP client.
pub struct Http {
    client: reqwest::blocking::Client,
}

impl Http {
    /// A client. Must not be called from inside an async runtime (reqwest's blocking client
    /// runs its own).
    pub fn new() -> Result<Http, FetchError> {
        // A provider installed first (by an embedding program) stays.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::blocking::Client::builder()
            .timeout(TIMEOUT)
            .user_agent(concat!("prosec/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| FetchError::new(Failure::Failed, format!("cannot start HTTP: {e}")))?;
        Ok(Http { client })
    }

    /// GETs `url`, sending `accept` and, if given, `Authorization: Bearer TOKEN`; the body
    /// must not exceed `limit` bytes.
    pub fn get(
        &self,
        url: &str,
        accept: &str,
        token: Option<&str>,
        limit: usize,
    ) -> Result<Response, FetchError> {
        let mut req = self.client.get(url).header("Accept", accept);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req
            .send()
            .map_err(|e| FetchError::new(Failure::Failed, format!("GET {url}: {}", chain(&e))))?;
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        resp.take(limit as u64 + 1)
            .read_to_end(&mut body)
            .map_err(|e| FetchError::new(Failure::Failed, format!("GET {url}: {e}")))?;
        if body.len() > limit {
            return Err(FetchError::new(
                Failure::Failed,
                format!("GET {url}: the answer is larger than the {limit} bytes accepted"),
            ));
        }
        Ok(Response { status, body })
    }
}

/// An error with its causes, which say what actually went wrong (refused, timed out, DNS).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cur = c.source();
    }
    text
}
