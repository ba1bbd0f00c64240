//! Generates the LALRPOP parser from `src/grammar.lalrpop` into OUT_DIR.
fn main() {
    lalrpop::Configuration::new()
        .use_cargo_dir_conventions()
        .emit_rerun_directives(true)
        .process()
        .expect("the grammar in src/grammar.lalrpop must generate a parser");
}
