//! Imported programs: invocation passes inputs and returns outputs.

use crate::harness::*;
use prosec::compile::Compilation;
use serde_json::json;

/// Compiles `main` with `lib/digest.prose` beside it, both written to a fresh temp dir.
fn build(test: &str, lib: &str, main: &str) -> std::sync::Arc<bytecode_spec::verify::Verified> {
    let dir = std::env::temp_dir().join(format!("prosevm-e2e-{test}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("lib")).expect("temp dir");
    std::fs::write(dir.join("lib/digest.prose"), lib).expect("write lib");
    std::fs::write(dir.join("main.prose"), main).expect("write main");
    let mut c = Compilation::new(Default::default());
    let root = c.add_file(&dir.join("main.prose")).expect("read main");
    std::fs::remove_dir_all(&dir).expect("clean up");
    compiled(c, root)
}

#[test]
fn an_invocation_passes_inputs_and_returns_outputs() {
    let lib = r#"input source-text: "The text"
input reader: "Who reads it"
let points = session "Key points of {source-text} for {reader}"
output headline = session "Headline for {reader}"
output digest = session "Digest of {points}"
"#;
    let main = r#"use "./lib/digest.prose" as condense
let user-notes = condense(source-text: "the changelog", reader: "users")
let { headline, digest } = condense(
  reader: "operators",
  source-text: "the ops log",
)
session "Announce '{user-notes.headline}'; ops: {headline}"
  context: { user-notes.digest, ops: digest }
output announcement = user-notes.headline
"#;
    let mut h = Harness::with(build("invoke", lib, main), &[], Default::default());
    h.run(|req| reply(&format!("<{}>", text(req))));
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Key points of the changelog for users",
            "0:1 session: Headline for users",
            "0:2 session: Digest of <Key points of the changelog for users>",
            "0:3 session: Key points of the ops log for operators",
            "0:4 session: Headline for operators",
            "0:5 session: Digest of <Key points of the ops log for operators>",
            "0:6 session: Announce '<Headline for users>'; ops: <Headline for operators>",
        ]
    );
    let sites: Vec<String> = h.log.iter().map(|r| r.site.to_string()).collect();
    assert_eq!(
        sites,
        [
            "./lib/digest.prose:3",
            "./lib/digest.prose:4",
            "./lib/digest.prose:5",
            "./lib/digest.prose:3",
            "./lib/digest.prose:4",
            "./lib/digest.prose:5",
            "main:7"
        ]
    );
    assert_eq!(
        h.sessions()[6].context,
        [
            Labelled::new(
                "digest",
                "<Digest of <Key points of the changelog for users>>"
            ),
            Labelled::new(
                "ops",
                "<Digest of <Key points of the ops log for operators>>"
            ),
        ]
    );
    assert_eq!(
        h.outputs(),
        json!({ "announcement": "<Headline for users>" })
    );
}

#[test]
fn an_error_in_an_imported_program_reaches_the_caller() {
    let lib = r#"input source-text: "The text"
session "Read {source-text}"
if source-text == "":
  throw "nothing to condense"
output digest = session "Digest {source-text}"
"#;
    let main = r#"use "./lib/digest.prose" as condense
let a = try:
  condense(source-text: "")
catch as e:
  e.message
let b = condense(source-text: "")
output a = a
"#;
    let mut h = Harness::with(build("throw", lib, main), &[], Default::default());
    h.run(echo);
    assert_eq!(h.seen(), ["0:0 session: Read ", "0:1 session: Read "]);
    let e = h.error();
    assert_eq!(
        (e.message.as_str(), e.program.as_str(), e.line),
        ("nothing to condense", "./lib/digest.prose", 4)
    );
    assert_eq!(e.statement.trim(), r#"throw "nothing to condense""#);
}

#[test]
fn two_imports_with_the_same_file_name_are_told_apart_in_errors() {
    // Two programs named `util`, one in `a/` and one in `b/`; the second throws on its line 4,
    // which is blank in the first.
    let dir = std::env::temp_dir().join(format!("prosevm-e2e-twins-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).expect("temp dir");
    std::fs::create_dir_all(dir.join("b")).expect("temp dir");
    std::fs::write(
        dir.join("a/util.prose"),
        "input x: \"x\"\nsession \"A {x}\"\n\n\noutput r = \"a\"\n",
    )
    .expect("write a");
    std::fs::write(
        dir.join("b/util.prose"),
        "input x: \"x\"\nsession \"B {x}\"\nlet bad = true\nthrow \"b failed\"\noutput r = \"b\"\n",
    )
    .expect("write b");
    std::fs::write(
        dir.join("main.prose"),
        "use \"./a/util.prose\" as first\nuse \"./b/util.prose\" as second\nlet one = first(x: \"1\")\nlet two = second(x: \"2\")\n",
    )
    .expect("write main");
    let mut c = Compilation::new(Default::default());
    let root = c.add_file(&dir.join("main.prose")).expect("read main");
    std::fs::remove_dir_all(&dir).expect("clean up");
    let mut h = Harness::with(compiled(c, root), &[], Default::default());
    h.run(echo);
    let e = h.error();
    assert_eq!(
        (e.message.as_str(), e.program.as_str(), e.line),
        ("b failed", "./b/util.prose", 4)
    );
    assert_eq!(e.statement.trim(), "throw \"b failed\"");
    assert!(e.to_string().contains("./b/util.prose:4"), "{e}");
}
