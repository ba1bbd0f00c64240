//! Feeds arbitrary bytes through decoding, lexing, parsing, checking and both diagnostic
//! renderers. Any panic, overflow or hang is a bug.
#![no_main]

use codespan_reporting::term::termcolor::NoColor;
use libfuzzer_sys::fuzz_target;
use prosec::compile::{Compilation, Options};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = match prosec::decode_source(data.to_vec()) {
        Ok(t) => t,
        Err((_, _, lossy)) => lossy,
    };
    let mut c = Compilation::new(Options::default());
    c.add_source(Path::new("fuzz.prose"), &text);
    let mut out = NoColor::new(Vec::new());
    let _ = prosec::diagnostics::render_text(&mut out, &c.sources, &c.diagnostics);
    let _ = prosec::diagnostics::render_json(&c.sources, &c.diagnostics);
});
