//! A generator of realistic OpenProse programs covering every construct, used as the
//! benchmark corpus (see `benches/`), and a fake provider with rate limits for the HTTP
//! drivers' benches.

pub mod counting;
pub mod provider;

/// One generated program: a name and its source.
pub struct Program {
    /// File name, for diagnostics.
    pub name: String,
    /// Source text.
    pub text: String,
}

const TOPICS: [&str; 8] = [
    "quantum computing",
    "supply-chain security",
    "urban heat islands",
    "protein folding",
    "open-source governance",
    "battery chemistry",
    "coral reef recovery",
    "compiler design",
];

/// Generates program number `i`: agents, inputs, sessions with properties, parallel blocks,
/// loops, pipelines, error handling, choices, conditionals, blocks and outputs, with names and
/// prompt text varied by `i`.
pub fn program(i: usize) -> Program {
    let t = TOPICS[i % TOPICS.len()];
    let n = i % 7 + 2;
    let text = format!(
        r#"# Generated benchmark program {i}: a research and review workflow on {t}.
input topic-{i}: "The subject to research, for example {t}"
input depth: **How deep should the research go?**

agent researcher-{i}:
  model: sonnet
  prompt: """
You are a meticulous research assistant. You find primary sources, summarise them
faithfully, and always say which claims are uncertain. Topic: {{topic-{i}}}.
"""
  skills: ["web-search"]
  permissions:
    read: ["*.md", "docs/**/*.txt"]
    bash: deny
    network: allow

agent captain-{i}:
  model: opus
  persist: true
  prompt: "You coordinate the team and keep decisions consistent across reviews"

import "web-search" from "github:example/skills"

let plan = session: captain-{i}
  prompt: "Draft a research plan about {{topic-{i}}} with {n} angles; be specific about sources"
  retry: 3
  backoff: exponential

parallel ("any", count: 2, on-fail: "continue"):
  market = session: researcher-{i}
    prompt: "Research the market for {t} and list the five most important players"
    context: plan
  tech = session: researcher-{i}
    prompt: "Research the technology behind {t}, citing at least three papers"
    context: {{ plan, depth }}
  risks = try:
    session "List the main risks of {t}, with a one-line rationale each"
  catch as err:
    session "Explain what went wrong while listing risks"
      context: err

let angles = ["market", "technology", "regulation", "people", "cost-{i}"]
let findings = angles
  | filter:
      session "Is the angle {{item}} relevant to {t}? Answer yes or no."
  | map:
      session "Write a paragraph about {{item}} for the {t} report"
        context: [market, tech]
  | reduce(summary, part):
      session "Merge this part into the running summary without losing detail"
        context: [summary, part]

let drafts = []
repeat {n} as round:
  let draft = session "Write draft number {{round}} of the executive summary"
    context: findings
  drafts = drafts + [draft]

loop until **the summary is clear, sourced and under 500 words** (max: 5) as attempt:
  resume: captain-{i}
    prompt: "Review attempt {{attempt}} of the summary and request specific changes"
    context: {{ drafts, findings }}

block polish(text, level):
  if level <= 0: output text
  let better = session "Polish this text for publication, level {{level}}"
    context: text
  output do polish(better, level - 1)

for version, k in drafts:
  do polish(version, 2)

choice **which audience the report best suits**:
  option "Executives":
    session "Condense the report into five bullet points" -> session "Add a one-line recommendation"
  option "Engineers":
    session "Expand the technical appendix with diagrams described in text"

if **the findings contradict each other** or depth == "shallow":
  session "Flag the contradictions for a human reviewer"
elif **sources are thin**:
  throw "Not enough sources to publish"
else:
  assert findings != null: "findings must exist before publishing"

parallel for angle in angles:
  session "Write a social post about {{angle}} in {t}"

output report-{i} = session "Assemble the final report on {t}"
  context: {{ findings, drafts, plan }}
"#
    );
    Program {
        name: format!("bench-{i}.prose"),
        text,
    }
}

/// A typical 50-statement program (counting nested statements): agents, sessions with
/// properties, a parallel block, loops, a try, a choice and outputs.
pub fn fifty_statements() -> String {
    let mut src = String::from(
        "input topic: \"The subject\"\n\nagent writer:\n  model: sonnet\n  prompt: \"You write clearly about {topic}\"\n\n",
    );
    for i in 0..10 {
        src.push_str(&format!(
            "let note-{i} = session: writer\n  prompt: \"Write note {i} about {{topic}}, in three sentences\"\n  context: topic\n"
        ));
    }
    src.push_str("parallel:\n");
    for i in 0..6 {
        src.push_str(&format!(
            "  part-{i} = session \"Draft part {i} of the report on {{topic}}\"\n"
        ));
    }
    src.push_str("let parts = [part-0, part-1, part-2, part-3, part-4, part-5]\n");
    src.push_str("for p, k in parts:\n  session \"Review part {k}\"\n    context: p\n");
    src.push_str(
        "loop until **the report reads well** (max: 3):\n  session \"Polish the report\"\n",
    );
    src.push_str("try:\n  session \"Publish the report\"\ncatch as err:\n  session \"Explain the failure\"\n    context: err\n");
    src.push_str("choice **the best channel**:\n  option \"Email\":\n    session \"Send by email\"\n  option \"Blog\":\n    session \"Post on the blog\"\n");
    for i in 0..16 {
        src.push_str(&format!("session \"Follow-up task {i} for {{topic}}\"\n"));
    }
    src.push_str("if **the audience is technical**:\n  session \"Add an appendix\"\nelse:\n  session \"Add a glossary\"\n");
    src.push_str("output summary = session \"Summarise everything\"\n  context: parts\n");
    src
}

/// A chain of sessions: one, then `n` more, each given the previous answer as context.
pub fn session_chain(n: usize) -> String {
    let more = if n == 0 {
        String::new()
    } else {
        format!("repeat {n}:\n  prev = session \"Continue the chain\"\n    context: prev\n")
    };
    format!("let prev = session \"Start the chain\"\n{more}output last = prev\n")
}

/// A fan-out of `n` sessions over a list built by appending in a `repeat`, then one
/// session joining the results.
pub fn fan_out(n: usize) -> String {
    format!("let items = []\nrepeat {n} as i:\n  items = items + [i]\nlet results = items | pmap:\n  session \"Work on item {{item}}\"\noutput joined = session \"Join the results\"\n  context: results\n")
}

/// A program shaped like the large published ones: persistent agents (two kept for the
/// project, two for the run) whose sessions sit inside a patrol loop of `rounds` rounds,
/// each round calling blocks that call blocks (three surveys, an assessment, then a decision
/// by one of the agents, each agent deciding for a quarter of the rounds). It asks
/// `5 * rounds + 2` sessions, a fifth of them updating an agent's memory; compare it with
/// [`session_chain`]`(5 * rounds + 1)`, which asks as many.
pub fn patrol(rounds: usize) -> String {
    let q = rounds.div_ceil(4);
    let (q1, q2, q3) = (q, 2 * q, 3 * q);
    format!(
        r#"# A patrol: loops around persistent agents' sessions, in blocks calling blocks.
agent captain:
  persist: project
  prompt: "You coordinate the patrol and keep its decisions consistent"
agent navigator:
  persist: project
  prompt: "You plan the routes and remember the ones taken"
agent scout:
  persist: true
  prompt: "You scout ahead and remember what you saw"
agent warden:
  persist: true
  prompt: "You guard the camp and remember every alarm"

block survey(area, round):
  let seen = session "Survey the {{area}} sector on round {{round}}"
  output seen

block assess(reports, round):
  let risk = session "Assess the risks found on round {{round}}"
    context: reports
  output risk

block decide(risk, round):
  if round < {q1}:
    let d = resume: captain
      prompt: "Decide the next move after round {{round}}"
      context: risk
    output d
  elif round < {q2}:
    let d = resume: navigator
      prompt: "Plan the route after round {{round}}"
      context: risk
    output d
  elif round < {q3}:
    let d = resume: scout
      prompt: "Scout ahead after round {{round}}"
      context: risk
    output d
  else:
    let d = resume: warden
      prompt: "Set the watch after round {{round}}"
      context: risk
    output d

block patrol(round):
  let reports = []
  for area in ["north", "south", "east"]:
    let seen = do survey(area, round)
    reports = reports + [seen]
  let risk = do assess(reports, round)
  output do decide(risk, round)

session: captain
  prompt: "Open the patrol log"
let last = ""
repeat {rounds} as round:
  last = do patrol(round)
output summary = session "Summarise the patrol"
  context: last
"#
    )
}

/// Compiles `src` (which must be valid) to a verified program.
pub fn compile(src: &str) -> prose_runtime::program::Program {
    let mut c = prosec::compile::Compilation::new(prosec::compile::Options::default());
    let root = c.add_source(std::path::Path::new("bench.prose"), src);
    assert_eq!(c.error_count(), 0, "{:?}", c.diagnostics);
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).expect("encodes");
    prose_runtime::program::Program::from_bytes(bytes, "bench.prose".into()).expect("verifies")
}

/// The artifact of every program in `examples/`, compiled as `prosec build` compiles it, by
/// file name.
pub fn example_artifacts() -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "prose"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let mut c = prosec::compile::Compilation::new(prosec::compile::Options::default());
            let root = c.add_file(&p).expect("readable");
            assert_eq!(c.error_count(), 0, "{}", p.display());
            let (bytes, _) = prosec::codegen::build_bytes(&c, root).expect("encodes");
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, bytes)
        })
        .collect()
}

/// A memory field of this process's `/proc/self/status` (`VmHWM:`, the peak resident set;
/// `VmRSS:`), in bytes; `None` where there is no such file or field (not Linux).
pub fn status_bytes(field: &str) -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The limit on parallel branches alive at once the VM benches run with, as a user would
/// with `--max-branches 2000000`: the default (100,000) guards against runaway recursion,
/// and the scale benches fan out to a million.
pub const BENCH_BRANCHES: usize = 2_000_000;

/// Runs a program to completion in memory with the zero-latency mock driver, trace off;
/// returns the outputs.
pub fn run_mock(
    program: &prose_runtime::program::Program,
) -> Vec<(String, prose_machine::value::Value)> {
    use prose_machine::{Limits, Machine};
    use prose_runtime::driver::mock::{Mock, MockOptions};
    let mut machine = Machine::new(
        program.artifact.clone(),
        &Default::default(),
        Limits {
            fibers: BENCH_BRANCHES,
            ..Limits::default()
        },
    )
    .expect("inputs");
    machine.set_trace(false);
    let driver = std::sync::Arc::new(Mock::new(MockOptions::default()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(prose_runtime::runner::run(
        machine,
        driver,
        &Default::default(),
        |_| {},
    ))
    .expect("runs")
}

/// Runs a program the way `prosevm run` does, through the same library entry points
/// (`Run::start`, then `drive`), in a new run directory under `state_dir`: every answer
/// journaled, the binding files and `state.md` kept, the run record written. Returns the
/// outputs.
pub fn run_mock_durable(
    program: &prose_runtime::program::Program,
    state_dir: &std::path::Path,
) -> Vec<(String, prose_machine::value::Value)> {
    use prose_runtime::driver::settings::DriverSettings;
    use prosevm::run::Place;
    let place = Place {
        state_dir: Some(state_dir.to_path_buf()),
        ..Place::default()
    };
    durable_run(program, &place, DriverSettings::Mock(Default::default()))
}

/// The settings `prosevm run --driver openai --base-url URL` takes when given no others,
/// and the runner's configuration it chooses with them (vm/src/cli/args.rs: the driver's
/// ceiling of requests in flight).
fn openai_defaults(
    base_url: &str,
) -> (
    prose_runtime::driver::settings::DriverSettings,
    prose_runtime::runner::RunConfig,
) {
    use prose_runtime::driver::settings::{DriverChoice, DriverKind};
    use prose_runtime::runner::RunConfig;
    let settings = DriverChoice {
        driver: Some(DriverKind::Chat(
            prose_runtime::driver::chat::dialect::Provider::OpenAi,
        )),
        base_url: Some(base_url.to_string()),
        ..DriverChoice::default()
    }
    .settings(&Default::default())
    .expect("settings");
    let config = RunConfig {
        max_concurrency: settings
            .max_concurrency()
            .unwrap_or(RunConfig::default().max_concurrency),
        ..RunConfig::default()
    };
    (settings, config)
}

/// Runs a program in memory (no journal, trace off) with the `openai` driver against the
/// provider at `base_url`, with the settings `prosevm run` takes by default; returns the
/// outputs.
pub fn run_openai(
    program: &prose_runtime::program::Program,
    base_url: &str,
) -> Vec<(String, prose_machine::value::Value)> {
    use prose_machine::{Limits, Machine};
    let (settings, config) = openai_defaults(base_url);
    let mut machine = Machine::new(
        program.artifact.clone(),
        &Default::default(),
        Limits {
            fibers: BENCH_BRANCHES,
            ..Limits::default()
        },
    )
    .expect("inputs");
    machine.set_trace(false);
    let driver = std::sync::Arc::new(settings.connect().expect("connects"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(prose_runtime::runner::run(machine, driver, &config, |_| {}))
        .expect("runs")
}

/// Starts a run of `program` in the file store `place` names and drives it to its end with
/// the driver `settings` describe, as `prosevm run` does (`Run::start`, then `drive`), with
/// the benches' branch limit. Returns the outputs.
fn durable_run(
    program: &prose_runtime::program::Program,
    place: &prosevm::run::Place,
    settings: prose_runtime::driver::settings::DriverSettings,
) -> Vec<(String, prose_machine::value::Value)> {
    use prosevm::run::Run;
    let store = prose_store::file::FileStore::new(place.state_dir.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let run = rt
        .block_on(Run::start(
            &store,
            program,
            Default::default(),
            settings.clone(),
            prose_runtime::record::ExecOptions {
                max_branches: BENCH_BRANCHES as u64,
                ..Default::default()
            },
            place,
        ))
        .expect("starts");
    let driver = std::sync::Arc::new(settings.connect().expect("connects"));
    rt.block_on(run.drive(driver, &mut |_: &prose_machine::trace::Event| {}))
        .expect("the store works")
        .expect("runs")
}

/// Runs a program the way `prosevm run --driver openai --base-url URL` does, with the
/// settings it takes when given no others (requests in flight, retries, timeouts), through
/// the same entry points as [`run_mock_durable`]. Returns the outputs.
pub fn run_openai_durable(
    program: &prose_runtime::program::Program,
    state_dir: &std::path::Path,
    base_url: &str,
) -> Vec<(String, prose_machine::value::Value)> {
    use prosevm::run::Place;
    let (settings, config) = openai_defaults(base_url);
    let place = Place {
        state_dir: Some(state_dir.to_path_buf()),
        config,
        ..Place::default()
    };
    durable_run(program, &place, settings)
}

/// The names a generated program declares (besides those that end in its number), renamed
/// per copy in [`large_program`].
const DECLARED: [&str; 21] = [
    "depth", "plan", "market", "tech", "risks", "err", "angles", "findings", "summary", "part",
    "drafts", "round", "draft", "attempt", "polish", "text", "level", "better", "version", "k",
    "angle",
];

/// One program of at least `lines` lines using every construct: generated programs `0..`
/// one after another, each copy's names made its own, for the language server's bench.
pub fn large_program(lines: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.lines().count() < lines {
        let text = program(i).text;
        let mut word = String::new();
        let flush = |word: &mut String, out: &mut String| {
            out.push_str(word);
            if DECLARED.contains(&word.as_str()) {
                out.push_str(&format!("-{i}"));
            }
            word.clear();
        };
        for line in text.lines() {
            // The skill is imported once.
            if i > 0 && line.starts_with("import ") {
                continue;
            }
            for c in line.chars() {
                if c.is_ascii_alphanumeric() || c == '_' || (c == '-' && !word.is_empty()) {
                    word.push(c);
                } else {
                    flush(&mut word, &mut out);
                    out.push(c);
                }
            }
            flush(&mut word, &mut out);
            out.push('\n');
        }
        out.push('\n');
        i += 1;
    }
    out
}

/// Programs `0..` until their total size reaches `bytes`.
pub fn corpus(bytes: usize) -> Vec<Program> {
    let mut out = Vec::new();
    let mut total = 0;
    while total < bytes {
        let p = program(out.len());
        total += p.text.len();
        out.push(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use prosec::compile::{Compilation, Options};
    use std::path::Path;

    #[test]
    fn the_large_program_checks_clean() {
        let src = super::large_program(1500);
        assert!(src.lines().count() >= 1500);
        let mut comp = Compilation::new(Options::default());
        comp.add_source(Path::new("large.prose"), &src);
        assert_eq!(comp.error_count(), 0, "{:?}", comp.diagnostics);
        assert_eq!(comp.warning_count(), 0, "{:?}", comp.diagnostics);
    }

    #[test]
    fn the_typical_program_has_fifty_statements_and_checks_clean() {
        let src = super::fifty_statements();
        let parsed = prosec::parser::parse(0, &src);
        fn count(stmts: &[prosec::ast::Stmt]) -> usize {
            use prosec::ast::{ExprKind, StmtKind};
            stmts
                .iter()
                .map(|s| {
                    1 + match &s.kind {
                        StmtKind::Expr(e) | StmtKind::Bind { value: e, .. } => match &e.kind {
                            ExprKind::Parallel { body, .. } => count(&body.stmts),
                            ExprKind::For(l) => count(&l.body.stmts),
                            ExprKind::Loop(l) => count(&l.body.stmts),
                            ExprKind::Try(t) => {
                                count(&t.body.stmts)
                                    + t.catch.as_ref().map_or(0, |c| count(&c.body.stmts))
                            }
                            ExprKind::If {
                                branches,
                                else_body,
                            } => {
                                branches.iter().map(|(_, b)| count(&b.stmts)).sum::<usize>()
                                    + else_body.as_ref().map_or(0, |b| count(&b.stmts))
                            }
                            ExprKind::Choice { options, .. } => {
                                options.iter().map(|o| count(&o.body.stmts)).sum()
                            }
                            _ => 0,
                        },
                        _ => 0,
                    }
                })
                .sum()
        }
        assert_eq!(count(&parsed.program.stmts), 50);
        let mut c = Compilation::new(Options::default());
        c.add_source(Path::new("typical.prose"), &src);
        assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
    }

    #[test]
    fn the_patrol_asks_as_many_sessions_as_its_chain_and_updates_memory() {
        let src = super::patrol(8);
        let mut c = Compilation::new(Options::default());
        c.add_source(Path::new("patrol.prose"), &src);
        assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
        let dir = std::env::temp_dir().join(format!("prose-patrol-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let journaled = |src: &str| {
            let _ = std::fs::remove_dir_all(&dir);
            super::run_mock_durable(&super::compile(src), &dir);
            let runs: Vec<_> = std::fs::read_dir(dir.join("runs"))
                .expect("runs")
                .flatten()
                .collect();
            assert_eq!(runs.len(), 1);
            let journal = std::fs::read_to_string(runs[0].path().join("journal.log"));
            journal.expect("journal").lines().count()
        };
        assert_eq!(journaled(&super::session_chain(5 * 8 + 1)), 5 * 8 + 2);
        assert_eq!(journaled(&src), 5 * 8 + 2);
        // Each agent decided two rounds; the captain also opened the log.
        let memory = |dir: &Path| std::fs::read_to_string(dir.join("memory.md")).expect("memory");
        let captain = memory(&dir.join("agents/captain"));
        assert_eq!(captain.lines().count(), 3, "{captain}");
        assert_eq!(memory(&dir.join("agents/navigator")).lines().count(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn generated_programs_check_clean() {
        for i in 0..16 {
            let p = super::program(i);
            let mut c = Compilation::new(Options::default());
            c.add_source(Path::new(&p.name), &p.text);
            let codes: Vec<_> = c.diagnostics.iter().map(|d| d.code.as_str()).collect();
            assert!(codes.is_empty(), "{}: {codes:?}", p.name);
        }
    }
}
