//! Building one function: its code, debug locations and registers.

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
    /// Registers used so far (variables never share a register; temporaries are reused).
    pub nregs: u32,
    free: Vec<Reg>,
    temps: Vec<Reg>,
    /// Every named variable's register (the function's debug table).
    pub names: Vec<(String, Reg)>,
}

impl FnBuilder {
    /// A new function with `params` parameters in registers `0..params`.
    pub fn new(kind: FuncKind, params: u32) -> FnBuilder {
        FnBuilder {
            kind,
            code: Vec::new(),
            locs: Vec::new(),
            loc: Loc::default(),
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
        (self.code.len() - 1) as Pc
    }

    /// The pc the next instruction will have.
    pub fn here(&self) -> Pc {
        self.code.len() as Pc
    }

    /// A register for a variable, never reused.
    pub fn var_reg(&mut self) -> Reg {
        let r = Reg::new(self.nregs as usize);
        self.nregs += 1;
        r
    }

    /// A temporary register, released by [`FnBuilder::release_to`].
    pub fn temp(&mut self) -> Reg {
        let r = self.free.pop().unwrap_or_else(|| {
            let r = Reg::new(self.nregs as usize);
            self.nregs += 1;
            r
        });
        self.temps.push(r);
        r
    }

    /// `n` consecutive temporaries.
    pub fn temp_block(&mut self, n: u32) -> Reg {
        let first = Reg::new(self.nregs as usize);
        self.nregs += n;
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
