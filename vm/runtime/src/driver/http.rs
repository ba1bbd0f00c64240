//! What the HTTP drivers share: one connection pool per provider ([`client_for`]); attempts
//! retried on refusals (429, and 503 or 529 when overloaded), server errors (5xx), transport
//! errors and broken or stalled streams, with growing delays, honouring the wait a provider
//! asks for; each attempt within a time limit, and a streamed body read event by event
//! within an idle limit; and error messages that never carry the API key.

use super::pace::ProviderLimits;
use futures_util::{Stream, StreamExt};
use prose_machine::protocol::Failure;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use sse_stream::{Sse, SseStream};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// How an HTTP driver treats each request.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// How long one attempt may take, streaming included.
    pub timeout: Duration,
    /// How long a streamed answer may go without a new piece.
    pub idle: Duration,
    /// Attempts after the first when the provider is busy or failing.
    pub retries: u32,
    /// First delay between attempts (doubled each time) when the provider gives none.
    pub backoff: Duration,
}

/// The longest wait a provider's answer is honoured for.
const MAX_RETRY_AFTER: Duration = super::pace::MAX_WAIT;

/// Refusals (429, overloaded) a request takes in a row before it fails: they do not count
/// against the retries, as the provider said nothing is wrong with the request.
pub const MAX_REFUSALS: u32 = 50;

/// The most bytes a streamed answer may take on the wire (a stream without end stops
/// here rather than filling memory).
pub const MAX_STREAM_BYTES: usize = 32 << 20;

/// How long a stream that said it is complete may take to close before it is let go.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Why one attempt failed.
#[derive(Debug)]
pub struct AttemptError {
    /// Whether trying again may help (rate limits, server errors, transport errors, broken
    /// or stalled streams).
    pub retryable: bool,
    /// How long the provider asked to wait before trying again.
    pub wait: Option<Duration>,
    /// What went wrong.
    pub message: String,
    /// The provider's refusal, when it answered with a status other than 2xx.
    pub refusal: Option<Refusal>,
}

impl AttemptError {
    /// A failure worth another attempt.
    pub fn retryable(message: impl Into<String>) -> AttemptError {
        AttemptError {
            retryable: true,
            wait: None,
            message: message.into(),
            refusal: None,
        }
    }

    /// Whether the provider refused the attempt for its limits or load (429, 503, 529)
    /// rather than for what was asked: a refusal is worth waiting out, and the pace of
    /// requests to the provider slows down.
    pub fn refused(&self) -> bool {
        self.retryable && self.refusal.as_ref().is_some_and(Refusal::is_busy)
    }

    /// A failure another attempt would repeat.
    pub fn fatal(message: impl Into<String>) -> AttemptError {
        AttemptError {
            retryable: false,
            ..AttemptError::retryable(message)
        }
    }
}

/// A provider's answer with a status other than 2xx.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// The start of its body.
    pub text: String,
    /// The wait it asked for (`Retry-After`), in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<f64>,
}

impl Refusal {
    /// Whether the provider is over its limits or overloaded: 429 (except OpenAI's
    /// `insufficient_quota`, which waiting does not mend), 503 or 529.
    pub fn is_busy(&self) -> bool {
        match self.status {
            429 => !self.text.contains("insufficient_quota"),
            503 | 529 => true,
            _ => false,
        }
    }

    /// The attempt's failure: retryable when the provider is busy and for 5xx, after the
    /// wait asked for.
    pub fn error(self) -> AttemptError {
        AttemptError {
            retryable: self.is_busy() || (500..600).contains(&self.status),
            wait: self
                .retry_after_s
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .map(|d| d.min(MAX_RETRY_AFTER)),
            message: format!(
                "the provider answered {}: {}",
                reqwest::StatusCode::from_u16(self.status)
                    .map_or_else(|_| self.status.to_string(), |s| s.to_string()),
                self.text
            ),
            refusal: Some(self),
        }
    }
}

/// Runs `attempt` (given the attempt's number, from 0) until it succeeds, fails for good or
/// runs out of retries, waiting between attempts. `secret` (the API key) is scrubbed from the
/// failure.
pub async fn retrying<T, F, Fut>(
    opts: &HttpOptions,
    secret: Option<&str>,
    mut attempt: F,
) -> Result<T, Failure>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, AttemptError>>,
{
    let scrub = |msg: String| match secret {
        Some(s) if !s.is_empty() => msg.replace(s, "[redacted]"),
        _ => msg,
    };
    let mut delay = opts.backoff;
    // Failures counted against the retries; refusals in a row, which are not.
    let (mut failures, mut refusals) = (0, 0);
    let mut n = 0;
    loop {
        let error = match attempt(n).await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let refused = error.refused();
        let spent = if refused {
            refusals >= MAX_REFUSALS
        } else {
            failures >= opts.retries
        };
        if !error.retryable || spent {
            let tries = if n > 0 {
                format!(" (after {} attempts)", n + 1)
            } else {
                String::new()
            };
            return Err(Failure(scrub(format!("{}{tries}", error.message))));
        }
        if refused {
            refusals += 1;
        } else {
            (failures, refusals) = (failures + 1, 0);
        }
        n += 1;
        tokio::time::sleep(error.wait.unwrap_or(delay)).await;
        delay = (delay * 2).min(MAX_RETRY_AFTER);
    }
}

/// POSTs `body` to `url` with `headers`: the response of a 2xx status; any other status is
/// the attempt's failure (retryable for 429 and 5xx, with the wait the provider asked for:
/// `retry-after-ms`, `retry-after`, or its rate-limit headers' reset).
pub async fn send(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
    body: &Json,
) -> Result<reqwest::Response, AttemptError> {
    let mut req = client.post(url).json(body);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| AttemptError::retryable(format!("cannot reach the provider: {e}")))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let retry_after_s = ProviderLimits::from_headers(resp.headers(), chrono::Utc::now())
        .wait()
        .map(|w| w.as_secs_f64());
    let text = resp.text().await.unwrap_or_default();
    Err(Refusal {
        status: status.as_u16(),
        text: text.chars().take(300).collect(),
        retry_after_s,
    }
    .error())
}

/// How long an idle connection stays in the pool.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// The HTTP client for the provider at `base_url`: one per provider for the whole process,
/// so every request of every session and run to it draws on one connection pool
/// (kept alive between requests, TLS set up once per connection, HTTP/2 where the server
/// offers it in ALPN, many requests then sharing one connection).
pub fn client_for(base_url: &str) -> Result<reqwest::Client, String> {
    static CLIENTS: OnceLock<Mutex<HashMap<String, reqwest::Client>>> = OnceLock::new();
    let mut clients = CLIENTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(c) = clients.get(base_url) {
        return Ok(c.clone());
    }
    prose_agent::tls::install_crypto_provider();
    let client = reqwest::Client::builder()
        .pool_idle_timeout(POOL_IDLE)
        .tcp_keepalive(POOL_IDLE)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| format!("cannot set up HTTP: {e}"))?;
    clients.insert(base_url.to_string(), client.clone());
    Ok(client)
}

/// Whether `resp` streams server-sent events (rather than answering with one JSON body).
pub fn is_event_stream(resp: &reqwest::Response) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

/// The JSON body of `resp`.
pub async fn read_json(resp: reqwest::Response) -> Result<Json, AttemptError> {
    let text = resp
        .text()
        .await
        .map_err(|e| AttemptError::retryable(format!("the provider's response broke off: {e}")))?;
    // A provider that answers 2xx with something else would answer it again.
    serde_json::from_str(&text)
        .map_err(|e| AttemptError::fatal(format!("the provider's response is not JSON ({e})")))
}

/// POSTs `body` and returns the JSON of a 2xx response, with the retries of `opts`.
pub async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
    body: &Json,
    opts: &HttpOptions,
    secret: Option<&str>,
) -> Result<Json, Failure> {
    retrying(opts, secret, |_| {
        within(opts.timeout, async {
            read_json(send(client, url, headers, body).await?).await
        })
    })
    .await
}

/// `attempt`, failing (retryably) when it takes longer than `limit`.
pub async fn within<T>(
    limit: Duration,
    attempt: impl Future<Output = Result<T, AttemptError>>,
) -> Result<T, AttemptError> {
    tokio::time::timeout(limit, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(AttemptError::retryable(format!(
                "the provider did not answer within {} s",
                limit.as_secs_f64()
            )))
        })
}

/// Why a streamed body stopped short.
#[derive(Debug)]
enum StreamFault {
    /// The connection failed.
    Transport(reqwest::Error),
    /// More than [`MAX_STREAM_BYTES`] arrived.
    TooLarge,
}

impl std::fmt::Display for StreamFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamFault::Transport(e) => write!(f, "{e}"),
            StreamFault::TooLarge => write!(f, "more than {} MiB", MAX_STREAM_BYTES >> 20),
        }
    }
}

impl std::error::Error for StreamFault {}

type Bytes = Pin<Box<dyn Stream<Item = Result<bytes::Bytes, StreamFault>> + Send>>;

/// A streamed body read as server-sent events, each within the idle limit.
pub struct Events {
    events: Pin<Box<SseStream<sse_stream::ByteStreamBody<Bytes, bytes::Bytes>>>>,
    idle: Duration,
    ended: bool,
}

impl Events {
    /// The events of `resp`, each of which must come within `idle` of the one before.
    pub fn new(resp: reqwest::Response, idle: Duration) -> Events {
        let mut total = 0usize;
        let bytes: Bytes = Box::pin(resp.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(StreamFault::Transport)?;
            total += chunk.len();
            if total > MAX_STREAM_BYTES {
                return Err(StreamFault::TooLarge);
            }
            Ok(chunk)
        }));
        Events {
            events: Box::pin(SseStream::from_bytes_stream(bytes)),
            idle,
            ended: false,
        }
    }

    /// The next event, or none at the end of the body. A stream that breaks, stalls for
    /// longer than the idle limit or does not parse is the attempt's (retryable) failure.
    pub async fn next(&mut self) -> Result<Option<Sse>, AttemptError> {
        if self.ended {
            return Ok(None);
        }
        match tokio::time::timeout(self.idle, self.events.next()).await {
            Err(_) => Err(AttemptError::retryable(format!(
                "the provider's stream stalled: nothing for {} s",
                self.idle.as_secs_f64()
            ))),
            Ok(None) => {
                self.ended = true;
                Ok(None)
            }
            Ok(Some(Ok(sse))) => Ok(Some(sse)),
            Ok(Some(Err(e))) => Err(AttemptError::retryable(format!(
                "the provider's stream broke off: {e}"
            ))),
        }
    }

    /// After the provider said the answer is complete: anything more than the body's end
    /// (within a short grace) is a fault. A body that stays open is let go.
    pub async fn expect_end(&mut self) -> Result<(), AttemptError> {
        loop {
            match tokio::time::timeout(CLOSE_GRACE, self.events.next()).await {
                Err(_) | Ok(None) => return Ok(()),
                // Keep-alive comments and empty events carry nothing.
                Ok(Some(Ok(sse))) if sse.data.is_none() => {}
                Ok(Some(Ok(sse))) => {
                    return Err(AttemptError::retryable(format!(
                        "the provider's stream went on after its end: {:?}",
                        sse.data
                            .unwrap_or_default()
                            .chars()
                            .take(80)
                            .collect::<String>()
                    )))
                }
                Ok(Some(Err(e))) => {
                    return Err(AttemptError::retryable(format!(
                        "the provider's stream broke off: {e}"
                    )))
                }
            }
        }
    }
}
