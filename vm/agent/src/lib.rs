//! Sessions that act: the tools a session's model may call, the permissions that bound them,
//! the skills that extend an agent, and the MCP servers whose tools join the built-in ones.
//!
//! This crate is a library the agent loop calls; it knows nothing of drivers, requests or the
//! journal. The pieces, in the order a run uses them:
//!
//! 1. **Before the run**, resolve every agent's `skills:` with [`skills::SkillSearch`] (an
//!    unresolvable name is an error listing every place looked), and start the servers of
//!    `[mcp.servers.*]` with [`mcp::McpHub::start`] (a server that fails to start is an error
//!    naming it).
//! 2. **Per session**, build a [`permissions::Sandbox`]: the working directory, the agent's
//!    [`permissions::Policy`] (from its `permissions:` rules, [`permissions::Policy::from_rules`]),
//!    the user's [`permissions::UserAllow`] (`--allow bash`, `--allow network`), a
//!    [`crate::people::Prompter`] (a [`crate::people::TtyPrompter`] on a terminal, the host
//!    protocol under the stdio driver, [`crate::people::NoPrompter`] otherwise), and the
//!    directories of the agent's skills as extra read-only roots
//!    ([`permissions::SandboxBuilder::skill`]). Add the skills' instructions to the system
//!    prompt with [`skills::system_prompt`].
//! 3. **Offer** the [`tools::Toolbox`]'s specs ([`tools::Toolbox::specs`]: `name`,
//!    `description`, and a JSON schema usable as OpenAI's `function.parameters` and Anthropic's
//!    `input_schema`). [`tools::Toolbox::builtin`] has the seven built-in tools;
//!    [`mcp::McpHub::add_tools`] adds the servers' tools.
//! 4. **Run** each [`prose_machine::protocol::ToolCall`] the model makes with [`tools::Toolbox::call`], the only
//!    way to run a tool. It never fails: a refused or failing call comes back as a
//!    [`prose_machine::protocol::ToolOutput`] with `is_error: true` for the model to read, together with the
//!    permission [`permissions::Decision`]s taken (tool, action, target, allowed or refused, and
//!    why) for the trace. [`tools::Toolbox::read_only`] says whether a call may simply be run
//!    again after a crash.
//! 5. **After the run**, [`mcp::McpHub::stop`] stops the servers.
//!
//! Every path a tool touches is obtained from the sandbox, which checks it before anything is
//! read or written ([`permissions`], against the run's [`protected`] places), and is opened
//! only through the checked path, beneath the working directory and following no link
//! ([`beneath`]); `bash` and `web_fetch` ask the sandbox before running or connecting, and
//! commands run inside an OS sandbox ([`confine`]). The permission model, the tools'
//! arguments and caps, skills lookup and MCP configuration are described for users in
//! `docs/tools.md`, the threat model in `SECURITY.md`.

pub mod beneath;
mod checked;
pub mod confine;
pub mod group;
pub mod mcp;
pub mod people;
pub mod permissions;
pub mod protected;
pub mod secrets;
pub mod skills;
pub mod terminal;
pub mod tls;
pub mod tools;
pub mod workshop;
