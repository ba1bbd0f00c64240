//! Sessions: agent prompts, context, model, permissions, interpolation.

use crate::harness::*;
use prose_machine::value::Value;
use prose_machine::Limits;
use serde_json::json;

#[test]
fn session_requests_carry_agent_context_model_and_permissions() {
    let src = r#"input topic: "The topic"

agent writer:
  model: opus
  prompt: "You write about {topic} for {audience}."
  permissions:
    bash: deny

const out-dir = "out"
let audience = "engineers"
let facts = { title: "Rust", tags: ["fast", "safe"] }
let draft = session: writer
  prompt: "Write about {facts.title} ({facts.tags[1]})"
  context: [facts, audience]
let review = session "Review the draft of {topic}"
  model: haiku
  context: { draft, who: audience }
  permissions:
    write: [out-dir, "{out-dir}/{topic}.md"]
    network: allow
output result = review
"#;
    let mut h = Harness::with(
        compile(src),
        &[("topic", Value::text("borrowing"))],
        Limits::default(),
    );
    h.run(echo);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Write about Rust (safe)",
            "0:1 session: Review the draft of borrowing",
        ]
    );
    let s = h.sessions();
    assert_eq!(s[0].agent.as_deref(), Some("writer"));
    assert_eq!(
        s[0].system.as_deref(),
        Some("You write about borrowing for engineers.")
    );
    assert_eq!(s[0].model.as_deref(), Some("opus"));
    assert_eq!(
        ctx(s[0]),
        [
            (
                "facts".to_string(),
                r#"{"title":"Rust","tags":["fast","safe"]}"#.to_string()
            ),
            ("audience".to_string(), "engineers".to_string()),
        ]
    );
    assert_eq!(
        perms(s[0]),
        [("bash".to_string(), vec!["deny".to_string()])]
    );
    assert!(!s[0].resume);
    assert_eq!(s[1].agent, None);
    assert_eq!(s[1].system, None);
    assert_eq!(s[1].model.as_deref(), Some("haiku"));
    assert_eq!(
        ctx(s[1]),
        [
            (
                "draft".to_string(),
                "Write about Rust (safe) done".to_string()
            ),
            ("who".to_string(), "engineers".to_string()),
        ]
    );
    assert_eq!(
        perms(s[1]),
        [
            (
                "write".to_string(),
                vec!["out".to_string(), "out/borrowing.md".to_string()]
            ),
            ("network".to_string(), vec!["allow".to_string()]),
        ]
    );
    assert_eq!(
        h.outputs(),
        json!({ "result": "Review the draft of borrowing done" })
    );
}

#[test]
fn labels_resume_skills_and_retry_reach_the_request() {
    let src = r#"import "web-search" from "github:openprose/skills"

agent captain:
  model: sonnet
  persist: true
  prompt: "You coordinate."
  skills: ["web-search"]

let plan = session "Plan"
  prompt: "Plan the {step} step"
  retry: 2
  backoff: linear
let step = "second"
session: captain
  prompt: "Start"
let next = resume: captain
  prompt: "Continue from: {plan}"
output plan = next
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(
        h.seen(),
        [
            "0:0 session: Plan the {step} step",
            "0:1 session: Start",
            "0:2 resume: Continue from: Plan the {step} step done"
        ]
    );
    let s = h.sessions();
    assert_eq!(s[0].label.as_deref(), Some("Plan"));
    assert_eq!(s[0].retry, 2);
    assert_eq!(s[0].backoff, bytecode_spec::Backoff::Linear);
    // `session:` on a persistent agent starts fresh; `resume:` carries its memory.
    assert!(!s[1].resume && s[1].persistent && s[1].memory.is_none());
    assert!(s[2].resume);
    assert_eq!(s[2].memory.as_deref(), Some("Start"));
    assert_eq!(s[2].agent.as_deref(), Some("captain"));
    assert_eq!(s[2].system.as_deref(), Some("You coordinate."));
    assert_eq!(s[2].skills, ["web-search"]);
    assert_eq!(
        h.outputs(),
        json!({ "plan": "Continue from: Plan the {step} step done done" })
    );
}

#[test]
fn agent_permission_lists_resolve_in_the_sessions_scope() {
    let src = r#"agent archivist:
  permissions:
    write: [log-root, "{log-root}/archive/*.md"]
let log-root = "/var/log/app"
session: archivist
  prompt: "Archive the logs"
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    let s = h.sessions();
    assert_eq!(
        perms(s[0]),
        [(
            "write".to_string(),
            vec![
                "/var/log/app".to_string(),
                "/var/log/app/archive/*.md".to_string()
            ]
        )]
    );
}

#[test]
fn a_first_resume_starts_fresh_with_a_warning_and_is_e018_under_strict() {
    let src = "agent captain:\n  persist: true\n  prompt: \"You coordinate.\"\nresume: captain\n  prompt: \"Go on\"\nresume: captain\n  prompt: \"Next\"\n";
    // The program's first run: the agent has no memory yet, so its first `resume:` is a
    // fresh session, with a warning; the second continues from the memory the first left.
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(h.seen(), ["0:0 session: Go on", "0:1 resume: Next"]);
    assert_eq!(h.sessions()[1].memory.as_deref(), Some("Go on"));
    let warnings: Vec<_> = h
        .events
        .iter()
        .filter_map(|e| match e {
            prose_machine::trace::Event::Warning { code, site, .. } => Some((*code, site.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(warnings, [(Code::E018, "t:4".to_string())]);
    // Under --strict it is the reference's error.
    let mut h = Harness::new(src);
    h.set_strict();
    h.run(echo);
    let e = h.error();
    assert_eq!(e.code, Code::E018);
    assert_eq!(e.line, 4);
}

#[test]
fn a_fresh_session_on_an_agent_with_memory_warns_w011() {
    let src = "agent scribe:\n  persist: true\nsession: scribe\n  prompt: \"one\"\nsession: scribe\n  prompt: \"two\"\n";
    let mut h = Harness::new(src);
    h.run(echo);
    let codes: Vec<_> = h
        .events
        .iter()
        .filter_map(|e| match e {
            prose_machine::trace::Event::Warning { code, site, .. } => Some((*code, site.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(codes, [(Code::W011, "t:5".to_string())]);
}

#[test]
fn each_session_replaces_the_agents_memory() {
    let src = "agent scribe:\n  persist: true\nsession: scribe\n  prompt: \"one\"\nresume: scribe\n  prompt: \"two\"\nsession: scribe\n  prompt: \"three\"\nresume: scribe\n  prompt: \"four\"\n";
    let mut h = Harness::new(src);
    h.run(echo);
    let memories: Vec<Option<&str>> = h.sessions().iter().map(|s| s.memory.as_deref()).collect();
    // A fresh `session:` ignores the memory, and its update replaces it.
    assert_eq!(memories, [None, Some("one"), None, Some("three")]);
}

#[test]
fn a_null_value_interpolates_as_nothing_with_a_warning_and_is_never_sent_to_convert() {
    let src = "let plan = { title: \"Ship\" }\nsession \"Do {plan.title} by {plan.deadline}\"\n";
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(h.seen(), ["0:0 session: Do Ship by "]);
    let warnings: Vec<_> = h
        .events
        .iter()
        .filter_map(|e| match e {
            prose_machine::trace::Event::Warning {
                code,
                site,
                message,
            } => Some((*code, site.clone(), message.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        warnings,
        [(
            Code::W200,
            "t:2".to_string(),
            "`{plan.deadline}` is null here: it is left out of the text".to_string()
        )]
    );
    // Null used as a number is an error, not a question to the model.
    let mut h = Harness::new("let n = null\nrepeat n:\n  session \"x\"\n");
    h.run(echo);
    assert!(h.log.is_empty(), "{:?}", h.seen());
    assert_eq!(h.error().code, Code::E204);
    assert_eq!(h.error().message, "cannot use null as integer");
}

#[test]
fn labels_interpolate_like_prompts() {
    let src = r#"input topic: "The topic"
session "Summarise {topic}"
  prompt: "Write a summary of {topic}"
let brief = session "Brief on {topic}"
  prompt: "Brief me"
"#;
    let mut h = Harness::with(
        compile(src),
        &[("topic", Value::text("cats"))],
        Limits::default(),
    );
    h.run(echo);
    let labels: Vec<Option<&str>> = h.sessions().iter().map(|s| s.label.as_deref()).collect();
    assert_eq!(labels, [Some("Summarise cats"), Some("Brief on cats")]);
}

#[test]
fn an_output_reassigned_later_keeps_its_last_value() {
    let src = r#"output poem = session "Write a poem"
poem = session "Improve it"
output items = []
repeat 3 as i:
  items = items + [i]
output verdict = "pending"
if items:
  verdict = "done"
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(
        h.outputs(),
        json!({ "poem": "Improve it done", "items": [0, 1, 2], "verdict": "done" })
    );
}

#[test]
fn a_session_without_context_inherits_the_previous_step() {
    let src = r#"let draft = session "Write a draft"
session "Improve it"
session "Fresh task"
  context: []
session "A" -> session "B"
session "C"
let notes = session "Notes"
session "Use notes"
  context: draft
if true:
  session "Inside"
parallel:
  x = session "Branch"
session "After parallel"
"#;
    let mut h = Harness::new(src);
    h.run(echo);
    let got: Vec<(String, Vec<(String, String)>)> = h
        .sessions()
        .iter()
        .map(|s| (s.prompt.clone(), ctx(s)))
        .collect();
    let pair = |l: &str, v: &str| (l.to_string(), v.to_string());
    assert_eq!(
        got,
        [
            ("Write a draft".into(), vec![]),
            (
                "Improve it".into(),
                vec![pair("draft", "Write a draft done")]
            ),
            ("Fresh task".into(), vec![]),
            ("A".into(), vec![pair("previous", "Fresh task done")]),
            ("B".into(), vec![pair("previous", "A done")]),
            ("C".into(), vec![pair("previous", "B done")]),
            ("Notes".into(), vec![pair("previous", "C done")]),
            // An explicit context replaces what would be inherited.
            (
                "Use notes".into(),
                vec![pair("draft", "Write a draft done")]
            ),
            // A nested body starts a sequence of its own; so does a branch.
            ("Inside".into(), vec![]),
            ("Branch".into(), vec![]),
            // What follows a construct that is not a session inherits nothing.
            ("After parallel".into(), vec![]),
        ]
    );
}
