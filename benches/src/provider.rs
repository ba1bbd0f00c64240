//! A fake OpenAI-compatible provider on 127.0.0.1 with the limits hosted providers have, for
//! the benches: every request is answered after a fixed latency, unless the provider's limit
//! is reached, when it is refused with 429 and the wait a real provider would ask for
//! (`retry-after-ms`, and `retry-after` in whole seconds). The limit is either requests in
//! flight or a rate (a token bucket, as per-minute limits are kept), in which case every
//! answer also carries OpenAI's `x-ratelimit-*` headers.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::routing::post;
use axum::Router;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the provider allows.
#[derive(Clone, Copy, Debug)]
pub enum Limit {
    /// No limit.
    None,
    /// At most this many requests in flight.
    InFlight(usize),
    /// A bucket of `burst` requests refilled at `per_second`.
    Rate {
        /// Requests the bucket holds.
        burst: usize,
        /// Requests added back each second.
        per_second: f64,
    },
}

/// A running fake provider.
pub struct Provider {
    /// Its base URL (`http://127.0.0.1:PORT/v1`).
    pub url: String,
    counts: Arc<Counts>,
    _thread: std::thread::JoinHandle<()>,
}

/// What the provider saw.
#[derive(Default)]
struct Counts {
    requests: AtomicU64,
    refused: AtomicU64,
}

struct Shared {
    limit: Limit,
    latency: Duration,
    counts: Arc<Counts>,
    in_flight: AtomicUsize,
    /// The bucket of a rate limit: requests left, when it was last filled.
    bucket: Mutex<(f64, Instant)>,
}

const ANSWER: &str = r#"{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":1,"total_tokens":21}}"#;
const REFUSAL: &str = r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#;

impl Provider {
    /// A provider answering after `latency`, within `limit`, on its own thread.
    pub fn start(limit: Limit, latency: Duration) -> Provider {
        let counts = Arc::new(Counts::default());
        let shared = Arc::new(Shared {
            limit,
            latency,
            counts: counts.clone(),
            in_flight: AtomicUsize::new(0),
            bucket: Mutex::new((
                match limit {
                    Limit::Rate { burst, .. } => burst as f64,
                    _ => 0.0,
                },
                Instant::now(),
            )),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}/v1", listener.local_addr().expect("address"));
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let app = Router::new()
                    .route("/v1/chat/completions", post(answer))
                    .with_state(shared);
                let _ = axum::serve(listener, app).await;
            });
        });
        Provider {
            url,
            counts,
            _thread: thread,
        }
    }

    /// Requests received, and how many of them were refused.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.counts.requests.load(Ordering::Relaxed),
            self.counts.refused.load(Ordering::Relaxed),
        )
    }
}

fn header(map: &mut HeaderMap, name: &'static str, value: String) {
    if let Ok(v) = HeaderValue::from_str(&value) {
        map.insert(HeaderName::from_static(name), v);
    }
}

/// Milliseconds as OpenAI writes a reset (`12ms`).
fn go_ms(d: Duration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

async fn answer(State(s): State<Arc<Shared>>) -> (StatusCode, HeaderMap, &'static str) {
    s.counts.requests.fetch_add(1, Ordering::Relaxed);
    let mut headers = HeaderMap::new();
    header(&mut headers, "content-type", "application/json".into());
    let refuse = |mut headers: HeaderMap, wait: Duration| {
        s.counts.refused.fetch_add(1, Ordering::Relaxed);
        header(
            &mut headers,
            "retry-after",
            wait.as_secs().max(1).to_string(),
        );
        header(
            &mut headers,
            "retry-after-ms",
            wait.as_millis().max(1).to_string(),
        );
        (StatusCode::TOO_MANY_REQUESTS, headers, REFUSAL)
    };
    match s.limit {
        Limit::None => {}
        Limit::InFlight(most) => {
            let slot = Slot(&s.in_flight);
            if s.in_flight.fetch_add(1, Ordering::AcqRel) >= most {
                return refuse(headers, s.latency);
            }
            tokio::time::sleep(s.latency).await;
            drop(slot);
            return (StatusCode::OK, headers, ANSWER);
        }
        Limit::Rate { burst, per_second } => {
            let mut b = s.bucket.lock().expect("bucket");
            let now = Instant::now();
            b.0 = (b.0 + now.duration_since(b.1).as_secs_f64() * per_second).min(burst as f64);
            b.1 = now;
            let taken = b.0 >= 1.0;
            if taken {
                b.0 -= 1.0;
            }
            let left = b.0.floor() as usize;
            let full_in = Duration::from_secs_f64((burst as f64 - b.0) / per_second);
            drop(b);
            header(
                &mut headers,
                "x-ratelimit-limit-requests",
                burst.to_string(),
            );
            header(
                &mut headers,
                "x-ratelimit-remaining-requests",
                left.to_string(),
            );
            header(&mut headers, "x-ratelimit-reset-requests", go_ms(full_in));
            if !taken {
                return refuse(headers, Duration::from_secs_f64(1.0 / per_second));
            }
        }
    }
    tokio::time::sleep(s.latency).await;
    (StatusCode::OK, headers, ANSWER)
}

/// A place among the requests in flight, given back however the answer ends (a client
/// that hangs up included).
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
