//! An imported program offered to an agent as a tool (`use "./lib/digest.prose" as condense`,
//! then `skills: ["condense"]`): the tool's arguments are the program's inputs, and a call
//! runs the program as a child run, with the same driver and workshop, whose outputs return
//! to the model as a JSON object.
//!
//! The child run is not journaled step by step: its outputs are the tool call's output, which
//! is journaled like any tool's. A run killed while a child runs reports the call as
//! interrupted when it resumes (the model may call it again).

use super::run_durable;
use crate::driver::Driver;
use bytecode_spec::verify::Verified;
use bytecode_spec::TplPart;
use futures_util::future::BoxFuture;
use prose_agent::tools::{Tool, ToolContext};
use prose_agent::workshop::Workshop;
use prose_machine::protocol::{ToolOutput, ToolSpec};
use prose_machine::value::Value;
use prose_machine::{Limits, Machine};
use rustc_hash::FxHashMap;
use serde_json::json;
use std::sync::{Arc, Weak};

/// A program run as a tool.
pub struct ProgramTool<D> {
    spec: ToolSpec,
    artifact: Arc<Verified>,
    module: u32,
    inputs: Vec<String>,
    driver: Arc<D>,
    workshop: Weak<Workshop>,
    config: super::RunConfig,
}

impl<D: Driver> ProgramTool<D> {
    /// The program in module `module` of `artifact`, offered under `name`, run with
    /// `driver` and `workshop` when called.
    pub fn new(
        name: &str,
        artifact: Arc<Verified>,
        module: u32,
        driver: Arc<D>,
        workshop: Weak<Workshop>,
        config: super::RunConfig,
    ) -> Option<ProgramTool<D>> {
        let m = artifact.modules.get(module as usize)?;
        let mut properties = serde_json::Map::new();
        let mut inputs = Vec::new();
        for input in m.inputs.values().filter(|i| i.parameter) {
            let input_name = m.strings[input.name].clone();
            // The description's literal text (its interpolations have no values here).
            let description: String = input
                .description
                .map(|t| {
                    m.templates[t]
                        .parts
                        .iter()
                        .filter_map(|p| match p {
                            TplPart::Text(s) => Some(m.strings[*s].as_str()),
                            TplPart::Var { .. } => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            properties.insert(
                input_name.clone(),
                json!({"type": "string", "description": description}),
            );
            inputs.push(input_name);
        }
        let outputs: Vec<&str> = m
            .outputs
            .values()
            .map(|o| m.strings[o.name].as_str())
            .collect();
        let origin = if m.import_path.is_empty() {
            m.name.clone()
        } else {
            m.import_path.clone()
        };
        let spec = ToolSpec {
            name: tool_name(name),
            description: format!(
                "Runs the program `{origin}` with the inputs given as arguments, and returns its outputs ({}) as a JSON object.",
                outputs.join(", ")
            ),
            input_schema: json!({
                "type": "object",
                "properties": properties,
                "required": inputs,
                "additionalProperties": false,
            }),
        };
        Some(ProgramTool {
            spec,
            artifact,
            module,
            inputs,
            driver,
            workshop,
            config,
        })
    }
}

/// A skill name as a tool name: letters, digits, `_` and `-`, at most 64 characters.
fn tool_name(name: &str) -> String {
    let mut n: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    n.truncate(64);
    n
}

impl<D: Driver> Tool for ProgramTool<D> {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call<'a>(
        &'a self,
        args: &'a serde_json::Value,
        _cx: &'a ToolContext<'a>,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let mut inputs = FxHashMap::default();
            for name in &self.inputs {
                match args.get(name) {
                    Some(serde_json::Value::String(s)) => {
                        inputs.insert(name.clone(), Value::text(s.as_str()));
                    }
                    Some(other) => {
                        inputs.insert(name.clone(), Value::from_json(other));
                    }
                    None => {
                        return ToolOutput::error(format!(
                            "missing argument `{name}` (the program's inputs: {})",
                            self.inputs.join(", ")
                        ))
                    }
                }
            }
            let (artifact, module) = (self.artifact.clone(), self.module);
            let driver = self.driver.clone();
            let workshop = match self.workshop.upgrade() {
                Some(w) => w,
                None => return ToolOutput::error("the run this program belongs to has ended"),
            };
            let config = self.config.clone();
            // A machine is not Send: the child runs on a thread of its own.
            let child = tokio::task::spawn_blocking(move || {
                let mut machine =
                    Machine::for_program(artifact, module, &inputs, Limits::default())
                        .map_err(|e| e.to_string())?;
                machine.set_trace(false);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start the child run: {e}"))?;
                runtime
                    .block_on(run_durable(
                        machine,
                        driver,
                        workshop,
                        &config,
                        None,
                        &mut |_: &prose_machine::trace::Event| {},
                    ))
                    .map_err(|e| e.to_string())
            })
            .await;
            match child {
                Ok(Ok(outputs)) => {
                    let obj: serde_json::Map<String, serde_json::Value> = outputs
                        .iter()
                        .map(|(k, v)| (k.clone(), v.to_json()))
                        .collect();
                    ToolOutput::ok(serde_json::Value::Object(obj).to_string())
                }
                Ok(Err(e)) => ToolOutput::error(format!("the program failed: {e}")),
                Err(e) => ToolOutput::error(format!("the program's run failed: {e}")),
            }
        })
    }
}
