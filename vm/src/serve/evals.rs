//! Evals over HTTP: `POST /v1/evals` starts one of an uploaded artifact over the rows the
//! request gives, with the server's driver (each model asked for, in turn), and the checks
//! and judges of an eval file written as JSON; `GET /v1/evals` lists them, `GET
//! /v1/evals/{id}` gives one's record and figures, and `GET /v1/evals/{id}/report` its page.
//! An eval runs on a thread of its own, its runs kept in the server's store like any other.

use super::api::{ApiError, Body, ErrorBody, Named, RunId, Shared};
use crate::suite::eval::{self, record::EvalRecord, EvalOptions, Plan};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use prose_runtime::driver::settings::DriverSettings;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use utoipa::ToSchema;

/// The routes of evals under `/v1`.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Shared> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new()
        .routes(routes!(create_eval, list_evals))
        .routes(routes!(get_eval))
        .routes(routes!(eval_report))
}

/// An eval to start. As for a run, the driver and its credentials are the server's.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewEval {
    /// The SHA-256 of an uploaded artifact.
    pub artifact: String,
    /// The dataset's rows: each the inputs themselves, or an object with `inputs`,
    /// `expected`, `files`, `expect` and `name` (as a line of a JSON-lines dataset).
    #[schema(value_type = Vec<Object>)]
    pub rows: Vec<serde_json::Value>,
    /// The checks of every row's run, as an eval file's `[expect]` (texts may name the row's
    /// values as `{expected.NAME}`).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub expect: serde_json::Map<String, serde_json::Value>,
    /// The judges, as an eval file's `[[judge]]` tables.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub judges: Vec<serde_json::Value>,
    /// Runs of each row (default 1).
    #[serde(default)]
    pub tries: Option<u32>,
    /// Models to run the rows on, side by side (default: the server's).
    #[serde(default)]
    pub models: Vec<String>,
}

/// An eval started.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvalCreated {
    /// Its id.
    pub id: String,
}

/// Every eval kept.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvalList {
    /// Each eval's record, with each model's figures (`summaries`).
    #[schema(value_type = Vec<Object>)]
    pub evals: Vec<serde_json::Value>,
}

fn unprocessable(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
}

/// The eval `new` asks for, read as an eval file and a dataset are, its names checked
/// against `program`.
fn plan_of(new: &NewEval, program: prose_runtime::program::Program) -> Result<Plan, ApiError> {
    let mut file = serde_json::json!({
        "dataset": "(the request's rows)",
        "tries": new.tries.unwrap_or(1),
        "expect": new.expect,
        "judge": new.judges,
    });
    if new.judges.is_empty() {
        file.as_object_mut().map(|o| o.remove("judge"));
    }
    let text = toml::Value::try_from(&file)
        .map_err(|e| e.to_string())
        .and_then(|v| toml::to_string(&v).map_err(|e| e.to_string()))
        .map_err(unprocessable)?;
    let spec = prosec::suite::eval::parse(&text).map_err(|(e, _)| unprocessable(e))?;
    let lines: Vec<String> = new.rows.iter().map(|r| r.to_string()).collect();
    let rows = prosec::suite::dataset::parse(&lines.join("\n"), false)
        .map_err(|e| unprocessable(format!("row {}: {}", e.line, e.message)))?;
    if rows.is_empty() {
        return Err(unprocessable("an eval needs rows"));
    }
    let m = &program.artifact.modules[0];
    let inputs: Vec<&str> = m
        .inputs
        .values()
        .map(|i| m.strings[i.name].as_str())
        .collect();
    let outputs: Vec<&str> = m
        .outputs
        .values()
        .map(|o| m.strings[o.name].as_str())
        .collect();
    for row in &rows {
        if let Some(k) = row.inputs.keys().find(|k| !inputs.contains(&k.as_str())) {
            return Err(unprocessable(format!(
                "{}: the program declares no input `{k}`",
                row.name
            )));
        }
        let read = |v: &toml::Value| prosec::suite::spec::Check::read(&row.fill_value(v));
        for raw in spec
            .expect
            .outputs
            .values()
            .chain(spec.expect.files.values())
        {
            read(raw.get_ref()).map_err(|e| unprocessable(format!("{}: {e}", row.name)))?;
        }
    }
    for name in spec
        .expect
        .outputs
        .keys()
        .map(|k| k.get_ref())
        .chain(spec.judges.iter().map(|j| j.output.get_ref()))
    {
        if !outputs.contains(&name.as_str()) {
            return Err(unprocessable(format!(
                "the program binds no output `{name}`"
            )));
        }
    }
    Plan::new(
        PathBuf::from("(POST /v1/evals)"),
        spec,
        PathBuf::from("(the request's rows)"),
        rows,
        program,
    )
    .map_err(unprocessable)
}

/// Starts an eval of an uploaded artifact over the rows given, with the server's driver; it
/// runs on, and its record is kept in the store as each row is scored.
#[utoipa::path(
    post,
    path = "/v1/evals",
    request_body = NewEval,
    responses(
        (status = 201, body = EvalCreated),
        (status = 404, body = ErrorBody, description = "no such artifact"),
        (status = 422, body = ErrorBody, description = "rows, checks or judges that do not read, or name what the program does not have"),
    )
)]
pub async fn create_eval(
    State(app): State<Shared>,
    Body(new): Body<NewEval>,
) -> Result<(StatusCode, Json<EvalCreated>), ApiError> {
    let program = app.library.get(&new.artifact).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "no artifact {} (upload it with PUT /v1/artifacts)",
                new.artifact
            ),
        )
    })?;
    let plan = Arc::new(plan_of(&new, program)?);
    let home = &app.evals;
    let variants: Vec<(Option<String>, DriverSettings)> = if new.models.is_empty() {
        vec![(None, home.driver.clone())]
    } else {
        new.models
            .iter()
            .map(|m| (Some(m.clone()), home.driver.with_model(m)))
            .collect()
    };
    let mut opts = EvalOptions {
        variants,
        store: app.store.clone(),
        place: home.place.clone(),
        scratch: home.scratch.clone(),
        jobs: 4,
        memo: false,
        resume: None,
        tapes: None,
    };
    let record = eval::new_record(&plan, &opts);
    let id = record.id.clone();
    // Kept before its id is given out: `GET /v1/evals/{id}` finds it at once.
    eval::keep(&*app.store, &record).await?;
    opts.resume = Some(record);
    // An eval's runs keep their machines on one thread: a thread of its own.
    std::thread::Builder::new()
        .name(format!("eval-{id}"))
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("prosevm serve: eval cannot start: {e}");
                    return;
                }
            };
            if let Err(e) = rt.block_on(eval::run(plan, &opts, |_, _, _| {})) {
                eprintln!("prosevm serve: eval stopped: {e}");
            }
        })
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok((StatusCode::CREATED, Json(EvalCreated { id })))
}

/// An eval's record, as JSON, with each model's figures.
fn with_summaries(record: &EvalRecord) -> serde_json::Value {
    let mut doc = serde_json::to_value(record).unwrap_or_default();
    doc["summaries"] = record
        .variants
        .iter()
        .map(|v| {
            let s = v.summary(&record.scores);
            serde_json::json!({"model": v.model, "pass_rate": s.pass_rate(), "summary": s})
        })
        .collect::<Vec<_>>()
        .into();
    doc
}

/// The record of eval `id` from the store.
async fn record_of(app: &Shared, id: &str) -> Result<EvalRecord, ApiError> {
    let v = app.store.eval(id).await?;
    serde_json::from_value(v)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("eval {id}: {e}")))
}

/// Lists the evals kept, oldest first.
#[utoipa::path(get, path = "/v1/evals", responses((status = 200, body = EvalList)))]
pub async fn list_evals(State(app): State<Shared>) -> Result<Json<EvalList>, ApiError> {
    let evals = app
        .store
        .evals()
        .await?
        .into_iter()
        .filter_map(|v| serde_json::from_value::<EvalRecord>(v).ok())
        .map(|r| with_summaries(&r))
        .collect();
    Ok(Json(EvalList { evals }))
}

/// An eval: its record (every row's try, its scores and reasons), with each model's figures
/// (`summaries`); `finished` is set once every row is scored.
#[utoipa::path(
    get,
    path = "/v1/evals/{id}",
    params(("id" = String, Path, description = "the eval's id")),
    responses((status = 200, content_type = "application/json", description = "the eval's record"), (status = 404, body = ErrorBody))
)]
pub async fn get_eval(
    State(app): State<Shared>,
    Named(RunId(id)): Named<RunId>,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(with_summaries(&record_of(&app, &id).await?)))
}

/// An eval's page: one self-contained HTML page, as `prosevm eval -o` writes it.
#[utoipa::path(
    get,
    path = "/v1/evals/{id}/report",
    params(("id" = String, Path, description = "the eval's id")),
    responses((status = 200, content_type = "text/html", description = "the page"), (status = 404, body = ErrorBody))
)]
pub async fn eval_report(
    State(app): State<Shared>,
    Named(RunId(id)): Named<RunId>,
) -> Result<Response, ApiError> {
    let record = record_of(&app, &id).await?;
    Ok(super::guards::guarded(
        StatusCode::OK,
        axum::response::Html(eval::page::render(&record)).into_response(),
    ))
}
