//! The artifacts uploaded to a server, by content: `artifacts/SHA256.pbc` under the server's
//! directory. Each is verified (and its signature checked against the trusted keys, when
//! the server has any) before it is kept, so every artifact a run names here loads.

use bytecode_spec::signature::{self, TrustKey};
use prose_runtime::program::{sha256_hex, Program};
use std::path::{Path, PathBuf};

/// Why an upload is refused.
#[derive(Debug)]
pub enum Refused {
    /// It is not a valid artifact: the verifier's reason.
    Invalid(String),
    /// Its signature is not one the server trusts.
    Untrusted(String),
    /// It could not be kept.
    Io(String),
}

/// The library of artifacts.
pub struct Library {
    dir: PathBuf,
    trust: Vec<TrustKey>,
}

impl Library {
    /// The library in `dir`, accepting only artifacts signed by one of `trust` when it names
    /// any.
    pub fn new(dir: PathBuf, trust: Vec<TrustKey>) -> Library {
        Library { dir, trust }
    }

    /// Where the artifacts are (the directory of the programs the server runs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}.pbc"))
    }

    /// Verifies `bytes` and keeps them; returns their SHA-256. Uploading an artifact again
    /// is no error.
    pub fn add(&self, bytes: Vec<u8>) -> Result<String, Refused> {
        if !self.trust.is_empty() {
            let trust = signature::check(&bytes, &self.trust)
                .map_err(|e| Refused::Invalid(e.to_string()))?;
            if !trust.is_trusted() {
                return Err(Refused::Untrusted(trust.to_string()));
            }
        }
        let sha = sha256_hex(&bytes);
        let path = self.path(&sha);
        let program = Program::from_bytes(bytes, path.clone())
            .map_err(|e| Refused::Invalid(e.to_string()))?;
        if path.is_file() {
            // Uploaded again: the newest of its program's versions (see [`Library::list`]).
            let now = std::time::SystemTime::now();
            let _ = std::fs::File::options()
                .append(true)
                .open(&path)
                .and_then(|f| f.set_modified(now));
            return Ok(sha);
        }
        let io = |e: std::io::Error| Refused::Io(format!("{}: {e}", path.display()));
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        // Written aside, then renamed: a reader never sees half an artifact.
        let tmp = self.dir.join(format!(".{sha}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, &program.bytes).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        Ok(sha)
    }

    /// Every artifact kept: its SHA-256 and when it was uploaded last, newest first (by
    /// SHA-256 among artifacts uploaded at the same time).
    pub fn list(&self) -> Vec<(String, std::time::SystemTime)> {
        let mut all: Vec<(String, std::time::SystemTime)> = std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        let name = e.file_name().into_string().ok()?;
                        let sha = name.strip_suffix(".pbc")?;
                        let hex = sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit());
                        let when = e.metadata().ok()?.modified().ok()?;
                        hex.then(|| (sha.to_string(), when))
                    })
                    .collect()
            })
            .unwrap_or_default();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all
    }

    /// The program with SHA-256 `sha256`, if the library has it.
    pub fn get(&self, sha256: &str) -> Option<Program> {
        // Only hex names: the name becomes a path.
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let path = self.path(&sha256.to_ascii_lowercase());
        let bytes = bytecode_spec::artifact::read_file(&path).ok()?;
        Program::from_bytes(bytes, path).ok()
    }

    /// Whether `origin` (a run record's) is a program of this library: the run is this
    /// server's.
    pub fn holds(&self, origin: &Path) -> bool {
        origin.parent() == Some(self.dir.as_path())
    }
}
