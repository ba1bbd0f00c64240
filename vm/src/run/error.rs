//! Why a run cannot start or resume.

use prose_machine::RuntimeError;
use prose_store::StoreError;

/// Why a run cannot start or resume.
#[derive(Debug)]
pub enum RunError {
    /// The run directory or its files.
    Store(StoreError),
    /// The program refuses these inputs (a missing or unknown input).
    Program(RuntimeError),
    /// The program's sessions cannot be equipped (an MCP server that does not start).
    Setup(String),
    /// A statement's sessions cannot be equipped (a skill no place has): where, and what
    /// to do about it.
    Unequipped(Box<Unequipped>),
    /// Keys are trusted and the artifact is not signed by one of them (or was altered
    /// since): it is refused before anything runs or is written.
    Untrusted(String),
}

impl RunError {
    /// The error's stable code, where it has one (a refused input's, a missing skill's
    /// E219).
    pub fn code(&self) -> Option<bytecode_spec::Code> {
        match self {
            RunError::Program(e) => Some(e.code),
            RunError::Unequipped(u) => Some(u.error.code),
            RunError::Store(_) | RunError::Setup(_) | RunError::Untrusted(_) => None,
        }
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Store(e) => e.fmt(f),
            RunError::Program(e) => e.fmt(f),
            RunError::Setup(e) => f.write_str(e),
            RunError::Unequipped(u) => write!(f, "{}\n  help: {}", u.error, u.help),
            RunError::Untrusted(why) => write!(
                f,
                "refused to run: {why}; only artifacts signed by a trusted key run here \
                 (--trust, PROSE_TRUST, [trust] keys in prose.toml)"
            ),
        }
    }
}

impl std::error::Error for RunError {}

impl From<StoreError> for RunError {
    fn from(e: StoreError) -> RunError {
        RunError::Store(e)
    }
}

impl From<prose_store::pg::PgError> for RunError {
    fn from(e: prose_store::pg::PgError) -> RunError {
        RunError::Store(e.into())
    }
}

/// A statement whose sessions cannot be equipped (a skill no place has): where, and what
/// to do about it.
#[derive(Debug)]
pub struct Unequipped {
    /// The error, located at the statement.
    pub error: RuntimeError,
    /// What to do about it.
    pub help: String,
}
