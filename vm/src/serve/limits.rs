//! What one client can hold of the server. A request's body is read whole before the
//! request counts against `--max-requests`, with a time limit between its pieces and a
//! minimum rate over all of it, so a client that starts uploads and sends nothing holds no
//! place the API's other requests need, and is cut off with 408 ([`read_bodies`]). Each
//! client address may hold only so many connections at once ([`CappedListener`]).

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// The slowest a body may come, over all of it, beyond the time allowed between pieces:
/// 64 KiB a second.
const MIN_RATE: f64 = 64.0 * 1024.0;

/// How request bodies are read.
#[derive(Clone, Debug)]
pub struct BodyLimits {
    /// The largest body taken.
    pub max_bytes: usize,
    /// The longest wait for the next piece of a body (and for its first).
    pub idle: Duration,
    /// Bodies being read at once; a request waits for its turn before its body is read.
    pub reading: Arc<tokio::sync::Semaphore>,
}

impl BodyLimits {
    /// The whole time a body of `len` bytes may take: the idle limit three times over, and
    /// its length at the minimum rate.
    fn deadline(&self, len: usize) -> Duration {
        self.idle * 3 + Duration::from_secs_f64(len as f64 / MIN_RATE)
    }
}

/// A refusal with the `{"error"}` body of every failed request.
fn refused(status: StatusCode, message: String) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

/// Reads the body of a request that has one whole, as [`BodyLimits`] say, before passing it
/// on: 408 when it comes too slowly, 413 when it is too large.
pub async fn read_bodies(
    State(limits): State<Arc<BodyLimits>>,
    req: Request,
    next: Next,
) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let chunked = req.headers().contains_key(header::TRANSFER_ENCODING);
    if !chunked && declared.unwrap_or(0) == 0 {
        return next.run(req).await;
    }
    if declared.is_some_and(|n| n > limits.max_bytes) {
        return refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the body is larger than the {} bytes taken",
                limits.max_bytes
            ),
        );
    }
    let Ok(_turn) = tokio::time::timeout(limits.idle, limits.reading.acquire()).await else {
        return refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many request bodies are being read; try again".into(),
        );
    };
    let (parts, body) = req.into_parts();
    let deadline =
        tokio::time::Instant::now() + limits.deadline(declared.unwrap_or(limits.max_bytes));
    match collect(body, &limits, deadline).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(refusal) => refusal,
    }
}

/// The pieces of `body`, each within the idle limit and all before `deadline`.
async fn collect(
    body: Body,
    limits: &BodyLimits,
    deadline: tokio::time::Instant,
) -> Result<Bytes, Response> {
    use http_body_util::BodyExt;
    let slow = || {
        refused(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the body came too slowly (a piece at least every {} s, and {} KiB a second)",
                limits.idle.as_secs_f64(),
                MIN_RATE as u64 / 1024
            ),
        )
    };
    let mut body = body;
    let mut bytes = Vec::new();
    loop {
        let wait = limits
            .idle
            .min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        let frame = match tokio::time::timeout(wait, body.frame()).await {
            Err(_) => return Err(slow()),
            Ok(None) => return Ok(Bytes::from(bytes)),
            Ok(Some(Err(e))) => {
                return Err(refused(
                    StatusCode::BAD_REQUEST,
                    format!("the body cannot be read: {e}"),
                ))
            }
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > limits.max_bytes {
                return Err(refused(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the body is larger than the {} bytes taken",
                        limits.max_bytes
                    ),
                ));
            }
            bytes.extend_from_slice(&data);
        }
    }
}

/// Open connections by client address.
type Counts = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// A listener that lets each client address hold at most `per_client` connections: one
/// beyond that is closed as soon as it is accepted.
pub struct CappedListener {
    inner: TcpListener,
    per_client: usize,
    counts: Counts,
}

impl CappedListener {
    /// `inner`, each client address holding at most `per_client` connections.
    pub fn new(inner: TcpListener, per_client: usize) -> CappedListener {
        CappedListener {
            inner,
            per_client: per_client.max(1),
            counts: Arc::default(),
        }
    }
}

impl axum::serve::Listener for CappedListener {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Counted, SocketAddr) {
        loop {
            let (io, addr) = axum::serve::Listener::accept(&mut self.inner).await;
            let ip = addr.ip();
            {
                let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
                let n = counts.entry(ip).or_insert(0);
                if *n >= self.per_client {
                    // Closed unanswered: this client holds all it may.
                    drop(io);
                    continue;
                }
                *n += 1;
            }
            let guard = Slot {
                ip,
                counts: self.counts.clone(),
            };
            return (Counted { io, _slot: guard }, addr);
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// One connection's place in its client's count, given back when the connection closes.
struct Slot {
    ip: IpAddr,
    counts: Counts,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = counts.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// A connection counted against its client's limit while it is open.
pub struct Counted {
    io: TcpStream,
    _slot: Slot,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
