//! Request identities. A request is named by the fiber that asks (its [`Lineage`]), that
//! fiber's request count, and, for the steps of a session's agent loop, the turn and tool
//! call it belongs to. Ids are deterministic, so a replayed run asks the same questions
//! under the same ids; their text form (`0/1.2:3`, `0:3#t2`, `0:3#t2c0`) exists only at the
//! edges: the journal, the host protocol, traces.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Where a fiber comes from: `0` for the program's fiber, `{parent}/{fork}.{branch}` for a
/// branch (the parent's `fork`-th fork, branch `branch`). Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lineage(Arc<str>);

impl Lineage {
    /// The program's own fiber.
    pub fn root() -> Lineage {
        Lineage(Arc::from("0"))
    }

    /// Branch `branch` of this fiber's `fork`-th fork.
    pub fn child(&self, fork: u32, branch: usize) -> Lineage {
        Lineage(Arc::from(format!("{}/{fork}.{branch}", self.0)))
    }

    /// The text form.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn parse(s: &str) -> Option<Lineage> {
        let mut parts = s.split('/');
        (parts.next()? == "0").then_some(())?;
        for p in parts {
            let (fork, branch) = p.split_once('.')?;
            fork.parse::<u32>().ok()?;
            branch.parse::<u32>().ok()?;
        }
        Some(Lineage(Arc::from(s)))
    }
}

impl fmt::Display for Lineage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Lineage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// Which part of a request an id names: the request itself, or a step of a session's agent
/// loop (a model turn, a tool call of a turn, the permission asked for a tool call, the
/// approval given from outside for a call the run stopped to wait for).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub enum Step {
    /// The request itself.
    Whole,
    /// Model turn `n` (0-based) of a session.
    Turn(u32),
    /// Tool call `call` of turn `turn`.
    Call {
        /// The turn.
        turn: u32,
        /// The call's position in the turn.
        call: u32,
    },
    /// The permission asked before tool call `call` of turn `turn` ran.
    Grant {
        /// The turn.
        turn: u32,
        /// The call's position in the turn.
        call: u32,
    },
    /// A person's answer to tool call `call` of turn `turn`, given from outside while the
    /// run waited for it (`prosevm answer --approve`, the server's API), or its lapse.
    Approval {
        /// The turn.
        turn: u32,
        /// The call's position in the turn.
        call: u32,
    },
}

/// A request's stable id.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId {
    /// The asking fiber.
    pub lineage: Lineage,
    /// The fiber's request count when it asked (0-based).
    pub seq: u32,
    /// The part of the request.
    pub step: Step,
}

impl RequestId {
    /// Request `seq` of the fiber `lineage`.
    pub fn new(lineage: Lineage, seq: u32) -> RequestId {
        RequestId {
            lineage,
            seq,
            step: Step::Whole,
        }
    }

    /// The id of `step` of this request.
    pub fn step(&self, step: Step) -> RequestId {
        RequestId {
            lineage: self.lineage.clone(),
            seq: self.seq,
            step,
        }
    }

    /// The request this id is a step of (itself when it names the whole request).
    pub fn whole(&self) -> RequestId {
        self.step(Step::Whole)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.lineage, self.seq)?;
        match self.step {
            Step::Whole => Ok(()),
            Step::Turn(t) => write!(f, "#t{t}"),
            Step::Call { turn, call } => write!(f, "#t{turn}c{call}"),
            Step::Grant { turn, call } => write!(f, "#t{turn}p{call}"),
            Step::Approval { turn, call } => write!(f, "#t{turn}a{call}"),
        }
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// A text that is not a request id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadId(pub String);

impl fmt::Display for BadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a request id (want LINEAGE:N, e.g. 0:3 or 0/1.2:0)",
            self.0
        )
    }
}

impl std::error::Error for BadId {}

impl FromStr for RequestId {
    type Err = BadId;

    fn from_str(s: &str) -> Result<RequestId, BadId> {
        let bad = || BadId(s.to_string());
        let (head, step) = match s.split_once('#') {
            Some((h, st)) => (h, Some(st)),
            None => (s, None),
        };
        let (lineage, seq) = head.rsplit_once(':').ok_or_else(bad)?;
        let lineage = Lineage::parse(lineage).ok_or_else(bad)?;
        let seq = seq.parse().map_err(|_| bad())?;
        let step = match step {
            None => Step::Whole,
            Some(st) => {
                let st = st.strip_prefix('t').ok_or_else(bad)?;
                let split = st.find(['c', 'p', 'a']);
                match split {
                    None => Step::Turn(st.parse().map_err(|_| bad())?),
                    Some(i) => {
                        let turn = st[..i].parse().map_err(|_| bad())?;
                        let call = st[i + 1..].parse().map_err(|_| bad())?;
                        match st.as_bytes()[i] {
                            b'c' => Step::Call { turn, call },
                            b'p' => Step::Grant { turn, call },
                            _ => Step::Approval { turn, call },
                        }
                    }
                }
            }
        };
        Ok(RequestId { lineage, seq, step })
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RequestId, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_text() {
        let root = Lineage::root();
        let branch = root.child(1, 2).child(0, 7);
        for id in [
            RequestId::new(root.clone(), 0),
            RequestId::new(branch.clone(), 12),
            RequestId::new(root.clone(), 3).step(Step::Turn(2)),
            RequestId::new(branch.clone(), 3).step(Step::Call { turn: 2, call: 0 }),
            RequestId::new(root.clone(), 3).step(Step::Grant { turn: 4, call: 11 }),
            RequestId::new(root, 3).step(Step::Approval { turn: 4, call: 2 }),
        ] {
            let text = id.to_string();
            assert_eq!(text.parse::<RequestId>(), Ok(id.clone()), "{text}");
            let json = serde_json::to_string(&id).expect("serialize");
            assert_eq!(serde_json::from_str::<RequestId>(&json).expect("parse"), id);
        }
        assert_eq!(branch.as_str(), "0/1.2/0.7");
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in [
            "", "0", "1:0", "0:x", "0/1:0", "0/a.b:1", "0:1#", "0:1#t", "0:1#x2", "0:1#t2q1",
            "0:1#t2c", "0:1#t2a", "0:1#ta1",
        ] {
            assert!(bad.parse::<RequestId>().is_err(), "{bad:?} accepted");
        }
    }
}
