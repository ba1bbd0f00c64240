//! The policy: an agent's `permissions:` read into patterns and access levels, and what the
//! user allowed for every agent.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use prose_machine::protocol::Capability;

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
    pub(super) fn allows(self, cap: Capability) -> bool {
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

    pub(super) fn describe(&self) -> String {
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
