//! Drivers answer the VM's requests. A driver has one async entry point, [`Driver::answer`],
//! which matches on the request's [`Ask`](prose_machine::protocol::Ask) (so a new kind of request
//! is a compile error in every driver until it learns it); a driver that can answer without
//! waiting (the mock at zero latency) also offers [`Driver::answer_now`], which the runner
//! uses to skip task scheduling. A driver that streams tells a [`Live`] the answer as it
//! is written.

pub mod chat;
pub mod command;
pub mod http;
pub mod live;
pub mod mock;
pub mod pace;
pub mod prices;
pub mod render;
pub mod settings;
pub mod stdio;

pub use live::Live;

use prose_machine::protocol::{Answer, Failure, Kind, Reply, Request, Usage};
use std::future::Future;

/// What a driver made of one request: an answer or a failure, and the tokens it spent when
/// its provider reports them.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    /// The answer, or why there is none.
    pub outcome: Result<Answer, Failure>,
    /// Tokens spent over every exchange the answer took.
    pub usage: Option<Usage>,
}

impl Served {
    /// An answer with no usage reported.
    pub fn answer(answer: Answer) -> Served {
        Served {
            outcome: Ok(answer),
            usage: None,
        }
    }

    /// A failure with no usage reported.
    pub fn failed(why: impl Into<String>) -> Served {
        Served {
            outcome: Err(Failure(why.into())),
            usage: None,
        }
    }

    /// The reply to `req`. An answer of another kind than the request's is a failure.
    pub fn into_reply(self, req: &Request) -> Reply {
        let kind = req.kind();
        let outcome = match self.outcome {
            Ok(a) if a.kind() != kind => Err(Failure(format!(
                "the `{kind}` request got a `{}` answer",
                a.kind()
            ))),
            other => other,
        };
        Reply {
            id: req.id.clone(),
            kind,
            outcome,
            usage: self.usage,
        }
    }
}

impl From<Result<Answer, Failure>> for Served {
    fn from(outcome: Result<Answer, Failure>) -> Served {
        Served {
            outcome,
            usage: None,
        }
    }
}

/// The failure of a driver asked a kind of request it does not answer.
pub fn unanswerable(driver: &str, kind: Kind) -> Failure {
    Failure(format!(
        "the {driver} driver does not answer `{kind}` requests"
    ))
}

/// Something that answers requests.
pub trait Driver: Send + Sync + 'static {
    /// A short name for traces.
    fn name(&self) -> &str;

    /// Answers `req` once (retries are the runner's business); a failure is the request's
    /// failure, to which the session's retry policy applies. A driver that streams reports
    /// the answer to `live` as it is written.
    fn answer(&self, req: &Request, live: &Live) -> impl Future<Output = Served> + Send;

    /// Answers at once if this driver never waits (used to skip scheduling).
    fn answer_now(&self, _req: &Request) -> Option<Served> {
        None
    }

    /// Sees a reply replayed from the journal of an interrupted run (a stateful driver
    /// advances as if it had given it). The default does nothing.
    fn observe(&self, _req: &Request, _reply: &Reply) {}

    /// Whether the driver has no side effects, so journal syncs may be batched (the mock).
    fn side_effect_free(&self) -> bool {
        false
    }

    /// Checks, before a run starts, that the provider offers every model in `models` (as a
    /// session names it; `None` for the default): an error names what is missing. Drivers
    /// that cannot tell say nothing.
    fn check_models(
        &self,
        models: &[Option<String>],
    ) -> impl Future<Output = Result<(), String>> + Send {
        let _ = models;
        std::future::ready(Ok(()))
    }

    /// The most request `req` can use (tokens, and their cost when priced), for budgets; none
    /// when the driver cannot tell or spends nothing that is counted.
    fn worst_case(&self, _req: &Request) -> Option<Usage> {
        None
    }

    /// What a memo keys `req` by: everything the model request it makes sends that bears on
    /// the answer (the provider, the model, the system prompt, the conversation, the tools,
    /// the sampling), never a key or a header; none when the request is no model's or the
    /// driver's answers are not memoised. Only answers that come from the provider itself
    /// may be memoised: the chat drivers' over HTTP, never a replayed tape's or the mock's
    /// (the memo would hand them to runs that ask the real provider).
    fn memo_identity(&self, _req: &Request) -> Option<serde_json::Value> {
        None
    }

    /// Whether the driver's host answers the questions meant for a person (inputs,
    /// permission prompts); otherwise the terminal does, or no one.
    fn hosts_people(&self) -> bool {
        false
    }

    /// Whether the driver answers `turn` requests, so that the VM runs each session as an
    /// agent loop (model turns and tool calls) rather than asking for a whole session.
    fn runs_turns(&self) -> bool {
        false
    }

    /// Whether the driver asks for agent-loop turns structured: each turn one JSON object
    /// decoded under a schema, a call of one tool on offer or the answer, rather than with
    /// the tools offered natively ([`chat::dialect::openai::structured`]); the runner then shows the model
    /// its tools and the files it may read in the system prompt. Decided once.
    fn structured_turns(&self) -> impl Future<Output = bool> + Send {
        std::future::ready(false)
    }
}

/// Serves `req` with `driver`, once, reporting a streamed answer to `live`.
pub async fn serve<D: Driver>(driver: &D, req: &Request, live: &Live) -> Reply {
    driver.answer(req, live).await.into_reply(req)
}
