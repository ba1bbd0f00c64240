//! Semantic analysis: name resolution and the reference's validation rules, producing the
//! [resolved program](crate::resolved) that code generation lowers.
//!
//! Analysis runs in two passes over one file. The first ([`collect`]) gathers what is
//! hoisted or declared by position: imports, skills, agents, blocks (with their parameters
//! and named outputs) and the program's parameters, and fills the program's tables. The
//! second walks the program body, then every block body, resolving names in source order,
//! checking each construct and building its resolved form. Block bodies see every
//! program-level variable, since blocks are hoisted and run when called.

mod blocks;
mod collect;
mod constructs;
mod exprs;
pub mod index;
mod modifiers;
mod names;
mod permissions;
mod props;
mod scope;
mod shapes;
mod stmts;
mod words;

use crate::ast::*;
use crate::diagnostics::{suggest, Code, Diagnostic};
use crate::resolved::{self as r, FnId, VarId};
use crate::source::FileId;
use crate::span::Span;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use scope::{ArmPath, Namespace, Scopes};
use std::collections::HashMap as StdHashMap;

/// The interface of a program as seen by programs that import it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Contract {
    /// Inputs declared before any executable statement (all required).
    pub inputs: Vec<String>,
    /// Named outputs bound at program level.
    pub outputs: Vec<String>,
    /// Inputs asked mid-program (after an executable statement, or inside a construct): a
    /// person answers them when the run gets there, or `--input` gives them beforehand.
    pub asked: Vec<String>,
}

/// What the import loader found for a `use` path.
#[derive(Clone, Debug)]
pub enum ImportStatus {
    /// Loaded and analysed: its contract is known.
    Resolved(Contract),
    /// A registry name with no library path to look in: usable, but not checked.
    Unresolved,
    /// Loading failed; the loader reported why.
    Failed,
}

/// The result of analysing one file.
#[derive(Debug, Default)]
pub struct Analysis {
    /// Everything found, in no particular order.
    pub diagnostics: Vec<Diagnostic>,
    /// The file's own interface.
    pub contract: Contract,
    /// The program with every name resolved (meaningful when there are no errors).
    pub program: r::Program,
    /// Where each name is written and what it stands for.
    pub index: index::NameIndex,
}

struct AgentInfo<'a> {
    span: Span,
    persistent: bool,
    id: r::AgentId,
    def: &'a AgentDef,
}

struct BlockInfo<'a> {
    span: Span,
    def: &'a BlockDef,
    outputs: Vec<String>,
    /// Names the block's own namespace declares (read after a call: E146).
    names: Vec<String>,
    id: r::BlockId,
}

struct ProgramInfo {
    span: Span,
    status: ImportStatus,
    /// The linked program, when it was loaded.
    import: Option<r::ImportId>,
}

/// A variable of a block that a caller can see after calling the block.
struct BlockVar {
    /// The blocks whose calls provide it.
    providers: Vec<r::BlockId>,
    /// The first call that made it visible.
    call: Span,
    /// Whether its first read was reported.
    reported: bool,
}

/// Where an expression sits, for the checks that depend on it.
#[derive(Clone, Copy, Default)]
struct Ctx {
    /// Directly a branch of a `parallel:` block: assignments declare named results.
    parallel_branch: bool,
}

struct Analyzer<'a> {
    file: FileId,
    imports: &'a StdHashMap<String, ImportStatus>,
    diags: Vec<Diagnostic>,
    agents: HashMap<String, AgentInfo<'a>>,
    blocks: HashMap<String, BlockInfo<'a>>,
    programs: HashMap<String, ProgramInfo>,
    skills: HashSet<String>,
    /// The file being analysed.
    program: &'a Program,
    /// Every name declared anywhere in the file (for agent prompts, bound late); computed
    /// on first use, since most programs never interpolate in agent prompts.
    all_names: Option<HashSet<&'a str>>,
    /// Program-level variables, visible inside block bodies.
    globals: Namespace,
    /// Where each output of the function being analysed was bound, and in which arms.
    outputs: HashMap<String, Vec<(Span, ArmPath)>>,
    contract: Contract,
    scopes: Scopes,
    in_block: bool,
    /// How many bodies deep the walk is (0: the function's top level).
    depth: u32,
    /// The function whose frame new variables go in.
    func: FnId,
    /// The error variables of the enclosing `catch` clauses (a bare `throw` rethrows the
    /// innermost).
    catches: Vec<VarId>,
    /// The exclusive arms the walk is in, and the next construct number.
    arms: ArmPath,
    next_construct: u32,
    /// Variables of blocks made visible to callers, by the caller's variable.
    block_vars: HashMap<VarId, BlockVar>,
    /// Names of each block's own variables that callers read.
    exported: HashMap<r::BlockId, Vec<String>>,
    /// Each block's namespace once its body is analysed.
    block_ns: HashMap<r::BlockId, Namespace>,
    /// Table indices by name.
    input_ids: HashMap<String, r::InputId>,
    output_ids: HashMap<String, r::OutputId>,
    /// What is being built.
    out: r::Program,
    /// Name occurrences, for tools.
    index: index::NameIndex,
    /// What is written to variables and which of their fields are read (W123).
    shapes: shapes::Shapes,
    /// The end of the statement being analysed (where the names it declares become visible).
    stmt_end: u32,
}

/// Analyses a parsed file. `imports` maps each `use` path to what the loader found.
pub fn analyze<'a>(
    file: FileId,
    program: &'a Program,
    imports: &'a StdHashMap<String, ImportStatus>,
) -> Analysis {
    let out = r::Program::default();
    let mut a = Analyzer {
        file,
        imports,
        diags: Vec::new(),
        agents: HashMap::default(),
        blocks: HashMap::default(),
        programs: HashMap::default(),
        skills: HashSet::default(),
        program,
        all_names: None,
        globals: Namespace::default(),
        outputs: HashMap::default(),
        contract: Contract::default(),
        scopes: Scopes::new(index::WHOLE_FILE),
        in_block: false,
        depth: 0,
        func: out.main,
        catches: Vec::new(),
        arms: Vec::new(),
        next_construct: 0,
        block_vars: HashMap::default(),
        exported: HashMap::default(),
        block_ns: HashMap::default(),
        input_ids: HashMap::default(),
        output_ids: HashMap::default(),
        out,
        index: index::NameIndex::default(),
        shapes: shapes::Shapes::default(),
        stmt_end: 0,
    };
    a.collect(program);
    a.out.body = a.stmts(&program.stmts, Ctx::default());
    a.globals = std::mem::take(&mut a.scopes.flat);
    a.block_bodies();
    a.resolve_exports();
    a.check_fields();
    Analysis {
        diagnostics: a.diags,
        contract: a.contract,
        program: a.out,
        index: a.index,
    }
}

/// The source of a body's statements, first to last (where its names can be written).
fn extent(body: &Body) -> Span {
    match (body.stmts.first(), body.stmts.last()) {
        (Some(first), Some(last)) => first.span.to(last.span),
        _ => body.span,
    }
}

/// The name a `use` path is known by without an alias: its last segment, minus `.prose`.
pub fn default_import_name(path: &str) -> String {
    let last = path.rsplit('/').next().unwrap_or(path);
    last.strip_suffix(".prose").unwrap_or(last).to_string()
}

/// Whether a `use` path has a supported form: `@handle/slug`, or a relative path.
pub fn valid_use_path(path: &str) -> bool {
    if let Some(rest) = path.strip_prefix('@') {
        let mut parts = rest.split('/');
        let ok = |s: Option<&str>| {
            s.is_some_and(|s| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            })
        };
        ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
    } else {
        path.strip_prefix("./")
            .or_else(|| path.strip_prefix("../"))
            .is_some_and(|rest| !rest.is_empty())
    }
}

/// Spans of the statements that failed to parse, at any depth (block bodies included).
pub fn unparsed_spans(program: &Program) -> Vec<Span> {
    fn visit(stmts: &[Stmt], out: &mut Vec<Span>) {
        walk_stmts(stmts, &mut |s| match &s.kind {
            StmtKind::Error => out.push(s.span),
            StmtKind::BlockDef(b) => visit(&b.body.stmts, out),
            _ => {}
        });
    }
    let mut out = Vec::new();
    visit(&program.stmts, &mut out);
    out
}

impl Analyzer<'_> {
    fn report(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn diag(&mut self, code: Code, span: Span, msg: impl Into<String>) -> &mut Diagnostic {
        self.diags.push(Diagnostic::new(code, self.file, span, msg));
        self.diags.last_mut().expect("just pushed")
    }

    /// A new variable in the frame of function `owner`.
    fn new_var(&mut self, name: Option<&str>, owner: FnId) -> VarId {
        self.out.vars.push(r::Var {
            name: name.map(str::to_string),
            owner,
            read: false,
            kind: bytecode_spec::BindingKind::Let,
            output: None,
        })
    }

    /// A new branch frame forked by the current function.
    fn new_branch(&mut self) -> FnId {
        self.out.funcs.push(r::Frame {
            kind: r::FrameKind::Branch,
            parent: Some(self.func),
        })
    }

    /// The frame of the function enclosing the current one.
    fn parent_func(&self) -> FnId {
        self.out.funcs[self.func].parent.unwrap_or(self.func)
    }

    /// Runs `f` with `body` as the current function.
    fn in_func<T>(&mut self, body: FnId, f: impl FnOnce(&mut Self) -> T) -> T {
        let outer = std::mem::replace(&mut self.func, body);
        let value = f(self);
        self.func = outer;
        value
    }

    /// Runs `f` once per arm of a new exclusive construct (`if` arms, `choice` options).
    fn exclusive_arm<T>(&mut self, construct: u32, arm: u32, f: impl FnOnce(&mut Self) -> T) -> T {
        self.arms.push((construct, arm));
        let value = f(self);
        self.arms.pop();
        value
    }

    /// Reports W123 for each field read that the records bound to its variable never have.
    fn check_fields(&mut self) {
        for m in self.shapes.missing() {
            let mut owner = self.out.vars[m.var].name.clone().unwrap_or_default();
            for p in &m.prefix {
                owner.push('.');
                owner.push_str(p);
            }
            let help = match suggest::closest(&m.field, m.known.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("its fields: {}", list_or_none(&m.known)),
            };
            let d = Diagnostic::new(
                Code::W123,
                self.file,
                m.span,
                format!(
                    "`{owner}` has no field `{}`; reading it gives `null`",
                    m.field
                ),
            )
            .with_label("not a field of the record")
            .with_secondary(m.record, "the record is built here")
            .with_help(help);
            self.report(d);
        }
    }

    fn new_construct(&mut self) -> u32 {
        self.next_construct += 1;
        self.next_construct
    }
}

/// The import alias an expression's value comes from, if it is a program invocation.
fn program_of(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Call(callee, _) => match &callee.kind {
            ExprKind::Name(n) => Some(n.text.clone()),
            _ => None,
        },
        _ => None,
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
