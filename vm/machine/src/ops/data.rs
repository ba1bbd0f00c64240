//! Moving and computing values: constants, registers (here and in enclosing frames),
//! templates, lists and records, arithmetic and comparison, member access.

use super::{ix, misrouted, type_error, At, Flow, OpResult};
use crate::convert;
use crate::fiber::FrameRef;
use crate::fiber::{up, Frame};
use crate::value::{Bounds, ErrorValue, Exceeded, Value, ENTRY_BYTES};
use crate::Machine;
use bytecode_spec::Code;
use bytecode_spec::{BinOp, Const, Module, Op, PathStep, Shape, TplId, TplPart};
use std::cell::RefMut;
use std::rc::Rc;
use std::sync::Arc;

fn overflow() -> ErrorValue {
    ErrorValue::new(Code::E206, "integer overflow")
}

impl Machine {
    pub(super) fn data(&mut self, at: At, mut fr: RefMut<Frame>, op: &Op) -> OpResult {
        let m = at.m;
        match op {
            Op::LoadConst { dst, c } => {
                fr.regs[ix(*dst)] = match &m.consts[*c] {
                    Const::Null => Value::Null,
                    Const::Bool(b) => Value::Bool(*b),
                    Const::Int(i) => Value::Int(*i),
                    Const::Float(x) => Value::Float(*x),
                    Const::Str(s) => Value::text(m.strings[*s].as_str()),
                };
            }
            Op::Move { dst, src } => {
                let v = fr.regs[ix(*src)].clone();
                if self.trace {
                    let line = m.funcs[fr.func].locs[fr.pc as usize - 1].line;
                    let instance = fr.inst.borrow().exec;
                    self.note_binding((fr.module, fr.func, fr.exec, instance), *dst, line, &v)?;
                }
                fr.regs[ix(*dst)] = v;
            }
            Op::GetUp { dst, depth, reg } => {
                let target = enclosing(&fr, *depth)?;
                let v = target.borrow().regs[ix(*reg)].clone();
                fr.regs[ix(*dst)] = v;
            }
            Op::SetUp { depth, reg, src } => {
                let v = fr.regs[ix(*src)].clone();
                let target = enclosing(&fr, *depth)?;
                if self.trace {
                    let line = m.funcs[fr.func].locs[fr.pc as usize - 1].line;
                    let t = target.borrow();
                    let at = (t.module, t.func, t.exec, t.inst.borrow().exec);
                    drop(t);
                    self.note_binding(at, *reg, line, &v)?;
                }
                target.borrow_mut().regs[ix(*reg)] = v;
            }
            Op::Format { dst, tpl } => {
                let s = self.interpolate(&fr, m, *tpl)?;
                fr.regs[ix(*dst)] = Value::text(s);
            }
            Op::MakeList { dst, first, len } => {
                let items = fr.regs[ix(*first)..ix(*first) + *len as usize].to_vec();
                let list = Value::List(Arc::new(items));
                list.within(self.limits.values)
                    .map_err(|e| e.error("the list"))?;
                fr.regs[ix(*dst)] = list;
            }
            Op::MakeRecord { dst, first, keys } => {
                let keys = &m.keysets[*keys];
                let pairs = keys
                    .iter()
                    .enumerate()
                    .map(|(i, k)| {
                        (
                            Arc::from(m.strings[*k].as_str()),
                            fr.regs[ix(*first) + i].clone(),
                        )
                    })
                    .collect();
                let record = Value::record(pairs);
                record
                    .within(self.limits.values)
                    .map_err(|e| e.error("the record"))?;
                fr.regs[ix(*dst)] = record;
            }
            Op::Binary { op, dst, a, b } => {
                let v = match op {
                    BinOp::Add => {
                        // Take the left operand when it is overwritten, so a list can grow in
                        // place. Only a list: appending to one cannot fail, and a failed `add`
                        // must leave the variable as it was (a `catch` may read it).
                        let left = if dst == a && matches!(fr.regs[ix(*a)], Value::List(_)) {
                            std::mem::take(&mut fr.regs[ix(*a)])
                        } else {
                            fr.regs[ix(*a)].clone()
                        };
                        let right = fr.regs[ix(*b)].clone();
                        add(left, &right, self.limits.values)?
                    }
                    BinOp::Sub => subtract(&fr.regs[ix(*a)], &fr.regs[ix(*b)])?,
                    cmp => Value::Bool(compare(
                        *cmp,
                        &fr.regs[ix(*a)],
                        &fr.regs[ix(*b)],
                        self.limits.values,
                    )?),
                };
                fr.regs[ix(*dst)] = v;
                // `x = x + [e]` updates the variable in place, without a move to note it.
                if self.trace && dst == a {
                    let line = m.funcs[fr.func].locs[fr.pc as usize - 1].line;
                    let instance = fr.inst.borrow().exec;
                    let place = (fr.module, fr.func, fr.exec, instance);
                    drop(fr);
                    self.note_update(at.frame, place, *dst, line);
                }
            }
            Op::Not { dst, src } => match &fr.regs[ix(*src)] {
                Value::Bool(b) => fr.regs[ix(*dst)] = Value::Bool(!b),
                v => {
                    return Err(type_error(format!(
                        "`not` needs a boolean, not {}",
                        v.kind()
                    )))
                }
            },
            Op::Neg { dst, src } => match convert::local(&fr.regs[ix(*src)], Shape::Int) {
                Some(Value::Int(i)) => {
                    fr.regs[ix(*dst)] = Value::Int(i.checked_neg().ok_or_else(overflow)?)
                }
                _ => {
                    return Err(type_error(format!(
                        "cannot negate {}",
                        fr.regs[ix(*src)].kind()
                    )))
                }
            },
            Op::GetField { dst, src, name } => {
                let v = match &fr.regs[ix(*src)] {
                    Value::Record(_) => fr.regs[ix(*src)]
                        .field(&m.strings[*name])
                        .cloned()
                        .unwrap_or(Value::Null),
                    Value::Error(e) if m.strings[*name] == "message" => {
                        Value::text(e.message.as_str())
                    }
                    Value::Null => Value::Null,
                    v => {
                        return Err(type_error(format!(
                            "cannot read field `{}` of {}",
                            m.strings[*name],
                            v.kind()
                        )))
                    }
                };
                fr.regs[ix(*dst)] = v;
            }
            Op::GetIndex { dst, src, index } => {
                let v = match (&fr.regs[ix(*src)], &fr.regs[ix(*index)]) {
                    (Value::List(l), Value::Int(i)) => {
                        let i = if *i < 0 { l.len() as i64 + i } else { *i };
                        l.get(i as usize).cloned().ok_or_else(|| {
                            ErrorValue::new(
                                Code::E205,
                                format!("index {i} is out of range for a list of {}", l.len()),
                            )
                        })?
                    }
                    (rec @ Value::Record(_), Value::Text(k)) => {
                        rec.field(k).cloned().unwrap_or(Value::Null)
                    }
                    (a, b) => {
                        return Err(type_error(format!(
                            "cannot index {} with {}",
                            a.kind(),
                            b.kind()
                        )))
                    }
                };
                fr.regs[ix(*dst)] = v;
            }
            other => return Err(misrouted(other)),
        }
        Ok(Flow::Next)
    }

    /// Records a binding event when `reg` of function `func` (in module `module`, frame
    /// execution id `exec`, in the invocation `instance`) is a named variable; `line` is the
    /// assigning statement's. Fails when the value is too large to write out.
    fn note_binding(
        &mut self,
        at: (u32, bytecode_spec::FuncId, u32, u32),
        reg: bytecode_spec::Reg,
        line: u32,
        value: &Value,
    ) -> Result<(), ErrorValue> {
        let (module, func, exec, instance) = at;
        let m = &self.artifact.modules[module as usize];
        let vars = &m.funcs[func].vars;
        if let Ok(i) = vars.binary_search_by_key(&reg, |(r, _, _)| *r) {
            let (_, name, kind) = vars[i];
            let name = &m.strings[name];
            let value = value
                .render(self.limits.values.bytes)
                .map_err(|e| e.error(&format!("the value of `{name}` written out")))?;
            self.events.push(crate::trace::Event::Binding {
                name: name.clone(),
                kind,
                value,
                module,
                line,
                scope: exec,
                instance,
            });
        }
        Ok(())
    }
}

impl Machine {
    /// Notes that named variable `reg` of `frame` (in `place`: module, function, execution
    /// id, invocation) was updated in place by the statement at `line`. Updates are
    /// coalesced: one binding event per variable until the events are taken, its value
    /// written out then, so appending in a loop costs no copy and no rendering per element.
    fn note_update(
        &mut self,
        frame: &FrameRef,
        place: (u32, bytecode_spec::FuncId, u32, u32),
        reg: bytecode_spec::Reg,
        line: u32,
    ) {
        let (module, func, exec, instance) = place;
        let m = &self.artifact.modules[module as usize];
        let vars = &m.funcs[func].vars;
        let Ok(i) = vars.binary_search_by_key(&reg, |(r, _, _)| *r) else {
            return;
        };
        if self
            .updated
            .iter()
            .any(|(_, f, r)| *r == reg && Rc::ptr_eq(f, frame))
        {
            return;
        }
        self.updated.push((self.events.len(), frame.clone(), reg));
        self.events.push(crate::trace::Event::Binding {
            name: m.strings[vars[i].1].clone(),
            kind: vars[i].2,
            value: String::new(),
            module,
            line,
            scope: exec,
            instance,
        });
    }
}

/// The frame `depth` (at least 1) static links out of `fr`.
fn enclosing(fr: &Frame, depth: u8) -> Result<crate::fiber::FrameRef, ErrorValue> {
    let missing = || ErrorValue::new(Code::E215, "no enclosing frame");
    let link = fr.link.clone().ok_or_else(missing)?;
    up(&link, depth - 1).ok_or_else(missing)
}

/// Template `tpl` of module `m` rendered with `fr`'s variables; fails (E213) if the text
/// would be longer than `max` bytes. A null value (a variable never bound, a missing field)
/// interpolates as nothing, never as the word `null`; the name of the first such variable
/// comes back too, for a warning.
pub(crate) fn render(
    fr: &Frame,
    m: &Module,
    tpl: TplId,
    max: usize,
) -> Result<(String, Option<String>), ErrorValue> {
    let too_long = || Exceeded::Bytes(max).error("the text");
    let mut out = String::new();
    let mut null = None;
    for part in &m.templates[tpl].parts {
        let room = max.saturating_sub(out.len());
        match part {
            TplPart::Text(s) => {
                let s = &m.strings[*s];
                if s.len() > room {
                    return Err(too_long());
                }
                out.push_str(s);
            }
            TplPart::Var {
                depth,
                reg,
                path,
                name,
            } => {
                let v = if *depth == 0 {
                    fr.regs[ix(*reg)].clone()
                } else {
                    enclosing(fr, *depth)
                        .map(|t| t.borrow().regs[ix(*reg)].clone())
                        .unwrap_or_default()
                };
                match follow(v, path, m) {
                    Value::Null => {
                        null.get_or_insert_with(|| {
                            let mut n = m.strings[*name].clone();
                            for step in path {
                                match step {
                                    PathStep::Field(f) => {
                                        n.push('.');
                                        n.push_str(&m.strings[*f]);
                                    }
                                    PathStep::Index(i) => n.push_str(&format!("[{i}]")),
                                }
                            }
                            n
                        });
                    }
                    v => out.push_str(&v.render(room).map_err(|_| too_long())?),
                }
            }
        }
    }
    Ok((out, null))
}

impl Machine {
    /// Template `tpl` rendered with `fr`'s variables, within the value size limit (E213
    /// beyond); a null value interpolated is empty text, with warning W200 for the
    /// statement (once).
    pub(crate) fn interpolate(
        &mut self,
        fr: &Frame,
        m: &Module,
        tpl: TplId,
    ) -> Result<String, ErrorValue> {
        let (text, null) = render(fr, m, tpl, self.limits.values.bytes)?;
        if let Some(name) = null {
            self.warn(
                Code::W200,
                fr,
                format!("`{{{name}}}` is null here: it is left out of the text"),
            );
        }
        Ok(text)
    }
}

/// `v` followed along a member path (null where a step finds nothing).
fn follow(v: Value, path: &[PathStep], m: &Module) -> Value {
    let mut v = v;
    for step in path {
        let src = convert::local(
            &v,
            match step {
                PathStep::Field(_) => Shape::Record,
                PathStep::Index(_) => Shape::List,
            },
        )
        .unwrap_or(Value::Null);
        v = match (step, &src) {
            (PathStep::Field(f), Value::Record(_)) => {
                src.field(&m.strings[*f]).cloned().unwrap_or(Value::Null)
            }
            (PathStep::Index(i), Value::List(l)) => {
                l.get(*i as usize).cloned().unwrap_or(Value::Null)
            }
            _ => Value::Null,
        };
    }
    v
}

fn compare(op: BinOp, a: &Value, b: &Value, bounds: Bounds) -> Result<bool, ErrorValue> {
    use std::cmp::Ordering;
    let num = |v: &Value| match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::Text(t) => t.trim().parse::<f64>().ok(),
        _ => None,
    };
    if matches!(op, BinOp::Eq | BinOp::Ne) {
        let eq = match (num(a), num(b)) {
            (Some(x), Some(y)) if !(matches!(a, Value::Text(_)) && matches!(b, Value::Text(_))) => {
                x == y
            }
            _ => match (a, b) {
                (Value::Text(x), Value::Text(y)) => x.trim() == y.trim(),
                _ => a
                    .equals(b, bounds.bytes / ENTRY_BYTES)
                    .ok_or_else(|| Exceeded::Bytes(bounds.bytes).error("comparing them"))?,
            },
        };
        return Ok(if op == BinOp::Eq { eq } else { !eq });
    }
    let ord = match (num(a), num(b)) {
        (Some(x), Some(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        _ => match (a, b) {
            (Value::Text(x), Value::Text(y)) => x.cmp(y),
            _ => {
                return Err(type_error(format!(
                    "cannot compare {} with {}",
                    a.kind(),
                    b.kind()
                )))
            }
        },
    };
    Ok(match op {
        BinOp::Lt => ord == Ordering::Less,
        BinOp::Le => ord != Ordering::Greater,
        BinOp::Gt => ord == Ordering::Greater,
        _ => ord != Ordering::Less,
    })
}

/// `a + b`: numbers add, lists append (in place when `a` is not shared), text concatenates
/// with the other side's text; the result stays within `bounds`.
fn add(a: Value, b: &Value, bounds: Bounds) -> Result<Value, ErrorValue> {
    let max = bounds.bytes;
    let text = |t: &str, other: &Value, left: bool| -> Result<Value, ErrorValue> {
        let too_long = || Exceeded::Bytes(max).error("the text");
        let room = max.checked_sub(t.len()).ok_or_else(too_long)?;
        let other = other.render(room).map_err(|_| too_long())?;
        Ok(Value::text(if left {
            format!("{t}{other}")
        } else {
            format!("{other}{t}")
        }))
    };
    Ok(match (a, b) {
        (Value::Int(x), Value::Int(y)) => Value::Int(x.checked_add(*y).ok_or_else(overflow)?),
        (Value::Int(x), Value::Float(y)) => Value::Float(x as f64 + y),
        (Value::Float(x), Value::Int(y)) => Value::Float(x + *y as f64),
        (Value::Float(x), Value::Float(y)) => Value::Float(x + y),
        (Value::List(mut l), other) => {
            let added = match other {
                Value::List(more) => more.len(),
                x => {
                    // The element nests one level down in the list.
                    let inner = Bounds {
                        depth: bounds.depth.saturating_sub(1),
                        ..bounds
                    };
                    x.within(inner).map_err(|e| e.error("the list"))?;
                    1
                }
            };
            if (l.len() + added).saturating_mul(ENTRY_BYTES) > max {
                return Err(Exceeded::Bytes(max).error("the list"));
            }
            // In place when nothing else holds the list (appends in loops stay linear).
            let v = Arc::make_mut(&mut l);
            match other {
                Value::List(more) => v.extend(more.iter().cloned()),
                x => v.push(x.clone()),
            }
            Value::List(l)
        }
        (Value::Null, Value::List(l)) => Value::List(l.clone()),
        (Value::Text(t), other) => text(&t, other, true)?,
        (other, Value::Text(t)) => text(t, &other, false)?,
        (a, b) => {
            return Err(type_error(format!(
                "cannot add {} and {}",
                a.kind(),
                b.kind()
            )))
        }
    })
}

fn subtract(a: &Value, b: &Value) -> Result<Value, ErrorValue> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Ok(Value::Int(x.checked_sub(*y).ok_or_else(overflow)?)),
        (x, y) => match (convert::local(x, Shape::Int), convert::local(y, Shape::Int)) {
            (Some(Value::Int(x)), Some(Value::Int(y))) => {
                Ok(Value::Int(x.checked_sub(y).ok_or_else(overflow)?))
            }
            _ => Err(type_error(format!(
                "cannot subtract {} from {}",
                y.kind(),
                x.kind()
            ))),
        },
    }
}
