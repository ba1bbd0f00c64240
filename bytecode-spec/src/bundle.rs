//! Skills carried inside an artifact, so that it runs where they were never installed.
//!
//! Every `import "NAME" from "SOURCE"` of every module becomes a [`SkillImport`] of that
//! module pointing at one [`BundledSkill`] of [`crate::Artifact::skills`]: the skill's
//! directory as the compiler found it, each regular file with its bytes and SHA-256. The
//! rules here are the single definition of what a bundle may hold; the compiler applies them
//! before writing (so a problem is reported at the import) and the verifier again on load
//! (so a hostile file is refused).
//!
//! A file's name is a relative path with `/` between components, each a
//! [`crate::names::is_file_name`] (no `..`, no empty or `.` component, no backslash or
//! control character), at most [`MAX_PATH`] bytes. A skill's files are sorted by name, each
//! name once, and one of them is [`SKILL_FILE`], UTF-8 text. Sizes are capped per file
//! ([`MAX_FILE`], [`MAX_SKILL_FILE`] for `SKILL.md`), per skill ([`MAX_SKILL_BYTES`],
//! [`MAX_FILES`]); the artifact's own cap ([`crate::artifact::MAX_PAYLOAD`]) bounds the total.

use crate::ids::StrId;
use crate::names::is_file_name;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The file that makes a directory a skill: front matter (`name`, `description`), then the
/// instructions.
pub const SKILL_FILE: &str = "SKILL.md";
/// The largest `SKILL.md` (its instructions go into every prompt of the agents using it).
pub const MAX_SKILL_FILE: usize = 256 * 1024;
/// The largest other file of a skill.
pub const MAX_FILE: usize = 4 << 20;
/// Most files one skill may carry.
pub const MAX_FILES: usize = 512;
/// Most bytes one skill's files may add up to.
pub const MAX_SKILL_BYTES: usize = 8 << 20;
/// Longest file name (the whole relative path), in bytes.
pub const MAX_PATH: usize = 1024;

/// One skill, as found when the program was built.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundledSkill {
    /// The name it is imported by (the `NAME` of `import "NAME" from ...`).
    pub name: String,
    /// The source as the import wrote it (`github:owner/repo`, `npm:pkg@1`, `./skills/x`).
    pub source: String,
    /// Exactly what was bundled: the commit and directory of a repository, the package
    /// version and its integrity, or the local directory.
    pub origin: String,
    /// Its files, sorted by name.
    pub files: Vec<BundledFile>,
}

/// One file of a bundled skill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundledFile {
    /// The path relative to the skill's directory, `/`-separated.
    pub name: String,
    /// SHA-256 of `bytes`.
    pub sha256: [u8; 32],
    /// The contents.
    pub bytes: Vec<u8>,
}

/// A module's `import "NAME" from "SOURCE"`: the name, and the skill it resolved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillImport {
    /// The imported name (a string of the module).
    pub name: StrId,
    /// Index in [`crate::Artifact::skills`].
    pub skill: u32,
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl BundledFile {
    /// A file, its hash computed.
    pub fn new(name: impl Into<String>, bytes: Vec<u8>) -> BundledFile {
        BundledFile {
            name: name.into(),
            sha256: sha256(&bytes),
            bytes,
        }
    }
}

impl BundledSkill {
    /// The file named `name`.
    pub fn file(&self, name: &str) -> Option<&BundledFile> {
        self.files
            .binary_search_by(|f| f.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.files[i])
    }

    /// The text of its `SKILL.md` (always there, and UTF-8, once verified).
    pub fn skill_md(&self) -> Option<&str> {
        self.file(SKILL_FILE)
            .and_then(|f| std::str::from_utf8(&f.bytes).ok())
    }

    /// The bytes of all its files together.
    pub fn size(&self) -> usize {
        self.files.iter().map(|f| f.bytes.len()).sum()
    }

    /// One hash for the whole skill: SHA-256 over each file's name, a NUL, its SHA-256 in
    /// hexadecimal and a newline, in order. Two skills with the same files have the same
    /// digest, wherever they came from.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        for f in &self.files {
            h.update(f.name.as_bytes());
            h.update([0]);
            h.update(hex(&f.sha256).as_bytes());
            h.update(b"\n");
        }
        h.finalize().into()
    }

    /// Checks everything the bundle rules say about one skill: its name, its files' names
    /// (safe, sorted, unique), sizes and hashes, and its `SKILL.md`.
    pub fn check(&self) -> Result<(), String> {
        if !is_file_name(&self.name) {
            return Err(format!(
                "bundled skill {:?}: the name is not one plain path component",
                self.name
            ));
        }
        let problem = |m: String| Err(format!("bundled skill `{}`: {m}", self.name));
        if self.files.len() > MAX_FILES {
            return problem(format!(
                "{} files, more than the {MAX_FILES} a skill may carry",
                self.files.len()
            ));
        }
        let mut total = 0usize;
        for (i, f) in self.files.iter().enumerate() {
            if !is_bundle_path(&f.name) {
                return problem(format!(
                    "file name {:?} is not a safe relative path",
                    f.name
                ));
            }
            if let Some(prev) = i.checked_sub(1).map(|p| &self.files[p]) {
                if prev.name == f.name {
                    return problem(format!("file `{}` appears twice", f.name));
                }
                if prev.name > f.name {
                    return problem(format!(
                        "files are not sorted by name (`{}` before `{}`)",
                        prev.name, f.name
                    ));
                }
            }
            let cap = if f.name == SKILL_FILE {
                MAX_SKILL_FILE
            } else {
                MAX_FILE
            };
            if f.bytes.len() > cap {
                return problem(format!(
                    "file `{}` has {} bytes, more than the {cap} allowed",
                    f.name,
                    f.bytes.len()
                ));
            }
            total += f.bytes.len();
            if total > MAX_SKILL_BYTES {
                return problem(format!(
                    "its files add up to more than the {MAX_SKILL_BYTES} bytes a skill may carry"
                ));
            }
            if sha256(&f.bytes) != f.sha256 {
                return problem(format!(
                    "file `{}` does not match its SHA-256 (it was altered)",
                    f.name
                ));
            }
        }
        match self.file(SKILL_FILE) {
            None => problem(format!("it has no {SKILL_FILE}")),
            Some(f) if std::str::from_utf8(&f.bytes).is_err() => {
                problem(format!("its {SKILL_FILE} is not UTF-8 text"))
            }
            Some(_) => Ok(()),
        }
    }
}

/// Whether `name` may name a bundled file: components separated by single `/`, each a plain
/// file name (not `.` or `..`), no leading or trailing `/`, at most [`MAX_PATH`] bytes.
pub fn is_bundle_path(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_PATH && name.split('/').all(is_file_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(files: Vec<BundledFile>) -> BundledSkill {
        BundledSkill {
            name: "web-search".into(),
            source: "./skills".into(),
            origin: "./skills/web-search".into(),
            files,
        }
    }

    fn md() -> BundledFile {
        BundledFile::new(
            SKILL_FILE,
            b"---\nname: web-search\n---\nSearch.\n".to_vec(),
        )
    }

    #[test]
    fn bundle_paths_stay_inside_the_skill() {
        for ok in ["SKILL.md", "scripts/run.py", "a/b/c.txt", ".hidden", "x..y"] {
            assert!(is_bundle_path(ok), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "a/",
            "./a",
            "a/./b",
            "a\\b",
            "a\nb",
            "..",
        ] {
            assert!(!is_bundle_path(bad), "{bad:?}");
        }
        assert!(!is_bundle_path(&"a/".repeat(MAX_PATH)));
    }

    #[test]
    fn a_well_formed_skill_passes_and_each_rule_can_fail() {
        let good = skill(vec![
            md(),
            BundledFile::new("scripts/x.sh", b"echo\n".to_vec()),
        ]);
        assert_eq!(good.check(), Ok(()));
        assert_eq!(
            good.skill_md(),
            Some("---\nname: web-search\n---\nSearch.\n")
        );

        let mut altered = good.clone();
        altered.files[1].bytes.push(b'!');
        assert!(altered.check().unwrap_err().contains("altered"));

        let mut unsorted = good.clone();
        unsorted.files.swap(0, 1);
        assert!(unsorted.check().unwrap_err().contains("not sorted"));

        let twice = skill(vec![md(), md()]);
        assert!(twice.check().unwrap_err().contains("appears twice"));

        let no_md = skill(vec![BundledFile::new("README.md", vec![])]);
        assert!(no_md.check().unwrap_err().contains("no SKILL.md"));

        let big = skill(vec![BundledFile::new(
            SKILL_FILE,
            vec![b'a'; MAX_SKILL_FILE + 1],
        )]);
        assert!(big.check().unwrap_err().contains("more than"));

        let binary = skill(vec![BundledFile::new(SKILL_FILE, vec![0xff, 0xfe])]);
        assert!(binary.check().unwrap_err().contains("not UTF-8"));

        let mut named = good.clone();
        named.name = "../up".into();
        assert!(named
            .check()
            .unwrap_err()
            .contains("not one plain path component"));
    }

    #[test]
    fn the_digest_depends_on_names_and_contents_only() {
        let a = skill(vec![md()]);
        let mut b = a.clone();
        b.source = "github:x/y".into();
        b.origin = "elsewhere".into();
        assert_eq!(a.digest(), b.digest());
        b.files[0] = BundledFile::new(SKILL_FILE, b"other".to_vec());
        assert_ne!(a.digest(), b.digest());
    }
}
