//! Module tables: everything an instruction refers to by index, and everything a driver
//! needs to serve a request (agents, session descriptors, choices).

use crate::bundle::{BundledSkill, SkillImport};
use crate::ids::*;
use crate::op::Op;
use cranelift_entity::PrimaryMap;
use serde::{Deserialize, Serialize};

/// A whole compiled program: the main module first, then every program it imports
/// (transitively), each once, each in a namespace of its own, and every skill they import.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    /// `modules[0]` is the program that runs; the others are linked imports.
    pub modules: Vec<Module>,
    /// The skills the modules import, each once ([`Module::skills`] point here).
    pub skills: Vec<BundledSkill>,
}

/// One program's compiled form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Module {
    /// The program's name (the file stem).
    pub name: String,
    /// How it was imported (`@handle/slug` or a relative path); empty for the main module.
    pub import_path: String,
    /// The program's source text (runs keep a copy as `program.prose`; runtime errors quote it).
    pub source: String,
    /// Interned strings.
    pub strings: PrimaryMap<StrId, String>,
    /// Constants.
    pub consts: PrimaryMap<ConstId, Const>,
    /// String templates (interpolation).
    pub templates: PrimaryMap<TplId, Template>,
    /// Key lists for `MakeRecord`.
    pub keysets: PrimaryMap<KeysId, Vec<StrId>>,
    /// Agent templates.
    pub agents: PrimaryMap<AgentId, AgentTemplate>,
    /// Session descriptors.
    pub sessions: PrimaryMap<SessionId, SessionDesc>,
    /// Choice descriptors.
    pub choices: PrimaryMap<ChoiceId, ChoiceDesc>,
    /// Fork descriptors.
    pub forks: PrimaryMap<ForkId, ForkDesc>,
    /// Jump tables for `Switch`.
    pub tables: PrimaryMap<TableId, Vec<u32>>,
    /// Declared inputs (top-level parameters and mid-program questions).
    pub inputs: PrimaryMap<InputId, InputDesc>,
    /// Declared program outputs.
    pub outputs: PrimaryMap<OutputId, OutputDesc>,
    /// Imported programs.
    pub programs: PrimaryMap<ProgId, ProgramRef>,
    /// Imported skills (`import "NAME" from "SOURCE"`), in the order imported.
    pub skills: Vec<SkillImport>,
    /// Functions: the program body, blocks, and outlined parallel branches.
    pub funcs: PrimaryMap<FuncId, Function>,
    /// The program body.
    pub entry: FuncId,
}

/// A constant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Const {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A decimal number.
    Float(f64),
    /// A string.
    Str(StrId),
}

/// A string with interpolated variables.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Template {
    /// Literal text and variable references, in order.
    pub parts: Vec<TplPart>,
}

/// One piece of a template.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TplPart {
    /// Literal text.
    Text(StrId),
    /// A variable: register `reg` of the frame `depth` static links out, then a member path.
    Var {
        /// Static links to follow (0: the current frame).
        depth: u8,
        /// The register.
        reg: Reg,
        /// Member and index steps.
        path: Vec<PathStep>,
        /// The variable's name (for traces and errors).
        name: StrId,
    },
}

/// A member-path step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PathStep {
    /// `.name`
    Field(StrId),
    /// `[n]`
    Index(u32),
}

/// Where a persistent agent keeps its memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Persist {
    /// Not persistent.
    None,
    /// `persist: true`: memory lives and dies with the run.
    Run,
    /// `persist: project`: `.prose/agents/{name}/`.
    Project,
    /// `persist: user`: `~/.prose/agents/{name}/`.
    User,
    /// `persist: "path"`.
    Path(StrId),
}

/// One permission rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Permission {
    /// `read`, `write`, `execute`, `bash`, `network`, or another key kept as written.
    pub kind: StrId,
    /// `allow`/`deny`/`prompt`, or patterns.
    pub value: PermissionValue,
}

/// The value of a permission rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PermissionValue {
    /// `allow`, `deny` or `prompt`.
    Word(StrId),
    /// Glob or URL patterns (templates, as they may interpolate).
    Patterns(Vec<TplId>),
}

/// An `agent` definition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentTemplate {
    /// The agent's name.
    pub name: StrId,
    /// `sonnet`, `opus`, `haiku`, or a provider model id.
    pub model: Option<StrId>,
    /// The agent's prompt as written (sessions interpolate it in their own scope).
    pub prompt: Option<StrId>,
    /// Memory scope.
    pub persist: Persist,
    /// Skill names.
    pub skills: Vec<StrId>,
    /// Permission rules.
    pub permissions: Vec<Permission>,
    /// Properties the compiler does not interpret, kept for the driver.
    pub extra: Vec<(StrId, ConstId)>,
}

/// `session` (fresh) or `resume` (with the agent's memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SessionKind {
    /// A fresh session.
    Fresh,
    /// Continue a persistent agent with its memory.
    Resume,
}

/// Delay policy between retries of a failed session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Backoff {
    /// Retry at once.
    None,
    /// A fixed delay between attempts.
    Linear,
    /// A doubling delay.
    Exponential,
}

/// Everything a driver needs for one session, with agent defaults and session overrides
/// already merged by the compiler.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionDesc {
    /// Fresh or resume.
    pub kind: SessionKind,
    /// The agent, if any.
    pub agent: Option<AgentId>,
    /// A short label (the string of `session "label"` when a `prompt:` is given, or the
    /// session's name), interpolated like the prompt.
    pub label: Option<TplId>,
    /// The task.
    pub prompt: Option<TplId>,
    /// The agent's prompt, interpolated in the session's scope (the system prompt).
    pub system: Option<TplId>,
    /// The model after overrides.
    pub model: Option<StrId>,
    /// Labels of the values in the session's context list.
    pub context_labels: Vec<StrId>,
    /// Permission rules after overrides.
    pub permissions: Vec<Permission>,
    /// Skills.
    pub skills: Vec<StrId>,
    /// Extra attempts after a failure.
    pub retry: u32,
    /// Delay policy between attempts.
    pub backoff: Backoff,
    /// The statement's source line, for traces.
    pub line: u32,
}

/// A `choice` block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChoiceDesc {
    /// What the model decides on.
    pub criteria: TplId,
    /// The option labels, in order.
    pub options: Vec<TplId>,
}

/// Join strategy of a fork.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Strategy {
    /// Wait for every branch.
    All,
    /// The first branch to succeed wins; the others are cancelled (the reference: "the
    /// first successful result wins").
    First,
    /// Wait for `count` successful branches; the others are cancelled.
    Any,
}

impl Strategy {
    /// The strategy as the language writes it: `all`, `first` or `any`.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::All => "all",
            Strategy::First => "first",
            Strategy::Any => "any",
        }
    }
}

/// What a fork does when a branch fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnFail {
    /// Cancel the other branches and fail at once.
    FailFast,
    /// Let every branch finish, then fail if any failed.
    Continue,
    /// Treat failures as null results.
    Ignore,
}

impl OnFail {
    /// The policy as the language writes it: `fail-fast`, `continue` or `ignore`.
    pub fn name(self) -> &'static str {
        match self {
            OnFail::FailFast => "fail-fast",
            OnFail::Continue => "continue",
            OnFail::Ignore => "ignore",
        }
    }
}

/// A `parallel` block, `parallel for` or `pmap`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForkDesc {
    /// Join strategy.
    pub strategy: Strategy,
    /// Successes wanted by `Any`.
    pub count: u32,
    /// Failure policy.
    pub on_fail: OnFail,
    /// `Fork`: one function per branch. `ForkEach`: exactly one body function taking
    /// `(item, index)`.
    pub branches: Vec<FuncId>,
    /// Branch names, for traces (the variable a branch assigns, if any).
    pub names: Vec<Option<StrId>>,
}

/// An `input` declaration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputDesc {
    /// The input's name.
    pub name: StrId,
    /// Its description or question.
    pub description: Option<TplId>,
    /// Declared before any executable statement: a parameter the caller must provide.
    pub parameter: bool,
}

/// An `output` declaration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputDesc {
    /// The output's name.
    pub name: StrId,
}

/// A `use` import linked into the artifact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramRef {
    /// The name it is called by.
    pub alias: StrId,
    /// Index of its module in [`Artifact::modules`].
    pub module: u32,
}

/// What a function is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FuncKind {
    /// The program body.
    Main,
    /// A `block` definition.
    Block,
    /// A parallel branch or fan-out body, run by a child fiber.
    Branch,
}

/// A source position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Loc {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
}

/// One function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Function {
    /// Its name (the block's name, or a generated one).
    pub name: StrId,
    /// What it is for.
    pub kind: FuncKind,
    /// Number of parameters (they arrive in registers `0..params`).
    pub params: u32,
    /// Number of registers its frame needs.
    pub nregs: u32,
    /// The instructions.
    pub code: Vec<Op>,
    /// The source position of each instruction.
    pub locs: Vec<Loc>,
    /// Debug names: which registers hold which named variables, and what declared each (for
    /// traces and the run directory's binding files).
    pub vars: Vec<(Reg, StrId, BindingKind)>,
}

/// What declared a named variable, as traces and binding files report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BindingKind {
    /// `let`, an assignment that declared the name, or a construct's own name (a loop
    /// variable, a parameter, a caught error).
    Let,
    /// `const`.
    Const,
    /// `input`.
    Input,
    /// `output name = ...`.
    Output,
}

impl BindingKind {
    /// The kind's word, as in source.
    pub fn as_str(self) -> &'static str {
        match self {
            BindingKind::Let => "let",
            BindingKind::Const => "const",
            BindingKind::Input => "input",
            BindingKind::Output => "output",
        }
    }
}
