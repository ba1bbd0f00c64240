//! The contract between the compiler and the VM: the instruction set, module tables, the
//! `.pbc` artifact framing and its verifier (see `SPEC.md`).
//!
//! This crate currently holds the format's identity constants; the instruction set arrives
//! with the code generator.

/// The first bytes of every `.pbc` artifact.
pub const MAGIC: [u8; 4] = *b"PBC\0";

/// The artifact format version this crate reads and writes.
pub const FORMAT_VERSION: u16 = 1;
