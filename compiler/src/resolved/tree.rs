//! Statements and expressions of the resolved program.

use super::{AgentId, BlockId, FnId, ImportId, InputId, OutputId, VarId};
pub use crate::ast::{BinOp, LoopKind, PathSeg, SessionKind};
use crate::span::Span;
pub use bytecode_spec::{Backoff, OnFail, Strategy};

/// A statement.
#[derive(Clone, Debug)]
pub struct Stmt {
    /// What it does.
    pub kind: StmtKind,
    /// Its source.
    pub span: Span,
}

/// The statement forms that do something when the program runs.
#[derive(Clone, Debug)]
pub enum StmtKind {
    /// A declaration (agent, block, import): nothing runs.
    Nop,
    /// `input name`: a parameter is loaded, a mid-program input is asked for.
    Input {
        /// The variable it binds.
        var: VarId,
        /// The declaration.
        input: InputId,
        /// How the value arrives.
        source: InputSource,
    },
    /// `output ...`.
    Output {
        /// The value.
        value: Expr,
        /// The variable a named output binds.
        var: Option<VarId>,
        /// Where the value goes.
        sink: OutputSink,
    },
    /// `let`, `const` or an assignment.
    Bind {
        /// What is bound.
        target: BindTarget,
        /// The value.
        value: Expr,
    },
    /// `x = x + item` on a variable of the current frame: extends it in place.
    Append {
        /// The variable.
        var: VarId,
        /// What is added.
        item: Expr,
        /// The whole `x + item`.
        span: Span,
    },
    /// `throw` with a message (`None`: a bare `throw` outside any `catch`).
    Throw(Option<Expr>),
    /// A bare `throw` inside a `catch`: rethrows the error it caught.
    Rethrow(VarId),
    /// `assert cond [: message]`.
    Assert {
        /// The condition.
        cond: Expr,
        /// The message thrown when it is false.
        message: Option<Expr>,
    },
    /// An expression whose value is the statement's value.
    Expr(Expr),
}

/// How an `input` gets its value.
#[derive(Clone, Debug)]
pub enum InputSource {
    /// A parameter of the program, given by the caller.
    Parameter,
    /// Asked for when the run reaches it, with the question interpolated here.
    Ask(Option<Template>),
}

/// Where an `output` sends its value.
#[derive(Clone, Debug)]
pub enum OutputSink {
    /// A program output (`None` if the program has no such output).
    Program(Option<OutputId>),
    /// A block's result: a named output is returned to the caller under its name;
    /// `returns` when the output ends the block (it is not inside a parallel branch).
    Block {
        /// The output's name, if named.
        name: Option<String>,
        /// Whether it returns from the block.
        returns: bool,
    },
}

/// The left side of a binding.
#[derive(Clone, Debug)]
pub enum BindTarget {
    /// One variable.
    Var(VarId),
    /// `{a, b}`: each variable takes the field of its name.
    Destructure(Vec<(String, VarId)>),
}

/// An expression.
#[derive(Clone, Debug)]
pub struct Expr {
    /// What it computes.
    pub kind: ExprKind,
    /// Its source.
    pub span: Span,
}

/// A constant.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A decimal number.
    Float(f64),
    /// A string.
    Str(String),
}

/// A string with interpolated variables.
#[derive(Clone, Debug, Default)]
pub struct Template {
    /// Literal text and variables, in order.
    pub parts: Vec<TplPart>,
}

impl Template {
    /// A template of one piece of literal text.
    pub fn text(text: impl Into<String>) -> Template {
        Template {
            parts: vec![TplPart::Text(text.into())],
        }
    }
}

/// One piece of a template.
#[derive(Clone, Debug)]
pub enum TplPart {
    /// Literal text.
    Text(String),
    /// A variable, then a member path.
    Var {
        /// The variable.
        var: VarId,
        /// Member and index steps.
        path: Vec<PathSeg>,
        /// The name as written (for traces).
        name: String,
    },
}

/// The expression forms.
#[derive(Clone, Debug)]
pub enum ExprKind {
    /// A variable's value.
    Var(VarId),
    /// A constant.
    Lit(Literal),
    /// A string (interpolating where its template says).
    Str(Template),
    /// `**text**`: judged by the model where a condition is needed.
    Discretion(Template),
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `{ key: value }`.
    Record(Vec<(String, Expr)>),
    /// `expr.name`.
    Member(Box<Expr>, String),
    /// `expr[index]`.
    Index(Box<Expr>, Box<Expr>),
    /// An imported program's invocation.
    Invoke(Box<Invoke>),
    /// `not x`.
    Not(Box<Expr>),
    /// `-x`.
    Neg(Box<Expr>),
    /// `a op b` (`and` and `or` short-circuit).
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// A session or `resume:`.
    Session(Box<Session>),
    /// `do block(args)`.
    Call(Box<Call>),
    /// `do:` block.
    Do(Vec<Stmt>),
    /// `a -> b -> c`.
    Arrow(Vec<Expr>),
    /// `input | stage | stage`.
    Pipeline(Box<Expr>, Vec<Stage>),
    /// `parallel:` with one branch per statement.
    Parallel(Box<Parallel>),
    /// `for` and `parallel for`.
    For(Box<For>),
    /// `repeat n`.
    Repeat(Box<Repeat>),
    /// `loop [until|while cond]`.
    Loop(Box<Loop>),
    /// `try` with `catch` and/or `finally`.
    Try(Box<Try>),
    /// `if` / `elif` / `else`.
    If(Box<If>),
    /// `choice`.
    Choice(Box<Choice>),
}

/// An invocation of an imported program.
#[derive(Clone, Debug)]
pub struct Invoke {
    /// The program.
    pub import: ImportId,
    /// One argument per input of the program, in its order (`None`: not given).
    pub args: Vec<Option<Expr>>,
    /// The callee's name as written.
    pub callee: Span,
}

/// `do block(args)`.
#[derive(Clone, Debug)]
pub struct Call {
    /// The block.
    pub block: BlockId,
    /// One argument per parameter (`None`: not given).
    pub args: Vec<Option<Expr>>,
    /// The block's name as written.
    pub name: Span,
    /// The block's named outputs and the caller's variables that receive them.
    pub outputs: Vec<(String, VarId)>,
    /// Variables of the block the caller may read after the call, and the caller's
    /// variables that receive them (only those the program reads are copied).
    pub exports: Vec<(String, VarId)>,
}

/// A value passed as a session's context.
#[derive(Clone, Debug)]
pub enum ContextValue {
    /// An expression.
    Expr(Expr),
    /// An agent named as context: its prompt.
    Agent(AgentId),
}

/// One permission rule.
#[derive(Clone, Debug)]
pub struct Permission {
    /// `read`, `write`, `execute`, `bash`, `network`, or another key as written.
    pub kind: String,
    /// The rule.
    pub value: PermissionValue,
}

/// The value of a permission rule.
#[derive(Clone, Debug)]
pub enum PermissionValue {
    /// `allow`, `deny`, `prompt` (or another word, kept as written).
    Word(String),
    /// Patterns.
    Patterns(Vec<Template>),
}

/// A session with agent defaults and session overrides resolved.
#[derive(Clone, Debug)]
pub struct Session {
    /// Fresh or resumed.
    pub kind: SessionKind,
    /// Context values with their labels, in order.
    pub context: Vec<(String, ContextValue)>,
    /// Whether it has no `context:` property, and so inherits the previous step's result
    /// (`context: []` inherits nothing).
    pub inherit: bool,
    /// The agent.
    pub agent: Option<AgentId>,
    /// A short label, interpolated like the prompt.
    pub label: Option<Template>,
    /// The task.
    pub prompt: Option<Template>,
    /// The agent's prompt, interpolated in the session's scope.
    pub system: Option<Template>,
    /// The session's own `model:` (the agent's applies otherwise).
    pub model: Option<String>,
    /// Permission rules: the agent's, overridden kind by kind by the session's.
    pub permissions: Vec<Permission>,
    /// The session's own `skills:` (the agent's apply otherwise).
    pub skills: Option<Vec<String>>,
    /// Extra attempts after a failure.
    pub retry: u32,
    /// Delay policy between attempts.
    pub backoff: Backoff,
}

/// How a fork joins its branches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Join {
    /// Join strategy.
    pub strategy: Strategy,
    /// Successes wanted by [`Strategy::Any`].
    pub count: u32,
    /// Failure policy.
    pub on_fail: OnFail,
}

impl Default for Join {
    fn default() -> Join {
        Join {
            strategy: Strategy::All,
            count: 1,
            on_fail: OnFail::FailFast,
        }
    }
}

/// `parallel:`.
#[derive(Clone, Debug)]
pub struct Parallel {
    /// How branches join.
    pub join: Join,
    /// The branches, one per statement.
    pub branches: Vec<Branch>,
}

/// One branch of a `parallel:` block.
#[derive(Clone, Debug)]
pub struct Branch {
    /// Its frame.
    pub func: FnId,
    /// The variable its statement assigns, with its name (for traces).
    pub result: Option<(String, VarId)>,
    /// The branch's statement.
    pub stmt: Stmt,
}

/// `for` and `parallel for`.
#[derive(Clone, Debug)]
pub struct For {
    /// `parallel for`: how iterations join, and the body's frame.
    pub parallel: Option<(Join, FnId)>,
    /// The item variable.
    pub item: VarId,
    /// The index variable.
    pub index: Option<VarId>,
    /// The collection.
    pub iter: Expr,
    /// The body.
    pub body: Vec<Stmt>,
}

/// `repeat n [as i]`.
#[derive(Clone, Debug)]
pub struct Repeat {
    /// How many times.
    pub count: Expr,
    /// The index variable.
    pub index: Option<VarId>,
    /// The body.
    pub body: Vec<Stmt>,
}

/// `loop [until|while cond] [(max: n)] [as i]`.
#[derive(Clone, Debug)]
pub struct Loop {
    /// Plain, until or while.
    pub kind: LoopKind,
    /// The condition.
    pub cond: Option<Expr>,
    /// The iteration limit.
    pub max: Option<Expr>,
    /// The iteration variable.
    pub index: Option<VarId>,
    /// The body.
    pub body: Vec<Stmt>,
}

/// `try` with its clauses.
#[derive(Clone, Debug)]
pub struct Try {
    /// The protected body.
    pub body: Vec<Stmt>,
    /// `catch [as err]:` with the variable holding the error.
    pub catch: Option<(VarId, Vec<Stmt>)>,
    /// `finally:`.
    pub finally: Option<Vec<Stmt>>,
}

/// `if` / `elif` / `else`.
#[derive(Clone, Debug)]
pub struct If {
    /// `(condition, body)` for `if` and each `elif`.
    pub branches: Vec<(Expr, Vec<Stmt>)>,
    /// `else:`.
    pub else_body: Option<Vec<Stmt>>,
}

/// `choice`.
#[derive(Clone, Debug)]
pub struct Choice {
    /// What the model decides on.
    pub criteria: Template,
    /// `(label, body)` per option.
    pub options: Vec<(Template, Vec<Stmt>)>,
}

/// One `| op:` stage of a pipeline.
#[derive(Clone, Debug)]
pub struct Stage {
    /// The operation and its variables.
    pub op: StageOp,
    /// The stage's body.
    pub body: Vec<Stmt>,
    /// The whole stage.
    pub span: Span,
}

/// A pipeline operation.
#[derive(Clone, Debug)]
pub enum StageOp {
    /// `map`: each element becomes the body's value.
    Map {
        /// The element.
        item: VarId,
    },
    /// `filter`: keeps the elements for which the body is true.
    Filter {
        /// The element.
        item: VarId,
    },
    /// `reduce(acc, item)`.
    Reduce {
        /// The accumulator.
        acc: VarId,
        /// The element.
        item: VarId,
    },
    /// `pmap`: `map` with every element in its own branch.
    Pmap {
        /// The element (a parameter of the body's frame).
        item: VarId,
        /// The body's frame.
        func: FnId,
    },
}
