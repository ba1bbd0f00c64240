//! Sessions and agents: the descriptors a driver receives.

use super::module::Lowerer;
use crate::resolved as r;
use crate::span::Span;
use bytecode_spec as bc;
use bytecode_spec::{AgentId, Op, Reg};
use cranelift_entity::EntityRef;

impl<'a> Lowerer<'a> {
    /// The agent table's entry for an agent definition.
    pub(super) fn agent_template(&mut self, a: &r::Agent) -> bc::AgentTemplate {
        let name = self.s(&a.name);
        let model = a.model.as_deref().map(|m| self.s(m));
        let prompt = a.prompt.as_deref().map(|p| self.s(p));
        let persist = match &a.persist {
            r::Persist::None => bc::Persist::None,
            r::Persist::Run => bc::Persist::Run,
            r::Persist::Project => bc::Persist::Project,
            r::Persist::User => bc::Persist::User,
            r::Persist::Path(p) => bc::Persist::Path(self.s(p)),
        };
        let skills = a.skills.iter().map(|s| self.s(s)).collect();
        let permissions = self.permissions(&a.permissions);
        let extra = a
            .extra
            .iter()
            .map(|(key, value)| {
                let c = self.literal(value);
                (self.s(key), c)
            })
            .collect();
        bc::AgentTemplate {
            name,
            model,
            prompt,
            persist,
            skills,
            permissions,
            extra,
        }
    }

    fn permissions(&mut self, rules: &[r::Permission]) -> Vec<bc::Permission> {
        rules
            .iter()
            .map(|p| bc::Permission {
                kind: self.s(&p.kind),
                value: match &p.value {
                    r::PermissionValue::Word(w) => bc::PermissionValue::Word(self.s(w)),
                    r::PermissionValue::Patterns(ps) => {
                        bc::PermissionValue::Patterns(ps.iter().map(|t| self.template(t)).collect())
                    }
                },
            })
            .collect()
    }

    pub(super) fn session(&mut self, s: &'a r::Session, span: Span) -> Reg {
        // Context values first (they are read before the session starts).
        let mut values = Vec::with_capacity(s.context.len());
        for (_, value) in &s.context {
            let r = match value {
                r::ContextValue::Expr(e) => self.expr(e),
                r::ContextValue::Agent(id) => {
                    // An agent named as context: its description.
                    let text = self.p.agents[*id].prompt.as_deref().unwrap_or_default();
                    let c = self.const_str(text);
                    self.load_const(c)
                }
            };
            values.push(r);
        }
        let inherited = if s.inherit {
            self.inherited_here()
        } else {
            None
        };
        values.extend(inherited.map(|(reg, _)| reg));
        let ctx = self.make_list(&values);
        self.set_loc(span);
        let agent = s.agent.map(|a| AgentId::new(a.index()));
        let label = s.label.as_ref().map(|t| self.template(t));
        let prompt = s.prompt.as_ref().map(|t| self.template(t));
        let system = s.system.as_ref().map(|t| self.template(t));
        let model = match &s.model {
            Some(m) => Some(self.s(m)),
            None => agent.and_then(|id| self.m.agents[id].model),
        };
        let permissions = self.permissions(&s.permissions);
        let skills = match &s.skills {
            Some(skills) => skills.iter().map(|k| self.s(k)).collect(),
            None => agent
                .map(|id| self.m.agents[id].skills.clone())
                .unwrap_or_default(),
        };
        let mut context_labels: Vec<bc::StrId> = s.context.iter().map(|(l, _)| self.s(l)).collect();
        context_labels.extend(inherited.map(|(_, label)| label));
        let line = self.line(span);
        let desc = self.m.sessions.push(bc::SessionDesc {
            kind: match s.kind {
                r::SessionKind::Session => bc::SessionKind::Fresh,
                r::SessionKind::Resume => bc::SessionKind::Resume,
            },
            agent,
            label,
            prompt,
            system,
            model,
            context_labels,
            permissions,
            skills,
            retry: s.retry,
            backoff: s.backoff,
            line,
        });
        let dst = self.temp();
        self.emit(Op::Session { dst, desc, ctx });
        dst
    }
}
