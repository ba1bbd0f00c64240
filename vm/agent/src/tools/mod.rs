//! Tools a session's model can call, behind one trait ([`Tool`]) and one registry
//! ([`Toolbox`]).
//!
//! The built-in tools, under these exact names and argument names:
//!
//! | tool | arguments | read-only |
//! |---|---|---|
//! | `read_file` | `path`, `offset?` (first line, 1-based), `limit?` (lines) | yes |
//! | `write_file` | `path`, `content` | no |
//! | `edit_file` | `path`, `old_string`, `new_string`, `replace_all?` | no |
//! | `list_files` | `pattern` (glob) | yes |
//! | `grep` | `pattern` (regex), `path?`, `glob?` | yes |
//! | `bash` | `command`, `timeout_s?` | no |
//! | `web_fetch` | `url` | yes |
//!
//! Their caps are the constants of each tool's module. Other tools (an MCP server's, later a
//! program offered as a skill) implement [`Tool`] and are added with [`Toolbox::add`].

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::confine::Invocation;
use super::permissions::{CheckedPath, Decision, Grant, Refusal, Sandbox};
use futures_util::future::BoxFuture;
use prose_machine::protocol::{ToolCall, ToolOutput, ToolSpec};

pub mod bash;
pub mod files;
pub mod html;
pub mod search;
pub mod web;

/// The outcome of [`Toolbox::call`]: the output for the model and the permission decisions
/// taken on the way, for the trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// What the model reads.
    pub output: ToolOutput,
    /// Every permission check the call made, in order.
    pub decisions: Vec<Decision>,
}

/// A tool. Implementations get their permissions only through the [`ToolContext`], which
/// checks every path, command and connection with the session's [`Sandbox`] and records the
/// decision.
pub trait Tool: Send + Sync {
    /// Its name.
    fn name(&self) -> &str;

    /// Its name, description and argument schema.
    fn spec(&self) -> ToolSpec;

    /// Whether calling it changes nothing, so a call interrupted by a crash may simply be
    /// made again. A tool is taken to change something unless it says otherwise.
    fn read_only(&self) -> bool {
        false
    }

    /// Runs it. Failures are outputs with `is_error: true`, never panics.
    fn call<'a>(&'a self, args: &'a Value, cx: &'a ToolContext<'a>) -> BoxFuture<'a, ToolOutput>;
}

/// What a running tool may use: the sandbox's checks, each recorded as a [`Decision`].
pub struct ToolContext<'a> {
    sandbox: &'a Sandbox,
    tool: &'a str,
    decisions: Mutex<Vec<Decision>>,
}

impl<'a> ToolContext<'a> {
    fn new(sandbox: &'a Sandbox, tool: &'a str) -> ToolContext<'a> {
        ToolContext {
            sandbox,
            tool,
            decisions: Mutex::new(Vec::new()),
        }
    }

    /// The session's sandbox (for checks that are not worth a trace record, such as each file
    /// a search walks past).
    pub fn sandbox(&self) -> &Sandbox {
        self.sandbox
    }

    fn record(&self, decision: Decision) {
        self.decisions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(decision);
    }

    fn record_path(
        &self,
        target: &str,
        action: super::permissions::Action,
        result: Result<CheckedPath, Refusal>,
    ) -> Result<CheckedPath, String> {
        self.decided(
            action,
            target,
            result.as_ref().map(|p| p.reason().to_string()),
        );
        result.map_err(|r| r.to_string())
    }

    fn record_grant(&self, result: Result<Grant, Refusal>) -> Result<(), String> {
        match result {
            Ok(_) => Ok(()),
            Err(r) => Err(r.to_string()),
        }
    }

    /// A path the tool may read (see [`Sandbox::check_read`]); the error is the refusal as
    /// the model should read it.
    pub fn read_path(&self, path: &str) -> Result<CheckedPath, String> {
        let result = self.sandbox.check_read(path);
        self.record_path(path, super::permissions::Action::Read, result)
    }

    /// A path the tool may write (see [`Sandbox::check_write`]).
    pub fn write_path(&self, path: &str) -> Result<CheckedPath, String> {
        let result = self.sandbox.check_write(path);
        self.record_path(path, super::permissions::Action::Write, result)
    }

    /// A directory (or file) the tool may search (see [`Sandbox::check_search`]).
    pub fn search_path(&self, path: &str) -> Result<CheckedPath, String> {
        let result = self.sandbox.check_search(path);
        self.record_path(path, super::permissions::Action::Read, result)
    }

    /// Whether `command` may run, and how (see [`Sandbox::check_bash`]).
    pub async fn bash(&self, command: &str) -> Result<Invocation, String> {
        let result = self.sandbox.check_bash(command).await;
        let grant = result
            .as_ref()
            .map(|(_, g)| g.clone())
            .map_err(Clone::clone);
        self.record_capability(super::permissions::Action::Bash, command, &grant);
        result.map(|(how, _)| how).map_err(|r| r.to_string())
    }

    /// Whether the network may be used to reach `target` (see [`Sandbox::check_network`]).
    pub async fn network(&self, target: &str) -> Result<(), String> {
        let result = self.sandbox.check_network(target).await;
        self.record_capability(super::permissions::Action::Network, target, &result);
        self.record_grant(result)
    }

    fn record_capability(
        &self,
        action: super::permissions::Action,
        target: &str,
        result: &Result<Grant, Refusal>,
    ) {
        self.decided(action, target, result.as_ref().map(|g| g.reason.clone()));
    }

    /// Records the decision on `target`: allowed for the reason given, or the refusal.
    fn decided(
        &self,
        action: super::permissions::Action,
        target: &str,
        result: Result<String, &Refusal>,
    ) {
        let (allowed, reason) = match result {
            Ok(reason) => (true, reason),
            Err(r) => (false, r.reason.clone()),
        };
        self.record(Decision {
            tool: self.tool.to_string(),
            action,
            target: target.to_string(),
            allowed,
            reason,
        });
    }

    fn into_decisions(self) -> Vec<Decision> {
        self.decisions
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// A tool name is already taken in the toolbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DuplicateTool(pub String);

impl fmt::Display for DuplicateTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a tool named `{}` is already in the toolbox", self.0)
    }
}

impl std::error::Error for DuplicateTool {}

/// The tools a session offers, by name, in the order added.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: Vec<Arc<dyn Tool>>,
}

impl fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| t.name()))
            .finish()
    }
}

impl Toolbox {
    /// An empty toolbox.
    pub fn new() -> Toolbox {
        Toolbox::default()
    }

    /// The seven built-in tools.
    pub fn builtin() -> Toolbox {
        let tools: Vec<Arc<dyn Tool>> = vec![
            Arc::new(files::ReadFile),
            Arc::new(files::WriteFile),
            Arc::new(files::EditFile),
            Arc::new(search::ListFiles),
            Arc::new(search::Grep),
            Arc::new(bash::Bash),
            Arc::new(web::WebFetch::new()),
        ];
        Toolbox { tools }
    }

    /// Whether it holds no tool.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Adds a tool; its name must be new.
    pub fn add(&mut self, tool: Arc<dyn Tool>) -> Result<(), DuplicateTool> {
        let name = tool.name();
        if self.get(name).is_some() {
            return Err(DuplicateTool(name.to_string()));
        }
        self.tools.push(tool);
        Ok(())
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// The specs to offer the model, in the order the tools were added.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    /// Whether a call of tool `name` may be repeated after a crash (false for unknown tools).
    pub fn read_only(&self, name: &str) -> bool {
        self.get(name).is_some_and(|t| t.read_only())
    }

    /// Runs `call` in `sandbox`: the only way to run a tool. An unknown tool, bad arguments, a
    /// refused permission, a failure, even a panicking tool, all come back as an output with
    /// `is_error: true`.
    pub async fn call(&self, call: &ToolCall, sandbox: &Sandbox) -> ToolResult {
        let Some(tool) = self.get(&call.name) else {
            let known: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
            return ToolResult {
                output: ToolOutput::error(format!(
                    "unknown tool `{}`; the tools are: {}. If none of them fits, answer the task directly in plain text.",
                    call.name,
                    known.join(", ")
                )),
                decisions: Vec::new(),
            };
        };
        let cx = ToolContext::new(sandbox, tool.name());
        let output = CatchUnwind(tool.call(&call.arguments, &cx))
            .await
            .unwrap_or_else(|_| {
                ToolOutput::error(format!(
                    "tool `{}` failed unexpectedly (it panicked); this is a bug in the tool",
                    call.name
                ))
            });
        ToolResult {
            output,
            decisions: cx.into_decisions(),
        }
    }
}

/// Turns a panic while polling the future into an `Err`.
struct CatchUnwind<'a, T>(BoxFuture<'a, T>);

impl<T> Future for CatchUnwind<'_, T> {
    type Output = Result<T, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        }
    }
}

/// Reads a tool's arguments into `T`, with an error the model can act on.
pub(crate) fn parse_args<T: DeserializeOwned>(tool: &str, args: &Value) -> Result<T, String> {
    let args = if args.is_null() {
        Value::Object(Default::default())
    } else {
        args.clone()
    };
    serde_json::from_value(args).map_err(|e| format!("invalid arguments for `{tool}`: {e}"))
}

/// Runs blocking work (file system, regex search) off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(format!("the tool's work failed unexpectedly: {e}")))
}

/// Cuts `text` to at most `max` bytes at a character boundary.
pub fn truncate_at(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A built-in tool: its arguments, whose schema is derived from their type, and the one
/// function that runs it. Every built-in tool is a [`Tool`].
pub trait BuiltIn: Send + Sync {
    /// Its arguments, as the model gives them.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// Its name.
    const NAME: &'static str;
    /// What it does, for the model.
    const DESCRIPTION: &'static str;
    /// Whether calling it changes nothing (see [`Tool::read_only`]).
    const READ_ONLY: bool;

    /// Runs it with `args`. Failures are outputs with `is_error: true`, never panics.
    fn run<'a>(&'a self, args: Self::Args, cx: &'a ToolContext<'a>) -> BoxFuture<'a, ToolOutput>;
}

impl<T: BuiltIn> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: T::NAME.into(),
            description: T::DESCRIPTION.into(),
            input_schema: schema::<T::Args>(),
        }
    }

    fn read_only(&self) -> bool {
        T::READ_ONLY
    }

    fn call<'a>(&'a self, args: &'a Value, cx: &'a ToolContext<'a>) -> BoxFuture<'a, ToolOutput> {
        match parse_args::<T::Args>(T::NAME, args) {
            Ok(args) => self.run(args, cx),
            Err(e) => Box::pin(async move { ToolOutput::error(e) }),
        }
    }
}

/// The argument schema of a built-in tool, derived from its arguments' type `A` and cut to
/// what a model must know: an object of its properties, each with its JSON type. Every tool
/// offered costs input tokens on every request, so neither titles nor `required` are sent,
/// and optional arguments (`offset`, `limit`, `timeout_s`, `replace_all`, `glob`) are left
/// out of the schema (`#[schemars(skip)]`) while still accepted: the tool's output mentions
/// them where they help (`continue with offset=...`).
pub(crate) fn schema<A: JsonSchema>() -> Value {
    let full = serde_json::to_value(schemars::schema_for!(A)).unwrap_or_default();
    let properties: serde_json::Map<String, Value> = full["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, p)| {
            // An optional argument's type is written without its `null`.
            let kind = match &p["type"] {
                Value::Array(kinds) => kinds.iter().find(|k| *k != "null").cloned(),
                k => Some(k.clone()),
            };
            (name.clone(), serde_json::json!({ "type": kind }))
        })
        .collect();
    serde_json::json!({"type": "object", "properties": properties})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_at_keeps_whole_characters() {
        assert_eq!(truncate_at("héllo", 2), "h");
        assert_eq!(truncate_at("héllo", 3), "hé");
        assert_eq!(truncate_at("abc", 10), "abc");
    }

    #[test]
    fn builtin_specs_are_object_schemas_with_valid_names() {
        let toolbox = Toolbox::builtin();
        let names: Vec<String> = toolbox.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "read_file",
                "write_file",
                "edit_file",
                "list_files",
                "grep",
                "bash",
                "web_fetch"
            ]
        );
        // Derived from the argument types, the schemas list the arguments a model must know
        // as strings and nothing more (recorded model exchanges hold them as they are).
        let listed = |names: &[&str]| {
            let properties: serde_json::Map<String, Value> = names
                .iter()
                .map(|n| (n.to_string(), serde_json::json!({"type": "string"})))
                .collect();
            serde_json::json!({"type": "object", "properties": properties})
        };
        let expected = [
            listed(&["path"]),
            listed(&["path", "content"]),
            listed(&["path", "old_string", "new_string"]),
            listed(&["pattern"]),
            listed(&["pattern", "path"]),
            listed(&["command"]),
            listed(&["url"]),
        ];
        for (spec, want) in toolbox.specs().iter().zip(&expected) {
            assert_eq!(&spec.input_schema, want, "{}", spec.name);
        }
        for spec in toolbox.specs() {
            assert_eq!(spec.input_schema["type"], "object", "{}", spec.name);
            assert!(spec.input_schema["properties"].is_object());
            assert!(!spec.description.is_empty());
        }
        // Every tool offered costs input tokens on every request. As OpenAI's `tools`, the
        // seven take 1,382 bytes: 487 tokens on Qwen2.5's chat template, its own tool
        // instructions included (measured with llama.cpp's /apply-template and /tokenize).
        let declared: Vec<Value> = toolbox
            .specs()
            .into_iter()
            .map(|t| {
                serde_json::json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema}})
            })
            .collect();
        let bytes = serde_json::to_string(&declared).unwrap().len();
        assert!(bytes <= 1400, "the built-in tools take {bytes} bytes");
        assert!(toolbox.read_only("grep"));
        assert!(!toolbox.read_only("bash"));
        assert!(!toolbox.read_only("no_such_tool"));
    }
}
