//! A run's workshop: everything its sessions' agent loops share (the working directory, what
//! the user allowed, who answers permission questions, the turn limit, the built-in tools,
//! the skills every agent names resolved before the run starts, the MCP servers), and how a
//! session is equipped from it: its system prompt, its tools and its sandbox.

use super::mcp::McpHub;
use super::permissions::{Policy, Sandbox, UserAllow};
use super::protected::Protected;
use super::skills::{self, Skill, SkillSearch, UsedSkill};
use super::tools::{Tool, Toolbox};
use crate::people::{People, Prompter};
use bytecode_spec::bundle::BundledSkill;
use prose_machine::protocol::Capability;
use prose_machine::protocol::SessionAsk;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// What the VM tells a model that is offered tools, before the agent's own prompt (small
/// models otherwise call tools, even made-up ones, for tasks that need none). The same bytes
/// every time, so that a provider can cache the prefix.
pub const WITH_TOOLS: &str = "You are doing one task. Use a tool only when the task needs a file, a command or the web; otherwise answer directly. Your last reply, without a tool call, is your answer.";

/// The system prompt of a turn: the agent's own (`own`), after the VM's word on tools when
/// the turn offers some.
pub fn system_prompt(own: Option<&str>, with_tools: bool) -> Option<String> {
    match (own, with_tools) {
        (own, false) => own.map(str::to_string),
        (None, true) => Some(WITH_TOOLS.to_string()),
        (Some(own), true) => Some(format!("{WITH_TOOLS}\n\n{own}")),
    }
}

/// Turns a session may take unless told otherwise.
pub const DEFAULT_MAX_TURNS: u32 = 40;

/// Which tools a session is offered when its agent's `tools:` says nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolDefault {
    /// Every tool its permissions allow (a session is a subagent that acts).
    #[default]
    All,
    /// None: each session is one plain completion.
    None,
}

impl ToolDefault {
    /// Whether this is the default, [`ToolDefault::All`].
    pub fn is_all(&self) -> bool {
        *self == ToolDefault::All
    }
}

impl std::str::FromStr for ToolDefault {
    type Err = String;

    fn from_str(s: &str) -> Result<ToolDefault, String> {
        match s {
            "all" => Ok(ToolDefault::All),
            "none" => Ok(ToolDefault::None),
            other => Err(format!("tools {other:?}: want `all` or `none`")),
        }
    }
}

/// What a name in an agent's `skills:` is.
#[derive(Clone)]
pub enum SkillSource {
    /// A skill directory with a `SKILL.md`: instructions for the system prompt, files to read.
    Dir(Skill),
    /// A configured MCP server: its tools are offered.
    Mcp(String),
    /// An imported program (the artifact's module of this index), offered as a tool once
    /// the run binds it ([`Workshop::bind_programs`]).
    Program(u32),
    /// A tool of the VM's own (an imported program offered as a tool).
    Tool(Arc<dyn Tool>),
}

/// Where the names in `skills:` are looked up, in this order.
pub struct SkillPlaces<'a> {
    /// The MCP servers `prose.toml` configures.
    pub servers: &'a [String],
    /// The imported programs: alias and module.
    pub programs: &'a [(String, u32)],
    /// The skills the artifact carries, by the name they are imported as.
    pub bundled: &'a [(&'a str, &'a BundledSkill)],
    /// Where carried skills are unpacked ([`skills::bundled_skills_dir`]).
    pub unpack_to: &'a Path,
    /// The directories searched for skills installed by hand.
    pub search: &'a SkillSearch,
}

/// What a session works with.
pub struct Kit {
    /// The agent's own system prompt: its prompt, then its skills' instructions (a turn
    /// that offers tools puts [`WITH_TOOLS`] before it).
    pub system: Option<String>,
    /// The tools offered.
    pub toolbox: Toolbox,
    /// Built-in tools not offered because the agent may never use them, with why: a model
    /// that calls one anyway is told.
    pub withheld: BTreeMap<String, String>,
    /// Where and how they may act.
    pub sandbox: Sandbox,
    /// Set once the run has said how its commands are confined (the run's first `bash`
    /// call); shared by every session of the run.
    pub sandbox_told: Arc<AtomicBool>,
}

/// The run's shared equipment for agent loops.
pub struct Workshop {
    /// The working directory tools act in.
    pub workdir: PathBuf,
    /// Capabilities the user allowed every agent.
    pub user: UserAllow,
    /// Who answers a person's questions (inputs, permissions) when the driver's host does not.
    pub people: People,
    /// Model turns a session may take.
    pub max_turns: u32,
    /// How long a session may take, over all its turns and attempts.
    pub session_timeout: Option<std::time::Duration>,
    /// How long a tool call waits for a person's approval from outside before it is
    /// refused (none: as long as it takes).
    pub approval_timeout: Option<std::time::Duration>,
    /// The tools a session is offered when its agent's `tools:` says nothing.
    pub tools: ToolDefault,
    /// The run's protected places (its state directory, its program's files).
    pub protected: Protected,
    skills: BTreeMap<String, SkillSource>,
    /// The skill directories resolved, in the order resolved.
    used: Vec<UsedSkill>,
    /// The names of the tools offered to a session naming no skill and no permissions,
    /// shared by all such sessions.
    plain: Arc<[String]>,
    /// Taken when the run ends (while sessions may still hold the workshop).
    mcp: Mutex<Option<McpHub>>,
    /// Set once the run has said how its commands are confined.
    sandbox_told: Arc<AtomicBool>,
}

impl Workshop {
    /// A workshop acting in `workdir` with the built-in tools and no skills.
    pub fn new(workdir: PathBuf, user: UserAllow, people: People) -> Workshop {
        Workshop {
            workdir,
            user,
            people,
            max_turns: DEFAULT_MAX_TURNS,
            session_timeout: None,
            approval_timeout: None,
            tools: ToolDefault::All,
            protected: Protected::default(),
            skills: BTreeMap::new(),
            used: Vec::new(),
            plain: names(&offered(Toolbox::builtin(), &Policy::default(), user, false).0),
            mcp: Mutex::new(None),
            sandbox_told: Arc::default(),
        }
    }

    /// Resolves every name in `names` (the skills the program's agents and sessions name)
    /// as `places` says, in its order: a configured MCP server's name, an imported
    /// program's alias, a skill the artifact carries (unpacked for its agents to read),
    /// else a skill directory found by the search. Returns the names nothing resolved,
    /// each with why (every place looked at), for the caller to refuse or to warn about.
    pub fn resolve_skills<'a>(
        &mut self,
        names: impl IntoIterator<Item = &'a str>,
        places: &SkillPlaces<'_>,
    ) -> Vec<(String, skills::SkillError)> {
        let mut missing = Vec::new();
        for name in names {
            if self.skills.contains_key(name) {
                continue;
            }
            let source = if places.servers.iter().any(|s| s == name) {
                SkillSource::Mcp(name.to_string())
            } else if let Some((_, module)) =
                places.programs.iter().find(|(alias, _)| alias == name)
            {
                SkillSource::Program(*module)
            } else if let Some((_, bundled)) = places.bundled.iter().find(|(n, _)| *n == name) {
                match skills::unpack(bundled, places.unpack_to) {
                    Ok(skill) => {
                        self.used.push(UsedSkill {
                            name: name.to_string(),
                            origin: format!("{} ({})", bundled.source, bundled.origin),
                            sha256: Some(bytecode_spec::bundle::hex(&bundled.digest())),
                        });
                        SkillSource::Dir(skill)
                    }
                    Err(e) => {
                        missing.push((name.to_string(), e));
                        continue;
                    }
                }
            } else {
                match places.search.find(name) {
                    Ok(skill) => {
                        self.used.push(UsedSkill {
                            name: name.to_string(),
                            origin: skill.dir.display().to_string(),
                            sha256: None,
                        });
                        SkillSource::Dir(skill)
                    }
                    Err(e) => {
                        missing.push((name.to_string(), e));
                        continue;
                    }
                }
            };
            self.skills.insert(name.to_string(), source);
        }
        missing
    }

    /// The skill directories the run's agents use, where each came from.
    pub fn skills_used(&self) -> &[UsedSkill] {
        &self.used
    }

    /// Turns the imported programs named as skills into tools: `make` builds the tool for a
    /// skill name and the program's module (none if it cannot).
    pub fn bind_programs(&mut self, make: impl Fn(&str, u32) -> Option<Arc<dyn Tool>>) {
        for (name, source) in self.skills.iter_mut() {
            if let SkillSource::Program(module) = source {
                if let Some(tool) = make(name, *module) {
                    *source = SkillSource::Tool(tool);
                }
            }
        }
    }

    /// The MCP servers started for the run.
    pub fn set_mcp(&mut self, hub: McpHub) {
        *self.mcp.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(hub);
    }

    /// Takes the MCP servers back, to stop them when the run ends; sessions still running
    /// find them gone.
    pub fn take_mcp(&self) -> Option<McpHub> {
        self.mcp.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Completes `s` for a driver that runs sessions itself (an agent host): the names of
    /// the tools it may use, and its skills' instructions in its system prompt.
    pub fn prepare(&self, s: &mut SessionAsk) {
        if s.skills.is_empty() && s.permissions.is_empty() && self.wanted(s).is_none() {
            s.tools = self.plain.clone();
            return;
        }
        s.tools = self
            .toolbox(s)
            .and_then(|t| Ok(offered(t, &policy(s)?, self.user, self.has_skill_dirs(s)).0))
            .map(|t| names(&self.only_wanted(s, t)))
            .unwrap_or_default();
        s.system = self.system_prompt(s);
    }

    /// The tools `s` asks for by name, when it limits them: its agent's `tools:`, else none
    /// at all when the run's default is `none`.
    fn wanted<'s>(&self, s: &'s SessionAsk) -> Option<&'s [String]> {
        match (&s.agent_tools, self.tools) {
            (Some(names), _) => Some(names),
            (None, ToolDefault::None) => Some(&[]),
            (None, ToolDefault::All) => None,
        }
    }

    /// `toolbox` less the tools `s` does not ask for.
    fn only_wanted(&self, s: &SessionAsk, toolbox: Toolbox) -> Toolbox {
        let Some(wanted) = self.wanted(s) else {
            return toolbox;
        };
        let mut kept = Toolbox::new();
        for spec in toolbox.specs() {
            if let (true, Some(tool)) = (wanted.contains(&spec.name), toolbox.get(&spec.name)) {
                // Names are unique in `toolbox`, so adding cannot clash.
                drop(kept.add(tool.clone()));
            }
        }
        kept
    }

    /// Whether `s` names a skill directory (whose files its tools may read).
    fn has_skill_dirs(&self, s: &SessionAsk) -> bool {
        s.skills
            .iter()
            .any(|n| matches!(self.skills.get(n), Some(SkillSource::Dir(_))))
    }

    /// The system prompt of a session of `s`: the agent's prompt, then the instructions of
    /// the skill directories it names.
    pub fn system_prompt(&self, s: &SessionAsk) -> Option<String> {
        let dirs: Vec<Skill> = s
            .skills
            .iter()
            .filter_map(|n| match self.skills.get(n) {
                Some(SkillSource::Dir(skill)) => Some(skill.clone()),
                _ => None,
            })
            .collect();
        let extra = skills::system_prompt(&dirs);
        match (&s.system, extra.is_empty()) {
            (None, true) => None,
            (Some(sys), true) => Some(sys.clone()),
            (None, false) => Some(extra),
            (Some(sys), false) => Some(format!("{sys}\n\n{extra}")),
        }
    }

    /// The built-in tools, and those of the MCP servers and program skills `s` names.
    fn toolbox(&self, s: &SessionAsk) -> Result<Toolbox, String> {
        let mut toolbox = Toolbox::builtin();
        for name in &s.skills {
            match self.skills.get(name) {
                Some(SkillSource::Mcp(server)) => {
                    let tools = self
                        .mcp
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .as_ref()
                        .and_then(|hub| hub.tools_of(server))
                        .ok_or_else(|| format!("the MCP server `{server}` is not running"))?;
                    for t in tools {
                        toolbox.add(t).map_err(|e| e.to_string())?;
                    }
                }
                Some(SkillSource::Tool(t)) => toolbox.add(t.clone()).map_err(|e| e.to_string())?,
                Some(SkillSource::Program(_)) => {
                    return Err(format!("the program `{name}` is not bound to this run"))
                }
                Some(SkillSource::Dir(_)) => {}
                None => return Err(format!("the skill `{name}` was not resolved for this run")),
            }
        }
        Ok(toolbox)
    }

    /// Equips a session of `s`: its system prompt, its tools, and a sandbox with its agent's
    /// permissions (a `permissions:` block that cannot be understood is the session's
    /// failure), its skills' directories readable, and `prompter` to ask a person.
    pub fn equip(&self, s: &SessionAsk, prompter: Arc<dyn Prompter>) -> Result<Kit, String> {
        let policy = policy(s)?;
        let (toolbox, withheld) =
            offered(self.toolbox(s)?, &policy, self.user, self.has_skill_dirs(s));
        let toolbox = self.only_wanted(s, toolbox);
        let mut builder = Sandbox::builder(self.workdir.clone())
            .policy(policy)
            .user(self.user)
            .protect(self.protected.clone())
            .prompter(prompter);
        if let Some(agent) = &s.agent {
            builder = builder.agent(agent.clone());
        }
        for name in &s.skills {
            if let Some(SkillSource::Dir(skill)) = self.skills.get(name) {
                builder = builder.skill(skill);
            }
        }
        let sandbox = builder
            .build()
            .map_err(|e| format!("the working directory {}: {e}", self.workdir.display()))?;
        Ok(Kit {
            system: self.system_prompt(s),
            toolbox,
            withheld,
            sandbox,
            sandbox_told: self.sandbox_told.clone(),
        })
    }
}

/// The policy of `s`'s `permissions:` (one that cannot be understood is the session's
/// failure).
fn policy(s: &SessionAsk) -> Result<Policy, String> {
    let rules: Vec<(String, Vec<String>)> = s
        .permissions
        .iter()
        .map(|p| (p.kind.clone(), p.values.clone()))
        .collect();
    Policy::from_rules(&rules).map_err(|e| format!("permissions: {e}"))
}

/// The tools of `all` worth offering under `policy`, and those left out with why: a built-in
/// tool whose capability can never be granted, or that reads (writes) where the permissions
/// let it read (write) nothing, is not offered (a small model would only waste turns on
/// refusals, and every tool offered costs input tokens); the sandbox still checks every call
/// of the others. `skill_dirs`: the session has skill directories, which it may read.
fn offered(
    all: Toolbox,
    policy: &Policy,
    user: UserAllow,
    skill_dirs: bool,
) -> (Toolbox, BTreeMap<String, String>) {
    let nothing =
        |set: Option<&crate::permissions::PatternSet>| set.is_some_and(|s| s.patterns().is_empty());
    let mut toolbox = Toolbox::new();
    let mut withheld = BTreeMap::new();
    for spec in all.specs() {
        let why = match spec.name.as_str() {
            "bash" | "web_fetch" => {
                let cap = if spec.name == "bash" {
                    Capability::Bash
                } else {
                    Capability::Network
                };
                match policy.access(cap) {
                    _ if policy.could_use(cap, user) => None,
                    Some(_) => Some(format!("its permissions say `{cap}: deny`")),
                    None => Some(format!(
                        "nothing allows {cap} (its permissions do not mention it and the user did not allow it)"
                    )),
                }
            }
            "read_file" | "list_files" | "grep" if nothing(policy.read()) && !skill_dirs => {
                Some("its permissions let it read nothing (`read: []`)".to_string())
            }
            "write_file" | "edit_file" if nothing(policy.write()) => {
                Some("its permissions let it write nothing (`write: []`)".to_string())
            }
            _ => None,
        };
        let Some(tool) = all.get(&spec.name) else {
            continue;
        };
        match why {
            Some(why) => {
                withheld.insert(
                    spec.name.clone(),
                    format!(
                        "the tool `{}` is not available to this agent: {why}",
                        spec.name
                    ),
                );
            }
            // Names are unique in `all`, so adding cannot clash.
            None => drop(toolbox.add(tool.clone())),
        }
    }
    (toolbox, withheld)
}

/// The tools' names.
fn names(toolbox: &Toolbox) -> Arc<[String]> {
    toolbox.specs().into_iter().map(|s| s.name).collect()
}
