//! Name resolution behaviours beyond single diagnostic codes: what is visible where, and what
//! must not be reported.

use prosec::compile::{Compilation, Options};
use std::path::Path;

fn codes_in(dir: &Path, files: &[(&str, &str)]) -> Vec<(String, u32)> {
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("write fixture");
    }
    // Every lint reported, including those allowed by default.
    let lints = prosec::diagnostics::Code::ALL
        .iter()
        .filter(|c| c.is_lint())
        .map(|&c| (c, prosec::lints::Level::Warn))
        .collect();
    let mut c = Compilation::new(Options {
        lints,
        ..Options::default()
    });
    c.add_file(&dir.join(files[0].0)).expect("load root");
    c.diagnostics
        .iter()
        .map(|d| {
            let line = c.sources.get(d.file).line_col(d.span.start as usize).line;
            (d.code.as_str().to_string(), line)
        })
        .collect()
}

/// Checks one program, in a directory of its own (tests run in parallel).
fn codes(src: &str) -> Vec<(String, u32)> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = tempdir(&format!("single-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    codes_in(&dir, &[("main.prose", src)])
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("sema-{name}"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn block_outputs_are_visible_after_a_call_in_any_position() {
    let src = "block grade(t):\n  output note = session \"Grade {t}\"\ndo grade(\"x\")\nsession \"a\"\n  context: note\nblock score(t):\n  output points = session \"Score {t}\"\nlet s = do score(\"y\")\nsession \"b\"\n  context: [points, s]\n";
    assert_eq!(codes(src), []);
}

#[test]
fn a_block_output_is_not_a_clash_with_its_caller_side_binding() {
    let src = "block rec(d):\n  if d <= 0: output d\n  do rec(d - 1)\n  output result = session \"work\"\ndo rec(3)\nsession \"use\"\n  context: result\n";
    assert_eq!(codes(src), []);
}

#[test]
fn block_outputs_are_not_visible_before_the_call() {
    let src = "block grade(t):\n  output note = session \"Grade {t}\"\nsession \"a\"\n  context: note\ndo grade(\"x\")\n";
    assert_eq!(codes(src), [("E105".to_string(), 4)]);
}

#[test]
fn interpolated_member_paths_are_checked_against_program_outputs() {
    let dir = tempdir("outputs");
    let got = codes_in(
        &dir,
        &[
            ("main.prose", "use \"./lib.prose\" as lib\nlet u = lib(q: \"x\")\nsession \"{u.title} and {u.nope}\"\n"),
            ("lib.prose", "input q: \"query\"\noutput title = session \"T {q}\"\n"),
        ],
    );
    assert_eq!(got, [("E028".to_string(), 3)]);
}

#[test]
fn parallel_branch_assignments_declare_named_results() {
    let src = "parallel:\n  a = session \"A\"\n  b = session \"B\"\nsession \"both\"\n  context: { a, b }\n";
    assert_eq!(codes(src), []);
}

#[test]
fn agent_prompts_may_name_variables_bound_later() {
    let src = "agent w:\n  model: sonnet\n  prompt: \"You write about {topic}\"\nlet topic = session \"Pick a topic\"\nsession: w\n";
    assert_eq!(codes(src), []);
}

#[test]
fn loop_variables_are_scoped_to_their_loop() {
    let src = "for x in [1, 2]:\n  session \"{x}\"\nsession \"after {x}\"\n";
    assert_eq!(codes(src), [("E140".to_string(), 3)]);
}

#[test]
fn variables_declared_in_branches_stay_visible_afterwards() {
    // Declared in both arms of an `if`: one variable, and no conflict (only one arm runs).
    let src = "if **cheap**:\n  let plan = session \"quick\"\nelse:\n  let plan = session \"thorough\"\nsession \"run\"\n  context: plan\n";
    assert_eq!(codes(src), []);
}

#[test]
fn bindings_in_exclusive_arms_are_not_conflicts() {
    // `if`/`elif`/`else` arms, nested arms, and `choice` options each run alone.
    let src = "if **quick one**:\n  let x = session \"1\"\n  output r = x\nelif **slow one**:\n  if **any time**:\n    let x = session \"2\"\n    output r = x\n  else:\n    let x = session \"3\"\n    output r = x\nelse:\n  const x = \"4\"\n  output r = x\nchoice **which**:\n  option \"A\":\n    output s = session \"a\"\n  option \"B\":\n    output s = session \"b\"\n";
    assert_eq!(codes(src), []);
}

#[test]
fn bindings_that_can_both_run_are_still_conflicts() {
    // Two `if`s in a row can both run; so can an arm and the code after it.
    let src = "if **quick one**:\n  output r = session \"1\"\nif **slow one**:\n  output r = session \"2\"\nif **any time**:\n  let x = session \"3\"\nlet x = session \"4\"\n";
    assert_eq!(
        codes(src),
        [("E024".to_string(), 4), ("E019".to_string(), 7)]
    );
}

#[test]
fn names_declared_inside_a_parallel_branch_stay_in_the_branch() {
    // `r` belongs to each iteration of the fan-out; `acc` is shared; `a` is a named result.
    let src = "let acc = []\nparallel for t in [\"x\", \"y\"]:\n  let r = session \"{t}\"\n  acc = acc + [r]\nparallel:\n  a = session \"A\"\n  do:\n    let inner = session \"B\"\nsession \"use\"\n  context: [acc, a]\nsession \"bad\"\n  context: [r, inner]\n";
    assert_eq!(
        codes(src),
        [("E105".to_string(), 12), ("E105".to_string(), 12)]
    );
}

#[test]
fn a_blocks_variables_read_by_the_caller_warn_once_each() {
    let src = "block sweep(t):\n  parallel:\n    docs = session \"Docs {t}\"\n    code = session \"Code {t}\"\ndo sweep(\"x\")\nsession \"Use {docs}\"\n  context: [docs, code]\n";
    assert_eq!(
        codes(src),
        [("E146".to_string(), 6), ("E146".to_string(), 7)]
    );
}

#[test]
fn a_declaration_after_the_call_takes_the_name_without_a_warning() {
    // `user` declares its own `docs` after calling `sweep`: its reads are of its own.
    let src = "block sweep(t):\n  let docs = session \"Docs {t}\"\nblock user():\n  do sweep(\"x\")\n  let docs = session \"Mine\"\n  session \"Use {docs}\"\ndo user()\n";
    assert_eq!(codes(src), []);
}

#[test]
fn binding_a_call_to_the_name_of_its_output_is_one_declaration() {
    let src = "block analyze(x):\n  output analysis = session \"Analyze {x}\"\nlet analysis = do analyze(\"it\")\nsession \"Use {analysis}\"\n";
    assert_eq!(codes(src), []);
}

#[test]
fn an_agents_tools_are_none_all_or_a_list_of_names() {
    let ok = "agent a:\n  tools: [read_file, \"grep\"]\nagent b:\n  tools: none\nagent c:\n  tools: all\nsession: a\n  prompt: \"x\"\nsession: b\n  prompt: \"y\"\nsession: c\n  prompt: \"z\"\n";
    assert_eq!(codes(ok), Vec::<(String, u32)>::new());
    let bad = "agent a:\n  tools: maybe\nagent b:\n  tools: [1]\nsession: a\n  prompt: \"x\"\nsession: b\n  prompt: \"y\"\n";
    assert_eq!(
        codes(bad),
        [("E144".to_string(), 2), ("E144".to_string(), 4)]
    );
}

#[test]
fn a_choice_may_be_decided_by_a_variables_text_but_not_by_a_number() {
    let ok = "let verdict = session \"Judge\"\nchoice verdict:\n  option \"A\":\n    session \"a\"\n  option \"B\":\n    session \"b\"\n";
    assert_eq!(codes(ok), Vec::<(String, u32)>::new());
    // The criteria are the variable, read when the choice is made.
    let dir = tempdir("choice-var");
    std::fs::write(dir.join("t.prose"), ok).expect("write");
    let mut c = Compilation::new(Options::default());
    c.add_file(&dir.join("t.prose")).expect("load");
    let (artifact, _) = prosec::codegen::build(&c, 0);
    let m = &artifact.modules[0];
    let choice = m.choices.values().next().expect("a choice");
    assert!(matches!(
        m.templates[choice.criteria].parts[..],
        [bytecode_spec::TplPart::Var { .. }]
    ));
    let bad = "choice 5:\n  option \"A\":\n    session \"a\"\n";
    assert_eq!(codes(bad), [("E144".to_string(), 1)]);
}
