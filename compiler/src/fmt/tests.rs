use super::*;

fn fmt(src: &str) -> String {
    format(src, &FmtOptions::default()).expect("formats")
}

fn fmt_width(src: &str, width: usize) -> String {
    format(
        src,
        &FmtOptions {
            indent_width: width,
        },
    )
    .expect("formats")
}

#[test]
fn reindents_blocks_and_spaces_tokens() {
    let src = "agent   writer :\n      model:sonnet\n      prompt :  \"Write.\"\n\n\n\nlet x=session:writer\nif x==1 :\n    output  y=[1,2 , 3]\n";
    assert_eq!(
        fmt(src),
        "agent writer:\n  model: sonnet\n  prompt: \"Write.\"\n\nlet x = session: writer\nif x == 1:\n  output y = [1, 2, 3]\n"
    );
}

#[test]
fn comments_stay_where_they_were() {
    let src = "# head\n\n\nagent a:   # trailing\n    # about the model\n    model: opus\n    # end of the block\n\n# before b\nsession \"b\"\n# last\n";
    assert_eq!(
        fmt(src),
        "# head\n\nagent a:  # trailing\n  # about the model\n  model: opus\n  # end of the block\n\n# before b\nsession \"b\"\n# last\n"
    );
}

#[test]
fn strings_are_never_changed() {
    let src = "let p = session \"x\"\n    prompt:    \"\"\"Line one\n        indented   inside\n  {p}\"\"\"\n";
    let out = fmt(src);
    assert!(
        out.contains("\"\"\"Line one\n        indented   inside\n  {p}\"\"\""),
        "{out}"
    );
    assert!(
        out.starts_with("let p = session \"x\"\n  prompt: \"\"\""),
        "{out}"
    );
}

#[test]
fn calls_indexes_unary_minus_and_objects() {
    let src = "let r = lib (topic : t)\nlet y = xs [ 0 ] . name\nlet z = - 3\nlet w = a - -b\nlet o = {a,b: 1}\nlet e = {}\n";
    assert_eq!(
        fmt(src),
        "let r = lib(topic: t)\nlet y = xs[0].name\nlet z = -3\nlet w = a - -b\nlet o = { a, b: 1 }\nlet e = {}\n"
    );
}

#[test]
fn loop_modifiers_and_parallel_options_keep_their_space() {
    let src = "loop until done(max: 3):\n  session \"x\"\nparallel(\"first\"):\n  session \"a\"\n";
    assert_eq!(
        fmt(src),
        "loop until done (max: 3):\n  session \"x\"\nparallel (\"first\"):\n  session \"a\"\n"
    );
}

#[test]
fn line_breaks_in_brackets_are_kept_and_indented() {
    let src = "let xs = [\n        \"a\",   # first\n   # a note\n\n  \"b\",\n          ]\n";
    assert_eq!(
        fmt(src),
        "let xs = [\n  \"a\",  # first\n  # a note\n  \"b\",\n]\n"
    );
}

#[test]
fn indent_width_is_configurable() {
    let src = "if a:\n  if b:\n    session \"x\"\n";
    assert_eq!(
        fmt_width(src, 4),
        "if a:\n    if b:\n        session \"x\"\n"
    );
}

#[test]
fn a_line_between_two_levels_stays_between_them() {
    // The lexer reads a dedent to a column between two levels as closing the deeper one
    // and opening a new one; the layout must keep that.
    let src = "let x = items | map:\n        session \"a\"\n    | filter:\n        session \"b\"\n";
    let out = fmt(src);
    let again = fmt(&out);
    assert_eq!(out, again);
    assert_eq!(
        out,
        "let x = items | map:\n  session \"a\"\n | filter:\n   session \"b\"\n"
    );
}

#[test]
fn syntax_errors_are_refused() {
    match format("agent :\n", &FmtOptions::default()) {
        Err(FmtError::Syntax(d)) => assert!(!d.is_empty()),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn blank_input_and_comment_only_files() {
    assert_eq!(fmt(""), "");
    assert_eq!(fmt("\n\n"), "");
    assert_eq!(fmt("\n# only\n\n\n# comments"), "# only\n\n# comments\n");
}

#[test]
fn carriage_returns_and_a_byte_order_mark() {
    assert_eq!(
        fmt("\u{feff}session  \"a\"\r\n\r\n\r\nsession \"b\"\r\n"),
        "\u{feff}session \"a\"\n\nsession \"b\"\n"
    );
}

#[test]
fn aligned_trailing_comments_stay_in_one_column() {
    // Aligned in the input (lines of code without a comment between): one column, two
    // spaces after the longest code of the run.
    let src = "agent a:\n  permissions:\n    network: allow          # the web\n    bash:   deny            # no shell\n    read: [\"x\"]\n    write: [\"notes/\"]       # its notes\n";
    let out = fmt(src);
    assert_eq!(
        out,
        "agent a:\n  permissions:\n    network: allow     # the web\n    bash: deny         # no shell\n    read: [\"x\"]\n    write: [\"notes/\"]  # its notes\n"
    );
    assert_eq!(fmt(&out), out);
    // Inside brackets too.
    let src = "let o = {\n  name: \"n\",      # shown\n  \"long key\": 1,  # quoted\n}\n";
    assert_eq!(
        fmt(src),
        "let o = {\n  name: \"n\",      # shown\n  \"long key\": 1,  # quoted\n}\n"
    );
}

#[test]
fn unaligned_or_separated_trailing_comments_get_two_spaces() {
    // Different columns; and the same column across a blank line or a comment line.
    let src = "let a = 1     # one\nlet bb = 2  # two\n\nlet c = 3    # three\n# between\nlet d = 4    # four\nlet e = 5    # five\n";
    let out = fmt(src);
    assert_eq!(
        out,
        "let a = 1  # one\nlet bb = 2  # two\n\nlet c = 3  # three\n# between\nlet d = 4  # four\nlet e = 5  # five\n"
    );
    assert_eq!(fmt(&out), out);
}
