//! `prosec check` of test and eval files: each is read, its program compiled, and every name
//! and check in it checked against the program, so that a case naming an input the program
//! does not declare (E158) or an output it does not bind (E159), or a check, an answer
//! source or a dataset row that does not read (E160), is an error located in the file,
//! before anything runs.

use super::dataset::{self, Row};
use super::eval::{self, EvalFile};
use super::spec::{self, Case, Check, CheckText, Expect, TestFile};
use super::{EVAL_SUFFIX, TEST_SUFFIX};
use crate::compile::{Compilation, LoadError};
use crate::diagnostics::{closest, Code, Diagnostic};
use crate::source::FileId;
use crate::span::Span;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// What a program declares, as a test or an eval may name it.
#[derive(Debug, Default)]
pub struct Declared {
    /// Inputs given before it runs, and those asked mid-program.
    pub inputs: Vec<String>,
    /// Named outputs.
    pub outputs: Vec<String>,
}

/// Whether `path` is a test file or an eval file, by its name.
pub fn is_suite_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(TEST_SUFFIX) || n.ends_with(EVAL_SUFFIX))
}

/// The program a test or eval file at `path` names (`named`, relative to the file), else
/// the `.prose` file of the same name beside it (`hello.test.toml` tests `hello.prose`).
pub fn program_path(path: &Path, named: Option<&str>) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new(""));
    match named {
        Some(p) => dir.join(p),
        None => {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let stem = name
                .strip_suffix(TEST_SUFFIX)
                .or_else(|| name.strip_suffix(EVAL_SUFFIX))
                .unwrap_or(name);
            dir.join(format!("{stem}.prose"))
        }
    }
}

/// The statuses a run can end with, as a test names them.
pub const STATUSES: [&str; 5] = ["finished", "failed", "waiting", "paused", "interrupted"];

/// Checks the test or eval file at `path`, adding its text to `c`'s sources and what is
/// wrong with it to `c`'s diagnostics (the program it names is compiled into `c` too, with
/// its own diagnostics). Fails only when the file cannot be read.
pub fn check_file(c: &mut Compilation, path: &Path) -> Result<(), LoadError> {
    check_file_recording(c, path, false)
}

/// [`check_file`], for a run that records tapes anew (`recording`): a tape that is not
/// there yet is then no error.
pub fn check_file_recording(
    c: &mut Compilation,
    path: &Path,
    recording: bool,
) -> Result<(), LoadError> {
    let bytes = std::fs::read(path).map_err(|e| LoadError::Io(path.to_path_buf(), e))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let file = c.sources.add(path.display().to_string(), text.clone());
    let mut at = Checker {
        c,
        file,
        dir: path.parent().unwrap_or(Path::new("")).to_path_buf(),
        recording,
    };
    let is_eval = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(EVAL_SUFFIX));
    if is_eval {
        match eval::parse(&text) {
            Ok(f) => at.eval(path, &f),
            Err((message, span)) => at.unreadable(message, span),
        }
    } else {
        match spec::parse(&text) {
            Ok(f) => at.tests(path, &f),
            Err((message, span)) => at.unreadable(message, span),
        }
    }
    Ok(())
}

struct Checker<'c> {
    c: &'c mut Compilation,
    file: FileId,
    dir: PathBuf,
    /// Tapes are being recorded anew: a missing one will be made.
    recording: bool,
}

fn span_of(r: std::ops::Range<usize>) -> Span {
    Span::new(r.start, r.end)
}

impl Checker<'_> {
    fn report(&mut self, code: Code, span: Span, message: String, help: Option<String>) {
        let mut d = Diagnostic::new(code, self.file, span, message);
        d.help = help;
        self.c.diagnostics.push(d);
    }

    fn invalid(&mut self, span: Span, message: String) {
        self.report(Code::E160, span, message, None);
    }

    fn unreadable(&mut self, message: String, span: Option<std::ops::Range<usize>>) {
        let span = span.map_or(Span::new(0, 0), span_of);
        self.invalid(span, message);
    }

    /// What the program at `program` (named at `named`'s span, if named) declares, compiled
    /// into the compilation; `None` (reported) when it cannot be found or read.
    fn declared(&mut self, program: &Path, named: Option<&Spanned<String>>) -> Option<Declared> {
        let span = named.map_or(Span::new(0, 0), |n| span_of(n.span()));
        if !program.is_file() {
            self.report(
                Code::E160,
                span,
                format!("the program `{}` is not there", program.display()),
                Some(match named {
                    Some(_) => "name it relative to this file".into(),
                    None => "give `program = \"FILE.prose\"`, or name this file after the program"
                        .into(),
                }),
            );
            return None;
        }
        if program.extension().is_some_and(|x| x == "pbc") {
            return match std::fs::read(program)
                .map_err(|e| e.to_string())
                .and_then(|b| bytecode_spec::artifact::load(&b).map_err(|e| e.to_string()))
            {
                Ok((_, verified)) => {
                    let m = &verified.modules[0];
                    Some(Declared {
                        inputs: m
                            .inputs
                            .values()
                            .map(|i| m.strings[i.name].clone())
                            .collect(),
                        outputs: m
                            .outputs
                            .values()
                            .map(|o| m.strings[o.name].clone())
                            .collect(),
                    })
                }
                Err(e) => {
                    self.invalid(
                        span,
                        format!("the artifact `{}` does not load: {e}", program.display()),
                    );
                    None
                }
            };
        }
        match self.c.add_file(program) {
            Ok(m) => {
                let contract = &self.c.modules[m].analysis.contract;
                Some(Declared {
                    inputs: contract
                        .inputs
                        .iter()
                        .chain(&contract.asked)
                        .cloned()
                        .collect(),
                    outputs: contract.outputs.clone(),
                })
            }
            Err(e) => {
                self.invalid(span, e.to_string());
                None
            }
        }
    }

    fn tests(&mut self, path: &Path, f: &TestFile) {
        let program = program_path(path, f.program.as_ref().map(|p| p.get_ref().as_str()));
        let declared = self.declared(&program, f.program.as_ref());
        let mut names: Vec<&str> = Vec::new();
        for case in &f.tests {
            let name = case.name.get_ref().as_str();
            if names.contains(&name) {
                self.invalid(
                    span_of(case.name.span()),
                    format!("two tests are named `{name}`"),
                );
            }
            names.push(name);
            self.case(case, declared.as_ref());
        }
    }

    fn case(&mut self, case: &Case, declared: Option<&Declared>) {
        if let Some(d) = declared {
            for input in case.inputs.keys() {
                self.input(input.get_ref(), span_of(input.span()), d);
            }
        }
        for path in case.files.keys() {
            self.relative(path);
        }
        let answers = &case.answers;
        let tape = answers.tape.as_ref().filter(|_| !self.recording);
        for source in [tape, answers.script.as_ref()].into_iter().flatten() {
            if !self.dir.join(source.get_ref()).is_file() {
                self.report(
                    Code::E160,
                    span_of(source.span()),
                    format!("`{}` is not there", source.get_ref()),
                    Some(
                        "name it relative to this file (`prosevm test --record` makes a tape)"
                            .into(),
                    ),
                );
            }
        }
        if let (Some(_), Some(script)) = (&answers.tape, &answers.script) {
            self.invalid(
                span_of(script.span()),
                "answers come from a tape or a mock script, not both".into(),
            );
        }
        if let Some(cond) = &answers.conditions {
            let ok = matches!(cond.get_ref().as_str(), "true" | "false")
                || cond
                    .get_ref()
                    .strip_prefix("after:")
                    .is_some_and(|n| n.parse::<u32>().is_ok());
            if !ok {
                self.invalid(
                    span_of(cond.span()),
                    format!(
                        "`conditions` is true, false or after:N, not `{}`",
                        cond.get_ref()
                    ),
                );
            }
        }
        self.expect(&case.expect, declared, None);
    }

    /// Checks `expect`; with `row`, its texts are the row's filled in.
    fn expect(&mut self, expect: &Expect, declared: Option<&Declared>, row: Option<&Row>) {
        if let Some(status) = &expect.status {
            if !STATUSES.contains(&status.get_ref().as_str()) {
                self.invalid(
                    span_of(status.span()),
                    format!(
                        "`{}` is not how a run ends ({})",
                        status.get_ref(),
                        STATUSES.join(", ")
                    ),
                );
            }
        }
        for (output, check) in &expect.outputs {
            if let Some(d) = declared {
                self.output(output.get_ref(), span_of(output.span()), d);
            }
            self.check(check, row);
        }
        for (path, check) in &expect.files {
            self.relative(path);
            self.check(check, row);
        }
        if let Some(check) = &expect.error {
            self.check(check, row);
        }
    }

    fn check(&mut self, check: &CheckText, row: Option<&Row>) {
        let value = match row {
            Some(r) => r.fill_value(check.get_ref()),
            None => check.get_ref().clone(),
        };
        if let Err(e) = Check::read(&value) {
            self.invalid(span_of(check.span()), e);
        }
    }

    fn relative(&mut self, path: &Spanned<String>) {
        let p = Path::new(path.get_ref());
        let escapes = p.is_absolute()
            || p.components()
                .any(|c| matches!(c, std::path::Component::ParentDir));
        if escapes || path.get_ref().is_empty() {
            self.invalid(
                span_of(path.span()),
                format!(
                    "`{}` is not a path inside the run's working directory",
                    path.get_ref()
                ),
            );
        }
    }

    fn input(&mut self, name: &str, span: Span, d: &Declared) {
        if !d.inputs.iter().any(|i| i == name) {
            let help = match closest(name, d.inputs.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `{s}`?"),
                None if d.inputs.is_empty() => "the program declares no input".into(),
                None => format!("its inputs: {}", d.inputs.join(", ")),
            };
            self.report(
                Code::E158,
                span,
                format!("the program declares no input `{name}`"),
                Some(help),
            );
        }
    }

    fn output(&mut self, name: &str, span: Span, d: &Declared) {
        if !d.outputs.iter().any(|o| o == name) {
            let help = match closest(name, d.outputs.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `{s}`?"),
                None if d.outputs.is_empty() => "the program binds no named output".into(),
                None => format!("its outputs: {}", d.outputs.join(", ")),
            };
            self.report(
                Code::E159,
                span,
                format!("the program binds no output `{name}`"),
                Some(help),
            );
        }
    }

    fn eval(&mut self, path: &Path, f: &EvalFile) {
        let program = program_path(path, f.program.as_ref().map(|p| p.get_ref().as_str()));
        let declared = self.declared(&program, f.program.as_ref());
        if f.tries == 0 {
            self.invalid(Span::new(0, 0), "`tries` is at least 1".into());
        }
        for j in &f.judges {
            if let Some(d) = &declared {
                self.output(j.output.get_ref(), span_of(j.output.span()), d);
            }
            let (lo, hi) = j.bounds();
            if hi <= lo {
                self.invalid(
                    span_of(j.name.span()),
                    format!("judge `{}`: its scale is empty", j.name.get_ref()),
                );
            }
        }
        let dataset = self.dir.join(f.dataset.get_ref());
        let rows = match std::fs::read_to_string(&dataset) {
            Ok(text) => {
                let csv = dataset.extension().is_some_and(|x| x == "csv");
                dataset::parse(&text, csv).map_err(|e| (e, text))
            }
            Err(e) => {
                self.invalid(
                    span_of(f.dataset.span()),
                    format!("the dataset cannot be read: {e}"),
                );
                return;
            }
        };
        let rows = match rows {
            Ok(rows) => rows,
            Err((e, text)) => {
                let (file, span) = self.line_of(&dataset, text, e.line);
                let mut d = Diagnostic::new(Code::E160, file, span, e.message);
                d.help = Some(format!("row {} of the dataset", e.line));
                self.c.diagnostics.push(d);
                return;
            }
        };
        if rows.is_empty() {
            self.invalid(span_of(f.dataset.span()), "the dataset has no rows".into());
        }
        // The eval's checks, filled in for each row, and each row's own.
        for row in &rows {
            self.expect(&f.expect, declared.as_ref(), Some(row));
        }
        let Some(d) = declared else { return };
        let text = std::fs::read_to_string(&dataset).unwrap_or_default();
        let mut dataset_file = None;
        for row in &rows {
            let unknown: Vec<&String> = row
                .inputs
                .keys()
                .filter(|k| !d.inputs.contains(k))
                .collect();
            let bad_outputs: Vec<String> = row
                .expect
                .iter()
                .flat_map(|e| e.outputs.keys().map(|k| k.get_ref().clone()))
                .filter(|k| !d.outputs.contains(k))
                .collect();
            if unknown.is_empty() && bad_outputs.is_empty() {
                continue;
            }
            let (file, span) = match dataset_file {
                Some(f) => (f, self.line_span(f, row.line)),
                None => {
                    let (f, s) = self.line_of(&dataset, text.clone(), row.line);
                    dataset_file = Some(f);
                    (f, s)
                }
            };
            for name in unknown {
                let mut diag = Diagnostic::new(
                    Code::E158,
                    file,
                    span,
                    format!("{}: the program declares no input `{name}`", row.name),
                );
                diag.help = closest(name, d.inputs.iter().map(String::as_str))
                    .map(|s| format!("did you mean `{s}`?"));
                self.c.diagnostics.push(diag);
            }
            for name in bad_outputs {
                self.c.diagnostics.push(Diagnostic::new(
                    Code::E159,
                    file,
                    span,
                    format!("{}: the program binds no output `{name}`", row.name),
                ));
            }
        }
    }

    /// The dataset at `path` added to the sources, and the span of its line `line`.
    fn line_of(&mut self, path: &Path, text: String, line: usize) -> (FileId, Span) {
        let file = self.c.sources.add(path.display().to_string(), text);
        (file, self.line_span(file, line))
    }

    fn line_span(&self, file: FileId, line: usize) -> Span {
        let text = &self.c.sources.get(file).text;
        let start: usize = text
            .split_inclusive('\n')
            .take(line.saturating_sub(1))
            .map(str::len)
            .sum();
        let end = text[start.min(text.len())..]
            .find('\n')
            .map_or(text.len(), |i| start + i);
        Span::new(start.min(text.len()), end)
    }
}
