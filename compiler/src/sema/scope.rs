//! Variable scopes.
//!
//! Each function (the program body, and each block definition) has one flat namespace for
//! `let`, `const`, `output`, `input` and assigned names: the reference forbids shadowing, and
//! the run directory stores bindings by name. Loop variables, block parameters, `catch as`
//! names and pipeline variables live in nested frames that close with their construct. A
//! parallel branch (and each iteration of a fan-out) has a namespace of its own.

use crate::resolved::VarId;
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
    /// A variable of a block that is not one of its outputs, visible to the caller after
    /// `do block(...)` (relaxed: E146).
    BlockVar,
}

impl VarKind {
    /// Whether assignment to the name is allowed.
    pub fn is_mutable(self) -> bool {
        matches!(
            self,
            VarKind::Let | VarKind::Output | VarKind::BlockOutput | VarKind::BlockVar
        )
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
            VarKind::BlockVar => "block variable",
        }
    }
}

/// Which arm of which mutually exclusive construct (`if`/`elif`/`else`, `choice`) a
/// declaration sits in, outermost first. Two declarations whose paths first differ in the
/// arm of the same construct can never both run.
pub type ArmPath = Vec<(u32, u32)>;

/// Whether statements at paths `a` and `b` are in different arms of one exclusive
/// construct.
pub fn exclusive(a: &[(u32, u32)], b: &[(u32, u32)]) -> bool {
    a.iter()
        .zip(b)
        .find(|(x, y)| x != y)
        .is_some_and(|(x, y)| x.0 == y.0)
}

/// What is known about a visible name.
#[derive(Clone, Debug)]
pub struct Var {
    /// How it was declared.
    pub kind: VarKind,
    /// Where it was declared.
    pub span: Span,
    /// For results of program invocations: the import alias, to check member access.
    pub program: Option<String>,
    /// The variable it names.
    pub id: VarId,
    /// The exclusive arms its declaration sits in.
    pub arms: ArmPath,
}

/// One namespace: names to variables.
pub type Namespace = HashMap<String, Var>;

/// The scopes of one function being analysed.
#[derive(Default)]
pub struct Scopes {
    /// The function's flat namespace.
    pub flat: Namespace,
    /// The source the flat namespace's names can be written in (the function's body).
    pub region: Span,
    /// Nested frames (innermost last).
    pub frames: Vec<Namespace>,
    /// The source each frame's names can be written in (the construct's body).
    regions: Vec<Span>,
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

    /// Every visible name, for suggestions.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.frames
            .iter()
            .flat_map(|f| f.keys())
            .chain(self.flat.keys())
            .map(String::as_str)
    }

    /// The scopes of a function whose body is `region`.
    pub fn new(region: Span) -> Scopes {
        Scopes {
            region,
            ..Scopes::default()
        }
    }

    /// Opens a frame for a construct whose body is `region`.
    pub fn push(&mut self, region: Span) {
        self.frames.push(HashMap::default());
        self.regions.push(region);
    }

    /// Closes the innermost frame.
    pub fn pop(&mut self) {
        self.frames.pop();
        self.regions.pop();
    }

    /// Opens the namespace of a parallel branch written at `region`.
    pub fn push_branch(&mut self, region: Span) {
        self.push(region);
        self.branches.push(self.frames.len() - 1);
    }

    /// Closes the innermost branch namespace.
    pub fn pop_branch(&mut self) {
        self.branches.pop();
        self.pop();
    }

    /// Where the names of [`Scopes::ns`] can be written.
    pub fn ns_region(&self) -> Span {
        self.branches
            .last()
            .map_or(self.region, |&i| self.regions[i])
    }

    /// Where the names of [`Scopes::outer_ns`] can be written.
    pub fn outer_ns_region(&self) -> Span {
        match self.branches.len() {
            0 | 1 => self.region,
            n => self.regions[self.branches[n - 2]],
        }
    }

    /// Where the names of the innermost frame can be written.
    pub fn frame_region(&self) -> Span {
        self.regions.last().copied().unwrap_or(self.region)
    }

    /// The namespace `let` and friends declare into: the innermost branch, else the
    /// function's flat namespace.
    pub fn ns(&mut self) -> &mut Namespace {
        match self.branches.last() {
            Some(&i) => &mut self.frames[i],
            None => &mut self.flat,
        }
    }

    /// The namespace enclosing the innermost branch (where a branch's named result goes).
    pub fn outer_ns(&mut self) -> &mut Namespace {
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

#[cfg(test)]
mod tests {
    use super::exclusive;

    #[test]
    fn only_different_arms_of_one_construct_are_exclusive() {
        assert!(exclusive(&[(1, 0)], &[(1, 1)]));
        assert!(exclusive(&[(1, 0), (2, 0)], &[(1, 1)]));
        assert!(!exclusive(&[(1, 0)], &[(1, 0)]));
        assert!(!exclusive(&[(1, 0)], &[(1, 0), (2, 1)]));
        assert!(!exclusive(&[], &[(1, 0)]));
        assert!(!exclusive(&[(1, 0)], &[(2, 0)]));
    }
}
