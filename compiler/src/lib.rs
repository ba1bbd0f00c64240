//! `prosec`: the OpenProse compiler front end.
//!
//! Source text goes through [`lexer`] (tokens with layout), [`parser`] (a LALRPOP grammar
//! building the [`ast`]), [`sema`] (name resolution and the reference's validation rules,
//! producing the [`resolved`] program) and [`codegen`] (bytecode). Every problem is a
//! [`diagnostics::Diagnostic`] with a stable code.

pub mod ast;
pub mod codegen;
pub mod compile;
pub mod console;
pub mod cost;
pub mod diagnostics;
pub mod fmt;
pub mod info;
pub mod lexer;
pub mod limits;
pub mod lints;
pub mod lsp;
pub mod parser;
pub mod resolved;
pub mod sema;
pub mod ship;
pub mod source;
pub mod span;
pub mod suite;
pub mod threads;
pub mod walk;

/// The compiler and its version, as artifacts (and their signatures) name who built them.
pub const COMPILER_VERSION: &str = concat!("prosec ", env!("CARGO_PKG_VERSION"));

/// Decodes a source file's bytes. On invalid UTF-8, returns the offset of the first bad
/// byte, a message, and the text with every undecodable byte replaced by `?`: the same
/// length as the bytes, so offsets into it are offsets into the file.
pub fn decode_source(bytes: Vec<u8>) -> Result<String, (usize, String, String)> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.into_bytes();
        let message = format!(
            "source is not valid UTF-8: invalid byte sequence starting with 0x{:02x} at byte {at}",
            bytes[at]
        );
        let mut text = String::with_capacity(bytes.len());
        for chunk in bytes.utf8_chunks() {
            text.push_str(chunk.valid());
            text.extend(std::iter::repeat_n('?', chunk.invalid().len()));
        }
        (at, message, text)
    })
}
