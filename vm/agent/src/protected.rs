//! What no tool may change, whatever an agent's `permissions:` say: the places that decide what
//! a later run may do, or that run code when a person next uses them.
//!
//! - **The run state** ([`STATE_DIR`] in the working directory, and the state directory
//!   wherever `--state-dir` puts it): journals, `run.json`, bindings and agent memory. Hidden:
//!   neither readable nor writable.
//! - **Every `prose.toml`** ([`CONFIG_FILE`]): it can allow bash and network and choose where
//!   the key is sent. Readable, never writable.
//! - **The program's own files**: the program run and the files it imports. Readable, never
//!   writable.
//! - **Every `.git/`** ([`GIT_DIR`]): its config and hooks run code when a person uses git.
//!   Readable, never writable.
//!
//! The file tools check these by path ([`Protected::refuses_read`],
//! [`Protected::refuses_write`]); commands see them read-only or hidden through the OS sandbox
//! (`super::confine`).

use std::path::{Component, Path, PathBuf};

/// The run-state directory's name in the working directory.
pub const STATE_DIR: &str = ".prose";

/// The name of the settings file, protected wherever it is.
pub const CONFIG_FILE: &str = "prose.toml";

/// The name of git's directory, protected wherever it is.
pub const GIT_DIR: &str = ".git";

/// The protected places of one run beyond the fixed names: its state directory, its
/// program's files, and the program's directory (where the search for `prose.toml` starts).
/// Paths are absolute and, as far as they exist, canonical.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Protected {
    hidden: Vec<PathBuf>,
    program: Vec<PathBuf>,
    program_dir: Option<PathBuf>,
}

impl Protected {
    /// Nothing beyond the fixed names.
    pub fn new() -> Protected {
        Protected::default()
    }

    /// Hides the state directory `dir` (relative paths are taken from the current directory;
    /// it need not exist yet).
    pub fn state_dir(mut self, dir: &Path) -> Protected {
        self.hidden.push(absolute(dir));
        self
    }

    /// Protects the program file `file` (the program run, or a file it imports).
    pub fn program_file(mut self, file: &Path) -> Protected {
        let file = absolute(file);
        if !self.program.contains(&file) {
            self.program.push(file);
        }
        self
    }

    /// The program's directory, where the search for `prose.toml` starts.
    pub fn program_dir(mut self, dir: &Path) -> Protected {
        self.program_dir = Some(absolute(dir));
        self
    }

    /// The hidden directories (state directories), beyond `.prose` in the working directory.
    pub fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// The program's files.
    pub fn program_files(&self) -> &[PathBuf] {
        &self.program
    }

    /// The program's directory, if known.
    pub fn program_directory(&self) -> Option<&Path> {
        self.program_dir.as_deref()
    }

    /// Why the path `canonical` (`rel` inside the working directory) may not be read, if it
    /// may not: it is run state.
    pub fn refuses_read(&self, canonical: &Path, rel: &Path) -> Option<String> {
        if rel.starts_with(STATE_DIR) {
            return Some(format!(
                "`{STATE_DIR}/` holds the VM's run state and is never accessible to tools"
            ));
        }
        self.hidden
            .iter()
            .find(|h| canonical.starts_with(h))
            .map(|h| {
                format!(
                    "`{}` is the VM's state directory and is never accessible to tools",
                    h.display()
                )
            })
    }

    /// Why the path `canonical` (`rel` inside the working directory) may not be written, if
    /// it may not: it is run state, a `prose.toml`, inside a `.git/`, or one of the
    /// program's files.
    pub fn refuses_write(&self, canonical: &Path, rel: &Path) -> Option<String> {
        if let Some(why) = self.refuses_read(canonical, rel) {
            return Some(why);
        }
        if rel
            .components()
            .any(|c| c == Component::Normal(GIT_DIR.as_ref()))
        {
            return Some(format!(
                "`{GIT_DIR}/` is protected: its config and hooks run code when a person uses git"
            ));
        }
        if rel.file_name() == Some(CONFIG_FILE.as_ref()) {
            return Some(format!(
                "`{CONFIG_FILE}` is protected: it decides what later runs may do"
            ));
        }
        if self.program.iter().any(|p| p == canonical) {
            return Some("it is one of the program's own files, which tools never change".into());
        }
        None
    }
}

/// `path` made absolute (from the current directory) and canonical as far as it exists.
fn absolute(path: &Path) -> PathBuf {
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut existing = full.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(existing) {
            let mut out = canonical;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return full,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_names_and_configured_places_are_refused_with_reasons() {
        let root = std::env::temp_dir();
        let p = Protected::new()
            .state_dir(&root.join("no-such-state-dir/state"))
            .program_file(&root.join("prog.prose"));
        let canonical_root = std::fs::canonicalize(&root).unwrap();
        let check = |rel: &str| p.refuses_write(&canonical_root.join(rel), Path::new(rel));
        assert!(check(".prose/runs/x").unwrap().contains("run state"));
        assert!(check(".git/config").unwrap().contains("git"));
        assert!(check("sub/.git/hooks/pre-commit").is_some());
        assert!(check("prose.toml").unwrap().contains("later runs"));
        assert!(check("deep/er/prose.toml").is_some());
        assert!(check("prog.prose").unwrap().contains("program's own files"));
        assert!(check("no-such-state-dir/state/runs/j")
            .unwrap()
            .contains("state directory"));
        assert_eq!(check("notes.md"), None);
        assert_eq!(check("git/config"), None);
        assert_eq!(check("prose.toml.bak"), None);
        assert_eq!(
            p.refuses_read(&canonical_root.join("prose.toml"), Path::new("prose.toml")),
            None,
            "prose.toml is readable"
        );
    }
}
