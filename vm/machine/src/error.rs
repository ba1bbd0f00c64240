//! Runtime errors: a stable code (listed with the compiler's in `docs/diagnostics.md`), a
//! message, and where: the module by its index and its name (the import path for imported
//! programs, so two imports with one file name are told apart), the line, and that module's
//! own source line.

use crate::protocol::RequestId;
use bytecode_spec::Code;
use bytecode_spec::Module;

/// An error that ended the run, with where it happened.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeError {
    /// Its stable code.
    pub code: Code,
    /// What went wrong.
    pub message: String,
    /// The module's index in the artifact (0: the program run).
    pub module: u32,
    /// How the module is named: the program's file name, or an import's path.
    pub program: String,
    /// 1-based source line (0 if unknown).
    pub line: u32,
    /// The source line's text.
    pub statement: String,
    /// The request whose failure ended the run, if one did: a resumed run asks it again.
    pub request: Option<RequestId>,
}

impl RuntimeError {
    /// An error of the run rather than of a statement (the run store failing, say).
    pub fn unlocated(code: Code, message: impl Into<String>) -> RuntimeError {
        RuntimeError {
            code,
            message: message.into(),
            module: 0,
            program: String::new(),
            line: 0,
            statement: String::new(),
            request: None,
        }
    }
}

impl RuntimeError {
    /// An error located at line `line` of module `module` of `artifact` (quoting that
    /// line), found before the run starts (a skill no place has, say).
    pub fn at(
        artifact: &bytecode_spec::Artifact,
        module: u32,
        line: u32,
        code: Code,
        message: impl Into<String>,
    ) -> RuntimeError {
        let Some(m) = artifact.modules.get(module as usize) else {
            return RuntimeError::unlocated(code, message);
        };
        RuntimeError {
            code,
            message: message.into(),
            module,
            program: file_label(m),
            line,
            statement: source_line(&m.source, line),
            request: None,
        }
    }
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.program.is_empty() {
            write!(f, "[{}] {}", self.code, self.message)
        } else if self.line > 0 {
            write!(
                f,
                "{}:{}: [{}] {}\n    {}",
                self.program,
                self.line,
                self.code,
                self.message,
                self.statement.trim()
            )
        } else {
            write!(f, "{}: [{}] {}", self.program, self.code, self.message)
        }
    }
}

impl std::error::Error for RuntimeError {}

/// How a module is named in request sites: the program's name for the program run, the
/// import path (`@handle/slug` or `./lib/x.prose`) for an imported one.
pub fn site_label(m: &Module) -> String {
    if m.import_path.is_empty() {
        m.name.clone()
    } else {
        m.import_path.clone()
    }
}

/// How a module is named in errors: its file name (`name.prose`) for the program run, the
/// import path for an imported one.
pub fn file_label(m: &Module) -> String {
    if m.import_path.is_empty() {
        format!("{}.prose", m.name)
    } else {
        m.import_path.clone()
    }
}

/// Line `line` (1-based) of `source`, or nothing.
pub(super) fn source_line(source: &str, line: u32) -> String {
    line.checked_sub(1)
        .and_then(|i| source.lines().nth(i as usize))
        .unwrap_or_default()
        .to_string()
}
