//! Instructions that ask: a session, a discretion condition, a choice, a mid-program input,
//! and a conversion the machine cannot do by itself. Each builds its request from the
//! module's tables and parks the fiber until the reply comes.

use super::{ix, misrouted, At, Flow, OpResult};
use crate::convert;
use crate::fiber::{Expect, Frame};
use crate::protocol::{
    shape_name, Ask, ChooseAsk, ConvertAsk, EvaluateAsk, InputAsk, Labelled, PermissionRule,
    SessionAsk,
};
use crate::trace::Event;
use crate::value::{ErrorValue, Value};
use crate::Machine;
use bytecode_spec::Code;
use bytecode_spec::{AgentTemplate, Const, Module, Op, PermissionValue, Persist, SessionKind};
use std::cell::RefMut;

impl Machine {
    pub(super) fn ask(&mut self, at: At, mut fr: RefMut<Frame>, op: &Op) -> OpResult {
        let (f, m) = (at.f, at.m);
        let max = self.limits.values.bytes;
        let written = |v: &Value, what: &str| v.render(max).map_err(|e| e.error(what));
        let (ask, dst, expect) = match op {
            Op::Convert { dst, src, shape } => match convert::local(&fr.regs[ix(*src)], *shape) {
                Some(v) => {
                    fr.regs[ix(*dst)] = v;
                    return Ok(Flow::Next);
                }
                // Nothing to convert: null is never sent to a model.
                None if fr.regs[ix(*src)] == Value::Null => {
                    return Err(ErrorValue::new(
                        Code::E204,
                        format!("cannot use null as {}", shape_name::name(*shape)),
                    ));
                }
                None => {
                    let text = written(&fr.regs[ix(*src)], "the value to convert")?;
                    (
                        Ask::Convert(ConvertAsk {
                            text,
                            shape: *shape,
                        }),
                        *dst,
                        Expect::Shape(*shape),
                    )
                }
            },
            Op::Session { dst, desc, ctx } => {
                let sd = &m.sessions[*desc];
                let context = match &fr.regs[ix(*ctx)] {
                    Value::List(items) => sd
                        .context_labels
                        .iter()
                        .zip(items.iter())
                        .map(|(l, v)| {
                            let label = m.strings[*l].as_str();
                            let text = written(v, &format!("context `{label}`"))?;
                            Ok(Labelled::new(label, text))
                        })
                        .collect::<Result<Vec<_>, ErrorValue>>()?,
                    _ => Vec::new(),
                };
                let permissions = sd
                    .permissions
                    .iter()
                    .map(|p| {
                        Ok(PermissionRule {
                            kind: m.strings[p.kind].clone(),
                            values: match &p.value {
                                PermissionValue::Word(w) => vec![m.strings[*w].clone()],
                                PermissionValue::Patterns(ts) => ts
                                    .iter()
                                    .map(|t| self.interpolate(&fr, m, *t))
                                    .collect::<Result<_, _>>()?,
                            },
                        })
                    })
                    .collect::<Result<Vec<_>, ErrorValue>>()?;
                let persistent = sd
                    .agent
                    .filter(|a| m.agents[*a].persist != Persist::None)
                    .map(|a| (fr.module, a));
                let mut resume = sd.kind == SessionKind::Resume;
                let memory = match persistent {
                    Some(key) => self.memory.get(&key).cloned(),
                    None => None,
                };
                if let Some(key) = persistent {
                    let name = &m.strings[m.agents[key.1].name];
                    match (resume, &memory) {
                        (true, None) if self.strict => {
                            return Err(ErrorValue::new(
                                Code::E018,
                                format!(
                                    "`resume: {name}` but {name} has no memory yet; use `session: {name}` for its first session"
                                ),
                            ));
                        }
                        (true, None) => {
                            self.warn(
                                Code::E018,
                                &fr,
                                format!(
                                    "`resume: {name}` but {name} has no memory yet (its first run?): starting a fresh session"
                                ),
                            );
                            resume = false;
                        }
                        (false, Some(_)) => self.warn(
                            Code::W011,
                            &fr,
                            format!(
                                "`session: {name}` starts fresh although {name} has memory; `resume: {name}` would continue from it"
                            ),
                        ),
                        _ => {}
                    }
                }
                let req = SessionAsk {
                    persistent: persistent.is_some(),
                    memory: memory.filter(|_| resume),
                    resume,
                    agent: sd.agent.map(|a| m.strings[m.agents[a].name].clone()),
                    label: sd.label.map(|t| self.interpolate(&fr, m, t)).transpose()?,
                    prompt: sd
                        .prompt
                        .map(|t| self.interpolate(&fr, m, t))
                        .transpose()?
                        .unwrap_or_default(),
                    system: sd.system.map(|t| self.interpolate(&fr, m, t)).transpose()?,
                    model: sd.model.map(|s| m.strings[s].clone()),
                    context,
                    permissions,
                    skills: sd.skills.iter().map(|s| m.strings[*s].clone()).collect(),
                    tools: Default::default(),
                    agent_tools: sd.agent.and_then(|a| agent_tools(m, &m.agents[a])),
                    retry: sd.retry,
                    backoff: sd.backoff,
                };
                if self.trace {
                    self.events.push(Event::Session {
                        id: self.next_id(f),
                        module: fr.module,
                        line: sd.line,
                        text: req.label.clone().unwrap_or_else(|| req.prompt.clone()),
                        agent: req.agent.clone(),
                        model: req.model.clone(),
                        exec: fr.exec,
                    });
                }
                (Ask::Session(req), *dst, Expect::Session(persistent))
            }
            Op::Evaluate { dst, cond } => {
                let condition = self.interpolate(&fr, m, *cond)?;
                self.events.push(Event::Evaluate {
                    condition: condition.clone(),
                });
                let context = self.judgment_context(f, &fr);
                (
                    Ask::Evaluate(EvaluateAsk { condition, context }),
                    *dst,
                    Expect::Bool,
                )
            }
            Op::Choose { dst, choice } => {
                let ch = &m.choices[*choice];
                let criteria = self.interpolate(&fr, m, ch.criteria)?;
                let options: Vec<String> = ch
                    .options
                    .iter()
                    .map(|o| self.interpolate(&fr, m, *o))
                    .collect::<Result<_, _>>()?;
                let n = options.len();
                let context = self.judgment_context(f, &fr);
                (
                    Ask::Choose(ChooseAsk {
                        criteria,
                        options,
                        context,
                    }),
                    *dst,
                    Expect::Choice(n),
                )
            }
            Op::Ask { dst, input } => {
                // A value given with the run (`--input`) answers at once; the request's id is
                // used all the same, so ids stay the same whether or not it was given.
                let given = fr.inst.borrow().inputs.get(&input.as_u32()).cloned();
                if let Some(v) = given {
                    self.fibers[f].seq += 1;
                    fr.regs[ix(*dst)] = v;
                    return Ok(Flow::Next);
                }
                let inp = &m.inputs[*input];
                let name = m.strings[inp.name].clone();
                let question = match inp.description {
                    Some(d) => self.interpolate(&fr, m, d)?,
                    None => name.clone(),
                };
                (Ask::Input(InputAsk { name, question }), *dst, Expect::Value)
            }
            other => return Err(misrouted(other)),
        };
        self.request(f, &fr, ask, dst, expect);
        Ok(Flow::Block)
    }

    /// What a condition or a choice is judged with besides its own text: the latest answer
    /// its fiber received, and where the innermost loop around it stands.
    fn judgment_context(&self, f: crate::fiber::FiberId, fr: &Frame) -> Vec<Labelled> {
        let mut context = Vec::with_capacity(2);
        if let Some(a) = self.fibers[f].last_answer.as_deref() {
            context.push(Labelled::new("latest answer", a));
        }
        if let Some(l) = self.frame_view(fr).loops.last() {
            let of = l
                .max
                .map(|m| format!(" of at most {m}"))
                .unwrap_or_default();
            context.push(Labelled::new(
                format!("{} at line {}", l.kind, l.line),
                format!("iteration {}{of}", l.iteration.max(1)),
            ));
        }
        context
    }
}

/// What `agent`'s `tools:` names, as the compiler keeps it among the agent's other
/// properties (`none`, `all`, or names joined with commas): the names, empty for `none`;
/// nothing when it says nothing, or `all`.
fn agent_tools(m: &Module, agent: &AgentTemplate) -> Option<Vec<String>> {
    let value = agent
        .extra
        .iter()
        .find_map(|(key, value)| (m.strings[*key] == "tools").then_some(&m.consts[*value]))?;
    let Const::Str(s) = value else { return None };
    match m.strings[*s].as_str() {
        "all" => None,
        "none" | "" => Some(Vec::new()),
        names => Some(names.split(',').map(str::to_string).collect()),
    }
}
