//! The observers `prosevm` watches runs with, each fed trace events by the runner through
//! [`prose_runtime::observe::Observer`]: live progress on a terminal ([`progress`]), the
//! end-of-run summary ([`summary`]), stamped JSON lines ([`envelope`]) and OpenTelemetry
//! spans ([`otel`]). They see events as they happen, so they take times from the clock.

pub mod envelope;
pub mod otel;
pub mod progress;
pub mod summary;
