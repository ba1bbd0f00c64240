//! Driving a run to its end: every answer journaled before it is used, the run
//! directory's views following the run, the record updated with how it ended.

use super::place::skill_names;
use super::Run;
use prose_agent::mcp::McpHub;
use prose_machine::snapshot::Snapshot;
use prose_machine::trace::Event;
use prose_machine::value::Value;
use prose_machine::RuntimeError;
use prose_runtime::driver::Driver;
use prose_runtime::observe::Observer;
use prose_runtime::record::{RunFailure, RunStatus, WaitingInput};
use prose_runtime::runner::program_skill::ProgramTool;
use prose_runtime::runner::{run_durable, Durable};
use prose_settings::McpConfig;
use prose_store::view::RunView;
use prose_store::StoreError;
use std::sync::Arc;

impl Run {
    /// Drives the run to its end with `driver` (which should be `record().driver`
    /// connected): every answer is journaled before it is used, the run directory's views
    /// follow the run, and `observer` sees every trace event. The record is updated with
    /// how the run ended. Returns the outputs, or the error that ended the run.
    pub async fn drive<D: Driver>(
        self,
        driver: Arc<D>,
        observer: &mut impl Observer,
    ) -> Result<Result<Vec<(String, Value)>, RuntimeError>, StoreError> {
        let Run {
            held,
            mut record,
            artifact,
            machine,
            journal,
            replay,
            mut place,
            warnings: _,
        } = self;
        place.config.budget =
            prose_runtime::runner::Budget::new(record.options.max_tokens, record.options.max_cost);
        let (mut workshop, _) = place
            .workshop(&record, &artifact)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let servers: Vec<&str> = skill_names(&artifact)
            .into_iter()
            .filter(|n| place.mcp.servers.contains_key(*n))
            .collect();
        if !servers.is_empty() {
            let mut config = McpConfig::default();
            for s in &servers {
                config
                    .servers
                    .insert(s.to_string(), place.mcp.servers[*s].clone());
            }
            let hub = McpHub::start(&config, &record.workdir)
                .await
                .map_err(|e| StoreError::Invalid(e.to_string()))?;
            workshop.set_mcp(hub);
        }
        // A program run as a tool runs within its session's place: it shares no places
        // with other runs (it would wait for the place its own session holds).
        let config = prose_runtime::runner::RunConfig {
            shared: None,
            ..place.config.clone()
        };
        let workshop = Arc::new_cyclic(|weak| {
            workshop.bind_programs(|name, module| {
                let tool = ProgramTool::new(
                    name,
                    artifact.clone(),
                    module,
                    driver.clone(),
                    weak.clone(),
                    config.clone(),
                )?;
                Some(Arc::new(tool) as Arc<dyn prose_agent::tools::Tool>)
            });
            workshop
        });
        let mut durable = Durable {
            journal,
            replay,
            batch: driver.side_effect_free(),
            approvals: std::mem::take(&mut record.approvals),
        };
        let inputs: Vec<(String, Value)> = record
            .inputs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut view = RunView::new(
            held.views().to_path_buf(),
            held.id().to_string(),
            record.started.clone(),
            artifact,
            &inputs,
            record.agents.clone(),
        );
        if !held.writes_views() {
            view.without_files();
        }
        let mut watch = Watching {
            view,
            observer,
            waiting: Vec::new(),
        };
        let result = run_durable(
            machine,
            driver,
            workshop.clone(),
            &place.config,
            Some(&mut durable),
            &mut watch,
        )
        .await;
        if let Some(hub) = workshop.take_mcp() {
            hub.stop().await;
        }
        // The calls that wait for an approval, as the run left them (none once it finished).
        record.approvals = std::mem::take(&mut durable.approvals);
        match &result {
            Ok(outputs) => {
                record.status = RunStatus::Finished;
                record.approvals.clear();
                record.outputs = Some(
                    outputs
                        .iter()
                        .map(|(k, v)| (k.clone(), v.to_json()))
                        .collect(),
                );
            }
            Err(e) if e.code == bytecode_spec::Code::E216 => {
                record.status = RunStatus::Interrupted;
            }
            Err(e) if e.code == bytecode_spec::Code::E220 => {
                record.status = RunStatus::Waiting;
                record.waiting = std::mem::take(&mut watch.waiting);
                record.error = Some(RunFailure {
                    code: e.code.to_string(),
                    message: e.message.clone(),
                    request: None,
                });
            }
            Err(e) if e.code == bytecode_spec::Code::E217 => {
                record.status = RunStatus::Paused;
                record.error = Some(RunFailure {
                    code: e.code.to_string(),
                    message: e.message.clone(),
                    request: None,
                });
            }
            Err(e) => {
                record.status = RunStatus::Failed;
                record.error = Some(RunFailure {
                    code: e.code.to_string(),
                    message: e.to_string(),
                    request: e.request.clone(),
                });
            }
        }
        // Tokens, or answers the memo gave (a run it answered whole spent none).
        record.usage =
            Some(place.config.budget.spent()).filter(|u| u.tokens() > 0 || u.from_memo > 0);
        record.journal = durable
            .journal
            .close()
            .await
            .map_err(|e| StoreError::Invalid(e.0))?;
        // The views first: the record saying the run ended is the commit point, so a run
        // killed in between is resumed (and its views rebuilt) rather than reported ended.
        watch.view.finish(record.status.as_str())?;
        held.write_record(&record).await?;
        Ok(result)
    }
}

/// The run directory's views and the caller's observer, watching together; and the inputs
/// the run waits for, as the runner reports them.
struct Watching<'a, O> {
    view: RunView,
    observer: &'a mut O,
    waiting: Vec<WaitingInput>,
}

impl<O: Observer> Observer for Watching<'_, O> {
    fn event(&mut self, e: &Event) {
        if let Event::Waiting { id, name, question } = e {
            self.waiting.push(WaitingInput {
                request: id.clone(),
                name: name.clone(),
                question: question.clone(),
            });
        }
        self.view.observe(e);
        self.observer.event(e);
    }

    fn wants_snapshot(&mut self, idle: bool) -> bool {
        self.view.due(idle)
    }

    fn snapshot(&mut self, snapshot: &Snapshot) {
        self.view.write(snapshot);
    }
}
