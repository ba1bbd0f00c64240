//! The commands that read runs, or remove them: `runs`, `runs prune`, `inspect` and
//! `report`, each written once against the [`Store`] trait.

use super::{fail, open_store, resolve, runtime, store_error};
use prose_machine::protocol::{Answer, Ask, PromptAnswer, RequestId};
use prose_runtime::approvals::ApprovalId;
use prose_runtime::program::Program;
use prose_runtime::record::RunStatus;
use prose_store::journal::in_order;
use prose_store::{PruneRule, Pruned, RunRow, Store, StoredRun};
use prosec::console::{Console, Exit};
use prosevm::run::rebuild::views_in_memory;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tokio::runtime::Runtime;

/// Where the runs a command reads are kept: `--store`, else the file store under
/// `--state-dir`.
#[derive(clap::Args)]
pub struct At {
    #[command(flatten)]
    store: super::args::StoreArg,
    /// Where runs live (default: `.prose` in the working directory).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

impl At {
    /// The store `store` names, else the file store under `state_dir`.
    pub fn new(store: Option<String>, state_dir: Option<PathBuf>) -> At {
        At {
            store: super::args::StoreArg { url: store },
            state_dir,
        }
    }

    /// The flags that name this store again, for a command printed for the user to run (a
    /// Postgres URL, which may hold a password, is not repeated).
    fn flags(&self) -> Option<String> {
        super::store_flags(self.store.url.as_deref(), self.state_dir.as_deref())
    }

    /// A runtime, and the store open on it.
    fn open(&self) -> Result<(Runtime, Box<dyn Store>), ExitCode> {
        let rt = runtime()?;
        let store = open_store(&rt, self.store.url.as_deref(), self.state_dir.as_deref(), 1)?;
        Ok((rt, store))
    }

    /// A runtime, the store open on it, and run `run` (as a command names it:
    /// [`prose_store::naming`]) as the store keeps it.
    fn read(&self, run: &str) -> Result<(Runtime, Box<dyn Store>, StoredRun), ExitCode> {
        let (rt, store) = self.open()?;
        let run = resolve(&rt, &*store, Some(run))?;
        let stored = rt.block_on(store.read(&run)).map_err(store_error)?;
        Ok((rt, store, stored))
    }
}

/// The approvals `prosevm answer` gives: `--approve`, `--deny`, `--always`.
pub struct Approvals {
    /// The approvals allowed.
    pub approve: Vec<String>,
    /// The approvals refused.
    pub deny: Vec<String>,
    /// The allowed ones hold for the rest of their sessions.
    pub always: bool,
}

/// `prosevm answer RUN [NAME=VALUE...] [--approve ID...] [--deny ID...]`: gives a waiting run
/// the inputs and approvals it waits for; says what it still waits for, or how it goes on.
pub fn answer(at: &At, run: &str, answers: &[String], approvals: &Approvals) -> ExitCode {
    let mut given = Vec::new();
    for a in answers {
        match a.split_once('=') {
            Some((name, value)) if !name.is_empty() => given.push((name, value)),
            _ => return fail(format!("{a:?}: expected NAME=VALUE"), Exit::Unusable),
        }
    }
    let yes = if approvals.always {
        PromptAnswer::Always
    } else {
        PromptAnswer::Yes
    };
    let mut decided = Vec::new();
    for (ids, answer) in [
        (&approvals.approve, yes),
        (&approvals.deny, PromptAnswer::No),
    ] {
        for text in ids {
            match ApprovalId::parse(text) {
                Ok(id) if decided.iter().any(|(d, _)| *d == id) => {
                    return fail(format!("approval {id} is answered twice"), Exit::Unusable)
                }
                Ok(id) => decided.push((id, answer)),
                Err(e) => return fail(e, Exit::Unusable),
            }
        }
    }
    let (rt, store) = match at.open() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let run = match resolve(&rt, &*store, Some(run)) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let run = run.as_str();
    let mut left = None;
    for (name, value) in given {
        let answered = rt.block_on(prosevm::run::answer::answer(
            &*store,
            run,
            name,
            prose_machine::value::Value::text(value),
        ));
        match answered {
            Ok(a) => left = Some(a),
            Err(e) => return super::run_error(e),
        }
    }
    for (id, answer) in decided {
        match rt.block_on(prosevm::run::answer::approve(&*store, run, &id, answer)) {
            Ok(a) => left = Some(a),
            Err(e) => return super::run_error(e),
        }
    }
    if let Some(a) = left {
        let resume = prosevm::observe::summary::resume_command(&a.id, at.flags().as_deref());
        let approvals: Vec<&str> = a.approvals.iter().map(ApprovalId::as_str).collect();
        if Console::json() {
            println!(
                "{}",
                serde_json::json!({
                    "run": a.id,
                    "still_waiting": a.still_waiting,
                    "approvals": approvals,
                    "resume": a.can_go_on().then_some(resume),
                })
            );
        } else if a.can_go_on() {
            eprintln!(
                "run {} has its answers; under `prosevm serve` it goes on by itself, else continue it with: {resume}",
                a.id
            );
        } else {
            let mut what: Vec<String> = a.still_waiting.iter().map(|n| format!("`{n}`")).collect();
            what.extend(approvals.iter().map(|id| format!("approval {id}")));
            eprintln!("run {} still waits for {}", a.id, what.join(", "));
        }
    }
    ExitCode::SUCCESS
}

/// `prosevm runs`: every run with its program, status, start time, answers journaled, and
/// tokens and cost; with `--json`, one array for tools.
pub fn runs(at: &At, json: bool, statuses: &[String]) -> ExitCode {
    let (rt, store) = match at.open() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let rows: Vec<RunRow> = match rt.block_on(store.list()) {
        Ok(rows) => rows
            .into_iter()
            .filter(|r| {
                statuses.is_empty() || statuses.iter().any(|s| Some(s) == r.status.as_ref())
            })
            .collect(),
        Err(e) => return fail(e, Exit::Failed),
    };
    if json {
        match serde_json::to_string(&rows) {
            Ok(text) => println!("{text}"),
            Err(e) => return fail(e, Exit::Unusable),
        }
        return ExitCode::SUCCESS;
    }
    // Stores whose holds are leases or processes say who holds each run.
    let holders = rows.iter().any(|r| r.holder.is_some() || r.epoch.is_some());
    println!(
        "{:24} {:20} {:11} {:20} {:>8} {:>9} {:>9}{}",
        "id",
        "program",
        "status",
        "started",
        "answered",
        "tokens",
        "cost",
        if holders { "  holder" } else { "" }
    );
    for r in rows {
        let status = if r.live {
            format!("{} (live)", r.status_text())
        } else {
            r.status_text().to_string()
        };
        let tokens = r.usage.map_or(String::new(), |u| u.tokens().to_string());
        let cost = r
            .usage
            .and_then(|u| u.cost)
            .map_or(String::new(), |c| format!("${c:.4}"));
        let holder = match (&r.holder, r.lease_left) {
            (Some(h), Some(left)) if left >= 0.0 => format!("  {h} ({left:.0} s left)"),
            (Some(h), Some(_)) => format!("  {h} (lease expired)"),
            (Some(h), None) => format!("  {h}"),
            (None, _) => String::new(),
        };
        println!(
            "{:24} {:20} {:11} {:20} {:>8} {tokens:>9} {cost:>9}{holder}",
            r.id,
            r.program,
            status,
            r.started.as_deref().unwrap_or("?"),
            r.answered
        );
        for line in prose_runtime::record::waits_for(&r.waiting, &r.approvals) {
            println!("    waits for {line}");
        }
    }
    ExitCode::SUCCESS
}

/// `prosevm runs prune`: removes the runs `rule` selects, each with its journal, keeping any
/// a process holds.
pub fn prune(at: &At, rule: PruneRule) -> ExitCode {
    if rule.older_than.is_none() && rule.statuses.is_empty() {
        return fail(
            "say which runs to prune: --older-than AGE, --status STATUS, or both",
            Exit::Unusable,
        );
    }
    let (rt, store) = match at.open() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let done = match rt.block_on(store.prune(&rule)) {
        Ok(d) => d,
        Err(e) => return fail(e, Exit::Failed),
    };
    if Console::json() {
        let row = |r: &RunRow| serde_json::json!({"id": r.id, "program": r.program, "status": r.status_text(), "started": r.started});
        let mut removed = Vec::new();
        let mut kept = Vec::new();
        for p in &done {
            match p {
                Pruned::Removed(r) | Pruned::WouldRemove(r) => removed.push(row(r)),
                Pruned::Kept(r, why) => {
                    let mut k = row(r);
                    k["why"] = why.to_string().into();
                    kept.push(k);
                }
            }
        }
        println!(
            "{}",
            serde_json::json!({ "dry_run": rule.dry_run, "removed": removed, "kept": kept })
        );
        return ExitCode::SUCCESS;
    }
    let (mut removed, mut kept) = (0, 0);
    for p in &done {
        match p {
            Pruned::Removed(r) | Pruned::WouldRemove(r) => {
                removed += 1;
                let verb = if rule.dry_run {
                    "would remove"
                } else {
                    "removed"
                };
                println!(
                    "{verb} {} ({}, {}, started {})",
                    r.id,
                    r.program,
                    r.status_text(),
                    r.started.as_deref().unwrap_or("?")
                );
            }
            Pruned::Kept(r, why) => {
                kept += 1;
                println!("kept {}: {why}", r.id);
            }
        }
    }
    let verb = if rule.dry_run {
        "would be removed"
    } else {
        "removed"
    };
    println!("{removed} run(s) {verb}, {kept} kept");
    ExitCode::SUCCESS
}

/// `prosevm report RUN [-o FILE]`: the run's HTML report, from its record, artifact and
/// journal.
pub fn report(at: &At, run: &str, output: Option<&Path>) -> ExitCode {
    let (_rt, store, stored) = match at.read(run) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let id = stored.id.clone();
    let views = match store.views(&id) {
        Ok(v) => v,
        Err(e) => return store_error(e),
    };
    let report = match prosevm::report::Report::of(stored, &views) {
        Ok(r) => r,
        Err(e) => return fail(format!("run {id}: {e}"), Exit::Failed),
    };
    let page = prosevm::report::html::render(&report);
    if Console::json() {
        let mut doc = serde_json::json!({ "run": id, "requests": report.entries.len() });
        match output {
            None => doc["html"] = page.into(),
            Some(path) => {
                if let Err(e) = std::fs::write(path, page) {
                    return fail(
                        format!("cannot write {}: {e}", path.display()),
                        Exit::Unusable,
                    );
                }
                doc["written"] = path.display().to_string().into();
            }
        }
        println!("{doc}");
        return ExitCode::SUCCESS;
    }
    match output {
        None => print!("{page}"),
        Some(path) => {
            if let Err(e) = std::fs::write(path, page) {
                return fail(
                    format!("cannot write {}: {e}", path.display()),
                    Exit::Unusable,
                );
            }
            eprintln!(
                "prosevm: report of run {id} ({} requests) written to {}",
                report.entries.len(),
                path.display()
            );
        }
    }
    ExitCode::SUCCESS
}

/// `prosevm inspect RUN`: the run's record, where it is and who holds it, its journal's
/// length, its bindings and its `state.md`.
pub fn inspect(at: &At, run: &str, json: bool) -> ExitCode {
    let (rt, store, stored) = match at.read(run) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let id = stored.id.clone();
    let details = match rt.block_on(store.details(&id)) {
        Ok(d) => d,
        Err(e) => return store_error(e),
    };
    let mut view = match serde_json::to_value(&stored.record) {
        Ok(v) => v,
        Err(e) => return fail(e, Exit::Unusable),
    };
    view["answered"] = stored.journal.len().into();
    for (k, v) in details {
        view[k] = v;
    }
    let views = match store.views(&id) {
        Ok(v) => v,
        Err(e) => return store_error(e),
    };
    let ended = matches!(
        stored.record.status,
        RunStatus::Finished | RunStatus::Failed
    );
    // The bindings are shown as the journal has them, rebuilt in memory: the files hold no
    // values bound inside block calls, and those of a run that did not end may lag its
    // journal (a crash came before they caught up). Nothing is written, and the run is not
    // taken: a writer may be about to continue it. The state of an ended run is its file.
    let rebuilt = if store.views_in_run() {
        match views_in_memory(&stored, &views) {
            Ok((rendered, _)) => Some(rendered),
            Err(e) => {
                eprintln!("prosevm: note: the views were not rebuilt from the journal: {e}");
                None
            }
        }
    } else {
        None
    };
    let state_file = || std::fs::read_to_string(views.join("state.md")).ok();
    let (bindings, state) = match rebuilt {
        Some(r) if ended => (r.bindings, state_file()),
        Some(r) => (r.bindings, Some(r.state)),
        None => (prose_store::view::read_bindings(&views), state_file()),
    };
    view["bindings"] = serde_json::json!(bindings);
    if json {
        view["state"] = state.into();
        println!("{view}");
    } else {
        println!(
            "{}",
            serde_json::to_string_pretty(&view).unwrap_or_default()
        );
        if let Some(state) = state {
            println!("\n{state}");
        }
    }
    ExitCode::SUCCESS
}

/// `prosevm inspect RUN --session ID`: session `id` of a run: its task and system prompt,
/// its agent loop's turns and tool calls with their outputs, and its answer, rebuilt from the
/// journal, then the journal's record of its reply.
pub fn inspect_session(at: &At, run: &str, id: &str, json: bool) -> ExitCode {
    let given = id;
    // An id of a request's shape (`9:9`) that no run can have (every lineage starts at 0)
    // is not there, like any other id the run does not hold.
    let shaped = |s: &str| {
        s.split_once(':').is_some_and(|(l, n)| {
            !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_digit() || c == '/' || c == '.')
                && n.split('#')
                    .next()
                    .is_some_and(|n| n.parse::<u64>().is_ok())
        })
    };
    let id: Option<RequestId> = match id.parse() {
        Ok(id) => Some(id),
        Err(_) if shaped(id) => None,
        Err(e) => return fail(e, Exit::Unusable),
    };
    let (_rt, _store, stored) = match at.read(run) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let run_id = stored.id.clone();
    let loaded = Program::from_bytes(stored.artifact, stored.record.origin.clone())
        .map_err(|e| e.to_string())
        .and_then(|program| {
            prosevm::run::transcript::exchanges(
                &stored.record,
                &program.artifact,
                in_order(stored.journal),
            )
        });
    let mut exchanges = match loaded {
        Ok(x) => x,
        Err(e) => return fail(format!("run {run_id}: {e}"), Exit::Failed),
    };
    let Some(x) = exchanges
        .iter()
        .position(|x| Some(&x.request.id) == id.as_ref())
        .map(|i| exchanges.swap_remove(i))
    else {
        let sessions: Vec<String> = exchanges
            .iter()
            .filter(|x| matches!(x.request.ask, Ask::Session(_)))
            .map(|x| x.request.id.to_string())
            .collect();
        let held = match sessions.as_slice() {
            [] => "it has no sessions".to_string(),
            [one] => format!("its one session is {one}"),
            many if many.len() <= 12 => format!("its sessions are {}", many.join(", ")),
            many => format!(
                "its {} sessions are {} ... {} (`prosevm inspect {run_id}` lists them)",
                many.len(),
                many[..6].join(", "),
                many[many.len() - 3..].join(", ")
            ),
        };
        return fail(
            format!("run {run_id} has no request {given}: {held}"),
            Exit::Failed,
        );
    };
    let id = x.request.id.clone();
    let Ask::Session(s) = &x.request.ask else {
        return fail(
            format!("{id} is a `{}` request, not a session", x.request.kind()),
            Exit::Failed,
        );
    };
    if json {
        let view = serde_json::json!({
            "request": x.request,
            "steps": x.steps,
            "reply": x.reply,
        });
        println!("{view}");
        return ExitCode::SUCCESS;
    }
    let indent = |t: &str| t.lines().map(|l| format!("  {l}\n")).collect::<String>();
    print!("session {id} at {}", x.request.site);
    if let Some(a) = &s.agent {
        print!(" (agent {a})");
    }
    println!();
    if let Some(m) = &s.model {
        println!("model: {m}");
    }
    if let Some(sys) = &s.system {
        print!("system:\n{}", indent(sys));
    }
    print!(
        "task:\n{}",
        indent(&prose_runtime::driver::render::session(s))
    );
    for step in &x.steps {
        match &step.outcome {
            Ok(Answer::Turn(t)) => {
                println!("{}: {}", step.id, t.text);
                for c in &t.tool_calls {
                    println!("  -> {} {}", c.name, c.arguments);
                }
            }
            Ok(Answer::Tool(out)) => {
                let mark = if out.is_error { " (error)" } else { "" };
                print!("{}{mark}:\n{}", step.id, indent(&out.content));
            }
            Ok(Answer::Permission(p)) => println!(
                "{}: permission answered {}",
                step.id,
                serde_json::to_string(p).unwrap_or_default()
            ),
            Ok(_) => println!(
                "{}: {}",
                step.id,
                serde_json::to_string(step).unwrap_or_default()
            ),
            Err(e) => println!("{} failed: {e}", step.id),
        }
    }
    match x.reply.as_ref().map(|r| (&r.outcome, r.usage)) {
        Some((Ok(Answer::Session(a)), usage)) => {
            print!("answer:\n{}", indent(&a.text));
            if let Some(m) = &a.memory {
                print!("memory:\n{}", indent(m));
            }
            if let Some(u) = usage {
                println!(
                    "tokens: {} in ({} read from the cache, {} written to it), {} out{}",
                    u.input_tokens(),
                    u.cache_read_tokens,
                    u.cache_write_tokens,
                    u.output_tokens,
                    if u.from_memo > 0 {
                        format!("; {} answer(s) from the memo", u.from_memo)
                    } else {
                        String::new()
                    }
                );
            }
        }
        Some((Err(e), _)) => println!("failed: {e}"),
        _ => println!("(no answer yet)"),
    }
    if let Some(r) = &x.reply {
        println!("journal: {}", serde_json::to_string(r).unwrap_or_default());
    }
    ExitCode::SUCCESS
}

/// `prosevm diff A B`: where two runs' answers and outputs differ; exit status 0 when they
/// do not, 1 when they do (as diff(1)).
pub fn diff(at: &At, a: &str, b: &str, json: bool, width: usize) -> ExitCode {
    let (runtime, store) = match at.open() {
        Ok(x) => x,
        Err(code) => return code,
    };
    let (a, b) = match resolve(&runtime, &*store, Some(a))
        .and_then(|a| Ok((a, resolve(&runtime, &*store, Some(b))?)))
    {
        Ok(both) => both,
        Err(code) => return code,
    };
    let read = |id: &str| runtime.block_on(store.read(id));
    let (ra, rb) = match (read(&a), read(&b)) {
        (Ok(ra), Ok(rb)) => (ra, rb),
        (Err(e), _) | (_, Err(e)) => return store_error(e),
    };
    let c = prosevm::run::compare::Comparison::of(&ra, &rb);
    if json {
        match serde_json::to_string_pretty(&c) {
            Ok(text) => println!("{text}"),
            Err(e) => return fail(e, Exit::Failed),
        }
    } else {
        print!("{}", c.render_text(width));
    }
    if c.is_same() {
        ExitCode::SUCCESS
    } else {
        Exit::Failed.into()
    }
}
