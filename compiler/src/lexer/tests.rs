//! Lexer behaviour that the real-world forms depend on.

use super::{tokenize, Tok};
use crate::ast::{PathSeg, StrPart};
use crate::diagnostics::Code;

/// The tokens of `src`, without spans; panics if the lexer reported a problem.
fn toks(src: &str) -> Vec<Tok> {
    let (toks, problems) = tokenize(src);
    assert!(problems.is_empty(), "problems in {src:?}: {problems:?}");
    toks.into_iter().map(|(_, t, _)| t).collect()
}

fn ident(s: &str) -> Tok {
    Tok::Ident(s.to_string())
}

/// The parts of the only string token of `src`.
fn string_parts(src: &str) -> Vec<StrPart> {
    let strings: Vec<Vec<StrPart>> = toks(src)
        .into_iter()
        .filter_map(|t| match t {
            Tok::Str(s) => Some(s.parts),
            _ => None,
        })
        .collect();
    assert_eq!(strings.len(), 1, "expected one string in {src:?}");
    strings.into_iter().next().unwrap_or_default()
}

#[test]
fn hyphens_join_names_but_spaced_minus_subtracts() {
    assert_eq!(
        toks("security-reviewer depth - 1 a->b"),
        vec![
            ident("security-reviewer"),
            ident("depth"),
            Tok::Minus,
            Tok::Int(1),
            ident("a"),
            Tok::Arrow,
            ident("b"),
            Tok::Newline,
        ]
    );
    // A keyword followed by a hyphenated part is a plain name.
    assert_eq!(toks("output-dir"), vec![ident("output-dir"), Tok::Newline]);
}

#[test]
fn contextual_keywords_are_names() {
    for word in [
        "context",
        "map",
        "filter",
        "index",
        "project",
        "permissions",
    ] {
        assert_eq!(toks(word), vec![ident(word), Tok::Newline], "{word}");
    }
}

#[test]
fn a_triple_string_is_one_token_wherever_its_quotes_sit() {
    let src = "do:\n  let x = session \"\"\"Text on the first line\n\"\"\"\n    retry: 2\n";
    let got = toks(src);
    assert_eq!(got[..4], [Tok::Do, Tok::Colon, Tok::Newline, Tok::Indent]);
    assert!(matches!(&got[8], Tok::Str(s) if s.triple));
    assert_eq!(
        got[9..],
        [
            Tok::Newline,
            Tok::Indent,
            ident("retry"),
            Tok::Colon,
            Tok::Int(2),
            Tok::Newline,
            Tok::Dedent,
            Tok::Dedent,
        ]
    );
}

#[test]
fn comments_blank_lines_and_bracketed_newlines_are_invisible() {
    let src = "let xs = [\n  \"a\",   # first\n\n  \"b\",\n]   # done\n   \n# note\nlet y = 1\n";
    let got = toks(src);
    let kinds: Vec<&str> = got
        .iter()
        .map(|t| match t {
            Tok::Str(_) => "STR",
            Tok::Ident(_) => "NAME",
            Tok::Int(_) => "INT",
            Tok::Newline => "NL",
            other => other.text(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "let", "NAME", "=", "[", "STR", ",", "STR", ",", "]", "NL", "let", "NAME", "=", "INT",
            "NL"
        ]
    );
}

#[test]
fn a_line_of_spaces_deeper_than_its_block_is_blank() {
    // Spaces deeper than the block they follow, then a comment and code back at the block's
    // level: no indentation opens, as if the line were empty.
    let kinds = |src: &str| -> Vec<String> {
        toks(src)
            .into_iter()
            .map(|t| match t {
                Tok::Str(s) => format!("{:?}", s.parts),
                other => format!("{other:?}"),
            })
            .collect()
    };
    let with = kinds("do:\n  session \"a\"\n    retry: 2\n      \n  # note\n  session \"b\"\n");
    let without = kinds("do:\n  session \"a\"\n    retry: 2\n\n  # note\n  session \"b\"\n");
    assert_eq!(with, without);
    assert_eq!(with.iter().filter(|k| *k == "Indent").count(), 2);
}

#[test]
fn backslashes_are_kept_in_triple_strings_only() {
    let parts = string_parts("\"\"\"grep \\d+\\. \\\n  --all\"\"\"");
    assert_eq!(
        parts,
        vec![StrPart::Text("grep \\d+\\. \\\n  --all".into())]
    );
    let (_, problems) = tokenize("\"a \\d b\"");
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].code, Code::E002);
}

#[test]
fn interpolation_groups_and_literal_braces() {
    let parts = string_parts("\"{a.b[0].c} \\{x} {} {a, b} {\\\"k\\\": 1} **/*.ts\"");
    let StrPart::Interp(i) = &parts[0] else {
        panic!("expected an interpolation first: {parts:?}");
    };
    assert_eq!(i.root, "a");
    assert_eq!(
        i.path,
        vec![
            PathSeg::Field("b".into()),
            PathSeg::Index(0),
            PathSeg::Field("c".into())
        ]
    );
    assert_eq!(
        parts[1..],
        [StrPart::Text(" {x} {} {a, b} {\"k\": 1} **/*.ts".into())]
    );
}

#[test]
fn discretion_text_may_hold_punctuation() {
    let got = toks("if **the note says \"done\": (all) ok** or depth <= 0:");
    let Tok::Discretion(d) = &got[1] else {
        panic!("expected discretion text: {got:?}");
    };
    assert_eq!(d.raw_text(), "the note says \"done\": (all) ok");
    assert_eq!(got[2..5], [Tok::Or, ident("depth"), Tok::Le]);
}
