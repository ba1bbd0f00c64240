//! The async runner with the mock driver: retries with backoff, and concurrency.

use crate::harness::compile;
use prose_machine::protocol::{Ask, Request};
use prose_machine::trace::Event;
use prose_machine::value::Value;
use prose_machine::{Limits, Machine, RuntimeError};
use prose_runtime::driver::mock::{Mock, MockOptions, Rule};
use prose_runtime::driver::{Driver, Live, Served};
use prose_runtime::runner::{run, RunConfig};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A driver that records every attempt it serves, then lets the mock answer.
pub struct Recording {
    inner: Mock,
    /// The ids of every session attempt, in order.
    pub attempts: Mutex<Vec<String>>,
}

impl Recording {
    /// Wraps a mock with these options.
    pub fn new(opts: MockOptions) -> Recording {
        Recording {
            inner: Mock::new(opts),
            attempts: Mutex::new(Vec::new()),
        }
    }
}

impl Driver for Recording {
    fn name(&self) -> &str {
        "recording"
    }

    async fn answer(&self, req: &Request, live: &Live) -> Served {
        if let Ask::Session(_) = req.ask {
            self.attempts.lock().expect("lock").push(req.id.to_string());
        }
        self.inner.answer(req, live).await
    }
}

/// Rules from their JSON form (as `--mock-script` reads them).
pub fn rules(json: serde_json::Value) -> Vec<Rule> {
    serde_json::from_value(json).expect("valid rules")
}

/// Runs `src` under `driver` with a 1 ms backoff unit; returns the outcome and the events.
pub async fn run_with<D: Driver>(
    src: &str,
    driver: Arc<D>,
) -> (Result<Vec<(String, Value)>, RuntimeError>, Vec<Event>) {
    let machine = Machine::new(compile(src), &Default::default(), Limits::default())
        .expect("the machine starts");
    let cfg = RunConfig {
        backoff_unit: Duration::from_millis(1),
        ..RunConfig::default()
    };
    let mut events = Vec::new();
    let result = run(machine, driver, &cfg, |e| events.push(e.clone())).await;
    (result, events)
}

fn rollout(retry: u32) -> String {
    format!(
        r#"session "Prepare"
let r = session "Roll out"
  retry: {retry}
  backoff: exponential
output r = r
"#
    )
}

/// Fails the "Roll out" session twice, then lets it through.
fn flaky() -> MockOptions {
    MockOptions {
        script: rules(serde_json::json!([
            { "prompt": "Roll out", "fail": "the canary timed out", "times": 2 }
        ])),
        ..MockOptions::default()
    }
}

fn retries(events: &[Event]) -> Vec<(String, u32)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Retry { id, attempt, error } => {
                assert_eq!(error, "the canary timed out");
                Some((id.to_string(), *attempt))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_session_with_retries_succeeds_on_its_third_attempt() {
    let driver = Arc::new(Recording::new(flaky()));
    let start = std::time::Instant::now();
    let (result, events) = run_with(&rollout(3), driver.clone()).await;
    // Exponential backoff: 1 unit before the second attempt, 2 before the third.
    assert!(start.elapsed() >= Duration::from_millis(3));
    let outputs = result.expect("the run succeeds");
    assert_eq!(outputs, [("r".to_string(), Value::text("[mock] Roll out"))]);
    assert_eq!(
        *driver.attempts.lock().expect("lock"),
        ["0:0", "0:1", "0:1", "0:1"]
    );
    assert_eq!(
        retries(&events),
        [("0:1".to_string(), 2), ("0:1".to_string(), 3)]
    );
}

#[tokio::test]
async fn a_session_fails_when_its_retries_run_out() {
    let driver = Arc::new(Recording::new(flaky()));
    let (result, events) = run_with(&rollout(1), driver.clone()).await;
    let e = result.expect_err("the run fails");
    assert_eq!((e.message.as_str(), e.line), ("the canary timed out", 2));
    assert_eq!(
        *driver.attempts.lock().expect("lock"),
        ["0:0", "0:1", "0:1"]
    );
    assert_eq!(retries(&events), [("0:1".to_string(), 2)]);
}

/// The mock at zero latency answers without scheduling a task (`answer_now`); its first
/// failure must count as the first attempt all the same.
#[tokio::test]
async fn retries_count_the_same_when_the_mock_answers_at_once() {
    let (result, events) = run_with(&rollout(3), Arc::new(Mock::new(flaky()))).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        retries(&events),
        [("0:1".to_string(), 2), ("0:1".to_string(), 3)]
    );
    let (result, events) = run_with(&rollout(1), Arc::new(Mock::new(flaky()))).await;
    assert_eq!(
        result.expect_err("the run fails").message,
        "the canary timed out"
    );
    assert_eq!(retries(&events), [("0:1".to_string(), 2)]);
}
