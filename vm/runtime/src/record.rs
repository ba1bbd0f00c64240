//! The run record (`run.json`, or a store's row): what was run, with which inputs and driver,
//! how it is going or how it ended. Typed, so the CLI, the benches and every store read and
//! write one shape, and built in one place ([`RunRecord::new`]).

use crate::approvals::{ApprovalId, WaitingApproval};
use crate::driver::settings::DriverSettings;
use crate::program::Program;
use bytecode_spec::verify::Verified;
use prose_agent::permissions::UserAllow;
use prose_agent::skills::UsedSkill;
use prose_agent::workshop::{ToolDefault, DEFAULT_MAX_TURNS};
use prose_machine::protocol::RequestId;
use prose_machine::value::Bounds;
use prose_machine::value::Value;
use prose_machine::{Limits, Machine, RuntimeError};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Started and not ended: running now, or killed (resumable).
    Running,
    /// Stopped on purpose before the end (Ctrl-C, SIGTERM): resumable.
    Interrupted,
    /// Stopped before a request that might go over the budget: resumable with a larger one.
    Paused,
    /// Stopped for mid-program inputs, or approvals of tool calls, no one could give:
    /// resumable once they are answered.
    Waiting,
    /// Ended with its outputs.
    Finished,
    /// Ended with an error; resuming asks the failed request again.
    Failed,
}

impl RunStatus {
    /// Every status, in the order a run can reach them.
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Running,
        RunStatus::Interrupted,
        RunStatus::Paused,
        RunStatus::Waiting,
        RunStatus::Finished,
        RunStatus::Failed,
    ];

    /// The status as written in `run.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Paused => "paused",
            RunStatus::Waiting => "waiting",
            RunStatus::Finished => "finished",
            RunStatus::Failed => "failed",
        }
    }

    /// Where a run stands once a drive ended with an error of this code: stopped on
    /// purpose (E216), at its budget (E217) or for a person (E220), else failed.
    pub fn ended_by(code: bytecode_spec::Code) -> RunStatus {
        use bytecode_spec::Code;
        match code {
            Code::E216 => RunStatus::Interrupted,
            Code::E217 => RunStatus::Paused,
            Code::E220 => RunStatus::Waiting,
            _ => RunStatus::Failed,
        }
    }
}

/// How a failed run failed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunFailure {
    /// The error's code.
    pub code: String,
    /// The error, as reported.
    pub message: String,
    /// The request whose failure ended the run, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestId>,
}

/// A mid-program input a waiting run needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingInput {
    /// The request that asked for it.
    pub request: RequestId,
    /// The input's name: the answer is given by it (`prosevm answer RUN NAME=VALUE`).
    pub name: String,
    /// Its question.
    pub question: String,
}

/// Options that change how a run executes, kept so a resumed run executes the same way.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExecOptions {
    /// Loop iterations allowed in the whole run.
    pub max_iterations: u64,
    /// Relaxed runtime rules are errors.
    #[serde(default)]
    pub strict: bool,
    /// Capabilities the user allowed every agent (`--allow bash`, `--allow network`).
    #[serde(default)]
    pub allow: UserAllow,
    /// Model turns a session may take.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// Seconds a session run as an agent loop may take (`--session-timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_timeout_s: Option<f64>,
    /// Seconds a tool call waits for a person's approval before it is refused
    /// (`--approval-timeout`); none: as long as it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_timeout_s: Option<f64>,
    /// The tools a session is offered when its agent says nothing (`--tools`).
    #[serde(default, skip_serializing_if = "ToolDefault::is_all")]
    pub tools: ToolDefault,
    /// Most tokens the whole run may use (`--max-tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Most the whole run may cost in US dollars (`--max-cost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// Bytes a value may take (E213 beyond).
    #[serde(default = "default_value_size")]
    pub max_value_size: u64,
    /// Bytes the registers of all live frames may take (E218 beyond).
    #[serde(default = "default_frame_memory")]
    pub max_frame_memory: u64,
    /// Parallel branches alive at once (E209 beyond).
    #[serde(default = "default_branches")]
    pub max_branches: u64,
    /// Model requests asked before are answered from the store's memo, and new answers
    /// kept there (`--memo`, `memo = true`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memo: bool,
}

fn default_max_turns() -> u32 {
    DEFAULT_MAX_TURNS
}

fn default_value_size() -> u64 {
    prose_machine::Limits::default().values.bytes as u64
}

fn default_frame_memory() -> u64 {
    prose_machine::Limits::default().frame_bytes as u64
}

fn default_branches() -> u64 {
    prose_machine::Limits::default().fibers as u64
}

impl Default for ExecOptions {
    fn default() -> ExecOptions {
        ExecOptions {
            max_iterations: prose_machine::Limits::default().iterations,
            strict: false,
            allow: UserAllow::default(),
            max_turns: DEFAULT_MAX_TURNS,
            session_timeout_s: None,
            approval_timeout_s: None,
            tools: ToolDefault::All,
            max_tokens: None,
            max_cost: None,
            max_value_size: default_value_size(),
            max_frame_memory: default_frame_memory(),
            max_branches: default_branches(),
            memo: false,
        }
    }
}

/// Where a forked run came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkedFrom {
    /// The run forked.
    pub run: String,
    /// The request from which it asked its own driver (none: after every answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// How many of that run's answers it reused.
    pub reused: usize,
}

/// Everything `run.json` records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id (its directory's name).
    pub id: String,
    /// The program's name.
    pub program: String,
    /// Where the artifact came from (`.pbc` path, or the `.prose` source for `prosevm run`).
    pub origin: PathBuf,
    /// SHA-256 of the artifact bytes.
    pub artifact_sha256: String,
    /// The working directory the run's sessions act in (absolute).
    #[serde(default = "here")]
    pub workdir: PathBuf,
    /// The top-level inputs given.
    pub inputs: BTreeMap<String, Value>,
    /// When the run started (UTC, ISO 8601).
    pub started: String,
    /// Where the run is.
    pub status: RunStatus,
    /// The driver answering it (no secrets).
    #[serde(default = "mock_driver")]
    pub driver: DriverSettings,
    /// How it executes.
    #[serde(default)]
    pub options: ExecOptions,
    /// Persistent agents and their memory when the run started.
    #[serde(default)]
    pub agents: Vec<AgentHome>,
    /// How many records the journal held when it was last closed, and its chain value then:
    /// a resume refuses a journal that lost or changed them.
    #[serde(default)]
    pub journal: Seal,
    /// The outputs, once finished, in declaration order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<serde_json::Map<String, serde_json::Value>>,
    /// The error, once failed (or why the run paused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunFailure>,
    /// Tokens and cost the run has used, as of when it last stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<prose_machine::protocol::Usage>,
    /// The skill directories its agents use, as resolved when it started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<UsedSkill>,
    /// The run it was forked from (`prosevm fork`), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    /// The inputs a waiting run still needs (answered ones leave the list, their values
    /// joining `inputs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<WaitingInput>,
    /// The tool calls that wait for a person's approval (answered ones leave the list,
    /// their answers joining the journal; a call that runs or is refused leaves it when the
    /// run next stops).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<WaitingApproval>,
}

impl RunRecord {
    /// The record of a new run of `program` with top-level `inputs`, answered by `driver`,
    /// executing as `options` say, its sessions acting in `workdir`: running, with no id or
    /// start time yet (the store that keeps it gives both) and an empty journal.
    pub fn new(
        program: &Program,
        inputs: BTreeMap<String, Value>,
        driver: DriverSettings,
        options: ExecOptions,
        workdir: PathBuf,
    ) -> RunRecord {
        RunRecord {
            id: String::new(),
            program: program.artifact.modules[0].name.clone(),
            origin: program.origin.clone(),
            artifact_sha256: program.sha256(),
            workdir,
            inputs,
            started: String::new(),
            status: RunStatus::Running,
            driver,
            options,
            agents: Vec::new(),
            journal: Seal::default(),
            outputs: None,
            error: None,
            usage: None,
            skills: Vec::new(),
            forked_from: None,
            waiting: Vec::new(),
            approvals: Vec::new(),
        }
    }

    /// The approval `id` the run waits for, if it does.
    pub fn approval(&self, id: &ApprovalId) -> Option<&WaitingApproval> {
        self.approvals.iter().find(|a| a.id == *id)
    }

    /// Whether the run, stopped `waiting`, still needs someone at `now` (seconds since the
    /// epoch): an input, or an approval whose time has not run out. One that needs no one
    /// can go on (a lapsed approval is refused as it goes on).
    pub fn needs_someone(&self, now: u64) -> bool {
        !self.waiting.is_empty() || self.approvals.iter().any(|a| !a.lapsed(now))
    }

    /// What the run waits for: its inputs and approvals while it is `waiting`, else nothing
    /// (a stopped run's approvals are asked again as it goes on).
    pub fn awaited(&self) -> (Vec<WaitingInput>, Vec<WaitingApproval>) {
        match self.status {
            RunStatus::Waiting => (self.waiting.clone(), self.approvals.clone()),
            _ => (Vec::new(), Vec::new()),
        }
    }
}

/// What a run waiting for `inputs` and `approvals` waits for, one line each, for people.
pub fn waits_for(inputs: &[WaitingInput], approvals: &[WaitingApproval]) -> Vec<String> {
    let mut lines: Vec<String> = inputs
        .iter()
        .map(|w| format!("input `{}`: {}", w.name, w.question))
        .collect();
    lines.dedup();
    lines.extend(approvals.iter().map(WaitingApproval::describe));
    lines
}

/// Records written before runs kept their working directory ran where they were resumed.
fn here() -> PathBuf {
    PathBuf::from(".")
}

/// Records written before runs kept their driver ran on the mock.
fn mock_driver() -> DriverSettings {
    DriverSettings::Mock(Default::default())
}

/// How many records the journal held when it was last closed, and the chain value after
/// the last of them; kept in `run.json`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// Records.
    pub records: u64,
    /// The chain value after them (the seed when there are none).
    pub crc: u32,
}

/// A persistent agent of the program run, and its memory when the run started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentHome {
    /// The agent's name.
    pub name: String,
    /// `execution`, `project`, `user` or `path`.
    pub scope: String,
    /// The directory holding its memory.
    pub dir: PathBuf,
    /// Its memory when the run started.
    pub memory: Option<String>,
    /// Segments already in the directory when the run started.
    pub segments: u32,
}

/// A machine for `artifact` with `inputs`, executing as `options` say.
pub fn new_machine(
    artifact: &Arc<Verified>,
    inputs: &BTreeMap<String, Value>,
    options: &ExecOptions,
) -> Result<Machine, RuntimeError> {
    let inputs: FxHashMap<String, Value> =
        inputs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let defaults = Limits::default();
    let limits = Limits {
        iterations: options.max_iterations,
        frame_bytes: size(options.max_frame_memory),
        fibers: size(options.max_branches),
        values: Bounds {
            bytes: size(options.max_value_size),
            ..defaults.values
        },
        ..defaults
    };
    let mut machine = Machine::new(artifact.clone(), &inputs, limits)?;
    machine.set_strict(options.strict);
    Ok(machine)
}
