//! Block bodies, analysed after the program body (they see its variables), and the
//! variables each block returns to callers that read them after a call.

use super::scope::{Scopes, Var, VarKind};
use super::{Analyzer, Ctx};
use crate::ast::BlockDef;
use crate::diagnostics::{Code, Diagnostic};
use crate::resolved::{self as r, VarId};

impl<'a> Analyzer<'a> {
    pub(super) fn block_bodies(&mut self) {
        let mut defs: Vec<(r::BlockId, &'a BlockDef)> =
            self.blocks.values().map(|b| (b.id, b.def)).collect();
        defs.sort_by_key(|(id, _)| *id);
        for (id, def) in defs {
            let func = self.out.blocks[id].func;
            self.in_block = true;
            let region = super::extent(&def.body);
            self.index.block_bodies.push(region);
            self.scopes = Scopes::new(region);
            self.outputs.clear();
            self.catches.clear();
            self.arms.clear();
            self.scopes.push(region);
            let (params, body) = self.in_func(func, |a| {
                let params = def.params.iter().map(|p| a.param(p)).collect();
                (params, a.body(&def.body, Ctx::default(), "block"))
            });
            self.scopes.pop();
            self.block_ns
                .insert(id, std::mem::take(&mut self.scopes.flat));
            let block = &mut self.out.blocks[id];
            block.params = params;
            block.body = body;
            self.in_block = false;
        }
    }

    /// Declares a block parameter, warning when it shadows a program variable.
    fn param(&mut self, p: &crate::ast::Name) -> VarId {
        if let Some(outer) = self
            .globals
            .get(&p.text)
            .filter(|v| v.kind != VarKind::BlockVar)
        {
            let outer = outer.span;
            self.report(
                Diagnostic::new(
                    Code::W104,
                    self.file,
                    p.span,
                    format!("parameter `{}` shadows a program variable", p.text),
                )
                .with_secondary(outer, "declared here"),
            );
        }
        let id = self.new_var(Some(&p.text), self.func);
        self.index.add(p.span, super::index::Target::Var(id), true);
        let region = self.scopes.frame_region();
        self.index.add_visible(id, region.start, region);
        self.scopes.declare_scoped(
            &p.text,
            Var {
                kind: VarKind::Param,
                span: p.span,
                program: None,
                id,
                arms: Vec::new(),
            },
        );
        id
    }

    /// Each block returns the variables of its own namespace that some caller reads after
    /// calling it.
    pub(super) fn resolve_exports(&mut self) {
        let mut exported: Vec<(r::BlockId, Vec<String>)> =
            std::mem::take(&mut self.exported).into_iter().collect();
        exported.sort_by_key(|(id, _)| *id);
        for (id, names) in exported {
            let func = self.out.blocks[id].func;
            let Some(ns) = self.block_ns.get(&id) else {
                continue;
            };
            let exports = names
                .into_iter()
                .filter_map(|n| {
                    let v = ns.get(&n)?;
                    (self.out.vars[v.id].owner == func).then_some((n, v.id))
                })
                .collect();
            self.out.blocks[id].exports = exports;
        }
    }
}
