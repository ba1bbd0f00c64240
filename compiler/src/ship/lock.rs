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

/// The longest `prose.lock` read: a pin is a few hundred bytes, so this is tens of
/// thousands of them.
pub const MAX_LOCK_FILE: u64 = 16 << 20;

/// `Ok` when `meta` (of a lock file, not following a link) is a regular file's, else why
/// the lock is refused.
fn must_be_a_file(meta: &std::fs::Metadata) -> Result<(), String> {
    let kind = meta.file_type();
    if kind.is_symlink() {
        Err("it is a symbolic link; a lock must be a regular file".into())
    } else if !kind.is_file() {
        Err("it is not a regular file".into())
    } else {
        Ok(())
    }
}

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

    /// Reads `path`: `Ok(None)` when there is no such file. A lock that is a symbolic link
    /// (even one to nothing) or not a regular file is refused, since a build that changes
    /// the lock writes it, and so is one of more than [`MAX_LOCK_FILE`] bytes.
    pub fn read(path: &Path) -> Result<Option<Lock>, String> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) => must_be_a_file(&meta)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        }
        let text = bytecode_spec::bounded::read_to_string(path, MAX_LOCK_FILE)
            .map_err(|e| e.to_string())?;
        Lock::parse(&text).map(Some)
    }

    /// Writes the lock, as [`Lock::render`] has it, at `path`: into a file made anew beside
    /// it (never through a link), then renamed over it, so a reader sees the old lock or
    /// the new one and a link at `path` is replaced, not followed. What stands at `path`
    /// must be a regular file, or nothing.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write;
        match std::fs::symlink_metadata(path) {
            Ok(meta) => must_be_a_file(&meta).map_err(std::io::Error::other)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
        }
        // A new name each try: something already there (left by a crash, or put there) is
        // neither opened nor followed.
        let (tmp, file) = (0..100)
            .map(|n| dir.join(format!(".{LOCK_FILE}.{}.{n}.tmp", std::process::id())))
            .find_map(|tmp| match options.open(&tmp) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => None,
                opened => Some((tmp, opened)),
            })
            .ok_or_else(|| std::io::Error::other("no free name for a temporary lock file"))?;
        let written = file.and_then(|mut file| {
            file.write_all(self.render().as_bytes())?;
            file.sync_all()
        });
        let renamed = written.and_then(|()| std::fs::rename(&tmp, path));
        if renamed.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        renamed
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

    /// A fresh directory for one test.
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("prosec-lock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_lock_is_written_whole_and_read_back() {
        let dir = scratch("write");
        let path = dir.join(LOCK_FILE);
        assert_eq!(Lock::read(&path), Ok(None));
        let mut lock = Lock::new();
        lock.set_program(ProgramPin {
            source: "@a/b".into(),
            url: "https://p.prose.md/@a/b".into(),
            sha256: "0".repeat(64),
        });
        lock.write(&path).expect("written");
        assert_eq!(Lock::read(&path), Ok(Some(lock.clone())));
        // Written again over the old one, with nothing left beside it.
        lock.program.clear();
        lock.write(&path).expect("rewritten");
        assert_eq!(Lock::read(&path), Ok(Some(lock)));
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[cfg(unix)]
    #[test]
    fn a_lock_that_is_a_link_is_neither_read_nor_written_through() {
        let dir = scratch("link");
        let path = dir.join(LOCK_FILE);
        let target = dir.join("elsewhere");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let e = Lock::read(&path).expect_err("a dangling link is refused");
        assert!(e.contains("symbolic link"), "{e}");
        let e = Lock::new().write(&path).expect_err("not written through");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!target.exists(), "the link's target was created");
        // A link to a lock that exists is refused as well.
        Lock::new().write(&target).expect("written");
        assert!(Lock::read(&path).is_err());
        assert!(Lock::new().write(&path).is_err());
        assert!(std::fs::symlink_metadata(&path).unwrap().is_symlink());
    }

    #[cfg(unix)]
    #[test]
    fn a_lock_that_is_not_a_regular_file_is_refused() {
        let dir = scratch("kinds");
        let path = dir.join(LOCK_FILE);
        std::fs::create_dir(&path).unwrap();
        assert!(Lock::read(&path)
            .unwrap_err()
            .contains("not a regular file"));
        assert!(Lock::new().write(&path).is_err());
        std::fs::remove_dir(&path).unwrap();
        let long = format!("version = 1\n#{}\n", "x".repeat(MAX_LOCK_FILE as usize));
        std::fs::write(&path, long).unwrap();
        let e = Lock::read(&path).unwrap_err();
        assert!(e.contains(&format!("{MAX_LOCK_FILE} bytes")), "{e}");
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
