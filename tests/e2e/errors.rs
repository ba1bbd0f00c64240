//! try / catch / finally, throw and rethrow, and uncaught errors.

use crate::harness::*;
use serde_json::json;

const TRY: &str = r#"let log = []
try:
  let r = session "Risky"
  log = log + ["body: " + r]
catch as err:
  log = log + ["caught: " + err.message]
finally:
  session "Clean up"
  log = log + ["finally"]
output log = log
"#;

#[test]
fn finally_runs_after_the_body() {
    let mut h = Harness::new(TRY);
    h.run(echo);
    assert_eq!(h.seen(), ["0:0 session: Risky", "0:1 session: Clean up"]);
    assert_eq!(
        h.outputs(),
        json!({ "log": ["body: Risky done", "finally"] })
    );
}

#[test]
fn finally_runs_after_the_catch_which_sees_the_message() {
    let mut h = Harness::new(TRY);
    h.run(|req| match text(req) {
        "Risky" => fail("the disk is full"),
        _ => echo(req),
    });
    assert_eq!(h.seen(), ["0:0 session: Risky", "0:1 session: Clean up"]);
    assert_eq!(
        h.outputs(),
        json!({ "log": ["caught: the disk is full", "finally"] })
    );
}

#[test]
fn finally_without_catch_runs_and_the_error_propagates() {
    let src = r#"session "Lock"
try:
  session "Deploy"
finally:
  session "Unlock"
session "Celebrate"
"#;
    let mut h = Harness::new(src);
    h.run(|req| match text(req) {
        "Deploy" => fail("deploy failed"),
        _ => echo(req),
    });
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Lock",
            "0:1 session: Deploy",
            "0:2 session: Unlock"
        ]
    );
    let e = h.error();
    assert_eq!((e.message.as_str(), e.line), ("deploy failed", 3));
    assert_eq!(e.statement.trim(), r#"session "Deploy""#);
}

#[test]
fn a_bare_throw_in_a_catch_rethrows_to_the_outer_catch() {
    let src = r#"let log = []
try:
  try:
    session "Roll out"
    throw "the canary is unhealthy"
  catch as e:
    session "Roll back after: {e}"
    throw
  finally:
    log = log + ["inner finally"]
  log = log + ["not reached"]
catch as outer:
  log = log + ["outer: " + outer.message]
output log = log
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Roll out",
            "0:1 session: Roll back after: the canary is unhealthy",
        ]
    );
    assert_eq!(
        h.outputs(),
        json!({ "log": ["inner finally", "outer: the canary is unhealthy"] })
    );
}

#[test]
fn an_uncaught_throw_fails_the_run_at_its_line() {
    let src = r#"input service: "The service"
session "Check {service}"
if **the check failed**:
  throw "{service} is broken"
output ok = true
"#;
    let mut h = Harness::with(
        compile(src),
        &[("service", prose_machine::value::Value::text("billing"))],
        Default::default(),
    );
    h.run(echo);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Check billing",
            "0:1 evaluate: the check failed"
        ]
    );
    let e = h.error();
    assert_eq!(e.message, "billing is broken");
    assert_eq!(e.code, Code::E202);
    assert_eq!((e.program.as_str(), e.line), ("t.prose", 4));
    assert_eq!(e.statement.trim(), r#"throw "{service} is broken""#);
    assert_eq!(
        e.to_string(),
        "t.prose:4: [E202] billing is broken\n    throw \"{service} is broken\""
    );
}

#[test]
fn errors_from_blocks_and_branches_keep_the_line_where_they_were_raised() {
    let src = r#"block check(x):
  if x > 2:
    throw "too big: {x}"
  output x
parallel:
  a = do check(1)
  b = do check(5)
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert!(h.log.is_empty());
    let e = h.error();
    assert_eq!((e.message.as_str(), e.line), ("too big: 5", 3));
}

#[test]
fn a_failed_assert_throws_its_message() {
    let src = r#"let share = 40
try:
  assert share > 0 and share <= 25:
    "The canary share must be between 1 and 25 percent"
catch as e:
  output why = e.message
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(
        h.outputs(),
        json!({ "why": "The canary share must be between 1 and 25 percent" })
    );
}

#[test]
fn a_failed_operation_leaves_the_variable_as_it_was() {
    let src = r#"let n = 5
let items = ["a"]
try:
  n = n + [1]
catch as e:
  items = items + [e.message]
output n = n
output items = items
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(
        h.outputs(),
        json!({ "n": 5, "items": ["a", "cannot add an integer and a list"] })
    );
}

#[test]
fn an_error_in_a_block_unwinds_to_the_callers_catch() {
    let src = r#"block deploy(target):
  session "Deploy {target}"
  throw "{target} rejected the deploy"
let status = "pending"
try:
  do deploy("eu-west")
  status = "deployed"
catch as e:
  status = "failed: " + e.message
session "Report {status}"
output status = status
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Deploy eu-west",
            "0:1 session: Report failed: eu-west rejected the deploy",
        ]
    );
    assert_eq!(
        h.outputs(),
        json!({ "status": "failed: eu-west rejected the deploy" })
    );
}
