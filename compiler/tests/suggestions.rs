//! "Did you mean": an undefined or unknown name gets the closest defined one in its help
//! line, and only when one is close.

use prosec::compile::{Compilation, Options};
use std::path::Path;

/// The help lines of the diagnostics with `code`, for `main.prose` (and `files` beside it).
fn helps(code: &str, src: &str, files: &[(&str, &str)]) -> Vec<String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("suggest-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("main.prose"), src).expect("write");
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("write");
    }
    let mut c = Compilation::new(Options::default());
    c.add_file(&dir.join("main.prose")).expect("load");
    c.diagnostics
        .iter()
        .filter(|d| d.code.as_str() == code)
        .map(|d| d.help.clone().unwrap_or_default())
        .collect()
}

const AGENT: &str = "agent reviewer:\n  model: sonnet\n  prompt: \"You review\"\n";
const LIB: (&str, &str) = (
    "summarize.prose",
    "input topic: \"What\"\noutput summary = session \"Summarize {topic}\"\n",
);

#[test]
fn an_undefined_agent() {
    let src = format!("{AGENT}session: reviewr\n");
    assert_eq!(helps("E007", &src, &[]), ["did you mean `reviewer`?"]);
}

#[test]
fn an_undefined_variable() {
    let src = "let summary = session \"S\"\nsession \"Use\"\n  context: sumary\n";
    assert_eq!(helps("E105", src, &[]), ["did you mean `summary`?"]);
}

#[test]
fn an_undefined_block() {
    let src = "block review(x):\n  session \"R {x}\"\ndo reveiw(\"a\")\n";
    assert_eq!(helps("E108", src, &[]), ["did you mean `review`?"]);
}

#[test]
fn an_unknown_input_of_an_imported_program() {
    let src = "use \"./summarize.prose\"\nlet s = summarize(topik: \"tides\", topic: \"tides\")\n";
    assert_eq!(helps("E027", src, &[LIB]), ["did you mean `topic`?"]);
}

#[test]
fn an_unknown_import_alias() {
    let src = "use \"./summarize.prose\"\nlet s = sumarize(topic: \"tides\")\n";
    assert_eq!(helps("E025", src, &[LIB]), ["did you mean `summarize`?"]);
}

#[test]
fn an_unknown_output_of_an_imported_program() {
    let src = "use \"./summarize.prose\"\nlet s = summarize(topic: \"tides\")\nsession \"Use {s.sumary}\"\n";
    assert_eq!(helps("E028", src, &[LIB]), ["did you mean `summary`?"]);
}

#[test]
fn an_unknown_property() {
    let src = "session \"Write\"\n  contxt: \"notes\"\n";
    assert_eq!(helps("W005", src, &[]), ["did you mean `context`?"]);
}

#[test]
fn an_unknown_modifier_and_option_value() {
    let src = "parallel (\"frist\", on-fial: \"continue\"):\n  session \"A\"\n  session \"B\"\n";
    assert_eq!(helps("E112", src, &[]), ["did you mean `first`?"]);
    assert_eq!(helps("E116", src, &[]), ["did you mean `on-fail`?"]);
    let src = "session \"Write\"\n  backoff: expnential\n";
    assert_eq!(helps("E127", src, &[]), ["did you mean `exponential`?"]);
}

#[test]
fn nothing_close_keeps_the_general_help() {
    let src = format!("{AGENT}session: translator\n");
    assert_eq!(
        helps("E007", &src, &[]),
        ["define it: `agent translator:` with a `model:` and a `prompt:`"]
    );
    let src = "let summary = session \"S\"\nsession \"Use\"\n  context: zebra\n";
    assert_eq!(helps("E105", src, &[]), [""]);
}

#[test]
fn a_property_with_another_ending() {
    assert_eq!(
        helps("W005", "session \"x\"\n  retries: 3\n", &[]),
        ["did you mean `retry`?"]
    );
}

#[test]
fn an_assignment_to_a_misspelt_variable() {
    let src = "let verdict = \"no\"\nloop until verdict == \"ok\" (max: 3):\n  verdcit = session \"Check it\"\n";
    assert_eq!(
        helps("W117", src, &[]),
        ["did you mean `verdict`? As written this declares a new variable `verdcit`"]
    );
}

#[test]
fn a_misspelt_interpolation_warns_and_a_placeholder_does_not() {
    let src = "let draft = session \"Draft\"\nsession \"Polish {draf} for {audience}\"\n";
    assert_eq!(helps("W122", src, &[]), ["did you mean `draft`?"]);
    assert!(helps("E140", src, &[]).is_empty());
}

#[test]
fn a_misspelt_field_of_a_known_record() {
    let record = "let t = session \"t\"\nlet r = {title: t, body: \"b\", meta: {author: \"a\"}}\n";
    for (use_, help) in [
        ("session \"Use {r.titel}\"\n", "did you mean `title`?"),
        ("let x = r.bdy\n", "did you mean `body`?"),
        ("session \"By {r.meta.autor}\"\n", "did you mean `author`?"),
        ("let {titel} = r\n", "did you mean `title`?"),
        ("let x = r.summary\n", "its fields: `body`, `meta`, `title`"),
    ] {
        let src = format!("{record}{use_}");
        assert_eq!(helps("W123", &src, &[]), [help], "{src}");
    }
    // The fields it has, and a record bound twice: the fields of both.
    let src = format!(
        "{record}if **short**:\n  r = {{title: t, summary: \"s\"}}\nsession \"{{r.title}} {{r.body}} {{r.summary}} {{r.meta.author}}\"\n"
    );
    assert!(helps("W123", &src, &[]).is_empty());
    // A variable given anything else anywhere has no known shape: nothing is reported.
    for other in [
        "r = session \"x\"\n",
        "for i in [1]:\n  r = t\n",
        "block f:\n  r = session \"x\"\n",
    ] {
        let src = format!("{record}{other}let x = r.titel\n");
        assert!(helps("W123", &src, &[]).is_empty(), "{src}");
    }
}

/// The help of each syntax error, with the text it points at.
fn syntax_helps(src: &str) -> Vec<(String, String)> {
    let parsed = prosec::parser::parse(0, src);
    parsed
        .diagnostics
        .iter()
        .map(|d| {
            (
                src[d.span.range()].to_string(),
                d.help.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn misspelt_keywords_get_a_did_you_mean() {
    for (src, word, keyword) in [
        ("sesion \"x\"\n", "sesion", "session"),
        (
            "loop untill done (max: 3):\n  session \"x\"\n",
            "untill",
            "until",
        ),
        (
            "paralel:\n  a = session \"x\"\n  b = session \"y\"\n",
            "paralel",
            "parallel",
        ),
        ("let x = sesion \"x\"\n", "sesion", "session"),
    ] {
        assert_eq!(
            syntax_helps(src),
            [(word.to_string(), format!("did you mean `{keyword}`?"))],
            "{src}"
        );
    }
    // Prose that strayed outside a string is not taken for a keyword.
    assert!(syntax_helps("For each phase, specify:\n")
        .iter()
        .all(|(_, h)| !h.contains("did you mean")));
}

/// Every diagnostic of `src` (as `prosec check` reports them): its code, line, the text it
/// points at and its help.
fn checked(src: &str) -> Vec<(String, u32, String, String)> {
    let mut c = Compilation::new(Options::default());
    c.add_source(Path::new("t.prose"), src);
    c.diagnostics
        .iter()
        .map(|d| {
            (
                d.code.as_str().to_string(),
                c.sources.get(d.file).line_col(d.span.start as usize).line,
                src[d.span.range()].to_string(),
                d.help.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// `(line, word, keyword)` rows as `checked` gives them for misspelt keywords.
fn misspelt(rows: &[(u32, &str, &str)]) -> Vec<(String, u32, String, String)> {
    rows.iter()
        .map(|(line, word, keyword)| {
            (
                "E004".to_string(),
                *line,
                word.to_string(),
                format!("did you mean `{keyword}`?"),
            )
        })
        .collect()
}

#[test]
fn every_misspelt_keyword_is_one_error_in_every_shape() {
    let branches = "  a = session \"x\"\n  b = session \"y\"\n";
    for (src, rows) in [
        // An indented block of sessions under it.
        (
            format!("paralel:\n{branches}"),
            vec![(1, "paralel", "parallel")],
        ),
        // Inside a block definition, and inside a loop.
        (
            format!(
                "block f:\n  paralel:\n  {}",
                branches.replace('\n', "\n  ").trim_end()
            ),
            vec![(2, "paralel", "parallel")],
        ),
        (
            "for t in [1, 2]:\n  paralel:\n    session \"x\"\n".to_string(),
            vec![(2, "paralel", "parallel")],
        ),
        // At the end of a file, without a block or a last line break.
        (
            "session \"a\"\nparalel:".to_string(),
            vec![(2, "paralel", "parallel")],
        ),
        // After another error: a misspelt keyword, a broken line, prose outside a string.
        (
            format!("sesion \"a\"\nparalel:\n{branches}"),
            vec![(1, "sesion", "session"), (2, "paralel", "parallel")],
        ),
        (
            format!("let x = = 1\nparalel:\n{branches}"),
            vec![(2, "paralel", "parallel")],
        ),
        (
            format!("Then write it all up\nparalel:\n{branches}"),
            vec![(2, "paralel", "parallel")],
        ),
        // Twice in a row: the second is not a consequence of the first.
        (
            format!("paralel:\n{branches}paralel:\n{branches}"),
            vec![(1, "paralel", "parallel"), (4, "paralel", "parallel")],
        ),
        // Inside the block of another: both.
        (
            "paralel:\n  a = sesion \"x\"\n  b = session \"y\"\n".to_string(),
            vec![(1, "paralel", "parallel"), (2, "sesion", "session")],
        ),
        // With modifiers, which read as a call until the `:`.
        (
            format!("paralel (\"all\"):\n{branches}"),
            vec![(1, "paralel", "parallel")],
        ),
        (
            format!("let r = paralel (on-fail: \"continue\"):\n{branches}"),
            vec![(1, "paralel", "parallel")],
        ),
        (
            "paralel for x in [1, 2]:\n  session \"x\"\n".to_string(),
            vec![(1, "paralel", "parallel")],
        ),
    ] {
        let rows: Vec<(u32, &str, &str)> = rows;
        let mut want = misspelt(&rows);
        // The error of a broken line or of prose before it comes first, without help.
        for (start, at) in [("let x = = 1", "="), ("Then write", "write")] {
            if src.starts_with(start) {
                want.insert(0, ("E004".into(), 1, at.into(), String::new()));
            }
        }
        assert_eq!(checked(&src), want, "{src}");
    }
}

#[test]
fn a_modifier_without_its_colon() {
    let src = "loop until **the tests pass** (max 3):\n  session \"Fix\"\n";
    assert_eq!(
        checked(src),
        [(
            "E004".to_string(),
            1,
            "max 3".to_string(),
            "did you mean `max: 3`?".to_string()
        )]
    );
}

#[test]
fn an_unclosed_bracket_is_reported_at_the_bracket() {
    let src = "let xs = [\"a\", \"b\"\n\nsession \"next\"\n";
    let parsed = prosec::parser::parse(0, src);
    assert_eq!(parsed.diagnostics.len(), 1, "{:?}", parsed.diagnostics);
    let d = &parsed.diagnostics[0];
    assert_eq!((d.span.start, d.span.end), (9, 10));
    assert_eq!(d.message, "`[` is never closed");
    assert_eq!(&src[d.secondary[0].span.range()], "session");
    // A bracket closed on its own line is no error.
    assert!(prosec::parser::parse(0, "let xs = [\n  \"a\",\n]\n")
        .diagnostics
        .is_empty());
}
