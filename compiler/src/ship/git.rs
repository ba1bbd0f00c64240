//! Repositories, fetched with the git command line so that the user's own configuration
//! applies: `url.<base>.insteadOf` rewrites, credential helpers, proxies, certificates (as
//! cargo does with `net.git-fetch-with-cli`). Each remote has a bare repository in the cache;
//! only the commit needed is fetched (`--depth 1`), and files are read from git's object
//! store, never checked out.

use super::tree::{Kind, Tree};
use super::{Failure, FetchError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A `git` command that ignores repository settings leaking from the caller's environment
/// (`GIT_DIR` of a hook, say) but keeps the user's configuration.
fn git(db: Option<&Path>) -> Command {
    let mut cmd = Command::new("git");
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
    ] {
        cmd.env_remove(var);
    }
    if let Some(db) = db {
        cmd.arg("--git-dir").arg(db);
    }
    cmd.stdin(Stdio::null());
    cmd
}

fn run(mut cmd: Command) -> Result<Output, FetchError> {
    cmd.output().map_err(|e| {
        FetchError::new(Failure::Failed, format!("cannot run git: {e}"))
            .with_help("install git: repositories are fetched with the git command line")
    })
}

/// The last lines git wrote on stderr, for an error message.
fn stderr_of(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(4)..].join("; ")
}

/// The refs of the repository at `url`: `(commit, name)`, with `HEAD` and peeled tags
/// (`refs/tags/v1^{}`) as `git ls-remote` lists them.
pub fn ls_remote(url: &str) -> Result<Vec<(String, String)>, FetchError> {
    let mut cmd = git(None);
    cmd.args(["ls-remote", "--", url]);
    let out = run(cmd)?;
    if !out.status.success() {
        let why = stderr_of(&out);
        let lower = String::from_utf8_lossy(&out.stderr).to_lowercase();
        let kind = if lower.contains("not found")
            || lower.contains("does not appear to be a git repository")
            || lower.contains("does not exist")
        {
            Failure::NotFound
        } else {
            Failure::Failed
        };
        return Err(FetchError::new(
            kind,
            format!("git cannot list {url}: {why}"),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (sha, name) = l.split_once('\t')?;
            Some((sha.trim().to_string(), name.trim().to_string()))
        })
        .collect())
}

/// Whether `s` is a full commit id.
pub fn is_commit_id(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit `reference` names among `refs` (the default branch for none): a tag (peeled),
/// a branch, a full ref name, or a full commit id.
pub fn resolve(
    refs: &[(String, String)],
    reference: Option<&str>,
    url: &str,
) -> Result<String, FetchError> {
    // What the remote lists is not trusted to be a commit id (it becomes part of a refspec).
    let find = |name: &str| {
        refs.iter()
            .find(|(s, n)| n == name && is_commit_id(s))
            .map(|(s, _)| s.to_lowercase())
    };
    let Some(r) = reference else {
        return find("HEAD").ok_or_else(|| {
            FetchError::new(
                Failure::NoSuchRef,
                format!("{url} has no default branch (HEAD)"),
            )
        });
    };
    if is_commit_id(r) {
        return Ok(r.to_lowercase());
    }
    let found = find(&format!("refs/tags/{r}^{{}}"))
        .or_else(|| find(&format!("refs/tags/{r}")))
        .or_else(|| find(&format!("refs/heads/{r}")))
        .or_else(|| find(r).filter(|_| r.starts_with("refs/")));
    found.ok_or_else(|| {
        let mut known: Vec<&str> = refs
            .iter()
            .filter_map(|(_, n)| {
                n.strip_prefix("refs/heads/")
                    .or_else(|| n.strip_prefix("refs/tags/"))
            })
            .filter(|n| !n.ends_with("^{}"))
            .collect();
        known.truncate(10);
        let help = if known.is_empty() {
            "the repository has no branches or tags".to_string()
        } else {
            format!("it has {}", known.join(", "))
        };
        FetchError::new(
            Failure::NoSuchRef,
            format!("{url} has no branch, tag or commit `{r}`"),
        )
        .with_help(help)
    })
}

/// The cache's bare repository for a remote.
pub struct Repo {
    db: PathBuf,
}

impl Repo {
    /// The repository at `db`, made if missing.
    pub fn open(db: PathBuf) -> Result<Repo, FetchError> {
        if !db.join("HEAD").is_file() {
            std::fs::create_dir_all(&db).map_err(|e| {
                FetchError::new(
                    Failure::Failed,
                    format!("cannot create {}: {e}", db.display()),
                )
            })?;
            let mut cmd = git(None);
            cmd.args(["init", "--bare", "--quiet"]).arg(&db);
            let out = run(cmd)?;
            if !out.status.success() {
                return Err(FetchError::new(
                    Failure::Failed,
                    format!("git cannot create {}: {}", db.display(), stderr_of(&out)),
                ));
            }
        }
        Ok(Repo { db })
    }

    /// Whether the repository has commit `sha`.
    pub fn has_commit(&self, sha: &str) -> bool {
        let mut cmd = git(Some(&self.db));
        cmd.args(["cat-file", "-e", &format!("{sha}^{{commit}}")]);
        cmd.stderr(Stdio::null());
        cmd.status().is_ok_and(|s| s.success())
    }

    /// Fetches commit `sha` from `url` (only it, not its history), keeping a ref to it.
    pub fn fetch(&self, url: &str, sha: &str) -> Result<(), FetchError> {
        let mut cmd = git(Some(&self.db));
        cmd.args(["fetch", "--quiet", "--no-tags", "--depth", "1", "--", url])
            .arg(format!("{sha}:refs/prose/{sha}"));
        let out = run(cmd)?;
        if !out.status.success() || !self.has_commit(sha) {
            let why = stderr_of(&out);
            let kind = if why.contains("not our ref") || why.contains("couldn't find") {
                Failure::NoSuchRef
            } else {
                Failure::Failed
            };
            return Err(FetchError::new(
                kind,
                format!("git cannot fetch commit {sha} from {url}: {why}"),
            ));
        }
        Ok(())
    }

    /// The files of commit `sha`.
    pub fn tree(&self, sha: &str) -> Result<GitTree, FetchError> {
        let mut cmd = git(Some(&self.db));
        cmd.args(["ls-tree", "-r", "-l", "-z", "--full-tree", sha]);
        let out = run(cmd)?;
        if !out.status.success() {
            return Err(FetchError::new(
                Failure::Failed,
                format!("git cannot list commit {sha}: {}", stderr_of(&out)),
            ));
        }
        let mut entries = BTreeMap::new();
        for record in out.stdout.split(|&b| b == 0) {
            let Some(tab) = record.iter().position(|&b| b == b'\t') else {
                continue;
            };
            let meta = String::from_utf8_lossy(&record[..tab]);
            let path = String::from_utf8_lossy(&record[tab + 1..]).into_owned();
            let fields: Vec<&str> = meta.split_whitespace().collect();
            let [mode, kind, oid, size] = fields[..] else {
                continue;
            };
            let kind = match (mode, kind) {
                ("120000", _) => Kind::Link,
                (_, "blob") => Kind::File(size.parse().unwrap_or(u64::MAX)),
                _ => Kind::Other,
            };
            entries.insert(path, (kind, oid.to_string()));
        }
        Ok(GitTree {
            db: self.db.clone(),
            entries,
        })
    }
}

/// The files of one commit.
pub struct GitTree {
    db: PathBuf,
    entries: BTreeMap<String, (Kind, String)>,
}

impl Tree for GitTree {
    fn kind(&self, path: &str) -> Option<Kind> {
        self.entries.get(path).map(|(k, _)| *k)
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
            .filter_map(|(p, (k, _))| p.strip_prefix(&prefix).map(|rel| (rel.to_string(), *k)))
            .filter(|(rel, _)| !rel.split('/').any(|c| c == ".git"))
            .collect())
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        let (_, oid) = self
            .entries
            .get(path)
            .ok_or_else(|| format!("no file `{path}` in the commit"))?;
        let mut cmd = git(Some(&self.db));
        cmd.args(["cat-file", "blob", oid]);
        let out = cmd.output().map_err(|e| format!("cannot run git: {e}"))?;
        if !out.status.success() {
            return Err(format!("git cannot read `{path}`: {}", stderr_of(&out)));
        }
        Ok(out.stdout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_resolve_to_commit_ids_only() {
        let c1 = "1".repeat(40);
        let c2 = "2".repeat(40);
        let refs = vec![
            (c1.clone(), "HEAD".to_string()),
            (c1.clone(), "refs/heads/main".to_string()),
            ("3".repeat(40), "refs/tags/v1".to_string()),
            (c2.clone(), "refs/tags/v1^{}".to_string()),
            ("--upload-pack=x".to_string(), "refs/heads/evil".to_string()),
        ];
        assert_eq!(resolve(&refs, None, "u"), Ok(c1.clone()));
        assert_eq!(resolve(&refs, Some("main"), "u"), Ok(c1.clone()));
        // A tag is its commit, not the tag object.
        assert_eq!(resolve(&refs, Some("v1"), "u"), Ok(c2.clone()));
        assert_eq!(resolve(&refs, Some(&c2.to_uppercase()), "u"), Ok(c2));
        assert_eq!(
            resolve(&refs, Some("evil"), "u").unwrap_err().kind,
            Failure::NoSuchRef
        );
        let e = resolve(&refs, Some("v2"), "u").unwrap_err();
        assert_eq!(e.kind, Failure::NoSuchRef);
        assert_eq!(e.help.as_deref(), Some("it has main, v1, evil"));
    }
}
