//! The sandbox: a session's checks of every path, command and connection against its
//! policy, the protected places and the person who may be asked, each one a [`Decision`].

use std::collections::HashSet;
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::beneath::Root;
use crate::checked::SessionFiles;
use crate::confine::{self, Choice, Confinement, Invocation, Plan, Support};
use crate::people::{NoPrompter, Prompter, Unanswered};
use crate::protected::{Protected, CONFIG_FILE, GIT_DIR};
use crate::skills::Skill;
use prose_machine::protocol::{Capability, PermissionQuestion, PromptAnswer};

use super::policy::*;
use crate::checked::CheckedPath;
use crate::protected::STATE_DIR;

/// What a permission check was about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Reading a file or searching a directory.
    Read,
    /// Creating or changing a file.
    Write,
    /// Running a command.
    Bash,
    /// Connecting to a URL or a server that reaches out.
    Network,
}

/// One permission decision, for the trace: which tool asked to do what, and whether and why
/// it was allowed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The tool that asked.
    pub tool: String,
    /// What it asked for.
    pub action: Action,
    /// The path, command or URL, as the tool gave it.
    pub target: String,
    /// Whether it was allowed.
    pub allowed: bool,
    /// The rule that decided (`read rule "*.md"`, `bash: deny in the agent's permissions`, ...).
    pub reason: String,
}

/// A refused permission check: what was refused and why (shown to the model as the tool's
/// error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// What was asked for.
    pub action: Action,
    /// The path, command or URL.
    pub target: String,
    /// Why it was refused.
    pub reason: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.action {
            Action::Read => "reading",
            Action::Write => "writing",
            Action::Bash => "running the command",
            Action::Network => "network access to",
        };
        write!(
            f,
            "permission denied: {what} `{}` is not allowed: {}",
            self.target, self.reason
        )
    }
}

impl std::error::Error for Refusal {}

/// A granted `bash` or `network` check: the rule that allowed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The rule that allowed it.
    pub reason: String,
}

/// A directory readable because a skill brought it.
#[derive(Clone, Debug)]
struct ReadRoot {
    skill: String,
    canonical: PathBuf,
    root: Arc<Root>,
}

/// Builds a [`Sandbox`]: the working directory, then the policy, the user's allowances, the
/// prompter, the agent's name and its skills' directories, each optional.
pub struct SandboxBuilder {
    workdir: PathBuf,
    policy: Policy,
    user: UserAllow,
    prompter: Arc<dyn Prompter>,
    agent: Option<String>,
    roots: Vec<(String, PathBuf)>,
    protected: Protected,
    choice: Option<Choice>,
}

impl SandboxBuilder {
    /// The OS sandbox commands run in (default: what [`confine::CHOICE_VAR`] says, read
    /// when the sandbox is built).
    pub fn confine_with(mut self, choice: Choice) -> Self {
        self.choice = Some(choice);
        self
    }

    /// The agent's permissions (default: [`Policy::default`]).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// What the user allowed (default: nothing).
    pub fn user(mut self, user: UserAllow) -> Self {
        self.user = user;
        self
    }

    /// Who answers `prompt` questions (default: [`NoPrompter`]).
    pub fn prompter(mut self, prompter: Arc<dyn Prompter>) -> Self {
        self.prompter = prompter;
        self
    }

    /// The agent's name, shown in permission questions.
    pub fn agent(mut self, name: impl Into<String>) -> Self {
        self.agent = Some(name.into());
        self
    }

    /// The run's protected places beyond the fixed names (its state directory, its program's
    /// files; default: none).
    pub fn protect(mut self, protected: Protected) -> Self {
        self.protected = protected;
        self
    }

    /// Makes a skill's directory readable (never writable): every file under it, whatever the
    /// `read` patterns, as long as its canonical path stays inside the directory.
    pub fn skill(mut self, skill: &Skill) -> Self {
        self.roots.push((skill.name.clone(), skill.dir.clone()));
        self
    }

    /// The sandbox; fails if the working directory or a skill directory cannot be made
    /// canonical (it does not exist, for example).
    pub fn build(self) -> std::io::Result<Sandbox> {
        let canonical = std::fs::canonicalize(&self.workdir)?;
        let workdir = if self.workdir.is_absolute() {
            self.workdir
        } else {
            canonical.clone()
        };
        let mut roots = Vec::new();
        for (skill, dir) in self.roots {
            let canonical = std::fs::canonicalize(dir)?;
            roots.push(ReadRoot {
                skill,
                root: Arc::new(Root::open(&canonical)?),
                canonical,
            });
        }
        Ok(Sandbox {
            inner: Arc::new(Inner {
                given: workdir,
                root: Arc::new(Root::open(&canonical)?),
                canonical,
                files: Arc::default(),
                policy: self.policy,
                user: self.user,
                prompter: self.prompter,
                agent: self.agent,
                roots,
                protected: self.protected,
                choice: self.choice.map_or_else(Choice::from_env, Ok),
                always: Mutex::new(HashSet::new()),
                asking: tokio::sync::Mutex::new(()),
            }),
        })
    }
}

/// One session's view of the world: its working directory and what its agent may do there.
/// Cheap to clone (clones share the "always" answers).
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

struct Inner {
    /// The working directory as given (absolute).
    given: PathBuf,
    /// The working directory, canonical.
    canonical: PathBuf,
    /// The working directory, held open: file tools open paths beneath it.
    root: Arc<Root>,
    /// The files this session's file tools created and read.
    files: Arc<SessionFiles>,
    policy: Policy,
    user: UserAllow,
    prompter: Arc<dyn Prompter>,
    agent: Option<String>,
    roots: Vec<ReadRoot>,
    protected: Protected,
    /// The OS sandbox commands run in, or why none can be chosen (a bad
    /// [`confine::CHOICE_VAR`]: commands are refused, whatever the user allowed).
    choice: Result<Choice, String>,
    /// Capabilities answered "always" in this session.
    always: Mutex<HashSet<Capability>>,
    /// Held while a question is asked, so concurrent calls ask once.
    asking: tokio::sync::Mutex<()>,
}

impl fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sandbox")
            .field("workdir", &self.inner.canonical)
            .field("policy", &self.inner.policy)
            .field("user", &self.inner.user)
            .field("agent", &self.inner.agent)
            .field("roots", &self.inner.roots)
            .finish_non_exhaustive()
    }
}

/// Where a path argument resolved to.
enum Resolved {
    /// Inside the working directory: canonical path and the canonical path relative to it.
    Inside { canonical: PathBuf, rel: PathBuf },
    /// Inside a skill's directory (readable only).
    Skill { canonical: PathBuf, skill: String },
}

impl Sandbox {
    /// Starts a sandbox for `workdir` with every other setting at its default.
    pub fn builder(workdir: impl Into<PathBuf>) -> SandboxBuilder {
        SandboxBuilder {
            workdir: workdir.into(),
            policy: Policy::default(),
            user: UserAllow::default(),
            prompter: Arc::new(NoPrompter),
            agent: None,
            roots: Vec::new(),
            protected: Protected::default(),
            choice: None,
        }
    }

    /// Remembers that a person answered "always" for `cap` in this session (an answer given
    /// before the run was interrupted, replayed from its journal).
    pub fn grant_always(&self, cap: Capability) {
        self.inner
            .always
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(cap);
    }

    /// The canonical working directory.
    pub fn workdir(&self) -> &Path {
        &self.inner.canonical
    }

    /// The agent's permissions.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// Checks that `path` may be read: inside the working directory and matching the `read`
    /// patterns (if any), or inside a skill's directory.
    pub fn check_read(&self, path: &str) -> Result<CheckedPath, Refusal> {
        self.check_read_at(Path::new(path), path)
    }

    /// [`Sandbox::check_read`] for a path found by walking the working directory.
    pub fn check_read_path(&self, path: &Path) -> Result<CheckedPath, Refusal> {
        self.check_read_at(path, &path.to_string_lossy())
    }

    /// Checks that `path` may be written (created, replaced or edited): inside the working
    /// directory and matching the `write` patterns (if any). Skill directories are never
    /// writable.
    pub fn check_write(&self, path: &str) -> Result<CheckedPath, Refusal> {
        self.check_path(Path::new(path), path, Action::Write)
    }

    fn check_read_at(&self, path: &Path, shown: &str) -> Result<CheckedPath, Refusal> {
        self.check_path(path, shown, Action::Read)
    }

    /// The one check of a path a tool reads or writes (`action`): resolved inside the
    /// working directory (or, for reading, a skill's directory) and matched against the
    /// agent's patterns for `action`, if it has any.
    fn check_path(&self, path: &Path, shown: &str, action: Action) -> Result<CheckedPath, Refusal> {
        let refuse = |reason: String| Refusal {
            action,
            target: shown.to_string(),
            reason,
        };
        let writing = action == Action::Write;
        let (rule, verb, patterns) = if writing {
            ("write", "writing", self.inner.policy.write())
        } else {
            ("read", "reading", self.inner.policy.read())
        };
        match self.resolve(path, action).map_err(refuse)? {
            Resolved::Skill { skill, .. } if writing => Err(refuse(format!(
                "it is inside the directory of skill `{skill}`, which is read-only"
            ))),
            Resolved::Skill { canonical, skill } => Ok(self.checked_in_skill(canonical, skill)),
            Resolved::Inside { rel, .. } if writing && rel.as_os_str().is_empty() => {
                Err(refuse("that is the working directory itself".into()))
            }
            Resolved::Inside { canonical, rel } => {
                let reason = match patterns {
                    None => format!("default: {verb} inside the working directory"),
                    Some(set) => match set.matching(&rel) {
                        Some(p) => format!("{rule} rule {p:?}"),
                        None => {
                            return Err(refuse(format!(
                                "`{}` matches none of the agent's {rule} patterns {}",
                                rel.display(),
                                set.describe()
                            )))
                        }
                    },
                };
                Ok(self.checked(canonical, rel.to_string_lossy().into_owned(), reason))
            }
        }
    }

    /// Checks a place to search (`grep`'s `path`): a directory inside the working directory or
    /// a skill's directory (its files are then checked one by one with
    /// [`Sandbox::check_read_path`]), or a file that may be read.
    pub fn check_search(&self, path: &str) -> Result<CheckedPath, Refusal> {
        let refuse = |reason: String| Refusal {
            action: Action::Read,
            target: path.to_string(),
            reason,
        };
        let resolved = self
            .resolve(Path::new(path), Action::Read)
            .map_err(refuse)?;
        let (canonical, display, reason) = match resolved {
            Resolved::Skill { canonical, skill } => {
                return Ok(self.checked_in_skill(canonical, skill));
            }
            Resolved::Inside { canonical, rel } => {
                if !canonical.is_dir() {
                    return self.check_read(path);
                }
                let display = if rel.as_os_str().is_empty() {
                    ".".to_string()
                } else {
                    rel.to_string_lossy().into_owned()
                };
                (
                    canonical,
                    display,
                    "a directory inside the working directory (each file checked)".to_string(),
                )
            }
        };
        Ok(self.checked(canonical, display, reason))
    }

    /// A path checked inside the working directory.
    fn checked(&self, canonical: PathBuf, display: String, reason: String) -> CheckedPath {
        let inner = &self.inner;
        CheckedPath::new(
            canonical,
            display,
            reason,
            inner.root.clone(),
            inner.files.clone(),
        )
    }

    /// A path checked inside the directory of `skill`.
    fn checked_in_skill(&self, canonical: PathBuf, skill: String) -> CheckedPath {
        let inner = &self.inner;
        let base = inner
            .roots
            .iter()
            .find(|r| r.skill == skill && canonical.starts_with(&r.canonical))
            .map_or_else(|| inner.root.clone(), |r| r.root.clone());
        CheckedPath::new(
            canonical.clone(),
            canonical.to_string_lossy().into_owned(),
            format!("inside the directory of skill `{skill}`"),
            base,
            inner.files.clone(),
        )
    }

    /// Checks that `command` may run, and says how: a plain run of a file matching an
    /// `execute` pattern runs that file directly; otherwise the `bash` setting decides
    /// (asking a person for `prompt`) and the command runs under `sh -c`. Either way it
    /// needs the OS sandbox, unless the user allowed commands without one.
    pub async fn check_bash(&self, command: &str) -> Result<(Invocation, Grant), Refusal> {
        let unsandboxed = self.unsandboxed();
        let mut granted = match self.execute_grant(command) {
            Ok(granted) => match &unsandboxed {
                Err(why) => {
                    return Err(Refusal {
                        action: Action::Bash,
                        target: command.to_string(),
                        reason: why.clone(),
                    })
                }
                Ok(_) => granted,
            },
            Err(execute_note) => {
                let blocked = unsandboxed.as_ref().err().map(String::as_str);
                let grant = self
                    .check_capability(Capability::Bash, command, blocked)
                    .await
                    .map_err(|mut refusal| {
                        if let Some(note) = execute_note {
                            refusal.reason = format!("{}; {note}", refusal.reason);
                        }
                        refusal
                    })?;
                (Invocation::Shell(command.to_string()), grant)
            }
        };
        if let Ok(true) = unsandboxed {
            granted.1.reason.push_str(
                ", without an OS sandbox (none can be set up here; --allow unsandboxed-bash)",
            );
        }
        Ok(granted)
    }

    /// How commands of this session are confined: what the probes found for its choice.
    pub fn support(&self) -> Result<Support, String> {
        self.inner.choice.clone().map(confine::support)
    }

    /// Whether commands run without the OS sandbox (`Ok(true)`: none can be set up and the
    /// user allowed that), inside it (`Ok(false)`), or not at all (why).
    fn unsandboxed(&self) -> Result<bool, String> {
        match self.support()? {
            Support::Bubblewrap(_) | Support::Landlock { .. } => Ok(false),
            Support::Unavailable(_) if self.inner.user.unsandboxed_bash => Ok(true),
            Support::Unavailable(why) => Err(format!(
                "commands run only inside an OS sandbox, and none can be set up here: {why}; \
                 the user can let commands run without one with --allow unsandboxed-bash"
            )),
        }
    }

    /// How this session's commands run, for the narration: the confinement's name (as
    /// [`confine::CHOICE_VAR`] takes it, or `none`) and what that means here.
    pub fn confinement_summary(&self) -> (String, String) {
        match self.support() {
            Ok(Support::Unavailable(why)) if self.inner.user.unsandboxed_bash => (
                "none".into(),
                format!(
                    "commands run WITHOUT an OS sandbox (--allow unsandboxed-bash), since none \
                     can be set up here: {why}"
                ),
            ),
            Ok(Support::Unavailable(why)) => (
                "none".into(),
                format!(
                    "commands are refused: no OS sandbox can be set up here ({why}); \
                     --allow unsandboxed-bash runs them without one"
                ),
            ),
            Ok(support) => (
                support.kind().map_or("none", confine::Kind::name).into(),
                format!("commands run in {}", support.describe()),
            ),
            Err(why) => ("none".into(), format!("commands are refused: {why}")),
        }
    }

    /// The OS sandbox a command of this session runs in, made now (it holds what it set up
    /// until dropped); `None` when commands run without one (see [`Sandbox::check_bash`]).
    pub fn confinement(&self) -> Result<Option<Confinement>, String> {
        let support = self.support()?;
        if support.kind().is_none() {
            return Ok(None);
        }
        let inner = &self.inner;
        let workdir = &inner.canonical;
        let writable = match inner.policy.write() {
            None => vec![workdir.clone()],
            Some(set) => self.write_roots(set)?,
        };
        let protected = &inner.protected;
        let mut protect: Vec<(PathBuf, bool)> = Vec::new();
        for base in std::iter::once(workdir).chain(&writable) {
            protect.push((base.join(GIT_DIR), true));
            protect.push((base.join(CONFIG_FILE), false));
        }
        if let Some(dir) = protected.program_directory() {
            for d in dir.ancestors().take_while(|d| d.starts_with(workdir)) {
                protect.push((d.join(CONFIG_FILE), false));
            }
        }
        for file in protected.program_files() {
            protect.push((file.clone(), false));
        }
        let mut hidden = vec![workdir.join(STATE_DIR)];
        hidden.extend(protected.hidden().iter().cloned());
        protect.extend(hidden.iter().map(|h| (h.clone(), true)));
        Confinement::new(
            &support,
            Plan {
                workdir: &inner.root,
                network: self.commands_reach_network(),
                writable,
                protect,
                hidden,
            },
        )
        .map(Some)
    }

    /// The canonical paths `set`'s patterns let a command write ([`PatternSet::os_roots`]);
    /// a directory named by a pattern is created if missing (beneath the working directory,
    /// following no link), a path that may be a file only if it exists.
    fn write_roots(&self, set: &PatternSet) -> Result<Vec<PathBuf>, String> {
        let workdir = &self.inner.canonical;
        let mut roots = Vec::new();
        for root in set.os_roots() {
            let rel = match root {
                OsRoot::Everything => return Ok(vec![workdir.clone()]),
                OsRoot::Nothing => continue,
                OsRoot::Dir(rel) => {
                    let base = crate::beneath::Root::open(workdir)
                        .map_err(|e| format!("the working directory: {e}"))?;
                    if let Err(e) = base.create_dirs(&rel) {
                        return Err(format!(
                            "could not create `{}`, a directory the agent may write: {e}",
                            rel.display()
                        ));
                    }
                    rel
                }
                OsRoot::Path(rel) => rel,
            };
            match std::fs::canonicalize(workdir.join(&rel)) {
                Ok(c) if c.starts_with(workdir) => roots.push(c),
                _ => {}
            }
        }
        Ok(roots)
    }

    /// Whether commands reach the network: only when it is granted without asking (a
    /// command's connections cannot be asked about one by one).
    fn commands_reach_network(&self) -> bool {
        match self.inner.policy.access(Capability::Network) {
            Some(Access::Allow) => true,
            Some(Access::Deny) => false,
            None | Some(Access::Prompt) => self.inner.user.network,
        }
    }

    /// Checks that the network may be used to reach `target` (a URL, or a description of an
    /// MCP server): the `network` setting decides (asking a person for `prompt`).
    pub async fn check_network(&self, target: &str) -> Result<Grant, Refusal> {
        self.check_capability(Capability::Network, target, None)
            .await
    }

    /// `Ok` (the file and its literal arguments) if `command` runs a file an execute pattern
    /// allows; otherwise why not, when the agent has execute patterns at all.
    fn execute_grant(&self, command: &str) -> Result<(Invocation, Grant), Option<String>> {
        let Some(set) = self.inner.policy.execute() else {
            return Err(None);
        };
        let not = |why: &str| {
            Err(Some(format!(
                "the execute patterns {} do not apply: {why}",
                set.describe()
            )))
        };
        const META: &[char] = &[
            ';', '|', '&', '$', '>', '<', '`', '\'', '"', '\\', '(', ')', '{', '}', '\n', '\r',
        ];
        if let Some(c) = command.chars().find(|c| META.contains(c)) {
            return not(&format!(
                "the command contains the shell metacharacter {c:?}"
            ));
        }
        let mut words = command.split_whitespace();
        let Some(program) = words.next() else {
            return not("the command is empty");
        };
        if let Some((name, _)) = program.split_once('=') {
            let mut chars = name.chars();
            if chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return not(&format!(
                    "its first word `{program}` is a variable assignment, not a program"
                ));
            }
        }
        if !program.contains('/') {
            return not(&format!(
                "its program `{program}` is not written as a path (like `./{program}`)"
            ));
        }
        match self.resolve(Path::new(program), Action::Bash) {
            Ok(Resolved::Inside { canonical, rel }) => {
                if !canonical.is_file() {
                    return not(&format!("`{program}` is not a file"));
                }
                match set.matching(&rel) {
                    Some(p) => Ok((
                        Invocation::Exec {
                            program: canonical,
                            args: words.map(str::to_string).collect(),
                        },
                        Grant {
                            reason: format!("execute rule {p:?}"),
                        },
                    )),
                    None => not(&format!("`{}` matches none of them", rel.display())),
                }
            }
            Ok(Resolved::Skill { .. }) => not(&format!(
                "`{program}` is in a skill's directory, which is read-only"
            )),
            Err(reason) => not(&reason),
        }
    }

    /// Checks `cap` for `detail`; `blocked` is why it is refused even if granted (checked
    /// before anyone is asked).
    async fn check_capability(
        &self,
        cap: Capability,
        detail: &str,
        blocked: Option<&str>,
    ) -> Result<Grant, Refusal> {
        let action = match cap {
            Capability::Bash => Action::Bash,
            Capability::Network => Action::Network,
        };
        let refuse = |reason: String| Refusal {
            action,
            target: detail.to_string(),
            reason,
        };
        let grant = |reason: String| Ok(Grant { reason });
        let user = self.inner.user.allows(cap);
        let access = self.inner.policy.access(cap);
        if let Some(why) = blocked {
            if access != Some(Access::Deny) && (access.is_some() || user) {
                return Err(refuse(why.to_string()));
            }
        }
        match access {
            Some(Access::Allow) => grant(format!("`{cap}: allow` in the agent's permissions")),
            Some(Access::Deny) => Err(refuse(format!("`{cap}: deny` in the agent's permissions"))),
            None if user => grant(format!("the user allowed {cap} (--allow {cap})")),
            None => Err(refuse(format!(
                "{cap} is off by default: the agent's permissions do not grant it and the user \
                 did not allow it (--allow {cap})"
            ))),
            Some(Access::Prompt) if user => grant(format!(
                "`{cap}: prompt`, and the user allowed {cap} (--allow {cap})"
            )),
            Some(Access::Prompt) => {
                let _asking = self.inner.asking.lock().await;
                if self.always().contains(&cap) {
                    return grant(format!(
                        "`{cap}: prompt`, answered \"always\" earlier in this session"
                    ));
                }
                let question = PermissionQuestion {
                    agent: self.inner.agent.clone(),
                    capability: cap,
                    detail: detail.to_string(),
                };
                match self.inner.prompter.ask(&question).await {
                    Ok(PromptAnswer::Yes) => grant(format!("`{cap}: prompt`, a person said yes")),
                    Ok(PromptAnswer::Always) => {
                        self.always().insert(cap);
                        grant(format!("`{cap}: prompt`, a person said always"))
                    }
                    Ok(PromptAnswer::No) => {
                        Err(refuse(format!("`{cap}: prompt`, and a person said no")))
                    }
                    Err(Unanswered::Lapsed(why)) => {
                        Err(refuse(format!("`{cap}: prompt`, and {why}")))
                    }
                    Err(Unanswered::NoOne) => Err(refuse(format!(
                        "`{cap}: prompt`, but there is no one to ask; the user can allow it \
                         with --allow {cap}"
                    ))),
                }
            }
        }
    }

    fn always(&self) -> std::sync::MutexGuard<'_, HashSet<Capability>> {
        self.inner.always.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves a path argument to its canonical form, refusing `..`, absolute paths outside
    /// the working directory (and, for reading, the skills' directories), symbolic links that
    /// lead out, and `.prose/`.
    fn resolve(&self, path: &Path, action: Action) -> Result<Resolved, String> {
        let shown = path.display();
        if path.as_os_str().is_empty() {
            return Err("the path is empty".into());
        }
        let mut rel = PathBuf::new();
        let mut absolute = false;
        for component in path.components() {
            match component {
                Component::ParentDir => {
                    return Err(
                        "`..` is not allowed in paths; name files relative to the working \
                         directory"
                            .into(),
                    )
                }
                Component::RootDir | Component::Prefix(_) => absolute = true,
                Component::CurDir => {}
                Component::Normal(c) => rel.push(c),
            }
        }
        let inner = &self.inner;
        let (full, lexical) = if absolute {
            let full = Path::new("/").join(&rel);
            let lexical = full
                .strip_prefix(&inner.canonical)
                .or_else(|_| full.strip_prefix(&inner.given))
                .map(Path::to_path_buf)
                .ok();
            let in_skill = action == Action::Read
                && inner.roots.iter().any(|r| full.starts_with(&r.canonical));
            if lexical.is_none() && !in_skill {
                return Err(format!(
                    "`{shown}` is an absolute path outside the working directory `{}`",
                    inner.canonical.display()
                ));
            }
            (full, lexical)
        } else {
            (inner.canonical.join(&rel), Some(rel))
        };
        let canonical = canonical_prefix(&full)?;
        if action == Action::Read {
            if let Some(skill) = self.skill_of(&canonical) {
                return Ok(Resolved::Skill { canonical, skill });
            }
        }
        let Some(lexical) = lexical else {
            return Err(format!(
                "`{shown}` leads out of the skill's directory (to `{}`)",
                canonical.display()
            ));
        };
        if let Some(why) = inner.protected.refuses_read(&full, &lexical) {
            return Err(why);
        }
        let Ok(crel) = canonical.strip_prefix(&inner.canonical) else {
            return Err(format!(
                "`{shown}` leads outside the working directory through a symbolic link (to `{}`)",
                canonical.display()
            ));
        };
        let protected = match action {
            Action::Write => inner.protected.refuses_write(&canonical, crel),
            _ => inner.protected.refuses_read(&canonical, crel),
        };
        if let Some(why) = protected {
            return Err(why);
        }
        let rel = crel.to_path_buf();
        Ok(Resolved::Inside { canonical, rel })
    }

    /// The run's protected places beyond the fixed names.
    pub fn protected(&self) -> &Protected {
        &self.inner.protected
    }

    fn skill_of(&self, canonical: &Path) -> Option<String> {
        self.inner
            .roots
            .iter()
            .find(|r| canonical.starts_with(&r.canonical))
            .map(|r| r.skill.clone())
    }
}

/// The canonical form of `path`, which may not exist yet: its deepest existing ancestor made
/// canonical (following every symbolic link), joined with the components that do not exist.
/// A broken symbolic link on the way is refused: writing through it would create its target.
fn canonical_prefix(path: &Path) -> Result<PathBuf, String> {
    let mut existing = path;
    loop {
        if std::fs::symlink_metadata(existing).is_ok() {
            break;
        }
        match existing.parent() {
            Some(parent) => existing = parent,
            None => return Err(format!("no part of `{}` exists", path.display())),
        }
    }
    let canonical = std::fs::canonicalize(existing).map_err(|e| {
        format!(
            "`{}` cannot be resolved ({e}); it may be a broken symbolic link",
            existing.display()
        )
    })?;
    let rest = path.strip_prefix(existing).unwrap_or(Path::new(""));
    Ok(if rest.as_os_str().is_empty() {
        canonical
    } else {
        canonical.join(rest)
    })
}
