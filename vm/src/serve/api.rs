//! The HTTP API under `/v1`, JSON in and out, and its OpenAPI document. Each handler carries
//! its own `#[utoipa::path]`; the router and the document are both made from those
//! annotations ([`routes()`]), so the document describes exactly what is served.

use super::conductor::{Conductor, Resumption};
use super::events::{self, EventLog};
use super::library::{Library, Refused};
use super::schedules::{self, Schedule, Schedules};
use super::webhooks::courier::Courier;
use super::webhooks::{allow, DeliveryList};
use crate::run::{Resuming, RunError};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream::{self, Stream, StreamExt};
use prose_machine::protocol::PromptAnswer;
use prose_machine::value::Value;
use prose_runtime::approvals::{ApprovalId, WaitingApproval};
use prose_runtime::record::{RunRecord, RunStatus};
use prose_store::webhooks::Hook;
use prose_store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// What the handlers share.
pub struct App {
    /// Where runs are kept.
    pub store: Arc<dyn Store>,
    /// The artifacts uploaded.
    pub library: Library,
    /// The runs driven now.
    pub conductor: Conductor,
    /// The schedules.
    pub schedules: tokio::sync::Mutex<Schedules>,
    /// What evals run with.
    pub evals: EvalsHome,
    /// Who posts the webhooks of runs, when the server allows any.
    pub webhooks: Option<Courier>,
}

/// What evals run with: the server's driver, place and store.
pub struct EvalsHome {
    /// The server's driver (a model asked for replaces its default model).
    pub driver: prose_runtime::driver::settings::DriverSettings,
    /// Where runs live.
    pub place: crate::run::Place,
    /// Where each try's working directory is made.
    pub scratch: std::path::PathBuf,
}

/// The handlers' state.
pub type Shared = Arc<App>;

/// An error, as every failed request answers.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: String,
}

/// A failed request: its status and why.
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError(status, message.into())
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.1)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(ErrorBody { error: self.1 })).into_response()
    }
}

/// A JSON request body. One that does not read (not JSON, not the shape asked for, a field
/// the API does not know) is refused like every failed request, with `{"error"}` and the
/// status axum gives it (400, 415 or 422).
pub struct Body<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for Body<T>
where
    Json<T>: axum::extract::FromRequest<S, Rejection = axum::extract::rejection::JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(body)) => Ok(Body(body)),
            Err(e) => Err(ApiError(e.status(), e.body_text())),
        }
    }
}

/// Query parameters. Ones that do not read (`?limit=abc`) are refused like every failed
/// request, with `{"error"}` (400).
pub struct Params<T>(pub T);

/// What the path names (a run id, a schedule id). One that does not read is refused with
/// `{"error"}` (400).
pub struct Named<T>(pub T);

/// Implements extraction for `$wrapper` through axum's `$extractor`, its rejection refused
/// in JSON.
macro_rules! refused_in_json {
    ($wrapper:ident, $extractor:ident, $rejection:ty) => {
        impl<T, S> axum::extract::FromRequestParts<S> for $wrapper<T>
        where
            $extractor<T>: axum::extract::FromRequestParts<S, Rejection = $rejection>,
            S: Send + Sync,
        {
            type Rejection = ApiError;

            async fn from_request_parts(
                parts: &mut axum::http::request::Parts,
                state: &S,
            ) -> Result<Self, ApiError> {
                match $extractor::<T>::from_request_parts(parts, state).await {
                    Ok($extractor(v)) => Ok($wrapper(v)),
                    Err(e) => Err(ApiError(e.status(), e.body_text())),
                }
            }
        }
    };
}

refused_in_json!(Params, Query, axum::extract::rejection::QueryRejection);
refused_in_json!(Named, Path, axum::extract::rejection::PathRejection);

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        let status = match &e {
            StoreError::NoRun(_) => StatusCode::NOT_FOUND,
            StoreError::Held(_) => StatusCode::CONFLICT,
            StoreError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(status, e.to_string())
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> ApiError {
        match e {
            RunError::Store(e) => e.into(),
            RunError::Program(e) if e.code == bytecode_spec::Code::E200 => ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("{e} (give each in the request's `inputs` object)"),
            ),
            RunError::Program(e) => ApiError(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
            RunError::Setup(e) => ApiError(StatusCode::UNPROCESSABLE_ENTITY, e),
            e @ RunError::Unequipped(_) => {
                ApiError(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
            }
            e @ RunError::Untrusted(_) => ApiError(StatusCode::FORBIDDEN, e.to_string()),
        }
    }
}

/// A run's id as a path names it, in the form every store gives (`20251122-081456-k3x9qa`:
/// the start's date and time, then six letters or digits), so that no path of the file
/// system (which the file store would also take) can name a run through the API.
#[derive(Debug, Deserialize)]
#[serde(try_from = "String")]
pub struct RunId(pub String);

impl TryFrom<String> for RunId {
    type Error = String;
    fn try_from(id: String) -> Result<RunId, String> {
        if prose_store::ids::is_run_id(&id) {
            Ok(RunId(id))
        } else {
            Err(format!("{id:?} is not a run id"))
        }
    }
}

/// An artifact kept.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ArtifactCreated {
    /// Its SHA-256, in hex: how runs name it.
    pub sha256: String,
}

/// A run to start. A client chooses only these fields: the driver, its model and its
/// credentials are the server's, and a body naming anything else is refused.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRun {
    /// The SHA-256 of an uploaded artifact.
    pub artifact: String,
    /// Its top-level inputs, by name (texts, numbers, lists or objects).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// A URL posted to when the run finishes, fails, waits or pauses: one the server's
    /// `--webhook-allow` list allows.
    #[serde(default)]
    pub webhook: Option<String>,
}

/// A run started.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunCreated {
    /// Its id.
    pub id: String,
}

/// Why a run failed, or why it stopped.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunFailureBody {
    /// The error's code (`E210`, ...).
    pub code: String,
    /// The error.
    pub message: String,
}

/// Tokens and cost.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UsageBody {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// US dollars, where prices are known.
    pub cost: Option<f64>,
}

impl From<prose_machine::protocol::Usage> for UsageBody {
    fn from(u: prose_machine::protocol::Usage) -> UsageBody {
        UsageBody {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cost: u.cost,
        }
    }
}

/// A mid-program input a run waits for.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WaitingBody {
    /// The input's name (answer with it).
    pub name: String,
    /// Its question.
    pub question: String,
}

impl From<prose_runtime::record::WaitingInput> for WaitingBody {
    fn from(w: prose_runtime::record::WaitingInput) -> WaitingBody {
        WaitingBody {
            name: w.name,
            question: w.question,
        }
    }
}

/// A tool call a run waits for a person's approval of: nothing of it has run.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ApprovalBody {
    /// The approval's id: answer it with `POST /v1/runs/{id}/approvals/{approval}`.
    pub id: String,
    /// The tool call's id in the run (`0:3#t2c0`: session, turn, call).
    pub call: String,
    /// The agent asking, when the session runs one.
    pub agent: Option<String>,
    /// The tool (`bash`, `web_fetch`, an MCP server's tool).
    pub tool: String,
    /// What it needs: `bash` or `network`.
    pub capability: String,
    /// The command or URL.
    pub detail: String,
    /// The call's arguments, as the model gave them.
    #[schema(value_type = Object)]
    pub arguments: serde_json::Value,
    /// The session's prompt.
    pub prompt: String,
    /// When the run first waited for it (UTC, ISO 8601).
    pub asked: String,
    /// When it is refused if no one answers; none: it waits as long as it takes.
    pub expires: Option<String>,
}

impl From<WaitingApproval> for ApprovalBody {
    fn from(a: WaitingApproval) -> ApprovalBody {
        ApprovalBody {
            id: a.id.to_string(),
            call: a.call.to_string(),
            agent: a.agent,
            tool: a.tool,
            capability: a.capability.name().to_string(),
            detail: a.detail,
            arguments: a.arguments,
            prompt: a.prompt,
            asked: a.asked,
            expires: a.expires,
        }
    }
}

/// A run.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunBody {
    /// Its id.
    pub id: String,
    /// The program's name.
    pub program: String,
    /// The SHA-256 of its artifact.
    pub artifact: String,
    /// Where it is: `running`, `interrupted`, `paused`, `waiting`, `finished` or `failed`
    /// (the words of `prosevm runs`).
    pub status: String,
    /// The inputs it waits for (answer them with `POST /v1/runs/{id}/input`).
    pub waiting: Vec<WaitingBody>,
    /// The tool calls it waits for a person's approval of (answer them with `POST
    /// /v1/runs/{id}/approvals/{approval}`).
    pub approvals: Vec<ApprovalBody>,
    /// Whether this server is driving it now.
    pub live: bool,
    /// When it started (UTC, ISO 8601).
    pub started: String,
    /// The inputs it was given.
    #[schema(value_type = Object)]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// Its outputs, once finished.
    #[schema(value_type = Option<Object>)]
    pub outputs: Option<serde_json::Map<String, serde_json::Value>>,
    /// Why it failed or paused.
    pub error: Option<RunFailureBody>,
    /// Tokens and cost, as of when it last stopped.
    pub usage: Option<UsageBody>,
}

impl RunBody {
    /// The run `record` records, driven by this server now or not as `live` says.
    pub fn of(record: RunRecord, live: bool) -> RunBody {
        let (waiting, approvals) = record.awaited();
        RunBody {
            id: record.id,
            program: record.program,
            artifact: record.artifact_sha256,
            status: record.status.as_str().to_string(),
            waiting: waiting.into_iter().map(WaitingBody::from).collect(),
            approvals: approvals.into_iter().map(ApprovalBody::from).collect(),
            live,
            started: record.started,
            inputs: record
                .inputs
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect(),
            outputs: record.outputs,
            error: record.error.map(|e| RunFailureBody {
                code: e.code,
                message: e.message,
            }),
            usage: record.usage.map(UsageBody::from),
        }
    }
}

/// The body of a webhook's delivery: the run as `GET /v1/runs/{id}` gives it when it
/// ended, what its end was, and the delivery's id (the `webhook-id` header's: a receiver
/// drops a delivery whose id it already took).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookPayload {
    /// The delivery's id, the same on every try.
    pub id: String,
    /// What happened: `run.finished`, `run.failed`, `run.waiting` (for an input, named in
    /// `run.waiting`) or `run.paused` (before going over its budget).
    pub r#type: String,
    /// When the end was noticed (UTC, RFC 3339).
    pub created: String,
    /// The run: its status, outputs or error, and what it waits for.
    pub run: RunBody,
}

/// A run as listed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunSummary {
    /// Its id.
    pub id: String,
    /// The program's name.
    pub program: String,
    /// Where it is (`unreadable` when its record cannot be read).
    pub status: String,
    /// Whether this server is driving it now.
    pub live: bool,
    /// When it started.
    pub started: Option<String>,
    /// Answers its journal holds.
    pub answered: usize,
    /// Why it failed.
    pub error: Option<String>,
    /// The inputs a waiting run waits for.
    pub waiting: Vec<WaitingBody>,
    /// The tool calls a waiting run waits for a person's approval of.
    pub approvals: Vec<ApprovalBody>,
}

/// A page of runs, newest first (run ids sort by start time, to the second).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunPage {
    /// The runs.
    pub runs: Vec<RunSummary>,
    /// Pass as `before` for the next page; none on the last.
    pub next: Option<String>,
}

/// Which runs to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunFilter {
    /// Only runs with this status.
    pub status: Option<String>,
    /// Only runs of this program (by name).
    pub program: Option<String>,
    /// Runs on a page (default 50, at most 500).
    pub limit: Option<usize>,
    /// Only runs older than this one (the `next` of the page before).
    pub before: Option<String>,
}

/// How a stop or resume was taken.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Accepted {
    /// The run.
    pub id: String,
    /// What happens now: `stopping` or `resuming`.
    pub state: String,
}

/// An answer to an input a run waits for.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InputAnswer {
    /// The input's name.
    pub name: String,
    /// Its value (a text, or any JSON value).
    pub value: serde_json::Value,
}

/// What an answer left.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct InputTaken {
    /// The run.
    pub id: String,
    /// `resuming` once nothing is left waiting, else `waiting`.
    pub state: String,
    /// The inputs it still waits for.
    pub still_waiting: Vec<String>,
    /// The approvals it still waits for.
    pub approvals: Vec<String>,
}

impl InputTaken {
    /// What `answered` left of run `id`'s waits: `resuming` when nothing needs anyone.
    fn of(id: String, answered: &crate::run::answer::Answered) -> InputTaken {
        InputTaken {
            id,
            state: if answered.can_go_on() {
                "resuming"
            } else {
                "waiting"
            }
            .into(),
            still_waiting: answered.still_waiting.clone(),
            approvals: answered.approvals.iter().map(|a| a.to_string()).collect(),
        }
    }
}

/// A person's answer to a tool call a run waits for.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalAnswer {
    /// Whether the call may run (`false`: it is refused, and the model told so).
    pub approve: bool,
    /// With `approve`: every later call of the session needing the same capability may
    /// run too, without asking.
    #[serde(default)]
    pub always: bool,
}

/// The server is up.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: String,
}

/// The routes of runs, artifacts and schedules under `/v1` (the service's document and its
/// other routes are [`super::doc`]'s).
pub fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new()
        .routes(routes!(put_artifact))
        .routes(routes!(create_run, list_runs))
        .routes(routes!(get_run))
        .routes(routes!(run_events))
        .routes(routes!(cancel_run))
        .routes(routes!(resume_run))
        .routes(routes!(answer_input))
        .routes(routes!(answer_approval))
        .routes(routes!(run_report))
        .routes(routes!(run_webhooks))
        .routes(routes!(create_schedule, list_schedules))
        .routes(routes!(get_schedule, delete_schedule))
}

/// `/healthz`, described for the document.
pub fn health_routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new().routes(routes!(healthz))
}

/// What a request for a path the API does not have gets: 404, with the `{"error"}` body
/// every failed request has.
pub async fn no_such_route(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "no such route: {method} {} (see GET /v1/openapi.json)",
            uri.path()
        ),
    )
}

/// What a request with a method a path does not take gets: 405, with the `{"error"}` body.
pub async fn no_such_method(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{} does not take {method} (see GET /v1/openapi.json)",
            uri.path()
        ),
    )
}

/// Whether the server is up.
#[utoipa::path(get, path = "/healthz", security(()), responses((status = 200, body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

/// Uploads an artifact (`prosec build`'s `.pbc`). It is verified, and its signature checked
/// when the server trusts keys, before it is kept.
#[utoipa::path(
    put,
    path = "/v1/artifacts",
    request_body(content = String, content_type = "application/octet-stream", description = "the artifact's bytes"),
    responses(
        (status = 201, body = ArtifactCreated),
        (status = 403, body = ErrorBody, description = "not signed by a trusted key"),
        (status = 422, body = ErrorBody, description = "not a valid artifact: the verifier's reason"),
    )
)]
async fn put_artifact(
    State(app): State<Shared>,
    body: Bytes,
) -> Result<(StatusCode, Json<ArtifactCreated>), ApiError> {
    let library = app.clone();
    let added = tokio::task::spawn_blocking(move || library.library.add(body.to_vec()))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    match added {
        Ok(sha256) => Ok((StatusCode::CREATED, Json(ArtifactCreated { sha256 }))),
        Err(Refused::Invalid(why)) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("not a valid artifact: {why}"),
        )),
        Err(Refused::Untrusted(why)) => Err(ApiError::new(StatusCode::FORBIDDEN, why)),
        Err(Refused::Io(why)) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, why)),
    }
}

/// Starts a run of an uploaded artifact with the server's driver.
#[utoipa::path(
    post,
    path = "/v1/runs",
    request_body = NewRun,
    responses(
        (status = 201, body = RunCreated),
        (status = 404, body = ErrorBody, description = "no such artifact"),
        (status = 422, body = ErrorBody, description = "a field other than `artifact`, `inputs` and `webhook`, inputs the program refuses, a webhook the server does not allow, or a driver that cannot serve it"),
    )
)]
async fn create_run(
    State(app): State<Shared>,
    Body(new): Body<NewRun>,
) -> Result<(StatusCode, Json<RunCreated>), ApiError> {
    let program = artifact(&app, &new.artifact)?;
    let hook = hook(&app, new.webhook.as_deref())?;
    let id = app
        .conductor
        .start_run(program, values(&new.inputs), hook)
        .await?;
    Ok((StatusCode::CREATED, Json(RunCreated { id })))
}

/// The hook of a run naming the webhook `url`, if it names one: refused (422) unless the
/// server's list allows it.
pub fn hook(app: &App, url: Option<&str>) -> Result<Option<Hook>, ApiError> {
    let Some(url) = url else {
        return Ok(None);
    };
    app.webhooks
        .as_ref()
        .ok_or_else(|| allow::OFF.to_string())
        .and_then(|c| c.hook(url))
        .map(Some)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e))
}

/// Inputs given as JSON, as a run takes them.
pub fn values(inputs: &serde_json::Map<String, serde_json::Value>) -> BTreeMap<String, Value> {
    inputs
        .iter()
        .map(|(k, v)| (k.clone(), Value::from_json(v)))
        .collect()
}

/// The artifact `sha256` from the library, or 404.
fn artifact(app: &App, sha256: &str) -> Result<prose_runtime::program::Program, ApiError> {
    app.library.get(sha256).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no artifact {sha256} (upload it with PUT /v1/artifacts)"),
        )
    })
}

/// Lists runs, newest first, a page at a time.
#[utoipa::path(
    get,
    path = "/v1/runs",
    params(RunFilter),
    responses((status = 200, body = RunPage), (status = 400, body = ErrorBody))
)]
async fn list_runs(
    State(app): State<Shared>,
    Params(filter): Params<RunFilter>,
) -> Result<Json<RunPage>, ApiError> {
    if let Some(s) = &filter.status {
        let known = RunStatus::ALL.iter().any(|st| st.as_str() == s) || s == "queued";
        if !known {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("unknown status `{s}`"),
            ));
        }
    }
    let limit = filter.limit.unwrap_or(50).clamp(1, 500);
    let mut rows = app.store.list().await?;
    rows.reverse();
    let mut runs = rows
        .into_iter()
        .filter(|r| filter.before.as_ref().is_none_or(|b| r.id < *b))
        .filter(|r| filter.status.as_ref().is_none_or(|s| r.status_text() == s))
        .filter(|r| filter.program.as_ref().is_none_or(|p| r.program == *p))
        .take(limit + 1)
        .map(|r| RunSummary {
            live: r
                .run_status()
                .and_then(|status| app.conductor.driving(&r.id, status))
                .is_some(),
            status: r.status_text().to_string(),
            id: r.id,
            program: r.program,
            started: r.started,
            answered: r.answered,
            error: r.error,
            waiting: r.waiting.into_iter().map(WaitingBody::from).collect(),
            approvals: r.approvals.into_iter().map(ApprovalBody::from).collect(),
        })
        .collect::<Vec<_>>();
    let next = (runs.len() > limit).then(|| {
        runs.truncate(limit);
        runs[limit - 1].id.clone()
    });
    Ok(Json(RunPage { runs, next }))
}

/// A run: its status, and its outputs once finished.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}",
    params(("id" = String, Path, description = "the run's id")),
    responses((status = 200, body = RunBody), (status = 404, body = ErrorBody))
)]
async fn get_run(
    State(app): State<Shared>,
    Named(RunId(id)): Named<RunId>,
) -> Result<Json<RunBody>, ApiError> {
    let (id, record) = app.store.record(&id).await?;
    let live = app.conductor.driving(&id, record.status).is_some();
    Ok(Json(RunBody::of(record, live)))
}

/// A run's events as server-sent events: the lines `--trace json` prints, from the first,
/// then live until the run stops. Each event's id is its line's number; a client
/// reconnecting with `Last-Event-ID` gets the lines after it.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/events",
    params(
        ("id" = String, Path, description = "the run's id"),
        ("Last-Event-ID" = Option<String>, Header, description = "the last event received"),
    ),
    responses(
        (status = 200, content_type = "text/event-stream", description = "one event per trace line, its data the line's JSON"),
        (status = 404, body = ErrorBody),
    )
)]
async fn run_events(
    State(app): State<Shared>,
    Named(RunId(id)): Named<RunId>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let from = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(0, |n| n + 1);
    let stream = match app.conductor.live(&id) {
        Some(live) => follow(live.log, from).left_stream(),
        None => {
            let (id, _) = app.store.record(&id).await?;
            let lines = events::read(&app.store.views(&id)?.join(events::FILE));
            stream::iter(
                lines
                    .into_iter()
                    .enumerate()
                    .skip(from)
                    .map(|(n, line)| Ok(sse(n, &line))),
            )
            .right_stream()
        }
    };
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

fn sse(n: usize, line: &str) -> SseEvent {
    SseEvent::default().id(n.to_string()).data(line)
}

/// The lines of `log` from number `from` on, as they come, until its drive ends.
fn follow(log: Arc<EventLog>, from: usize) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    struct Follow {
        log: Arc<EventLog>,
        next: usize,
        changed: tokio::sync::watch::Receiver<()>,
        ready: VecDeque<(usize, Arc<str>)>,
    }
    let changed = log.watch();
    let start = Follow {
        log,
        next: from,
        changed,
        ready: VecDeque::new(),
    };
    stream::unfold(start, |mut f| async move {
        loop {
            if let Some((n, line)) = f.ready.pop_front() {
                return Some((Ok(sse(n, &line)), f));
            }
            f.changed.borrow_and_update();
            let (lines, ended) = f.log.since(f.next);
            if !lines.is_empty() {
                for line in lines {
                    f.ready.push_back((f.next, line));
                    f.next += 1;
                }
                continue;
            }
            if ended || f.changed.changed().await.is_err() {
                return None;
            }
        }
    })
}

/// Stops a run the server is driving: it ends `interrupted`, and can be resumed.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/cancel",
    params(("id" = String, Path, description = "the run's id")),
    responses(
        (status = 202, body = Accepted),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "the server is not driving it"),
    )
)]
async fn cancel_run(
    State(app): State<Shared>,
    Named(RunId(id)): Named<RunId>,
) -> Result<(StatusCode, Json<Accepted>), ApiError> {
    let (id, record) = app.store.record(&id).await?;
    let Some(live) = app.conductor.driving(&id, record.status) else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "run {id} is not being driven here (it is {})",
                record.status.as_str()
            ),
        ));
    };
    if live.queued {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("run {id} was claimed from the Postgres store's queue: stopped, it would be queued again for any worker, so it is not cancelled here"),
        ));
    }
    live.stop.ask();
    Ok((
        StatusCode::ACCEPTED,
        Json(Accepted {
            id,
            state: "stopping".into(),
        }),
    ))
}

/// How long a request waits for a drive that recorded how its run ended (waiting, or
/// interrupted) to leave the conductor's table: it does so at once, its event log closed.
const DRIVE_ENDING: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether no drive of run `id`, whose record says it is not running, is left in the
/// conductor's table, once one that was ending has left: until then the run cannot be taken
/// up again, and an answer given to it would not be.
async fn drive_ended(app: &App, id: &str) -> bool {
    app.conductor.let_go(id, DRIVE_ENDING).await
}

/// Takes a stopped run up again from its journal: nothing it was answered is asked again.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/resume",
    params(("id" = String, Path, description = "the run's id")),
    responses(
        (status = 202, body = Accepted),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "it is running, or finished"),
        (status = 422, body = ErrorBody, description = "it cannot go on (a changed journal, a driver that cannot serve it)"),
    )
)]
async fn resume_run(
    State(app): State<Shared>,
    Named(RunId(id)): Named<RunId>,
) -> Result<(StatusCode, Json<Accepted>), ApiError> {
    let (id, record) = app.store.record(&id).await?;
    if app.conductor.driving(&id, record.status).is_some() || !drive_ended(&app, &id).await {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("run {id} is running"),
        ));
    }
    match app.conductor.resume(&id, Resuming::default()).await? {
        Resumption::Going => Ok((
            StatusCode::ACCEPTED,
            Json(Accepted {
                id,
                state: "resuming".into(),
            }),
        )),
        Resumption::Finished => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("run {id} has finished"),
        )),
    }
}

/// Answers an input the run waits for. Once it waits for nothing more, it goes on from its
/// journal.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/input",
    params(("id" = String, Path, description = "the run's id")),
    request_body = InputAnswer,
    responses(
        (status = 200, body = InputTaken, description = "answered; it still waits for others"),
        (status = 202, body = InputTaken, description = "answered; it goes on"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "it waits for no input now"),
        (status = 422, body = ErrorBody, description = "it does not wait for an input of that name"),
    )
)]
async fn answer_input(
    State(app): State<Shared>,
    Named(RunId(id)): Named<RunId>,
    Body(given): Body<InputAnswer>,
) -> Result<(StatusCode, Json<InputTaken>), ApiError> {
    let (id, record) = app.store.record(&id).await?;
    if record.status != RunStatus::Waiting {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "run {id} waits for no input now (it is {}; a running run waits once nothing else can go on)",
                record.status.as_str()
            ),
        ));
    }
    if !drive_ended(&app, &id).await {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("run {id} is being driven here again"),
        ));
    }
    let answered = crate::run::answer::answer(
        &*app.store,
        &id,
        &given.name,
        Value::from_json(&given.value),
    )
    .await?;
    went_on(&app, id, &answered).await
}

/// What an answer to run `id` left, and the run taken up again once it needs no one.
async fn went_on(
    app: &App,
    id: String,
    answered: &crate::run::answer::Answered,
) -> Result<(StatusCode, Json<InputTaken>), ApiError> {
    let taken = InputTaken::of(id, answered);
    if !answered.can_go_on() {
        return Ok((StatusCode::OK, Json(taken)));
    }
    app.conductor.watch(&taken.id, None);
    app.conductor.resume(&taken.id, Resuming::default()).await?;
    Ok((StatusCode::ACCEPTED, Json(taken)))
}

/// Approves or denies a tool call the run waits for (its agent's permissions say `prompt`,
/// and no one was at hand to ask). The answer is journaled; once the run waits for nothing
/// more, it goes on from that call: approved, the call runs; denied, the model is told a
/// person refused it.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/approvals/{approval}",
    params(
        ("id" = String, Path, description = "the run's id"),
        ("approval" = String, Path, description = "the approval's id, as the run lists it"),
    ),
    request_body = ApprovalAnswer,
    responses(
        (status = 200, body = InputTaken, description = "answered; it still waits for others"),
        (status = 202, body = InputTaken, description = "answered; it goes on"),
        (status = 400, body = ErrorBody, description = "not an approval id, or `always` without `approve`"),
        (status = 404, body = ErrorBody, description = "no such run, or it does not wait for that approval"),
        (status = 409, body = ErrorBody, description = "it waits for no approval now, or the approval's time ran out"),
    )
)]
async fn answer_approval(
    State(app): State<Shared>,
    Named(path): Named<(RunId, String)>,
    Body(given): Body<ApprovalAnswer>,
) -> Result<(StatusCode, Json<InputTaken>), ApiError> {
    let (RunId(id), approval) = path;
    let approval =
        ApprovalId::parse(&approval).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
    let answer = match (given.approve, given.always) {
        (true, false) => PromptAnswer::Yes,
        (true, true) => PromptAnswer::Always,
        (false, false) => PromptAnswer::No,
        (false, true) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "`always` goes with `approve`: a refusal holds for this call only",
            ))
        }
    };
    let (id, record) = app.store.record(&id).await?;
    if record.status != RunStatus::Waiting {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "run {id} waits for no approval now (it is {}; a running run waits once nothing else can go on)",
                record.status.as_str()
            ),
        ));
    }
    let Some(waiting) = record.approval(&approval) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("run {id} does not wait for approval {approval}"),
        ));
    };
    if waiting.lapsed(prose_runtime::clock::now()) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "approval {approval} lapsed at {}: the call is refused as the run goes on",
                waiting.expires.as_deref().unwrap_or("?")
            ),
        ));
    }
    if !drive_ended(&app, &id).await {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("run {id} is being driven here again"),
        ));
    }
    let answered = crate::run::answer::approve(&*app.store, &id, &approval, answer).await?;
    went_on(&app, id, &answered).await
}

/// A run's report: one self-contained HTML page (as `prosevm report` writes it), as of its
/// journal now.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/report",
    params(("id" = String, Path, description = "the run's id")),
    responses(
        (status = 200, content_type = "text/html", description = "the report"),
        (status = 404, body = ErrorBody),
    )
)]
async fn run_report(
    State(app): State<Shared>,
    Named(RunId(id)): Named<RunId>,
) -> Result<Response, ApiError> {
    let stored = app.store.read(&id).await?;
    let views = app.store.views(&stored.id)?;
    let id = stored.id.clone();
    let report = crate::report::Report::of(stored, &views).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("run {id}: its report: {e}"),
        )
    })?;
    // The page's guards: nothing from elsewhere loads, it is not framed, not sniffed.
    Ok(super::guards::guarded(
        StatusCode::OK,
        axum::response::Html(crate::report::html::render(&report)).into_response(),
    ))
}

/// A run's webhook and the deliveries made to it: each end of the run the server posted, or
/// is posting, with its tries.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/webhooks",
    params(("id" = String, Path, description = "the run's id")),
    responses((status = 200, body = DeliveryList), (status = 404, body = ErrorBody))
)]
async fn run_webhooks(
    State(app): State<Shared>,
    Named(RunId(id)): Named<RunId>,
) -> Result<Json<DeliveryList>, ApiError> {
    let (id, _) = app.store.record(&id).await?;
    let webhooks = app.store.webhooks();
    let webhook = webhooks.hook(&id).await?.map(|h| h.url);
    let deliveries = webhooks
        .of_run(&id)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    Ok(Json(DeliveryList {
        webhook,
        deliveries,
    }))
}

/// A schedule to make. As for a run, a client chooses only these fields: a body naming
/// anything else is refused.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSchedule {
    /// When runs start: cron's five fields (minute hour day month weekday), or six with
    /// seconds first, in UTC (`0 9 * * 1-5`: 09:00 on weekdays).
    pub cron: String,
    /// The SHA-256 of an uploaded artifact.
    pub artifact: String,
    /// The inputs of each run.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// A URL each run it starts posts to as it ends (as `POST /v1/runs` takes one).
    #[serde(default)]
    pub webhook: Option<String>,
}

/// Every schedule.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ScheduleList {
    /// The schedules, oldest first.
    pub schedules: Vec<Schedule>,
}

/// Makes a schedule: a run of the artifact with the inputs each time the cron expression
/// comes due. Schedules outlive restarts.
#[utoipa::path(
    post,
    path = "/v1/schedules",
    request_body = NewSchedule,
    responses(
        (status = 201, body = Schedule),
        (status = 404, body = ErrorBody, description = "no such artifact"),
        (status = 422, body = ErrorBody, description = "a cron expression that does not read, inputs the program refuses, or a webhook the server does not allow"),
    )
)]
async fn create_schedule(
    State(app): State<Shared>,
    Body(new): Body<NewSchedule>,
) -> Result<(StatusCode, Json<Schedule>), ApiError> {
    let unprocessable = |e: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e);
    schedules::parse(&new.cron).map_err(unprocessable)?;
    let program = artifact(&app, &new.artifact)?;
    let webhook = hook(&app, new.webhook.as_deref())?.map(|h| h.url);
    // Inputs the program would refuse are refused now, not at every run.
    prose_runtime::record::new_machine(
        &program.artifact,
        &values(&new.inputs),
        &Default::default(),
    )
    .map_err(|e| unprocessable(e.to_string()))?;
    let made = app
        .schedules
        .lock()
        .await
        .add(
            &new.cron,
            new.artifact,
            new.inputs,
            webhook,
            chrono::Utc::now(),
        )
        .map_err(unprocessable)?;
    Ok((StatusCode::CREATED, Json(made)))
}

/// Lists the schedules.
#[utoipa::path(get, path = "/v1/schedules", responses((status = 200, body = ScheduleList)))]
async fn list_schedules(State(app): State<Shared>) -> Json<ScheduleList> {
    let schedules = app.schedules.lock().await.all().to_vec();
    Json(ScheduleList { schedules })
}

/// A schedule: when it next starts a run, and the run it started last.
#[utoipa::path(
    get,
    path = "/v1/schedules/{id}",
    params(("id" = String, Path, description = "the schedule's id")),
    responses((status = 200, body = Schedule), (status = 404, body = ErrorBody))
)]
async fn get_schedule(
    State(app): State<Shared>,
    Named(id): Named<String>,
) -> Result<Json<Schedule>, ApiError> {
    app.schedules
        .lock()
        .await
        .get(&id)
        .cloned()
        .map(Json)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no schedule {id}")))
}

/// Removes a schedule; the runs it started go on.
#[utoipa::path(
    delete,
    path = "/v1/schedules/{id}",
    params(("id" = String, Path, description = "the schedule's id")),
    responses((status = 204, description = "removed"), (status = 404, body = ErrorBody))
)]
async fn delete_schedule(
    State(app): State<Shared>,
    Named(id): Named<String>,
) -> Result<StatusCode, ApiError> {
    let removed = app
        .schedules
        .lock()
        .await
        .remove(&id)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    if removed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no schedule {id}"),
        ))
    }
}
