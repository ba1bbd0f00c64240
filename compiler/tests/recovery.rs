//! One parse error is one diagnostic: the rest of the broken statement (its line and the
//! indented block under it), and prose lines that follow it, do not produce a screen of
//! follow-on errors; independent errors after real code still do.

use prosec::compile::{Compilation, Options};
use prosec::diagnostics::Diagnostic;
use std::path::Path;

/// What `each` makes of every diagnostic of `src` and the line it is on.
fn each<T>(src: &str, each: impl Fn(&Diagnostic, u32) -> T) -> Vec<T> {
    let mut c = Compilation::new(Options::default());
    c.add_source(Path::new("t.prose"), src);
    c.diagnostics
        .iter()
        .map(|d| {
            each(
                d,
                c.sources.get(d.file).line_col(d.span.start as usize).line,
            )
        })
        .collect()
}

/// `(code, line)` of every diagnostic.
fn diagnostics(src: &str) -> Vec<(String, u32)> {
    each(src, |d, line| (d.code.as_str().to_string(), line))
}

fn pairs(v: &[(&str, u32)]) -> Vec<(String, u32)> {
    v.iter().map(|(c, l)| (c.to_string(), *l)).collect()
}

#[test]
fn a_string_closed_early_is_one_error() {
    // The inner `"""` ends the prompt: its second half and the trailer after it are not
    // new problems.
    let src = "let plan = session \"Plan\"\nsession \"Ask\"\n  prompt: \"\"\"\n    Record this:\n    prompt: \"\"\"\n      - Bounty: {id}\n      - Solver: {who}\n    \"\"\"\n  \"\"\"\n  context: plan\n";
    assert_eq!(diagnostics(src), pairs(&[("E005", 6)]));
}

#[test]
fn prose_outside_a_string_is_one_error() {
    let src = "session \"Plan the work\"\nFor each phase, specify:\n- Goal (one sentence)\n- Tasks (numbered list of what to analyze)\n- Decisions to make\n\nWrite the plan to: {output_dir}/BUILD_PLAN.md\nAlso create a list of phase names.\n";
    assert_eq!(diagnostics(src), pairs(&[("E004", 2)]));
}

#[test]
fn a_broken_line_takes_its_properties_with_it() {
    let src = "let a = session \"x\" ]\n  context: missing\n  retry: 2\n";
    assert_eq!(diagnostics(src), pairs(&[("E004", 1)]));
}

#[test]
fn text_indented_by_mistake_is_one_error() {
    // The indented lines read as properties of `let a = 1`; the failed statement does not
    // make `{a}` below an unknown name either.
    let src = "let a = 1\n    - Bounty: {x}\n    - Solver: {y}\n    - Solution: {z}\nsession \"next {a}\"\n";
    assert_eq!(diagnostics(src), pairs(&[("E004", 2)]));
}

#[test]
fn errors_after_real_code_are_still_reported() {
    let src = "let a = session \"x\"\n    - Bounty: {x}\n    - Solver: {y}\nsession: nosuch\nlet b = = 2\nlet c = = 3\n";
    assert_eq!(
        diagnostics(src),
        pairs(&[("E004", 2), ("E007", 4), ("E004", 5), ("E004", 6)])
    );
}

/// `(line, label)` of every diagnostic: the label says what could have come next.
fn labels(src: &str) -> Vec<(u32, String)> {
    each(src, |d, line| (line, d.label.clone()))
}

#[test]
fn each_reported_error_says_what_could_come_next_even_after_cascades() {
    // The parser recovers many times in the prose lines (cascades, not reported); the
    // errors reported after them still name what each place expects, not another's.
    let src = "session \"Plan\"\nFor each phase, specify:\n- Goal (one sentence)\nlet a = session \"x\"\n    Tasks to do: {x}\nlet b = = 2\nsession \"y\":\n";
    assert_eq!(
        labels(src),
        vec![
            (
                2,
                "expected one of `!=`, `(`, `+`, `->`, `-`, `.` and more".to_string()
            ),
            (6, "expected an expression".to_string()),
            (7, "expected `->`, `or`, `|`, end of line".to_string()),
        ]
    );
}
