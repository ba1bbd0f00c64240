//! Watching a run from outside the machine: the [`Observer`] the runner feeds with trace
//! events, and the ways of writing times, durations and counts that observers share. The
//! observers themselves (live progress, the summary, JSON lines, OpenTelemetry) are
//! `prosevm`'s, which picks among them.

use prose_machine::snapshot::Snapshot;
use prose_machine::trace::Event;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Who watches a run: sees every trace event and, when it asks, a [`Snapshot`] of where
/// the machine is. Any `FnMut(&Event)` closure is an observer that never asks.
pub trait Observer {
    /// Sees one trace event.
    fn event(&mut self, event: &Event);
    /// Whether a snapshot is wanted now; `idle` is true when the runner is about to wait
    /// for the driver (so the machine will not move until an answer comes).
    fn wants_snapshot(&mut self, idle: bool) -> bool {
        let _ = idle;
        false
    }
    /// Receives the snapshot asked for.
    fn snapshot(&mut self, snapshot: &Snapshot) {
        let _ = snapshot;
    }
}

impl<F: FnMut(&Event)> Observer for F {
    fn event(&mut self, event: &Event) {
        self(event)
    }
}

/// `t` as an RFC 3339 UTC timestamp with milliseconds (`2025-11-22T08:14:56.123Z`).
pub fn rfc3339(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (_, _, iso) = crate::clock::timestamp(since.as_secs());
    let millis = since.subsec_millis();
    format!("{}.{millis:03}Z", iso.trim_end_matches('Z'))
}

/// A duration for people: `850ms`, `12.3s`, `4m05s`, `2h07m`.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    let s = d.as_secs();
    if ms < 1000 {
        format!("{ms}ms")
    } else if s < 60 {
        format!("{:.1}s", d.as_secs_f64())
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    }
}

/// A count with thousands separated by commas (`12,345`).
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What one session may take, as the progress display and the summary compare it with
/// what sessions take.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SessionLimits {
    /// Model turns per session.
    pub turns: u32,
    /// Wall-clock time per session, if limited.
    pub time: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_carry_milliseconds() {
        let t = UNIX_EPOCH + Duration::from_millis(1_763_799_296_042);
        assert_eq!(rfc3339(t), "2025-11-22T08:14:56.042Z");
    }

    #[test]
    fn durations_and_counts_read_easily() {
        assert_eq!(human_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(human_duration(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(human_duration(Duration::from_secs(245)), "4m05s");
        assert_eq!(human_duration(Duration::from_secs(7620)), "2h07m");
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }
}
