//! Drivers answer the VM's requests. A driver has one async entry point per request kind;
//! a driver that can answer without waiting (the mock at zero latency) also offers
//! [`Driver::answer_now`], which the runner uses to skip task scheduling.

pub mod chat;
pub mod command;
pub mod http;
pub mod mock;
pub mod render;
pub mod stdio;

use crate::request::{Request, RequestKind, SessionRequest};
use crate::value::Value;
use bytecode_spec::Shape;
use std::future::Future;

/// Tokens a provider reports for one exchange.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens read.
    pub input_tokens: u64,
    /// Tokens written.
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// A session's answer, with a persistent agent's updated memory when the driver has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionAnswer {
    /// The answer text.
    pub text: String,
    /// The agent's memory after the session (persistent agents only).
    pub memory: Option<String>,
}

impl From<String> for SessionAnswer {
    fn from(text: String) -> SessionAnswer {
        SessionAnswer { text, memory: None }
    }
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq)]
pub struct DriverError(pub String);

/// The result of one request.
pub type Answer<T> = Result<T, DriverError>;

/// Something that answers requests. Each entry point receives the whole request (its id,
/// site and the kind-specific fields); a failure is the request's failure (and the runner
/// applies the session's retry policy).
pub trait Driver: Send + Sync + 'static {
    /// A short name for traces.
    fn name(&self) -> &str;

    /// Runs a session; the answer is its text, and for a persistent agent possibly its
    /// updated memory.
    fn session(
        &self,
        req: &Request,
        session: &SessionRequest,
    ) -> impl Future<Output = Answer<SessionAnswer>> + Send;

    /// Judges a discretion condition.
    fn evaluate(&self, req: &Request, condition: &str)
        -> impl Future<Output = Answer<bool>> + Send;

    /// Picks one of `options`; returns its 0-based index.
    fn choose(
        &self,
        req: &Request,
        options: &[String],
    ) -> impl Future<Output = Answer<usize>> + Send;

    /// Provides a mid-program input.
    fn input(&self, req: &Request, name: &str) -> impl Future<Output = Answer<Value>> + Send;

    /// Converts text to `shape`.
    fn convert(
        &self,
        req: &Request,
        text: &str,
        shape: Shape,
    ) -> impl Future<Output = Answer<Value>> + Send;

    /// Sees an answer replayed from the journal of an interrupted run (a stateful driver
    /// advances as if it had given it). The default does nothing.
    fn observe(&self, _req: &Request, _reply: &crate::request::Reply) {}

    /// Whether the driver has no side effects, so journal syncs may be batched (the mock).
    fn side_effect_free(&self) -> bool {
        false
    }

    /// The tokens spent on request `id` (over all its exchanges), when the provider reports
    /// them; asked once, after the request is answered. The default knows of none.
    fn take_usage(&self, _id: &str) -> Option<Usage> {
        None
    }

    /// Answers at once if this driver never waits (used to skip scheduling).
    fn answer_now(&self, _req: &Request) -> Option<crate::request::Reply> {
        None
    }
}

/// Serves `req` with `driver`, once (retries are the runner's business); returns the reply
/// and, for a session whose provider reports it, the tokens used.
pub async fn serve<D: Driver>(driver: &D, req: &Request) -> (crate::request::Reply, Option<Usage>) {
    use crate::request::Reply;
    let answer = match &req.kind {
        RequestKind::Session(s) => driver.session(req, s).await.map(|a| match a.memory {
            Some(memory) => Reply::Remembered {
                text: a.text,
                memory,
            },
            None => Reply::Text(a.text),
        }),
        RequestKind::Evaluate { condition, .. } => {
            driver.evaluate(req, condition).await.map(Reply::Bool)
        }
        RequestKind::Choose { options, .. } => driver.choose(req, options).await.map(Reply::Choice),
        RequestKind::Input { name, .. } => driver.input(req, name).await.map(Reply::Value),
        RequestKind::Convert { text, shape } => {
            driver.convert(req, text, *shape).await.map(Reply::Value)
        }
    };
    let usage = driver.take_usage(&req.id);
    (answer.unwrap_or_else(|e| Reply::Failed(e.0)), usage)
}
