//! Variable scopes.
//!
//! Each function (the program body, and each block definition) has one flat namespace for
//! `let`, `const`, `output`, `input` and assigned names: the reference forbids shadowing, and
//! the run directory stores bindings by name. Loop variables, block parameters, `catch as`
//! names and pipeline variables live in nested frames that close with their construct.

use crate::span::Span;
use rustc_hash::FxHashMap as HashMap;

/// How a name was introduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarKind {
    /// `let`, or an assignment that declared the name.
    Let,
    /// `const`
    Const,
    /// `input`
    Input,
    /// `output name = ...`
    Output,
    /// Loop or `for` variable, or index.
    Loop,
    /// Block parameter.
    Param,
    /// `catch as err`
    Error,
    /// Pipeline `item` or reduce names.
    Pipe,
    /// A named output of a block, visible to the caller after `do block(...)`.
    BlockOutput,
}

impl VarKind {
    /// Whether assignment to the name is allowed.
    pub fn is_mutable(self) -> bool {
        matches!(self, VarKind::Let | VarKind::Output | VarKind::BlockOutput)
    }

    /// How the kind is described in messages.
    pub fn describe(self) -> &'static str {
        match self {
            VarKind::Let => "variable",
            VarKind::Const => "const",
            VarKind::Input => "input",
            VarKind::Output => "output",
            VarKind::Loop => "loop variable",
            VarKind::Param => "parameter",
            VarKind::Error => "error variable",
            VarKind::Pipe => "pipeline variable",
            VarKind::BlockOutput => "block output",
        }
    }
}

/// What is known about a variable.
#[derive(Clone, Debug)]
pub struct Var {
    /// How it was declared.
    pub kind: VarKind,
    /// Where it was declared.
    pub span: Span,
    /// For results of program invocations: the import alias, to check member access.
    pub program: Option<String>,
}

/// The scopes of one function being analysed.
#[derive(Default)]
pub struct Scopes {
    /// The function's flat namespace.
    pub flat: HashMap<String, Var>,
    /// Nested frames (innermost last).
    pub frames: Vec<HashMap<String, Var>>,
    /// Indices of the frames that are parallel branches: each branch has a namespace of its
    /// own for the names it declares (every child fiber gets its own copy at run time).
    branches: Vec<usize>,
}

impl Scopes {
    /// Finds a visible name, innermost first.
    pub fn lookup(&self, name: &str) -> Option<&Var> {
        self.frames
            .iter()
            .rev()
            .find_map(|f| f.get(name))
            .or_else(|| self.flat.get(name))
    }

    /// Opens a frame.
    pub fn push(&mut self) {
        self.frames.push(HashMap::default());
    }

    /// Closes the innermost frame.
    pub fn pop(&mut self) {
        self.frames.pop();
    }

    /// Opens a parallel branch's namespace.
    pub fn push_branch(&mut self) {
        self.frames.push(HashMap::default());
        self.branches.push(self.frames.len() - 1);
    }

    /// Closes the innermost branch namespace.
    pub fn pop_branch(&mut self) {
        self.branches.pop();
        self.frames.pop();
    }

    /// The namespace `let` and friends declare into: the innermost branch, else the
    /// function's flat namespace.
    pub fn ns(&mut self) -> &mut HashMap<String, Var> {
        match self.branches.last() {
            Some(&i) => &mut self.frames[i],
            None => &mut self.flat,
        }
    }

    /// The namespace enclosing the innermost branch (where a branch's named result goes).
    pub fn outer_ns(&mut self) -> &mut HashMap<String, Var> {
        match self.branches.len() {
            0 | 1 => &mut self.flat,
            n => {
                let i = self.branches[n - 2];
                &mut self.frames[i]
            }
        }
    }

    /// Declares a name in the innermost frame.
    pub fn declare_scoped(&mut self, name: &str, var: Var) {
        if let Some(f) = self.frames.last_mut() {
            f.insert(name.to_string(), var);
        }
    }
}
