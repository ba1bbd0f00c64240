//! Resuming a run after its program was edited: refused by default; with `--force`, answers
//! are kept where the edited program asks the same question from an unchanged statement
//! (lines may move), and the rest is asked again and listed.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};

fn vm(dir: &Path) -> Command {
    let mut cmd = support::prosevm();
    cmd.current_dir(dir).stdin(Stdio::null());
    cmd
}

#[test]
fn an_edited_program_resumes_with_force_asking_again_only_what_changed() {
    let dir = support::scratch("resume-edit");
    std::fs::write(
        dir.join("prog.prose"),
        "let a = session \"Gather facts\"\nlet b = session \"Draft the text\"\n  context: a\noutput c = session \"Polish it\"\n  context: b\n",
    )
    .expect("program");
    // The third session fails: the run stops after two answers.
    std::fs::write(
        dir.join("script.json"),
        r#"[{"prompt": "Polish", "fail": "the provider is down"}]"#,
    )
    .expect("script");
    let (code, _, _) = support::output(
        vm(&dir)
            .args(["run", "prog.prose", "--mock-script", "script.json"])
            .args(["--mock-log", "first.log", "--trace", "quiet"]),
    );
    assert_eq!(code, 1);
    let id = std::fs::read_dir(dir.join(".prose/runs"))
        .expect("runs")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| !n.starts_with('.'))
        .expect("a run");
    // The edit moves every line down and rewrites the second session's prompt.
    std::fs::write(
        dir.join("prog.prose"),
        "# reviewed\nlet a = session \"Gather facts\"\nlet b = session \"Draft the text for experts\"\n  context: a\noutput c = session \"Polish it\"\n  context: b\n",
    )
    .expect("edit");
    let (code, _, err) = support::output(vm(&dir).args(["resume", &id]));
    assert_eq!(code, 1);
    assert!(
        err.contains("has changed") && err.contains("--force"),
        "{err}"
    );
    let (code, out, err) = support::output(
        vm(&dir)
            .args(["resume", &id, "--force", "--driver", "mock"])
            .args(["--mock-log", "second.log", "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("1 answer(s) will be asked again:\n  0:1 at prog:3: let b = session \"Draft the text for experts\""),
        "{err}"
    );
    assert_eq!(out, "c: [mock] Polish it\n");
    // The unchanged first session was not asked again; the edited one and the failed one were.
    assert_eq!(
        std::fs::read_to_string(dir.join("second.log")).expect("log"),
        "0:1\n0:2\n"
    );
    // A later resume of the finished run agrees.
    let (code, out, _) = support::output(vm(&dir).args(["resume", &id]));
    assert_eq!(code, 0);
    assert_eq!(out, "c: [mock] Polish it\n");
}
