//! Building one function: its code, debug locations and registers.

use crate::span::Span;
use bytecode_spec::verify::{MAX_CODE, MAX_REGS};
use bytecode_spec::{FuncKind, Loc, Op, Pc, Reg};
use cranelift_entity::EntityRef;

/// Where a variable lives, seen from the function being built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarLoc {
    /// Static links to follow (0: this function's frame).
    pub depth: u8,
    /// The register in that frame.
    pub reg: Reg,
}

/// A function under construction.
pub struct FnBuilder {
    /// What it is for.
    pub kind: FuncKind,
    /// The code so far.
    pub code: Vec<Op>,
    /// One location per instruction.
    pub locs: Vec<Loc>,
    /// The location given to new instructions.
    pub loc: Loc,
    /// The source being lowered (for locating a function that grows too large).
    pub span: Span,
    /// Where the function first needed more registers or instructions than a function may
    /// have.
    pub too_large: Option<Span>,
    /// Registers used so far (variables never share a register; temporaries are reused).
    pub nregs: u32,
    free: Vec<Reg>,
    temps: Vec<Reg>,
    /// Every named variable's register (the function's debug table).
    pub names: Vec<(String, Reg, bytecode_spec::BindingKind)>,
}

impl FnBuilder {
    /// A new function with `params` parameters in registers `0..params`.
    pub fn new(kind: FuncKind, params: u32) -> FnBuilder {
        FnBuilder {
            kind,
            code: Vec::new(),
            locs: Vec::new(),
            loc: Loc::default(),
            span: Span::default(),
            too_large: (params > MAX_REGS).then_some(Span::default()),
            nregs: params,
            free: Vec::new(),
            temps: Vec::new(),
            names: Vec::new(),
        }
    }

    /// Appends an instruction; returns its pc.
    pub fn emit(&mut self, op: Op) -> Pc {
        self.code.push(op);
        self.locs.push(self.loc);
        if self.code.len() > MAX_CODE {
            self.too_large.get_or_insert(self.span);
        }
        (self.code.len() - 1) as Pc
    }

    /// `n` more registers.
    fn grow(&mut self, n: u32) -> Reg {
        let first = Reg::new(self.nregs as usize);
        self.nregs = self.nregs.saturating_add(n);
        if self.nregs > MAX_REGS {
            self.too_large.get_or_insert(self.span);
        }
        first
    }

    /// The pc the next instruction will have.
    pub fn here(&self) -> Pc {
        self.code.len() as Pc
    }

    /// A register for a variable, never reused.
    pub fn var_reg(&mut self) -> Reg {
        self.grow(1)
    }

    /// A temporary register, released by [`FnBuilder::release_to`].
    pub fn temp(&mut self) -> Reg {
        let r = match self.free.pop() {
            Some(r) => r,
            None => self.grow(1),
        };
        self.temps.push(r);
        r
    }

    /// `n` consecutive temporaries.
    pub fn temp_block(&mut self, n: u32) -> Reg {
        let first = self.grow(n);
        for i in 0..n {
            self.temps.push(Reg::new(first.index() + i as usize));
        }
        first
    }

    /// How many temporaries are live (a mark for [`FnBuilder::release_to`]).
    pub fn temp_mark(&self) -> usize {
        self.temps.len()
    }

    /// Releases the temporaries taken since `mark`.
    pub fn release_to(&mut self, mark: usize) {
        while self.temps.len() > mark {
            if let Some(r) = self.temps.pop() {
                self.free.push(r);
            }
        }
    }

    /// Patches the jump target of the instruction at `pc`.
    pub fn patch(&mut self, pc: Pc, target: Pc) {
        match &mut self.code[pc as usize] {
            Op::Jump { target: t }
            | Op::JumpIf { target: t, .. }
            | Op::JumpIfNot { target: t, .. }
            | Op::ForNext { exit: t, .. }
            | Op::RepeatNext { exit: t, .. }
            | Op::LoopNext { exit: t, .. } => *t = target,
            _ => {}
        }
    }
}
