//! Where each name is written and what it stands for: recorded by analysis as it binds
//! names, for tools that navigate a program (the language server's definitions,
//! references, rename and highlighting). Code generation does not read it.

use crate::resolved::{AgentId, BlockId, VarId};
use crate::span::Span;

/// What a name stands for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A variable (inputs, outputs, parameters and loop variables included).
    Var(VarId),
    /// An agent.
    Agent(AgentId),
    /// A block.
    Block(BlockId),
    /// An imported program, by the name it is called by.
    Program(String),
}

/// One place a name is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    /// The name as written (for an interpolation, the root name inside the braces).
    pub span: Span,
    /// What it stands for.
    pub target: Target,
    /// Whether it declares the name (rather than using or assigning it).
    pub decl: bool,
}

/// Which side of an imported program's interface a name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContractSide {
    /// An input (`lib(topic: ...)`).
    Input,
    /// An output (`result.summary`, `{result.summary}`, `let {summary} = lib(...)`).
    Output,
}

/// A place a program names an input or output of a program it imports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContractRef {
    /// The name as written.
    pub span: Span,
    /// The imported program, by the name it is called by.
    pub program: String,
    /// Input or output.
    pub side: ContractSide,
    /// The input's or output's name.
    pub name: String,
}

/// Where a variable can be named: after `from`, in `region` (the body of the function or
/// construct whose namespace holds it, from its first statement to its last).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Visibility {
    /// The variable.
    pub var: VarId,
    /// Where it is first visible: the end of the statement that declares it, or the start of
    /// the body of the construct that binds it (a loop variable, a parameter).
    pub from: u32,
    /// The body its namespace covers (the whole file for the program's own namespace).
    pub region: Span,
}

/// Every name occurrence analysis bound, in the order it met them, and where each variable
/// can be named.
#[derive(Clone, Debug, Default)]
pub struct NameIndex {
    /// The occurrences.
    pub occurrences: Vec<Occurrence>,
    /// Where each variable can be named.
    pub visible: Vec<Visibility>,
    /// The bodies of blocks: every variable of the program's own namespace can be named in
    /// them, wherever it is declared (blocks run when called).
    pub block_bodies: Vec<Span>,
    /// The inputs and outputs of imported programs this file names.
    pub contract_refs: Vec<ContractRef>,
}

/// The region of the program's own namespace: the whole file.
pub const WHOLE_FILE: Span = Span {
    start: 0,
    end: u32::MAX,
};

impl NameIndex {
    pub(super) fn add(&mut self, span: Span, target: Target, decl: bool) {
        self.occurrences.push(Occurrence { span, target, decl });
    }

    pub(super) fn add_contract_ref(
        &mut self,
        span: Span,
        program: &str,
        side: ContractSide,
        name: &str,
    ) {
        self.contract_refs.push(ContractRef {
            span,
            program: program.to_string(),
            side,
            name: name.to_string(),
        });
    }

    /// The input or output of an imported program named at byte `offset` (its end
    /// included).
    pub fn contract_ref_at(&self, offset: usize) -> Option<&ContractRef> {
        self.contract_refs
            .iter()
            .find(|r| (r.span.start as usize) <= offset && offset <= r.span.end as usize)
    }

    pub(super) fn add_visible(&mut self, var: VarId, from: u32, region: Span) {
        self.visible.push(Visibility { var, from, region });
    }

    /// The innermost occurrence covering byte `offset` (its end included, so a cursor just
    /// after a name still finds it).
    pub fn at(&self, offset: usize) -> Option<&Occurrence> {
        self.occurrences
            .iter()
            .filter(|o| (o.span.start as usize) <= offset && offset <= o.span.end as usize)
            .min_by_key(|o| o.span.end - o.span.start)
    }

    /// Every occurrence of `target`, declarations first, each span once.
    pub fn of<'s>(&'s self, target: &Target) -> Vec<&'s Occurrence> {
        let mut all: Vec<&Occurrence> = self
            .occurrences
            .iter()
            .filter(|o| &o.target == target)
            .collect();
        all.sort_by_key(|o| (!o.decl, o.span.start));
        let mut seen = rustc_hash::FxHashSet::default();
        all.retain(|o| seen.insert(o.span));
        all
    }

    /// Where `target` is declared (its first declaration).
    pub fn decl_of(&self, target: &Target) -> Option<Span> {
        self.occurrences
            .iter()
            .find(|o| o.decl && &o.target == target)
            .map(|o| o.span)
    }
}
