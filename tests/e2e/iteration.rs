//! `repeat` and `for`: counts and lists read out of text, locally or by a Convert request.

use crate::harness::*;
use prose_machine::value::Value;
use prose_machine::Limits;
use serde_json::json;
use std::sync::Arc;

#[test]
fn repeat_reads_a_count_given_as_text() {
    let src = r#"input times: "How many drafts"
repeat times as k:
  session "Draft {k}"
let more = session "How many reviews?"
repeat more:
  session "Review"
"#;
    let mut h = Harness::with(
        compile(src),
        &[("times", Value::text(" 2 "))],
        Limits::default(),
    );
    h.run(|req| match req.ask {
        Ask::Session(ref s) if s.prompt == "How many reviews?" => reply("3"),
        _ => echo(req),
    });
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Draft 0",
            "0:1 session: Draft 1",
            "0:2 session: How many reviews?",
            "0:3 session: Review",
            "0:4 session: Review",
            "0:5 session: Review",
        ]
    );
}

#[test]
fn repeat_asks_the_driver_to_convert_a_count_written_in_prose() {
    let src = r#"let n = session "How many soak runs?"
repeat n as run:
  session "Soak run {run}"
"#;
    let mut h = Harness::new(src);
    h.run(|req| match &req.ask {
        Ask::Session(s) if s.prompt.starts_with("How many") => {
            reply("Two should do, given the risk")
        }
        Ask::Convert(_) => Ok(Answer::Convert(Value::Int(2))),
        _ => echo(req),
    });
    assert_eq!(
        h.seen(),
        [
            "0:0 session: How many soak runs?",
            "0:1 convert Int: Two should do, given the risk",
            "0:2 session: Soak run 0",
            "0:3 session: Soak run 1",
        ]
    );
}

const FOR: &str = r#"let risks = session "List the risks"
let plans = []
for risk, i in risks:
  let plan = session "Mitigate risk #{i}: {risk}"
  plans = plans + [plan]
output plans = plans
"#;

/// Runs [`FOR`] with `answer` as the list of risks; conversions answer `converted`.
fn for_over(answer: &str) -> Harness {
    let mut h = Harness::new(FOR);
    h.run(|req| match &req.ask {
        Ask::Session(s) if s.prompt == "List the risks" => reply(answer),
        Ask::Convert(_) => Ok(Answer::Convert(Value::List(Arc::new(vec![
            Value::text("drift"),
            Value::text("outage"),
        ])))),
        _ => echo(req),
    });
    h
}

#[test]
fn for_iterates_a_json_answer_with_its_index() {
    let h = for_over(r#"["drift", "outage"]"#);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: List the risks",
            "0:1 session: Mitigate risk #0: drift",
            "0:2 session: Mitigate risk #1: outage",
        ]
    );
    assert_eq!(
        h.outputs(),
        json!({ "plans": ["Mitigate risk #0: drift done", "Mitigate risk #1: outage done"] })
    );
}

#[test]
fn for_iterates_a_bulleted_or_fenced_answer_without_asking() {
    for answer in [
        "- drift\n- outage\n",
        "1. drift\n2. outage",
        "Here they are:\n```json\n[\"drift\", \"outage\"]\n```",
    ] {
        let h = for_over(answer);
        assert_eq!(
            h.seen(),
            [
                "0:0 session: List the risks",
                "0:1 session: Mitigate risk #0: drift",
                "0:2 session: Mitigate risk #1: outage",
            ],
            "answer {answer:?}"
        );
    }
}

#[test]
fn for_asks_the_driver_to_convert_prose() {
    let h = for_over("Mostly configuration drift, and the odd outage.");
    assert_eq!(
        h.seen(),
        [
            "0:0 session: List the risks",
            "0:1 convert List: Mostly configuration drift, and the odd outage.",
            "0:2 session: Mitigate risk #0: drift",
            "0:3 session: Mitigate risk #1: outage",
        ]
    );
    assert_eq!(h.outputs()["plans"].as_array().map(Vec::len), Some(2));
}

#[test]
fn for_over_a_literal_list_and_members_of_records() {
    let src = r#"let team = [{ name: "Ada", role: "lead" }, { name: "Lin", role: "dev" }]
for person in team:
  session "Brief {person.name}, our {person.role}"
output first = team[0].name
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Brief Ada, our lead",
            "0:1 session: Brief Lin, our dev"
        ]
    );
    assert_eq!(h.outputs(), json!({ "first": "Ada" }));
}

#[test]
fn pipelines_filter_map_reduce_and_pmap() {
    let src = r#"let items = session "List the links"
let kept = items | filter:
  session "Is {item} relevant?"
let draft = kept
  | pmap:
      session "Summarize {item}"
  | reduce(acc, x):
      session "Merge {acc} with {x}"
output kept = kept
output draft = draft
"#;
    let mut h = Harness::new(src);
    h.run(|req| match text(req) {
        "List the links" => reply(r#"["a", "b", "c"]"#),
        "Is b relevant?" => reply("No, it is an advert."),
        p if p.starts_with("Is ") => reply("Yes."),
        p if p.starts_with("Summarize ") => reply(&p.replace("Summarize ", "s-")),
        _ => echo(req),
    });
    assert_eq!(
        h.seen(),
        [
            "0:0 session: List the links",
            "0:1 session: Is a relevant?",
            "0:2 session: Is b relevant?",
            "0:3 session: Is c relevant?",
            "0/0.0:0 session: Summarize a",
            "0/0.1:0 session: Summarize c",
            "0:4 session: Merge s-a with s-c",
        ]
    );
    assert_eq!(
        h.outputs(),
        json!({ "kept": ["a", "c"], "draft": "Merge s-a with s-c done" })
    );
}
