//! The syntax tree. Every node carries the byte span it was parsed from.
//!
//! Compound constructs (`do:`, `parallel`, loops, `try`, `if`, `choice`, pipelines) are
//! expressions, because real programs bind them (`let x = parallel: ...`,
//! `name = try: ...`); as statements their value is simply not used.

use crate::span::Span;

/// A whole `.prose` file.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// Top-level statements in source order.
    pub stmts: Vec<Stmt>,
    /// The whole file.
    pub span: Span,
}

/// An identifier occurrence (names may contain hyphens: `security-reviewer`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Name {
    /// The identifier.
    pub text: String,
    /// Where it was written.
    pub span: Span,
}

/// A string literal or discretion text, split into literal text and interpolations.
#[derive(Clone, Debug, PartialEq)]
pub struct StrLit {
    /// Literal text and `{name.path}` parts, in order.
    pub parts: Vec<StrPart>,
    /// Written with `"""` (or `***` for discretion text).
    pub triple: bool,
    /// The whole literal, delimiters included.
    pub span: Span,
}

impl StrLit {
    /// The text with every interpolation written back as `{...}`.
    pub fn raw_text(&self) -> String {
        let mut s = String::new();
        for p in &self.parts {
            match p {
                StrPart::Text(t) => s.push_str(t),
                StrPart::Interp(i) => s.push_str(&i.raw),
            }
        }
        s
    }

    /// The literal text if the string has no interpolation parts.
    pub fn as_plain(&self) -> Option<String> {
        self.parts
            .iter()
            .all(|p| matches!(p, StrPart::Text(_)))
            .then(|| self.raw_text())
    }
}

/// One piece of a string literal.
#[derive(Clone, Debug, PartialEq)]
pub enum StrPart {
    /// Literal text (escapes already applied).
    Text(String),
    /// A `{root.path[0]}` group that interpolates if `root` names a variable.
    Interp(Box<Interp>),
}

/// A well-formed `{name...}` group inside a string.
#[derive(Clone, Debug, PartialEq)]
pub struct Interp {
    /// The first name.
    pub root: String,
    /// Member and index steps after the root.
    pub path: Vec<PathSeg>,
    /// The group including its braces.
    pub span: Span,
    /// The group as written, braces included (used when it stays literal text).
    pub raw: String,
}

/// A step of a member path: `.field` or `[index]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PathSeg {
    /// `.name`
    Field(String),
    /// `[n]`
    Index(u32),
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What kind of statement.
    pub kind: StmtKind,
    /// Its source, from the first token to the end of its last line or block.
    pub span: Span,
}

/// The statement forms.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `use "path" [as alias]`: import another program.
    Use {
        /// The path string.
        path: Box<StrLit>,
        /// `as alias`.
        alias: Option<Name>,
    },
    /// `import "skill" from "source"`: import a skill.
    Import {
        /// Skill name.
        skill: Box<StrLit>,
        /// Where it comes from (`github:`, `npm:`, `./path`).
        source: Box<StrLit>,
    },
    /// `input name: description` (top-level parameter or mid-program question).
    Input {
        /// The input's name (`None` when written `input: ...`).
        name: Option<Name>,
        /// A string or `**question**`, if given.
        description: Option<Box<Expr>>,
    },
    /// `output name = expr` or anonymous `output expr`.
    Output {
        /// The output's name, if any; `Some` with empty text for `output = ...`.
        name: Option<Name>,
        /// The value.
        value: Box<Expr>,
    },
    /// `agent name:` with its properties.
    Agent(Box<AgentDef>),
    /// `let`, `const`, or plain assignment.
    Bind {
        /// Which form.
        kind: BindKind,
        /// A name or a `{a, b}` destructuring pattern.
        target: Target,
        /// The value.
        value: Box<Expr>,
    },
    /// `block name(params):` definition.
    BlockDef(Box<BlockDef>),
    /// `throw` or `throw expr`.
    Throw(Option<Box<Expr>>),
    /// `assert cond` or `assert cond: "message"`.
    Assert {
        /// The condition.
        cond: Box<Expr>,
        /// The message thrown when it is false.
        message: Option<Box<Expr>>,
    },
    /// An expression used as a statement (sessions, `do`, loops, `if`, ...).
    Expr(Box<Expr>),
    /// A statement that failed to parse (its error was reported).
    Error,
}

/// `let`, `const`, or assignment without a keyword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindKind {
    /// `let x = ...`
    Let,
    /// `const x = ...`
    Const,
    /// `x = ...`
    Assign,
}

/// The left side of a binding.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// A single name.
    Name(Name),
    /// `{ a, b }`: destructures a record (such as a program's outputs).
    Destructure(Vec<Name>, Span),
}

/// `agent name:` and its property block.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentDef {
    /// The agent's name.
    pub name: Name,
    /// Properties in order (duplicates are kept and reported).
    pub props: Vec<Property>,
}

/// `block name(params):` and its body.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockDef {
    /// The block's name (`None` for `block:` without a name).
    pub name: Option<Name>,
    /// Parameter names.
    pub params: Vec<Name>,
    /// The body.
    pub body: Body,
}

/// A `key: value` line, or `key:` followed by an indented block of properties.
#[derive(Clone, Debug, PartialEq)]
pub struct Property {
    /// The key (any word, keywords included).
    pub key: Name,
    /// The value.
    pub value: PropValue,
    /// The whole property.
    pub span: Span,
}

/// The value of a property.
#[derive(Clone, Debug, PartialEq)]
pub enum PropValue {
    /// `key: expr`
    Expr(Expr),
    /// `key:` with nested properties (permissions, `context:` with `file:` entries).
    Block(Vec<Property>),
}

/// An indented statement block.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    /// The statements (empty when the block held only comments or nothing).
    pub stmts: Vec<Stmt>,
    /// The block.
    pub span: Span,
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What kind of expression.
    pub kind: ExprKind,
    /// Its source.
    pub span: Span,
}

/// A call argument: positional (`x`) or named (`topic: x`).
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    /// The name, for named arguments.
    pub name: Option<Name>,
    /// The value.
    pub value: Expr,
}

/// An object literal entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjEntry {
    /// The key: written (`key: v`, `"key": v`) or taken from a shorthand name or path.
    pub key: Name,
    /// The value (for shorthand, the name or path itself).
    pub value: Expr,
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `not x`
    Not,
    /// `-x`
    Neg,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`: integer addition, string or list concatenation.
    Add,
    /// `-`: integer subtraction.
    Sub,
    /// `==` and `is`.
    Eq,
    /// `!=` and `is not`.
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `and` (short-circuit).
    And,
    /// `or` (short-circuit).
    Or,
}

/// `session` or `resume`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    /// A fresh session.
    Session,
    /// `resume:` a persistent agent with its memory.
    Resume,
}

/// A session or resume with its properties.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionExpr {
    /// `session` or `resume`.
    pub kind: SessionKind,
    /// `session "text"`: the prompt, or the label when a `prompt:` property is present.
    pub text: Option<StrLit>,
    /// `session name: agent`: the session's name.
    pub name: Option<Name>,
    /// The agent, for `session: agent` and `resume: agent`.
    pub agent: Option<Name>,
    /// Properties from the indented block that follows.
    pub props: Vec<Property>,
}

/// One `| op:` stage of a pipeline.
#[derive(Clone, Debug, PartialEq)]
pub struct PipeStage {
    /// `map`, `filter`, `reduce` or `pmap` (checked by semantic analysis).
    pub op: Name,
    /// `reduce(acc, item)` names.
    pub params: Option<Vec<Name>>,
    /// The stage body.
    pub body: Body,
    /// The whole stage.
    pub span: Span,
}

/// Which unbounded loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopKind {
    /// `loop:`
    Plain,
    /// `loop until cond:`
    Until,
    /// `loop while cond:`
    While,
}

/// `catch [as err]:` clause.
#[derive(Clone, Debug, PartialEq)]
pub struct CatchClause {
    /// The error variable.
    pub name: Option<Name>,
    /// The handler.
    pub body: Body,
}

/// `option "label":` of a choice.
#[derive(Clone, Debug, PartialEq)]
pub struct ChoiceOption {
    /// The label shown to the model.
    pub label: StrLit,
    /// What runs when chosen.
    pub body: Body,
}

/// The expression forms.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A variable (or, in some positions, an agent or program) name.
    Name(Name),
    /// An integer literal.
    Int(i64),
    /// A decimal literal (only valid where a number is allowed; counts must be integers).
    Float(f64),
    /// A string literal.
    Str(StrLit),
    /// `**text**` or `***text***`: judged by the model.
    Discretion(StrLit),
    /// `true` / `false`.
    Bool(bool),
    /// `null`.
    Null,
    /// `[a, b]`
    Array(Vec<Expr>),
    /// `{ a, key: value }`
    Object(Vec<ObjEntry>),
    /// `expr.name`
    Member(Box<Expr>, Name),
    /// `expr[index]`
    Index(Box<Expr>, Box<Expr>),
    /// `name(arg: value)`: program invocation.
    Call(Box<Expr>, Vec<Arg>),
    /// `not x`, `-x`
    Unary(UnOp, Box<Expr>),
    /// `a op b`
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `session ...` / `resume: ...`
    Session(Box<SessionExpr>),
    /// `do name` / `do name(args)`: block invocation.
    DoCall {
        /// The block.
        name: Name,
        /// Arguments (`None` without parentheses).
        args: Option<Vec<Arg>>,
    },
    /// `do:` anonymous sequential block.
    DoBlock(Body),
    /// `a -> b -> c`: run in order; the value is the last one.
    Arrow(Vec<Expr>),
    /// `input | stage | stage`
    Pipeline(Box<Expr>, Vec<PipeStage>),
    /// `parallel (mods):` with one branch per statement.
    Parallel {
        /// Strategy, `count:` and `on-fail:` modifiers.
        mods: Vec<Arg>,
        /// One branch per statement.
        body: Body,
    },
    /// `for x[, i] in list:` and `parallel (mods) for ...`.
    For(Box<ForLoop>),
    /// `repeat n [as i]:`
    Repeat(Box<RepeatLoop>),
    /// `loop [until|while cond] [(max: n)] [as i]:`
    Loop(Box<UnboundedLoop>),
    /// `try:` with `catch` and/or `finally`.
    Try(Box<TryBlock>),
    /// `if c: ... elif c: ... else: ...`
    If {
        /// `(condition, body)` for `if` and each `elif`.
        branches: Vec<(Expr, Body)>,
        /// `else:` body.
        else_body: Option<Body>,
    },
    /// `choice **criteria**:` with options.
    Choice {
        /// What the model decides on.
        criteria: Box<Expr>,
        /// The options.
        options: Vec<ChoiceOption>,
    },
    /// An expression that failed to parse.
    Error,
}

/// `for item[, index] in iter:`, sequential or `parallel`.
#[derive(Clone, Debug, PartialEq)]
pub struct ForLoop {
    /// `Some(mods)` for `parallel for`.
    pub parallel: Option<Vec<Arg>>,
    /// Item variable.
    pub item: Name,
    /// Index variable.
    pub index: Option<Name>,
    /// The collection.
    pub iter: Box<Expr>,
    /// The body.
    pub body: Body,
}

/// `repeat count [as index]:`
#[derive(Clone, Debug, PartialEq)]
pub struct RepeatLoop {
    /// How many times.
    pub count: Box<Expr>,
    /// Index variable.
    pub index: Option<Name>,
    /// The body.
    pub body: Body,
}

/// `loop [until|while cond] [(max: n)] [as index]:`
#[derive(Clone, Debug, PartialEq)]
pub struct UnboundedLoop {
    /// Plain, until or while.
    pub kind: LoopKind,
    /// The condition (until/while).
    pub cond: Option<Box<Expr>>,
    /// `(max: n)` modifiers.
    pub mods: Vec<Arg>,
    /// Iteration variable.
    pub index: Option<Name>,
    /// The body.
    pub body: Body,
}

/// `try:` with its `catch` and `finally` clauses.
#[derive(Clone, Debug, PartialEq)]
pub struct TryBlock {
    /// The protected body.
    pub body: Body,
    /// `catch [as err]:`
    pub catch: Option<CatchClause>,
    /// `finally:`
    pub finally: Option<Body>,
}

impl Expr {
    /// A new expression node.
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        Expr { kind, span }
    }
}

impl Stmt {
    /// Whether the statement does something when the program runs (declarations, imports
    /// and recovered errors do not).
    pub fn is_executable(&self) -> bool {
        !matches!(
            self.kind,
            StmtKind::Use { .. }
                | StmtKind::Import { .. }
                | StmtKind::Input { .. }
                | StmtKind::Agent(_)
                | StmtKind::BlockDef(_)
                | StmtKind::Error
        )
    }
}

/// Calls `f` on every statement of `stmts` and every statement nested in their expressions'
/// bodies (not entering block definitions), in source order.
pub fn walk_stmts<'s>(stmts: &'s [Stmt], f: &mut dyn FnMut(&'s Stmt)) {
    for s in stmts {
        f(s);
        match &s.kind {
            StmtKind::Output { value, .. }
            | StmtKind::Bind { value, .. }
            | StmtKind::Expr(value) => walk_expr_bodies(value, f),
            _ => {}
        }
    }
}

/// [`walk_stmts`] over the bodies inside an expression.
pub fn walk_expr_bodies<'s>(e: &'s Expr, f: &mut dyn FnMut(&'s Stmt)) {
    let body = |b: &'s Body, f: &mut dyn FnMut(&'s Stmt)| walk_stmts(&b.stmts, f);
    match &e.kind {
        ExprKind::DoBlock(b) => body(b, f),
        ExprKind::Parallel { body: b, .. } => body(b, f),
        ExprKind::For(l) => body(&l.body, f),
        ExprKind::Repeat(l) => body(&l.body, f),
        ExprKind::Loop(l) => body(&l.body, f),
        ExprKind::Try(t) => {
            let TryBlock {
                body: b,
                catch,
                finally,
            } = &**t;
            body(b, f);
            if let Some(c) = catch {
                body(&c.body, f);
            }
            if let Some(fb) = finally {
                body(fb, f);
            }
        }
        ExprKind::If {
            branches,
            else_body,
        } => {
            for (_, b) in branches {
                body(b, f);
            }
            if let Some(b) = else_body {
                body(b, f);
            }
        }
        ExprKind::Choice { options, .. } => {
            for o in options {
                body(&o.body, f);
            }
        }
        ExprKind::Pipeline(head, stages) => {
            walk_expr_bodies(head, f);
            for s in stages {
                body(&s.body, f);
            }
        }
        ExprKind::Arrow(items) => {
            for i in items {
                walk_expr_bodies(i, f);
            }
        }
        _ => {}
    }
}

/// Calls `f` on every expression in `stmts`, nested ones and those in block definitions,
/// properties and arguments included, parents before children.
pub fn visit_exprs<'s>(stmts: &'s [Stmt], f: &mut dyn FnMut(&'s Expr)) {
    for s in stmts {
        match &s.kind {
            StmtKind::Input {
                description: Some(e),
                ..
            }
            | StmtKind::Output { value: e, .. }
            | StmtKind::Bind { value: e, .. }
            | StmtKind::Throw(Some(e))
            | StmtKind::Expr(e) => visit_expr(e, f),
            StmtKind::Assert { cond, message } => {
                visit_expr(cond, f);
                if let Some(m) = message {
                    visit_expr(m, f);
                }
            }
            StmtKind::Agent(a) => visit_props(&a.props, f),
            StmtKind::BlockDef(b) => visit_exprs(&b.body.stmts, f),
            _ => {}
        }
    }
}

fn visit_props<'s>(props: &'s [Property], f: &mut dyn FnMut(&'s Expr)) {
    for p in props {
        match &p.value {
            PropValue::Expr(e) => visit_expr(e, f),
            PropValue::Block(ps) => visit_props(ps, f),
        }
    }
}

fn visit_args<'s>(args: &'s [Arg], f: &mut dyn FnMut(&'s Expr)) {
    for a in args {
        visit_expr(&a.value, f);
    }
}

/// [`visit_exprs`] from one expression: `e` itself, then everything inside it.
pub fn visit_expr<'s>(e: &'s Expr, f: &mut dyn FnMut(&'s Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Array(items) | ExprKind::Arrow(items) => {
            for i in items {
                visit_expr(i, f);
            }
        }
        ExprKind::Object(entries) => {
            for en in entries {
                visit_expr(&en.value, f);
            }
        }
        ExprKind::Member(x, _) | ExprKind::Unary(_, x) => visit_expr(x, f),
        ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) => {
            visit_expr(a, f);
            visit_expr(b, f);
        }
        ExprKind::Call(callee, args) => {
            visit_expr(callee, f);
            visit_args(args, f);
        }
        ExprKind::Session(s) => visit_props(&s.props, f),
        ExprKind::DoCall { args, .. } => visit_args(args.as_deref().unwrap_or_default(), f),
        ExprKind::DoBlock(b) => visit_exprs(&b.stmts, f),
        ExprKind::Pipeline(head, stages) => {
            visit_expr(head, f);
            for s in stages {
                visit_exprs(&s.body.stmts, f);
            }
        }
        ExprKind::Parallel { mods, body } => {
            visit_args(mods, f);
            visit_exprs(&body.stmts, f);
        }
        ExprKind::For(l) => {
            visit_args(l.parallel.as_deref().unwrap_or_default(), f);
            visit_expr(&l.iter, f);
            visit_exprs(&l.body.stmts, f);
        }
        ExprKind::Repeat(l) => {
            visit_expr(&l.count, f);
            visit_exprs(&l.body.stmts, f);
        }
        ExprKind::Loop(l) => {
            if let Some(c) = &l.cond {
                visit_expr(c, f);
            }
            visit_args(&l.mods, f);
            visit_exprs(&l.body.stmts, f);
        }
        ExprKind::Try(t) => {
            visit_exprs(&t.body.stmts, f);
            if let Some(c) = &t.catch {
                visit_exprs(&c.body.stmts, f);
            }
            if let Some(b) = &t.finally {
                visit_exprs(&b.stmts, f);
            }
        }
        ExprKind::If {
            branches,
            else_body,
        } => {
            for (c, b) in branches {
                visit_expr(c, f);
                visit_exprs(&b.stmts, f);
            }
            if let Some(b) = else_body {
                visit_exprs(&b.stmts, f);
            }
        }
        ExprKind::Choice { criteria, options } => {
            visit_expr(criteria, f);
            for o in options {
                visit_exprs(&o.body.stmts, f);
            }
        }
        ExprKind::Name(_)
        | ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::Discretion(_)
        | ExprKind::Bool(_)
        | ExprKind::Null
        | ExprKind::Error => {}
    }
}
