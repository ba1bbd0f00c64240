//! `web_fetch {url}`: an HTTP GET whose body comes back as text (HTML converted to text).
//!
//! Redirects are followed by the tool itself, each hop checked against the `network`
//! permission like the first request, at most [`MAX_REDIRECTS`] of them. The body is read up
//! to a size cap and the whole fetch, redirects and the HTML's conversion included, has a time
//! limit; the conversion is bounded in depth and stops with the call (`super::html`).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, LOCATION};
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{html, truncate_at, BuiltIn, ToolContext};
use futures_util::future::BoxFuture;
use prose_machine::protocol::ToolOutput;

/// Redirects followed at most.
pub const MAX_REDIRECTS: usize = 5;

/// Width HTML is laid out to when converted to text.
const TEXT_WIDTH: usize = 100;

/// The size and time caps of `web_fetch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchLimits {
    /// Bytes of body read at most; the rest is not downloaded.
    pub max_body_bytes: usize,
    /// Bytes of text returned at most.
    pub max_text_bytes: usize,
    /// The whole fetch, redirects included.
    pub timeout: Duration,
}

impl Default for FetchLimits {
    /// 2 MiB of body, 100 KiB of text, 30 seconds.
    fn default() -> Self {
        FetchLimits {
            max_body_bytes: 2 * 1024 * 1024,
            max_text_bytes: 100 * 1024,
            timeout: Duration::from_secs(30),
        }
    }
}

/// `web_fetch {url}`.
pub struct WebFetch {
    limits: FetchLimits,
    client: OnceLock<Result<reqwest::Client, String>>,
}

impl WebFetch {
    /// The tool with the default limits.
    pub fn new() -> WebFetch {
        WebFetch::with_limits(FetchLimits::default())
    }

    /// The tool with other limits.
    pub fn with_limits(limits: FetchLimits) -> WebFetch {
        WebFetch {
            limits,
            client: OnceLock::new(),
        }
    }

    fn client(&self) -> Result<&reqwest::Client, String> {
        self.client
            .get_or_init(|| {
                crate::tls::install_crypto_provider();
                reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent(concat!(
                        "prosevm/",
                        env!("CARGO_PKG_VERSION"),
                        " (web_fetch)"
                    ))
                    .build()
                    .map_err(|e| format!("could not set up the HTTP client: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl Default for WebFetch {
    fn default() -> Self {
        WebFetch::new()
    }
}

/// `web_fetch`'s arguments, as the model gives them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FetchArgs {
    url: String,
}

impl BuiltIn for WebFetch {
    type Args = FetchArgs;
    const NAME: &'static str = "web_fetch";
    const DESCRIPTION: &'static str = "Fetch a URL as text.";
    const READ_ONLY: bool = true;

    fn run<'a>(&'a self, args: FetchArgs, cx: &'a ToolContext<'a>) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let deadline = Instant::now() + self.limits.timeout;
            match tokio::time::timeout(self.limits.timeout, self.fetch(&args.url, cx, deadline))
                .await
            {
                Ok(output) => output,
                Err(_) => ToolOutput::error(format!(
                    "fetching {} took longer than {} s and was stopped",
                    args.url,
                    self.limits.timeout.as_secs_f64()
                )),
            }
        })
    }
}

fn parse_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text.trim()).map_err(|e| format!("`{text}` is not a valid URL: {e}"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!(
            "`{text}`: only http and https URLs can be fetched, not `{other}`"
        )),
    }
}

impl WebFetch {
    async fn fetch(&self, url: &str, cx: &ToolContext<'_>, deadline: Instant) -> ToolOutput {
        let client = match self.client() {
            Ok(c) => c,
            Err(e) => return ToolOutput::error(e),
        };
        let mut url = match parse_url(url) {
            Ok(u) => u,
            Err(e) => return ToolOutput::error(e),
        };
        for hop in 0..=MAX_REDIRECTS {
            if let Err(refusal) = cx.network(url.as_str()).await {
                return ToolOutput::error(if hop == 0 {
                    refusal
                } else {
                    format!("a redirect led to {url}, which is refused: {refusal}")
                });
            }
            let response = match client.get(url.clone()).send().await {
                Ok(r) => r,
                Err(e) => {
                    return ToolOutput::error(format!("fetching {url} failed: {}", error_chain(&e)))
                }
            };
            if response.status().is_redirection() {
                let Some(location) = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|l| l.to_str().ok())
                else {
                    return ToolOutput::error(format!(
                        "{url} answered {} without a usable Location",
                        response.status()
                    ));
                };
                url = match url
                    .join(location)
                    .map_err(|e| e.to_string())
                    .and_then(|u| parse_url(u.as_str()))
                {
                    Ok(next) => next,
                    Err(e) => {
                        return ToolOutput::error(format!(
                            "{url} redirects to `{location}`, which cannot be followed: {e}"
                        ))
                    }
                };
                continue;
            }
            return self.read_body(url, response, deadline).await;
        }
        ToolOutput::error(format!(
            "more than {MAX_REDIRECTS} redirects; stopped at {url}"
        ))
    }

    async fn read_body(
        &self,
        url: Url,
        mut response: reqwest::Response,
        deadline: Instant,
    ) -> ToolOutput {
        let status = response.status();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let mut body = Vec::new();
        let mut cut = false;
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = self.limits.max_body_bytes - body.len();
                    if chunk.len() > room {
                        body.extend_from_slice(&chunk[..room]);
                        cut = true;
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return ToolOutput::error(format!(
                        "reading the body of {url} failed: {}",
                        error_chain(&e)
                    ))
                }
            }
        }
        let mime = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let html = mime == "text/html" || mime == "application/xhtml+xml";
        let textual = mime.is_empty()
            || mime.starts_with("text/")
            || mime.contains("json")
            || mime.contains("xml")
            || mime.contains("javascript");
        if !html && (!textual || body.iter().take(8192).any(|&b| b == 0)) {
            return ToolOutput::error(format!(
                "{url} is not text ({}, {} bytes){}; web_fetch returns text only",
                if mime.is_empty() {
                    "no content type"
                } else {
                    &mime
                },
                body.len(),
                if cut { " or more" } else { "" }
            ));
        }
        let (text, note) = if html {
            match html::convert(body, TEXT_WIDTH, deadline).await {
                Ok(c) => (c.text, c.note),
                Err(e) => return ToolOutput::error(format!("{url}: {e}")),
            }
        } else {
            (String::from_utf8_lossy(&body).into_owned(), None)
        };
        let mut out = format!(
            "URL: {url}\nStatus: {status}\nContent-Type: {}\n\n",
            if content_type.is_empty() {
                "(none)"
            } else {
                &content_type
            }
        );
        if let Some(note) = note {
            out.push_str(&note);
            out.push_str("\n\n");
        }
        out.push_str(truncate_at(&text, self.limits.max_text_bytes));
        if cut || text.len() > self.limits.max_text_bytes {
            out.push_str(&format!(
                "\n\n[cut: only the first {} KiB of the body were read and at most {} KiB of \
                 text are returned]",
                self.limits.max_body_bytes / 1024,
                self.limits.max_text_bytes / 1024
            ));
        }
        if status.is_client_error() || status.is_server_error() {
            ToolOutput::error(out)
        } else {
            ToolOutput::ok(out)
        }
    }
}

/// An error with its causes, which reqwest keeps in the source chain.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
