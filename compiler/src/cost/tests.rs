use super::*;
use crate::compile::Options;
use std::path::Path;

fn options() -> Options {
    Options {
        require_imports: true,
        ..Options::default()
    }
}

fn compiled(c: &Compilation) {
    let errors: Vec<_> = c
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.message.clone())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

fn analyse(src: &str) -> Bounds {
    let mut c = Compilation::new(options());
    let root = c.add_source(Path::new("test.prose"), src);
    compiled(&c);
    bounds(&c, root, &Pricing::default())
}

/// Sessions as `min / max`, judgments likewise.
fn counts(src: &str) -> (String, String) {
    let b = analyse(src);
    (
        format!(
            "{} / {}",
            b.sessions.min.render(poly::count),
            b.sessions.max.render(poly::count)
        ),
        format!(
            "{} / {}",
            b.judgments.min.render(poly::count),
            b.judgments.max.render(poly::count)
        ),
    )
}

fn sessions(src: &str) -> String {
    counts(src).0
}

#[test]
fn straight_line_sessions_count_once_and_retries_in_the_most() {
    assert_eq!(sessions("session \"a\"\nsession \"b\"\n"), "2 / 2");
    assert_eq!(
        sessions("session \"a\"\n  retry: 2\nsession \"b\"\n"),
        "2 / 4"
    );
    assert_eq!(sessions("let x = \"no model here\"\n"), "0 / 0");
}

#[test]
fn repeat_multiplies_by_a_constant_or_an_input() {
    assert_eq!(sessions("repeat 3:\n  session \"a\"\n"), "3 / 3");
    assert_eq!(
        sessions("input rounds: \"how many\"\nrepeat rounds:\n  session \"a\"\n  session \"b\"\n"),
        "2*rounds / 2*rounds"
    );
    // Nested: the counts multiply.
    assert_eq!(
        sessions("repeat 2:\n  repeat 3:\n    session \"a\"\n"),
        "6 / 6"
    );
}

#[test]
fn loops_run_to_their_max_and_conditions_are_judged_first() {
    assert_eq!(sessions("loop (max: 4):\n  session \"a\"\n"), "4 / 4");
    assert_eq!(
        counts("loop until **done** (max: 5):\n  session \"a\"\n"),
        ("0 / 5".into(), "1 / 5".into())
    );
    assert_eq!(
        sessions("let n = 3\nloop while **more** (max: n):\n  session \"a\"\n"),
        "0 / 3"
    );
}

#[test]
fn a_loop_without_max_is_unbounded_and_says_where() {
    let b = analyse("session \"first\"\nloop until **done**:\n  session \"a\"\n");
    assert_eq!(b.sessions.min, Poly::constant(1.0));
    assert_eq!(b.sessions.max, Count::Unbounded);
    assert_eq!(b.cost.max, Count::Unbounded);
    let note = b.notes.iter().find(|n| n.message.contains("unbounded"));
    assert_eq!(note.map(|n| n.line), Some(2), "{:?}", b.notes);
    // A loop without max that asks nothing costs nothing.
    assert_eq!(
        sessions("let x = 1\nloop while x < 3:\n  x = x + 1\n"),
        "0 / 0"
    );
}

#[test]
fn fan_outs_count_per_element() {
    assert_eq!(
        sessions("for t in [\"a\", \"b\", \"c\"]:\n  session \"about {t}\"\n"),
        "3 / 3"
    );
    assert_eq!(
        sessions("input topics: \"a list\"\nparallel for t in topics:\n  session \"about {t}\"\n"),
        "len(topics) / len(topics)"
    );
    // A list bound once keeps its length; a pipeline maps, filters and pmaps it.
    assert_eq!(
        sessions(
            "let xs = [1, 2]\nlet ys = xs | map:\n  session \"double {item}\"\n| filter:\n  session \"keep {item}?\"\n| pmap:\n  session \"use {item}\"\n"
        ),
        "4 / 6"
    );
    // A list the model writes is a symbol named after its variable.
    assert_eq!(
        sessions("let ideas = session \"list ideas\"\nfor i in ideas:\n  session \"expand {i}\"\n"),
        "1 + len(ideas) / 1 + len(ideas)"
    );
}

#[test]
fn branches_take_the_least_and_most_of_their_paths() {
    let (s, j) = counts(
        "if **urgent**:\n  session \"a\"\n  session \"b\"\nelif **later**:\n  session \"c\"\nelse:\n  let x = 1\n",
    );
    assert_eq!(s, "0 / 2");
    // The first condition always, the second only when the first is false.
    assert_eq!(j, "1 / 2");
    let (s, j) = counts(
        "choice **which**:\n  option \"one\":\n    session \"a\"\n  option \"two\":\n    session \"b\"\n    session \"c\"\n",
    );
    assert_eq!((s.as_str(), j.as_str()), ("1 / 2", "1 / 1"));
}

#[test]
fn unordered_branches_are_conservative_and_noted() {
    let b = analyse(
        "input xs: \"a list\"\nif **wide**:\n  for x in xs:\n    session \"a {x}\"\nelse:\n  repeat 3:\n    session \"b\"\n",
    );
    assert_eq!(b.sessions.min, Poly::zero());
    assert_eq!(
        b.sessions.max.render(poly::count),
        "3 + len(xs)",
        "the larger of each term"
    );
    assert!(
        b.notes.iter().any(|n| n.message.contains("conservative")),
        "{:?}",
        b.notes
    );
}

#[test]
fn try_may_run_body_and_handler() {
    assert_eq!(
        sessions("try:\n  session \"a\"\n  session \"b\"\ncatch as e:\n  session \"c\"\nfinally:\n  session \"d\"\n"),
        "2 / 4"
    );
    assert_eq!(
        sessions("try:\n  session \"a\"\nfinally:\n  session \"d\"\n"),
        "2 / 2"
    );
}

#[test]
fn parallel_sums_and_first_or_any_may_wait_for_fewer() {
    assert_eq!(
        sessions("parallel:\n  a = session \"a\"\n  b = session \"b\"\n  c = session \"c\"\n"),
        "3 / 3"
    );
    assert_eq!(
        sessions("parallel (\"first\"):\n  a = session \"a\"\n  b = session \"b\"\n"),
        "1 / 2"
    );
    assert_eq!(
        sessions("parallel (\"any\", count: 2):\n  a = session \"a\"\n  b = session \"b\"\n  c = session \"c\"\n"),
        "2 / 3"
    );
    assert_eq!(
        sessions(
            "input xs: \"a list\"\nparallel (\"first\") for x in xs:\n  session \"try {x}\"\n"
        ),
        "0 / len(xs)"
    );
}

#[test]
fn blocks_inline_with_their_arguments_and_recursion_is_unbounded() {
    assert_eq!(
        sessions("block each(items):\n  for i in items:\n    session \"do {i}\"\ndo each([1, 2, 3])\ndo each([4])\n"),
        "4 / 4"
    );
    let b = analyse(
        "block walk(n):\n  session \"step\"\n  if **deeper**:\n    do walk(n)\ndo walk(1)\n",
    );
    assert_eq!(b.sessions.min, Poly::constant(1.0));
    assert_eq!(b.sessions.max, Count::Unbounded);
    assert!(b.notes.iter().any(|n| n.message.contains("calls itself")));
}

#[test]
fn imported_programs_count_with_their_arguments() {
    let dir = std::env::temp_dir().join(format!("prosec-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("lib.prose"),
        "input parts: \"a list\"\nfor p in parts:\n  session \"summarize {p}\"\noutput done = session \"merge\"\n",
    )
    .expect("write");
    let main = dir.join("main.prose");
    std::fs::write(
        &main,
        "use \"./lib.prose\" as lib\ninput docs: \"a list\"\nlet a = lib(parts: [1, 2])\nlet b = lib(parts: docs)\n",
    )
    .expect("write");
    let mut c = Compilation::new(options());
    let root = c.add_file(&main).expect("load");
    compiled(&c);
    let b = bounds(&c, root, &Pricing::default());
    assert_eq!(b.sessions.max.render(poly::count), "4 + len(docs)");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cost_prices_each_model_at_the_assumed_tokens() {
    let pricing = Pricing {
        tokens_in: 1_000_000,
        tokens_out: 1_000_000,
        cache: None,
        ..Pricing::default()
    };
    let mut c = Compilation::new(options());
    let root = c.add_source(
        Path::new("t.prose"),
        "agent big:\n  model: opus\nagent local:\n  model: \"llama3\"\nsession: big\n  prompt: \"a\"\nsession \"b\"\nsession: local\n  prompt: \"c\"\nif **ok**:\n  session \"d\"\n",
    );
    compiled(&c);
    let b = bounds(&c, root, &pricing);
    // opus 15 + 75; sonnet 3 + 15 for the plain session and the judgment, and the last
    // session only in the most; llama3 has no price.
    assert_eq!(b.cost.min, Poly::constant(90.0 + 18.0 + 18.0));
    assert_eq!(b.cost.max, Count::Finite(Poly::constant(90.0 + 18.0 * 3.0)));
    let unpriced: Vec<_> = b
        .models
        .iter()
        .filter(|m| m.price.is_none())
        .map(|m| m.model.as_str())
        .collect();
    assert_eq!(unpriced, ["llama3"]);
    assert_eq!(b.models.len(), 3);
}

#[test]
fn a_cached_prefix_is_read_in_the_least_and_written_in_the_most() {
    let src = "session \"a\"\nsession \"b\"\n";
    let mut c = Compilation::new(options());
    let root = c.add_source(Path::new("t.prose"), src);
    compiled(&c);
    // Sonnet, a million tokens in of which 600,000 cached, a million out: $1.20 plain
    // input and $15 output, and the prefix at $0.18 read or $2.25 written (five minutes),
    // $3.60 written for an hour.
    let pricing = |cache| Pricing {
        tokens_in: 1_000_000,
        tokens_out: 1_000_000,
        tokens_cached: 600_000,
        cache,
        ..Pricing::default()
    };
    let five = bounds(&c, root, &pricing(Some(PromptCache::FiveMinutes)));
    let close = |p: &Poly, v: f64| p.as_constant().is_some_and(|c| (c - v).abs() < 1e-9);
    assert!(
        close(&five.cost.min, 2.0 * (1.20 + 0.18 + 15.0)),
        "{:?}",
        five.cost
    );
    let Count::Finite(most) = &five.cost.max else {
        panic!("bounded")
    };
    assert!(close(most, 2.0 * (1.20 + 2.25 + 15.0)), "{:?}", five.cost);
    let hour = bounds(&c, root, &pricing(Some(PromptCache::OneHour)));
    let Count::Finite(most) = &hour.cost.max else {
        panic!("bounded")
    };
    assert!(close(most, 2.0 * (1.20 + 3.60 + 15.0)), "{:?}", hour.cost);
    // No caching: every input token at the input price, least and most.
    let off = bounds(&c, root, &pricing(None));
    assert!(close(&off.cost.min, 2.0 * 18.0), "{:?}", off.cost);
    // A cached share larger than the input is all of it.
    let all = Pricing {
        tokens_cached: 5_000_000,
        ..pricing(Some(PromptCache::FiveMinutes))
    };
    assert_eq!(all.cached_in(), 1_000_000);
}

#[test]
fn the_right_side_of_and_or_may_be_skipped() {
    assert_eq!(
        counts("let x = 1\nif **first** or **second**:\n  session \"a\"\n").1,
        "1 / 2"
    );
    assert_eq!(
        counts("let x = 1\nif x > 0 and **sure**:\n  session \"a\"\n").1,
        "0 / 1"
    );
}

#[test]
fn a_symbolic_max_bounds_the_loop_and_the_note_names_the_line() {
    let b = analyse(
        "input tries: \"how many\"\nsession \"start\"\nloop until **good** (max: tries):\n  session \"again\"\n    retry: 1\n",
    );
    assert_eq!(b.sessions.min, Poly::constant(1.0));
    assert_eq!(b.sessions.max.render(poly::count), "1 + 2*tries");
    // With `tries` possibly zero, the condition may never be judged.
    assert_eq!(b.judgments.min, Poly::zero());
    let note = &b.notes[0];
    assert_eq!(note.line, 3);
    assert!(
        note.message
            .starts_with("`loop until **good** (max: tries)`: 0 to tries time(s), each 1 to 2 session(s), 1 judgment(s)"),
        "{}",
        note.message
    );
}
