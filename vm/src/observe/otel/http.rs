//! The HTTP client OTLP export goes through: the workspace's reqwest (rustls, no OpenSSL)
//! in its blocking form, which suits the SDK's batch exporter, since that runs on a thread
//! of its own outside the VM's tokio runtime.

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use std::io::Read;
use std::time::Duration;

/// Responses longer than this are refused (a collector answers with a few bytes).
const MAX_RESPONSE: u64 = 4 * 1024 * 1024;

/// A blocking HTTP client for the OTLP exporter.
#[derive(Debug)]
pub struct BlockingClient(reqwest::blocking::Client);

impl BlockingClient {
    /// A client whose requests give up after `timeout`. Must not be called on a thread
    /// running an async runtime.
    pub fn new(timeout: Duration) -> Result<BlockingClient, String> {
        prose_agent::tls::install_crypto_provider();
        reqwest::blocking::Client::builder()
            .timeout(timeout)
            .build()
            .map(BlockingClient)
            .map_err(|e| format!("OpenTelemetry HTTP client: {e}"))
    }
}

#[async_trait::async_trait]
impl HttpClient for BlockingClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let response = self
            .0
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body.to_vec())
            .send()?;
        let status = response.status();
        let headers = response.headers().clone();
        let mut bytes = Vec::new();
        response.take(MAX_RESPONSE + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_RESPONSE {
            return Err("the collector's response is too long".into());
        }
        let mut out = Response::builder()
            .status(status)
            .body(Bytes::from(bytes))?;
        *out.headers_mut() = headers;
        Ok(out)
    }
}
