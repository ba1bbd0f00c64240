//! `prose.lock`: what each remote source resolved to, so that a build fetches the same
//! bytes tomorrow, elsewhere, or offline. It sits beside the program and is meant to be
//! committed with it. One lock serves every program of its directory: entries are keyed
//! by source, and a build adds or changes only the entries of the sources it uses.
//!
//! ```toml
//! version = 1
//!
//! [[git]]
//! source = "github:anthropic/skills@HEAD"
//! url = "https://github.com/anthropic/skills"
//! commit = "0f6c0c53e8f5d0c6e7a1a7b1a1d6e1f1c3b2a1d0"
//!
//! [[npm]]
//! source = "npm:@example/summarizer@latest"
//! version = "1.4.2"
//! tarball = "https://registry.npmjs.org/@example/summarizer/-/summarizer-1.4.2.tgz"
//! integrity = "sha512-..."
//!
//! [[program]]
//! source = "@alice/research"
//! url = "https://p.prose.md/@alice/research"
//! sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! ```

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file's name.
pub const LOCK_FILE: &str = "prose.lock";
/// The version of the lock format this compiler writes and reads.
pub const LOCK_VERSION: u32 = 1;

/// The contents of a `prose.lock`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// The format version.
    pub version: u32,
    /// Pinned repositories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub git: Vec<GitPin>,
    /// Pinned packages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub npm: Vec<NpmPin>,
    /// Pinned registry programs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub program: Vec<ProgramPin>,
}

/// A repository and ref, pinned to a commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitPin {
    /// `github:OWNER/REPO@REF` (`@HEAD` for the default branch).
    pub source: String,
    /// The URL fetched (before the user's `insteadOf` rewrites).
    pub url: String,
    /// The commit, 40 hex digits.
    pub commit: String,
}

/// A package and version request, pinned to one version and its tarball.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NpmPin {
    /// `npm:PACKAGE@REQUEST` (`@latest` when none was given).
    pub source: String,
    /// The version chosen.
    pub version: String,
    /// Where its tarball was downloaded from.
    pub tarball: String,
    /// The tarball's `sha512-<base64>` integrity.
    pub integrity: String,
}

/// A registry program, pinned to its content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramPin {
    /// `@handle/slug`.
    pub source: String,
    /// Where it was downloaded from.
    pub url: String,
    /// SHA-256 of its text, hexadecimal.
    pub sha256: String,
}

impl Lock {
    /// An empty lock.
    pub fn new() -> Lock {
        Lock {
            version: LOCK_VERSION,
            ..Lock::default()
        }
    }

    /// Parses a lock file's text.
    pub fn parse(text: &str) -> Result<Lock, String> {
        let lock: Lock = toml::from_str(text).map_err(|e| e.message().to_string())?;
        if lock.version != LOCK_VERSION {
            return Err(format!(
                "lock format version {} is not {LOCK_VERSION}, the one this prosec reads",
                lock.version
            ));
        }
        Ok(lock)
    }

    /// Reads `path`: `Ok(None)` when there is no such file.
    pub fn read(path: &Path) -> Result<Option<Lock>, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => Lock::parse(&text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The lock as written to disk: a comment, then the entries sorted by source.
    pub fn render(&self) -> String {
        let mut sorted = self.clone();
        sorted.git.sort_by(|a, b| a.source.cmp(&b.source));
        sorted.npm.sort_by(|a, b| a.source.cmp(&b.source));
        sorted.program.sort_by(|a, b| a.source.cmp(&b.source));
        let body = toml::to_string(&sorted).unwrap_or_default();
        format!(
            "# prose.lock: what each import fetched, written by `prosec build` and `prosec fetch`.\n\
             # Commit it with the programs of this directory.\n{body}"
        )
    }

    /// The pin of a repository source.
    pub fn git(&self, source: &str) -> Option<&GitPin> {
        self.git.iter().find(|p| p.source == source)
    }

    /// The pin of a package source.
    pub fn npm(&self, source: &str) -> Option<&NpmPin> {
        self.npm.iter().find(|p| p.source == source)
    }

    /// The pin of a registry program.
    pub fn program(&self, source: &str) -> Option<&ProgramPin> {
        self.program.iter().find(|p| p.source == source)
    }

    /// Sets the pin of a repository source.
    pub fn set_git(&mut self, pin: GitPin) {
        self.git.retain(|p| p.source != pin.source);
        self.git.push(pin);
    }

    /// Sets the pin of a package source.
    pub fn set_npm(&mut self, pin: NpmPin) {
        self.npm.retain(|p| p.source != pin.source);
        self.npm.push(pin);
    }

    /// Sets the pin of a registry program.
    pub fn set_program(&mut self, pin: ProgramPin) {
        self.program.retain(|p| p.source != pin.source);
        self.program.push(pin);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_round_trips_sorted() {
        let mut lock = Lock::new();
        lock.set_git(GitPin {
            source: "github:b/r@HEAD".into(),
            url: "https://github.com/b/r".into(),
            commit: "1".repeat(40),
        });
        lock.set_git(GitPin {
            source: "github:a/r@v1".into(),
            url: "https://github.com/a/r".into(),
            commit: "2".repeat(40),
        });
        lock.set_npm(NpmPin {
            source: "npm:x@latest".into(),
            version: "1.0.0".into(),
            tarball: "http://127.0.0.1/x.tgz".into(),
            integrity: "sha512-AAAA".into(),
        });
        let text = lock.render();
        assert!(text.starts_with("# prose.lock"));
        let back = Lock::parse(&text).expect("parses");
        assert_eq!(back.git[0].source, "github:a/r@v1");
        assert_eq!(
            back.git("github:b/r@HEAD").map(|p| p.commit.as_str()),
            Some(&*"1".repeat(40))
        );
        assert_eq!(
            back.npm("npm:x@latest").map(|p| p.version.as_str()),
            Some("1.0.0")
        );
        // Setting a pin again replaces it.
        let mut again = back.clone();
        again.set_git(GitPin {
            source: "github:a/r@v1".into(),
            url: "https://github.com/a/r".into(),
            commit: "3".repeat(40),
        });
        assert_eq!(again.git.len(), 2);
        assert_eq!(again.git("github:a/r@v1").unwrap().commit, "3".repeat(40));
    }

    #[test]
    fn a_damaged_lock_says_what_is_wrong() {
        assert!(Lock::parse("version = 2\n")
            .unwrap_err()
            .contains("version 2"));
        assert!(Lock::parse("version = 1\n[[git]]\nsource = 1\n").is_err());
        assert!(Lock::parse("version = 1\nextra = true\n").is_err());
        assert!(Lock::parse("not toml").is_err());
    }
}
