//! Token and cost budgets (`--max-tokens`, `--max-cost`): hard limits that are never
//! overshot. Before a request goes to a driver, its worst case (its prompt and the most its
//! reply may use, priced) is reserved against what is left; if it might not fit, nothing is
//! sent and the run pauses, resumable with a larger budget. When the reply comes, what it
//! really used replaces the reservation.

use prose_machine::protocol::Usage;
use std::sync::{Arc, Mutex};

/// The failure given to a request the budget kept from being sent: the run is pausing, and
/// the request is asked again when it resumes with a larger budget.
pub(crate) const PAUSED: &str = "paused at the budget";

/// A run's budget and what it has used. Cheap to clone (clones share the account).
#[derive(Clone, Debug, Default)]
pub struct Budget {
    inner: Arc<Mutex<Account>>,
}

#[derive(Debug, Default)]
struct Account {
    max_tokens: Option<u64>,
    max_cost: Option<f64>,
    spent: Usage,
    reserved: Usage,
    /// Why the run must pause, once a request did not fit.
    exceeded: Option<String>,
}

/// Room taken for a request in flight; given back (and what was used counted) when it is
/// settled, given back alone if dropped (the request was withdrawn).
#[derive(Debug)]
pub struct Reservation {
    budget: Budget,
    amount: Usage,
}

impl Budget {
    /// A budget of at most `max_tokens` tokens and `max_cost` dollars (none: unlimited).
    pub fn new(max_tokens: Option<u64>, max_cost: Option<f64>) -> Budget {
        Budget {
            inner: Arc::new(Mutex::new(Account {
                max_tokens,
                max_cost,
                ..Account::default()
            })),
        }
    }

    fn account(&self) -> std::sync::MutexGuard<'_, Account> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts `used` (replies replayed from the journal, or settled).
    pub fn spend(&self, used: Usage) {
        self.account().spent += used;
    }

    /// What the run has used so far.
    pub fn spent(&self) -> Usage {
        self.account().spent
    }

    /// Why the run must pause, if a request did not fit.
    pub fn exceeded(&self) -> Option<String> {
        self.account().exceeded.clone()
    }

    /// Takes room for a request whose worst case is `worst`, or says why it might not fit
    /// (and remembers it: the run must pause).
    pub fn reserve(&self, worst: Usage) -> Result<Reservation, String> {
        let mut a = self.account();
        let committed = {
            let mut c = a.spent;
            c += a.reserved;
            c
        };
        let mut after = committed;
        after += worst;
        let why = if a.max_tokens.is_some_and(|max| after.tokens() > max) {
            Some(format!(
                "the next request may use up to {} tokens, and {} of the {} allowed are used or promised",
                worst.tokens(),
                committed.tokens(),
                a.max_tokens.unwrap_or_default()
            ))
        } else if a
            .max_cost
            .is_some_and(|max| after.cost.unwrap_or(0.0) > max + 1e-12)
        {
            Some(format!(
                "the next request may cost up to ${:.4}, and ${:.4} of the ${:.4} allowed is spent or promised",
                worst.cost.unwrap_or(0.0),
                committed.cost.unwrap_or(0.0),
                a.max_cost.unwrap_or_default()
            ))
        } else {
            None
        };
        if let Some(why) = why {
            a.exceeded.get_or_insert(why.clone());
            return Err(why);
        }
        a.reserved += worst;
        Ok(Reservation {
            budget: self.clone(),
            amount: worst,
        })
    }
}

impl Reservation {
    /// The request answered having used `used` (when its driver says).
    pub fn settle(self, used: Option<Usage>) {
        if let Some(u) = used {
            self.budget.spend(u);
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut a = self.budget.account();
        let (r, x) = (&mut a.reserved, &self.amount);
        r.input_tokens -= x.input_tokens;
        r.output_tokens -= x.output_tokens;
        r.cache_read_tokens -= x.cache_read_tokens;
        r.cache_write_tokens -= x.cache_write_tokens;
        a.reserved.cost = match (a.reserved.cost, self.amount.cost) {
            (Some(r), Some(c)) => Some(r - c),
            (r, _) => r,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(tokens: u64, cost: f64) -> Usage {
        Usage {
            cost: Some(cost),
            ..Usage::plain(tokens, 0)
        }
    }

    #[test]
    fn a_request_is_sent_only_if_its_worst_case_fits_what_is_left() {
        let b = Budget::new(Some(1000), Some(1.0));
        let r1 = b.reserve(usage(600, 0.5)).expect("fits");
        // Promised room counts: a second request of the same size does not fit.
        assert!(b.reserve(usage(600, 0.1)).is_err());
        assert!(b.exceeded().is_some());
        // Settled with less than feared: the rest is free again.
        r1.settle(Some(usage(100, 0.05)));
        assert_eq!(b.spent().tokens(), 100);
        let r2 = b.reserve(usage(800, 0.9)).expect("fits now");
        // A withdrawn request gives its room back.
        drop(r2);
        assert!(b.reserve(usage(890, 0.9)).is_ok());
        assert!(b.reserve(usage(10, 0.96)).is_err(), "the cost is over");
    }

    #[test]
    fn cached_input_counts_as_tokens_and_its_room_is_given_back() {
        let b = Budget::new(Some(1000), None);
        let cached = Usage {
            cache_write_tokens: 700,
            ..usage(100, 0.0)
        };
        let r = b.reserve(cached).expect("fits");
        assert!(b.reserve(usage(300, 0.0)).is_err(), "800 are promised");
        drop(r);
        assert!(b.reserve(usage(900, 0.0)).is_ok());
    }

    #[test]
    fn no_limits_means_everything_fits() {
        let b = Budget::default();
        assert!(b.reserve(usage(u64::MAX / 4, 1e9)).is_ok());
    }
}
