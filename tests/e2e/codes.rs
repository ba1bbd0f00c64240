//! Every runtime error code a verified program can reach, each from a program that reaches
//! it: the code, the line and the message a user sees.

use crate::harness::*;
use prose_machine::value::Value;
use prose_machine::{Limits, Machine, RuntimeError};

/// Runs `src` (answering sessions with their prompt, failing those whose prompt starts with
/// "Fail") with `limits`; returns the error that ended it.
fn error_of(src: &str, inputs: &[(&str, Value)], limits: Limits) -> RuntimeError {
    let mut h = Harness::with(compile(src), inputs, limits);
    h.run(|req| {
        if text(req).starts_with("Fail") {
            fail("the provider is down")
        } else {
            echo(req)
        }
    });
    h.error().clone()
}

#[test]
fn each_runtime_code_is_reached_by_a_program() {
    let tight = Limits {
        iterations: 50,
        depth: 8,
        fibers: 4,
        ..Limits::default()
    };
    let cases: &[(&str, Code, u32, &str)] = &[
        ("throw \"stop here\"\n", Code::E202, 1, "stop here"),
        ("let ok = false\nassert ok: \"not ready\"\n", Code::E203, 2, "not ready"),
        (
            "let n = null\nrepeat n:\n  session \"x\"\n",
            Code::E204,
            2,
            "cannot use null as integer",
        ),
        ("let xs = [1, 2]\nlet y = xs[5]\n", Code::E205, 2, "index 5 is out of range"),
        (
            "let big = 9223372036854775807\nlet z = big + 1\n",
            Code::E206,
            2,
            "integer overflow",
        ),
        ("loop:\n  session \"again\"\n", Code::E207, 1, "iterations in total"),
        (
            "block dive(n):\n  do dive(n)\ndo dive(1)\n",
            Code::E208,
            2,
            "nest deeper than 8",
        ),
        (
            "let xs = [1, 2, 3, 4, 5]\nxs | pmap:\n  session \"Work on {item}\"\n",
            Code::E209,
            2,
            "more than 4 parallel branches",
        ),
        ("session \"Fail now\"\n", Code::E210, 1, "the provider is down"),
        (
            "parallel (\"any\", count: 2, on-fail: \"continue\"):\n  session \"Fail one\"\n  session \"Fail two\"\n  session \"works\"\n",
            Code::E210,
            2,
            "the provider is down",
        ),
    ];
    for (src, code, line, message) in cases {
        let e = error_of(src, &[], tight);
        assert_eq!((e.code, e.line), (*code, *line), "{src}: {e}");
        assert!(e.message.contains(message), "{src}: {e}");
        assert!(e.to_string().contains(&format!("[{code}]")), "{e}");
    }
}

#[test]
fn a_fork_that_cannot_reach_its_count_is_e211() {
    // Branches that end without failing, too few of them for `any` with a count.
    let src =
        "parallel (\"any\", count: 3, on-fail: \"ignore\"):\n  session \"a\"\n  session \"b\"\n";
    let mut h = Harness::new(src);
    h.run(echo);
    // `ignore` lets it finish; without it, too few successes fail the join.
    assert!(h.outcome.as_ref().is_some_and(|o| o.is_ok()));
    let src = "parallel (\"any\", count: 3):\n  session \"a\"\n  session \"b\"\n";
    let mut h = Harness::new(src);
    h.run(echo);
    assert_eq!(h.error().code, Code::E211);
    assert!(
        h.error().message.contains("branches succeeded"),
        "{}",
        h.error()
    );
}

#[test]
fn missing_and_unknown_inputs_are_e200_and_e201() {
    let artifact = compile("input topic: \"What to write about\"\nsession \"On {topic}\"\n");
    let none = Default::default();
    let e = Machine::new(artifact.clone(), &none, Limits::default())
        .err()
        .expect("refused");
    assert_eq!(e.code, Code::E200);
    assert!(e.message.contains("topic"), "{e}");
    let mut wrong = rustc_hash::FxHashMap::default();
    wrong.insert("topics".to_string(), Value::text("x"));
    let e = Machine::new(artifact, &wrong, Limits::default())
        .err()
        .expect("refused");
    assert_eq!(e.code, Code::E201);
    assert!(e.message.contains("did you mean `topic`?"), "{e}");
}

#[tokio::test]
async fn a_journal_that_cannot_be_written_is_e214() {
    use prose_runtime::driver::mock::{Mock, MockOptions};
    use prose_runtime::runner::{run_durable, Durable, RunConfig};
    use prose_store::journal::Journal;
    use std::sync::Arc;
    // /dev/full takes every write and fails every flush: the disk is full.
    let journal = Journal::open(
        std::path::Path::new("/dev/full"),
        &prose_store::journal::Contents::empty(0),
    )
    .expect("opens");
    let machine = Machine::new(
        compile("session \"Hi\"\n"),
        &Default::default(),
        Limits::default(),
    )
    .expect("starts");
    let mut durable = Durable {
        journal: Box::new(prose_store::file::FileSink {
            journal,
            run: "r".into(),
        }),
        replay: Default::default(),
        batch: false,
        approvals: Vec::new(),
    };
    let workshop = Arc::new(prose_agent::workshop::Workshop::new(
        ".".into(),
        Default::default(),
        prose_agent::people::People::Nobody,
    ));
    let e = run_durable(
        machine,
        Arc::new(Mock::new(MockOptions::default())),
        workshop,
        &RunConfig::default(),
        Some(&mut durable),
        &mut |_: &prose_machine::trace::Event| {},
    )
    .await
    .expect_err("the journal is full");
    assert_eq!(e.code, Code::E214);
    assert!(e.message.contains("cannot write the journal"), "{e}");
}
