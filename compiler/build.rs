//! Generates the LALRPOP parser from `src/grammar.lalrpop` into OUT_DIR, then defers its
//! expected-token lists (see `DeferredExpected` in `src/parser/mod.rs`).

use std::path::Path;

fn main() {
    lalrpop::Configuration::new()
        .use_cargo_dir_conventions()
        .emit_rerun_directives(true)
        // Regenerate whenever this script runs: the file on disk may already be edited.
        .force_build(true)
        .process()
        .expect("the grammar in src/grammar.lalrpop must generate a parser");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let path = Path::new(&out).join("grammar.rs");
    let text = std::fs::read_to_string(&path).expect("LALRPOP wrote grammar.rs");
    std::fs::write(&path, defer_expected(text)).expect("grammar.rs is writable");
}

/// The generated parser works out, at every syntax error, which terminals could have come
/// next, by simulating the parse once per terminal. Most errors are cascades that are
/// never reported, so the parser is changed to hand the states to the parse context
/// instead, and the computation is exposed for the errors that are reported.
fn defer_expected(text: String) -> String {
    // (what LALRPOP 0.23 generates, what it becomes)
    let edits = [
        (
            "__expected_tokens_from_states(states, core::marker::PhantomData::<(&())>)",
            "self.cx.expected.defer(states)",
        ),
        (
            "    fn __expected_tokens_from_states<",
            "    pub(crate) fn __expected_tokens_from_states<",
        ),
        (
            "\nmod __parse__Program {",
            "\npub(crate) mod __parse__Program {",
        ),
    ];
    let mut text = text;
    for (from, to) in edits {
        assert_eq!(
            text.matches(from).count(),
            1,
            "the generated parser changed shape: `{from}` should occur once in grammar.rs"
        );
        text = text.replacen(from, to, 1);
    }
    text
}
