//! The readable side of a run directory: `bindings/{name}.md` for every name bound at the
//! top level of the program, `imports/{handle}--{slug}/` (the same, recursively) for every
//! invoked program, and `state.md`, the program annotated with where the run is. Values
//! bound inside block calls get no file (one per call made a loop around blocks cost
//! thousands of files); [`RunView::in_memory`] keeps them for readers. All are derived from
//! the trace events, so they are rebuilt exactly when a run resumes (the replay re-emits
//! them); the journal stays the only record the VM trusts. Files are written through a
//! temporary file and a rename when the runner is about to wait for the driver, at most
//! every [`FLUSH_EVERY`] while it is not, and when the run stops, so a loop rebinding a
//! variable a million times costs a million map updates, not a million writes.

use super::agents::{read_log, segment_entry, SEGMENT_LOG};
use super::{fs, StoreError};
use bytecode_spec::verify::Verified;
use bytecode_spec::BindingKind;
use prose_machine::protocol::RequestId;
use prose_machine::snapshot::Snapshot;
use prose_machine::trace::Event;
use prose_machine::value::Value;
use prose_runtime::clock::{now, timestamp};
use prose_runtime::observe::Observer;
use prose_runtime::record::AgentHome;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest the files may lag behind the run while it is going.
pub const FLUSH_EVERY: Duration = Duration::from_millis(250);

/// One bound name: where and how it was last bound, and its value.
struct Bound {
    name: String,
    /// Its kind: what declared it (`let`, `const`, `input`, `output`), or `anonymous` for
    /// an uncaptured session's answer.
    kind: &'static str,
    scope: u32,
    /// The program invocation it belongs to (0: the program run).
    instance: u32,
    module: u32,
    line: u32,
    value: String,
    /// Changed since its file was last written.
    dirty: bool,
}

impl Bound {
    /// Records a new binding of this name.
    fn set(&mut self, kind: &'static str, module: u32, line: u32, value: &str) {
        self.kind = kind;
        self.module = module;
        self.line = line;
        self.value.clear();
        self.value.push_str(value);
        self.dirty = true;
    }
}

/// A persistent agent of the program: where it keeps its memory, and what of it the files
/// there do not show yet.
struct Kept {
    home: AgentHome,
    /// Sessions it has had in this run.
    sessions: u32,
    /// Its memory as last reported, when `memory.md` does not hold it yet.
    memory: Option<String>,
    /// Segments not written yet: each one's request and its entry in the log.
    segments: Vec<(String, String)>,
    /// The requests of this run whose segments the log holds, once it was read (at the
    /// first write: a resumed run appends no segment twice).
    logged: Option<std::collections::HashSet<String>>,
}

impl Kept {
    /// Writes what the files do not show yet (without syncing), adding each file written
    /// to `written`; `run` is the run's id.
    fn write(&mut self, run: &str, written: &mut BTreeSet<PathBuf>) -> Result<(), StoreError> {
        if self.memory.is_none() && self.segments.is_empty() {
            return Ok(());
        }
        fs::ensure_dir(&self.home.dir)?;
        if !self.segments.is_empty() {
            let path = self.home.dir.join(SEGMENT_LOG);
            let failed = |e| StoreError::Io(path.clone(), e);
            let logged = match &mut self.logged {
                Some(logged) => logged,
                None => {
                    // What a crash cut short is dropped: its segment is appended again.
                    let log = read_log(&self.home.dir, run);
                    if std::fs::metadata(&path).is_ok_and(|m| m.len() > log.whole) {
                        fs::open_rw(&path)
                            .and_then(|f| f.set_len(log.whole))
                            .map_err(failed)?;
                    }
                    self.logged.insert(log.requests)
                }
            };
            let mut text = String::new();
            for (request, entry) in std::mem::take(&mut self.segments) {
                if logged.insert(request) {
                    text.push_str(&entry);
                }
            }
            if !text.is_empty() {
                // Appended in one write: runs sharing the agent add theirs whole.
                fs::open_append(&path)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
                    .map_err(failed)?;
                written.insert(path);
            }
        }
        if let Some(memory) = self.memory.take() {
            let path = self.home.dir.join("memory.md");
            fs::write_unsynced(&path, memory.as_bytes())?;
            written.insert(path);
        }
        Ok(())
    }
}

/// A run's views as text, not written anywhere ([`RunView::rendered`]).
#[derive(Debug, Default)]
pub struct Rendered {
    /// The program run's bindings: each value by name (`name`, or `name__{execution_id}`
    /// for a value bound inside a block call, which gets no file).
    pub bindings: BTreeMap<String, String>,
    /// The text of `state.md`.
    pub state: String,
}

/// Keeps `bindings/` and `state.md` of one run up to date.
pub struct RunView {
    dir: PathBuf,
    id: String,
    started: String,
    artifact: Arc<Verified>,
    /// Bindings by file stem (`name` or `name__{execution_id}`; execution ids are unique in
    /// the run, so stems are too, imported programs' included).
    bound: BTreeMap<String, Bound>,
    /// Each program invocation's directory, relative to the run's (the run itself: empty).
    instances: BTreeMap<u32, PathBuf>,
    /// Sessions asked and not yet answered: request id to module, line and execution id.
    executing: BTreeMap<RequestId, (u32, u32, u32)>,
    /// Anonymous bindings so far.
    anonymous: u32,
    /// Top-level program lines whose sessions have answered.
    complete: BTreeSet<u32>,
    /// Top-level program lines that bound a name, with the binding's stem.
    bound_at: BTreeMap<u32, String>,
    /// `usage.jsonl` lines not yet written: what each request served by a driver cost.
    usage: Vec<String>,
    /// The program's persistent agents, with the sessions each has had in this run and
    /// what of their memory is not written yet.
    agents: Vec<Kept>,
    /// The memory files written in this run, made durable together when it stops.
    memory_written: BTreeSet<PathBuf>,
    /// When the files were last written.
    last_flush: Option<Instant>,
    /// Events since then.
    unflushed: u64,
    /// Where the machine was at the last snapshot (none once the run ended).
    snapshot: Option<Snapshot>,
    error: Option<StoreError>,
    /// Whether persistent agents' memory files are written (not when only rebuilding the
    /// views of a run another process may continue).
    agent_files: bool,
    /// Whether `bindings/`, `imports/`, `state.md` and `usage.jsonl` are written (not for a
    /// worker of the Postgres store told to keep none).
    files: bool,
    /// Whether the values bound inside block calls are kept (only in memory, for a reader:
    /// written, they took a file per call, and a loop calling blocks a thousand times made
    /// thousands; the journal holds them, and `prosevm inspect` shows them).
    calls: bool,
}

impl RunView {
    /// Starts the view of the run in `dir` (id `id`, started at `started`), writing a binding
    /// file for each top-level input. `agents` are the program's persistent agents, whose
    /// memory files it keeps. Temporary files a killed process left are removed.
    pub fn new(
        dir: PathBuf,
        id: String,
        started: String,
        artifact: Arc<Verified>,
        inputs: &[(String, Value)],
        agents: Vec<AgentHome>,
    ) -> RunView {
        let view = RunView::unwritten(dir, id, started, artifact, inputs, agents);
        if let Ok(entries) = std::fs::read_dir(view.dir.join("bindings")) {
            for e in entries.flatten() {
                if e.path().extension().is_some_and(|x| x == "tmp") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        view
    }

    /// The view of a run, as [`RunView::new`], kept in memory only: it writes nothing,
    /// neither views nor agents' memory, and ends in [`RunView::rendered`], with the values
    /// bound inside block calls too (a reader showing a run as its journal has it, while
    /// another process may continue it).
    pub fn in_memory(
        dir: PathBuf,
        id: String,
        started: String,
        artifact: Arc<Verified>,
        inputs: &[(String, Value)],
        agents: Vec<AgentHome>,
    ) -> RunView {
        let mut view = RunView::unwritten(dir, id, started, artifact, inputs, agents);
        view.files = false;
        view.agent_files = false;
        view.calls = true;
        view
    }

    fn unwritten(
        dir: PathBuf,
        id: String,
        started: String,
        artifact: Arc<Verified>,
        inputs: &[(String, Value)],
        agents: Vec<AgentHome>,
    ) -> RunView {
        let mut view = RunView {
            dir,
            id,
            started,
            artifact,
            bound: BTreeMap::new(),
            instances: BTreeMap::from([(0, PathBuf::new())]),
            executing: BTreeMap::new(),
            anonymous: 0,
            complete: BTreeSet::new(),
            bound_at: BTreeMap::new(),
            usage: Vec::new(),
            agents: agents
                .into_iter()
                .map(|home| Kept {
                    home,
                    sessions: 0,
                    memory: None,
                    segments: Vec::new(),
                    logged: None,
                })
                .collect(),
            memory_written: BTreeSet::new(),
            last_flush: None,
            unflushed: 0,
            snapshot: None,
            error: None,
            agent_files: true,
            files: true,
            calls: false,
        };
        for (name, value) in inputs {
            view.bound.insert(
                name.clone(),
                Bound {
                    name: name.clone(),
                    kind: BindingKind::Input.as_str(),
                    scope: 0,
                    instance: 0,
                    module: 0,
                    line: 0,
                    value: value.display(),
                    dirty: true,
                },
            );
        }
        view
    }

    /// Takes one trace event into account.
    pub fn observe(&mut self, event: &Event) {
        match event {
            Event::Session {
                id,
                module,
                line,
                exec,
                ..
            } => {
                self.executing.insert(id.clone(), (*module, *line, *exec));
            }
            Event::Answer { id, text, bound } => match self.executing.remove(id) {
                Some((module, line, exec)) => {
                    if module == 0 {
                        self.complete.insert(line);
                    }
                    // Inside a block call an answer kept under no name is no binding: it
                    // would take a file per call (`inspect --session` shows it).
                    if !bound && !self.in_block_call(exec) {
                        self.anonymous(module, line, text);
                    }
                }
                None if !bound => self.anonymous(0, 0, text),
                None => {}
            },
            Event::Binding {
                name,
                kind,
                value,
                module,
                line,
                scope,
                instance,
            } => self.bind(name, *kind, value, (*module, *line), (*scope, *instance)),
            Event::Import {
                module,
                exec,
                parent,
                ..
            } => self.invoked(*module, *exec, *parent),
            usage @ Event::Usage { .. } => {
                // The event's own JSON, less its tag.
                if let Ok(serde_json::Value::Object(mut fields)) = serde_json::to_value(usage) {
                    fields.remove("event");
                    self.usage
                        .push(serde_json::Value::Object(fields).to_string());
                }
            }
            Event::Memory {
                module: 0,
                agent,
                id,
                memory,
                answer,
            } => self.remember(agent, id, memory, answer),
            _ => {}
        }
        self.unflushed += 1;
    }

    /// Whether the files should be brought up to date: something happened since they were
    /// written and either the runner is about to wait or [`FLUSH_EVERY`] has passed.
    pub fn due(&mut self, idle: bool) -> bool {
        (self.files || self.agents.iter().any(|k| k.memory.is_some()))
            && self.unflushed > 0
            && (idle || self.last_flush.is_none_or(|t| t.elapsed() >= FLUSH_EVERY))
    }

    /// Writes the files, with `snapshot` for `state.md`'s call stack and active constructs.
    pub fn write(&mut self, snapshot: &Snapshot) {
        self.snapshot = Some(snapshot.clone());
        self.flush("running");
    }

    /// What the files of a run that stopped where `snapshot` shows, with `status`, would
    /// hold: the program run's bindings by file stem (as [`read_bindings`] reads them) and
    /// `state.md`.
    pub fn rendered(mut self, snapshot: &Snapshot, status: &str) -> Rendered {
        self.snapshot = Some(snapshot.clone());
        let bindings = self
            .bound
            .iter()
            .filter(|(_, b)| b.instance == 0)
            .map(|(stem, b)| (stem.clone(), b.value.clone()))
            .collect();
        Rendered {
            bindings,
            state: self.state(status),
        }
    }

    /// Writes no `bindings/`, `imports/`, `state.md` or `usage.jsonl` (a run of the Postgres
    /// store, whose worker keeps no views): only persistent agents' memory files, which
    /// other runs read (and which are made durable when the run stops).
    pub fn without_files(&mut self) {
        self.files = false;
    }

    /// Whether execution id `exec` is a block call's: not the program run's (0) nor an
    /// invoked program's, which each have a directory.
    fn in_block_call(&self, exec: u32) -> bool {
        !self.instances.contains_key(&exec)
    }

    /// `at` is the binding statement's module and line.
    fn bind(
        &mut self,
        name: &str,
        kind: BindingKind,
        value: &str,
        at: (u32, u32),
        (scope, instance): (u32, u32),
    ) {
        if self.in_block_call(scope) && !self.calls {
            return;
        }
        let kind = kind.as_str();
        let (module, line) = at;
        // The common case, a top-level name bound again, without allocating.
        if let (0, Some(b)) = (scope, self.bound.get_mut(name)) {
            b.set(kind, module, line, value);
            if module == 0 && self.bound_at.get(&line).map(String::as_str) != Some(name) {
                self.bound_at.insert(line, name.to_string());
            }
            return;
        }
        let stem = if scope == 0 {
            name.to_string()
        } else {
            format!("{name}__{scope}")
        };
        if module == 0 && scope == 0 && self.bound_at.get(&line) != Some(&stem) {
            self.bound_at.insert(line, stem.clone());
        }
        let b = self.bound.entry(stem).or_insert_with(|| Bound {
            name: name.to_string(),
            kind,
            scope,
            instance,
            module,
            line,
            value: String::new(),
            dirty: true,
        });
        b.set(kind, module, line, value);
    }

    /// Records the answer of a session the program does not keep under a name, as
    /// `anon_NNN` (numbered in the order the answers arrive).
    fn anonymous(&mut self, module: u32, line: u32, text: &str) {
        self.anonymous += 1;
        let stem = format!("anon_{:03}", self.anonymous);
        self.bound.insert(
            stem.clone(),
            Bound {
                name: stem,
                kind: "anonymous",
                scope: 0,
                instance: 0,
                module,
                line,
                value: text.to_string(),
                dirty: true,
            },
        );
    }

    /// Gives invocation `exec` of module `module`, invoked from invocation `parent`, its
    /// directory, `imports/{handle}--{slug}/` under its parent's (shared by invocations of the
    /// same program from the same place: their files are told apart by execution id), with
    /// a copy of the program.
    fn invoked(&mut self, module: u32, exec: u32, parent: u32) {
        let Some(m) = self.artifact.modules.get(module as usize) else {
            return;
        };
        let base = self.instances.get(&parent).cloned().unwrap_or_default();
        let name = import_dir(&m.import_path, &m.name);
        let rel = match fs::file_name(&name) {
            Ok(name) => base.join("imports").join(name),
            Err(e) => {
                self.error.get_or_insert(e);
                return;
            }
        };
        let dir = self.dir.join(&rel);
        self.instances.insert(exec, rel);
        if !self.files {
            return;
        }
        let result = fs::ensure_dir(&dir)
            .and_then(|()| fs::write_unsynced(&dir.join("program.prose"), m.source.as_bytes()));
        if let (Err(e), None) = (result, &self.error) {
            self.error = Some(e);
        }
    }

    /// A binding file's path, relative to the run directory; refused when the name cannot
    /// be a file name.
    fn binding_path(&self, stem: &str, b: &Bound) -> Result<PathBuf, StoreError> {
        let base = self.instances.get(&b.instance).cloned().unwrap_or_default();
        let file = format!("{stem}.md");
        Ok(base.join("bindings").join(fs::file_name(&file)?))
    }

    /// Takes a persistent agent's new memory and the segment recording the session, to be
    /// written with the other views: the journal holds the answer that carried them, so a
    /// resume writes them again if they were lost, and [`RunView::finish`] makes them
    /// durable before the run's record says it stopped.
    fn remember(&mut self, agent: &str, id: &RequestId, memory: &str, answer: &str) {
        let Some(kept) = self.agents.iter_mut().find(|k| k.home.name == agent) else {
            return;
        };
        kept.sessions += 1;
        if !self.agent_files {
            return;
        }
        let n = kept.home.segments + kept.sessions;
        let request = id.to_string();
        let entry = segment_entry(n, &self.id, &request, answer);
        kept.segments.push((request, entry));
        match &mut kept.memory {
            Some(m) => {
                m.clear();
                m.push_str(memory);
            }
            None => kept.memory = Some(memory.to_string()),
        }
    }

    /// Writes the memory files that lag what the run reported; the first failure is kept
    /// for [`RunView::finish`].
    fn write_memory(&mut self) {
        for kept in &mut self.agents {
            if let Err(e) = kept.write(&self.id, &mut self.memory_written) {
                self.error.get_or_insert(e);
            }
        }
    }

    /// The statement a binding comes from.
    fn origin(&self, b: &Bound) -> String {
        let source = self
            .artifact
            .modules
            .get(b.module as usize)
            .map_or("", |m| m.source.as_str());
        if b.line == 0 {
            String::new()
        } else {
            statement(source, b.line)
        }
    }

    /// Writes the pending binding files and `state.md` with `status`; the first failure is
    /// kept for [`RunView::finish`].
    fn flush(&mut self, status: &str) {
        self.last_flush = Some(Instant::now());
        self.unflushed = 0;
        self.write_memory();
        if self.error.is_some() || !self.files {
            self.usage.clear();
            return;
        }
        if let Err(e) = fs::ensure_dir(&self.dir.join("bindings")) {
            self.error = Some(e);
            return;
        }
        let mut written = Vec::new();
        for (stem, b) in &self.bound {
            if !b.dirty {
                continue;
            }
            let path = match self.binding_path(stem, b) {
                Ok(p) => self.dir.join(p),
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            };
            if b.instance != 0 {
                if let Some(parent) = path.parent() {
                    if let Err(e) = fs::ensure_dir(parent) {
                        self.error = Some(e);
                        return;
                    }
                }
            }
            let snippet = self.origin(b);
            let program = (b.module != 0)
                .then(|| self.artifact.modules.get(b.module as usize))
                .flatten()
                .map(|m| m.name.as_str());
            let text = binding_file(&b.name, b.kind, b.scope, program, &snippet, &b.value);
            if let Err(e) = fs::write_unsynced(&path, text.as_bytes()) {
                self.error = Some(e);
                return;
            }
            written.push(stem.clone());
        }
        for stem in written {
            if let Some(b) = self.bound.get_mut(&stem) {
                b.dirty = false;
            }
        }
        if !self.usage.is_empty() {
            let path = self.dir.join("usage.jsonl");
            let mut text = self.usage.join("\n");
            text.push('\n');
            let appended = fs::open_append(&path)
                .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
            if let Err(e) = appended {
                self.error = Some(StoreError::Io(path, e));
                return;
            }
            self.usage.clear();
        }
        let state = self.state(status);
        if let Err(e) = fs::write_unsynced(&self.dir.join("state.md"), state.as_bytes()) {
            self.error = Some(e);
        }
    }

    /// Writes everything with the run's final `status` (`finished` or `failed`) and makes
    /// the memory files written in this run durable (other runs read them, and nothing
    /// rebuilds them once the run's record says it stopped); reports the first write that
    /// failed.
    pub fn finish(mut self, status: &str) -> Result<(), StoreError> {
        self.executing.clear();
        self.snapshot = None;
        self.flush(status);
        if let Some(e) = self.error {
            return Err(e);
        }
        fs::sync_together(&self.memory_written)
    }

    /// The text of `state.md`.
    fn state(&self, status: &str) -> String {
        let main = &self.artifact.modules[0];
        let executing: BTreeSet<u32> = self
            .executing
            .values()
            .filter(|(m, ..)| *m == 0)
            .map(|(_, l, _)| *l)
            .collect();
        let (.., updated) = timestamp(now());
        let mut s = String::new();
        let _ = writeln!(s, "# Execution State\n");
        let _ = writeln!(s, "run: {}", self.id);
        let _ = writeln!(s, "program: {}", main.name);
        let _ = writeln!(s, "started: {}", self.started);
        let _ = writeln!(s, "updated: {updated}");
        let _ = writeln!(s, "status: {status}\n");
        let _ = writeln!(s, "## Execution Trace\n\n```prose");
        for (i, text) in main.source.lines().enumerate() {
            let line = i as u32 + 1;
            let note = if executing.contains(&line) {
                Some("# <-- EXECUTING".to_string())
            } else if let Some(stem) = self.bound_at.get(&line) {
                Some(format!("# --> bindings/{stem}.md"))
            } else if self.complete.contains(&line) {
                Some("# (complete)".to_string())
            } else {
                None
            };
            match note {
                Some(n) => {
                    let _ = writeln!(s, "{text:<44} {n}");
                }
                None => {
                    let _ = writeln!(s, "{text}");
                }
            }
        }
        let _ = writeln!(s, "```\n");
        if let Some(snap) = &self.snapshot {
            active_constructs(&mut s, snap);
            call_stack(&mut s, snap);
        }
        let _ = writeln!(s, "## Index\n\n### Bindings\n");
        let _ = writeln!(s, "| Name | Kind | Path | Execution ID | Program |");
        let _ = writeln!(s, "|------|------|------|--------------|---------|");
        for (stem, b) in &self.bound {
            let scope = if b.scope == 0 {
                "(root)".to_string()
            } else {
                b.scope.to_string()
            };
            let program = self
                .artifact
                .modules
                .get(b.module as usize)
                .map_or("", |m| m.name.as_str());
            let _ = writeln!(
                s,
                "| {} | {} | {} | {scope} | {program} |",
                b.name,
                b.kind,
                self.binding_path(stem, b)
                    .map_or_else(|e| e.to_string(), |p| p.display().to_string())
            );
        }
        if !self.agents.is_empty() {
            let _ = writeln!(s, "\n### Agents\n");
            let _ = writeln!(s, "| Name | Scope | Path | Sessions this run |");
            let _ = writeln!(s, "|------|-------|------|-------------------|");
            for Kept {
                home: h,
                sessions: n,
                ..
            } in &self.agents
            {
                let mut path = h.dir.display().to_string();
                if !path.ends_with('/') {
                    path.push('/');
                }
                let _ = writeln!(s, "| {} | {} | {path} | {n} |", h.name, h.scope);
            }
        }
        s
    }
}

impl Observer for RunView {
    fn event(&mut self, event: &Event) {
        self.observe(event);
    }

    fn wants_snapshot(&mut self, idle: bool) -> bool {
        self.due(idle)
    }

    fn snapshot(&mut self, snapshot: &Snapshot) {
        self.write(snapshot);
    }
}

/// The values in a run directory's `bindings/`, by file stem; empty when there are none.
pub fn read_bindings(dir: &std::path::Path) -> BTreeMap<String, String> {
    let Ok(entries) = std::fs::read_dir(dir.join("bindings")) else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let stem = path.file_stem()?.to_str()?.to_string();
            if path.extension()? != "md" {
                return None;
            }
            let text = std::fs::read_to_string(&path).ok()?;
            let (_, value) = text.split_once("\n---\n\n")?;
            Some((stem, value.strip_suffix('\n').unwrap_or(value).to_string()))
        })
        .collect()
}

/// `state.md`'s "Active Constructs": forks waiting for their branches and loops under way.
fn active_constructs(s: &mut String, snap: &Snapshot) {
    let _ = writeln!(s, "## Active Constructs\n");
    let mut any = false;
    for f in &snap.forks {
        any = true;
        let _ = writeln!(
            s,
            "### Parallel (line {}{})\n\n- strategy: {}\n- branches: {}, finished: {}, succeeded: {}\n",
            f.line,
            in_module(f.module),
            f.strategy,
            f.branches,
            f.finished,
            f.succeeded
        );
    }
    for fiber in &snap.fibers {
        for fr in &fiber.frames {
            for l in &fr.loops {
                any = true;
                let max = l.max.map_or(String::new(), |m| format!("/{m}"));
                let _ = writeln!(
                    s,
                    "### Loop (line {}{}, fiber {})\n\n- kind: {}\n- iteration: {}{max}\n",
                    l.line,
                    in_module(fr.module),
                    fiber.lineage,
                    l.kind,
                    l.iteration
                );
            }
        }
    }
    if !any {
        let _ = writeln!(s, "(none)\n");
    }
}

/// `state.md`'s "Call Stack": every live fiber's frames, innermost first.
fn call_stack(s: &mut String, snap: &Snapshot) {
    let _ = writeln!(s, "## Call Stack\n");
    let _ = writeln!(
        s,
        "| fiber | depth | function | execution_id | program | line | status |"
    );
    let _ = writeln!(
        s,
        "|-------|-------|----------|--------------|---------|------|--------|"
    );
    for fiber in &snap.fibers {
        for (depth, fr) in fiber.frames.iter().enumerate().rev() {
            let status = if depth + 1 == fiber.frames.len() {
                fiber.status.as_str()
            } else {
                "waiting"
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {status} |",
                fiber.lineage,
                depth + 1,
                fr.function,
                fr.exec,
                fr.program,
                fr.line
            );
        }
    }
    if snap.more_fibers > 0 {
        let _ = writeln!(s, "\n... and {} more fibers", snap.more_fibers);
    }
    let _ = writeln!(s);
}

/// ", in an imported program" for modules other than the program run's.
fn in_module(module: u32) -> &'static str {
    if module == 0 {
        ""
    } else {
        ", in an imported program"
    }
}

/// The directory name of an invoked program: `{handle}--{slug}` for a registry import
/// (`@handle/slug`), `local--{name}` for one imported by path.
fn import_dir(import_path: &str, name: &str) -> String {
    match import_path.strip_prefix('@') {
        Some(reg) => reg.replace('/', "--"),
        None => format!("local--{name}"),
    }
}

/// The statement starting at 1-based `line` of `source`: that line and the more indented
/// lines under it (its properties), at most 12.
fn statement(source: &str, line: u32) -> String {
    let mut lines = source.lines().skip((line as usize).saturating_sub(1));
    let Some(first) = lines.next() else {
        return String::new();
    };
    let indent = |l: &str| l.len() - l.trim_start().len();
    let base = indent(first);
    let mut out = vec![first];
    out.extend(
        lines
            .take_while(|l| l.trim().is_empty() || indent(l) > base)
            .take(11),
    );
    while out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    out.join("\n")
}

/// The contents of a binding file.
fn binding_file(
    name: &str,
    kind: &str,
    scope: u32,
    program: Option<&str>,
    source: &str,
    value: &str,
) -> String {
    let mut s = format!("# {name}\n\nkind: {kind}\n");
    if scope != 0 {
        let _ = writeln!(s, "execution_id: {scope}");
    }
    if let Some(p) = program {
        let _ = writeln!(s, "program: {p}");
    }
    if !source.is_empty() {
        let _ = write!(s, "\nsource:\n```prose\n{source}\n```\n");
    }
    let _ = write!(s, "\n---\n\n{value}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_takes_its_indented_properties() {
        let src = "let a = session \"x\"\n  context: b\n\n  retry: 2\nsession \"y\"\n";
        assert_eq!(
            statement(src, 1),
            "let a = session \"x\"\n  context: b\n\n  retry: 2"
        );
        assert_eq!(statement(src, 5), "session \"y\"");
        assert_eq!(statement(src, 9), "");
    }

    #[test]
    fn imported_programs_get_handle_slug_directories() {
        assert_eq!(import_dir("@alice/digest", "digest"), "alice--digest");
        assert_eq!(import_dir("./lib/digest.prose", "digest"), "local--digest");
    }

    #[test]
    fn scoped_binding_files_carry_their_execution_id() {
        let f = binding_file("r", "let", 3, Some("lib"), "let r = 1", "1");
        assert_eq!(
            f,
            "# r\n\nkind: let\nexecution_id: 3\nprogram: lib\n\nsource:\n```prose\nlet r = 1\n```\n\n---\n\n1\n"
        );
    }
}
