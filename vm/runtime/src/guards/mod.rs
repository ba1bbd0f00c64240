//! The small-model policy: every guard the VM keeps against what small models do wrong
//! when they answer, call tools or loop, in one place. Each guard is a pure function or a
//! small watcher over what the model wrote; the chat drivers and the agent loop call them
//! at the points below, in this order, and nothing else in the crate second-guesses a
//! model. What each does was measured on the acting suite (`vm/tests/real/acting`, see
//! docs/models.md); a guard the suite shows is no longer needed goes.
//!
//! While an answer streams (the chat drivers):
//! 1. [`runaway`]: the answer's end repeats one span again and again. The driver hangs up
//!    ([`Stop::Repeating`](prose_machine::protocol::Stop::Repeating)); the loop asks once for
//!    the answer again, briefly, and fails the session if it repeats again.
//! 2. [`astray`]: offered tools natively, the model writes their declarations back or opens a
//!    call of a tool it made up. The driver hangs up
//!    ([`Stop::Astray`](prose_machine::protocol::Stop::Astray)), and the loop reads it as
//!    confusion (below).
//!
//! On each answer without native calls, in a session offered tools natively (a structured
//! session's answer is one step under a schema, so none of this can happen there):
//! 3. [`text_calls::confusion`]: declarations written back, a made-up tool: the conversation
//!    starts again without tools, asking for a plain answer with what was found so far.
//! 4. [`text_calls::parse`]: calls of offered tools written as text are taken as the calls
//!    they mean, and their results go back as text ending with the task.
//!
//! On an answer that would end the session:
//! 5. [`promised`]: a file the task asks to write is missing: the model is told which, once.
//!
//! After each turn's calls:
//! 6. [`stuck`]: the same call again with nothing changed, a made-up tool twice, or every
//!    call failing three turns in a row. In a structured session with tools that act, the
//!    first time [`narrowing`] withdraws the tools that only look; otherwise (and the second
//!    time) the conversation starts again without tools, asking for a plain answer.
//!
//! In the tools themselves (`prose_agent::checked`): a file that exists and is not empty
//! is overwritten or edited only after the session has read it, so that a model cannot
//! write what it guesses a file holds.

pub mod astray;
pub mod narrowing;
pub mod promised;
pub mod runaway;
pub mod stuck;
pub mod text_calls;
