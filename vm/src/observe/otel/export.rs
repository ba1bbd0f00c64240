//! An exporter that remembers why exports failed: the SDK's batch processor drops a failed
//! batch silently, and a run whose spans never reached the collector should say so.

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The failures an exporter met, shared with whoever reports them.
#[derive(Clone, Debug, Default)]
pub struct Failures(Arc<Mutex<Vec<String>>>);

impl Failures {
    /// The first failure, if any.
    pub fn first(&self) -> Option<String> {
        self.0.lock().ok()?.first().cloned()
    }

    fn push(&self, why: String) {
        if let Ok(mut f) = self.0.lock() {
            f.push(why);
        }
    }
}

/// `inner`, with its export failures kept.
#[derive(Debug)]
pub struct Reporting<E> {
    inner: E,
    failures: Failures,
}

impl<E> Reporting<E> {
    /// `inner` reporting into the returned [`Failures`].
    pub fn new(inner: E) -> (Reporting<E>, Failures) {
        let failures = Failures::default();
        (
            Reporting {
                inner,
                failures: failures.clone(),
            },
            failures,
        )
    }
}

impl<E: SpanExporter> SpanExporter for Reporting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        if let Err(e) = &result {
            self.failures.push(format!("{spans} span(s) not sent: {e}"));
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
