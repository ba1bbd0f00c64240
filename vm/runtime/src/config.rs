//! What the runtime makes of `prose.toml`'s settings ([`prose_settings::Settings`], read and
//! layered there): the capabilities allowed to every agent, and the tools sessions are
//! offered. Flags win over the environment, which wins over the files.

use prose_agent::workshop::ToolDefault;
use prose_settings::ToolsSettings;

/// The tools sessions are offered when their agent says nothing, as `[tools] default`
/// chooses (all, when it says nothing).
pub fn tools_choice(tools: &ToolsSettings) -> Result<ToolDefault, String> {
    match &tools.default {
        None => Ok(ToolDefault::All),
        Some(d) => d
            .parse()
            .map_err(|e| format!("prose.toml: [tools] default: {e}")),
    }
}

/// Capabilities a user allows every agent: those `prose.toml`'s `allow` names (`bash`,
/// `network`), then those given with `--allow` (also `unsandboxed-bash`, which only the
/// command line can allow: settings a project ships must not turn the sandbox off). A bad
/// `PROSE_SANDBOX` (which confines the commands allowed) is an error here too, before any
/// run starts.
pub fn allowances<'a>(
    file: impl IntoIterator<Item = &'a str>,
    command_line: impl IntoIterator<Item = &'a str>,
) -> Result<prose_agent::permissions::UserAllow, String> {
    prose_agent::confine::Choice::from_env()?;
    let mut allow = prose_agent::permissions::UserAllow::default();
    let names = file
        .into_iter()
        .map(|n| (n, false))
        .chain(command_line.into_iter().map(|n| (n, true)));
    for (name, flag) in names {
        match name {
            "bash" => allow.bash = true,
            "network" => allow.network = true,
            "unsandboxed-bash" if flag => allow.unsandboxed_bash = true,
            "unsandboxed-bash" => {
                return Err(
                    "prose.toml cannot allow \"unsandboxed-bash\": only the command line can \
                     (--allow unsandboxed-bash)"
                        .into(),
                )
            }
            other => {
                return Err(format!(
                    "cannot allow {other:?}: the capabilities a user allows are bash and \
                     network (and, on the command line, unsandboxed-bash)"
                ))
            }
        }
    }
    Ok(allow)
}
