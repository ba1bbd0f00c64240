//! The resolved program: what semantic analysis hands to code generation.
//!
//! Every name is bound here. A variable is a [`VarId`] owned by the function frame
//! ([`FnId`]) that holds it; agents, blocks, imported programs, inputs and outputs are
//! indices into the program's tables; modifiers and property values are parsed into enums.
//! Code generation walks this tree without looking a name up or reading a word.

mod tree;

pub use tree::*;

use crate::span::Span;
use cranelift_entity::{entity_impl, PrimaryMap};

macro_rules! ids {
    ($( $(#[$doc:meta])* $name:ident => $prefix:literal, )*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
            pub struct $name(u32);
            entity_impl!($name, $prefix);
        )*
    };
}

ids! {
    /// A variable: one storage slot in the frame of its owning function.
    VarId => "v",
    /// A function frame: the program body, a block, or a parallel branch.
    FnId => "fn",
    /// An agent definition.
    AgentId => "agent",
    /// A block definition.
    BlockId => "block",
    /// An imported program that was loaded and checked.
    ImportId => "import",
    /// An `input` declaration.
    InputId => "input",
    /// A program output.
    OutputId => "output",
}

/// One checked program, ready to lower.
#[derive(Clone, Debug)]
pub struct Program {
    /// Function frames; the program body is [`Program::main`].
    pub funcs: PrimaryMap<FnId, Frame>,
    /// Every variable, with the frame that owns it.
    pub vars: PrimaryMap<VarId, Var>,
    /// Imported programs, in the order of their `use` statements.
    pub imports: PrimaryMap<ImportId, Import>,
    /// Imported skills, in the order of their `import` statements.
    pub skills: Vec<SkillImport>,
    /// Inputs: the program's parameters first, then mid-program questions.
    pub inputs: PrimaryMap<InputId, Input>,
    /// Named program outputs (`result` stands for anonymous ones).
    pub outputs: PrimaryMap<OutputId, String>,
    /// Agent definitions, hoisted.
    pub agents: PrimaryMap<AgentId, Agent>,
    /// Block definitions, hoisted.
    pub blocks: PrimaryMap<BlockId, Block>,
    /// The program body's frame.
    pub main: FnId,
    /// The program body.
    pub body: Vec<Stmt>,
}

impl Default for Program {
    fn default() -> Program {
        let mut funcs = PrimaryMap::new();
        let main = funcs.push(Frame {
            kind: FrameKind::Main,
            parent: None,
        });
        Program {
            funcs,
            vars: PrimaryMap::new(),
            imports: PrimaryMap::new(),
            skills: Vec::new(),
            inputs: PrimaryMap::new(),
            outputs: PrimaryMap::new(),
            agents: PrimaryMap::new(),
            blocks: PrimaryMap::new(),
            main,
            body: Vec::new(),
        }
    }
}

impl Program {
    /// Static links from a frame of function `from` to the frame of its enclosing
    /// function `to` (0 when they are the same).
    pub fn depth(&self, from: FnId, to: FnId) -> Option<u8> {
        let mut cur = from;
        let mut depth = 0u8;
        while cur != to {
            cur = self.funcs[cur].parent?;
            depth = depth.checked_add(1)?;
        }
        Some(depth)
    }
}

/// What a function frame is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// The program body.
    Main,
    /// A block definition.
    Block(BlockId),
    /// A parallel branch, `parallel for` body or `pmap` body, run by a child fiber.
    Branch,
}

/// A function frame.
#[derive(Clone, Debug)]
pub struct Frame {
    /// What it is for.
    pub kind: FrameKind,
    /// The frame its static link reaches (blocks link to the program body, branches to
    /// the function that forks them).
    pub parent: Option<FnId>,
}

/// A variable.
#[derive(Clone, Debug)]
pub struct Var {
    /// Its name (`None` for a slot the program cannot name, such as the error of a
    /// `catch:` without `as`).
    pub name: Option<String>,
    /// The function whose frame holds it.
    pub owner: FnId,
    /// Whether the program reads it anywhere.
    pub read: bool,
    /// What declared it.
    pub kind: bytecode_spec::BindingKind,
    /// The program output it holds (`output name = ...`): every later assignment updates
    /// the output too, so the last value wins.
    pub output: Option<OutputId>,
}

/// An imported program.
#[derive(Clone, Debug)]
pub struct Import {
    /// The name it is called by.
    pub alias: String,
    /// The `use` path as written.
    pub path: String,
    /// Its inputs, in its declaration order (invocations pass arguments in this order).
    pub params: Vec<String>,
}

/// An imported skill: `import "NAME" from "SOURCE"`.
#[derive(Clone, Debug)]
pub struct SkillImport {
    /// The skill's name.
    pub name: String,
    /// Where it comes from, as written.
    pub source: String,
    /// The source string in the program (where fetching problems are reported).
    pub span: Span,
}

/// An `input` declaration.
#[derive(Clone, Debug)]
pub struct Input {
    /// The input's name.
    pub name: String,
    /// Its description as written.
    pub description: Option<String>,
    /// Declared before any executable statement: a parameter the caller provides.
    pub parameter: bool,
}

/// Where a persistent agent keeps its memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Persist {
    /// Not persistent.
    None,
    /// `persist: true`.
    Run,
    /// `persist: project`.
    Project,
    /// `persist: user`.
    User,
    /// `persist: "path"`.
    Path(String),
}

/// An agent definition.
#[derive(Clone, Debug)]
pub struct Agent {
    /// Its name.
    pub name: String,
    /// `model:` as written.
    pub model: Option<String>,
    /// `prompt:` as written (sessions interpolate it in their own scope).
    pub prompt: Option<String>,
    /// `persist:`.
    pub persist: Persist,
    /// `skills:`.
    pub skills: Vec<String>,
    /// `permissions:` as written (patterns are not interpolated in the agent table).
    pub permissions: Vec<Permission>,
    /// Properties the compiler does not interpret, kept for the driver.
    pub extra: Vec<(String, Literal)>,
}

/// A block definition.
#[derive(Clone, Debug)]
pub struct Block {
    /// Its name.
    pub name: String,
    /// Its frame.
    pub func: FnId,
    /// Its parameters, in order.
    pub params: Vec<VarId>,
    /// Its body.
    pub body: Vec<Stmt>,
    /// The body's span.
    pub span: Span,
    /// The block's own variables that callers read after calling it, with their names:
    /// returned to the caller with its named outputs.
    pub exports: Vec<(String, VarId)>,
}
