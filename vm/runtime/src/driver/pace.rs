//! Adaptive concurrency per provider: how many requests go to one model at one base URL at
//! once. The window starts generous and grows while requests succeed; when the provider
//! refuses one (429, or 503 and 529 when it is overloaded) the window shrinks by a factor,
//! as TCP's congestion control and Envoy's adaptive concurrency do (additive increase,
//! multiplicative decrease). A wait the provider asks for (`retry-after-ms`, `retry-after`,
//! or its rate-limit headers saying nothing is left until a reset) holds every request to it,
//! not only the refused one. A window never goes over its ceiling (`--max-concurrency`, or
//! the provider's own in `prose.toml`).
//!
//! Windows live as long as the process, one per base URL and model ([`pace_for`]), so the
//! runs a server holds share them as they share the provider's limits; the progress display
//! and the summary read them ([`shrunk`]).

use reqwest::header::HeaderMap;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Requests in flight to a provider at once unless `--max-concurrency` or `prose.toml` say
/// otherwise: the ceiling of its windows.
pub const DEFAULT_CEILING: usize = 256;

/// The window a provider starts with (under its ceiling).
pub const INITIAL_WINDOW: usize = 64;

/// What the window is multiplied by when the provider refuses a request. Measured in the
/// `provider` bench: 0.7 leaves the window too far under the limit, 0.9 probes past it too
/// often (every refusal holds all requests for the wait the provider asks).
const DECREASE: f64 = 0.8;

/// The longest wait a provider's answer may hold its requests for.
pub const MAX_WAIT: Duration = Duration::from_secs(120);

/// The requests in flight to one model at one base URL, and how many may be.
pub struct Pace {
    /// The model and where it is served, for people.
    label: String,
    state: Mutex<State>,
    /// Wakes a request waiting for a place.
    freed: Notify,
}

#[derive(Debug)]
struct State {
    window: f64,
    ceiling: usize,
    in_flight: usize,
    /// Whether the window still doubles each round trip (it does until the first refusal).
    probing: bool,
    /// Whether the window was full since it last grew a place (it grows only as far as it
    /// is used: a chain of single requests leaves it where it is).
    filled: bool,
    /// Counts the cuts: a refusal of a request sent before the last cut does not cut again.
    epoch: u64,
    /// The smallest window after a cut, once there was one.
    least: Option<usize>,
    /// No request goes before this (a wait the provider asked for).
    hold: Option<Instant>,
    /// Requests sent, and how many of them the provider refused.
    sent: u64,
    refused: u64,
}

impl State {
    fn limit(&self) -> usize {
        (self.window.floor() as usize).clamp(1, self.ceiling.max(1))
    }
}

/// A place among the requests in flight to a provider, held while one attempt is out. Say
/// how it went with [`Permit::answered`] or [`Permit::refused`]; a permit dropped otherwise
/// (a failure, a cancelled request) leaves the window as it is.
pub struct Permit {
    pace: Arc<Pace>,
    epoch: u64,
    settled: bool,
}

/// What a provider's answer says about its limits.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProviderLimits {
    /// How long it asked to wait before the next request (`retry-after-ms`, `retry-after`).
    pub retry_after: Option<Duration>,
    /// How long until something it counts (requests, tokens) is available again, when its
    /// rate-limit headers say none is left.
    pub exhausted: Option<Duration>,
    /// Requests it has left in its current window (`x-ratelimit-remaining-requests`,
    /// `anthropic-ratelimit-requests-remaining`).
    pub remaining_requests: Option<u64>,
}

impl ProviderLimits {
    /// What `headers` say, `now` being the time they came (for Anthropic's reset times).
    pub fn from_headers(headers: &HeaderMap, now: chrono::DateTime<chrono::Utc>) -> ProviderLimits {
        let get = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        let number = |name: &str| get(name).and_then(|v| v.parse::<u64>().ok());
        let retry_after = get("retry-after-ms")
            .and_then(|v| v.parse::<f64>().ok())
            .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok())
            .or_else(|| get("retry-after").and_then(|v| retry_after(v, now)));
        // Each family the providers count: OpenAI's `x-ratelimit-{limit,remaining,reset}-X`
        // (the reset a duration, `1s`, `6m0s`, `20ms`) and Anthropic's
        // `anthropic-ratelimit-X-{limit,remaining,reset}` (the reset an RFC 3339 time). The
        // reset is when the whole allowance is back; for requests, one is back after the
        // reset over the number used.
        let mut exhausted: Option<Duration> = None;
        let mut remaining_requests = None;
        for family in ["requests", "tokens", "input-tokens", "output-tokens"] {
            let openai = |part: &str| format!("x-ratelimit-{part}-{family}");
            let anthropic = |part: &str| format!("anthropic-ratelimit-{family}-{part}");
            let remaining =
                number(&openai("remaining")).or_else(|| number(&anthropic("remaining")));
            let limit = number(&openai("limit")).or_else(|| number(&anthropic("limit")));
            let reset = get(&openai("reset"))
                .and_then(go_duration)
                .or_else(|| get(&anthropic("reset")).and_then(|v| until(v, now)));
            if family == "requests" {
                remaining_requests = remaining;
            }
            let (Some(0), Some(reset)) = (remaining, reset) else {
                continue;
            };
            let wait = match (family, limit) {
                ("requests", Some(limit)) if limit > 0 => {
                    reset / limit.min(u64::from(u32::MAX)) as u32
                }
                _ => reset,
            };
            exhausted = exhausted.max(Some(wait));
        }
        ProviderLimits {
            retry_after: retry_after.map(|d| d.min(MAX_WAIT)),
            exhausted: exhausted.map(|d| d.min(MAX_WAIT)),
            remaining_requests,
        }
    }

    /// The wait before the next request: the one asked for, else until what ran out is back.
    pub fn wait(&self) -> Option<Duration> {
        self.retry_after.or(self.exhausted)
    }
}

/// A `retry-after` value: seconds, or an HTTP date.
fn retry_after(v: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    if let Ok(s) = v.parse::<f64>() {
        return Duration::try_from_secs_f64(s).ok();
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    Some(
        (at.with_timezone(&chrono::Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

/// The time until an RFC 3339 time (zero once it passed).
fn until(v: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let at = chrono::DateTime::parse_from_rfc3339(v).ok()?;
    Some(
        (at.with_timezone(&chrono::Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

/// A duration as OpenAI writes it: numbers with units `h`, `m`, `s`, `ms`, one after another
/// (`6m0s`, `1.5s`, `20ms`).
fn go_duration(v: &str) -> Option<Duration> {
    let mut total = 0.0;
    let mut rest = v;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        total += n * match &rest[..unit] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit..];
    }
    Duration::try_from_secs_f64(total).ok()
}

/// Every provider's pace, by base URL and model.
type Registry = Mutex<HashMap<(String, String), Arc<Pace>>>;

fn registry() -> &'static Registry {
    static PACES: OnceLock<Registry> = OnceLock::new();
    PACES.get_or_init(Default::default)
}

/// The pace of `model` at `base_url`, made on first use; its ceiling becomes `ceiling`.
pub fn pace_for(base_url: &str, model: &str, ceiling: usize) -> Arc<Pace> {
    let mut paces = registry().lock().unwrap_or_else(|e| e.into_inner());
    let pace = paces
        .entry((base_url.to_string(), model.to_string()))
        .or_insert_with(|| Arc::new(Pace::new(format!("{model} at {base_url}"), ceiling)))
        .clone();
    pace.set_ceiling(ceiling);
    pace
}

/// What one provider's window did, for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The model and its base URL.
    pub label: String,
    /// The window now.
    pub window: usize,
    /// The smallest it was after a cut.
    pub least: usize,
    /// Requests sent, and how many were refused.
    pub sent: u64,
    /// Of them, refused.
    pub refused: u64,
}

/// The windows that ever shrank (a provider refused requests), by label.
pub fn shrunk() -> Vec<Report> {
    let paces = registry().lock().unwrap_or_else(|e| e.into_inner());
    let mut out: Vec<Report> = paces.values().filter_map(|p| p.report()).collect();
    out.sort_by(|a, b| a.label.cmp(&b.label));
    out
}

impl Pace {
    /// A window for `label`, at most `ceiling`.
    pub fn new(label: String, ceiling: usize) -> Pace {
        Pace {
            label,
            state: Mutex::new(State {
                window: INITIAL_WINDOW.min(ceiling.max(1)) as f64,
                ceiling: ceiling.max(1),
                in_flight: 0,
                probing: true,
                filled: false,
                epoch: 0,
                least: None,
                hold: None,
                sent: 0,
                refused: 0,
            }),
            freed: Notify::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_ceiling(&self, ceiling: usize) {
        let mut s = self.state();
        s.ceiling = ceiling.max(1);
        s.window = s.window.min(s.ceiling as f64);
    }

    /// The window now.
    pub fn window(&self) -> usize {
        self.state().limit()
    }

    /// The window and counts, when it ever shrank.
    pub fn report(&self) -> Option<Report> {
        let s = self.state();
        Some(Report {
            label: self.label.clone(),
            window: s.limit(),
            least: s.least?,
            sent: s.sent,
            refused: s.refused,
        })
    }

    /// A place among the requests in flight, once the window has one and no wait the
    /// provider asked for holds it.
    pub async fn acquire(self: &Arc<Self>) -> Permit {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let hold = {
                let mut s = self.state();
                match s.hold {
                    Some(t) if t > Instant::now() => Some(t),
                    _ if s.in_flight < s.limit() => {
                        s.hold = None;
                        s.in_flight += 1;
                        s.sent += 1;
                        let epoch = s.epoch;
                        let more = s.in_flight < s.limit();
                        s.filled |= !more;
                        drop(s);
                        if more {
                            // Pass the word on: another waiting request may go too.
                            self.freed.notify_one();
                        }
                        return Permit {
                            pace: self.clone(),
                            epoch,
                            settled: false,
                        };
                    }
                    _ => None,
                }
            };
            match hold {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => freed.await,
            }
        }
    }

    /// Holds every request until `wait` has passed.
    fn hold(s: &mut State, wait: Option<Duration>) {
        if let Some(w) = wait.filter(|w| !w.is_zero()) {
            let until = Instant::now() + w.min(MAX_WAIT);
            s.hold = Some(s.hold.map_or(until, |h| h.max(until)));
        }
    }
}

impl Permit {
    /// The provider answered: the window grows (when it was full, so that it grows only
    /// as far as it is used, and while the provider has requests left); a wait its headers
    /// ask for holds the next requests.
    pub fn answered(mut self, limits: &ProviderLimits) {
        self.settled = true;
        let mut s = self.pace.state();
        let scarce = limits
            .remaining_requests
            .is_some_and(|r| r < s.in_flight as u64);
        if s.filled && !scarce {
            let before = s.limit();
            let step = if s.probing { 1.0 } else { 1.0 / s.window };
            s.window = (s.window + step).min(s.ceiling as f64);
            s.filled = s.limit() == before;
        }
        Pace::hold(&mut s, limits.wait());
        s.in_flight -= 1;
        drop(s);
        self.pace.freed.notify_one();
    }

    /// The provider refused the request (it is over its limits or overloaded): the window
    /// shrinks, once for all the requests sent before the cut, and every request waits what
    /// the provider asked.
    pub fn refused(mut self, limits: &ProviderLimits) {
        self.settled = true;
        let mut s = self.pace.state();
        s.refused += 1;
        if self.epoch == s.epoch {
            s.epoch += 1;
            s.probing = false;
            s.window = (s.window * DECREASE).max(1.0);
            let now = s.limit();
            s.least = Some(s.least.map_or(now, |l| l.min(now)));
        }
        Pace::hold(&mut s, limits.wait());
        s.in_flight -= 1;
        drop(s);
        self.pace.freed.notify_one();
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.settled {
            self.pace.state().in_flight -= 1;
            self.pace.freed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderName, HeaderValue};

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        h
    }

    fn now() -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339("2025-05-26T05:00:04Z")
            .expect("time")
            .with_timezone(&chrono::Utc)
    }

    #[test]
    fn waits_are_read_from_every_header_the_providers_send() {
        let ms = |n| Some(Duration::from_millis(n));
        let l = ProviderLimits::from_headers(
            &headers(&[("retry-after-ms", "250"), ("retry-after", "3")]),
            now(),
        );
        assert_eq!(l.retry_after, ms(250), "milliseconds first");
        let l = ProviderLimits::from_headers(&headers(&[("retry-after", "2")]), now());
        assert_eq!(l.wait(), ms(2000));
        let l = ProviderLimits::from_headers(
            &headers(&[("retry-after", "Mon, 26 May 2025 05:00:07 GMT")]),
            now(),
        );
        assert_eq!(l.wait(), ms(3000), "an HTTP date");
        // OpenAI: one request is back after the reset over the limit.
        let l = ProviderLimits::from_headers(
            &headers(&[
                ("x-ratelimit-limit-requests", "60"),
                ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", "1m0s"),
                ("x-ratelimit-remaining-tokens", "150"),
                ("x-ratelimit-reset-tokens", "20ms"),
            ]),
            now(),
        );
        assert_eq!(l.wait(), ms(1000));
        assert_eq!(l.remaining_requests, Some(0));
        // Anthropic: tokens run out until an RFC 3339 time.
        let l = ProviderLimits::from_headers(
            &headers(&[
                ("anthropic-ratelimit-requests-remaining", "7"),
                ("anthropic-ratelimit-requests-reset", "2025-05-26T05:00:05Z"),
                ("anthropic-ratelimit-input-tokens-remaining", "0"),
                (
                    "anthropic-ratelimit-input-tokens-reset",
                    "2025-05-26T05:00:06.5Z",
                ),
            ]),
            now(),
        );
        assert_eq!(l.wait(), ms(2500));
        assert_eq!(l.remaining_requests, Some(7));
        // Nothing said, or nonsense: no wait.
        let l = ProviderLimits::from_headers(
            &headers(&[
                ("retry-after", "soon"),
                ("x-ratelimit-reset-requests", "6x"),
            ]),
            now(),
        );
        assert_eq!(l, ProviderLimits::default());
        assert_eq!(go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(go_duration("1.5s"), ms(1500));
        assert_eq!(go_duration(""), None);
        let far = ProviderLimits::from_headers(&headers(&[("retry-after", "86400")]), now());
        assert_eq!(far.wait(), Some(MAX_WAIT), "capped");
    }

    #[tokio::test]
    async fn the_window_is_a_limit_shrinks_once_per_refused_round_and_grows_back() {
        let pace = Arc::new(Pace::new("m at u".into(), 10));
        assert_eq!(pace.window(), 10, "under the ceiling");
        let mut held = Vec::new();
        for _ in 0..10 {
            held.push(pace.acquire().await);
        }
        let blocked = tokio::time::timeout(Duration::from_millis(20), pace.acquire()).await;
        assert!(blocked.is_err(), "no eleventh place");
        assert!(pace.report().is_none(), "never shrank");
        // Three of the round refused: one cut.
        for p in held.drain(..3) {
            p.refused(&ProviderLimits::default());
        }
        assert_eq!(pace.window(), 8);
        let r = pace.report().expect("shrank");
        assert_eq!((r.window, r.least, r.refused), (8, 8, 3));
        // 7 still out, window 8: one more may go.
        held.push(pace.acquire().await);
        let blocked = tokio::time::timeout(Duration::from_millis(20), pace.acquire()).await;
        assert!(blocked.is_err());
        // A request sent after the cut, refused: a second cut.
        held.pop()
            .expect("the new one")
            .refused(&ProviderLimits::default());
        assert_eq!(pace.window(), 6);
        // Successes of a full window grow it by about one per window.
        for p in held.drain(..) {
            p.answered(&ProviderLimits::default());
        }
        for _ in 0..6 {
            let mut round = Vec::new();
            for _ in 0..pace.window() {
                round.push(pace.acquire().await);
            }
            for p in round {
                p.answered(&ProviderLimits::default());
            }
        }
        assert!(
            pace.window() >= 10,
            "grew back to the ceiling: {}",
            pace.window()
        );
        assert_eq!(pace.report().expect("shrank").least, 6);
    }

    #[tokio::test]
    async fn a_wait_asked_for_holds_every_request() {
        let pace = Arc::new(Pace::new("m at u".into(), 4));
        let p = pace.acquire().await;
        p.refused(&ProviderLimits {
            retry_after: Some(Duration::from_millis(80)),
            ..ProviderLimits::default()
        });
        let started = Instant::now();
        let _q = pace.acquire().await;
        assert!(
            started.elapsed() >= Duration::from_millis(70),
            "{:?}",
            started.elapsed()
        );
        // Requests left under the requests in flight: the window holds.
        let pace = Arc::new(Pace::new("m at u".into(), 2));
        let (a, b) = (pace.acquire().await, pace.acquire().await);
        a.answered(&ProviderLimits {
            remaining_requests: Some(0),
            ..ProviderLimits::default()
        });
        assert_eq!(pace.window(), 2);
        b.answered(&ProviderLimits::default());
    }

    #[tokio::test]
    async fn a_dropped_permit_frees_its_place() {
        let pace = Arc::new(Pace::new("m at u".into(), 1));
        let p = pace.acquire().await;
        let waiting = tokio::spawn({
            let pace = pace.clone();
            async move { pace.acquire().await.answered(&ProviderLimits::default()) }
        });
        drop(p);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiting request went")
            .expect("joined");
    }
}
