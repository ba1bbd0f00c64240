//! What the HTTP drivers share: a JSON POST with a per-request timeout, retried on rate
//! limits (429), server errors (5xx) and transport errors with growing delays, honouring a
//! `Retry-After` header; and error messages that never carry the API key.

use crate::protocol::Failure;
use serde_json::Value as Json;
use std::time::Duration;

/// How an HTTP driver treats each request.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// How long one attempt may take.
    pub timeout: Duration,
    /// Attempts after the first when the provider is busy or failing.
    pub retries: u32,
    /// First delay between attempts (doubled each time) when the provider gives none.
    pub backoff: Duration,
}

/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

/// POSTs `body` to `url` with `headers`; returns the JSON of a 2xx response. `secret` (the
/// API key) is scrubbed from every error message.
pub async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
    body: &Json,
    opts: &HttpOptions,
    secret: Option<&str>,
) -> Result<Json, Failure> {
    let scrub = |msg: String| match secret {
        Some(s) if !s.is_empty() => msg.replace(s, "[redacted]"),
        _ => msg,
    };
    let mut delay = opts.backoff;
    let mut attempt = 0;
    loop {
        let mut req = client.post(url).timeout(opts.timeout).json(body);
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let (retryable, wait, error) = match req.send().await {
            Ok(resp) => {
                let status = resp.status();
                let retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .and_then(|s| Duration::try_from_secs_f64(s).ok())
                    .map(|d| d.min(MAX_RETRY_AFTER));
                let text = resp.text().await.unwrap_or_default();
                if status.is_success() {
                    return serde_json::from_str(&text).map_err(|e| {
                        Failure(scrub(format!("the provider's response is not JSON ({e})")))
                    });
                }
                let detail: String = text.chars().take(300).collect();
                let retryable = status.as_u16() == 429 || status.is_server_error();
                (
                    retryable,
                    retry_after,
                    format!("the provider answered {status}: {detail}"),
                )
            }
            Err(e) if e.is_timeout() => (
                true,
                None,
                format!(
                    "the provider did not answer within {} s",
                    opts.timeout.as_secs_f64()
                ),
            ),
            Err(e) => (true, None, format!("cannot reach the provider: {e}")),
        };
        if !retryable || attempt >= opts.retries {
            let tries = if attempt > 0 {
                format!(" (after {} attempts)", attempt + 1)
            } else {
                String::new()
            };
            return Err(Failure(scrub(format!("{error}{tries}"))));
        }
        attempt += 1;
        tokio::time::sleep(wait.unwrap_or(delay)).await;
        delay *= 2;
    }
}
