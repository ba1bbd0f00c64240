//! Loops: `loop until`, `loop while`, plain `loop:` and the global iteration limit.

use crate::harness::*;
use prose_machine::Limits;
use serde_json::json;

/// Answers sessions with their prompt and conditions with `verdicts`, in turn.
fn verdicts(list: &'static [bool]) -> impl FnMut(&Request) -> Outcome {
    let mut next = list.iter();
    move |req| match &req.ask {
        Ask::Evaluate(_) => Ok(Answer::Evaluate(
            *next.next().expect("no more verdicts scripted"),
        )),
        _ => echo(req),
    }
}

const UNTIL: &str = r#"let n = 0
loop until **the draft is ready** (max: 3) as i:
  session "Improve the draft (pass {i})"
  n = n + 1
output passes = n
"#;

#[test]
fn loop_until_stops_when_the_condition_turns_true() {
    let mut h = Harness::new(UNTIL);
    h.run(verdicts(&[false, false, true]));
    assert_eq!(
        h.seen(),
        [
            "0:0 evaluate: the draft is ready",
            "0:1 session: Improve the draft (pass 0)",
            "0:2 evaluate: the draft is ready",
            "0:3 session: Improve the draft (pass 1)",
            "0:4 evaluate: the draft is ready",
        ]
    );
    assert_eq!(h.outputs(), json!({ "passes": 2 }));
    // A condition is judged with the fiber's latest answer as context.
    let contexts: Vec<Option<&str>> = h
        .log
        .iter()
        .filter_map(|r| match &r.ask {
            Ask::Evaluate(e) => Some(
                e.context
                    .iter()
                    .find(|c| c.label == "latest answer")
                    .map(|c| c.value.as_str()),
            ),
            _ => None,
        })
        .collect();
    assert_eq!(
        contexts,
        [
            None,
            Some("Improve the draft (pass 0) done"),
            Some("Improve the draft (pass 1) done"),
        ]
    );
}

#[test]
fn loop_until_stops_at_its_max() {
    let mut h = Harness::new(UNTIL);
    h.run(verdicts(&[false, false, false]));
    // The limit is checked before the condition: no fourth evaluation.
    assert_eq!(
        h.seen(),
        [
            "0:0 evaluate: the draft is ready",
            "0:1 session: Improve the draft (pass 0)",
            "0:2 evaluate: the draft is ready",
            "0:3 session: Improve the draft (pass 1)",
            "0:4 evaluate: the draft is ready",
            "0:5 session: Improve the draft (pass 2)",
        ]
    );
    assert_eq!(h.sessions().len(), 3);
    assert_eq!(h.outputs(), json!({ "passes": 3 }));
}

#[test]
fn loop_while_runs_while_the_condition_holds() {
    let src = r#"let log = []
loop while **there are open issues** (max: 10):
  let fixed = session "Fix one issue"
  log = log + [fixed]
output fixed = log
"#;
    let mut h = Harness::new(src);
    let mut conditions = verdicts(&[true, true, false]);
    let mut fixes = 0;
    h.run(|req| match &req.ask {
        Ask::Session(_) => {
            fixes += 1;
            reply(&format!("fix {fixes}"))
        }
        _ => conditions(req),
    });
    assert_eq!(
        h.seen(),
        [
            "0:0 evaluate: there are open issues",
            "0:1 session: Fix one issue",
            "0:2 evaluate: there are open issues",
            "0:3 session: Fix one issue",
            "0:4 evaluate: there are open issues",
        ]
    );
    assert_eq!(h.outputs(), json!({ "fixed": ["fix 1", "fix 2"] }));
}

#[test]
fn a_runaway_loop_ends_with_a_clean_error_at_the_iteration_limit() {
    let src = r#"session "Start"
loop:
  session "Poll the queue"
output never = "reached"
"#;
    let limits = Limits {
        iterations: 4,
        ..Limits::default()
    };
    let mut h = Harness::with(compile(src), &[], limits);
    h.run(echo);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Start",
            "0:1 session: Poll the queue",
            "0:2 session: Poll the queue",
            "0:3 session: Poll the queue",
            "0:4 session: Poll the queue",
        ]
    );
    let e = h.error();
    assert_eq!(
        e.message,
        "loops ran more than 4 iterations in total (a runaway loop?)"
    );
    assert_eq!((e.program.as_str(), e.line), ("t.prose", 2));
    assert_eq!(e.statement, "loop:");
}

#[test]
fn the_iteration_limit_counts_every_loop_of_the_run() {
    // Two loops of 3 iterations each fit in 6, not in 5.
    let src = r#"repeat 3:
  session "a"
for x in [1, 2, 3]:
  session "b{x}"
"#;
    let run = |iterations| {
        let limits = Limits {
            iterations,
            ..Limits::default()
        };
        let mut h = Harness::with(compile(src), &[], limits);
        h.run(echo);
        h
    };
    // Only iterations count, not the steps that find a loop finished.
    assert_eq!(run(6).outputs(), json!({}));
    let h = run(5);
    assert_eq!(h.error().line, 3);
    assert_eq!(h.sessions().len(), 5);
}
