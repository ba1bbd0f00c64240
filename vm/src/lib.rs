//! `prosevm`: executes `.pbc` artifacts produced by `prosec`.
//!
//! The interpreter arrives with the VM issue; for now the crate only checks that an
//! artifact carries the format's magic bytes.

/// True when `bytes` start with the `.pbc` magic.
pub fn looks_like_artifact(bytes: &[u8]) -> bool {
    bytes.starts_with(&bytecode_spec::artifact::MAGIC)
}

#[cfg(test)]
mod tests {
    #[test]
    fn recognises_magic() {
        assert!(super::looks_like_artifact(b"PBC\0rest"));
        assert!(!super::looks_like_artifact(b"nope"));
    }
}
