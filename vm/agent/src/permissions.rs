//! What a session's tools may touch: the agent's `permissions:` as a [`Policy`], checked by a
//! [`Sandbox`] before any tool reads, writes, runs a command or connects anywhere.
//!
//! # The model
//!
//! - **Paths.** A path argument is relative to the working directory; an absolute one is
//!   accepted only inside it (or inside a skill's directory, for reading). A `..` component is
//!   refused outright. The path is then made canonical (for a file that does not exist yet, its
//!   nearest existing ancestor is), so a symbolic link that leads outside the working directory
//!   is refused, for reading and for writing alike. The protected places
//!   ([`super::protected`]) are out of reach whatever the policy says: the run state (`.prose/`
//!   and the state directory: journals, bindings, agent memory) is neither readable nor
//!   writable, and no `prose.toml`, nothing in a `.git/` and none of the program's files is
//!   writable.
//! - **`read` / `write` / `execute`** take glob patterns matched against the canonical path
//!   relative to the working directory (see [`PatternSet`]). Without a `read` (or `write`) rule
//!   the agent may read (or write) anything inside the working directory.
//! - **`bash` / `network`** take `allow`, `deny` or `prompt`. Without a rule they are refused,
//!   unless the user allowed them ([`UserAllow`]). The user's allowance also turns `prompt` into
//!   `allow`; an explicit `deny` always wins. `prompt` asks a person through a [`Prompter`]; an
//!   "always" answer holds for the rest of the session (the sandbox's lifetime) for that
//!   capability; with no one to ask the call is refused (a durable run waits for an answer
//!   from outside instead: the runtime's `approvals`).
//! - **`execute`** lets a command run even when `bash` is not allowed, provided the command is a
//!   plain invocation of a file matching an execute pattern: its program (first word) is
//!   written as a path (it contains a `/`, as in `./test.sh` or `scripts/check`) and is not a
//!   variable assignment (`X=p/a.sh`), and the command has no shell metacharacters
//!   (`; | & $ > < \` ' " \ ( ) { }` or a newline). No shell is involved: the file itself is
//!   run ([`Invocation::Exec`]) with the other words as literal arguments (`*` or `~` are not
//!   expanded).
//! - **Commands** (`bash`, and files run through `execute`) run inside an OS sandbox
//!   ([`super::confine`]) that confines their writes to the agent's write paths and keeps
//!   the protected places ([`super::protected`]) read-only or hidden. Where no sandbox can be
//!   set up they are refused, unless the user allowed unsandboxed commands
//!   ([`UserAllow::unsandboxed_bash`]).
//!
//! Every check produces a [`Decision`] record, so the trace can show what was allowed or
//! refused, and why.

use std::collections::HashSet;
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use super::beneath::Root;
use super::checked::SessionFiles;
use super::confine::{self, Choice, Confinement, Invocation, Plan, Support};
use super::protected::{Protected, CONFIG_FILE, GIT_DIR};
use super::skills::Skill;
use crate::people::{NoPrompter, Prompter, Unanswered};
use prose_machine::protocol::{Capability, PermissionQuestion, PromptAnswer};

pub use super::checked::CheckedPath;
pub use super::protected::STATE_DIR;

/// Capabilities a user can allow for every agent (`--allow bash`, `--allow network`, or
/// `prose.toml`): they turn an unmentioned or `prompt` setting into `allow`, but never override
/// an explicit `deny` in the program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserAllow {
    /// Shell commands (the `bash` tool).
    pub bash: bool,
    /// Network access (`web_fetch`, MCP servers that reach out).
    pub network: bool,
    /// Commands may run without an OS sandbox where none can be set up
    /// (`--allow unsandboxed-bash`, only on the command line). Where a sandbox can be set up
    /// it is always used.
    #[serde(default)]
    pub unsandboxed_bash: bool,
}

impl UserAllow {
    fn allows(self, cap: Capability) -> bool {
        match cap {
            Capability::Bash => self.bash,
            Capability::Network => self.network,
        }
    }
}

/// The value of a `bash:` or `network:` rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Granted.
    Allow,
    /// Refused, whatever the user allowed.
    Deny,
    /// Ask a person each time (unless answered "always", or the user allowed it).
    Prompt,
}

/// Why a `permissions:` block could not be turned into a [`Policy`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
    /// A kind other than read, write, execute, bash, network.
    UnknownKind(String),
    /// The same kind given twice.
    Duplicate(String),
    /// `bash`/`network` with something other than one of allow, deny, prompt.
    BadAccess {
        /// The kind.
        kind: String,
        /// What it was given, joined with commas.
        value: String,
    },
    /// A glob pattern that does not compile or can never match.
    BadPattern {
        /// The pattern as written.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::UnknownKind(k) => write!(
                f,
                "unknown permission kind `{k}` (expected read, write, execute, bash or network)"
            ),
            PolicyError::Duplicate(k) => write!(f, "permission `{k}` is given twice"),
            PolicyError::BadAccess { kind, value } => write!(
                f,
                "permission `{kind}` takes one of allow, deny, prompt; got `{value}`"
            ),
            PolicyError::BadPattern { pattern, reason } => {
                write!(f, "bad glob pattern `{pattern}`: {reason}")
            }
        }
    }
}

impl std::error::Error for PolicyError {}

/// A list of glob patterns, with the matching rules of `permissions:` (also used by `grep`'s
/// `glob` argument):
///
/// - a pattern without `/` matches a file or directory name at any depth (`*.md`,
///   `Cargo.toml`), as in `.gitignore`;
/// - a pattern ending in `/` is a directory tree relative to the working directory (`output/`
///   covers everything under `output`);
/// - any other pattern is relative to the working directory (`src/*.rs`, `docs/**/*.md`; a
///   leading `/` or `./` is allowed and changes nothing); `*` and `?` stay within one path
///   component, `**` crosses any number;
/// - a pattern that matches a directory also covers everything beneath it.
#[derive(Debug, Clone)]
pub struct PatternSet {
    patterns: Vec<String>,
    /// For each compiled glob, the index of the pattern it came from.
    owner: Vec<usize>,
    set: GlobSet,
}

impl PatternSet {
    /// Compiles `patterns`; an empty list matches nothing.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<PatternSet, PolicyError> {
        let mut builder = GlobSetBuilder::new();
        let mut owner = Vec::new();
        for (i, pattern) in patterns.iter().enumerate() {
            let pattern = pattern.as_ref();
            for glob in expand_pattern(pattern)? {
                let compiled = GlobBuilder::new(&glob)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| PolicyError::BadPattern {
                        pattern: pattern.to_string(),
                        reason: e.kind().to_string(),
                    })?;
                builder.add(compiled);
                owner.push(i);
            }
        }
        let set = builder.build().map_err(|e| PolicyError::BadPattern {
            pattern: patterns
                .iter()
                .map(|p| p.as_ref())
                .collect::<Vec<_>>()
                .join(", "),
            reason: e.to_string(),
        })?;
        Ok(PatternSet {
            patterns: patterns.iter().map(|p| p.as_ref().to_string()).collect(),
            owner,
            set,
        })
    }

    /// The patterns as written.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// The first pattern (as written) that matches `rel`, a path relative to the working
    /// directory.
    pub fn matching(&self, rel: &Path) -> Option<&str> {
        self.set
            .matches(rel)
            .into_iter()
            .map(|g| self.owner[g])
            .min()
            .map(|i| self.patterns[i].as_str())
    }

    /// Whether any pattern matches `rel`.
    pub fn is_match(&self, rel: &Path) -> bool {
        self.set.is_match(rel)
    }

    fn describe(&self) -> String {
        let quoted: Vec<String> = self.patterns.iter().map(|p| format!("{p:?}")).collect();
        format!("[{}]", quoted.join(", "))
    }

    /// What the patterns let a command write, as the OS sandbox can express it: each
    /// pattern's fixed leading directories (see [`OsRoot`]).
    pub fn os_roots(&self) -> Vec<OsRoot> {
        self.patterns.iter().map(|p| os_root(p)).collect()
    }
}

/// A place a command may write, derived from one pattern. The OS sandbox makes whole paths
/// writable and cannot match globs, so only a pattern that covers a whole directory (`out/`,
/// `out/**`, `out`, `**`) or names a path is expressed; any other (`*.md`, `notes/*.md`)
/// lets the file tools write what it matches, never a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OsRoot {
    /// The whole working directory (`**`, `.`, `*`).
    Everything,
    /// A directory relative to the working directory: `out/`, `out/**`.
    Dir(PathBuf),
    /// A path written without glob characters, which may be a file or a directory.
    Path(PathBuf),
    /// Nothing a command may write: a pattern matching names at any depth (`*.md`) or only
    /// some of a directory's files (`notes/*.md`).
    Nothing,
}

/// A pattern without its leading `./` and `/` (any number of them), and whether it had one:
/// such a pattern is anchored at the working directory.
fn unanchored(pattern: &str) -> (&str, bool) {
    let mut p = pattern;
    let mut anchored = false;
    loop {
        if let Some(rest) = p.strip_prefix("./") {
            p = rest;
            anchored = true;
        } else if let Some(rest) = p.strip_prefix('/') {
            p = rest;
            anchored = true;
        } else {
            break;
        }
    }
    (p, anchored)
}

/// The [`OsRoot`] of one pattern (patterns are checked by [`PatternSet::new`]).
fn os_root(pattern: &str) -> OsRoot {
    const GLOB: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];
    let (p, anchored) = unanchored(pattern.trim());
    let dir = p.ends_with('/');
    let p = p.trim_end_matches('/');
    if p.is_empty() || p == "." {
        return OsRoot::Everything;
    }
    let parts: Vec<&str> = p
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if parts.iter().all(|c| *c == "*" || *c == "**") {
        return OsRoot::Everything;
    }
    // A name without `/` matches at any depth (a trailing `/` anchors it).
    if !anchored && !dir && parts.len() == 1 {
        return OsRoot::Nothing;
    }
    let fixed: PathBuf = parts.iter().take_while(|c| !c.contains(GLOB)).collect();
    let count = fixed.components().count();
    let whole = parts[count..].iter().all(|c| *c == "*" || *c == "**");
    if count == 0 || !whole {
        OsRoot::Nothing
    } else if count == parts.len() && !dir {
        OsRoot::Path(fixed)
    } else {
        OsRoot::Dir(fixed)
    }
}

/// The globset globs one pattern stands for.
fn expand_pattern(pattern: &str) -> Result<Vec<String>, PolicyError> {
    let bad = |reason: &str| PolicyError::BadPattern {
        pattern: pattern.to_string(),
        reason: reason.to_string(),
    };
    let trimmed = pattern.trim();
    if trimmed.is_empty() {
        return Err(bad("empty pattern"));
    }
    if trimmed.split('/').any(|c| c == "..") {
        return Err(bad(
            "`..` can never match: paths are relative to the working directory",
        ));
    }
    let (p, anchored) = unanchored(trimmed);
    if p.is_empty() || p == "." {
        return Ok(vec!["**".to_string()]);
    }
    if let Some(dir) = p.strip_suffix('/') {
        let dir = dir.trim_end_matches('/');
        if dir.is_empty() {
            return Ok(vec!["**".to_string()]);
        }
        return Ok(vec![format!("{dir}/**")]);
    }
    if !anchored && !p.contains('/') {
        return Ok(vec![format!("**/{p}"), format!("**/{p}/**")]);
    }
    Ok(vec![p.to_string(), format!("{p}/**")])
}

/// An agent's permissions, from its `permissions:` block. Kinds the block does not mention
/// keep their defaults: read and write anywhere inside the working directory, nothing
/// executable beyond what `bash` allows, no `bash` and no `network` unless the user allowed
/// them. [`Policy::default`] is the policy of an agent with no `permissions:` at all.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    read: Option<PatternSet>,
    write: Option<PatternSet>,
    execute: Option<PatternSet>,
    bash: Option<Access>,
    network: Option<Access>,
}

impl Policy {
    /// Builds a policy from the rules of a `permissions:` block, each a kind and its values:
    /// `read`/`write`/`execute` take glob patterns, `bash`/`network` exactly one of `allow`,
    /// `deny`, `prompt`. An unknown or repeated kind, a bad value or a bad pattern is an error
    /// naming it.
    pub fn from_rules(rules: &[(String, Vec<String>)]) -> Result<Policy, PolicyError> {
        let mut policy = Policy::default();
        let mut seen = HashSet::new();
        for (kind, values) in rules {
            if !seen.insert(kind.as_str()) {
                return Err(PolicyError::Duplicate(kind.clone()));
            }
            match kind.as_str() {
                "read" => policy.read = Some(PatternSet::new(values)?),
                "write" => policy.write = Some(PatternSet::new(values)?),
                "execute" => policy.execute = Some(PatternSet::new(values)?),
                "bash" => policy.bash = Some(parse_access(kind, values)?),
                "network" => policy.network = Some(parse_access(kind, values)?),
                _ => return Err(PolicyError::UnknownKind(kind.clone())),
            }
        }
        Ok(policy)
    }

    /// The `read` patterns, if the block has them.
    pub fn read(&self) -> Option<&PatternSet> {
        self.read.as_ref()
    }

    /// The `write` patterns, if the block has them.
    pub fn write(&self) -> Option<&PatternSet> {
        self.write.as_ref()
    }

    /// The `execute` patterns, if the block has them.
    pub fn execute(&self) -> Option<&PatternSet> {
        self.execute.as_ref()
    }

    /// The `bash` or `network` setting, if the block has it.
    pub fn access(&self, cap: Capability) -> Option<Access> {
        match cap {
            Capability::Bash => self.bash,
            Capability::Network => self.network,
        }
    }

    /// Whether `cap` could be granted at all with what `user` allowed: allowed, to be asked
    /// for, allowed by the user where the block says nothing, or (for `bash`) some `execute`
    /// patterns. A tool needing a capability that could never be granted is not worth
    /// offering.
    pub fn could_use(&self, cap: Capability, user: UserAllow) -> bool {
        match self.access(cap) {
            Some(Access::Allow | Access::Prompt) => true,
            None if user.allows(cap) => true,
            _ => cap == Capability::Bash && self.execute.is_some(),
        }
    }
}

fn parse_access(kind: &str, values: &[String]) -> Result<Access, PolicyError> {
    let bad = || PolicyError::BadAccess {
        kind: kind.to_string(),
        value: values.join(", "),
    };
    match values {
        [one] => match one.trim() {
            "allow" => Ok(Access::Allow),
            "deny" => Ok(Access::Deny),
            "prompt" => Ok(Access::Prompt),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

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
                    let base = super::beneath::Root::open(workdir)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn set(patterns: &[&str]) -> PatternSet {
        PatternSet::new(patterns).unwrap()
    }

    #[test]
    fn name_patterns_match_at_any_depth() {
        let s = set(&["*.md"]);
        assert!(s.is_match(Path::new("README.md")));
        assert!(s.is_match(Path::new("docs/guide/intro.md")));
        assert!(!s.is_match(Path::new("src/main.rs")));
    }

    #[test]
    fn trailing_slash_is_a_directory_tree_from_the_root() {
        let s = set(&["output/"]);
        assert!(s.is_match(Path::new("output/report.md")));
        assert!(s.is_match(Path::new("output/a/b/c.txt")));
        assert!(!s.is_match(Path::new("src/output/x.txt")));
        assert!(!s.is_match(Path::new("output.txt")));
    }

    #[test]
    fn patterns_with_a_slash_are_anchored_and_star_stays_in_one_component() {
        let s = set(&["src/*.rs"]);
        assert!(s.is_match(Path::new("src/main.rs")));
        assert!(!s.is_match(Path::new("src/agent/mod.rs")));
        assert!(!s.is_match(Path::new("vm/src/main.rs")));
        let s = set(&["src/**/*.rs", "./docs"]);
        assert!(s.is_match(Path::new("src/agent/mod.rs")));
        assert!(
            s.is_match(Path::new("docs/a/b.md")),
            "a matched directory covers its tree"
        );
        assert!(!s.is_match(Path::new("x/docs/b.md")));
    }

    #[test]
    fn os_roots_express_only_whole_directories_and_paths() {
        let roots = set(&[
            "out/",
            "./build/**",
            "/docs/*",
            "**",
            "*.md",
            "notes/*.md",
            "src/**/*.rs",
            "report.txt",
            "a/b",
            "*/x",
        ])
        .os_roots();
        assert_eq!(
            roots,
            [
                OsRoot::Dir("out".into()),
                OsRoot::Dir("build".into()),
                OsRoot::Dir("docs".into()),
                OsRoot::Everything,
                OsRoot::Nothing,
                OsRoot::Nothing,
                OsRoot::Nothing,
                OsRoot::Nothing,
                OsRoot::Path("a/b".into()),
                OsRoot::Nothing,
            ]
        );
        assert_eq!(
            set(&["./report.txt"]).os_roots(),
            [OsRoot::Path("report.txt".into())]
        );
        assert_eq!(set(&["*"]).os_roots(), [OsRoot::Everything]);
        assert_eq!(set(&["."]).os_roots(), [OsRoot::Everything]);
    }

    #[test]
    fn matching_names_the_pattern_as_written() {
        let s = set(&["*.txt", "notes/"]);
        assert_eq!(s.matching(Path::new("notes/a.md")), Some("notes/"));
        assert_eq!(s.matching(Path::new("a.txt")), Some("*.txt"));
        assert_eq!(s.matching(Path::new("a.md")), None);
    }

    #[test]
    fn bad_patterns_and_rules_are_errors_naming_them() {
        assert!(matches!(
            PatternSet::new(&["../x"]),
            Err(PolicyError::BadPattern { pattern, .. }) if pattern == "../x"
        ));
        assert!(matches!(
            PatternSet::new(&["a[b"]),
            Err(PolicyError::BadPattern { pattern, .. }) if pattern == "a[b"
        ));
        let rules =
            |k: &str, v: &[&str]| vec![(k.to_string(), v.iter().map(|s| s.to_string()).collect())];
        let err = Policy::from_rules(&rules("delete", &["*"])).unwrap_err();
        assert_eq!(err, PolicyError::UnknownKind("delete".into()));
        assert!(err.to_string().contains("`delete`"));
        let err = Policy::from_rules(&rules("bash", &["sometimes"])).unwrap_err();
        assert!(err.to_string().contains("sometimes"), "{err}");
        assert!(Policy::from_rules(&rules("network", &["allow", "deny"])).is_err());
        let mut twice = rules("bash", &["deny"]);
        twice.extend(rules("bash", &["allow"]));
        assert_eq!(
            Policy::from_rules(&twice).unwrap_err(),
            PolicyError::Duplicate("bash".into())
        );
        let p = Policy::from_rules(&rules("network", &["prompt"])).unwrap();
        assert_eq!(p.access(Capability::Network), Some(Access::Prompt));
        assert_eq!(p.access(Capability::Bash), None);
        assert!(p.read().is_none());
    }
}
