//! Function listings: one line per instruction, with its operands resolved and the source
//! line it came from.

use super::operands::*;
use super::text::{bad, word};
use super::{Dis, COMMENT_COLUMN, INLINE_TEXT};
use crate::ids::*;
use crate::module::*;
use crate::op::*;

impl Dis<'_> {
    pub(super) fn function(&mut self, f: FuncId, func: &Function, lines: &[&str]) {
        self.line(
            1,
            format!(
                "function {f} {} ({}, params {}, registers {})",
                self.name(func.name),
                func_kind(func.kind),
                func.params,
                func.nregs
            ),
        );
        if !func.vars.is_empty() {
            let names: Vec<String> = func
                .vars
                .iter()
                .map(|(r, n, _)| format!("{}={r}", self.name(*n)))
                .collect();
            self.line(2, format!("vars: {}", names.join(", ")));
        }
        if func.locs.len() != func.code.len() {
            self.line(
                2,
                format!(
                    "<{} instructions but {} source positions>",
                    func.code.len(),
                    func.locs.len()
                ),
            );
        }
        let width = func.code.len().saturating_sub(1).to_string().len().max(4);
        let mut last_line = None;
        for (pc, op) in func.code.iter().enumerate() {
            let mut text = format!("    {pc:>width$}  {}", self.op(op));
            let comment = match func.locs.get(pc) {
                None => "; <no source position>".to_string(),
                Some(loc) if loc.line == 0 => String::new(),
                Some(loc) => {
                    let mut c = format!("; line {}", loc.line);
                    if last_line != Some(loc.line) {
                        last_line = Some(loc.line);
                        let src = (loc.line as usize)
                            .checked_sub(1)
                            .and_then(|i| lines.get(i))
                            .map(|l| l.trim())
                            .unwrap_or("");
                        if !src.is_empty() {
                            c.push_str(": ");
                            c.extend(src.chars().map(|ch| if ch.is_control() { ' ' } else { ch }));
                        }
                    }
                    c
                }
            };
            if !comment.is_empty() {
                let len = text.chars().count();
                let pad = COMMENT_COLUMN.saturating_sub(len).max(2);
                text.extend(std::iter::repeat_n(' ', pad));
                text.push_str(&comment);
            }
            self.out.push_str(&text);
            self.out.push('\n');
        }
    }

    /// One instruction, operands resolved.
    fn op(&self, op: &Op) -> String {
        let m = self.m;
        let lim = Some(INLINE_TEXT);
        let name = op.name();
        let operands = match op {
            Op::LoadConst { dst, c } => format!("{dst}, {}", self.constant(*c)),
            Op::Move { dst, src } | Op::Not { dst, src } | Op::Neg { dst, src } => {
                format!("{dst}, {src}")
            }
            Op::GetUp { dst, depth, reg } => format!("{dst}, {}", up(*depth, *reg)),
            Op::SetUp { depth, reg, src } => format!("{}, {src}", up(*depth, *reg)),
            Op::Format { dst, tpl } => format!("{dst}, {}", self.template(*tpl, lim)),
            Op::MakeList { dst, first, len } => format!("{dst}, {}", reg_list(*first, *len as u64)),
            Op::MakeRecord { dst, first, keys } => match m.keysets.get(*keys) {
                None => format!("{dst}, {} from {first}", bad(*keys)),
                Some(ks) => {
                    let base = first.as_u32() as u64;
                    let fields = ks
                        .iter()
                        .enumerate()
                        .map(|(i, k)| format!("{}: {}", self.name(*k), reg_n(base + i as u64)));
                    let fields = capped(fields, ks.len());
                    format!("{dst}, {keys} {{{}}}", &fields[1..fields.len() - 1])
                }
            },
            Op::Binary { op, dst, a, b } => format!("{dst}, {a} {} {b}", binop(*op)),
            Op::GetField { dst, src, name } => format!("{dst}, {src}, {}", self.string(*name, lim)),
            Op::GetIndex { dst, src, index } => format!("{dst}, {src}, {index}"),
            Op::Convert { dst, src, shape: s } => format!("{dst}, {src}, {}", shape(*s)),
            Op::Jump { target } => target.to_string(),
            Op::JumpIf { cond, target } | Op::JumpIfNot { cond, target } => {
                format!("{cond}, {target}")
            }
            Op::Switch { index, table } => match m.tables.get(*table) {
                None => format!("{index}, {}", bad(*table)),
                Some(ts) => {
                    let targets = capped(ts.iter().map(|t| t.to_string()), ts.len());
                    format!("{index}, {table} {targets}")
                }
            },
            Op::ForNext {
                list,
                counter,
                item,
                index,
                exit,
            } => {
                let mut s = format!("item={item}");
                if let Some(i) = index {
                    s.push_str(&format!(" index={i}"));
                }
                s.push_str(&format!(" list={list} counter={counter} exit={exit}"));
                s
            }
            Op::RepeatNext {
                count,
                counter,
                index,
                exit,
            } => {
                let mut s = format!("count={count} counter={counter}");
                if let Some(i) = index {
                    s.push_str(&format!(" index={i}"));
                }
                s.push_str(&format!(" exit={exit}"));
                s
            }
            Op::LoopNext {
                counter,
                max,
                index,
                exit,
            } => {
                let mut s = format!("counter={counter}");
                if let Some(mx) = max {
                    s.push_str(&format!(" max={mx}"));
                }
                if let Some(i) = index {
                    s.push_str(&format!(" index={i}"));
                }
                s.push_str(&format!(" exit={exit}"));
                s
            }
            Op::TryEnter {
                catch,
                finally,
                err,
                pending,
            } => {
                let target =
                    |t: &Option<Pc>| t.map_or_else(|| "none".to_string(), |t| t.to_string());
                format!(
                    "catch={} finally={} err={err} pending={pending}",
                    target(catch),
                    target(finally)
                )
            }
            Op::TryExit => String::new(),
            Op::EndFinally { pending } => pending.to_string(),
            Op::Throw { msg } => msg.to_string(),
            Op::Rethrow { err } => err.to_string(),
            Op::Assert { cond, msg } => match msg {
                Some(m) => format!("{cond} msg={m}"),
                None => cond.to_string(),
            },
            Op::Call {
                func,
                args,
                argc,
                dst,
            } => {
                format!(
                    "{dst}, {} args={} outputs={}",
                    self.func(*func),
                    reg_list(*args, *argc as u64),
                    reg_n(dst.as_u32() as u64 + 1)
                )
            }
            Op::Return { src } => src.to_string(),
            Op::SetBlockOutput { name, src } => format!("{}, {src}", self.name(*name)),
            Op::Invoke { prog, args, dst } => self.invoke(*prog, *args, *dst),
            Op::LoadInput { dst, input } => format!("{dst}, {}", self.input(*input)),
            Op::SetOutput { output, src } => format!("{}, {src}", self.output(*output)),
            Op::Session { dst, desc, ctx } => {
                let what = match m.sessions.get(*desc) {
                    None => bad(*desc),
                    Some(sd) => {
                        let mut s = desc.to_string();
                        if let Some(a) = sd.agent {
                            s.push_str(&format!(" {}", self.agent(a)));
                        }
                        if let Some(t) = sd.prompt {
                            s.push_str(&format!(" {}", self.template_text(t, lim)));
                        } else if let Some(l) = sd.label {
                            s.push_str(&format!(" {}", self.template_text(l, lim)));
                        }
                        s
                    }
                };
                format!("{dst}, {what} ctx={ctx}")
            }
            Op::Evaluate { dst, cond } => format!("{dst}, {}", self.template(*cond, lim)),
            Op::Choose { dst, choice } => match m.choices.get(*choice) {
                None => format!("{dst}, {}", bad(*choice)),
                Some(ch) => format!(
                    "{dst}, {choice} {} ({} options)",
                    self.template_text(ch.criteria, lim),
                    ch.options.len()
                ),
            },
            Op::Ask { dst, input } => {
                let mut s = format!("{dst}, {}", self.input(*input));
                if let Some(d) = m.inputs.get(*input).and_then(|i| i.description) {
                    s.push_str(&format!(" {}", self.template_text(d, lim)));
                }
                s
            }
            Op::Fork { fork, handle } => match m.forks.get(*fork) {
                None => format!("{handle}, {}", bad(*fork)),
                Some(fk) => {
                    let bs = capped(fk.branches.iter().map(|b| b.to_string()), fk.branches.len());
                    format!("{handle}, {fork} {} {bs}", strategy(fk.strategy))
                }
            },
            Op::ForkEach { fork, list, handle } => match m.forks.get(*fork) {
                None => format!("{handle}, {} list={list}", bad(*fork)),
                Some(fk) => {
                    let bs = capped(fk.branches.iter().map(|b| b.to_string()), fk.branches.len());
                    format!(
                        "{handle}, {fork} {} {bs} list={list}",
                        strategy(fk.strategy)
                    )
                }
            },
            Op::Join { handle, dst } => format!("{dst}, {handle}"),
        };
        if operands.is_empty() {
            name.to_string()
        } else {
            format!("{name} {operands}")
        }
    }

    /// `invoke dst, progN alias args=[name=r1, ...]`, naming the callee's parameters.
    fn invoke(&self, prog: ProgId, args: Reg, dst: Reg) -> String {
        let Some(p) = self.m.programs.get(prog) else {
            return format!("{dst}, {} args={args}", bad(prog));
        };
        let head = format!("{dst}, {prog} {}", self.name(p.alias));
        let Some(callee) = self.artifact.modules.get(p.module as usize) else {
            return format!("{head} <bad module {}> args={args}", p.module);
        };
        let base = args.as_u32() as u64;
        let names = self
            .params
            .get(p.module as usize)
            .map_or(&[][..], |v| &v[..]);
        let params = names.iter().enumerate().map(|(k, name)| {
            let n = match callee.strings.get(*name) {
                Some(n) => word(n),
                None => bad(*name),
            };
            format!("{n}={}", reg_n(base + k as u64))
        });
        format!("{head} args={}", capped(params, names.len()))
    }
}
