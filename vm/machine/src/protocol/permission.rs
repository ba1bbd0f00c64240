//! Permission questions for a person: an agent wants a capability its `permissions:` say
//! `prompt` for, and a person answers yes, no or always.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A yes/no capability of the permission model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    /// Running shell commands.
    Bash,
    /// Reaching the network.
    Network,
}

impl Capability {
    /// The permission kind's name, as written in `permissions:`.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Bash => "bash",
            Capability::Network => "network",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A person's answer to a permission question.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptAnswer {
    /// Allow this once.
    Yes,
    /// Refuse this once.
    No,
    /// Allow this and every later request of the same capability in this session.
    Always,
}

/// A permission question for a person: an agent wants to use a capability its permissions say
/// `prompt` for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionQuestion {
    /// The agent asking, when known.
    pub agent: Option<String>,
    /// What it wants.
    pub capability: Capability,
    /// The command or URL.
    pub detail: String,
}

impl PermissionQuestion {
    /// The question as a person reads it, ending with the answers expected.
    pub fn text(&self) -> String {
        let who = match &self.agent {
            Some(a) => format!("Agent `{a}`"),
            None => "A session".to_string(),
        };
        let what = match self.capability {
            Capability::Bash => "run a shell command",
            Capability::Network => "use the network",
        };
        format!(
            "{who} wants to {what}:\n    {}\nAllow? [y]es / [n]o / [a]lways for this session: ",
            self.detail
        )
    }
}
