//! The cache of fetched sources, in the user's cache directory (`$XDG_CACHE_HOME/prose`,
//! else `~/.cache/prose`), keyed by content:
//!
//! - `git/<hash of the URL>/`: a bare repository per remote; git keys its objects by
//!   content, and `prose.lock` pins the commit;
//! - `npm/<hex of the SHA-512>.tgz`: package tarballs, by their integrity;
//! - `programs/<hex of the SHA-256>.prose`: registry programs, by their hash.
//!
//! What is read back is hashed again, so a damaged or tampered cache entry is never used.
//! Files are written under a temporary name and renamed into place, so an interrupted
//! write never leaves a partial entry.

use sha2::{Digest, Sha256, Sha512};
use std::path::{Path, PathBuf};

/// The cache directory.
#[derive(Clone, Debug)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// The cache at `root`.
    pub fn at(root: PathBuf) -> Cache {
        Cache { root }
    }

    /// The user's cache: `$XDG_CACHE_HOME/prose`, else `$HOME/.cache/prose`.
    pub fn user() -> Option<Cache> {
        prose_settings::files::user_cache_dir().map(Cache::at)
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The bare repository that holds what was fetched from `url`.
    pub fn git_dir(&self, url: &str) -> PathBuf {
        let h = Sha256::digest(url.as_bytes());
        self.root.join("git").join(hex(&h[..12]))
    }

    /// Where a tarball with SHA-512 `sha512` is kept.
    pub fn tarball(&self, sha512: &[u8]) -> PathBuf {
        self.root.join("npm").join(format!("{}.tgz", hex(sha512)))
    }

    /// Where a registry program with SHA-256 `sha256` is kept.
    pub fn program(&self, sha256: &[u8]) -> PathBuf {
        self.root
            .join("programs")
            .join(format!("{}.prose", hex(sha256)))
    }

    /// The tarball with SHA-512 `sha512`, if the cache has it intact.
    pub fn read_tarball(&self, sha512: &[u8]) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.tarball(sha512)).ok()?;
        (Sha512::digest(&bytes).as_slice() == sha512).then_some(bytes)
    }

    /// The program with SHA-256 `sha256`, if the cache has it intact.
    pub fn read_program(&self, sha256: &[u8]) -> Option<(PathBuf, Vec<u8>)> {
        let path = self.program(sha256);
        let bytes = std::fs::read(&path).ok()?;
        (Sha256::digest(&bytes).as_slice() == sha256).then_some((path, bytes))
    }

    /// Writes `bytes` at `path` (a path of this cache) atomically.
    pub fn store(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let dir = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}

/// Lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytecode_spec::bundle::hex(bytes)
}
