//! A module's header and tables: agents, sessions, choices, forks, inputs and outputs,
//! imports, templates and constants.

use super::operands::*;
use super::text::{bad, quoted, word};
use super::Dis;
use crate::module::*;

impl Dis<'_> {
    pub(super) fn module(&mut self, mi: usize) {
        let m = self.m;
        let origin = if m.import_path.is_empty() {
            if mi == 0 {
                "main program".to_string()
            } else {
                "no import path".to_string()
            }
        } else {
            format!("imported as {}", quoted(&m.import_path, false, None))
        };
        self.line(0, format!("module {mi} {} ({origin})", word(&m.name)));
        let entry = self.func(m.entry);
        self.line(1, format!("entry {entry}"));
        self.agents();
        self.sessions();
        self.choices();
        self.forks();
        self.inputs();
        if !m.outputs.is_empty() {
            self.line(1, "outputs:");
            for o in m.outputs.keys() {
                let text = self.output(o);
                self.line(2, text);
            }
        }
        if !m.programs.is_empty() {
            self.line(1, "programs:");
            for (p, prog) in m.programs.iter() {
                let target = match self.artifact.modules.get(prog.module as usize) {
                    Some(callee) => format!("module {} {}", prog.module, word(&callee.name)),
                    None => format!("<bad module {}>", prog.module),
                };
                let text = format!("{p} {} -> {target}", self.name(prog.alias));
                self.line(2, text);
            }
        }
        if !m.skills.is_empty() {
            self.line(1, "skills:");
            for import in &m.skills {
                let target = match self.artifact.skills.get(import.skill as usize) {
                    Some(skill) => format!("skill {} {}", import.skill, word(&skill.name)),
                    None => bad(format!("skill {}", import.skill)),
                };
                let text = format!("{} -> {target}", self.name(import.name));
                self.line(2, text);
            }
        }
        if !m.templates.is_empty() {
            self.line(1, "templates:");
            for (t, tpl) in m.templates.iter() {
                let text = format!("{t} {}{}", self.template_text(t, None), self.bindings(tpl));
                self.line(2, text);
            }
        }
        let lines: Vec<&str> = m.source.lines().collect();
        for (f, func) in m.funcs.iter() {
            self.out.push('\n');
            self.function(f, func, &lines);
        }
    }

    fn agents(&mut self) {
        let m = self.m;
        if m.agents.is_empty() {
            return;
        }
        self.line(1, "agents:");
        for (a, ag) in m.agents.iter() {
            let head = self.agent(a);
            self.line(2, head);
            if let Some(model) = ag.model {
                let text = format!("model: {}", self.name(model));
                self.line(3, text);
            }
            if let Some(prompt) = ag.prompt {
                let text = format!("prompt: {}", self.string(prompt, None));
                self.line(3, text);
            }
            let persist = match ag.persist {
                Persist::None => None,
                Persist::Run => Some("run".to_string()),
                Persist::Project => Some("project".to_string()),
                Persist::User => Some("user".to_string()),
                Persist::Path(p) => Some(format!("path {}", self.string(p, None))),
            };
            if let Some(p) = persist {
                self.line(3, format!("persist: {p}"));
            }
            if !ag.skills.is_empty() {
                let text = format!("skills: {}", self.names(&ag.skills));
                self.line(3, text);
            }
            if !ag.permissions.is_empty() {
                let text = format!("permissions: {}", self.permissions(&ag.permissions));
                self.line(3, text);
            }
            if !ag.extra.is_empty() {
                let extra: Vec<String> = ag
                    .extra
                    .iter()
                    .map(|(k, c)| format!("{}={}", self.name(*k), self.constant(*c)))
                    .collect();
                self.line(3, format!("extra: {}", extra.join(", ")));
            }
        }
    }

    fn sessions(&mut self) {
        let m = self.m;
        if m.sessions.is_empty() {
            return;
        }
        self.line(1, "sessions:");
        for (s, sd) in m.sessions.iter() {
            let mut head = format!(
                "{s} {}",
                match sd.kind {
                    SessionKind::Fresh => "session",
                    SessionKind::Resume => "resume",
                }
            );
            if let Some(a) = sd.agent {
                head.push_str(&format!(", agent {}", self.agent(a)));
            }
            if let Some(l) = sd.label {
                head.push_str(&format!(", label {}", self.template(l, None)));
            }
            head.push_str(&format!(", line {}", sd.line));
            self.line(2, head);
            if let Some(t) = sd.prompt {
                let text = format!("prompt: {}", self.template(t, None));
                self.line(3, text);
            }
            if let Some(t) = sd.system {
                let text = format!("system: {}", self.template(t, None));
                self.line(3, text);
            }
            if let Some(model) = sd.model {
                let text = format!("model: {}", self.name(model));
                self.line(3, text);
            }
            if !sd.context_labels.is_empty() {
                let text = format!("context: {}", self.names(&sd.context_labels));
                self.line(3, text);
            }
            if !sd.permissions.is_empty() {
                let text = format!("permissions: {}", self.permissions(&sd.permissions));
                self.line(3, text);
            }
            if !sd.skills.is_empty() {
                let text = format!("skills: {}", self.names(&sd.skills));
                self.line(3, text);
            }
            if sd.retry != 0 || sd.backoff != Backoff::None {
                self.line(
                    3,
                    format!("retry: {}, backoff {}", sd.retry, backoff(sd.backoff)),
                );
            }
        }
    }

    fn choices(&mut self) {
        let m = self.m;
        if m.choices.is_empty() {
            return;
        }
        self.line(1, "choices:");
        for (c, ch) in m.choices.iter() {
            let head = format!("{c} {}", self.template(ch.criteria, None));
            self.line(2, head);
            for (i, o) in ch.options.iter().enumerate() {
                let text = format!("option {i}: {}", self.template(*o, None));
                self.line(3, text);
            }
        }
    }

    fn forks(&mut self) {
        let m = self.m;
        if m.forks.is_empty() {
            return;
        }
        self.line(1, "forks:");
        for (f, fk) in m.forks.iter() {
            self.line(
                2,
                format!(
                    "{f} {}, count {}, on-fail {}",
                    strategy(fk.strategy),
                    fk.count,
                    on_fail(fk.on_fail)
                ),
            );
            for (i, b) in fk.branches.iter().enumerate() {
                let mut text = format!("branch {i}: {}", self.func(*b));
                match fk.names.get(i) {
                    Some(Some(n)) => text.push_str(&format!(", assigns {}", self.name(*n))),
                    Some(None) => {}
                    None => text.push_str(", <no name entry>"),
                }
                self.line(3, text);
            }
            if fk.names.len() > fk.branches.len() {
                let extra = fk.names.len() - fk.branches.len();
                self.line(3, format!("<{extra} name entries without a branch>"));
            }
        }
    }

    fn inputs(&mut self) {
        let m = self.m;
        if m.inputs.is_empty() {
            return;
        }
        self.line(1, "inputs:");
        for (i, inp) in m.inputs.iter() {
            let mut text = format!(
                "{} {}",
                self.input(i),
                if inp.parameter {
                    "parameter"
                } else {
                    "mid-program"
                }
            );
            if let Some(d) = inp.description {
                text.push_str(&format!(" {}", self.template(d, None)));
            }
            self.line(2, text);
        }
    }
}
