//! The contract between the compiler and the VM: the instruction set ([`Op`]), the module
//! tables ([`Module`]), the `.pbc` artifact framing ([`artifact`]), the verifier
//! ([`verify`]), the skills an artifact carries ([`bundle`]), signatures ([`signature`]),
//! the rules for names that become file names ([`names`]), a disassembler ([`dis`]), the
//! diagnostic codes both sides report ([`codes`], with the "did you mean" of [`suggest`]),
//! and the bounded reads of files someone else may have placed ([`bounded`]). `SPEC.md`
//! documents all of it for humans.

pub mod artifact;
pub mod bounded;
pub mod bundle;
pub mod codes;
pub mod dis;
mod ids;
mod module;
pub mod names;
mod op;
pub mod signature;
pub mod suggest;
pub mod verify;

pub use codes::{Code, CodeKind, Severity};
pub use ids::*;
pub use module::*;
pub use op::*;
