//! Running programs: `exec` and `run` start a run in a store, `resume` takes one up again;
//! both drive it with its driver while the trace goes to stderr and the outputs to stdout.

use super::args::{parse_inputs, RunArgs, Trace};
use super::{build, fail, open_store, resolve, run_error, runtime, store_error};
use prose_machine::trace::Event;
use prose_runtime::driver::settings::{AnyDriver, DriverSettings};
use prose_runtime::driver::stdio;
use prose_runtime::memo::{MemoStore, Memoised};
use prose_runtime::observe::SessionLimits;
use prose_runtime::program::Program;
use prose_runtime::record::{RunRecord, RunStatus};
use prose_store::{JournalCheck, Store};
use prosec::console::{self, Console, Exit, Format};
use prosevm::observe::envelope::Envelope;
use prosevm::observe::otel::{Export, Otel};
use prosevm::observe::progress::Progress;
use prosevm::observe::summary::{self, Ending, Summary};
use prosevm::run::{Resumed, Resuming, Run};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

/// How the trace reaches stderr.
enum Display {
    /// Narration lines.
    Narrate,
    /// Live progress on a terminal.
    Progress(Progress),
    /// Stamped JSON lines.
    Json(Envelope),
    /// Nothing.
    Quiet,
}

/// Everything that watches a run from the CLI: the trace display, the summary and, when the
/// environment asks for it, the OpenTelemetry exporter.
struct Watchers {
    display: Display,
    summary: Summary,
    otel: Option<Otel>,
}

impl Watchers {
    /// The watchers `args` ask for, for `run`, exporting through `export` if given.
    fn new(args: &RunArgs, run: &Run, export: Option<Export>) -> Watchers {
        let id = run.record().id.as_str();
        let modules: Vec<(String, String)> = run
            .artifact()
            .modules
            .iter()
            .map(|m| (m.name.clone(), m.import_path.clone()))
            .collect();
        let otel = export.map(|e| Otel::start(e, run.record(), &modules));
        let limits = SessionLimits {
            turns: run.record().options.max_turns,
            time: run
                .record()
                .options
                .session_timeout_s
                .and_then(|s| Duration::try_from_secs_f64(s).ok()),
        };
        let display = match args.trace {
            Trace::Narrate if !args.no_progress && std::io::stderr().is_terminal() => {
                Display::Progress(Progress::stderr(limits))
            }
            Trace::Narrate => Display::Narrate,
            Trace::Json => Display::Json(Envelope::new(id)),
            Trace::Quiet => Display::Quiet,
        };
        Watchers {
            display,
            summary: Summary::new().with_limits(limits),
            otel,
        }
    }

    /// The run ended as `ending` says: the progress display goes, then the summary (in
    /// narration) or the error and end events (in JSON) are written.
    fn ended(&mut self, ending: &Ending) {
        let warning = self
            .otel
            .take()
            .and_then(|otel| otel.finish(ending.status, ending.error).err());
        match &mut self.display {
            Display::Json(env) => {
                if let Some(w) = &warning {
                    eprintln!("{}", env.warning(w));
                }
                if let Some(e) = ending.error {
                    eprintln!("{}", env.error(e, ending.code));
                }
                eprintln!("{}", env.end(ending.status, ending.error));
                return;
            }
            Display::Progress(p) => p.finish(),
            Display::Narrate | Display::Quiet => {}
        }
        if let Some(w) = &warning {
            eprintln!("prosevm: warning: {w}");
        }
        if matches!(self.display, Display::Quiet) {
            return;
        }
        if ending.status == RunStatus::Finished {
            eprintln!("[Program] Program complete");
        }
        for line in self.summary.lines(ending, self.summary.elapsed()) {
            eprintln!("{line}");
        }
    }
}

impl prose_runtime::observe::Observer for Watchers {
    fn event(&mut self, e: &Event) {
        self.summary.event(e);
        if let Some(otel) = &mut self.otel {
            otel.event(e);
        }
        match &mut self.display {
            Display::Narrate => {
                if let Some(line) = e.narrate() {
                    eprintln!("{line}")
                }
            }
            Display::Progress(p) => p.event(e),
            Display::Json(env) => eprintln!("{}", env.event(e)),
            Display::Quiet => {}
        }
    }
}

/// Starts a run of `program` in the store `args` name and drives it.
pub fn start(program: Program, args: &RunArgs) -> ExitCode {
    let inputs = match args.inputs_for(&program) {
        Ok(i) => i,
        Err(e) => return fail(e, Exit::Unusable),
    };
    let (settings, place) = match (args.driver(), args.place()) {
        (Ok(s), Ok(p)) => (s, p),
        (Err(e), _) | (_, Err(e)) => return fail(e, Exit::Unusable),
    };
    // Before a store is opened or a driver connected: an untrusted artifact writes nothing.
    if let Err(e) = place.check_trust(&program.bytes) {
        return run_error(e);
    }
    let options = match args.options() {
        Ok(o) => o,
        Err(e) => return fail(e, Exit::Unusable),
    };
    if let Err(e) = prosevm::run::check_budget(
        &settings,
        &program.artifact,
        options.max_tokens,
        options.max_cost,
    ) {
        return fail(e, Exit::Unusable);
    }
    let export = match Export::from_env() {
        Ok(e) => e,
        Err(e) => return fail(e, Exit::Unusable),
    };
    let (runtime, store) = match opened(args) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let memo = memo_of(&*store, &settings, options.memo);
    let connected = match connect(runtime, &settings, &program.artifact, memo) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let started = connected.runtime.block_on(Run::start(
        &*store, &program, inputs, settings, options, &place,
    ));
    match started {
        Ok(run) => {
            for w in run.warnings() {
                eprintln!("prosevm: warning: {w}");
            }
            drive(run, connected, args, export)
        }
        Err(e) => run_error(e),
    }
}

/// The runtime, and the store `args` name on it.
fn opened(args: &RunArgs) -> Result<(Runtime, Box<dyn Store>), ExitCode> {
    let runtime = runtime()?;
    let store = open_store(
        &runtime,
        args.store.as_deref(),
        args.state_dir.as_deref(),
        3,
    )?;
    Ok((runtime, store))
}

/// On Ctrl-C or SIGTERM, asks `stop` to stop cleanly, saying `first` after `who`; on a
/// second one, kills the process groups of the commands still running and exits at once
/// with status 130.
///
/// The handlers are in place when this returns (not once a task gets round to it): a signal
/// sent as soon as the process says it is ready (`prosevm serve: listening on …`) stops it
/// cleanly rather than killing it.
pub fn stop_on_signals(
    runtime: &tokio::runtime::Runtime,
    stop: prose_runtime::runner::StopSignal,
    who: &'static str,
    first: &'static str,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = {
        // Registering a handler needs the runtime's signal driver.
        let _inside = runtime.enter();
        (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        )
    };
    let (Ok(mut int), Ok(mut term)) = handlers else {
        return;
    };
    runtime.spawn(async move {
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            if stop.asked() {
                eprintln!("{who}: stopping at once");
                // Exiting drops nothing: the commands' process groups are killed first.
                prose_agent::group::kill_all();
                std::process::exit(130);
            }
            eprintln!("{who}: {first}");
            stop.ask();
        }
    });
}

/// A driver connected (with the memo in front of it, under `--memo`), with the runtime it
/// runs on.
struct Connected {
    driver: Arc<Memoised<AnyDriver>>,
    runtime: tokio::runtime::Runtime,
}

/// The memo of `store` when `on`; a warning when the driver `settings` describe keeps no
/// answers there.
fn memo_of(store: &dyn Store, settings: &DriverSettings, on: bool) -> Option<Arc<dyn MemoStore>> {
    if !on {
        return None;
    }
    if !settings.answers_memoised() {
        let whose = match settings {
            DriverSettings::Openai(_) | DriverSettings::Anthropic(_) => {
                "a replayed tape's".to_string()
            }
            other => format!("the {} driver's", other.name()),
        };
        eprintln!(
            "prosevm: warning: the memo keeps the answers of the openai and anthropic drivers from their providers; {whose} are neither kept nor looked up"
        );
    }
    Some(store.memo())
}

/// Connects the driver `settings` describe on `runtime`, with `memo` in front of it, and
/// checks, before anything runs, that its provider offers every model `artifact`'s
/// sessions name.
fn connect(
    runtime: Runtime,
    settings: &DriverSettings,
    artifact: &bytecode_spec::verify::Verified,
    memo: Option<Arc<dyn MemoStore>>,
) -> Result<Connected, ExitCode> {
    let driver = runtime
        .block_on(prosevm::run::connect(settings, artifact, memo))
        .map_err(|e| fail(e, Exit::Unusable))?;
    Ok(Connected { driver, runtime })
}

/// Drives `run` with its driver, connected; prints the trace, then the outputs; sends spans
/// through `export` if given.
fn drive(run: Run, connected: Connected, args: &RunArgs, export: Option<Export>) -> ExitCode {
    let settings = run.record().driver.clone();
    let Connected { driver, runtime } = connected;
    let stdio = matches!(settings, DriverSettings::Stdio { .. });
    let id = run.record().id.clone();
    if args.trace == Trace::Narrate {
        eprintln!("[Program] run {id} in {}", run.path().display());
        if run.replayed() > 0 {
            eprintln!(
                "[Program] resuming: {} answer(s) replayed from the journal",
                run.replayed()
            );
        }
        eprintln!("[Program] driver: {}", settings.describe());
    }
    // Ctrl-C or SIGTERM stops the run cleanly (interrupted, resumable); a second one forces.
    stop_on_signals(
        &runtime,
        run.stop_handle(),
        "prosevm",
        "stopping the run (press Ctrl-C again to force)",
    );
    // A hold that must be kept (a lease) is renewed while the run goes on; if another
    // process takes the run, this one stops (its writes would be refused).
    if let Some(keep) = run.keeper() {
        runtime.spawn(keep);
    }
    let run_dir = run.path().to_path_buf();
    let resume_with = resume_flags(args);
    let mut watchers = Watchers::new(args, &run, export);
    let result = match runtime.block_on(run.drive(driver, &mut watchers)) {
        Ok(r) => r,
        Err(e) => {
            let message = e.to_string();
            watchers.ended(&Ending {
                run_id: &id,
                run_dir: &run_dir,
                status: RunStatus::Running,
                outputs: 0,
                error: Some(&message),
                code: None,
                resume_with: resume_with.as_deref(),
            });
            return fail(e, Exit::Unusable);
        }
    };
    let resume = summary::resume_command(&id, resume_with.as_deref());
    let (status, outputs, error) = match &result {
        Ok(outputs) => {
            let outputs: serde_json::Map<String, serde_json::Value> = outputs
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect();
            (RunStatus::Finished, outputs, None)
        }
        Err(e) => (RunStatus::ended_by(e.code), Default::default(), Some(e)),
    };
    let code = error.map(|e| e.code.to_string());
    // What the trace's end says: the failure in full, the budget or the input waited for.
    let traced = error.map(|e| match status {
        RunStatus::Failed => format!("runtime error: {e}"),
        _ => e.message.clone(),
    });
    watchers.ended(&Ending {
        run_id: &id,
        run_dir: &run_dir,
        status,
        outputs: outputs.len(),
        error: traced
            .as_deref()
            .filter(|_| status != RunStatus::Interrupted),
        code: code.as_deref().filter(|_| status != RunStatus::Interrupted),
        resume_with: resume_with.as_deref(),
    });
    if stdio {
        let mut done = serde_json::json!({
            "type": "done",
            "run": id,
            "status": status.as_str(),
        });
        match error {
            None => done["outputs"] = outputs.clone().into(),
            Some(_) if status == RunStatus::Interrupted => {}
            Some(e) if status == RunStatus::Failed => done["error"] = e.to_string().into(),
            Some(e) => done["error"] = e.message.clone().into(),
        }
        stdio::send(&done);
    }
    let Some(e) = error else {
        if !stdio {
            print_outputs(&id, &outputs);
        }
        return ExitCode::SUCCESS;
    };
    let (message, exit) = match status {
        RunStatus::Paused => (
            format!(
                "run {id} paused at its budget: {}; continue it with a larger one: {resume} --max-cost USD (or --max-tokens N)",
                e.message
            ),
            Exit::Stopped,
        ),
        RunStatus::Waiting => (
            format!(
                "run {id} waits: {}; answer with: {}, then continue it with: {resume}",
                e.message,
                watchers
                    .summary
                    .answer_commands(&id, resume_with.as_deref())
                    .join("; "),
            ),
            Exit::Stopped,
        ),
        RunStatus::Interrupted => (
            format!("run {id} interrupted; continue it with: {resume}"),
            Exit::Interrupted,
        ),
        _ => (format!("runtime error: {e}"), Exit::Failed),
    };
    if Console::json() {
        let mut doc = serde_json::json!({ "run": id, "status": status.as_str() });
        doc["error"] = console::error_json(&message, code.as_deref(), exit)["error"].clone();
        println!("{doc}");
    } else if args.trace != Trace::Json {
        // Under `--trace json` the error and end events said it: stderr stays JSON.
        eprintln!("prosevm: {message}");
    }
    exit.into()
}

/// Prints a finished run's outputs as `--format` asks: `name: value` lines, or one JSON
/// object `{"run", "status", "outputs"}`.
pub fn print_outputs(id: &str, outputs: &serde_json::Map<String, serde_json::Value>) {
    match Console::get().format {
        Format::Json => println!(
            "{}",
            serde_json::json!({
                "run": id,
                "status": RunStatus::Finished.as_str(),
                "outputs": outputs,
            })
        ),
        Format::Text => {
            for (k, v) in outputs {
                match v {
                    serde_json::Value::String(s) => println!("{k}: {s}"),
                    other => println!("{k}: {other}"),
                }
            }
        }
    }
}

/// A driver's settings in words, for a change of driver: its name, and the mock's options.
fn driver_words(d: &DriverSettings) -> String {
    match d {
        DriverSettings::Mock(m) => format!(
            "the mock driver (conditions {}, latency {} ms, inputs {}, {} scripted rule(s))",
            m.conditions
                .map(|c| c.to_string())
                .unwrap_or_else(|| "true".into()),
            m.latency.as_millis(),
            if m.inputs {
                "answered with placeholders"
            } else {
                "asked"
            },
            m.script.len()
        ),
        other => format!("the {} driver", other.name()),
    }
}

/// `prosevm resume RUN`: takes the run up again in the store `args` name and drives it,
/// asking nothing twice.
pub fn resume(run: Option<&str>, force: bool, args: &RunArgs) -> ExitCode {
    let (runtime, store) = match opened(args) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let run = match resolve(&runtime, &*store, run) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let run = run.as_str();
    let (id, record) = match runtime.block_on(store.record(run)) {
        Ok(r) => r,
        Err(e) => return store_error(e),
    };
    let args = &RunArgs {
        program_dir: build::dir_of(&record.origin),
        ..args.clone()
    };
    let mut edited = None;
    if record.status != RunStatus::Finished {
        match same_program(&record) {
            Ok(()) => {}
            Err(Changed::Edited(program)) if force => edited = Some(program),
            Err(Changed::Edited(_)) => {
                return fail(
                    format!(
                        "run {id}: {} has changed since the run started; refusing to resume a different program (--force resumes it, asking again what the edit changed)",
                        record.origin.display()
                    ),
                    Exit::Failed,
                )
            }
            // A store of its own keeps the program: a run submitted elsewhere resumes
            // without its source.
            Err(Changed::Unreadable(_)) if store.kind() != "file" => {}
            Err(Changed::Unreadable(e)) => return fail(format!("run {id}: {e}"), Exit::Failed),
        }
    }
    // `--driver`, or flags shaping the run's own driver, change what answers it.
    let driver = match args.driver_over(&record.driver) {
        Ok(Some(d)) => {
            if d != record.driver {
                eprintln!(
                    "prosevm: warning: run {id} started with {}; continuing with {} as asked (recorded)",
                    driver_words(&record.driver),
                    driver_words(&d)
                );
            }
            Some(d)
        }
        Ok(None) => None,
        Err(e) => return fail(format!("run {id}: {e}"), Exit::Unusable),
    };
    let (place, inputs, export) = match (args.place(), parse_inputs(args), Export::from_env()) {
        (Ok(p), Ok(i), Ok(x)) => (p, i, x),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return fail(e, Exit::Unusable),
    };
    // A budget the driver cannot keep is refused before the run is taken.
    let budget = (
        args.max_tokens.or(record.options.max_tokens),
        args.max_cost.or(record.options.max_cost),
    );
    if budget != (None, None) {
        let settings = driver.as_ref().unwrap_or(&record.driver);
        let checked = match &edited {
            Some(program) => {
                prosevm::run::check_budget(settings, &program.artifact, budget.0, budget.1)
            }
            None => match stored_program(&runtime, &*store, run) {
                Ok(program) => {
                    prosevm::run::check_budget(settings, &program.artifact, budget.0, budget.1)
                }
                Err(code) => return code,
            },
        };
        if let Err(e) = checked {
            return fail(format!("run {id}: {e}"), Exit::Unusable);
        }
    }
    let how = Resuming {
        driver,
        inputs,
        journal: if force {
            JournalCheck::Force
        } else {
            JournalCheck::Strict
        },
        max_value_size: args.max_value_size,
        max_frame_memory: args.max_frame_memory,
        max_branches: args.max_branches,
        workdir: None,
    };
    let resumed = match edited {
        None => runtime.block_on(Run::resume(&*store, run, &place, how)),
        Some(program) => runtime
            .block_on(Run::resume_edited(&*store, run, &program, how, &place))
            .map(|(r, again)| {
                eprintln!(
                    "prosevm: the program changed; {} answer(s) will be asked again{}",
                    again.len(),
                    if again.is_empty() { "" } else { ":" }
                );
                for a in &again {
                    eprintln!("  {a}");
                }
                r
            }),
    };
    match resumed {
        Ok(Resumed::Finished(record)) => {
            eprintln!("run {} already finished", record.id);
            print_outputs(&record.id, &record.outputs.unwrap_or_default());
            ExitCode::SUCCESS
        }
        Ok(Resumed::Ready(run)) => {
            let (settings, artifact) = (run.record().driver.clone(), run.artifact().clone());
            let memo = memo_of(&*store, &settings, run.record().options.memo || args.memo);
            // Connected on a runtime of its own would leave the store's behind: the driver
            // joins the store's runtime.
            let handle = runtime.handle().clone();
            match connect(runtime, &settings, &artifact, memo) {
                Ok(c) => drive(*run, c, args, export),
                Err(code) => {
                    // Given back as it was, for another resume or a worker.
                    let _ = handle.block_on(run.give_back());
                    code
                }
            }
        }
        Err(e) => run_error(e),
    }
}

/// `prosevm fork RUN [--from ID]`: a new run of `run`'s program and inputs that reuses its
/// answers (before request `from`, if given) and asks its own driver for the rest: the one
/// the flags name, else the one `run` used (changed by flags such as `--model`).
pub fn fork(run: &str, from: Option<&str>, args: &RunArgs) -> ExitCode {
    let from = match from.map(str::parse::<prose_machine::protocol::RequestId>) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(e)) => return fail(format!("--from: {e}"), Exit::Unusable),
    };
    let (runtime, store) = match opened(args) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let run = match resolve(&runtime, &*store, Some(run)) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let (id, record) = match runtime.block_on(store.record(&run)) {
        Ok(r) => r,
        Err(e) => return store_error(e),
    };
    let args = &RunArgs {
        program_dir: build::dir_of(&record.origin),
        ..args.clone()
    };
    // Flags shaping a driver (a model, a base URL, the mock's answers...) without --driver
    // shape the run's own; the mock keeps what it recorded but what is given again.
    let driver = match args.driver_over(&record.driver) {
        Ok(Some(d)) => {
            if d != record.driver {
                eprintln!(
                    "prosevm: warning: run {id} was answered by {}; the fork is answered by {} as asked",
                    driver_words(&record.driver),
                    driver_words(&d)
                );
            }
            d
        }
        Ok(None) => record.driver.clone(),
        Err(e) => return fail(format!("run {id}: {e}"), Exit::Unusable),
    };
    let (place, export) = match (args.place(), Export::from_env()) {
        (Ok(p), Ok(x)) => (p, x),
        (Err(e), _) | (_, Err(e)) => return fail(e, Exit::Unusable),
    };
    let budget = (
        place.budget.0.or(record.options.max_tokens),
        place.budget.1.or(record.options.max_cost),
    );
    if budget != (None, None) {
        let checked = stored_program(&runtime, &*store, &id).map(|program| {
            prosevm::run::check_budget(&driver, &program.artifact, budget.0, budget.1)
        });
        match checked {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return fail(e, Exit::Unusable),
            Err(code) => return code,
        }
    }
    let forked = runtime.block_on(Run::fork(&*store, &id, from.as_ref(), driver, &place));
    match forked {
        Ok((run, reused)) => {
            eprintln!(
                "prosevm: run {} forks run {id}{}: {reused} answer(s) reused, the rest asked of the {} driver",
                run.record().id,
                from.map(|f| format!(" before request {f}")).unwrap_or_default(),
                run.record().driver.name()
            );
            for w in run.warnings() {
                eprintln!("prosevm: warning: {w}");
            }
            let (settings, artifact) = (run.record().driver.clone(), run.artifact().clone());
            let memo = memo_of(&*store, &settings, run.record().options.memo || args.memo);
            match connect(runtime, &settings, &artifact, memo) {
                Ok(c) => drive(run, c, args, export),
                Err(code) => code,
            }
        }
        Err(e) => run_error(e),
    }
}

/// The program run `id` of `store` carries, as the store keeps it.
fn stored_program(runtime: &Runtime, store: &dyn Store, id: &str) -> Result<Program, ExitCode> {
    let stored = runtime.block_on(store.read(id)).map_err(store_error)?;
    Program::from_bytes(stored.artifact, stored.record.origin.clone())
        .map_err(|e| fail(format!("run {id}: its artifact: {e}"), Exit::Failed))
}

/// The flags a resume needs to find a run kept where `args` say, when not in the default
/// place: `--state-dir DIR`, or `--store STORE` (a database's URL, which may carry a
/// password, is not repeated).
fn resume_flags(args: &RunArgs) -> Option<String> {
    super::store_flags(args.store.as_deref(), args.state_dir.as_deref())
}

/// How the program at a run's origin differs from the one it started with.
enum Changed {
    /// It was edited: here it is, compiled.
    Edited(Program),
    /// It cannot be read or compiled.
    Unreadable(String),
}

/// Checks that the program a run started with is still what its origin holds.
fn same_program(record: &RunRecord) -> Result<(), Changed> {
    let origin = &record.origin;
    let current = if origin.extension().is_some_and(|x| x == "prose") {
        let dry = matches!(record.driver, DriverSettings::Mock(_));
        build::compile(origin, &[], dry, build::Warnings::Quiet).ok()
    } else {
        bytecode_spec::artifact::read_file(origin)
            .ok()
            .and_then(|b| Program::from_bytes(b, origin.clone()).ok())
    };
    match current {
        Some(p) if p.sha256() == record.artifact_sha256 => Ok(()),
        Some(p) => Err(Changed::Edited(p)),
        None => Err(Changed::Unreadable(format!(
            "cannot read its program {}",
            origin.display()
        ))),
    }
}
