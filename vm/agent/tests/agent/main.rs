//! The agent library (`prose_agent`) through its public API: every built-in tool against a
//! scratch directory checked on disk, every way out of the sandbox refused, prompts, bash
//! process groups, web_fetch against a loopback server, skills lookup, and MCP servers (one
//! written with rmcp in this test, and a published one from npm).

mod support;

mod bash;
mod files;
mod mcp;
mod permissions;
mod skills;
mod web;

use std::path::Path;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use prose_agent::confine::{Choice, Kind};
use prose_agent::people::{Prompter, Unanswered};
use prose_agent::permissions::{Policy, Sandbox, UserAllow};
use prose_agent::tools::{ToolResult, Toolbox};
use prose_machine::protocol::{PermissionQuestion, PromptAnswer, ToolCall};
use serde_json::Value;

/// A `permissions:` block as the compiler hands it over.
pub fn rules(pairs: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
        .collect()
}

/// A sandbox on `dir` with the policy of `pairs` and the user's allowances.
pub fn sandbox(dir: &Path, pairs: &[(&str, &[&str])], user: UserAllow) -> Sandbox {
    Sandbox::builder(dir)
        .policy(Policy::from_rules(&rules(pairs)).expect("policy"))
        .user(user)
        .build()
        .expect("sandbox")
}

/// [`sandbox`], its commands confined by `kind` alone.
pub fn sandbox_in(dir: &Path, pairs: &[(&str, &[&str])], user: UserAllow, kind: Kind) -> Sandbox {
    Sandbox::builder(dir)
        .policy(Policy::from_rules(&rules(pairs)).expect("policy"))
        .user(user)
        .confine_with(Choice::Only(kind))
        .build()
        .expect("sandbox")
}

/// Runs tool `name` with `args` through the built-in toolbox.
pub async fn call(sandbox: &Sandbox, name: &str, args: Value) -> ToolResult {
    call_with(&Toolbox::builtin(), sandbox, name, args).await
}

/// Runs tool `name` with `args` through `toolbox`.
pub async fn call_with(
    toolbox: &Toolbox,
    sandbox: &Sandbox,
    name: &str,
    args: Value,
) -> ToolResult {
    let call = ToolCall {
        id: "call_1".into(),
        name: name.into(),
        arguments: args,
    };
    toolbox.call(&call, sandbox).await
}

/// The content of a successful call (fails the test on an error output).
pub fn ok(result: &ToolResult) -> &str {
    assert!(
        !result.output.is_error,
        "expected success, got: {}",
        result.output.content
    );
    &result.output.content
}

/// The content of a failed call (fails the test on a successful output).
pub fn err(result: &ToolResult) -> &str {
    assert!(
        result.output.is_error,
        "expected an error, got: {}",
        result.output.content
    );
    &result.output.content
}

/// How a [`Scripted`] prompter answers.
type Answer = Box<dyn Fn(&PermissionQuestion) -> Option<PromptAnswer> + Send + Sync>;

/// A prompter answering from a script, recording the questions it was asked.
pub struct Scripted {
    answer: Answer,
    /// Every question asked, in order.
    pub asked: Mutex<Vec<PermissionQuestion>>,
}

impl Scripted {
    /// A prompter giving `answer`'s answer to each question.
    pub fn new(
        answer: impl Fn(&PermissionQuestion) -> Option<PromptAnswer> + Send + Sync + 'static,
    ) -> Arc<Scripted> {
        Arc::new(Scripted {
            answer: Box::new(answer),
            asked: Mutex::new(Vec::new()),
        })
    }

    /// How many questions were asked.
    pub fn count(&self) -> usize {
        self.asked.lock().unwrap().len()
    }
}

impl Prompter for Scripted {
    fn ask<'a>(
        &'a self,
        question: &'a PermissionQuestion,
    ) -> BoxFuture<'a, Result<PromptAnswer, Unanswered>> {
        self.asked.lock().unwrap().push(question.clone());
        let answer = (self.answer)(question).ok_or(Unanswered::NoOne);
        Box::pin(async move { answer })
    }
}
