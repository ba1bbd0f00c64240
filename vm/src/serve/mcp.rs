//! The library's workflows as MCP tools (`prosevm serve --mcp`), over MCP's streamable HTTP
//! transport at `/mcp`, behind the same token as `/v1`. Each artifact is a tool
//! ([`super::catalog`]); a call starts a run of it with the arguments as its inputs, as
//! `POST /v1/runs` does, and answers with its outputs once it finishes (as structured
//! content, and as JSON text). While it runs, a caller that asked for progress is told of
//! each session answered (the total being the program's bound on sessions, when that is a
//! number); the first notification names the run. A call cancelled by the client (MCP's
//! `notifications/cancelled`, or the request given up) stops its run, which ends
//! `interrupted` and can be resumed through the API.
//!
//! A run that does not finish answers the call with an error result saying where it stands
//! and what to do: a run waiting for an input or for a person's approval of a tool call is
//! answered through the API (`POST /v1/runs/{id}/input`, `POST
//! /v1/runs/{id}/approvals/{approval}`), and its outputs are then read there. Every call's result
//! names its run in `_meta` (`prosevm/run`).

use super::api::{ApiError, Shared};
use super::catalog::{Catalog, Workflow};
use prose_runtime::record::{waits_for, RunRecord, RunStatus};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, MetaObject, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use std::collections::HashMap;
use std::sync::Arc;

/// Where MCP is served.
pub const PATH: &str = "/mcp";

/// MCP's streamable HTTP transport (served with `prosevm serve --mcp`): `POST` a JSON-RPC
/// message (`initialize` first, then `tools/list`, `tools/call` ...), answered with JSON or
/// a stream of server-sent events carrying the call's progress and its result; `GET` the
/// session's stream of server messages; `DELETE` ends the session (`Mcp-Session-Id`). Each
/// tool runs a workflow of the library. A server started without `--mcp` answers 404 here.
#[utoipa::path(
    method(post, get, delete),
    path = "/mcp",
    request_body(content = Object, content_type = "application/json", description = "a JSON-RPC message of MCP"),
    params(("Mcp-Session-Id" = Option<String>, Header, description = "the session, as `initialize` gave it")),
    responses(
        (status = 200, content_type = "text/event-stream", description = "the answer, as server-sent events (or as JSON)"),
        (status = 202, description = "a notification or answer taken"),
        (status = 401, body = super::api::ErrorBody, description = "no token, or not the server's"),
        (status = 404, body = super::api::ErrorBody, description = "the server does not serve MCP (no --mcp), or no such session"),
    )
)]
pub async fn off() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "this server does not serve MCP: start it with `prosevm serve --mcp`",
    )
}

/// The key of a result's `_meta` naming its run.
pub const RUN_META: &str = "prosevm/run";

/// The MCP server of a `prosevm serve`: one per client session, all sharing the server.
#[derive(Clone)]
pub struct Workflows {
    app: Shared,
    catalog: Arc<Catalog>,
}

impl Workflows {
    /// The tools of `app`'s library, described by `catalog`.
    pub fn new(app: Shared, catalog: Arc<Catalog>) -> Workflows {
        Workflows { app, catalog }
    }

    /// The library's workflows (describing a new artifact compiles its sources: done aside
    /// from the runtime's threads).
    async fn workflows(&self) -> Result<Vec<Workflow>, McpError> {
        let (app, catalog) = (self.app.clone(), self.catalog.clone());
        tokio::task::spawn_blocking(move || catalog.workflows(&app.library))
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))
    }
}

/// `w` as an MCP tool.
fn tool(w: &Workflow) -> Tool {
    Tool::new(
        w.name.clone(),
        w.about.description.clone(),
        Arc::new(w.about.input_schema.clone()),
    )
    .with_title(w.about.program.clone())
    .with_raw_output_schema(Arc::new(w.about.output_schema.clone()))
}

impl ServerHandler for Workflows {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("prosevm", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Each tool runs a workflow shipped to this server and returns its outputs. \
                 A run that waits for a person (an input, or the approval of a tool call) or \
                 stops early says so, with its run id, which the server's HTTP API \
                 (/v1/runs/{id}) answers and resumes.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.workflows().await?.iter().map(tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let workflow = self
            .workflows()
            .await?
            .into_iter()
            .find(|w| w.name == request.name)
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!("no tool `{}` here (tools/list names them)", request.name),
                    None,
                )
            })?;
        let Some(program) = self.app.library.get(&workflow.sha256) else {
            return Err(McpError::invalid_params(
                format!("the artifact of `{}` is gone", request.name),
                None,
            ));
        };
        let inputs = request.arguments.unwrap_or_default();
        let started = self
            .app
            .conductor
            .start_run(program, super::api::values(&inputs), None)
            .await;
        let id = match started {
            Ok(id) => id,
            Err(e) => {
                let refused = ApiError::from(e).to_string();
                return Ok(CallToolResult::error(vec![ContentBlock::text(refused)]).into());
            }
        };
        let progress = Progress {
            peer: context.peer.clone(),
            token: context.meta.get_progress_token(),
            total: workflow.about.sessions,
        };
        let cancelled = self.follow(&id, &progress, &context).await;
        let record = match self.app.store.record(&id).await {
            Ok((_, record)) => record,
            Err(e) => return Err(McpError::internal_error(format!("run {id}: {e}"), None)),
        };
        Ok(result_of(record, cancelled).into())
    }
}

/// Where a call's progress goes: to its client, if it asked (with a progress token).
struct Progress {
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
    total: Option<u64>,
}

impl Progress {
    async fn tell(&self, done: u64, message: String) {
        let Some(token) = &self.token else {
            return;
        };
        let mut note =
            ProgressNotificationParam::new(token.clone(), done as f64).with_message(message);
        if let Some(total) = self.total {
            note = note.with_total(total as f64);
        }
        // A client gone is told nothing more; its call's cancellation stops the run.
        let _ = self.peer.notify_progress(note).await;
    }
}

impl Workflows {
    /// Follows run `id` until its drive ends, telling `progress` of each session answered,
    /// and stops it if the call is cancelled; whether it was.
    async fn follow(
        &self,
        id: &str,
        progress: &Progress,
        context: &RequestContext<RoleServer>,
    ) -> bool {
        progress.tell(0, format!("run {id} started")).await;
        // Gone from the table already: its drive ended.
        let Some(live) = self.app.conductor.live(id) else {
            return false;
        };
        let mut changed = live.log.watch();
        let (mut next, mut answered) = (0, 0u64);
        let mut asked: HashMap<String, String> = HashMap::new();
        let mut cancelled = false;
        loop {
            changed.borrow_and_update();
            let (lines, ended) = live.log.since(next);
            next += lines.len();
            for line in lines {
                let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                let request = event["id"].as_str().unwrap_or_default().to_string();
                match event["event"].as_str() {
                    Some("session") => {
                        let text = event["text"].as_str().unwrap_or_default();
                        asked.insert(request, text.chars().take(200).collect());
                    }
                    Some("answer") => {
                        answered += 1;
                        let what = asked.get(&request).cloned().unwrap_or(request);
                        progress
                            .tell(answered, format!("run {id}: answered: {what}"))
                            .await;
                    }
                    _ => {}
                }
            }
            if ended {
                return cancelled;
            }
            tokio::select! {
                more = changed.changed() => if more.is_err() {
                    return cancelled;
                },
                () = context.ct.cancelled(), if !cancelled => {
                    cancelled = true;
                    live.stop.ask();
                }
            }
        }
    }
}

/// What a call answers for the run `record` records, once its drive ended (`cancelled`:
/// stopped because the call was).
fn result_of(record: RunRecord, cancelled: bool) -> CallToolResult {
    let id = record.id.clone();
    let error = |text: String| CallToolResult::error(vec![ContentBlock::text(text)]);
    let failure = record
        .error
        .as_ref()
        .map(|e| format!("{}: {}", e.code, e.message))
        .unwrap_or_default();
    let result = match record.status {
        RunStatus::Finished => {
            CallToolResult::structured(serde_json::Value::Object(
                record.outputs.unwrap_or_default(),
            ))
        }
        RunStatus::Failed => error(format!("run {id} failed: {failure}")),
        RunStatus::Waiting => {
            let (inputs, approvals) = record.awaited();
            error(format!(
                "run {id} waits for a person: {}. Answer an input with POST /v1/runs/{id}/input and a tool call's approval with POST /v1/runs/{id}/approvals/{{approval}}; the run then goes on, and its outputs are at GET /v1/runs/{id}.",
                waits_for(&inputs, &approvals).join("; ")
            ))
        }
        RunStatus::Paused => error(format!(
            "run {id} paused before going over its budget ({failure}); resume it with POST /v1/runs/{id}/resume"
        )),
        RunStatus::Interrupted if cancelled => error(format!("run {id} was cancelled")),
        RunStatus::Interrupted => error(format!(
            "run {id} was stopped (the server is stopping, or it was cancelled); the server takes it up again, or resume it with POST /v1/runs/{id}/resume"
        )),
        RunStatus::Running => error(format!(
            "run {id} stopped without ending ({failure}); resume it with POST /v1/runs/{id}/resume"
        )),
    };
    let mut meta = serde_json::Map::new();
    meta.insert(RUN_META.into(), id.into());
    result.with_meta(Some(MetaObject(meta)))
}
