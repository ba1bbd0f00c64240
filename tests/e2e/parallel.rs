//! `parallel`: join strategies, failure policies, cancellation, named results and appends
//! from `parallel for` branches.

use crate::harness::*;
use serde_json::json;

/// The id of the pending request whose text is `prompt`.
fn id_of(pending: &[Request], prompt: &str) -> String {
    pending
        .iter()
        .find(|r| text(r) == prompt)
        .unwrap_or_else(|| panic!("no pending request {prompt:?}"))
        .id
        .to_string()
        .clone()
}

#[test]
fn first_cancels_the_other_branches_and_withdraws_their_requests() {
    let src = r#"let winner = parallel ("first"):
  session "A"
  parallel:
    session "B1"
    session "B2"
  do:
    session "C1"
    session "C2"
session "Use {winner}"
output winner = winner
"#;
    let mut h = Harness::new(src);
    let first = h.step();
    assert_eq!(
        h.seen(),
        [
            "0/0.0:0 session: A",
            "0/0.2:0 session: C1",
            "0/0.1/0.0:0 session: B1",
            "0/0.1/0.1:0 session: B2",
        ]
    );
    assert!(h.answer(&id_of(&first, "C1"), reply("c1")));
    let next = h.step();
    assert_eq!(
        next.iter().map(describe).collect::<Vec<_>>(),
        ["0/0.2:1 session: C2"]
    );
    assert!(h.withdrawn.is_empty());
    // A wins: the nested fork's requests and C2 are withdrawn.
    assert!(h.answer(&id_of(&first, "A"), reply("a")));
    let after = h.step();
    assert_eq!(h.withdrawn, ["0/0.1/0.0:0", "0/0.1/0.1:0", "0/0.2:1"]);
    // `first` yields the winner's value alone.
    assert_eq!(
        after.iter().map(describe).collect::<Vec<_>>(),
        ["0:0 session: Use a"]
    );
    // Answers to withdrawn requests are refused.
    assert!(!h.answer("0/0.1/0.0:0", reply("late")));
    assert!(!h.answer("0/0.2:1", reply("late")));
    assert!(h.answer("0:0", reply("used")));
    h.step();
    assert_eq!(h.outputs(), json!({ "winner": "a" }));
}

#[test]
fn a_branch_that_wins_at_once_means_the_others_never_ask() {
    let src = r#"let cache = "cached answer"
let r = parallel ("first"):
  session "Compute it the slow way"
  cache
output r = r
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    // The session was asked and withdrawn within one run: the host never sees it.
    assert!(h.log.is_empty());
    assert!(h.withdrawn.is_empty());
    assert_eq!(h.outputs(), json!({ "r": "cached answer" }));
}

const ANY: &str = r#"let picks = parallel ("any", count: 2, on-fail: "continue"):
  session "A"
  session "B"
  session "C"
  session "D"
output picks = picks
"#;

#[test]
fn any_with_a_count_finishes_after_enough_successes_despite_a_failure() {
    let mut h = Harness::new(ANY);
    let pending = h.step();
    assert_eq!(
        h.seen(),
        [
            "0/0.0:0 session: A",
            "0/0.1:0 session: B",
            "0/0.2:0 session: C",
            "0/0.3:0 session: D",
        ]
    );
    assert!(h.answer(&id_of(&pending, "A"), fail("A broke")));
    assert!(h.step().is_empty());
    assert!(h.answer(&id_of(&pending, "D"), reply("d")));
    assert!(h.step().is_empty());
    assert!(h.outcome.is_none());
    assert!(h.answer(&id_of(&pending, "B"), reply("b")));
    // Two successes: C is cancelled and the block's value has nulls for A and C.
    assert!(h.step().is_empty());
    assert_eq!(h.outputs(), json!({ "picks": [null, "b", null, "d"] }));
}

#[test]
fn any_fails_once_the_count_cannot_be_reached() {
    let mut h = Harness::new(ANY);
    let pending = h.step();
    h.answer(&id_of(&pending, "A"), fail("A broke"));
    h.step();
    h.answer(&id_of(&pending, "B"), reply("b"));
    h.step();
    h.answer(&id_of(&pending, "C"), fail("C broke"));
    h.step();
    h.answer(&id_of(&pending, "D"), fail("D broke"));
    h.step();
    assert_eq!(h.error().message, "A broke");
    assert_eq!(h.error().line, 2);
}

#[test]
fn first_with_continue_waits_past_a_failure_for_a_success() {
    let src = r#"let r = parallel ("first", on-fail: "continue"):
  session "Fast but unreliable"
  session "Slow but reliable"
output r = r
"#;
    let mut h = Harness::new(src);
    h.run(|req| match text(req) {
        "Fast but unreliable" => fail("flaky"),
        _ => echo(req),
    });
    assert_eq!(
        h.seen(),
        [
            "0/0.0:0 session: Fast but unreliable",
            "0/0.1:0 session: Slow but reliable",
        ]
    );
    assert_eq!(h.outputs(), json!({ "r": "Slow but reliable done" }));
}

const POLICY: &str = r#"let log = "start"
try:
  let results = parallel (on-fail: "POLICY"):
    a = session "A"
    b = session "B"
  log = log + " results=" + results
catch as err:
  log = log + " caught=" + err.message
session "Report: {log}"
output log = log
output b = b
"#;

/// Runs [`POLICY`] under `policy`, failing A and then answering whatever is still pending.
fn policy(policy: &str) -> Harness {
    let mut h = Harness::with(
        compile(&POLICY.replace("POLICY", policy)),
        &[],
        Default::default(),
    );
    h.run(|req| match text(req) {
        "A" => fail("A broke"),
        _ => echo(req),
    });
    h
}

#[test]
fn fail_fast_cancels_the_siblings_at_the_first_failure() {
    let h = policy("fail-fast");
    assert_eq!(
        h.seen(),
        [
            "0/0.0:0 session: A",
            "0/0.1:0 session: B",
            "0:0 session: Report: start caught=A broke",
        ]
    );
    assert_eq!(h.withdrawn, ["0/0.1:0"]);
    assert_eq!(
        h.outputs(),
        json!({ "log": "start caught=A broke", "b": null })
    );
}

#[test]
fn continue_lets_every_branch_finish_then_raises() {
    let h = policy("continue");
    assert_eq!(
        h.seen(),
        [
            "0/0.0:0 session: A",
            "0/0.1:0 session: B",
            "0:0 session: Report: start caught=A broke",
        ]
    );
    assert!(h.withdrawn.is_empty());
    assert_eq!(
        h.outputs(),
        json!({ "log": "start caught=A broke", "b": "B done" })
    );
}

#[test]
fn ignore_turns_a_failed_branch_into_null() {
    let h = policy("ignore");
    assert_eq!(
        h.seen(),
        [
            "0/0.0:0 session: A",
            "0/0.1:0 session: B",
            r#"0:0 session: Report: start results=[null,"B done"]"#,
        ]
    );
    assert_eq!(
        h.outputs(),
        json!({ "log": r#"start results=[null,"B done"]"#, "b": "B done" })
    );
}

#[test]
fn named_branch_results_are_visible_after_the_block() {
    let src = r#"parallel:
  sec = session "Security review"
  perf = do:
    let notes = session "Profile"
    session "Performance review of {notes}"
session "Synthesize"
  context: { sec, perf }
output sec = sec
output perf = perf
"#;
    let mut h = Harness::new(src);
    h.run_in(Order::Lifo, echo);
    assert_eq!(
        h.seen(),
        [
            "0/0.0:0 session: Security review",
            "0/0.1:0 session: Profile",
            "0/0.1:1 session: Performance review of Profile done",
            "0:0 session: Synthesize",
        ]
    );
    assert_eq!(
        ctx(h.sessions()[3]),
        [
            ("sec".to_string(), "Security review done".to_string()),
            (
                "perf".to_string(),
                "Performance review of Profile done done".to_string()
            ),
        ]
    );
    assert_eq!(
        h.outputs(),
        json!({ "sec": "Security review done", "perf": "Performance review of Profile done done" })
    );
}

const APPENDS: &str = r#"let acc = []
parallel for topic, i in ["a", "b", "c", "d"]:
  let r = session "Research {topic}"
  acc = acc + [r]
output all = acc
"#;

#[test]
fn appends_from_parallel_for_branches_are_all_kept() {
    let mut h = Harness::new(APPENDS);
    h.run_in(Order::Lifo, |req| {
        reply(&text(req).replace("Research ", ""))
    });
    assert_eq!(
        h.seen(),
        [
            "0/0.0:0 session: Research a",
            "0/0.1:0 session: Research b",
            "0/0.2:0 session: Research c",
            "0/0.3:0 session: Research d",
        ]
    );
    // In the order the branches reached the append: the reverse of the fork order here.
    assert_eq!(h.outputs(), json!({ "all": ["d", "c", "b", "a"] }));
}

mod appends {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Whatever the order of the answers, every append survives, in answer order.
        #[test]
        fn survive_any_answer_order(order in Just(vec![0usize, 1, 2, 3]).prop_shuffle()) {
            let mut h = Harness::new(APPENDS);
            let pending = h.step();
            for &i in &order {
                let req = &pending[i];
                prop_assert!(h.answer(&req.id.to_string(), reply(&text(req).replace("Research ", ""))));
                h.step();
            }
            let want: Vec<String> = order.iter().map(|i| ["a", "b", "c", "d"][*i].to_string()).collect();
            prop_assert_eq!(h.outputs(), json!({ "all": want }));
        }
    }
}
