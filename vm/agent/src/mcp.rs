//! MCP servers: started once per run from `prose.toml`'s `[mcp.servers.NAME]` tables, their
//! tools offered to sessions as [`Tool`]s named `mcp__<server>__<tool>`.
//!
//! A server is either a program speaking MCP on stdin/stdout (`command`, `args`, `env`; run in
//! the working directory, in its own process group) or a streamable-HTTP endpoint (`url`).
//! `network = true` says the server reaches out to the network: calling its tools then needs
//! the agent's `network` permission, like `web_fetch`. It defaults to true for `url` servers
//! and false for `command` ones.
//!
//! ```toml
//! [mcp.servers.files]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
//!
//! [mcp.servers.search]
//! url = "https://mcp.example.com/mcp"
//! ```
//!
//! MCP tools are never taken as read-only (a server's annotations are hints from a program the
//! VM does not control), so a call cut short by a crash is reported, not repeated.

use std::fmt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ContentBlock, Implementation,
    ResourceContents,
};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::tools::{DuplicateTool, Tool, ToolContext, Toolbox};
use futures_util::future::BoxFuture;
use prose_machine::protocol::{ToolOutput, ToolSpec};
use prose_settings::{McpConfig, McpServerConfig};

/// How long a server has to start and list its tools.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one tool call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a server has to stop before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes of a tool's output returned at most.
pub const MAX_OUTPUT_BYTES: usize = 100 * 1024;

/// Bytes of a stdio server's stderr kept for error messages.
const STDERR_KEPT: usize = 4096;

/// Why MCP servers could not be started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McpError {
    /// A server's configuration is unusable.
    Config {
        /// The server.
        server: String,
        /// What is wrong.
        reason: String,
    },
    /// A server did not start, or did not list its tools.
    Start {
        /// The server.
        server: String,
        /// What happened (with the end of its stderr, for a program).
        reason: String,
    },
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpError::Config { server, reason } => {
                write!(f, "MCP server `{server}` in the configuration: {reason}")
            }
            McpError::Start { server, reason } => {
                write!(f, "MCP server `{server}` failed to start: {reason}")
            }
        }
    }
}

impl std::error::Error for McpError {}

/// A running server.
struct Server {
    name: String,
    client: RunningService<RoleClient, ClientConfig>,
    tools: Vec<Arc<dyn Tool>>,
}

/// The run's MCP servers, started once and stopped with [`McpHub::stop`].
pub struct McpHub {
    servers: Vec<Server>,
}

impl fmt::Debug for McpHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.servers.iter().map(|s| {
                (
                    &s.name,
                    s.tools.iter().map(|t| t.name()).collect::<Vec<_>>(),
                )
            }))
            .finish()
    }
}

impl McpHub {
    /// Starts every configured server (stdio programs in `workdir`) and lists its tools. If one
    /// fails, those already started are stopped and the error names it.
    pub async fn start(config: &McpConfig, workdir: &Path) -> Result<McpHub, McpError> {
        let mut hub = McpHub {
            servers: Vec::new(),
        };
        for (name, server) in &config.servers {
            match start_server(name, server, workdir).await {
                Ok(s) => hub.servers.push(s),
                Err(e) => {
                    hub.stop().await;
                    return Err(e);
                }
            }
        }
        Ok(hub)
    }

    /// The servers' names.
    pub fn servers(&self) -> Vec<&str> {
        self.servers.iter().map(|s| s.name.as_str()).collect()
    }

    /// The tools of server `name`, if it runs.
    pub fn tools_of(&self, name: &str) -> Option<Vec<Arc<dyn Tool>>> {
        self.servers
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.tools.clone())
    }

    /// Adds every server's tools to `toolbox`.
    pub fn add_tools(&self, toolbox: &mut Toolbox) -> Result<(), DuplicateTool> {
        for server in &self.servers {
            for tool in &server.tools {
                toolbox.add(tool.clone())?;
            }
        }
        Ok(())
    }

    /// Stops every server (a program gets its stdin closed, then SIGTERM, then SIGKILL).
    /// Their tools answer with an error afterwards.
    pub async fn stop(self) {
        for server in self.servers {
            let _ = tokio::time::timeout(STOP_TIMEOUT, server.client.cancel()).await;
        }
    }
}

/// A name fit for a tool name: letters, digits, `_` and `-`.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The name a server's tool is offered under: `mcp__<server>__<tool>`, other characters than
/// letters, digits, `_` and `-` replaced by `_`, cut to 64 characters.
pub fn tool_name(server: &str, tool: &str) -> String {
    let mut name = format!("mcp__{}__{}", sanitize(server), sanitize(tool));
    name.truncate(64);
    name
}

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("prosevm", env!("CARGO_PKG_VERSION")),
    )
}

async fn start_server(
    name: &str,
    config: &McpServerConfig,
    workdir: &Path,
) -> Result<Server, McpError> {
    let config_error = |reason: String| McpError::Config {
        server: name.to_string(),
        reason,
    };
    let start_error = |reason: String| McpError::Start {
        server: name.to_string(),
        reason,
    };
    if name.is_empty() || sanitize(name) != name {
        return Err(config_error(
            "a server's name may only have letters, digits, `_` and `-`".into(),
        ));
    }
    let (client, stderr) = match (&config.command, &config.url) {
        (Some(command), None) => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(&config.args).current_dir(workdir);
            for var in crate::secrets::SECRET_VARS {
                cmd.env_remove(var);
            }
            cmd.envs(&config.env);
            let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
            wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
            let (transport, stderr) = TokioChildProcess::builder(wrapped)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| start_error(format!("could not run `{command}`: {e}")))?;
            let kept = Arc::new(Mutex::new(String::new()));
            let reader = stderr.map(|s| tokio::spawn(keep_stderr(s, kept.clone())));
            match tokio::time::timeout(START_TIMEOUT, client_config().serve(transport)).await {
                Ok(Ok(client)) => (client, Some(kept)),
                failed => {
                    let reason = match failed {
                        Ok(Err(e)) => e.to_string(),
                        _ => format!("no answer within {} s", START_TIMEOUT.as_secs()),
                    };
                    if let Some(reader) = reader {
                        let _ = tokio::time::timeout(Duration::from_millis(500), reader).await;
                    }
                    return Err(start_error(with_stderr(reason, &kept)));
                }
            }
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(config_error(format!(
                    "`url` must be an http:// or https:// URL, not `{url}`"
                )));
            }
            crate::tls::install_crypto_provider();
            let transport = StreamableHttpClientTransport::from_uri(url.as_str());
            match tokio::time::timeout(START_TIMEOUT, client_config().serve(transport)).await {
                Ok(Ok(client)) => (client, None),
                Ok(Err(e)) => return Err(start_error(format!("{url}: {e}"))),
                Err(_) => {
                    return Err(start_error(format!(
                        "{url}: no answer within {} s",
                        START_TIMEOUT.as_secs()
                    )))
                }
            }
        }
        (Some(_), Some(_)) => {
            return Err(config_error(
                "give either `command` or `url`, not both".into(),
            ))
        }
        (None, None) => {
            return Err(config_error(
                "give `command` (a program speaking MCP on stdio) or `url` (a streamable-HTTP \
                 endpoint)"
                    .into(),
            ))
        }
    };
    let listed = match tokio::time::timeout(START_TIMEOUT, client.list_all_tools()).await {
        Ok(Ok(tools)) => tools,
        failed => {
            let reason = match failed {
                Ok(Err(e)) => format!("listing its tools failed: {e}"),
                _ => format!(
                    "it did not list its tools within {} s",
                    START_TIMEOUT.as_secs()
                ),
            };
            let reason = match &stderr {
                Some(kept) => with_stderr(reason, kept),
                None => reason,
            };
            let _ = tokio::time::timeout(STOP_TIMEOUT, client.cancel()).await;
            return Err(start_error(reason));
        }
    };
    let network = config
        .reaches_network()
        .then(|| match (&config.url, &config.command) {
            (Some(url), _) => format!("MCP server `{name}` ({url})"),
            (None, Some(command)) => format!("MCP server `{name}` ({command})"),
            (None, None) => format!("MCP server `{name}`"),
        });
    // In a fixed order, whatever order the server lists them in: the tools are the first
    // part of every request, which a provider caches only when its bytes repeat.
    let mut listed = listed;
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut names = std::collections::HashSet::new();
    for tool in listed {
        let offered = tool_name(name, &tool.name);
        if !names.insert(offered.clone()) {
            let _ = tokio::time::timeout(STOP_TIMEOUT, client.cancel()).await;
            return Err(start_error(format!(
                "two of its tools would both be offered as `{offered}`"
            )));
        }
        let mut schema = Value::Object((*tool.input_schema).clone());
        if schema.get("type").is_none() {
            schema["type"] = Value::from("object");
        }
        let description = match tool.description.as_deref().or(tool.title.as_deref()) {
            Some(d) => format!("{d} (tool `{}` of MCP server `{name}`)", tool.name),
            None => format!("Tool `{}` of MCP server `{name}`.", tool.name),
        };
        tools.push(Arc::new(McpTool {
            spec: ToolSpec {
                name: offered,
                description,
                input_schema: schema,
            },
            server: name.to_string(),
            remote: tool.name.to_string(),
            peer: client.peer().clone(),
            network: network.clone(),
        }));
    }
    Ok(Server {
        name: name.to_string(),
        client,
        tools,
    })
}

/// Keeps the last [`STDERR_KEPT`] bytes a server writes to stderr, until it closes it.
async fn keep_stderr(mut stderr: tokio::process::ChildStderr, kept: Arc<Mutex<String>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.push_str(&String::from_utf8_lossy(&buf[..n]));
        if kept.len() > STDERR_KEPT {
            let mut cut = kept.len() - STDERR_KEPT;
            while !kept.is_char_boundary(cut) {
                cut += 1;
            }
            kept.drain(..cut);
        }
    }
}

fn with_stderr(reason: String, kept: &Mutex<String>) -> String {
    let kept = kept.lock().unwrap_or_else(|e| e.into_inner());
    let tail = kept.trim();
    if tail.is_empty() {
        reason
    } else {
        format!("{reason}; its stderr ends with:\n{tail}")
    }
}

/// A tool of an MCP server.
struct McpTool {
    spec: ToolSpec,
    server: String,
    remote: String,
    peer: Peer<RoleClient>,
    /// What to check the `network` permission for, when the server reaches out.
    network: Option<String>,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call<'a>(&'a self, args: &'a Value, cx: &'a ToolContext<'a>) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if let Some(target) = &self.network {
                if let Err(refusal) = cx.network(target).await {
                    return ToolOutput::error(refusal);
                }
            }
            let arguments = match args {
                Value::Object(map) => map.clone(),
                Value::Null => Default::default(),
                _ => {
                    return ToolOutput::error(format!(
                        "the arguments of `{}` must be a JSON object",
                        self.spec.name
                    ))
                }
            };
            let params = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
            let result = match tokio::time::timeout(CALL_TIMEOUT, self.peer.call_tool(params)).await
            {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => {
                    return ToolOutput::error(format!(
                        "MCP server `{}` failed to run `{}`: {e}",
                        self.server, self.remote
                    ))
                }
                Err(_) => {
                    return ToolOutput::error(format!(
                        "MCP server `{}` did not answer `{}` within {} s",
                        self.server,
                        self.remote,
                        CALL_TIMEOUT.as_secs()
                    ))
                }
            };
            let mut parts: Vec<String> = result.content.iter().map(content_text).collect();
            if parts.is_empty() {
                if let Some(structured) = &result.structured_content {
                    parts.push(serde_json::to_string_pretty(structured).unwrap_or_default());
                }
            }
            let mut text = parts.join("\n");
            if text.len() > MAX_OUTPUT_BYTES {
                text = format!(
                    "{}\n[cut at {MAX_OUTPUT_BYTES} bytes]",
                    super::tools::truncate_at(&text, MAX_OUTPUT_BYTES)
                );
            }
            ToolOutput {
                content: text,
                is_error: result.is_error.unwrap_or(false),
            }
        })
    }
}

/// A content block as text (media are described, not inlined).
fn content_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => {
            format!("[image: {}, {} bytes of base64]", i.mime_type, i.data.len())
        }
        ContentBlock::Audio(a) => {
            format!("[audio: {}, {} bytes of base64]", a.mime_type, a.data.len())
        }
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents { uri, mime_type, .. } => format!(
                "[resource {uri}: binary{}]",
                mime_type
                    .as_deref()
                    .map(|m| format!(", {m}"))
                    .unwrap_or_default()
            ),
            _ => "[resource of an unknown kind]".to_string(),
        },
        ContentBlock::ResourceLink(link) => {
            format!("[resource link: {} ({})]", link.uri, link.name)
        }
        _ => "[content of an unknown kind]".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_prefixed_sanitized_and_bounded() {
        assert_eq!(tool_name("files", "read_file"), "mcp__files__read_file");
        assert_eq!(tool_name("fs", "dir.list/all"), "mcp__fs__dir_list_all");
        assert_eq!(tool_name("s", &"x".repeat(100)).len(), 64);
    }

    #[test]
    fn config_reads_from_toml_and_refuses_unknown_keys() {
        let config: McpConfig = toml::from_str(
            r#"
            [servers.files]
            command = "npx"
            args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
            env = { DEBUG = "1" }

            [servers.remote]
            url = "https://example.com/mcp"
            network = false
            "#,
        )
        .unwrap();
        let files = &config.servers["files"];
        assert_eq!(files.command.as_deref(), Some("npx"));
        assert_eq!(files.args.len(), 3);
        assert_eq!(files.env["DEBUG"], "1");
        assert!(!files.reaches_network());
        assert!(!config.servers["remote"].reaches_network());
        let url_only: McpServerConfig = toml::from_str("url = \"http://x/mcp\"").unwrap();
        assert!(url_only.reaches_network());
        assert!(toml::from_str::<McpServerConfig>("comand = \"x\"").is_err());
    }
}
