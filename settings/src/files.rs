//! Where `prose.toml` files are, and how they layer. A project's file is the nearest one in
//! the program's directory or above it (as Cargo finds `Cargo.toml`); the user's is
//! `$XDG_CONFIG_HOME/prose/prose.toml`, else `~/.config/prose/prose.toml`. The project's
//! settings win over the user's.

use std::path::{Path, PathBuf};

/// The settings file's name.
pub const FILE_NAME: &str = "prose.toml";

/// The nearest `prose.toml` in `dir` or a directory above it (`dir` as given: callers that
/// want symbolic links resolved canonicalise it first).
pub fn project_file(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|d| d.join(FILE_NAME))
        .find(|p| p.is_file())
}

/// The user's `prose.toml` (which may not exist).
pub fn user_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("prose").join(FILE_NAME))
}

/// The user's cache directory for prose: `$XDG_CACHE_HOME/prose` (an absolute path), else
/// `$HOME/.cache/prose`; `None` without either. Fetched sources and the skills artifacts
/// carry are kept there.
pub fn user_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("prose"))
}

/// The settings for a program in `start` (its directory): those `path` gives if given (it
/// must exist); else the project's `prose.toml`, found upward from `start`, over the user's;
/// else the defaults. `read` reads one file; `under` puts one file's settings under
/// another's. The one layering both tools use.
pub fn layered<T: Default, E>(
    path: Option<&Path>,
    start: &Path,
    read: impl Fn(&Path) -> Result<T, E>,
    under: impl FnOnce(T, T) -> T,
) -> Result<T, E> {
    if let Some(p) = path {
        return read(p);
    }
    let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    over_users(project_file(&start).as_deref(), read, under)
}

/// The user's settings with those of `project` (a project's `prose.toml`, if it has one)
/// over them: the layering of [`layered`] once the project's file is found.
pub fn over_users<T: Default, E>(
    project: Option<&Path>,
    read: impl Fn(&Path) -> Result<T, E>,
    under: impl FnOnce(T, T) -> T,
) -> Result<T, E> {
    let user = match user_file() {
        Some(p) if p.is_file() => read(&p)?,
        _ => T::default(),
    };
    match project {
        Some(p) => Ok(under(user, read(p)?)),
        None => Ok(user),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_file_above_is_the_projects() {
        let dir = std::env::temp_dir().join(format!("prosec-settings-{}", std::process::id()));
        let deep = dir.join("a/b");
        std::fs::create_dir_all(&deep).expect("dirs");
        std::fs::write(dir.join(FILE_NAME), "").expect("outer");
        assert_eq!(project_file(&deep), Some(dir.join(FILE_NAME)));
        std::fs::write(dir.join("a").join(FILE_NAME), "").expect("inner");
        assert_eq!(project_file(&deep), Some(dir.join("a").join(FILE_NAME)));
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
