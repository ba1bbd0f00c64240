//! Calls: blocks (`do name(args)`) and imported programs (`name(input: value)`).

use super::module::Lowerer;
use crate::resolved as r;
use bytecode_spec::{Op, ProgId, Reg};
use cranelift_entity::EntityRef;

impl<'a> Lowerer<'a> {
    /// The registers of call arguments (`null` for those not given).
    fn args(&mut self, args: &'a [Option<r::Expr>]) -> Vec<Reg> {
        args.iter()
            .map(|a| match a {
                Some(e) => self.expr(e),
                None => self.null(),
            })
            .collect()
    }

    pub(super) fn invoke(&mut self, inv: &'a r::Invoke) -> Reg {
        let values = self.args(&inv.args);
        let args = self.consecutive(&values);
        self.set_loc(inv.callee);
        let dst = self.temp();
        self.emit(Op::Invoke {
            prog: ProgId::new(inv.import.index()),
            args,
            dst,
        });
        dst
    }

    pub(super) fn call(&mut self, c: &'a r::Call) -> Reg {
        let Some(func) = self.block_funcs[c.block].expand() else {
            return self.null();
        };
        let values = self.args(&c.args);
        let args = self.consecutive(&values);
        self.set_loc(c.name);
        // The block's value, then a record of its named outputs.
        let dst = self.fb().temp_block(2);
        self.emit(Op::Call {
            func,
            args,
            argc: values.len() as u32,
            dst,
        });
        let named = Reg::new(dst.index() + 1);
        let p = self.p;
        let exports = c.exports.iter().filter(|(_, v)| p.vars[*v].read);
        for (name, var) in c.outputs.iter().chain(exports) {
            let key = self.s(name);
            let t = self.temp();
            self.emit(Op::GetField {
                dst: t,
                src: named,
                name: key,
            });
            self.write(*var, t);
        }
        dst
    }
}
