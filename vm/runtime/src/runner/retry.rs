//! A session's `retry:` and `backoff:`, counted once for both places that retry: the runner
//! (a session a driver answers whole) and the agent loop (a session the VM runs turn by
//! turn). Each failure either earns another attempt, with its retry event and the delay
//! before it, or is the last.

use prose_machine::protocol::RequestId;
use prose_machine::trace::Event;
use std::time::Duration;

use bytecode_spec::Backoff;

/// The delay before attempt `attempt` (2 for the first retry).
fn backoff_delay(policy: Backoff, unit: Duration, attempt: u32) -> Duration {
    let n = attempt.saturating_sub(1);
    match policy {
        Backoff::None => Duration::ZERO,
        Backoff::Linear => unit * n,
        Backoff::Exponential => unit * 2u32.saturating_pow(n.saturating_sub(1)),
    }
}

/// The attempts of one request as they go.
pub(super) struct Attempts {
    /// Retries allowed after the first attempt.
    retry: u32,
    policy: Backoff,
    /// The unit of the backoff's delays.
    unit: Duration,
    /// The attempt being made (1 for the first).
    attempt: u32,
}

/// Another attempt after a failure: the event that says so, and how long to wait first.
pub(super) struct Again {
    /// The `retry` trace event.
    pub event: Event,
    /// The backoff before the attempt.
    pub delay: Duration,
}

impl Attempts {
    /// The first of at most `1 + retry` attempts, spaced as `policy` says in units of `unit`.
    pub(super) fn new(retry: u32, policy: Backoff, unit: Duration) -> Attempts {
        Attempts {
            retry,
            policy,
            unit,
            attempt: 1,
        }
    }

    /// After the attempt at request `id` failed with `error`: another one, or none when the
    /// retries are used up.
    pub(super) fn after_failure(&mut self, id: &RequestId, error: String) -> Option<Again> {
        if self.attempt > self.retry {
            return None;
        }
        self.attempt += 1;
        Some(Again {
            event: Event::Retry {
                id: id.clone(),
                attempt: self.attempt,
                error,
            },
            delay: backoff_delay(self.policy, self.unit, self.attempt),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prose_machine::protocol::Lineage;

    #[test]
    fn each_failure_earns_a_retry_until_they_are_used_up_with_the_backoffs_delay() {
        let id = RequestId::new(Lineage::root(), 3);
        let unit = Duration::from_millis(10);
        let delays = |policy| {
            let mut a = Attempts::new(3, policy, unit);
            let mut seen = Vec::new();
            while let Some(again) = a.after_failure(&id, "busy".into()) {
                let Event::Retry { attempt, .. } = again.event else {
                    panic!("a retry event");
                };
                seen.push((attempt, again.delay.as_millis()));
            }
            seen
        };
        assert_eq!(delays(Backoff::None), [(2, 0), (3, 0), (4, 0)]);
        assert_eq!(delays(Backoff::Linear), [(2, 10), (3, 20), (4, 30)]);
        assert_eq!(delays(Backoff::Exponential), [(2, 10), (3, 20), (4, 40)]);
        assert!(Attempts::new(0, Backoff::Linear, unit)
            .after_failure(&id, "busy".into())
            .is_none());
    }
}
