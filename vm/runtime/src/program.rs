//! A program to run: a verified artifact, its bytes, and where it came from.

use bytecode_spec::artifact::LoadError;
use bytecode_spec::verify::Verified;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::Arc;

/// A verified program and where it came from.
pub struct Program {
    /// The artifact, verified.
    pub artifact: Arc<Verified>,
    /// Its bytes (kept in the run directory as `artifact.pbc`).
    pub bytes: Vec<u8>,
    /// The `.pbc` or `.prose` file it came from.
    pub origin: PathBuf,
}

impl Program {
    /// Loads and verifies the artifact `bytes`, read or compiled from `origin`.
    pub fn from_bytes(bytes: Vec<u8>, origin: PathBuf) -> Result<Program, LoadError> {
        let (_, artifact) = bytecode_spec::artifact::load(&bytes)?;
        Ok(Program {
            artifact: Arc::new(artifact),
            bytes,
            origin,
        })
    }
}

impl Program {
    /// SHA-256 of its bytes, in hex: how stores name its artifact.
    pub fn sha256(&self) -> String {
        sha256_hex(&self.bytes)
    }
}

/// SHA-256 of `bytes`, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
