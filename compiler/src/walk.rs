//! Finding the programs under a directory, for `prosec check`, `prosec fmt` and the language
//! server: every `.prose` file, in path order, leaving out hidden directories (the state
//! directory `.prose` among them) and what `.gitignore` and `.ignore` files exclude, in a git
//! repository or not, as ruff and ripgrep do. A state directory elsewhere (`--state-dir`)
//! is left out too: its `runs/` holds a `.gitignore` that excludes everything in it, so the
//! copies of programs kept with each run are neither checked nor reformatted.

use std::io;
use std::path::{Path, PathBuf};

/// Whether `path` names a program (`.prose`).
pub fn is_program(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "prose")
}

/// The `.prose` files `path` names: itself when it is a file (whatever its name, unless it
/// is a test or eval file), else the ones found under it. A path that does not exist, or a
/// directory that cannot be read, is an error.
pub fn prose_files(path: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    if path.is_file() && crate::suite::static_check::is_suite_file(path) {
        return Ok(());
    }
    files_of(path, is_program, out)
}

/// The test and eval files (`NAME.test.toml`, `NAME.eval.toml`) `path` names: itself when it
/// is one, else the ones found under it.
pub fn suite_files(path: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let is_suite = crate::suite::static_check::is_suite_file;
    if path.is_file() && !is_suite(path) {
        return Ok(());
    }
    files_of(path, is_suite, out)
}

/// The files `path` names that `wanted` accepts: itself when it is a file, else those
/// found under it by the rules above.
fn files_of(path: &Path, wanted: fn(&Path) -> bool, out: &mut Vec<PathBuf>) -> io::Result<()> {
    if !path.is_dir() {
        if !path.exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no such file or directory",
            ));
        }
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut found = Vec::new();
    for entry in walker(path).build() {
        let entry = entry.map_err(|e| {
            e.into_io_error()
                .unwrap_or_else(|| io::Error::other("cannot walk the directory"))
        })?;
        if entry.file_type().is_some_and(|t| t.is_file()) && wanted(entry.path()) {
            found.push(entry.into_path());
        }
    }
    found.sort();
    out.extend(found);
    Ok(())
}

/// The `.prose` files under `dir`, skipping what cannot be read.
pub fn prose_files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = walker(dir)
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
        .filter(|p| p.extension().is_some_and(|x| x == "prose"))
        .collect();
    files.sort();
    files
}

/// A walk of `dir` by the rules above; links are looked through (a loop of them is an
/// error of the walk, not an endless one).
fn walker(dir: &Path) -> ignore::WalkBuilder {
    let mut walk = ignore::WalkBuilder::new(dir);
    walk.require_git(false).follow_links(true);
    walk
}
