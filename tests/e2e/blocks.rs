//! Blocks: recursion, early return, named outputs, the depth limit.

use crate::harness::*;
use prose_machine::Limits;
use serde_json::json;

#[test]
fn a_recursive_block_terminates_with_an_early_return() {
    let src = r#"block countdown(n):
  if n <= 0: output "liftoff at {n}"
  session "T-minus {n}"
  let rest = do countdown(n - 1)
  output rest
let r = do countdown(3)
output r = r
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: T-minus 3",
            "0:1 session: T-minus 2",
            "0:2 session: T-minus 1",
        ]
    );
    assert_eq!(h.outputs(), json!({ "r": "liftoff at 0" }));
}

#[test]
fn a_block_returns_early_from_inside_a_loop() {
    let src = r#"block find(items):
  for item, i in items:
    let verdict = session "Is {item} the one?"
    if verdict == "yes": output "found {item} at {i}"
  output "none"
output hit = do find(["a", "b", "c"])
output miss = do find(["x"])
"#;
    let mut h = Harness::new(src);
    h.run(|req| match text(req) {
        "Is b the one?" => reply("yes"),
        _ => reply("no"),
    });
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Is a the one?",
            "0:1 session: Is b the one?",
            "0:2 session: Is x the one?",
        ]
    );
    assert_eq!(
        h.outputs(),
        json!({ "hit": "found b at 1", "miss": "none" })
    );
}

#[test]
fn named_block_outputs_are_visible_to_the_caller() {
    // A named `output` in a block is also its result and returns from it.
    let src = r#"block grade(summary-text):
  output grade-note = session "Grade {summary-text}"
  session "Never asked"
let status = do grade("the essay")
session "Record {grade-note} ({status})"
output note = grade-note
"#;
    let mut h = Harness::new(src);
    h.run(|req| reply(&text(req).replace("Grade", "B for")));
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Grade the essay",
            "0:1 session: Record B for the essay (B for the essay)",
        ]
    );
    assert_eq!(h.outputs(), json!({ "note": "B for the essay" }));
}

#[test]
fn blocks_read_program_variables_and_the_caller_sees_their_writes() {
    let src = r#"let tone = "dry"
let count = 0
block write(topic):
  count = count + 1
  output session "Write about {topic} in a {tone} tone"
let a = do write("cats")
tone = "warm"
let b = do write("dogs")
output count = count
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Write about cats in a dry tone",
            "0:1 session: Write about dogs in a warm tone",
        ]
    );
    assert_eq!(h.outputs(), json!({ "count": 2 }));
}

#[test]
fn runaway_recursion_is_a_clean_error() {
    let src = r#"block dig(n):
  session "Dig level {n}"
  do dig(n + 1)
do dig(1)
"#;
    let limits = Limits {
        depth: 4,
        ..Limits::default()
    };
    let mut h = Harness::with(compile(src), &[], limits);
    h.run(echo);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Dig level 1",
            "0:1 session: Dig level 2",
            "0:2 session: Dig level 3",
        ]
    );
    let e = h.error();
    assert_eq!(
        e.message,
        "block calls nest deeper than 4 (runaway recursion?)"
    );
    assert_eq!(e.line, 3);
    assert_eq!(e.statement.trim(), "do dig(n + 1)");
}

#[test]
fn recursion_through_parallel_branches_counts_towards_the_depth_limit() {
    let src = r#"block deeper(n):
  session "Level {n}"
  parallel:
    x = do deeper(n + 1)
do deeper(1)
"#;
    let limits = Limits {
        depth: 6,
        ..Limits::default()
    };
    let mut h = Harness::with(compile(src), &[], limits);
    h.run(echo);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Level 1",
            "0/0.0:0 session: Level 2",
            "0/0.0/0.0:0 session: Level 3",
        ]
    );
    let e = h.error();
    assert_eq!(
        e.message,
        "block calls nest deeper than 6 (runaway recursion?)"
    );
    assert_eq!(e.statement.trim(), "x = do deeper(n + 1)");
}

#[test]
fn runaway_fan_out_is_a_clean_error() {
    // Without a limit on live branches this doubles until memory runs out.
    let src = r#"block split(n):
  parallel:
    a = do split(n + 1)
    b = do split(n + 1)
do split(0)
"#;
    let limits = Limits {
        fibers: 50,
        ..Limits::default()
    };
    let mut h = Harness::with(compile(src), &[], limits);
    h.run(echo);
    assert!(h.log.is_empty());
    let e = h.error();
    assert_eq!(
        e.message,
        "more than 50 parallel branches at once (runaway recursion? `--max-branches` raises \
         the limit)"
    );
    assert_eq!(e.line, 2);
}

#[test]
fn finished_branches_no_longer_count_as_live() {
    // 3 rounds of 20 branches each fit under a limit of 20 at once.
    let src = r#"repeat 3:
  parallel for i in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]:
    session "Task {i}"
"#;
    let limits = Limits {
        fibers: 20,
        ..Limits::default()
    };
    let mut h = Harness::with(compile(src), &[], limits);
    h.run(echo);
    assert_eq!(h.outputs(), json!({}));
    assert_eq!(h.log.len(), 60);
    // Nor do cancelled ones.
    let src = r#"repeat 3:
  parallel ("first"):
    session "A"
    session "B"
    session "C"
"#;
    let limits = Limits {
        fibers: 3,
        ..Limits::default()
    };
    let mut h = Harness::with(compile(src), &[], limits);
    h.run(echo);
    assert_eq!(h.outputs(), json!({}));
    assert_eq!(h.withdrawn.len(), 4);
}
