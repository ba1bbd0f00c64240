//! A block's own variables read by its caller after `do block(...)` (diagnostic E146): the
//! block hands them back as it returns, like named outputs.

use crate::harness::*;
use serde_json::json;

#[test]
fn a_parallel_branch_result_in_a_block_reaches_the_caller() {
    let src = r#"block research(topic):
  parallel:
    docs = session "Docs on {topic}"
    code = session "Code on {topic}"
  let summary = session "Summarise {topic}"
do research("caching")
session "Plan with {docs}, {code} and {summary}"
output plan = docs
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    // `echo` answers each prompt with itself and " done".
    assert_eq!(
        h.seen().last().map(String::as_str),
        Some(
            "0:1 session: Plan with Docs on caching done, Code on caching done and Summarise caching done"
        )
    );
    assert_eq!(h.outputs(), json!({ "plan": "Docs on caching done" }));
}

#[test]
fn a_variable_the_call_never_bound_reads_as_null() {
    // The early return skips `found`; the caller's `found` is null, not a stale value.
    let src = r#"block pick(n):
  if n <= 0: output "none"
  let found = session "Find {n}"
  output "done"
do pick(1)
let first = found
do pick(0)
output first = first
output second = found
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(h.seen(), ["0:0 session: Find 1"]);
    assert_eq!(
        h.outputs(),
        json!({ "first": "Find 1 done", "second": null })
    );
}

#[test]
fn a_callers_own_variable_is_not_overwritten() {
    // `caller` has a `note` of its own: `scribble`'s stays hidden from it.
    let src = r#"block scribble():
  let note = session "Scribble"
  output done = true
block caller():
  let note = "mine"
  do scribble()
  output note
output kept = do caller()
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(h.seen(), ["0:0 session: Scribble"]);
    assert_eq!(h.outputs(), json!({ "kept": "mine" }));
}
