//! Lint levels: which warnings and relaxed rules are reported, and how.
//!
//! A code that [is a lint](Code::is_lint) has a level per file: allowed (not reported),
//! warned, or denied (an error). The level comes from, weakest first: the default
//! ([`Code::allowed_by_default`], and `--strict` denying relaxed rules), the `[lints]` tables
//! of the user's `prose.toml` and the nearest project's ([`config`]), then
//! `--allow`/`--warn`/`--deny` in the order given. A `# prose: allow(...)` comment
//! ([`inline`]) then silences codes for one statement. Errors that are not lints cannot be
//! silenced.

pub mod config;
pub mod inline;

use crate::diagnostics::{Code, CodeKind, Severity};

/// How a lint is reported: the level `[lints]` of `prose.toml` writes, defined once by the
/// settings' schema.
pub use prose_settings::LintLevel as Level;

/// Each code's level for one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Levels {
    levels: Vec<Level>,
}

impl Levels {
    /// The defaults: allowed-by-default codes allowed, other lints warned; with `strict`,
    /// relaxed rules denied.
    pub fn new(strict: bool) -> Levels {
        let levels = Code::ALL
            .iter()
            .map(|&c| match (c.kind(), strict) {
                (CodeKind::Relaxed, true) => Level::Deny,
                _ if c.allowed_by_default() => Level::Allow,
                _ => Level::Warn,
            })
            .collect();
        Levels { levels }
    }

    /// Sets the level of `code` (a lint; others keep their severity whatever is set).
    pub fn set(&mut self, code: Code, level: Level) {
        if code.is_lint() {
            self.levels[code as usize] = level;
        }
    }

    /// The severity `code` is reported with, or `None` when it is allowed.
    pub fn severity(&self, code: Code) -> Option<Severity> {
        if !code.is_lint() {
            return Some(code.default_severity());
        }
        match self.levels[code as usize] {
            Level::Allow => None,
            Level::Warn => Some(Severity::Warning),
            Level::Deny => Some(Severity::Error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_indices_follow_the_table() {
        for (i, &c) in Code::ALL.iter().enumerate() {
            assert_eq!(c as usize, i);
        }
    }

    #[test]
    fn defaults_strict_and_overrides() {
        let l = Levels::new(false);
        assert_eq!(l.severity(Code::E140), None);
        assert_eq!(l.severity(Code::E019), Some(Severity::Warning));
        assert_eq!(l.severity(Code::W104), None);
        assert_eq!(l.severity(Code::E007), Some(Severity::Error));
        let mut s = Levels::new(true);
        assert_eq!(s.severity(Code::E140), Some(Severity::Error));
        assert_eq!(s.severity(Code::W104), None);
        s.set(Code::E140, Level::Allow);
        s.set(Code::W108, Level::Deny);
        s.set(Code::E007, Level::Allow);
        assert_eq!(s.severity(Code::E140), None);
        assert_eq!(s.severity(Code::W108), Some(Severity::Error));
        assert_eq!(s.severity(Code::E007), Some(Severity::Error));
    }
}
