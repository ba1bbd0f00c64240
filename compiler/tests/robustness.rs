//! Bad input never panics: random bytes and mutated programs go through the lexer, parser,
//! checker and both diagnostic renderers, and every reported span lies inside the source on
//! character boundaries.

use proptest::prelude::*;
use prosec::compile::{Compilation, Options};
use prosec::diagnostics::termcolor::NoColor;
use std::path::Path;

/// Programs covering every construct; mutations start from these.
const SEEDS: &[&str] = &[
    "agent a:\n  model: sonnet\n  prompt: \"\"\"\nYou {x}\n\"\"\"\n  persist: true\n  permissions:\n    read: [\"*.md\"]\n    bash: deny\nlet x = session: a\n  context: { y, z: w.v }\n  retry: 3\n  backoff: exponential\nresume: a\n",
    "input topic: \"t\"\nparallel (\"any\", count: 2, on-fail: \"ignore\"):\n  a = session \"A {topic}\"\n  b = try:\n    session \"B\"\n  catch as err:\n    throw\n  finally:\n    session \"C\"\noutput result = a\n",
    "let items = [\"a\", \"b\",\n  \"c\"]\nlet out = items\n  | filter:\n      session \"keep?\"\n  | map:\n      session \"m\"\n  | reduce(acc, x):\n      session \"r\"\nparallel for i, n in items:\n  session \"p\"\n",
    "loop until **done** (max: 3) as i:\n  session \"w\"\nrepeat 2 as j:\n  session \"r\"\nif **big** or depth <= 0: output x\nelif a == 1:\n  do f(1, 2)\nelse:\n  do:\n    session \"e\"\n",
    "block f(a, b):\n  output a\nchoice **which**:\n  option \"A\":\n    session \"a\" -> session \"b\"\n  option \"B\":\n    assert a: \"msg\"\nuse \"@h/s\" as s\nlet { q, r } = s(k: 1)\nimport \"sk\" from \"npm:x\"\n",
];

const FRAGMENTS: &[&str] = &[
    "\n",
    "  ",
    "\t",
    ":",
    "\"",
    "\"\"\"",
    "**",
    "***",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "|",
    "->",
    "=",
    ",",
    ".",
    "#",
    "\\",
    "session",
    "if",
    "else",
    "elif",
    "try",
    "catch",
    "loop",
    "parallel",
    "output",
    "input",
    "block",
    "do",
    "{x}",
    "é",
    "\r\n",
    "-",
    "0",
    "99999999999999999999",
];

fn check(src: &str) {
    let mut c = Compilation::new(Options::default());
    c.add_source(Path::new("fuzz.prose"), src);
    for d in &c.diagnostics {
        let text = &c.sources.get(d.file).text;
        let (s, e) = (d.span.start as usize, d.span.end as usize);
        assert!(
            s <= e && e <= text.len(),
            "span {s}..{e} outside {} bytes",
            text.len()
        );
        assert!(
            text.is_char_boundary(s) && text.is_char_boundary(e),
            "span {s}..{e} splits a character"
        );
    }
    let mut out = NoColor::new(Vec::new());
    prosec::diagnostics::render_text(&mut out, &c.sources, &c.diagnostics)
        .expect("render to memory");
    serde_json::to_string(&prosec::diagnostics::render_json(
        &c.sources,
        &c.diagnostics,
    ))
    .expect("json");
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, usize),
    DuplicateLine(usize),
    Indent(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1usize..12).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), 0..FRAGMENTS.len()).prop_map(|(a, f)| Mutation::Insert(a, f)),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), 0usize..7).prop_map(|(a, n)| Mutation::Indent(a, n)),
    ]
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(src: &str, muts: &[Mutation]) -> String {
    let mut s = src.to_string();
    for m in muts {
        let len = s.len().max(1);
        match *m {
            Mutation::Delete(a, n) => {
                let start = floor_boundary(&s, a % len);
                let end = floor_boundary(&s, start + n);
                s.replace_range(start..end, "");
            }
            Mutation::Insert(a, f) => {
                let at = floor_boundary(&s, a % len);
                s.insert_str(at, FRAGMENTS[f]);
            }
            Mutation::DuplicateLine(a) => {
                let lines: Vec<&str> = s.split_inclusive('\n').collect();
                if !lines.is_empty() {
                    let i = a % lines.len();
                    let mut out: Vec<&str> = lines[..=i].to_vec();
                    out.extend_from_slice(&lines[i..]);
                    s = out.concat();
                }
            }
            Mutation::Indent(a, n) => {
                let lines: Vec<String> = s.split_inclusive('\n').map(str::to_string).collect();
                if !lines.is_empty() {
                    let i = a % lines.len();
                    s = lines
                        .iter()
                        .enumerate()
                        .map(|(k, l)| {
                            if k == i {
                                format!("{}{l}", " ".repeat(n))
                            } else {
                                l.clone()
                            }
                        })
                        .collect();
                }
            }
        }
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn mutated_programs_never_panic(seed in 0..SEEDS.len(), muts in prop::collection::vec(mutation(), 1..8)) {
        check(&apply(SEEDS[seed], &muts));
    }

    #[test]
    fn random_text_never_panics(src in "(?s).{0,300}") {
        check(&src);
    }

    #[test]
    fn token_soup_never_panics(parts in prop::collection::vec(0..FRAGMENTS.len(), 0..60)) {
        let src: String = parts.iter().map(|&i| FRAGMENTS[i]).collect::<Vec<_>>().join(" ");
        check(&src);
    }

    #[test]
    fn random_bytes_are_decoded_or_reported(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        match prosec::decode_source(bytes.clone()) {
            Ok(text) => check(&text),
            Err((at, _msg, lossy)) => {
                prop_assert!(std::str::from_utf8(&bytes[..at]).is_ok());
                check(&lossy);
            }
        }
    }
}

#[test]
fn seeds_are_valid_syntax() {
    for s in SEEDS {
        let parsed = prosec::parser::parse(0, s);
        assert!(
            parsed.diagnostics.is_empty(),
            "{s}: {:?}",
            parsed.diagnostics
        );
    }
}

fn nested_dos(depth: usize) -> String {
    let mut src = String::new();
    for d in 0..depth {
        src.push_str(&" ".repeat(d * 2));
        src.push_str("do:\n");
    }
    src.push_str(&" ".repeat(depth * 2));
    src.push_str("session \"deep\"\n");
    src
}

fn codes(src: &str) -> Vec<&'static str> {
    let mut c = Compilation::new(Options::default());
    c.add_source(Path::new("deep.prose"), src);
    c.diagnostics.iter().map(|d| d.code.as_str()).collect()
}

#[test]
fn nesting_up_to_the_limits_is_accepted() {
    use prosec::limits::*;
    assert!(codes(&nested_dos(MAX_INDENT_DEPTH)).is_empty());
    let arr = format!(
        "let x = {}1{}\n",
        "[".repeat(MAX_BRACKET_DEPTH),
        "]".repeat(MAX_BRACKET_DEPTH)
    );
    assert!(codes(&arr).is_empty());
    let sum = format!(
        "let a = 1\nlet x = a{}\n",
        " + a".repeat(MAX_OPERATORS_PER_LINE)
    );
    assert!(codes(&sum).is_empty());
    let nots = format!(
        "let a = true\nlet x = {}a\n",
        "not ".repeat(MAX_OPERATORS_PER_LINE)
    );
    assert!(codes(&nots).is_empty());
}

#[test]
fn nesting_beyond_the_limits_is_a_clean_error() {
    assert_eq!(codes(&nested_dos(10_000)), ["E145"]);
    assert_eq!(
        codes(&format!(
            "let x = {}1{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        )),
        ["E145"]
    );
    assert_eq!(
        codes(&format!("let x = 1{}\n", " + 1".repeat(100_000))),
        ["E145"]
    );
    assert_eq!(
        codes(&format!("let x = {}1\n", "-".repeat(100_000))),
        ["E145"]
    );
    check(&format!("session \"{}\"\n", "x".repeat(200_000)));
}

#[test]
fn postfix_chains_beyond_the_limit_are_a_clean_error() {
    // Each `[0]`, `(...)` or `.x` nests the tree one level deeper, even though no bracket
    // stays open.
    let index = format!("let x = [1]\nlet y = x{}\n", "[0]".repeat(10_000));
    assert_eq!(codes(&index), ["E145"]);
    let calls = format!("use \"@a/f\"\nlet y = f{}\n", "(a: 1)".repeat(10_000));
    assert!(codes(&calls).contains(&"E145"));
    let mixed = format!("let x = [1]\nlet y = x{}\n", "[0].a(b: 1)".repeat(5_000));
    assert!(codes(&mixed).contains(&"E145"));
}

#[test]
fn long_lists_are_not_deep() {
    // Elements of a list are siblings: a long list of calls or negative numbers on one
    // logical line nests no deeper than one element.
    let negatives = format!("let x = [{}]\n", vec!["-1"; 5_000].join(", "));
    assert!(codes(&negatives).is_empty());
    let records = format!(
        "let x = [{}]\n",
        vec!["{a: -1, b: [2]}"; 2_000].join(",\n  ")
    );
    assert!(codes(&records).is_empty());
}

/// The deepest program the limits allow: every indentation level, and at the bottom an
/// expression with every bracket and operator the line may hold.
fn deepest() -> String {
    use prosec::limits::*;
    let depth = MAX_INDENT_DEPTH;
    let mut src = String::from("let a = 1\n");
    for d in 0..depth {
        src.push_str(&" ".repeat(d * 2));
        src.push_str("do:\n");
    }
    let ops = MAX_OPERATORS_PER_LINE - MAX_BRACKET_DEPTH / 2;
    src.push_str(&" ".repeat(depth * 2));
    src.push_str(&format!(
        "let x = {}a{}{}\n",
        "[(a + ".repeat(MAX_BRACKET_DEPTH / 2),
        " + a".repeat(ops),
        ")]".repeat(MAX_BRACKET_DEPTH / 2)
    ));
    src
}

#[test]
fn every_pass_handles_the_deepest_program_on_a_small_stack() {
    // Parsing, analysis, code generation, verification and dropping the trees all recurse;
    // the limits bound how deep, with room to spare on a 1 MiB stack (threads get 2 MiB by
    // default, the main thread 8 MiB).
    let src = deepest();
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let mut c = Compilation::new(Options::default());
            let root = c.add_source(Path::new("deep.prose"), &src);
            assert_eq!(c.error_count(), 0, "{:?}", c.diagnostics);
            let bytes = prosec::codegen::build_bytes(&c, root).expect("builds").0;
            bytecode_spec::artifact::load(&bytes).expect("verifies");
        })
        .expect("spawn");
    handle.join().expect("no stack overflow");
}

#[test]
fn a_file_that_is_not_utf8_is_one_located_error() {
    // Multi-byte text before the bad byte, syntax errors around it, and more bad bytes up to
    // the very end: one diagnostic, at the first bad byte, inside the file.
    let mut bytes = "let é = = 1\nsession \"ü\"\nlet x = ".as_bytes().to_vec();
    let at = bytes.len();
    bytes.extend_from_slice(b"\xff\xfe\nlet y = = 2\n\xc3");
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("not-utf8.prose");
    std::fs::write(&path, &bytes).expect("write");
    let mut c = Compilation::new(Options::default());
    c.add_file(&path).expect("readable");
    let json = prosec::diagnostics::render_json(&c.sources, &c.diagnostics);
    assert_eq!(json.len(), 1, "{json:?}");
    let d = &json[0];
    assert_eq!(d.code, "E135");
    assert_eq!(d.span, [at as u32, at as u32 + 1]);
    assert!(d.span[1] as usize <= bytes.len());
    assert_eq!((d.line, d.column, d.end_line, d.end_column), (3, 9, 3, 10));
    assert!(
        d.message.contains(&format!("at byte {at}")),
        "{}",
        d.message
    );
    let mut out = NoColor::new(Vec::new());
    prosec::diagnostics::render_text(&mut out, &c.sources, &c.diagnostics).expect("render");
}

#[test]
fn many_syntax_errors_cost_time_in_proportion() {
    // Each misplaced `else` used to re-lex the whole file, and each syntax error after an
    // unterminated discretion marker counted lines from the top: quadratic on files like
    // these. 10,000 lines of either take about a second in a debug build (a few on a loaded
    // machine). The bound is far above that, so that load alone never reaches it: it
    // catches a path where each line costs a pass over the file, as each `else`'s re-lex
    // did. How fast the check is, the benchmarks measure.
    let elses = "else:\n  session \"x\"\n".repeat(10_000);
    let markers = "if **open:\n  x y z\n".repeat(10_000);
    for (what, src) in [
        ("misplaced elses", elses),
        ("unterminated markers", markers),
    ] {
        let started = std::time::Instant::now();
        let found = codes(&src);
        assert!(!found.is_empty());
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "10,000 lines of {what} took {:?} to check: not in proportion to their length",
            started.elapsed()
        );
    }
}
