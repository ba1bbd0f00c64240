//! The command driver with small shell scripts: what the command receives (stdin and
//! environment), how its replies are read, and its failures, retries and timeouts.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    support::scratch(&format!("command-{name}"))
}

/// Writes `body` as an executable shell script `name` in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}")).expect("script");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    p
}

/// Runs `source` with `--driver command --command <command>` and `extra` arguments; returns
/// the exit code, stdout and stderr.
fn run(dir: &Path, source: &str, command: &Path, extra: &[&str]) -> (i32, String, String) {
    let prog = dir.join("prog.prose");
    std::fs::write(&prog, source).expect("program");
    support::output(
        support::prosevm()
            .current_dir(dir)
            .args([
                "run",
                "prog.prose",
                "--trace",
                "quiet",
                "--driver",
                "command",
            ])
            .arg("--command")
            .arg(command)
            .args(["--backoff-unit-ms", "1"])
            .args(extra),
    )
}

#[test]
fn requests_arrive_on_stdin_with_their_environment_and_replies_are_read() {
    let dir = scratch("happy");
    let cmd = script(
        &dir,
        "drv.sh",
        r#"input=$(cat)
n=$(ls "$0.d" 2>/dev/null | wc -l)
mkdir -p "$0.d"
{ echo "kind=$PROSE_REQUEST_KIND id=$PROSE_REQUEST_ID model=$PROSE_MODEL system=$PROSE_SYSTEM"
  echo "options=$(printf '%s' "$PROSE_OPTIONS" | tr '\n' '|')"
  echo "tools=$(printf '%s' "$PROSE_TOOLS" | tr '\n' '|') permissions=$PROSE_PERMISSIONS"
  printf '%s\n' "$input"; } > "$0.d/$n"
case "$PROSE_REQUEST_KIND" in
  session) printf 'did: %s\n' "$(printf '%s' "$input" | head -n 1)" ;;
  evaluate) echo "No, not yet" ;;
  choose) echo " hold " ;;
esac
"#,
    );
    let (code, out, err) = run(
        &dir,
        r#"agent writer:
  model: haiku
  prompt: "You write release notes"
  permissions:
    write: ["notes/"]
    network: allow
let draft = session: writer
  prompt: "Draft the notes"
if **the draft is ready**:
  session "Publish"
choice **what to do with {draft}**:
  option "Ship":
    output decision = session "Ship it"
  option "Hold":
    output decision = session "Hold it"
      context: draft
"#,
        &cmd,
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "decision: did: Hold it\n");
    let calls: Vec<String> = (0..4)
        .map(|i| std::fs::read_to_string(dir.join(format!("drv.sh.d/{i}"))).expect("call"))
        .collect();
    assert!(!dir.join("drv.sh.d/4").exists(), "four requests, no more");
    assert_eq!(
        calls[0],
        concat!(
            "kind=session id=0:0 model=haiku system=You write release notes\noptions=\n",
            "tools=read_file|write_file|edit_file|list_files|grep|web_fetch permissions=",
            r#"[{"kind":"write","values":["notes/"]},{"kind":"network","values":["allow"]}]"#,
            "\nDraft the notes\n"
        )
    );
    assert!(
        calls[1].starts_with(
            "kind=evaluate id=0:1 model= system=\noptions=\ntools= permissions=\nIs this true: the draft is ready\n"
        ),
        "{}",
        calls[1]
    );
    assert!(
        calls[2].starts_with("kind=choose id=0:2 model= system=\noptions=Ship|Hold\ntools= permissions=\nChoose: what to do with did: Draft the notes\n"),
        "{}",
        calls[2]
    );
    assert!(calls[2].contains("1. Ship\n2. Hold\n"), "{}", calls[2]);
    assert_eq!(
        calls[3],
        "kind=session id=0:3 model= system=\noptions=\ntools=read_file|write_file|edit_file|list_files|grep permissions=[]\nHold it\n\n## Context\n\n### draft\n\ndid: Draft the notes\n\n## Your task\n\nHold it\n"
    );
}

#[test]
fn a_failing_command_fails_the_request_with_its_stderr_and_retry_applies() {
    let dir = scratch("fail");
    // Fails the first time it runs, succeeds after.
    let flaky = script(
        &dir,
        "flaky.sh",
        r#"cat > /dev/null
if [ ! -e "$0.ran" ]; then touch "$0.ran"; echo "rate limited, try later" >&2; exit 3; fi
echo "second time lucky"
"#,
    );
    let (code, out, err) = run(
        &dir,
        "output r = session \"Try\"\n  retry: 1\n",
        &flaky,
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: second time lucky\n");

    let broken = script(&dir, "broken.sh", "echo 'quota exceeded' >&2\nexit 3\n");
    let (code, out, err) = run(&dir, "output r = session \"Try\"\n", &broken, &[]);
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert!(
        err.contains("the driver command exited with status 3: quota exceeded"),
        "{err}"
    );
    assert!(
        err.contains("prog.prose:1:"),
        "the error names the site: {err}"
    );
}

#[test]
fn a_slow_command_times_out() {
    let dir = scratch("slow");
    let slow = script(&dir, "slow.sh", "sleep 31\necho late\n");
    let (code, _, err) = run(
        &dir,
        "output r = session \"Wait\"\n",
        &slow,
        &["--request-timeout", "0.5"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("timed out after 0.5 s"), "{err}");
    // The whole process group was stopped: the script's `sleep` is gone too.
    let ps = Command::new("ps")
        .args(["-eo", "args"])
        .output()
        .expect("ps");
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(!ps.lines().any(|l| l.trim() == "sleep 31"), "{ps}");
}

#[test]
fn replies_that_do_not_parse_are_clear_errors() {
    let dir = scratch("parse");
    let maybe = script(&dir, "maybe.sh", "cat > /dev/null\necho maybe\n");
    let (code, _, err) = run(
        &dir,
        "if **the sky is blue**:\n  session \"Celebrate\"\n",
        &maybe,
        &[],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("verdict on **the sky is blue** must start with yes or no, not \"maybe\""),
        "{err}"
    );
    let (code, _, err) = run(
        &dir,
        "choice **pick**:\n  option \"A\":\n    session \"a\"\n  option \"B\":\n    session \"b\"\n",
        &maybe,
        &[],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("neither an option's label nor a number from 1 to 2"),
        "{err}"
    );
}

#[test]
fn the_command_driver_needs_a_command() {
    let dir = scratch("usage");
    let prog = dir.join("prog.prose");
    std::fs::write(&prog, "session \"x\"\n").expect("program");
    let out = support::prosevm()
        .current_dir(&dir)
        .args(["run", "prog.prose", "--driver", "command"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--driver command needs --command"));
}

#[test]
fn prose_toml_chooses_the_driver_and_flags_win_over_it() {
    let dir = scratch("config");
    script(&dir, "drv.sh", "cat > /dev/null\necho from the command\n");
    std::fs::write(
        dir.join("prose.toml"),
        "driver = \"command\"\ncommand = \"./drv.sh\"\nrequest_timeout = 5\n",
    )
    .expect("config");
    std::fs::write(dir.join("prog.prose"), "output r = session \"Hi\"\n").expect("program");
    let vm = |extra: &[&str]| {
        support::output(
            support::prosevm()
                .current_dir(&dir)
                .args(["run", "prog.prose", "--trace", "quiet"])
                .args(extra),
        )
    };
    let (code, out, err) = vm(&[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: from the command\n");
    let (code, out, _) = vm(&["--driver", "mock"]);
    assert_eq!(code, 0);
    assert_eq!(out, "r: [mock] Hi\n");
    std::fs::write(dir.join("other.toml"), "driver = \"telepathy\"\n").expect("config");
    let (code, _, err) = vm(&["--config", "other.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown driver \"telepathy\""), "{err}");
    std::fs::write(dir.join("other.toml"), "max_concurrency = -1\n").expect("config");
    let (code, _, err) = vm(&["--config", "other.toml"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("other.toml: ") && err.contains("line 1"),
        "{err}"
    );
}

#[test]
fn a_command_that_does_not_read_its_input_answers_all_the_same() {
    let dir = scratch("unread");
    // The request is longer than a pipe holds, so writing it fails once the command is gone.
    let cmd = script(&dir, "drv.sh", "echo answered\n");
    let source = format!("output r = session \"{}\"\n", "x".repeat(200_000));
    let (code, out, err) = run(&dir, &source, &cmd, &["--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(support::outputs(&out), serde_json::json!({"r": "answered"}));
}

#[test]
fn output_into_a_reader_that_stops_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("reader");
    // An answer far longer than a pipe holds, printed as the run's output.
    let cmd = script(&dir, "drv.sh", "head -c 300000 /dev/zero | tr '\\0' x\n");
    std::fs::write(dir.join("prog.prose"), "output r = session \"Say a lot\"\n").expect("prog");
    let mut child = support::prosevm()
        .current_dir(&dir)
        .args([
            "run",
            "prog.prose",
            "--trace",
            "quiet",
            "--driver",
            "command",
        ])
        .arg("--command")
        .arg(&cmd)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("prosevm");
    // The reader goes away before reading anything, as `| head -0` does.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}
