//! Every diagnostic code the compiler (and, for the runtime-only ones, the VM) can report:
//! defined here, in the contract both share, so the VM need not depend on the compiler.
//!
//! Codes `E001`-`E028` and `W001`-`W011` are the language reference's own; `E1xx` and `W1xx`
//! are this toolchain's codes for the reference's unnumbered rules. `docs/diagnostics.md`
//! explains each one with an example. A code is stable: once published it keeps its meaning.

use serde::Serialize;

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Does not stop compilation unless `--deny-warnings`.
    Warning,
    /// Stops compilation.
    Error,
}

macro_rules! codes {
    ($( $name:ident => ($sev:ident, $kind:ident, $title:literal), )*) => {
        /// A stable diagnostic code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code {
            $( #[doc = $title] $name, )*
        }

        impl Code {
            /// Every code, in order.
            pub const ALL: &'static [Code] = &[ $( Code::$name, )* ];

            /// The code as written in diagnostics, e.g. `"E007"`.
            pub fn as_str(self) -> &'static str {
                match self { $( Code::$name => stringify!($name), )* }
            }

            /// The severity before `--strict` is applied.
            pub fn default_severity(self) -> Severity {
                match self { $( Code::$name => Severity::$sev, )* }
            }

            /// Whether the code is checked by the compiler, relaxed to a warning unless
            /// `--strict`, only found when compiling to bytecode, or only detected at run
            /// time by the VM.
            pub fn kind(self) -> CodeKind {
                match self { $( Code::$name => CodeKind::$kind, )* }
            }

            /// A one-line description of the rule.
            pub fn title(self) -> &'static str {
                match self { $( Code::$name => $title, )* }
            }

            /// The code written as `text` (`"E007"`, or `"e007"`).
            pub fn parse(text: &str) -> Option<Code> {
                $( if text.eq_ignore_ascii_case(stringify!($name)) { return Some(Code::$name); } )*
                None
            }
        }
    };
}

/// Where and how a code is enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeKind {
    /// Checked by the compiler with its default severity.
    Static,
    /// An error in the reference that real programs break routinely (real-world-syntax.md):
    /// reported as a warning unless `--strict`.
    Relaxed,
    /// Only knowable while a program runs: reported by the VM.
    Runtime,
    /// Only found when the program is compiled to bytecode (`prosec build`).
    Build,
    /// Found in a test or eval file of a program (`NAME.test.toml`, `NAME.eval.toml`), when
    /// `prosec check` checks it.
    Suite,
}

codes! {
    E001 => (Error, Static, "unterminated string literal"),
    E002 => (Error, Static, "unknown escape sequence in string"),
    E003 => (Error, Static, "session has neither a prompt nor an agent"),
    E004 => (Error, Static, "unexpected token"),
    E005 => (Error, Static, "invalid syntax"),
    E006 => (Error, Static, "duplicate agent definition"),
    E007 => (Error, Static, "undefined agent"),
    E008 => (Error, Static, "invalid model value"),
    E009 => (Error, Static, "duplicate property"),
    E010 => (Error, Static, "duplicate use statement"),
    E011 => (Error, Static, "empty use path"),
    E012 => (Error, Static, "invalid use path"),
    E013 => (Error, Static, "skills must be an array"),
    E014 => (Error, Static, "skill name must be a string"),
    E015 => (Error, Static, "permissions must be a block"),
    E016 => (Error, Static, "permission pattern must be a string"),
    E017 => (Error, Static, "`resume:` needs a persistent agent"),
    E018 => (Error, Runtime, "`resume:` with no memory yet"),
    E019 => (Error, Relaxed, "variable declared twice"),
    E020 => (Error, Static, "empty input name"),
    E021 => (Error, Static, "duplicate input declaration"),
    E022 => (Error, Relaxed, "input after executable statements"),
    E023 => (Error, Static, "empty output name"),
    E024 => (Error, Relaxed, "output bound more than once"),
    E025 => (Error, Static, "unknown program in invocation"),
    E026 => (Error, Static, "missing required input"),
    E027 => (Error, Static, "unknown input name in invocation"),
    E028 => (Error, Static, "unknown output of an invoked program"),
    E101 => (Error, Static, "two imports share one name"),
    E102 => (Error, Relaxed, "output name conflicts with a variable"),
    E103 => (Error, Static, "invalid persist value"),
    E104 => (Error, Static, "const reassigned"),
    E105 => (Error, Static, "undefined variable"),
    E106 => (Error, Static, "variable name conflicts with an agent"),
    E107 => (Error, Static, "context element is not a variable reference"),
    E108 => (Error, Static, "undefined block"),
    E109 => (Error, Static, "duplicate block definition"),
    E110 => (Error, Static, "block name conflicts with an agent"),
    E111 => (Error, Static, "block definition without a name"),
    E112 => (Error, Static, "invalid join strategy"),
    E113 => (Error, Static, "invalid on-fail policy"),
    E114 => (Error, Static, "count without the \"any\" strategy"),
    E115 => (Error, Static, "count less than 1"),
    E116 => (Error, Static, "unknown modifier"),
    E117 => (Error, Static, "repeat count must be positive"),
    E118 => (Error, Static, "repeat count must be an integer"),
    E119 => (Error, Static, "max iterations must be positive"),
    E120 => (Error, Static, "max iterations must be an integer"),
    E121 => (Error, Static, "empty discretion condition"),
    E122 => (Error, Static, "invalid pipe operator"),
    E123 => (Error, Static, "reduce without accumulator and item names"),
    E124 => (Error, Static, "try without catch or finally"),
    E125 => (Error, Static, "retry count must be positive"),
    E126 => (Error, Static, "retry count must be an integer"),
    E127 => (Error, Static, "invalid backoff strategy"),
    E128 => (Error, Static, "choice without options"),
    E129 => (Error, Static, "elif without if"),
    E130 => (Error, Static, "else without if"),
    E131 => (Error, Static, "more than one else"),
    E132 => (Error, Static, "tab in indentation"),
    E133 => (Error, Static, "unterminated discretion marker"),
    E134 => (Error, Static, "invalid character"),
    E135 => (Error, Static, "source is not valid UTF-8"),
    E136 => (Error, Static, "number out of range"),
    E137 => (Error, Static, "properties on something that is not a session"),
    E138 => (Error, Static, "imported program not found"),
    E139 => (Error, Static, "import cycle"),
    E140 => (Error, Relaxed, "interpolated name is not a variable"),
    E141 => (Error, Static, "only imported programs can be called"),
    E142 => (Error, Static, "duplicate parameter name"),
    E143 => (Error, Static, "program invocation arguments must be named"),
    E144 => (Error, Static, "invalid property value"),
    E145 => (Error, Static, "program nests too deeply"),
    E146 => (Error, Relaxed, "block variable read after the call"),
    E147 => (Error, Static, "invalid setting in prose.toml"),
    E148 => (Error, Build, "program too large to compile"),
    E149 => (Error, Build, "imported skill not found"),
    E150 => (Error, Build, "no such ref or version"),
    E151 => (Error, Build, "fetched content does not match its integrity"),
    E152 => (Error, Build, "offline and not cached"),
    E153 => (Error, Build, "prose.lock would change under --locked"),
    E154 => (Error, Build, "skill cannot be bundled"),
    E155 => (Error, Build, "fetching failed"),
    E156 => (Error, Static, "misspelt property that decides what an agent may do"),
    E157 => (Error, Static, "condition branch with an empty body"),
    E158 => (Error, Suite, "test names an input the program does not declare"),
    E159 => (Error, Suite, "test names an output the program does not bind"),
    E160 => (Error, Suite, "test or eval file does not read"),
    E200 => (Error, Runtime, "missing input"),
    E201 => (Error, Runtime, "unknown input name"),
    E202 => (Error, Runtime, "error thrown by the program"),
    E203 => (Error, Runtime, "assertion failed"),
    E204 => (Error, Runtime, "operation on the wrong kind of value"),
    E205 => (Error, Runtime, "index out of range"),
    E206 => (Error, Runtime, "integer overflow"),
    E207 => (Error, Runtime, "runaway loop"),
    E208 => (Error, Runtime, "calls nest too deeply"),
    E209 => (Error, Runtime, "too many parallel branches"),
    E210 => (Error, Runtime, "request failed"),
    E211 => (Error, Runtime, "too few parallel branches succeeded"),
    E212 => (Error, Runtime, "answer does not fit the question"),
    E213 => (Error, Runtime, "value too large"),
    E214 => (Error, Runtime, "run store failure"),
    E215 => (Error, Runtime, "internal error"),
    E216 => (Error, Runtime, "run interrupted"),
    E217 => (Error, Runtime, "run paused at its budget"),
    E218 => (Error, Runtime, "frames need too much memory"),
    E219 => (Error, Runtime, "skill not found"),
    E220 => (Error, Runtime, "run waits for a person's input or approval"),
    W001 => (Warning, Static, "empty session prompt"),
    W002 => (Warning, Static, "whitespace-only session prompt"),
    W003 => (Warning, Static, "session prompt longer than 10,000 characters"),
    W004 => (Warning, Static, "empty prompt property"),
    W005 => (Warning, Static, "unknown property"),
    W006 => (Warning, Static, "unknown import source format"),
    W007 => (Warning, Static, "skill not imported"),
    W008 => (Warning, Static, "unknown permission type"),
    W009 => (Warning, Static, "unknown permission value"),
    W010 => (Warning, Static, "empty skills array"),
    W011 => (Warning, Runtime, "`session:` on a persistent agent that has memory"),
    W200 => (Warning, Runtime, "a null value interpolated as empty text"),
    W201 => (Warning, Runtime, "the memo could not be read or written"),
    W101 => (Warning, Static, "empty input description"),
    W102 => (Warning, Static, "retry or backoff on an agent definition"),
    W103 => (Warning, Static, "argument count differs from the block's parameters"),
    W104 => (Warning, Static, "parameter shadows an outer variable"),
    W105 => (Warning, Static, "count exceeds the number of branches"),
    W106 => (Warning, Static, "loop variable shadows an outer variable"),
    W107 => (Warning, Static, "loop without a condition or max"),
    W108 => (Warning, Static, "conditional loop without max"),
    W109 => (Warning, Static, "very short discretion condition"),
    W110 => (Warning, Static, "pipeline variable shadows an outer variable"),
    W111 => (Warning, Static, "error variable shadows an outer variable"),
    W112 => (Warning, Static, "empty throw message"),
    W113 => (Warning, Static, "unusually high retry count"),
    W114 => (Warning, Static, "duplicate option label"),
    W115 => (Warning, Static, "empty option body"),
    W116 => (Warning, Static, "empty body"),
    W117 => (Warning, Static, "assignment declares a new variable"),
    W118 => (Warning, Static, "provider-specific model name"),
    W119 => (Warning, Static, "registry import not resolved"),
    W120 => (Warning, Static, "invalid lint comment"),
    W121 => (Warning, Static, "permission pattern computed at run time"),
    W122 => (Warning, Static, "interpolation names a misspelt variable"),
    W123 => (Warning, Static, "field not in the record"),
}

impl Code {
    /// Whether the code's level can be chosen (`--allow`, `--warn`, `--deny`, `[lints]` in
    /// `prose.toml`, `# prose: allow(...)`): warnings and relaxed rules. Errors always
    /// stop compilation, and runtime codes are the VM's.
    pub fn is_lint(self) -> bool {
        match self.kind() {
            CodeKind::Relaxed => true,
            CodeKind::Static => self.default_severity() == Severity::Warning,
            CodeKind::Runtime | CodeKind::Build | CodeKind::Suite => false,
        }
    }

    /// Whether the code is silent unless asked for: rules that published programs break on
    /// purpose so often that reporting them would bury the warnings worth acting on.
    /// `{placeholder}` text meant for the model (E140), questions asked mid-program (E022)
    /// and block parameters named like program variables (W104). `--strict` reports E140
    /// and E022 again, as errors.
    pub fn allowed_by_default(self) -> bool {
        matches!(self, Code::E022 | Code::E140 | Code::W104)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_parse_back() {
        for &code in Code::ALL {
            assert_eq!(Code::parse(code.as_str()), Some(code));
            assert_eq!(Code::parse(&code.as_str().to_lowercase()), Some(code));
        }
        assert_eq!(Code::parse("E999"), None);
        assert!(Code::E140.is_lint() && Code::W104.is_lint());
        assert!(!Code::E007.is_lint() && !Code::W011.is_lint());
        assert!(Code::ALL
            .iter()
            .all(|c| !c.allowed_by_default() || c.is_lint()));
    }

    #[test]
    fn codes_are_unique_and_prefixed_by_severity() {
        let mut seen = std::collections::HashSet::new();
        for &code in Code::ALL {
            assert!(seen.insert(code.as_str()), "{code} twice");
            let prefix = match code.default_severity() {
                Severity::Error => 'E',
                Severity::Warning => 'W',
            };
            assert!(
                code.as_str().starts_with(prefix),
                "{code} has the wrong prefix"
            );
        }
    }
}
