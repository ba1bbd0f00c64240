//! Mid-program inputs, choices, and deterministic request ids.

use crate::harness::*;
use prose_machine::trace::Event;
use prose_machine::value::Value;
use serde_json::json;

#[test]
fn a_mid_program_input_becomes_the_variable() {
    let src = r#"input destination: "Where to"
let overview = session "Overview of {destination}"
input budget: **Given the overview of {destination}, what is your budget?**
session "Plan {destination} within {budget} euros"
output budget = budget
"#;
    let mut h = Harness::with(
        compile(src),
        &[("destination", Value::text("Lisbon"))],
        Default::default(),
    );
    h.run(|req| match &req.ask {
        Ask::Input(_) => Ok(Answer::Input(Value::Int(900))),
        _ => echo(req),
    });
    // The question interpolates the variables in scope where it is asked.
    let seen = h.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0], "0:0 session: Overview of Lisbon");
    assert!(
        seen[1]
            .starts_with("0:1 input: budget (Given the overview of Lisbon, what is your budget?"),
        "{}",
        seen[1]
    );
    assert_eq!(seen[2], "0:2 session: Plan Lisbon within 900 euros");
    assert_eq!(h.outputs(), json!({ "budget": 900 }));
}

const CHOICE: &str = r#"let plan = choice **which itinerary fits the traveller**:
  option "Relaxed":
    session "Expand the relaxed itinerary"
  option "Packed":
    let day = session "Plan the busiest day"
    session "Expand the packed itinerary around {day}"
  option "Mixed":
    session "Combine the itineraries"
output plan = plan
"#;

#[test]
fn a_choice_runs_the_chosen_options_body() {
    let mut h = Harness::new(CHOICE);
    h.run(|req| match &req.ask {
        Ask::Choose(_) => Ok(Answer::Choose(1)),
        _ => echo(req),
    });
    assert_eq!(
        h.seen(),
        [
            "0:0 choose: which itinerary fits the traveller [Relaxed|Packed|Mixed]",
            "0:1 session: Plan the busiest day",
            "0:2 session: Expand the packed itinerary around Plan the busiest day done",
        ]
    );
    assert_eq!(
        h.outputs(),
        json!({ "plan": "Expand the packed itinerary around Plan the busiest day done done" })
    );
    // The trace and the narration say which option was taken.
    let chose: Vec<String> = h
        .events
        .iter()
        .filter(|e| matches!(e, Event::Chose { .. }))
        .filter_map(Event::narrate)
        .collect();
    // Numbered from 0, as `prosec dis` and `prosevm diff` number options.
    assert_eq!(chose, ["[Choice] option 1: \"Packed\""]);
}

#[test]
fn a_judgment_sees_the_latest_answer_and_the_loop_it_is_in() {
    let src = "loop until **the draft is good** (max: 3):\n  session \"Draft\"\n";
    let mut h = Harness::new(src);
    let mut seen = Vec::new();
    h.run(|req| match &req.ask {
        Ask::Evaluate(e) => {
            seen.push(
                e.context
                    .iter()
                    .map(|c| format!("{}: {}", c.label, c.value))
                    .collect::<Vec<_>>(),
            );
            Ok(Answer::Evaluate(seen.len() == 2))
        }
        _ => echo(req),
    });
    assert_eq!(
        seen,
        [
            vec!["loop at line 1: iteration 1 of at most 3".to_string()],
            vec![
                "latest answer: Draft done".to_string(),
                "loop at line 1: iteration 2 of at most 3".to_string()
            ],
        ]
    );
}

#[test]
fn a_choice_out_of_range_is_an_error() {
    let mut h = Harness::new(CHOICE);
    h.run(|_| Ok(Answer::Choose(3)));
    assert_eq!(
        h.error().message,
        "the answer to 0:0 is option 4 of 3, which does not fit the question"
    );
    assert_eq!(h.error().code, Code::E212);
    assert_eq!(h.error().line, 1);
}

/// A program with forks, loops, blocks and conversions, for the determinism test.
const BUSY: &str = r#"block review(x):
  output session "Review {x}"
let topics = session "List topics"
let notes = []
parallel for t in topics:
  let a = session "Research {t}"
  parallel:
    b = session "Check {t}"
    c = do review(t)
  notes = notes + [a]
loop until **the notes are complete** (max: 3):
  session "Extend the notes"
output notes = notes
"#;

#[test]
fn the_same_answers_give_the_same_requests() {
    let run = |order| {
        let mut h = Harness::new(BUSY);
        h.run_in(order, |req| match &req.ask {
            Ask::Session(s) if s.prompt == "List topics" => reply("- x\n- y\n- z"),
            Ask::Evaluate(_) => Ok(Answer::Evaluate(false)),
            _ => echo(req),
        });
        h
    };
    for order in [Order::Fifo, Order::Lifo] {
        let (a, b) = (run(order), run(order));
        assert_eq!(a.ids(), b.ids());
        assert_eq!(a.seen(), b.seen());
        assert_eq!(a.outputs(), b.outputs());
        assert_eq!(a.log.len(), 1 + 3 * 3 + 3 + 3);
    }
    // Ids name the asking fiber, not the moment of asking: both orders ask the same set.
    let (mut fifo, mut lifo) = (run(Order::Fifo).ids(), run(Order::Lifo).ids());
    fifo.sort();
    lifo.sort();
    assert_eq!(fifo, lifo);
}

#[test]
fn an_output_publishing_a_variable_of_its_name_is_said_once_per_binding() {
    // `output summary = summary` publishes the `let` above it; each binding of `summary`
    // publishes the output, so the statement itself says nothing new.
    let src =
        "let summary = session \"Write\"\noutput summary = summary\nsummary = session \"Again\"\n";
    let mut h = Harness::with(compile(src), &[], Default::default());
    h.run(echo);
    let said: Vec<String> = h
        .events
        .iter()
        .filter(|e| matches!(e, Event::Output { .. }))
        .filter_map(Event::narrate)
        .collect();
    assert_eq!(
        said,
        [
            "[Output] output summary = \"Write done\"",
            "[Output] output summary = \"Again done\""
        ]
    );
    assert_eq!(h.outputs(), json!({ "summary": "Again done" }));
}
