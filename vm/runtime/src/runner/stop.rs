//! Stopping a run on purpose (Ctrl-C, SIGTERM): the runner notices between steps, withdraws
//! what is in flight (drivers' processes are killed with their process groups), makes the
//! journal durable and ends the run as interrupted, resumable.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// A stop signal shared by whoever asks for the stop and the runner. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct StopSignal {
    asked: Arc<AtomicBool>,
    notify: Arc<Notify>,
}

impl StopSignal {
    /// Asks the run to stop.
    pub fn ask(&self) {
        self.asked.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether a stop was asked.
    pub fn asked(&self) -> bool {
        self.asked.load(Ordering::SeqCst)
    }

    /// Resolves once a stop is asked.
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.asked() {
                return;
            }
            notified.await;
        }
    }
}
