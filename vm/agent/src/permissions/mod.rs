//! What a session's tools may touch: the agent's `permissions:` as a [`Policy`], checked by a
//! [`Sandbox`] before any tool reads, writes, runs a command or connects anywhere.
//!
//! # The model
//!
//! - **Paths.** A path argument is relative to the working directory; an absolute one is
//!   accepted only inside it (or inside a skill's directory, for reading). A `..` component is
//!   refused outright. The path is then made canonical (for a file that does not exist yet, its
//!   nearest existing ancestor is), so a symbolic link that leads outside the working directory
//!   is refused, for reading and for writing alike. The protected places
//!   ([`super::protected`]) are out of reach whatever the policy says: the run state (`.prose/`
//!   and the state directory: journals, bindings, agent memory) is neither readable nor
//!   writable, and no `prose.toml`, nothing in a `.git/` and none of the program's files is
//!   writable.
//! - **`read` / `write` / `execute`** take glob patterns matched against the canonical path
//!   relative to the working directory (see [`PatternSet`]). Without a `read` (or `write`) rule
//!   the agent may read (or write) anything inside the working directory.
//! - **`bash` / `network`** take `allow`, `deny` or `prompt`. Without a rule they are refused,
//!   unless the user allowed them ([`UserAllow`]). The user's allowance also turns `prompt` into
//!   `allow`; an explicit `deny` always wins. `prompt` asks a person through a [`crate::people::Prompter`]; an
//!   "always" answer holds for the rest of the session (the sandbox's lifetime) for that
//!   capability; with no one to ask the call is refused (a durable run waits for an answer
//!   from outside instead: the runtime's `approvals`).
//! - **`execute`** lets a command run even when `bash` is not allowed, provided the command is a
//!   plain invocation of a file matching an execute pattern: its program (first word) is
//!   written as a path (it contains a `/`, as in `./test.sh` or `scripts/check`) and is not a
//!   variable assignment (`X=p/a.sh`), and the command has no shell metacharacters
//!   (`; | & $ > < \` ' " \ ( ) { }` or a newline). No shell is involved: the file itself is
//!   run ([`Invocation::Exec`]) with the other words as literal arguments (`*` or `~` are not
//!   expanded).
//! - **Commands** (`bash`, and files run through `execute`) run inside an OS sandbox
//!   ([`super::confine`]) that confines their writes to the agent's write paths and keeps
//!   the protected places ([`super::protected`]) read-only or hidden. Where no sandbox can be
//!   set up they are refused, unless the user allowed unsandboxed commands
//!   ([`UserAllow::unsandboxed_bash`]).
//!
//! Every check produces a [`Decision`] record, so the trace can show what was allowed or
//! refused, and why.

mod policy;
mod sandbox;

pub use crate::checked::CheckedPath;
pub use crate::protected::STATE_DIR;
pub use policy::*;
pub use sandbox::*;

#[cfg(test)]
mod tests {
    use super::*;
    use prose_machine::protocol::Capability;
    use std::path::Path;

    fn set(patterns: &[&str]) -> PatternSet {
        PatternSet::new(patterns).unwrap()
    }

    #[test]
    fn name_patterns_match_at_any_depth() {
        let s = set(&["*.md"]);
        assert!(s.is_match(Path::new("README.md")));
        assert!(s.is_match(Path::new("docs/guide/intro.md")));
        assert!(!s.is_match(Path::new("src/main.rs")));
    }

    #[test]
    fn trailing_slash_is_a_directory_tree_from_the_root() {
        let s = set(&["output/"]);
        assert!(s.is_match(Path::new("output/report.md")));
        assert!(s.is_match(Path::new("output/a/b/c.txt")));
        assert!(!s.is_match(Path::new("src/output/x.txt")));
        assert!(!s.is_match(Path::new("output.txt")));
    }

    #[test]
    fn patterns_with_a_slash_are_anchored_and_star_stays_in_one_component() {
        let s = set(&["src/*.rs"]);
        assert!(s.is_match(Path::new("src/main.rs")));
        assert!(!s.is_match(Path::new("src/agent/mod.rs")));
        assert!(!s.is_match(Path::new("vm/src/main.rs")));
        let s = set(&["src/**/*.rs", "./docs"]);
        assert!(s.is_match(Path::new("src/agent/mod.rs")));
        assert!(
            s.is_match(Path::new("docs/a/b.md")),
            "a matched directory covers its tree"
        );
        assert!(!s.is_match(Path::new("x/docs/b.md")));
    }

    #[test]
    fn os_roots_express_only_whole_directories_and_paths() {
        let roots = set(&[
            "out/",
            "./build/**",
            "/docs/*",
            "**",
            "*.md",
            "notes/*.md",
            "src/**/*.rs",
            "report.txt",
            "a/b",
            "*/x",
        ])
        .os_roots();
        assert_eq!(
            roots,
            [
                OsRoot::Dir("out".into()),
                OsRoot::Dir("build".into()),
                OsRoot::Dir("docs".into()),
                OsRoot::Everything,
                OsRoot::Nothing,
                OsRoot::Nothing,
                OsRoot::Nothing,
                OsRoot::Nothing,
                OsRoot::Path("a/b".into()),
                OsRoot::Nothing,
            ]
        );
        assert_eq!(
            set(&["./report.txt"]).os_roots(),
            [OsRoot::Path("report.txt".into())]
        );
        assert_eq!(set(&["*"]).os_roots(), [OsRoot::Everything]);
        assert_eq!(set(&["."]).os_roots(), [OsRoot::Everything]);
    }

    #[test]
    fn matching_names_the_pattern_as_written() {
        let s = set(&["*.txt", "notes/"]);
        assert_eq!(s.matching(Path::new("notes/a.md")), Some("notes/"));
        assert_eq!(s.matching(Path::new("a.txt")), Some("*.txt"));
        assert_eq!(s.matching(Path::new("a.md")), None);
    }

    #[test]
    fn bad_patterns_and_rules_are_errors_naming_them() {
        assert!(matches!(
            PatternSet::new(&["../x"]),
            Err(PolicyError::BadPattern { pattern, .. }) if pattern == "../x"
        ));
        assert!(matches!(
            PatternSet::new(&["a[b"]),
            Err(PolicyError::BadPattern { pattern, .. }) if pattern == "a[b"
        ));
        let rules =
            |k: &str, v: &[&str]| vec![(k.to_string(), v.iter().map(|s| s.to_string()).collect())];
        let err = Policy::from_rules(&rules("delete", &["*"])).unwrap_err();
        assert_eq!(err, PolicyError::UnknownKind("delete".into()));
        assert!(err.to_string().contains("`delete`"));
        let err = Policy::from_rules(&rules("bash", &["sometimes"])).unwrap_err();
        assert!(err.to_string().contains("sometimes"), "{err}");
        assert!(Policy::from_rules(&rules("network", &["allow", "deny"])).is_err());
        let mut twice = rules("bash", &["deny"]);
        twice.extend(rules("bash", &["allow"]));
        assert_eq!(
            Policy::from_rules(&twice).unwrap_err(),
            PolicyError::Duplicate("bash".into())
        );
        let p = Policy::from_rules(&rules("network", &["prompt"])).unwrap();
        assert_eq!(p.access(Capability::Network), Some(Access::Prompt));
        assert_eq!(p.access(Capability::Bash), None);
        assert!(p.read().is_none());
    }
}
