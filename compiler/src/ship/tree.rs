//! Finding skill NAME in a fetched tree (a local directory, a commit, a package) and taking
//! its files.
//!
//! The skill is the first of `SUBPATH/NAME/`, `skills/NAME/` and `NAME/` that holds a
//! `SKILL.md`; failing those, the tree's root (or `SUBPATH/`, when the source names one)
//! when its own `SKILL.md` says `name: NAME`. Its files are every regular file below that
//! directory (a `.git` directory left out), each under the bundle's limits
//! ([`bytecode_spec::bundle`]); a symbolic link, or a name that is not a safe relative
//! path, is an error, as is a `SKILL.md` whose front matter lacks a `name` equal to NAME or
//! a `description` (the VM would refuse it at run time).

use super::{Failure, FetchError};
use bytecode_spec::bundle::{
    is_bundle_path, BundledFile, BundledSkill, MAX_FILE, MAX_FILES, MAX_SKILL_BYTES,
    MAX_SKILL_FILE, SKILL_FILE,
};
use std::path::{Path, PathBuf};

/// What a tree holds at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file of this many bytes.
    File(u64),
    /// A symbolic link.
    Link,
    /// Anything else (a submodule, a device).
    Other,
}

/// A tree of files that a skill can be taken from.
pub trait Tree {
    /// What is at `path` (relative, `/`-separated; `""` is the root), if anything.
    fn kind(&self, path: &str) -> Option<Kind>;
    /// Every entry below directory `dir` (`""` for the root), with paths relative to `dir`.
    fn walk(&self, dir: &str) -> Result<Vec<(String, Kind)>, String>;
    /// The bytes of file `path`.
    fn read(&self, path: &str) -> Result<Vec<u8>, String>;
}

/// `a/b` joined to `c`, with an empty side left out.
fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}/{b}"),
    }
}

/// The front matter of a `SKILL.md`: `(name, description)` as far as given.
pub fn front_matter(text: &str) -> Option<(Option<String>, Option<String>)> {
    #[derive(serde::Deserialize)]
    struct Front {
        name: Option<String>,
        description: Option<String>,
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next()?.trim_end() != "---" {
        return None;
    }
    let mut yaml = String::new();
    for line in lines {
        let t = line.trim_end();
        if t == "---" || t == "..." {
            let f: Front = yaml_serde::from_str(&yaml).ok()?;
            let clean =
                |s: Option<String>| s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
            return Some((clean(f.name), clean(f.description)));
        }
        yaml.push_str(line);
    }
    None
}

/// The error of skill `name` from `origin` that cannot be bundled, and `why`.
pub fn invalid(name: &str, origin: &str, why: String) -> FetchError {
    FetchError::new(
        Failure::InvalidSkill,
        format!("skill `{name}` in {origin}: {why}"),
    )
}

/// Why a skill whose path `rel` is a symbolic link is refused: the link could point
/// anywhere, and its files would be bundled from there.
pub fn symbolic_link(rel: &str) -> String {
    format!("`{rel}` is a symbolic link; a skill may only hold regular files")
}

/// Finds skill `name` in `tree` and takes its files. `origin` says where the tree came from
/// (it is extended with the skill's directory); `source` is the import's text.
pub fn take(
    tree: &dyn Tree,
    name: &str,
    subpath: Option<&str>,
    source: &str,
    origin: &str,
) -> Result<BundledSkill, FetchError> {
    let dir = locate(tree, name, subpath)?;
    let invalid = |why: String| invalid(name, origin, why);
    // A directory on the way to the skill's that is a link (which finding it went through)
    // would take the files from wherever it points.
    let mut above = String::new();
    for part in dir.split('/').filter(|p| !p.is_empty()) {
        above = join(&above, part);
        if tree.kind(&above) == Some(Kind::Link) {
            return Err(invalid(symbolic_link(&above)));
        }
    }
    let entries = tree
        .walk(&dir)
        .map_err(|e| FetchError::new(Failure::Failed, e))?;
    let mut files = Vec::new();
    let mut total = 0u64;
    for (rel, kind) in entries {
        let size = match kind {
            Kind::File(size) => size,
            Kind::Link => return Err(invalid(symbolic_link(&rel))),
            Kind::Other => {
                return Err(invalid(format!("`{rel}` is not a regular file")));
            }
        };
        if !is_bundle_path(&rel) {
            return Err(invalid(format!(
                "the file name {rel:?} is not a safe relative path"
            )));
        }
        let cap = if rel == SKILL_FILE {
            MAX_SKILL_FILE
        } else {
            MAX_FILE
        } as u64;
        if size > cap {
            return Err(invalid(format!(
                "`{rel}` has {size} bytes, more than the {cap} a bundled file may have"
            )));
        }
        total += size;
        if total > MAX_SKILL_BYTES as u64 {
            return Err(invalid(format!(
                "its files add up to more than the {MAX_SKILL_BYTES} bytes a skill may carry"
            )));
        }
        if files.len() >= MAX_FILES {
            return Err(invalid(format!(
                "it has more than the {MAX_FILES} files a skill may carry"
            )));
        }
        let bytes = tree
            .read(&join(&dir, &rel))
            .map_err(|e| FetchError::new(Failure::Failed, e))?;
        files.push(BundledFile::new(rel, bytes));
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let skill = BundledSkill {
        name: name.to_string(),
        source: source.to_string(),
        origin: if dir.is_empty() {
            origin.to_string()
        } else {
            format!("{origin} {dir}/")
        },
        files,
    };
    let md = skill
        .skill_md()
        .ok_or_else(|| invalid(format!("its {SKILL_FILE} is not UTF-8 text")))?;
    match front_matter(md) {
        None => Err(invalid(format!(
            "its {SKILL_FILE} does not start with front matter (`---`, `name:` and `description:`, `---`)"
        ))),
        Some((declared, _)) if declared.as_deref() != Some(name) => Err(invalid(match declared {
            Some(d) => format!("its {SKILL_FILE} names it `{d}`"),
            None => format!("its {SKILL_FILE} has no `name:`"),
        })),
        Some((_, None)) => Err(invalid(format!("its {SKILL_FILE} has no `description:`"))),
        Some(_) => {
            skill.check().map_err(invalid)?;
            Ok(skill)
        }
    }
}

/// The directory of skill `name` in `tree`, by the rule of this module.
fn locate(tree: &dyn Tree, name: &str, subpath: Option<&str>) -> Result<String, FetchError> {
    let sub = subpath.unwrap_or("");
    let mut tried: Vec<String> = Vec::new();
    for dir in [join(sub, name), join("skills", name), name.to_string()] {
        if tried.contains(&dir) {
            continue;
        }
        if matches!(tree.kind(&join(&dir, SKILL_FILE)), Some(Kind::File(_))) {
            return Ok(dir);
        }
        tried.push(dir);
    }
    let root_md = join(sub, SKILL_FILE);
    if let Some(Kind::File(size)) = tree.kind(&root_md) {
        if size <= MAX_SKILL_FILE as u64 {
            let declared = tree
                .read(&root_md)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|t| front_matter(&t))
                .and_then(|(n, _)| n);
            if declared.as_deref() == Some(name) {
                return Ok(sub.to_string());
            }
            let root = if sub.is_empty() { "the root" } else { sub };
            return Err(FetchError::new(
                Failure::NotFound,
                format!(
                    "no skill `{name}`: no {SKILL_FILE} in {}/, and the {SKILL_FILE} of {root} names {}",
                    tried.join("/, "),
                    declared.map_or("no skill".to_string(), |d| format!("`{d}`"))
                ),
            ));
        }
    }
    let root = if sub.is_empty() { "the root" } else { sub };
    Err(FetchError::new(
        Failure::NotFound,
        format!(
            "no skill `{name}`: no {SKILL_FILE} in {}/ or {root}",
            tried.join("/, ")
        ),
    ))
}

/// A directory on disk.
pub struct LocalTree {
    root: PathBuf,
}

impl LocalTree {
    /// The tree under `root`.
    pub fn new(root: PathBuf) -> LocalTree {
        LocalTree { root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }
}

fn kind_of(meta: &std::fs::Metadata) -> Kind {
    let t = meta.file_type();
    if t.is_symlink() {
        Kind::Link
    } else if t.is_file() {
        Kind::File(meta.len())
    } else {
        Kind::Other
    }
}

impl Tree for LocalTree {
    fn kind(&self, path: &str) -> Option<Kind> {
        std::fs::symlink_metadata(self.path(path))
            .ok()
            .map(|m| kind_of(&m))
    }

    fn walk(&self, dir: &str) -> Result<Vec<(String, Kind)>, String> {
        let base = self.path(dir);
        let mut out = Vec::new();
        let walk = ignore::WalkBuilder::new(&base)
            .standard_filters(false)
            .follow_links(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(|e| e.file_name() != ".git")
            .build();
        for entry in walk {
            let entry = entry.map_err(|e| e.to_string())?;
            let Ok(rel) = entry.path().strip_prefix(&base) else {
                continue;
            };
            if rel.as_os_str().is_empty() {
                continue;
            }
            let meta = std::fs::symlink_metadata(entry.path())
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
            if meta.is_dir() {
                continue;
            }
            let rel = rel
                .to_str()
                .ok_or_else(|| format!("{}: the name is not UTF-8", entry.path().display()))?
                .replace(std::path::MAIN_SEPARATOR, "/");
            out.push((rel, kind_of(&meta)));
        }
        Ok(out)
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        // Sizes were checked when the tree was walked; the bound holds if the file changed.
        const MOST: u64 = if MAX_FILE > MAX_SKILL_FILE {
            MAX_FILE
        } else {
            MAX_SKILL_FILE
        } as u64;
        let p = self.path(path);
        bytecode_spec::bounded::read(&p, MOST)
            .map_err(|e| format!("cannot read {}: {e}", p.display()))
    }
}

/// One entry of a [`MemoryTree`].
pub enum Entry {
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A symbolic or hard link.
    Link,
    /// Anything else: a FIFO, a device.
    Other,
}

/// Files held in memory (a package's), by path.
pub struct MemoryTree {
    entries: std::collections::BTreeMap<String, Entry>,
}

impl MemoryTree {
    /// The tree of `entries`.
    pub fn new(entries: std::collections::BTreeMap<String, Entry>) -> MemoryTree {
        MemoryTree { entries }
    }
}

fn entry_kind(e: &Entry) -> Kind {
    match e {
        Entry::File(b) => Kind::File(b.len() as u64),
        Entry::Link => Kind::Link,
        Entry::Other => Kind::Other,
    }
}

impl Tree for MemoryTree {
    fn kind(&self, path: &str) -> Option<Kind> {
        self.entries.get(path).map(entry_kind)
    }

    fn walk(&self, dir: &str) -> Result<Vec<(String, Kind)>, String> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        Ok(self
            .entries
            .iter()
            .filter_map(|(p, e)| {
                p.strip_prefix(&prefix)
                    .map(|rel| (rel.to_string(), entry_kind(e)))
            })
            .collect())
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        match self.entries.get(path) {
            Some(Entry::File(b)) => Ok(b.clone()),
            Some(Entry::Link) => Err(format!("`{path}` is a link")),
            Some(Entry::Other) => Err(format!("`{path}` is not a regular file")),
            None => Err(format!("no file `{path}`")),
        }
    }
}

/// The local directory a `./path` source names, relative to the importing program.
pub fn local_dir(importer: &Path, rel: &str) -> PathBuf {
    importer.parent().unwrap_or(Path::new(".")).join(rel)
}

/// The first directory on the way from the importing program's directory to the one the
/// local source `rel` names (that one included) which is a symbolic link, as written
/// (`./skills`): a link there would bundle files from wherever it points. What lies above
/// the program's directory is the builder's own choice, and is not looked at.
pub fn first_link(importer: &Path, rel: &str) -> Option<String> {
    let mut path = importer.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut shown = PathBuf::new();
    for part in Path::new(rel).components() {
        path.push(part);
        shown.push(part);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Some(shown.display().to_string());
        }
    }
    None
}
