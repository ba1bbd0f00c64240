//! `prosevm report`: the page of a run with parallel branches, a loop, an agent loop with tool
//! calls, a retried session and a prompt full of HTML, checked as text (self-contained,
//! escaped, every request there) and in a real headless Chromium (it loads, its script runs
//! without an error, and the rendered page shows every session of the run). Chromium is
//! required on CI (`.ci/run` installs it); a developer machine without it skips the browser
//! part, saying so.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const PROGRAM: &str = r#"agent researcher:
  model: sonnet
  prompt: "You research <carefully> & cite."
agent builder:
  prompt: "You build."
parallel:
  a = session: researcher
    prompt: "Find <img src=x onerror=alert(1)> sources & <script>alert('x')</script>"
  b = session "Sketch the outline"
    retry: 1
loop until **the draft is done** (max: 3):
  session: builder
    prompt: "Write notes into notes.md"
output report = session "Summarise"
  context: [a, b]
"#;

/// Scripted model turns: the builder writes a file, then answers; the outline's first turn
/// fails (its retry asks again).
const SCRIPT: &str = r##"[
  {"kind": "turn", "prompt": "Write notes", "times": 1, "reply": {"text": "Writing.", "tool_calls": [
    {"name": "write_file", "arguments": {"path": "notes.md", "content": "# Notes\n"}},
    {"name": "read_file", "arguments": {"path": "notes.md"}}
  ]}},
  {"kind": "turn", "prompt": "Sketch the outline", "times": 1, "fail": "the model is overloaded"}
]"##;

fn vm(dir: &Path) -> Command {
    let mut cmd = support::prosevm();
    cmd.current_dir(dir).stdin(Stdio::null());
    cmd
}

/// Runs the program in a fresh directory; returns the directory and the run's id.
fn a_run(name: &str) -> (PathBuf, String) {
    let dir = support::scratch(&format!("report-{name}"));
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    std::fs::write(dir.join("script.json"), SCRIPT).expect("script");
    let (code, _, err) = support::output(vm(&dir).args([
        "run",
        "prog.prose",
        "--mock-script",
        "script.json",
        "--backoff-unit-ms",
        "1",
        "--mock-conditions",
        "after:2",
        "--trace",
        "json",
    ]));
    assert_eq!(code, 0, "{err}");
    let first: serde_json::Value =
        serde_json::from_str(err.lines().next().expect("a trace")).expect("json");
    let id = first["run"].as_str().expect("run id").to_string();
    (dir, id)
}

/// The session ids the run's journal answered.
fn session_ids(dir: &Path, id: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(".prose/runs").join(id).join("journal.log"))
        .expect("journal")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.split_once(' ')?.1).ok())
        .filter(|r| r["kind"] == "session")
        .filter_map(|r| r["id"].as_str().map(String::from))
        .collect()
}

#[test]
fn the_report_is_one_escaped_self_contained_page_with_every_request() {
    let (dir, id) = a_run("text");
    let (code, _, err) = support::output(vm(&dir).args(["report", &id, "-o", "run.html"]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("run.html"), "{err}");
    let page = std::fs::read_to_string(dir.join("run.html")).expect("page");
    // Self-contained: nothing to fetch.
    for outside in ["http://", "https://", "<link", "src=\"", "@import"] {
        assert!(
            !page.contains(outside),
            "the page refers outside: {outside}"
        );
    }
    // Escaped: the prompt's markup is text.
    assert!(!page.contains("<img src=x"), "unescaped prompt");
    assert!(!page.contains("<script>alert"), "unescaped prompt");
    assert!(page.contains("Find &lt;img src=x onerror=alert(1)&gt; sources &amp; &lt;script&gt;"));
    assert!(page.contains("You research &lt;carefully&gt; &amp; cite."));
    // Every session, with its lane: the branches beside the program's fiber.
    let sessions = session_ids(&dir, &id);
    assert_eq!(sessions.len(), 5, "{sessions:?}");
    for s in &sessions {
        assert!(page.contains(&format!("id=\"req-{s}\"")), "{s} missing");
    }
    assert!(page.contains("fork 0 · branch 0") && page.contains("fork 0 · branch 1"));
    // The agent loop's tool calls and outputs, the failed turn, the source with anchors.
    assert!(page.contains("<b>write_file</b>") && page.contains("# Notes"));
    assert!(page.contains("the model is overloaded"));
    assert!(page.contains("id=\"m0-L13\""));
    assert!(page.contains("href=\"#m0-L13\""));
    // Written to stdout without -o; by default beside nothing else.
    let (code, out, _) = support::output(vm(&dir).args(["report", &id]));
    assert_eq!(code, 0);
    assert!(
        out.starts_with("<!DOCTYPE html>"),
        "{}",
        &out[..40.min(out.len())]
    );
}

/// A streamed answer's time to its first token is on its request and, as a median, among the
/// run's figures.
#[test]
fn streamed_answers_show_their_time_to_the_first_token() {
    let dir = support::scratch("report-first-token");
    std::fs::write(
        dir.join("prog.prose"),
        "agent quiet:\n  tools: none\n  prompt: \"Be brief\"\noutput r = session: quiet\n  prompt: \"Say hi\"\n",
    )
    .expect("program");
    let (url, _) = support::provider::provider(vec![support::provider::streamed(
        &["Hi ", "there."],
        &[],
        (9, 2),
    )]);
    let (code, out, err) = support::output(
        vm(&dir)
            .env("OPENAI_API_KEY", "sk-test")
            .env_remove("OPENAI_BASE_URL")
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: Hi there.\n");
    let (code, page, err) = support::output(vm(&dir).args(["report", "latest"]));
    assert_eq!(code, 0, "{err}");
    assert!(page.contains("first token (median)"), "no median figure");
    assert!(page.contains("first token "), "no figure on the request");
    assert!(page.contains("Hi there."));
}

#[test]
fn a_missing_run_is_a_clear_error() {
    let dir = support::scratch("report-missing");
    let (code, out, err) = support::output(vm(&dir).args(["report", "20990101-000000-nope00"]));
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("no run"), "{err}");
}

#[test]
fn the_report_loads_in_a_browser_without_errors_and_shows_every_session() {
    let Some(browser) = support::browser::chromium() else {
        return;
    };
    let (dir, id) = a_run("browser");
    let page = dir.join("run.html");
    let (code, _, err) = support::output(vm(&dir).args(["report", &id, "-o"]).arg(&page));
    assert_eq!(code, 0, "{err}");
    let (dom, log) =
        support::browser::headless(&browser, &dir.join("profile"), &["--dump-dom"], &page);
    // The script ran to its end, and nothing went to the console.
    assert!(
        dom.contains("data-ready=\"true\""),
        "the script did not finish:\n{log}"
    );
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    // Its counter says how many requests are shown, all of them.
    let cards = dom.matches("class=\"card ").count();
    assert!(cards >= 5, "{cards} cards");
    assert!(
        dom.contains(&format!("{cards} of {cards} requests")),
        "no counter"
    );
    for s in session_ids(&dir, &id) {
        assert!(dom.contains(&format!("id=\"req-{s}\"")), "{s} not rendered");
        assert!(
            dom.contains(&format!("<code>{s}</code>")),
            "{s} has no card"
        );
    }
}

#[test]
fn a_failed_run_is_reported_with_its_error_and_the_failed_session() {
    let dir = support::scratch("report-failed");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    std::fs::write(
        dir.join("fail.json"),
        r#"[{"prompt": "Sketch the outline", "fail": "the <b>provider</b> is down"}]"#,
    )
    .expect("script");
    let (code, _, err) = support::output(vm(&dir).args([
        "run",
        "prog.prose",
        "--mock-script",
        "fail.json",
        "--backoff-unit-ms",
        "1",
        "--trace",
        "quiet",
        "--state-dir",
        "state",
    ]));
    assert_eq!(code, 1, "{err}");
    let run = std::fs::read_dir(dir.join("state/runs"))
        .expect("runs")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("run.json").is_file())
        .expect("a run");
    // By directory as well as by id.
    let (code, page, err) = support::output(vm(&dir).arg("report").arg(&run));
    assert_eq!(code, 0, "{err}");
    assert!(page.contains("<span class=\"status s-failed\">failed</span>"));
    assert!(page.contains("<p class=\"run-error\">"), "no run error");
    assert!(page.contains("the &lt;b&gt;provider&lt;/b&gt; is down"));
    assert!(page.contains("id=\"req-0/0.1:0\" data-kind=\"session\" data-state=\"failed\""));
}
