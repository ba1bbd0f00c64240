//! Approvals that wait: a tool call its agent's `permissions:` say `prompt` for, made when
//! no one is at hand to ask (no terminal, `--no-input`, a server, a worker), does not run and
//! is not refused. The session stops at it, the run goes on with what does not need it and
//! then stops `waiting`, its record listing the call ([`WaitingApproval`]). A person answers
//! from outside (`prosevm answer RUN --approve ID`, the server's API and page): the answer is
//! journaled under the call's [`Step::Approval`], and the resumed session goes on from that
//! call without asking the model again. A run may give its approvals a time limit, after
//! which the call is refused as a person's "no" would be, and the run goes on.
//!
//! The journal tells a call that waited from one that was running at a crash: the answer
//! from outside is journaled under `#tNaM`, and the resumed session journals the grant
//! (`#tNpM`) before the call runs, so a call with a grant and no output may have run (and is
//! reported as interrupted), while one with only an approval never did.

use prose_machine::protocol::{Capability, RequestId, Step};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How a waiting approval is named when it is answered: twelve hex digits of the SHA-256 of
/// its tool call's id, the same every time the run waits for that call (an id such as
/// `0/1.2:3#t2c0` would need escaping in a URL path).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApprovalId(String);

impl ApprovalId {
    /// Hex digits in an id.
    const DIGITS: usize = 12;

    /// The id of the approval of tool call `call`.
    pub fn of(call: &RequestId) -> ApprovalId {
        let digest = Sha256::digest(call.to_string().as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        ApprovalId(hex[..Self::DIGITS].to_string())
    }

    /// An id as given on a command line or in a URL: twelve lowercase hex digits.
    pub fn parse(text: &str) -> Result<ApprovalId, String> {
        let ok = text.len() == Self::DIGITS
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if ok {
            Ok(ApprovalId(text.to_string()))
        } else {
            Err(format!(
                "{text:?} is not an approval id (twelve hex digits, as `prosevm runs` and `prosevm inspect` show them)"
            ))
        }
    }

    /// The text form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id an answer to tool call `call` (a [`Step::Call`]) is journaled under: the call's
/// [`Step::Approval`]; `None` when `call` is not a tool call.
pub fn approval_step(call: &RequestId) -> Option<RequestId> {
    match call.step {
        Step::Call { turn, call: n } => Some(call.step(Step::Approval { turn, call: n })),
        _ => None,
    }
}

/// A tool call a run waits for a person's approval of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingApproval {
    /// How it is answered.
    pub id: ApprovalId,
    /// The tool call: its session, turn and place in the turn (`0:3#t2c0`).
    pub call: RequestId,
    /// The agent, when the session runs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The tool.
    pub tool: String,
    /// The capability it needs.
    pub capability: Capability,
    /// The command or URL asked about.
    pub detail: String,
    /// The call's arguments, as the model gave them.
    pub arguments: serde_json::Value,
    /// The session's prompt.
    pub prompt: String,
    /// When the run first waited for it (UTC, ISO 8601).
    pub asked: String,
    /// When it is refused if no one answers (UTC, ISO 8601); none: it waits as long as it
    /// takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
}

/// What a call waiting for approval is: who asks, for which tool and capability, with what.
#[derive(Clone, Debug)]
pub struct Asking {
    /// The agent, when the session runs one.
    pub agent: Option<String>,
    /// The tool.
    pub tool: String,
    /// The capability it needs.
    pub capability: Capability,
    /// The command or URL.
    pub detail: String,
    /// The call's arguments.
    pub arguments: serde_json::Value,
    /// The session's prompt.
    pub prompt: String,
}

impl WaitingApproval {
    /// Tool call `call`, as `asking` describes it, waiting from `now` for at most `limit`
    /// (its deadline rounded up to the second: never before the limit).
    pub fn new(call: RequestId, asking: Asking, now: SystemTime, limit: Option<Duration>) -> Self {
        let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let expires = limit.map(|l| {
            let end = since.saturating_add(l);
            let secs = end.as_secs() + u64::from(end.subsec_nanos() > 0);
            crate::clock::timestamp(secs).2
        });
        WaitingApproval {
            id: ApprovalId::of(&call),
            call,
            agent: asking.agent,
            tool: asking.tool,
            capability: asking.capability,
            detail: asking.detail,
            arguments: asking.arguments,
            prompt: asking.prompt,
            asked: crate::clock::timestamp(since.as_secs()).2,
            expires,
        }
    }

    /// Whether its time ran out by `now` (seconds since the epoch).
    pub fn lapsed(&self, now: u64) -> bool {
        self.expires
            .as_deref()
            .and_then(crate::clock::parse_timestamp)
            .is_some_and(|at| at <= now)
    }

    /// One line for people: who wants what, and how to answer.
    pub fn describe(&self) -> String {
        let who = match &self.agent {
            Some(a) => format!("agent `{a}`"),
            None => "a session".to_string(),
        };
        let until = match &self.expires {
            Some(t) => format!(", refused at {t} if no one answers"),
            None => String::new(),
        };
        format!(
            "approval {}: {who} wants {} `{}`{until}",
            self.id,
            match self.capability {
                Capability::Bash => "to run",
                Capability::Network => "to reach",
            },
            self.detail
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prose_machine::protocol::Lineage;

    fn call() -> RequestId {
        RequestId::new(Lineage::root(), 3).step(Step::Call { turn: 2, call: 0 })
    }

    fn asking() -> Asking {
        Asking {
            agent: Some("builder".into()),
            tool: "bash".into(),
            capability: Capability::Bash,
            detail: "make test".into(),
            arguments: serde_json::json!({"command": "make test"}),
            prompt: "Run the tests".into(),
        }
    }

    fn waiting(limit: Option<Duration>) -> WaitingApproval {
        WaitingApproval::new(
            call(),
            asking(),
            UNIX_EPOCH + Duration::from_secs(1_763_799_296),
            limit,
        )
    }

    #[test]
    fn ids_are_stable_short_hex_and_differ_between_calls() {
        let a = ApprovalId::of(&call());
        assert_eq!(a, ApprovalId::of(&call()));
        assert_eq!(ApprovalId::parse(a.as_str()), Ok(a.clone()));
        let other = ApprovalId::of(&call().step(Step::Call { turn: 2, call: 1 }));
        assert_ne!(a, other);
        for bad in [
            "",
            "0:3#t2c0",
            "ABCDEF012345",
            "abcdef01234",
            "abcdef0123456",
            "abcdefg12345",
        ] {
            assert!(ApprovalId::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_approval_step_is_the_calls() {
        assert_eq!(
            approval_step(&call()).map(|id| id.to_string()),
            Some("0:3#t2a0".to_string())
        );
        assert_eq!(approval_step(&call().whole()), None);
    }

    #[test]
    fn an_approval_lapses_at_its_limit_never_before() {
        let w = waiting(Some(Duration::from_secs(90)));
        assert_eq!(w.asked, "2025-11-22T08:14:56Z");
        assert_eq!(w.expires.as_deref(), Some("2025-11-22T08:16:26Z"));
        assert!(!w.lapsed(1_763_799_296 + 89));
        assert!(w.lapsed(1_763_799_296 + 90));
        let forever = waiting(None);
        assert!(!forever.lapsed(u64::MAX));
        assert!(forever
            .describe()
            .contains("agent `builder` wants to run `make test`"));
        // A deadline falling within a second is the end of that second: never early.
        let short = waiting(Some(Duration::from_millis(1500)));
        assert_eq!(short.expires.as_deref(), Some("2025-11-22T08:14:58Z"));
        let late = WaitingApproval::new(
            call(),
            asking(),
            UNIX_EPOCH + Duration::from_millis(1_763_799_296_900),
            Some(Duration::from_secs(1)),
        );
        assert_eq!(late.asked, "2025-11-22T08:14:56Z");
        assert_eq!(late.expires.as_deref(), Some("2025-11-22T08:14:58Z"));
    }
}
