//! A run's workshop: everything its sessions' agent loops share (the working directory, what
//! the user allowed, who answers permission questions, the turn limit, the built-in tools,
//! the skills every agent names resolved before the run starts, the MCP servers), and how a
//! session is equipped from it: its system prompt, its tools and its sandbox.

use super::mcp::McpHub;
use super::permissions::{Capability, Policy, Prompter, Sandbox, UserAllow};
use super::protected::Protected;
use super::skills::{self, Skill, SkillSearch};
use super::tools::{Tool, Toolbox};
use crate::people::People;
use crate::protocol::SessionAsk;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Turns a session may take unless told otherwise.
pub const DEFAULT_MAX_TURNS: u32 = 40;

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

/// What a session works with.
pub struct Kit {
    /// The system prompt: the agent's prompt, then its skills' instructions.
    pub system: Option<String>,
    /// The tools offered.
    pub toolbox: Toolbox,
    /// Built-in tools not offered because the agent may never use them, with why: a model
    /// that calls one anyway is told.
    pub withheld: BTreeMap<String, String>,
    /// Where and how they may act.
    pub sandbox: Sandbox,
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
    /// The run's protected places (its state directory, its program's files).
    pub protected: Protected,
    skills: BTreeMap<String, SkillSource>,
    /// The names of the tools offered to a session naming no skill and no permissions,
    /// shared by all such sessions.
    plain: Arc<[String]>,
    /// Taken when the run ends (while sessions may still hold the workshop).
    mcp: Mutex<Option<McpHub>>,
}

impl Workshop {
    /// A workshop acting in `workdir` with the built-in tools and no skills.
    pub fn new(workdir: PathBuf, user: UserAllow, people: People) -> Workshop {
        Workshop {
            workdir,
            user,
            people,
            max_turns: DEFAULT_MAX_TURNS,
            protected: Protected::default(),
            skills: BTreeMap::new(),
            plain: names(&offered(Toolbox::builtin(), &Policy::default(), user).0),
            mcp: Mutex::new(None),
        }
    }

    /// Resolves every name in `names` (the skills the program's agents and sessions name):
    /// a configured MCP server's name (`servers`), else an imported program's alias
    /// (`programs`: alias and module), else a skill directory found by `search`. An
    /// unresolvable name is an error naming every place looked.
    pub fn resolve_skills<'a>(
        &mut self,
        names: impl IntoIterator<Item = &'a str>,
        servers: &[String],
        programs: &[(String, u32)],
        search: &SkillSearch,
    ) -> Result<(), String> {
        for name in names {
            if self.skills.contains_key(name) {
                continue;
            }
            let source = if servers.iter().any(|s| s == name) {
                SkillSource::Mcp(name.to_string())
            } else if let Some((_, module)) = programs.iter().find(|(alias, _)| alias == name) {
                SkillSource::Program(*module)
            } else {
                SkillSource::Dir(search.find(name).map_err(|e| e.to_string())?)
            };
            self.skills.insert(name.to_string(), source);
        }
        Ok(())
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
        if s.skills.is_empty() && s.permissions.is_empty() {
            s.tools = self.plain.clone();
            return;
        }
        s.tools = self
            .toolbox(s)
            .and_then(|t| Ok(offered(t, &policy(s)?, self.user).0))
            .map(|t| names(&t))
            .unwrap_or_default();
        s.system = self.system_prompt(s);
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
        let (toolbox, withheld) = offered(self.toolbox(s)?, &policy, self.user);
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
/// tool whose capability can never be granted is not offered (a small model would only waste
/// turns on refusals); the sandbox still checks every call of the others.
fn offered(all: Toolbox, policy: &Policy, user: UserAllow) -> (Toolbox, BTreeMap<String, String>) {
    let mut toolbox = Toolbox::new();
    let mut withheld = BTreeMap::new();
    for spec in all.specs() {
        let needs = match spec.name.as_str() {
            "bash" => Some(Capability::Bash),
            "web_fetch" => Some(Capability::Network),
            _ => None,
        };
        let Some(tool) = all.get(&spec.name) else {
            continue;
        };
        match needs {
            Some(cap) if !policy.could_use(cap, user) => {
                let why = match policy.access(cap) {
                    Some(_) => format!("its permissions say `{cap}: deny`"),
                    None => format!(
                        "nothing allows {cap} (its permissions do not mention it and the user did not allow it)"
                    ),
                };
                withheld.insert(
                    spec.name.clone(),
                    format!(
                        "the tool `{}` is not available to this agent: {why}",
                        spec.name
                    ),
                );
            }
            // Names are unique in `all`, so adding cannot clash.
            _ => drop(toolbox.add(tool.clone())),
        }
    }
    (toolbox, withheld)
}

/// The tools' names.
fn names(toolbox: &Toolbox) -> Arc<[String]> {
    toolbox.specs().into_iter().map(|s| s.name).collect()
}
