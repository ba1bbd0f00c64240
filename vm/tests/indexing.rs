//! Indexing an answer: a literal index says the value is a list, so a session's text is read
//! as one first, from either end.

use crate::support;

#[test]
fn literal_indexes_read_an_answer_as_a_list_from_either_end() {
    let dir = support::scratch("indexing");
    std::fs::write(
        dir.join("prog.prose"),
        "let xs = session \"List three fruits\"\noutput first = xs[0]\noutput last = xs[-1]\n",
    )
    .expect("program");
    std::fs::write(
        dir.join("script.json"),
        r#"[{"kind": "session", "reply": "- apple\n- pear\n- plum"}]"#,
    )
    .expect("script");
    let (code, out, err) = support::output(
        support::prosevm()
            .current_dir(&dir)
            .args(["run", "prog.prose", "--mock-script", "script.json"])
            .args(["--trace", "quiet", "--format", "json"]),
    );
    assert_eq!(code, 0, "{err}");
    let outputs = support::outputs(&out);
    assert_eq!(
        outputs,
        serde_json::json!({"first": "apple", "last": "plum"})
    );
}
