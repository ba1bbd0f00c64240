//! Which Landlock rights a command gets where: the reads and writes bubblewrap's mounts give,
//! as far as rules on directory trees can express them.
//!
//! A Landlock rule on a directory grants its rights on everything beneath it, and nothing
//! takes a right away from a part of the tree. So where a tree holds a place that must stay
//! out of reach, the tree gets no rule of its own: each of its entries does, one by one,
//! except that place; a directory on the way gets only the right to list it.
//!
//! - **Reads** ([`Sets::read_roots`]): everything from `/`, but the unreadable places
//!   ([`Sets::unreadable`]: the state directories, `/tmp` and `/dev`) are left out, and the
//!   part of `/tmp` that holds the working directory comes back, as bubblewrap binds it.
//! - **Writes** ([`Sets::write_roots`]): every write root, but the places kept read-only or
//!   hidden inside them ([`Sets::kept`]) are left out, and a directory that holds one (or is
//!   the working directory) is **pinned**: its files can be written, but nothing can be
//!   created, removed or renamed directly in it, since that right would reach the kept place
//!   too. Its other subdirectories are writable whole.
//! - **Devices**: the basic ones bubblewrap's `/dev` holds, readable and writable.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{make_bitflags, Access, AccessFs, BitFlags};

use super::super::beneath::{self, is_link_error, EntryKind, Mode, Root, Strategy};

/// The basic devices, as bubblewrap's `--dev` makes them.
pub(super) const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// What a command may read and write, by path.
#[derive(Debug)]
pub(super) struct Sets {
    /// Trees readable whole, but for what [`Sets::unreadable`] takes out of them.
    pub read_roots: Vec<PathBuf>,
    /// Places never readable (unless a read root lies inside one: it is read whole).
    pub unreadable: Vec<PathBuf>,
    /// Trees writable whole, but for what [`Sets::kept`] takes out of them.
    pub write_roots: Vec<PathBuf>,
    /// Existing places inside the write roots that stay read-only (or hidden).
    pub kept: Vec<PathBuf>,
    /// Directories pinned whatever they hold: the working directory.
    pub pinned: Vec<PathBuf>,
}

/// One rule: a handle and the rights granted on it (and beneath it, for a directory).
pub(super) type Grant = (OwnedFd, BitFlags<AccessFs>);

/// Reading a file or a tree: contents, listings, running programs, and connecting to the
/// named UNIX sockets there (where the kernel's Landlock handles that, ABI 9 on).
fn read() -> BitFlags<AccessFs> {
    make_bitflags!(AccessFs::{ReadFile | ReadDir | Execute | ResolveUnix})
}

/// Everything in a writable tree, but making device files.
fn write() -> BitFlags<AccessFs> {
    AccessFs::from_all(landlock::ABI::V10) & !make_bitflags!(AccessFs::{MakeChar | MakeBlock})
}

/// The rights that mean something on a file that is not a directory, of `rights`.
fn on_file(rights: BitFlags<AccessFs>) -> BitFlags<AccessFs> {
    rights & AccessFs::from_file(landlock::ABI::V10)
}

impl Sets {
    /// The rules for these sets, each limited to `handled` (the rights the ruleset handles).
    /// Write roots inside `base` (the working directory) are opened beneath it, following
    /// no link: one swapped in meanwhile makes this fail, never grants what it leads to.
    pub(super) fn grants(
        &self,
        base: &Root,
        handled: BitFlags<AccessFs>,
    ) -> Result<Vec<Grant>, String> {
        let mut grants = Vec::new();
        for root in &self.read_roots {
            if let Some(h) = open(root)? {
                self.read_tree(h, root, &mut grants)?;
            }
        }
        for root in &self.write_roots {
            let handle = match root.strip_prefix(base.path()) {
                Ok(rel) => Some(
                    base.open_file(rel, Mode::Handle, Strategy::Best)
                        .map_err(|e| {
                            if is_link_error(&e) {
                                format!(
                                    "`{}` became a symbolic link while the sandbox was set up",
                                    root.display()
                                )
                            } else {
                                shown(root, e)
                            }
                        })?
                        .into(),
                ),
                Err(_) => open(root)?,
            };
            if let Some(h) = handle {
                self.write_tree(h, root, &mut grants)?;
            }
        }
        for device in DEVICES {
            if let Some(h) = open(Path::new(device))? {
                let rights = make_bitflags!(AccessFs::{ReadFile | WriteFile | IoctlDev});
                grants.push((h, rights));
            }
        }
        Ok(grants
            .into_iter()
            .map(|(h, rights)| (h, rights & handled))
            .filter(|(_, rights)| !rights.is_empty())
            .collect())
    }

    /// Read rules for the directory `dir` at `path`: one on it if nothing unreadable lies
    /// beneath, else a listing right and rules for its entries.
    fn read_tree(&self, dir: OwnedFd, path: &Path, grants: &mut Vec<Grant>) -> Result<(), String> {
        if self.unreadable.iter().any(|u| u == path) {
            return Ok(());
        }
        if !self.unreadable.iter().any(|u| u.starts_with(path)) {
            grants.push((dir, read()));
            return Ok(());
        }
        for entry in list(&dir, path)? {
            let at = path.join(&entry.name);
            match entry.kind {
                EntryKind::Link => {}
                EntryKind::Dir => self.read_tree(entry.handle, &at, grants)?,
                EntryKind::Other if self.unreadable.contains(&at) => {}
                EntryKind::Other => grants.push((entry.handle, on_file(read()))),
            }
        }
        grants.push((dir, AccessFs::ReadDir.into()));
        Ok(())
    }

    /// Write rules for the directory `dir` at `path`: one on it unless it is pinned, else one
    /// on each of its entries but the kept ones.
    fn write_tree(&self, dir: OwnedFd, path: &Path, grants: &mut Vec<Grant>) -> Result<(), String> {
        if self.kept.iter().any(|k| k == path) {
            return Ok(());
        }
        let pinned =
            self.pinned.iter().any(|p| p == path) || self.kept.iter().any(|k| k.starts_with(path));
        if !pinned {
            grants.push((dir, write()));
            return Ok(());
        }
        for entry in list(&dir, path)? {
            let at = path.join(&entry.name);
            match entry.kind {
                EntryKind::Link => {}
                EntryKind::Dir => self.write_tree(entry.handle, &at, grants)?,
                EntryKind::Other if self.kept.contains(&at) => {}
                EntryKind::Other => grants.push((entry.handle, on_file(write()))),
            }
        }
        Ok(())
    }

    /// Whether a command can create entries in the directory `dir` (which need not exist),
    /// with `exists` saying which directories existed when the rules were made: the first
    /// directory from its write root down that is not pinned gets a rule of its own if it
    /// existed, and everything beneath it is writable; kept places are not.
    pub(super) fn creates_in(&self, dir: &Path, exists: impl Fn(&Path) -> bool) -> bool {
        let Some(root) = self.write_roots.iter().find(|r| dir.starts_with(r)) else {
            return false;
        };
        let mut down: Vec<&Path> = dir
            .ancestors()
            .take_while(|a| a.starts_with(root))
            .collect();
        down.reverse();
        for at in down {
            if self.kept.iter().any(|k| at.starts_with(k)) {
                return false;
            }
            let pinned =
                self.pinned.iter().any(|p| p == at) || self.kept.iter().any(|k| k.starts_with(at));
            if !pinned {
                return exists(at);
            }
        }
        false
    }
}

/// A handle to `path`, or `None` where nothing (or a link) is there.
fn open(path: &Path) -> Result<Option<OwnedFd>, String> {
    match beneath::handle(path) {
        Ok(h) => {
            let link = std::fs::File::from(h.try_clone().map_err(|e| shown(path, e))?)
                .metadata()
                .map_err(|e| shown(path, e))?
                .file_type()
                .is_symlink();
            Ok((!link).then_some(h))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(shown(path, e)),
    }
}

/// The entries of the directory `dir` at `path`.
fn list(dir: &OwnedFd, path: &Path) -> Result<Vec<beneath::Entry>, String> {
    beneath::entries(dir).map_err(|e| shown(path, e))
}

fn shown(path: &Path, e: std::io::Error) -> String {
    format!("`{}`: {e}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_holding_a_kept_place_is_pinned_and_its_other_trees_are_not() {
        let sets = Sets {
            read_roots: vec![PathBuf::from("/")],
            unreadable: Vec::new(),
            write_roots: vec![PathBuf::from("/w"), PathBuf::from("/w2/out")],
            kept: vec![PathBuf::from("/w/a/b/.git")],
            pinned: vec![PathBuf::from("/w")],
        };
        let existing = ["/w", "/w/a", "/w/a/b", "/w/a/c", "/w/src", "/w2/out"];
        let exists = |p: &Path| existing.iter().any(|e| Path::new(e) == p);
        for (dir, creates) in [
            ("/w", false),
            ("/w/a", false),
            ("/w/a/b", false),
            ("/w/a/b/.git", false),
            ("/w/a/b/.git/hooks", false),
            ("/w/src", true),
            ("/w/src/deep/er", true),
            ("/w/a/c", true),
            // Made in a pinned directory, which nothing can be.
            ("/w/new", false),
            ("/w2/out", true),
            ("/w2/out/new", true),
            ("/w2", false),
        ] {
            assert_eq!(sets.creates_in(Path::new(dir), exists), creates, "{dir}");
        }
    }
}
