//! Shipping a program: fetching what it imports, pinning it, and carrying it in the
//! artifact.
//!
//! - Skill sources ([`source`]): `./path` and `../path` beside the importing program,
//!   `github:OWNER/REPO[/SUBPATH][@REF]` through the git command line ([`git`]),
//!   `npm:PACKAGE[@VERSION]` through the npm registry protocol ([`npm`]); the skill is
//!   found in the fetched tree by the rule of [`tree`].
//! - Registry programs (`use "@handle/slug"`) not under a `--lib-path` are fetched from
//!   `PROSE_REGISTRY` (default [`DEFAULT_REGISTRY`], the address the language reference
//!   gives) as `REGISTRY/@handle/slug`.
//! - Everything remote is pinned in `prose.lock` ([`lock`]) and kept in the user's cache,
//!   keyed by content ([`cache`]). A [`Fetcher`] does one build's worth of this: with
//!   `locked` it refuses to change the lock, with `offline` it uses only the cache.
//! - [`Compilation::bundle`](crate::compile::Compilation::bundle) takes the skills every
//!   module imports into a [`Bundle`], which code generation puts in the artifact.
//! - Signing keys ([`keys`]).
//!
//! Every failure is a [`FetchError`] naming what went wrong; reported as a diagnostic it
//! is located at the import, with a code per [`Failure`].

pub mod cache;
pub mod git;
pub mod http;
pub mod keys;
pub mod lock;
pub mod npm;
pub mod source;
pub mod tree;

use crate::diagnostics::{Code, Diagnostic};
use crate::span::Span;
use bytecode_spec::bundle::BundledSkill;
use cache::Cache;
use lock::{GitPin, Lock, NpmPin, ProgramPin, LOCK_FILE};
use rustc_hash::FxHashMap;
use sha2::{Digest, Sha256};
use source::Source;
use std::path::{Path, PathBuf};

/// Where registry programs come from unless `PROSE_REGISTRY` says otherwise.
pub const DEFAULT_REGISTRY: &str = "https://p.prose.md";

/// Largest registry program accepted.
const MAX_PROGRAM: usize = 4 << 20;

/// What kind of failure a [`FetchError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The repository, package, program, directory or skill does not exist (E149; E138 for
    /// a program).
    NotFound,
    /// The repository has no such ref, or the package no such version (E150).
    NoSuchRef,
    /// What was downloaded does not match its integrity or pinned hash (E151).
    Integrity,
    /// `--offline`, and the cache does not have it (E152).
    Offline,
    /// `--locked`, and `prose.lock` would have to change (E153).
    Locked,
    /// The skill was found but cannot be bundled (E154).
    InvalidSkill,
    /// Fetching failed for another reason: git or the network, a damaged lock (E155).
    Failed,
}

impl Failure {
    /// The diagnostic code.
    pub fn code(self) -> Code {
        match self {
            Failure::NotFound => Code::E149,
            Failure::NoSuchRef => Code::E150,
            Failure::Integrity => Code::E151,
            Failure::Offline => Code::E152,
            Failure::Locked => Code::E153,
            Failure::InvalidSkill => Code::E154,
            Failure::Failed => Code::E155,
        }
    }
}

/// Why a source did not give what was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchError {
    /// What kind of failure.
    pub kind: Failure,
    /// What went wrong.
    pub message: String,
    /// What to do about it, if something can be said.
    pub help: Option<String>,
}

impl FetchError {
    /// A failure with a message.
    pub fn new(kind: Failure, message: impl Into<String>) -> FetchError {
        FetchError {
            kind,
            message: message.into(),
            help: None,
        }
    }

    /// The same failure, with a help line.
    pub fn with_help(mut self, help: impl Into<String>) -> FetchError {
        self.help = Some(help.into());
        self
    }

    /// As a diagnostic at `span` of `file`, prefixed with what was being fetched.
    pub fn diagnostic(&self, file: crate::source::FileId, span: Span, what: &str) -> Diagnostic {
        let d = Diagnostic::new(
            self.kind.code(),
            file,
            span,
            format!("{what}: {}", self.message),
        );
        match (&self.help, self.kind) {
            (Some(h), _) => d.with_help(h.clone()),
            (None, Failure::Offline) => d.with_help(
                "run `prosec fetch PROGRAM` once with the network, or build without --offline",
            ),
            (None, Failure::Locked) => {
                d.with_help("build without --locked to update prose.lock, then commit it")
            }
            (None, _) => d,
        }
    }
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FetchError {}

/// How a [`Fetcher`] may go about it.
#[derive(Clone, Debug, Default)]
pub struct FetchOptions {
    /// Use only the cache: no git, no HTTP.
    pub offline: bool,
    /// Refuse to change `prose.lock` (a source it does not pin is an error).
    pub locked: bool,
    /// The cache directory (default: the user's, [`Cache::user`]).
    pub cache_dir: Option<PathBuf>,
    /// The program registry (default: `PROSE_REGISTRY`, else [`DEFAULT_REGISTRY`]).
    pub registry: Option<String>,
}

/// One build's fetching: the lock it reads and updates, the cache, the network.
pub struct Fetcher {
    options: FetchOptions,
    cache: Option<Cache>,
    lock_path: PathBuf,
    lock: Lock,
    /// The lock as read (to tell whether it changed).
    original: Lock,
    /// A lock file that could not be read: every remote source fails with this.
    lock_problem: Option<String>,
    registry: String,
    http: Option<http::Http>,
    /// Trees already fetched, by lock key (so a repository used by several imports is
    /// fetched once).
    trees: FxHashMap<String, std::rc::Rc<dyn tree::Tree>>,
    /// What was fetched from the network, for `prosec fetch` to report.
    pub fetched: Vec<String>,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("options", &self.options)
            .field("lock_path", &self.lock_path)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A fetcher for the program `program` (its `prose.lock` is beside it).
    pub fn new(program: &Path, options: FetchOptions) -> Fetcher {
        let dir = match program.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let lock_path = dir.join(LOCK_FILE);
        let (lock, lock_problem) = match Lock::read(&lock_path) {
            Ok(Some(l)) => (l, None),
            Ok(None) => (Lock::new(), None),
            Err(e) => (Lock::new(), Some(format!("{}: {e}", lock_path.display()))),
        };
        let cache = options
            .cache_dir
            .clone()
            .map(Cache::at)
            .or_else(Cache::user);
        let registry = options
            .registry
            .clone()
            .or_else(|| {
                std::env::var("PROSE_REGISTRY")
                    .ok()
                    .filter(|s| !s.is_empty())
            })
            .unwrap_or_else(|| DEFAULT_REGISTRY.to_string());
        Fetcher {
            options,
            cache,
            lock_path,
            original: lock.clone(),
            lock,
            lock_problem,
            registry: registry.trim_end_matches('/').to_string(),
            http: None,
            trees: FxHashMap::default(),
            fetched: Vec::new(),
        }
    }

    /// The `prose.lock` this fetcher reads and writes.
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    /// The lock as it stands (with what this build pinned).
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// Whether the lock differs from the file.
    pub fn lock_changed(&self) -> bool {
        self.lock != self.original
    }

    /// Writes `prose.lock` if this build changed it. Returns whether it wrote.
    pub fn save_lock(&self) -> std::io::Result<bool> {
        if !self.lock_changed() || self.options.locked {
            return Ok(false);
        }
        self.lock.write(&self.lock_path)?;
        Ok(true)
    }

    fn cache(&self) -> Result<&Cache, FetchError> {
        self.cache.as_ref().ok_or_else(|| {
            FetchError::new(
                Failure::Failed,
                "no cache directory: set XDG_CACHE_HOME or HOME",
            )
        })
    }

    fn http(&mut self) -> Result<&http::Http, FetchError> {
        if self.http.is_none() {
            self.http = Some(http::Http::new()?);
        }
        Ok(self.http.as_ref().expect("just made"))
    }

    fn usable_lock(&self) -> Result<(), FetchError> {
        match &self.lock_problem {
            Some(p) => Err(FetchError::new(
                Failure::Failed,
                format!("cannot read the lock file {p}"),
            )
            .with_help("fix it, or delete it to pin every source again")),
            None => Ok(()),
        }
    }

    /// May the lock gain or change the entry for `key`?
    fn may_pin(&self, key: &str) -> Result<(), FetchError> {
        if self.options.locked {
            return Err(FetchError::new(
                Failure::Locked,
                format!(
                    "{} does not pin `{key}`, and --locked forbids changing it",
                    self.lock_path.display()
                ),
            ));
        }
        Ok(())
    }

    fn offline(&self, what: &str) -> FetchError {
        FetchError::new(
            Failure::Offline,
            format!("--offline, and {what} is not in the cache"),
        )
    }

    /// The skill `name` from `source` (as written) for the program at `importer`.
    pub fn skill(
        &mut self,
        importer: &Path,
        name: &str,
        source: &str,
    ) -> Result<BundledSkill, FetchError> {
        let parsed = Source::parse(source).map_err(|e| FetchError::new(Failure::NotFound, e))?;
        match &parsed {
            Source::Local(rel) => {
                let origin = format!("local directory {rel}");
                if let Some(link) = tree::first_link(importer, rel) {
                    return Err(tree::invalid(name, &origin, tree::symbolic_link(&link)));
                }
                let dir = tree::local_dir(importer, rel);
                if !dir.is_dir() {
                    return Err(FetchError::new(
                        Failure::NotFound,
                        format!("there is no directory {}", dir.display()),
                    ));
                }
                let t = tree::LocalTree::new(dir);
                // Named as the import wrote it, so the artifact does not depend on where
                // it was built.
                tree::take(&t, name, None, source, &origin)
            }
            Source::Github {
                owner,
                repo,
                subpath,
                reference,
            } => {
                let url = format!("{}/{owner}/{repo}", source::GITHUB);
                let key = parsed.lock_key().expect("remote");
                let (t, commit) = self.git_tree(&key, &url, reference.as_deref())?;
                tree::take(
                    t.as_ref(),
                    name,
                    subpath.as_deref(),
                    source,
                    &format!("{url} at {commit}"),
                )
            }
            Source::Npm { package, version } => {
                let key = parsed.lock_key().expect("remote");
                let (t, pin) = self.npm_tree(&key, importer, package, version.as_deref())?;
                tree::take(
                    t.as_ref(),
                    name,
                    None,
                    source,
                    &format!("{package}@{} ({})", pin.version, pin.integrity),
                )
            }
        }
    }

    /// The commit `key` is pinned to (pinning it if allowed), and its files.
    fn git_tree(
        &mut self,
        key: &str,
        url: &str,
        reference: Option<&str>,
    ) -> Result<(std::rc::Rc<dyn tree::Tree>, String), FetchError> {
        self.usable_lock()?;
        let repo = git::Repo::open(self.cache()?.git_dir(url))?;
        let pinned = self
            .lock
            .git(key)
            .filter(|p| p.url == url && git::is_commit_id(&p.commit))
            .map(|p| p.commit.clone());
        let commit = match pinned {
            Some(commit) => {
                if !repo.has_commit(&commit) {
                    if self.options.offline {
                        return Err(self.offline(&format!("commit {commit} of {url}")));
                    }
                    repo.fetch(url, &commit)?;
                    self.fetched.push(format!("{key} at {commit}"));
                }
                commit
            }
            None => {
                if self.options.offline {
                    return Err(
                        self.offline(&format!("`{key}` (prose.lock pins no commit for it)"))
                    );
                }
                self.may_pin(key)?;
                let refs = git::ls_remote(url)?;
                let commit = git::resolve(&refs, reference, url)?;
                if !repo.has_commit(&commit) {
                    repo.fetch(url, &commit)?;
                }
                self.fetched.push(format!("{key} at {commit}"));
                self.lock.set_git(GitPin {
                    source: key.to_string(),
                    url: url.to_string(),
                    commit: commit.clone(),
                });
                commit
            }
        };
        let memo = format!("{key} {commit}");
        if let Some(t) = self.trees.get(&memo) {
            return Ok((t.clone(), commit));
        }
        let t: std::rc::Rc<dyn tree::Tree> = std::rc::Rc::new(repo.tree(&commit)?);
        self.trees.insert(memo, t.clone());
        Ok((t, commit))
    }

    /// The version `key` is pinned to (pinning it if allowed), and the package's files.
    fn npm_tree(
        &mut self,
        key: &str,
        importer: &Path,
        package: &str,
        request: Option<&str>,
    ) -> Result<(std::rc::Rc<dyn tree::Tree>, npm::Resolved), FetchError> {
        self.usable_lock()?;
        let config = npm::NpmConfig::for_dir(importer.parent().unwrap_or(Path::new(".")));
        let pinned = self.lock.npm(key).map(|p| npm::Resolved {
            version: p.version.clone(),
            tarball: p.tarball.clone(),
            integrity: p.integrity.clone(),
        });
        let pin = match pinned {
            Some(p) => p,
            None => {
                if self.options.offline {
                    return Err(
                        self.offline(&format!("`{key}` (prose.lock pins no version for it)"))
                    );
                }
                self.may_pin(key)?;
                let http = self.http()?;
                let p = npm::resolve(http, &config, package, request)?;
                self.lock.set_npm(NpmPin {
                    source: key.to_string(),
                    version: p.version.clone(),
                    tarball: p.tarball.clone(),
                    integrity: p.integrity.clone(),
                });
                p
            }
        };
        let memo = format!("{key} {}", pin.integrity);
        if let Some(t) = self.trees.get(&memo) {
            return Ok((t.clone(), pin));
        }
        let sha = npm::sha512_of(&pin.integrity).ok_or_else(|| {
            FetchError::new(
                Failure::Integrity,
                format!("prose.lock gives `{key}` no SHA-512 integrity"),
            )
        })?;
        let cache = self.cache()?.clone();
        let tgz = match cache.read_tarball(&sha) {
            Some(bytes) => bytes,
            None => {
                if self.options.offline {
                    return Err(self.offline(&format!("`{package}@{}`", pin.version)));
                }
                let http = self.http()?;
                let bytes = npm::download(http, &config, package, &pin)?;
                cache.store(&cache.tarball(&sha), &bytes).map_err(|e| {
                    FetchError::new(Failure::Failed, format!("cannot write the cache: {e}"))
                })?;
                self.fetched.push(format!("{key} as {}", pin.version));
                bytes
            }
        };
        let t: std::rc::Rc<dyn tree::Tree> =
            std::rc::Rc::new(npm::unpack(&tgz, &format!("{package}@{}", pin.version))?);
        self.trees.insert(memo, t.clone());
        Ok((t, pin))
    }

    /// The registry program `@handle/slug`: its file in the cache (pinning it if allowed).
    pub fn program(&mut self, path: &str) -> Result<PathBuf, FetchError> {
        self.usable_lock()?;
        let url = format!("{}/{path}", self.registry);
        let pinned = self.lock.program(path).and_then(|p| {
            decode_hex(&p.sha256)
                .filter(|h| h.len() == 32)
                .map(|h| (p.url.clone(), h))
        });
        let cache = self.cache()?.clone();
        if let Some((_, sha)) = &pinned {
            if let Some((file, _)) = cache.read_program(sha) {
                return Ok(file);
            }
        }
        if self.options.offline {
            return Err(self.offline(&format!("program `{path}`")));
        }
        let url = pinned.as_ref().map_or(url, |(u, _)| u.clone());
        let resp = self
            .http()?
            .get(&url, "text/plain, */*", None, MAX_PROGRAM)?;
        match resp.status {
            200 => {}
            404 => {
                return Err(FetchError::new(
                    Failure::NotFound,
                    format!("{url} has no such program"),
                )
                .with_help("check the name, set PROSE_REGISTRY, or pass --lib-path DIR with DIR/@handle/slug.prose"))
            }
            s => {
                return Err(FetchError::new(
                    Failure::Failed,
                    format!("{url} answered {s}"),
                ))
            }
        }
        let sha: Vec<u8> = Sha256::digest(&resp.body).to_vec();
        match pinned {
            Some((_, want)) if want != sha => {
                return Err(FetchError::new(
                    Failure::Integrity,
                    format!(
                    "{url} now serves a program whose SHA-256 is {}, not the {} prose.lock pins",
                    cache::hex(&sha),
                    cache::hex(&want)
                ),
                )
                .with_help(
                    "if the change is expected, delete its entry from prose.lock and build again",
                ))
            }
            Some(_) => {}
            None => {
                self.may_pin(path)?;
                self.lock.set_program(ProgramPin {
                    source: path.to_string(),
                    url: url.clone(),
                    sha256: cache::hex(&sha),
                });
            }
        }
        let file = cache.program(&sha);
        cache.store(&file, &resp.body).map_err(|e| {
            FetchError::new(Failure::Failed, format!("cannot write the cache: {e}"))
        })?;
        self.fetched.push(format!("{path} from {url}"));
        Ok(file)
    }
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The skills of a build: each bundled once, and what each module imports.
#[derive(Clone, Debug, Default)]
pub struct Bundle {
    /// The skills, in the order first imported.
    pub skills: Vec<BundledSkill>,
    /// For each module of the compilation (by index): each imported name and its skill.
    pub imports: FxHashMap<usize, Vec<(String, u32)>>,
}
