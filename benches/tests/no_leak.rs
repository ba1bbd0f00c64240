//! A finished run gives back everything it allocated: measured with a counting allocator
//! around runs of a program with a block call and a fan-out, after one run to warm up what
//! the process keeps once (the runtime's statics). Before the program's top frame and its
//! instance stopped keeping each other alive, every run left its top-level values behind
//! (about 100 bytes a session), which a worker or `serve` running one program after another
//! would have kept until it exited.

use prose_benches::counting::{live, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Compiles `src` as `main.prose` in a new directory holding `lib.prose` too.
fn compile_with_lib(src: &str) -> prose_runtime::program::Program {
    let dir = std::env::temp_dir().join(format!("prose-no-leak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("lib.prose"),
        "input word: \"A word\"\noutput echo = session \"Echo {word}\"\n",
    )
    .expect("lib");
    let mut c = prosec::compile::Compilation::new(prosec::compile::Options::default());
    let root = c.add_source(&dir.join("main.prose"), src);
    assert_eq!(c.error_count(), 0, "{:?}", c.diagnostics);
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).expect("encodes");
    prose_runtime::program::Program::from_bytes(bytes, "main.prose".into()).expect("verifies")
}

#[test]
fn a_finished_run_leaves_nothing_allocated() {
    let src = format!(
        "block twice(x):\n  let a = session \"First {{x}}\"\n  output session \"Then {{a}}\"\n{}let t = do twice(\"it\")\n",
        prose_benches::fan_out(2_000)
    );
    let program = compile_with_lib(&format!(
        "use \"./lib.prose\" as lib\n{src}repeat 50 as k:\n  let said = lib(word: \"w{{k}}\")\n"
    ));
    let outputs = prose_benches::run_mock(&program);
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let before = live();
    for _ in 0..3 {
        std::hint::black_box(prose_benches::run_mock(&program));
    }
    let left = live() - before;
    println!("{left} bytes left after three runs");
    assert!(left < 4_096, "three runs left {left} bytes allocated");
}
