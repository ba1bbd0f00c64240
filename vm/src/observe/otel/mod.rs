//! OpenTelemetry export: when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, a run becomes a trace sent over OTLP/HTTP
//! (`OTEL_EXPORTER_OTLP_PROTOCOL` `http/protobuf`, the default, or `http/json`; headers,
//! timeout and resource from the standard variables), shaped by the GenAI semantic
//! conventions:
//!
//! ```text
//! invoke_workflow {program}            the run
//! ├── invoke_agent {agent}             a session (gen_ai.agent.name, code.filepath, code.lineno)
//! │   ├── chat {model}                 a model turn (gen_ai.request.model, gen_ai.usage.*)
//! │   └── execute_tool {tool}          a tool call (gen_ai.tool.name)
//! └── ...
//! ```
//!
//! Spans are built from trace events as they arrive, with the times the events give: a turn
//! or a tool call ends when its event comes and started its `ms` earlier. Spans go out in
//! batches from the SDK's own thread; [`Otel::finish`] ends the run's span and flushes.

mod export;
mod http;

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use prose_machine::protocol::{RequestId, Usage};
use prose_machine::trace::Event;
use prose_runtime::driver::chat::Models;
use prose_runtime::driver::settings::DriverSettings;
use prose_runtime::observe::Observer;
use prose_runtime::record::{RunRecord, RunStatus};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The variables that turn export on.
const ENDPOINTS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// A session's span and what its children need from it.
struct Open {
    cx: Context,
    model: Option<String>,
}

/// The OpenTelemetry exporter of one run: an [`Observer`].
pub struct Otel {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    run: Context,
    sessions: HashMap<RequestId, Open>,
    /// The source file of each module (`code.filepath`).
    files: Vec<String>,
    provider_name: String,
    /// How a chat provider maps `model:` aliases to its model ids.
    models: Option<Models>,
    /// Why exports failed, when they did.
    failures: export::Failures,
}

/// The value of the first of `vars` that is set and not empty.
fn env_first(vars: &[&str]) -> Option<String> {
    vars.iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
}

/// The protocol the standard variables ask for (default `http/protobuf`).
fn protocol() -> Result<Protocol, String> {
    let vars = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ];
    match env_first(&vars).as_deref().map(str::trim) {
        None | Some("http/protobuf") => Ok(Protocol::HttpBinary),
        Some("http/json") => Ok(Protocol::HttpJson),
        Some(other) => Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={other:?} is not supported (use http/protobuf or http/json)"
        )),
    }
}

/// The export timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, milliseconds; default 10 s).
fn timeout() -> Duration {
    env_first(&[
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ])
    .and_then(|v| v.trim().parse().ok())
    .map_or(Duration::from_secs(10), Duration::from_millis)
}

/// The source file of each module of a run of `record` whose modules are `modules`
/// (`(name, import path)`): the program's origin, and imports beside it.
fn files(record: &RunRecord, modules: &[(String, String)]) -> Vec<String> {
    let dir = record
        .origin
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    modules
        .iter()
        .enumerate()
        .map(|(i, (name, import))| {
            if i == 0 {
                record.origin.display().to_string()
            } else if import.starts_with('.') {
                dir.join(import).display().to_string()
            } else if import.is_empty() {
                PathBuf::from(name)
                    .with_extension("prose")
                    .display()
                    .to_string()
            } else {
                import.clone()
            }
        })
        .collect()
}

/// Where a run's spans go: an OTLP/HTTP exporter set up from the standard variables, with
/// the SDK's batch processor in front of it.
pub struct Export {
    provider: SdkTracerProvider,
    failures: export::Failures,
}

impl Export {
    /// The exporter the environment asks for, if it asks for one (checked before a run
    /// starts, so a bad setting stops nothing half-way).
    pub fn from_env() -> Result<Option<Export>, String> {
        if env_first(&ENDPOINTS).is_none() {
            return Ok(None);
        }
        let client = http::BlockingClient::new(timeout())?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(protocol()?)
            .with_http_client(client)
            .build()
            .map_err(|e| format!("OpenTelemetry exporter: {e}"))?;
        let (exporter, failures) = export::Reporting::new(exporter);
        let mut resource = Resource::builder();
        let named = std::env::var_os("OTEL_SERVICE_NAME").is_some()
            || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
        if !named {
            resource = resource.with_service_name("prosevm");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        Ok(Some(Export { provider, failures }))
    }
}

impl Otel {
    /// The exporter of `record`'s run, whose modules are `modules` (`(name, import path)`),
    /// sending through `export`. Its `invoke_workflow` span starts now.
    pub fn start(export: Export, record: &RunRecord, modules: &[(String, String)]) -> Otel {
        let Export { provider, failures } = export;
        let tracer = provider.tracer("prosevm");
        let span = tracer
            .span_builder(format!("invoke_workflow {}", record.program))
            .with_kind(SpanKind::Internal)
            .with_start_time(SystemTime::now())
            .with_attributes([
                KeyValue::new("gen_ai.operation.name", "invoke_workflow"),
                KeyValue::new("gen_ai.workflow.name", record.program.clone()),
                KeyValue::new("prose.run.id", record.id.clone()),
                KeyValue::new("code.filepath", record.origin.display().to_string()),
            ])
            .start(&tracer);
        Otel {
            run: Context::new().with_span(span),
            tracer,
            provider,
            sessions: HashMap::new(),
            files: files(record, modules),
            provider_name: record.driver.name().to_string(),
            models: match &record.driver {
                DriverSettings::Openai(c) | DriverSettings::Anthropic(c) => Some(c.models.clone()),
                _ => None,
            },
            failures,
        }
    }

    /// Ends the run's span with how the run ended, and sends every span still waiting; an
    /// error says why some spans did not reach the collector.
    pub fn finish(self, status: RunStatus, error: Option<&str>) -> Result<(), String> {
        let now = SystemTime::now();
        for open in self.sessions.values() {
            let span = open.cx.span();
            span.set_status(Status::error("the run ended before the session did"));
            span.end_with_timestamp(now);
        }
        let span = self.run.span();
        span.set_attribute(KeyValue::new("prose.run.status", status.as_str()));
        if let Some(e) = error {
            span.set_status(Status::error(e.to_string()));
        } else if status == RunStatus::Finished {
            span.set_status(Status::Ok);
        }
        span.end_with_timestamp(now);
        let shutdown = self.provider.shutdown();
        match self.failures.first() {
            Some(why) => Err(format!("OpenTelemetry export failed: {why}")),
            None => shutdown.map_err(|e| format!("OpenTelemetry export: {e}")),
        }
    }

    /// A child span of `parent` named `name` that ran for `ms` until now.
    fn finished_child(
        &self,
        parent: &Context,
        name: String,
        kind: SpanKind,
        ms: u64,
        attributes: Vec<KeyValue>,
        status: Option<Status>,
    ) {
        let end = SystemTime::now();
        let start = end.checked_sub(Duration::from_millis(ms)).unwrap_or(end);
        let mut span = self
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, parent);
        if let Some(status) = status {
            span.set_status(status);
        }
        span.end_with_timestamp(end);
    }

    fn session_parent(&self, id: &RequestId) -> (&Context, Option<String>) {
        match self.sessions.get(&id.whole()) {
            Some(o) => (&o.cx, o.model.clone()),
            None => (&self.run, None),
        }
    }
}

/// The tokens of `used` as the GenAI conventions name them: the input tokens counting every
/// kind (cached ones included), and apart from them those read from and written to the
/// provider's cache; with the memo's answers, when it gave any.
fn tokens(used: Option<&Usage>) -> Vec<KeyValue> {
    let Some(u) = used else {
        return Vec::new();
    };
    let mut kv = vec![
        KeyValue::new("gen_ai.usage.input_tokens", u.input_tokens() as i64),
        KeyValue::new("gen_ai.usage.output_tokens", u.output_tokens as i64),
    ];
    for (name, n) in [
        ("gen_ai.usage.cache_read.input_tokens", u.cache_read_tokens),
        (
            "gen_ai.usage.cache_creation.input_tokens",
            u.cache_write_tokens,
        ),
        ("prose.memo.answers", u.from_memo),
    ] {
        if n > 0 {
            kv.push(KeyValue::new(name, n as i64));
        }
    }
    kv
}

/// The time to the first token as the GenAI conventions name it, in seconds.
fn first_token(ms: Option<u64>) -> Option<KeyValue> {
    ms.map(|ms| KeyValue::new("gen_ai.server.time_to_first_token", ms as f64 / 1000.0))
}

impl Observer for Otel {
    fn event(&mut self, e: &Event) {
        match e {
            Event::Session {
                id,
                module,
                line,
                text,
                agent,
                model,
                ..
            } => {
                let name = agent.clone().unwrap_or_else(|| "session".into());
                let mut attributes = vec![
                    KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                    KeyValue::new("gen_ai.agent.name", name.clone()),
                    KeyValue::new("gen_ai.provider.name", self.provider_name.clone()),
                    KeyValue::new("prose.request.id", id.to_string()),
                    KeyValue::new("prose.fiber", id.lineage.to_string()),
                    KeyValue::new("prose.session.text", text.clone()),
                    KeyValue::new(
                        "code.filepath",
                        self.files
                            .get(*module as usize)
                            .cloned()
                            .unwrap_or_default(),
                    ),
                    KeyValue::new("code.lineno", i64::from(*line)),
                ];
                // The model id sent, when the driver maps aliases; else the name as written.
                let model = match &self.models {
                    Some(m) => Some(m.resolve(model.as_deref()).to_string()),
                    None => model.clone(),
                };
                if let Some(m) = &model {
                    attributes.push(KeyValue::new("gen_ai.request.model", m.clone()));
                }
                let span = self
                    .tracer
                    .span_builder(format!("invoke_agent {name}"))
                    .with_kind(SpanKind::Internal)
                    .with_start_time(SystemTime::now())
                    .with_attributes(attributes)
                    .start_with_context(&self.tracer, &self.run);
                self.sessions.insert(
                    id.clone(),
                    Open {
                        cx: Context::new().with_span(span),
                        model,
                    },
                );
            }
            Event::Turn {
                id,
                tool_calls,
                ms,
                first_token_ms,
                used,
            } => {
                let (parent, model) = self.session_parent(id);
                let mut attributes = vec![
                    KeyValue::new("gen_ai.operation.name", "chat"),
                    KeyValue::new("gen_ai.provider.name", self.provider_name.clone()),
                    KeyValue::new("prose.request.id", id.to_string()),
                    KeyValue::new("prose.tool_calls", *tool_calls as i64),
                ];
                attributes.extend(tokens(used.as_ref()));
                attributes.extend(first_token(*first_token_ms));
                let name = match &model {
                    Some(m) => {
                        attributes.push(KeyValue::new("gen_ai.request.model", m.clone()));
                        format!("chat {m}")
                    }
                    None => "chat".into(),
                };
                let parent = parent.clone();
                self.finished_child(&parent, name, SpanKind::Client, *ms, attributes, None);
            }
            Event::ToolCall {
                id,
                tool,
                refused,
                is_error,
                ms,
                bytes,
                ..
            } => {
                let parent = self.session_parent(id).0.clone();
                let attributes = vec![
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("gen_ai.tool.name", tool.clone()),
                    KeyValue::new("prose.request.id", id.to_string()),
                    KeyValue::new("prose.tool.output_bytes", *bytes as i64),
                ];
                let status = match refused {
                    Some(why) => Some(Status::error(format!("refused: {why}"))),
                    None if *is_error => Some(Status::error("the tool reported an error")),
                    None => None,
                };
                self.finished_child(
                    &parent,
                    format!("execute_tool {tool}"),
                    SpanKind::Internal,
                    *ms,
                    attributes,
                    status,
                );
            }
            Event::Usage {
                id,
                ms,
                first_token_ms,
                used,
            } => {
                if let Some(open) = self.sessions.get(id) {
                    let span = open.cx.span();
                    span.set_attributes(tokens(used.as_ref()));
                    if let Some(kv) = first_token(*first_token_ms) {
                        span.set_attribute(kv);
                    }
                    span.set_attribute(KeyValue::new("prose.latency_ms", *ms as i64));
                    if let Some(c) = used.and_then(|u| u.cost) {
                        span.set_attribute(KeyValue::new("prose.cost_usd", c));
                    }
                }
            }
            Event::Nudge { id, why } => {
                if let Some(open) = self.sessions.get(id) {
                    open.cx.span().add_event(
                        "nudge",
                        vec![KeyValue::new("prose.nudge.reason", why.clone())],
                    );
                }
            }
            Event::Retry { id, attempt, error } => {
                if let Some(open) = self.sessions.get(id) {
                    open.cx.span().add_event(
                        "retry",
                        vec![
                            KeyValue::new("prose.attempt", i64::from(*attempt)),
                            KeyValue::new("error.message", error.clone()),
                        ],
                    );
                }
            }
            Event::Answer { id, .. } => {
                if let Some(open) = self.sessions.remove(id) {
                    let span = open.cx.span();
                    span.set_status(Status::Ok);
                    span.end_with_timestamp(SystemTime::now());
                }
            }
            Event::RequestFailed { id, error } => {
                if let Some(open) = self.sessions.remove(id) {
                    let span = open.cx.span();
                    span.set_attribute(KeyValue::new("error.type", "session_failed"));
                    span.set_status(Status::error(error.clone()));
                    span.end_with_timestamp(SystemTime::now());
                }
            }
            Event::Flow { id, result } => self.run.span().add_event(
                "condition",
                vec![
                    KeyValue::new("prose.request.id", id.to_string()),
                    KeyValue::new("prose.verdict", *result),
                ],
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes(kv: &[KeyValue]) -> Vec<(String, String)> {
        kv.iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect()
    }

    #[test]
    fn tokens_written_to_the_providers_cache_are_said_apart() {
        let used = Usage {
            input_tokens: 100,
            output_tokens: 7,
            cache_read_tokens: 0,
            cache_write_tokens: 2_400,
            ..Usage::default()
        };
        let kv = attributes(&tokens(Some(&used)));
        assert!(
            kv.contains(&("gen_ai.usage.input_tokens".into(), "2500".into())),
            "{kv:?}"
        );
        assert!(
            kv.contains(&("gen_ai.usage.output_tokens".into(), "7".into())),
            "{kv:?}"
        );
        assert!(
            kv.contains(&(
                "gen_ai.usage.cache_creation.input_tokens".into(),
                "2400".into()
            )),
            "{kv:?}"
        );
        assert!(
            !kv.iter()
                .any(|(k, _)| k == "gen_ai.usage.cache_read.input_tokens"),
            "nothing was read from the cache: {kv:?}"
        );
        assert!(tokens(None).is_empty());
    }

    #[test]
    fn the_time_to_the_first_token_is_in_seconds() {
        let kv = first_token(Some(1_250)).expect("an attribute");
        assert_eq!(kv.key.as_str(), "gen_ai.server.time_to_first_token");
        assert_eq!(kv.value.to_string(), "1.25");
        assert!(first_token(None).is_none());
    }
}
