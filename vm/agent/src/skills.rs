//! Skills: directories following the agent-skills convention, resolved from an agent's
//! `skills:` names before a run starts.
//!
//! A skill is a directory `<name>/` holding a `SKILL.md`: YAML front matter between `---`
//! lines with at least `name` (equal to the directory's name) and `description`, then the
//! instructions in Markdown. Any other files in the directory (scripts, references, templates)
//! belong to the skill. [`SkillSearch`] looks for `<name>/` in, in order:
//!
//! 1. `<program dir>/skills/<name>/`
//! 2. `<program dir>/<name>/`
//! 3. `<state dir>/skills/<name>/` (the state dir is `.prose` unless `--state-dir` moves it)
//! 4. `$PROSE_HOME/skills/<name>/`, or `~/.prose/skills/<name>/` without `PROSE_HOME`
//!
//! The first directory with a `SKILL.md` wins. A resolved [`Skill`]'s instructions go into the
//! agent's system prompt ([`system_prompt`]) and its directory becomes readable by the agent
//! ([`crate::permissions::SandboxBuilder::skill`]).

use std::fmt;
use std::path::{Path, PathBuf};

use bytecode_spec::bundle::{hex, sha256, BundledSkill};
use serde::{Deserialize, Serialize};

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// The largest `SKILL.md` accepted (its instructions go into every prompt of the agent).
pub const MAX_SKILL_FILE: u64 = 256 * 1024;

/// At most this many of a skill's other files are listed in the system prompt.
pub const MAX_LISTED_FILES: usize = 200;

/// A resolved skill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skill {
    /// Its name (the directory's name, and the front matter's `name`).
    pub name: String,
    /// What it is for, from the front matter.
    pub description: String,
    /// The Markdown after the front matter.
    pub instructions: String,
    /// Its directory, canonical.
    pub dir: PathBuf,
    /// Its other files, relative to `dir`, sorted (at most [`MAX_LISTED_FILES`]; a `.git`
    /// directory is left out).
    pub files: Vec<String>,
}

/// A skill a run's agents use, as the run's record keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsedSkill {
    /// The name in `skills:`.
    pub name: String,
    /// Where it came from: the import's source and what was bundled for a skill the
    /// artifact carries, or the directory it was found in.
    pub origin: String,
    /// SHA-256 of a carried skill's files (none for one found on disk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Why a skill could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkillError {
    /// No place had the skill; each place looked, with what was found there.
    NotFound {
        /// The skill's name.
        name: String,
        /// Every directory looked at, and why it did not do.
        looked: Vec<(PathBuf, String)>,
    },
    /// The name cannot be a directory's name (empty, or with `/`, `\` or `..`).
    BadName(String),
    /// A `SKILL.md` was found but cannot be used.
    Invalid {
        /// The skill's name.
        name: String,
        /// The `SKILL.md`.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl fmt::Display for SkillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkillError::NotFound { name, looked } => {
                write!(f, "skill `{name}` not found; looked for {SKILL_FILE} in:")?;
                for (dir, why) in looked {
                    write!(f, "\n  {} ({why})", dir.display())?;
                }
                Ok(())
            }
            SkillError::BadName(name) => write!(
                f,
                "`{name}` cannot name a skill directory (a skill name is one path component)"
            ),
            SkillError::Invalid { name, path, reason } => {
                write!(f, "skill `{name}`: {}: {reason}", path.display())
            }
        }
    }
}

impl std::error::Error for SkillError {}

/// Where skills are looked for.
#[derive(Clone, Debug)]
pub struct SkillSearch {
    program_dir: PathBuf,
    state_dir: PathBuf,
    user_dir: Option<PathBuf>,
}

impl SkillSearch {
    /// Looks beside the program (`program_dir`), in `state_dir`'s `skills/`, and in the user's
    /// skills directory ([`user_skills_dir`]).
    pub fn new(program_dir: impl Into<PathBuf>, state_dir: impl Into<PathBuf>) -> SkillSearch {
        SkillSearch {
            program_dir: program_dir.into(),
            state_dir: state_dir.into(),
            user_dir: user_skills_dir(),
        }
    }

    /// Replaces the user's skills directory (or drops it, with `None`).
    pub fn with_user_dir(mut self, dir: Option<PathBuf>) -> SkillSearch {
        self.user_dir = dir;
        self
    }

    /// The directories that could hold skill `name`, in the order they are tried.
    pub fn places(&self, name: &str) -> Vec<PathBuf> {
        let mut places = vec![
            self.program_dir.join("skills").join(name),
            self.program_dir.join(name),
            self.state_dir.join("skills").join(name),
        ];
        if let Some(user) = &self.user_dir {
            places.push(user.join(name));
        }
        places
    }

    /// Resolves skill `name`: the first of [`SkillSearch::places`] with a `SKILL.md`.
    pub fn find(&self, name: &str) -> Result<Skill, SkillError> {
        if name.is_empty()
            || name == "."
            || name == ".."
            || name.contains('/')
            || name.contains('\\')
            || name.contains('\0')
        {
            return Err(SkillError::BadName(name.to_string()));
        }
        let mut looked = Vec::new();
        for dir in self.places(name) {
            let file = dir.join(SKILL_FILE);
            if file.is_file() {
                return load(name, &dir, &file);
            }
            let why = if dir.is_dir() {
                format!("the directory has no {SKILL_FILE}")
            } else {
                "no such directory".to_string()
            };
            looked.push((dir, why));
        }
        Err(SkillError::NotFound {
            name: name.to_string(),
            looked,
        })
    }

    /// Resolves every name, stopping at the first that fails.
    pub fn find_all<S: AsRef<str>>(&self, names: &[S]) -> Result<Vec<Skill>, SkillError> {
        names.iter().map(|n| self.find(n.as_ref())).collect()
    }
}

/// Where the skills artifacts carry are unpacked for their agents to read: the user's cache
/// (`$XDG_CACHE_HOME/prose/bundled`, else `~/.cache/prose/bundled`), else the system's
/// temporary directory.
pub fn bundled_skills_dir() -> PathBuf {
    prose_settings::files::user_cache_dir()
        .unwrap_or_else(|| std::env::temp_dir().join("prose"))
        .join("bundled")
}

/// The skill an artifact carries, as a directory its agent can read: unpacked under `root`
/// at `<sha256 of the skill>/<name>/`, so the same skill always has the same directory (and
/// a prompt naming it the same bytes). A directory already there is used only if it holds
/// exactly the skill's files with their hashes; anything else there (a file changed or
/// added since) is replaced, so nothing written to it changes what a later run reads.
pub fn unpack(bundled: &BundledSkill, root: &Path) -> Result<Skill, SkillError> {
    let name = bundled.name.as_str();
    let home = root.join(hex(&bundled.digest()));
    let dir = home.join(name);
    let invalid = |reason: String| SkillError::Invalid {
        name: name.to_string(),
        path: dir.clone(),
        reason,
    };
    if !holds_exactly(&dir, bundled) {
        let staging = root.join(format!(
            ".{}.{}.{}",
            hex(&bundled.digest()),
            std::process::id(),
            UNPACKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        write_skill(&staging.join(name), bundled)
            .map_err(|e| invalid(format!("cannot unpack the bundled skill: {e}")))?;
        if home.exists() {
            let _ = std::fs::remove_dir_all(&home);
        }
        if let Err(e) = std::fs::rename(&staging, &home) {
            let _ = std::fs::remove_dir_all(&staging);
            // Another process unpacking the same skill at once is fine: its copy is checked.
            if !holds_exactly(&dir, bundled) {
                return Err(invalid(format!("cannot unpack the bundled skill: {e}")));
            }
        }
    }
    load(name, &dir, &dir.join(SKILL_FILE))
}

/// Counts unpacks in this process, so concurrent ones stage in different places.
static UNPACKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Writes `bundled`'s files into the new directory `dir` (names were checked by the
/// verifier: relative, `/`-separated, no `..`).
fn write_skill(dir: &Path, bundled: &BundledSkill) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for f in &bundled.files {
        let path = dir.join(&f.name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &f.bytes)?;
    }
    Ok(())
}

/// Whether `dir` holds exactly `bundled`'s files, each with its hash, and nothing else (no
/// link, no other file).
fn holds_exactly(dir: &Path, bundled: &BundledSkill) -> bool {
    let mut found = Vec::new();
    let walk = ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .follow_links(false)
        .build();
    for entry in walk {
        let Ok(entry) = entry else { return false };
        let Some(kind) = entry.file_type() else {
            return false;
        };
        if kind.is_dir() {
            continue;
        }
        if !kind.is_file() {
            return false;
        }
        let Ok(rel) = entry.path().strip_prefix(dir) else {
            return false;
        };
        found.push((rel.to_string_lossy().into_owned(), entry.into_path()));
    }
    found.sort();
    found.len() == bundled.files.len()
        && found.iter().zip(&bundled.files).all(|((rel, path), f)| {
            *rel == f.name && std::fs::read(path).is_ok_and(|bytes| sha256(&bytes) == f.sha256)
        })
}

/// The user's skills directory: `$PROSE_HOME/skills`, else `$HOME/.prose/skills`.
pub fn user_skills_dir() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("PROSE_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(home).join("skills"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".prose").join("skills"))
}

#[derive(Deserialize)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
}

fn load(name: &str, dir: &Path, file: &Path) -> Result<Skill, SkillError> {
    let invalid = |reason: String| SkillError::Invalid {
        name: name.to_string(),
        path: file.to_path_buf(),
        reason,
    };
    let size = std::fs::metadata(file)
        .map_err(|e| invalid(e.to_string()))?
        .len();
    if size > MAX_SKILL_FILE {
        return Err(invalid(format!(
            "{size} bytes is more than the {MAX_SKILL_FILE} a {SKILL_FILE} may have"
        )));
    }
    let text = std::fs::read_to_string(file).map_err(|e| invalid(e.to_string()))?;
    let (front, body) = split_front_matter(&text).ok_or_else(|| {
        invalid("it does not start with front matter (a `---` line, `name:` and `description:`, a `---` line)".into())
    })?;
    let meta: FrontMatter = yaml_serde::from_str(front)
        .map_err(|e| invalid(format!("the front matter is not valid YAML: {e}")))?;
    let declared = meta
        .name
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| invalid("the front matter has no `name`".into()))?;
    if declared.trim() != name {
        return Err(invalid(format!(
            "the front matter names it `{}`, but its directory is `{name}`",
            declared.trim()
        )));
    }
    let description = meta
        .description
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .ok_or_else(|| invalid("the front matter has no `description`".into()))?;
    let dir = std::fs::canonicalize(dir).map_err(|e| invalid(e.to_string()))?;
    let files = list_files(&dir);
    Ok(Skill {
        name: name.to_string(),
        description,
        instructions: body.trim().to_string(),
        dir,
        files,
    })
}

/// Splits `---\n<yaml>\n---\n<body>`; `None` without front matter.
fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next()?;
    if first.trim_end() != "---" {
        return None;
    }
    let start = first.len();
    let mut at = start;
    for line in lines {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            return Some((&text[start..at], &text[at + line.len()..]));
        }
        at += line.len();
    }
    None
}

fn list_files(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let walk = ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walk.flatten() {
        if files.len() >= MAX_LISTED_FILES {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if let Ok(rel) = entry.path().strip_prefix(dir) {
            if rel != Path::new(SKILL_FILE) {
                files.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    files
}

/// The system-prompt section that gives an agent its skills: each skill's name, description,
/// directory, files and instructions. Empty when there are none.
pub fn system_prompt(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# Skills\n\nYou have the skills below. When a task calls for one, follow its \
         instructions. A skill's files can be read with `read_file`, giving the absolute path \
         (its directory joined with the file's name).\n",
    );
    for skill in skills {
        out.push_str(&format!(
            "\n## Skill: {}\n\n{}\n\nDirectory: {}\n",
            skill.name,
            skill.description,
            skill.dir.display()
        ));
        if !skill.files.is_empty() {
            out.push_str(&format!("Files: {}\n", skill.files.join(", ")));
        }
        if !skill.instructions.is_empty() {
            out.push('\n');
            out.push_str(&skill.instructions);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_is_split_from_the_body() {
        let (front, body) = split_front_matter("---\nname: a\n---\nbody\n").unwrap();
        assert_eq!(front, "name: a\n");
        assert_eq!(body, "body\n");
        let (front, body) = split_front_matter("\u{feff}---\r\nname: a\r\n...\r\n").unwrap();
        assert_eq!(front, "name: a\r\n");
        assert_eq!(body, "");
        assert!(split_front_matter("# title\n---\n").is_none());
        assert!(split_front_matter("---\nname: a\n").is_none());
    }

    #[test]
    fn bad_names_are_refused_before_looking() {
        let search = SkillSearch::new("/nonexistent", "/nonexistent/.prose").with_user_dir(None);
        for name in ["", "..", "a/b", "a\\b"] {
            assert_eq!(
                search.find(name),
                Err(SkillError::BadName(name.to_string()))
            );
        }
    }
}
