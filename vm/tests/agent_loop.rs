//! Sessions that act, end to end through `prosevm`: the agent loop against fake providers
//! that script multi-turn tool use in both APIs' shapes, and offline with the mock's scripted
//! turns. Files are checked on disk; every way out of the sandbox is refused; a run killed in
//! the middle of a session resumes without repeating a side effect; skills join the system
//! prompt; a published MCP server's tools are used.

use crate::support;

use prose_agent::workshop::WITH_TOOLS;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::provider::{ok, provider, tool_calls};

const KEY: &str = "sk-agent-secret-77";

fn scratch(name: &str) -> PathBuf {
    support::scratch(&format!("agent-loop-{name}"))
}

fn vm() -> Command {
    support::prosevm_keyed(KEY)
}

/// The run directory of the only run under `dir/.prose`.
fn only_run(dir: &Path) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(dir.join(".prose/runs"))
        .expect("runs")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// The journal's records as JSON, in order.
fn journal(run: &Path) -> Vec<Value> {
    std::fs::read_to_string(run.join("journal.log"))
        .expect("journal")
        .lines()
        .map(|l| serde_json::from_str(l.split_once(' ').expect("crc").1).expect("record"))
        .collect()
}

/// The journaled output of tool call `id` (`0:0#t0c1`).
fn tool_output(records: &[Value], id: &str) -> (String, bool) {
    let r = records
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no record {id}: {records:?}"));
    assert_eq!(r["kind"], "tool", "{r}");
    (
        r["answer"]["content"]
            .as_str()
            .expect("content")
            .to_string(),
        r["answer"]["is_error"].as_bool().expect("is_error"),
    )
}

const BUILDER: &str = r#"agent builder:
  prompt: "You build and test."
  permissions:
    bash: allow
output report = session: builder
  prompt: "Create the check script, fix it and run it"
"#;

/// The provider's script for [`BUILDER`]: write two files, edit one and grep, run it, answer.
fn builder_turns() -> Vec<support::provider::Canned> {
    vec![
        tool_calls(
            "Creating the files.",
            &[
                (
                    "c1",
                    "write_file",
                    json!({"path": "check.sh", "content": "echo status: brken\n"}),
                ),
                (
                    "c2",
                    "write_file",
                    json!({"path": "notes/plan.md", "content": "# Plan\nfix the status\n"}),
                ),
            ],
        ),
        tool_calls(
            "",
            &[
                (
                    "c3",
                    "edit_file",
                    json!({"path": "check.sh", "old_string": "brken", "new_string": "green"}),
                ),
                ("c4", "grep", json!({"pattern": "status", "glob": "*.sh"})),
            ],
        ),
        tool_calls("", &[("c5", "bash", json!({"command": "sh check.sh"}))]),
        ok("The check prints status: green."),
    ]
}

#[test]
fn an_agent_writes_edits_greps_and_runs_a_command_through_openai_tool_calls() {
    let dir = scratch("openai");
    std::fs::write(dir.join("prog.prose"), BUILDER).expect("program");
    let (url, seen) = provider(builder_turns());
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "json"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "report: The check prints status: green.\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("check.sh")).expect("script"),
        "echo status: green\n"
    );
    assert!(dir.join("notes/plan.md").is_file());
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 4);
    // The model offered the agent's tools: bash too, since its permissions allow it.
    let offered: Vec<&str> = seen[0].body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        offered.contains(&"bash") && !offered.contains(&"web_fetch"),
        "{offered:?}"
    );
    // Each later turn sees the tool outputs, tied to their calls.
    let second = seen[1].body["messages"].as_array().expect("messages");
    assert_eq!(second[2]["role"], "assistant");
    assert_eq!(second[2]["tool_calls"][1]["id"], "c2");
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "c1");
    assert!(second[3]["content"]
        .as_str()
        .is_some_and(|c| c.contains("check.sh")));
    let fourth = seen[3].body["messages"].as_array().expect("messages");
    let last = fourth.last().expect("a message");
    assert_eq!(last["tool_call_id"], "c5");
    assert!(
        last["content"]
            .as_str()
            .is_some_and(|c| c.contains("status: green") && c.contains("exit status 0")),
        "{last}"
    );
    // Every call was traced and journaled; tokens add up over the turns.
    let events: Vec<Value> = err
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let calls: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "tool_call")
        .filter_map(|e| e["tool"].as_str())
        .collect();
    assert_eq!(
        calls,
        ["write_file", "write_file", "edit_file", "grep", "bash"]
    );
    let usage = events
        .iter()
        .find(|e| e["event"] == "usage")
        .expect("usage");
    assert_eq!(usage["input_tokens"], 20 * 3 + 10);
    let records = journal(&only_run(&dir));
    let (grep, is_error) = tool_output(&records, "0:0#t1c1");
    assert!(
        !is_error && grep.contains("check.sh:1:echo status: green"),
        "{grep}"
    );
    assert!(!std::fs::read_to_string(only_run(&dir).join("journal.log"))
        .expect("journal")
        .contains(KEY));
}

#[test]
fn an_agent_acts_through_anthropic_tool_use_blocks() {
    let dir = scratch("anthropic");
    std::fs::write(dir.join("prog.prose"), BUILDER).expect("program");
    let (url, seen) = provider(builder_turns());
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args([
                "run",
                "prog.prose",
                "--driver",
                "anthropic",
                "--trace",
                "quiet",
            ])
            .args(["--base-url", url.trim_end_matches("/v1")]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "report: The check prints status: green.\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("check.sh")).expect("script"),
        "echo status: green\n"
    );
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[0].path, "/v1/messages");
    assert!(seen[0].body["tools"].as_array().is_some_and(|t| t
        .iter()
        .any(|t| t["name"] == "bash" && t["input_schema"].is_object())));
    // Both outputs of the first turn's calls come back in one user message.
    let msgs = seen[1].body["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[1]["content"][1]["type"], "tool_use");
    assert_eq!(msgs[2]["role"], "user");
    let results = msgs[2]["content"].as_array().expect("blocks");
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "c1");
    assert_eq!(results[1]["tool_use_id"], "c2");
    assert_eq!(results[1]["is_error"], false);
}

#[test]
fn every_way_out_of_the_sandbox_is_refused() {
    let root = scratch("escapes");
    let dir = root.join("work");
    let secret = root.join("secret");
    std::fs::create_dir_all(&dir).expect("work");
    std::fs::create_dir_all(&secret).expect("secret");
    std::fs::write(secret.join("key.txt"), "top secret").expect("secret file");
    std::os::unix::fs::symlink(&secret, dir.join("link")).expect("symlink");
    std::fs::write(
        dir.join("prog.prose"),
        r#"agent careful:
  permissions:
    write: ["out/"]
    bash: deny
    network: deny
agent asker:
  permissions:
    bash: prompt
session: careful
  prompt: "Try every door"
session: asker
  prompt: "Ask to run"
"#,
    )
    .expect("program");
    let abs = secret.join("key.txt").display().to_string();
    let script = json!([
        {"kind": "turn", "prompt": "Try every door", "times": 1, "reply": {"tool_calls": [
            {"name": "read_file", "arguments": {"path": "../secret/key.txt"}},
            {"name": "read_file", "arguments": {"path": abs}},
            {"name": "read_file", "arguments": {"path": "link/key.txt"}},
            {"name": "write_file", "arguments": {"path": "link/planted.txt", "content": "x"}},
            {"name": "write_file", "arguments": {"path": "other.txt", "content": "x"}},
            {"name": "write_file", "arguments": {"path": "out/ok.txt", "content": "fine"}},
            {"name": "bash", "arguments": {"command": "touch pwned"}},
            {"name": "web_fetch", "arguments": {"url": "http://127.0.0.1:9/"}},
            {"name": "read_file", "arguments": {"path": ".prose/runs"}},
            {"name": "list_files", "arguments": {"pattern": "../**"}}
        ]}},
        {"kind": "turn", "prompt": "Ask to run", "times": 1, "reply": {"tool_calls": [
            {"name": "bash", "arguments": {"command": "touch asked"}}
        ]}}
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
    let (code, _, err) = support::output(vm().current_dir(&dir).args([
        "run",
        "prog.prose",
        "--mock-script",
        "script.json",
        "--trace",
        "json",
    ]));
    // The call its permissions say `prompt` for, with no one to ask, waits for a person's
    // approval (exit status 3): it is neither run nor refused.
    assert_eq!(code, 3, "{err}");
    let records = journal(&only_run(&dir));
    assert!(
        !records.iter().any(|r| r["id"] == "0:1#t0c0"),
        "the call that waits for approval has an output: {records:?}"
    );
    let reasons = [
        ("0:0#t0c0", "`..` is not allowed"),
        ("0:0#t0c1", "outside the working directory"),
        ("0:0#t0c2", "outside the working directory"),
        ("0:0#t0c3", "outside the working directory"),
        ("0:0#t0c4", "write"),
        ("0:0#t0c6", "`bash: deny`"),
        ("0:0#t0c7", "`network: deny`"),
        ("0:0#t0c8", ".prose"),
        ("0:0#t0c9", ".."),
    ];
    for (id, why) in reasons {
        let (text, is_error) = tool_output(&records, id);
        assert!(is_error, "{id} was not refused: {text}");
        assert!(text.contains(why), "{id}: {text:?} does not say {why:?}");
    }
    let (text, is_error) = tool_output(&records, "0:0#t0c5");
    assert!(!is_error, "{text}");
    assert_eq!(
        std::fs::read_to_string(dir.join("out/ok.txt")).expect("allowed write"),
        "fine"
    );
    for absent in ["other.txt", "pwned", "asked"] {
        assert!(!dir.join(absent).exists(), "{absent} was created");
    }
    assert!(!secret.join("planted.txt").exists());
    // Refusals are in the trace, with the rule that refused.
    let refused = err
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "tool_call" && e["refused"].is_string())
        .count();
    assert!(refused >= 8, "{err}");
}

#[test]
fn a_run_killed_in_the_middle_of_a_session_repeats_no_side_effect() {
    let dir = scratch("kill");
    // Commands write below the top of the working directory, as they can under either
    // confinement (under Landlock nothing is made directly in it).
    std::fs::create_dir(dir.join("out")).expect("out");
    std::fs::write(
        dir.join("prog.prose"),
        "agent worker:\n  permissions:\n    bash: allow\noutput done = session: worker\n  prompt: \"Do five steps\"\n",
    )
    .expect("program");
    let mut script: Vec<Value> = (0..5)
        .map(|i| {
            json!({"kind": "turn", "times": 1, "delay_ms": 150, "reply": {"tool_calls": [
                {"name": "bash", "arguments": {"command": format!("echo step-{i} >> out/effects.log")}}
            ]}})
        })
        .collect();
    script.push(json!({"kind": "turn", "times": 1, "reply": "five steps done"}));
    std::fs::write(dir.join("script.json"), Value::Array(script).to_string()).expect("script");
    let args = ["--mock-script", "script.json", "--trace", "quiet"];
    let mut child = vm()
        .current_dir(&dir)
        .args(["run", "prog.prose"])
        .args(args)
        .args(["--mock-log", "first.log"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // Kill it once the third step's output is journaled: it is then waiting for turn 3.
    let mut killed = false;
    for _ in 0..400 {
        std::thread::sleep(Duration::from_millis(10));
        let text = std::fs::read_dir(dir.join(".prose/runs"))
            .ok()
            .and_then(|mut d| d.find_map(|e| e.ok()))
            .and_then(|e| std::fs::read_to_string(e.path().join("journal.log")).ok())
            .unwrap_or_default();
        if text.contains("\"0:0#t2c0\"") {
            child.kill().expect("kill -9");
            killed = true;
            break;
        }
    }
    let _ = child.wait();
    assert!(killed, "the run never reached its third step");
    let run = only_run(&dir);
    let answered: Vec<String> = journal(&run)
        .iter()
        .filter(|r| r["kind"] == "turn")
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect();
    assert!(answered.len() >= 3, "{answered:?}");
    let id = run.file_name().expect("id").to_string_lossy().into_owned();
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["resume", &id, "--driver", "mock"])
            .args(args)
            .args(["--mock-log", "second.log"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "done: five steps done\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("out/effects.log")).expect("effects"),
        "step-0\nstep-1\nstep-2\nstep-3\nstep-4\n",
        "every step ran exactly once"
    );
    // No turn answered before the kill was asked again.
    let asked = std::fs::read_to_string(dir.join("second.log")).expect("log");
    for id in &answered {
        assert!(!asked.lines().any(|l| l == id), "{id} asked again: {asked}");
    }
}

#[test]
fn a_skill_directory_joins_the_system_prompt_and_its_files_are_readable() {
    let dir = scratch("skills");
    let skill = dir.join("skills/review");
    std::fs::create_dir_all(&skill).expect("skill dir");
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: review\ndescription: How to review a change\n---\nAlways read the checklist first.\n",
    )
    .expect("SKILL.md");
    std::fs::write(skill.join("checklist.md"), "1. tests pass\n").expect("checklist");
    std::fs::write(
        dir.join("prog.prose"),
        "agent reviewer:\n  prompt: \"You review.\"\n  skills: [\"review\"]\noutput verdict = session: reviewer\n  prompt: \"Review the change\"\n",
    )
    .expect("program");
    let checklist = std::fs::canonicalize(skill.join("checklist.md"))
        .expect("canonical")
        .display()
        .to_string();
    let (url, seen) = provider(vec![
        tool_calls("", &[("r1", "read_file", json!({"path": checklist}))]),
        ok("Approved"),
    ]);
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "verdict: Approved\n");
    let seen = seen.lock().expect("seen");
    let system = seen[0].body["messages"][0]["content"]
        .as_str()
        .expect("system");
    assert!(
        system.starts_with(&format!("{WITH_TOOLS}\n\nYou review.")),
        "{system}"
    );
    assert!(
        system.contains("Always read the checklist first."),
        "{system}"
    );
    let output = &seen[1].body["messages"][3];
    assert_eq!(output["role"], "tool");
    assert!(
        output["content"]
            .as_str()
            .is_some_and(|c| c.contains("1. tests pass")),
        "{output}"
    );
}

#[test]
fn an_unresolvable_skill_stops_the_run_before_it_starts_naming_every_place_but_not_the_mock() {
    let dir = scratch("no-skill");
    std::fs::write(
        dir.join("prog.prose"),
        "agent a:\n  skills: [\"nowhere\"]\nsession: a\n  prompt: \"x\"\n",
    )
    .expect("program");
    let (code, _, err) = support::output(vm().current_dir(&dir).args([
        "run",
        "prog.prose",
        "--driver",
        "command",
        "--command",
        "echo done",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("prog.prose:3: [E219] skill `nowhere` not found"),
        "{err}"
    );
    assert!(err.contains("skills/nowhere"), "{err}");
    assert!(err.contains(".prose"), "{err}");
    assert!(err.contains("help: import it"), "{err}");
    assert!(!dir.join(".prose/runs").exists(), "no run was started");
    // The mock never reads a skill: a dry run warns and goes on.
    let (code, _, err) = support::output(vm().current_dir(&dir).args(["run", "prog.prose"]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: skill `nowhere` not found"), "{err}");
}

#[test]
fn the_turn_limit_fails_the_session_and_catch_sees_it() {
    let dir = scratch("limit");
    std::fs::write(
        dir.join("prog.prose"),
        "let r = try:\n  session \"Loop forever\"\ncatch as e:\n  e.message\noutput r = r\n",
    )
    .expect("program");
    // A new call every turn (the same call again with nothing changed would be a loop
    // that goes nowhere, ended sooner).
    let script: Vec<_> = (0..5)
        .map(|i| {
            json!({"kind": "turn", "times": 1, "reply": {"tool_calls": [
                {"name": "list_files", "arguments": {"pattern": format!("{i}*")}}
            ]}})
        })
        .collect();
    let script = json!(script);
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--mock-script", "script.json"])
            .args(["--max-turns", "3", "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("limit of 3 turns"), "{out}");
    // Three turns asked, each journaled with its call.
    let records = journal(&only_run(&dir));
    let turns = records.iter().filter(|r| r["kind"] == "turn").count();
    assert_eq!(turns, 3);
}

/// The published filesystem MCP server installed by `npm ci --prefix vm/tests/mcp`; required
/// under `CI=true`, skipped (saying so) on a machine without it.
fn filesystem_server() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "{} is missing: CI must install it (`npm ci --prefix vm/tests/mcp`)",
        path.display()
    );
    eprintln!("skipped: {} is not installed", path.display());
    None
}

#[test]
fn a_published_mcp_servers_tools_serve_the_agents_that_name_it() {
    let Some(server) = filesystem_server() else {
        return;
    };
    let dir = scratch("mcp");
    let files = dir.join("shared");
    std::fs::create_dir_all(&files).expect("shared");
    std::fs::write(files.join("report.txt"), "quarterly numbers").expect("file");
    let files = std::fs::canonicalize(&files).expect("canonical");
    std::fs::write(
        dir.join("prose.toml"),
        format!(
            "[mcp.servers.fs]\ncommand = \"node\"\nargs = [{:?}, {:?}]\n",
            server.display().to_string(),
            files.display().to_string()
        ),
    )
    .expect("prose.toml");
    std::fs::write(
        dir.join("prog.prose"),
        "agent librarian:\n  skills: [\"fs\"]\noutput found = session: librarian\n  prompt: \"What is shared?\"\n",
    )
    .expect("program");
    let script = json!([
        {"kind": "turn", "times": 1, "reply": {"tool_calls": [
            {"name": "mcp__fs__read_text_file", "arguments": {"path": files.join("report.txt")}}
        ]}},
        {"kind": "turn", "times": 1, "reply": "It is the report."}
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
    let (code, out, err) = support::output(vm().current_dir(&dir).args([
        "run",
        "prog.prose",
        "--mock-script",
        "script.json",
        "--trace",
        "quiet",
    ]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "found: It is the report.\n");
    let records = journal(&only_run(&dir));
    let (text, is_error) = tool_output(&records, "0:0#t0c0");
    assert!(!is_error, "{text}");
    assert!(text.contains("quarterly numbers"), "{text}");
}

#[test]
fn a_host_answers_turns_and_permission_prompts_over_stdio() {
    use std::io::{BufRead, BufReader, Write};
    let dir = scratch("stdio-turns");
    // Commands write below the top of the working directory, as they can under either
    // confinement (under Landlock nothing is made directly in it).
    std::fs::create_dir(dir.join("out")).expect("out");
    std::fs::write(
        dir.join("prog.prose"),
        "agent ops:\n  permissions:\n    bash: prompt\noutput r = session: ops\n  prompt: \"Check the disk\"\n",
    )
    .expect("program");
    let mut child = vm()
        .current_dir(&dir)
        .args(["run", "prog.prose", "--driver", "stdio", "--host-turns"])
        .args(["--trace", "quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut next = || {
        let mut line = String::new();
        out.read_line(&mut line).expect("read");
        serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };
    let mut reply = |v: Value| {
        writeln!(stdin, "{v}").expect("write");
        stdin.flush().expect("flush");
    };
    let hello = next();
    assert_eq!(hello["turns"], true);
    let turn = next();
    assert_eq!(
        (turn["kind"].as_str(), turn["id"].as_str()),
        (Some("turn"), Some("0:0#t0"))
    );
    assert!(turn["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["name"] == "bash")));
    reply(
        json!({"id": "0:0#t0", "kind": "turn", "answer": {"text": "", "stop": "tool_use",
        "tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": "echo checked > out/disk.txt"}}]}}),
    );
    // `bash: prompt`: the VM asks the host, which stands for the person.
    let ask = next();
    assert_eq!(ask["kind"], "permission");
    assert_eq!(ask["id"], "0:0#t0p0");
    assert_eq!(ask["capability"], "bash");
    assert_eq!(ask["detail"], "echo checked > out/disk.txt");
    reply(json!({"id": "0:0#t0p0", "kind": "permission", "answer": "always"}));
    let turn = next();
    assert_eq!(turn["id"], "0:0#t1");
    let last = turn["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .expect("message");
    assert_eq!(
        (last["role"].as_str(), last["is_error"].as_bool()),
        (Some("tool"), Some(false))
    );
    reply(
        json!({"id": "0:0#t1", "kind": "turn", "answer": {"text": "Disk checked.", "stop": "end"}}),
    );
    let done = next();
    assert_eq!(done["status"], "finished", "{done}");
    assert_eq!(done["outputs"], json!({"r": "Disk checked."}));
    drop(stdin);
    let _ = child.wait();
    assert_eq!(
        std::fs::read_to_string(dir.join("out/disk.txt")).expect("the command ran"),
        "checked\n"
    );
    // The person's answer is journaled with the session.
    let records = journal(&only_run(&dir));
    assert!(records
        .iter()
        .any(|r| r["id"] == "0:0#t0p0" && r["answer"] == "always"));
}

#[test]
fn the_note_keeper_example_runs_offline_with_its_mock_script() {
    let dir = scratch("example");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .arg("run")
            .arg(examples.join("note-keeper.prose"))
            .arg("--mock-script")
            .arg(examples.join("note-keeper.mock.json")),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("summary: Summary written to prose-demo/summary.md"),
        "{out}"
    );
    assert!(std::fs::read_to_string(dir.join("prose-demo/notes.md"))
        .expect("notes")
        .contains("Sessions can use tools."));
    assert!(dir.join("prose-demo/summary.md").is_file());
    let records = journal(&only_run(&dir));
    let (check, is_error) = tool_output(&records, "0:0#t2c0");
    assert!(
        !is_error && check.contains("both files are there"),
        "{check}"
    );
}

#[test]
fn an_imported_program_named_as_a_skill_is_a_tool_run_as_a_child_run() {
    let dir = scratch("program-skill");
    std::fs::create_dir_all(dir.join("lib")).expect("lib");
    std::fs::write(
        dir.join("lib/digest.prose"),
        "input source-text: \"The text to condense\"\noutput digest = session \"Condense: {source-text}\"\n",
    )
    .expect("lib");
    std::fs::write(
        dir.join("prog.prose"),
        "use \"./lib/digest.prose\" as condense\nagent editor:\n  skills: [\"condense\"]\noutput r = session: editor\n  prompt: \"Condense the notes\"\n",
    )
    .expect("program");
    let (url, seen) = provider(vec![
        tool_calls(
            "",
            &[("p1", "condense", json!({"source-text": "a very long text"}))],
        ),
        ok("short text"),
        ok("The digest is: short text"),
    ]);
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: The digest is: short text\n");
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 3);
    // The program is offered with its inputs as the tool's arguments.
    let tool = seen[0].body["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["function"]["name"] == "condense"))
        .expect("the program as a tool");
    assert_eq!(
        tool["function"]["parameters"]["required"],
        json!(["source-text"])
    );
    // Its session ran as a child run, and its outputs came back to the model.
    // (Its messages start with the VM's word on tools, as every session with tools does.)
    assert_eq!(seen[1].body["messages"][0]["content"], WITH_TOOLS);
    assert_eq!(
        seen[1].body["messages"][1]["content"],
        "Condense: a very long text"
    );
    let result = seen[2].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .expect("tool");
    assert_eq!(result["tool_call_id"], "p1");
    assert_eq!(result["content"], "{\"digest\":\"short text\"}");
}

#[test]
fn allow_flags_and_prose_toml_give_capabilities_the_program_leaves_unset() {
    let dir = scratch("allow");
    // Commands write below the top of the working directory, as they can under either
    // confinement (under Landlock nothing is made directly in it).
    std::fs::create_dir(dir.join("out")).expect("out");
    std::fs::write(
        dir.join("prog.prose"),
        "agent plain:\n  prompt: \"You help.\"\nsession: plain\n  prompt: \"Run it\"\n",
    )
    .expect("program");
    let script = json!([
        {"kind": "turn", "times": 1, "reply": {"tool_calls": [
            {"name": "bash", "arguments": {"command": "echo ran >> out/ran.txt"}}]}},
        {"kind": "turn", "times": 1, "reply": "ok"}
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
    let run = |extra: &[&str]| {
        support::output(
            vm().current_dir(&dir)
                .args([
                    "run",
                    "prog.prose",
                    "--mock-script",
                    "script.json",
                    "--trace",
                    "quiet",
                ])
                .args(extra),
        )
    };
    let (code, _, err) = run(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !dir.join("out/ran.txt").exists(),
        "bash ran without being allowed"
    );
    let (code, _, err) = run(&["--allow", "bash"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("out/ran.txt")).expect("ran"),
        "ran\n"
    );
    std::fs::write(dir.join("prose.toml"), "allow = [\"bash\"]\n").expect("toml");
    let (code, _, err) = run(&[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("out/ran.txt")).expect("ran"),
        "ran\nran\n"
    );
    let (code, _, err) = run(&["--allow", "everything"]);
    assert_eq!(code, 2);
    assert!(err.contains("bash and network"), "{err}");
}

/// A reply cut off by the model's output limit, in both APIs' shapes.
fn cut_off(text: &str) -> support::provider::Canned {
    support::provider::Canned {
        status: 200,
        headers: "",
        body: json!({
            "choices": [{"finish_reason": "length", "message": {"role": "assistant", "content": text}}],
            "content": [{"type": "text", "text": text}],
            "stop_reason": "max_tokens"
        })
        .to_string(),
        delay: Duration::ZERO,
        stream: None,
    }
}

#[test]
fn an_answer_cut_off_by_the_output_limit_is_continued() {
    let dir = scratch("cut-off");
    std::fs::write(
        dir.join("prog.prose"),
        "output r = session \"Write a long list\"\n",
    )
    .expect("program");
    let (url, seen) = provider(vec![cut_off("one, two, "), ok("three.")]);
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: one, two, three.\n");
    let seen = seen.lock().expect("seen");
    let last = seen[1].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .expect("message");
    assert!(
        last["content"]
            .as_str()
            .is_some_and(|c| c.contains("cut off")),
        "{last}"
    );
    // Cut off every time: a clear failure after the continuations.
    let (url, _) = provider(vec![cut_off("a"), cut_off("b"), cut_off("c")]);
    let (code, _, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 1);
    assert!(err.contains("cut off by its output limit"), "{err}");
}

#[test]
fn a_persistent_agent_rewrites_its_memory_through_a_chat_model() {
    let dir = scratch("memory");
    std::fs::write(
        dir.join("prog.prose"),
        "agent keeper:\n  persist: true\n  prompt: \"You keep notes.\"\nsession: keeper\n  prompt: \"Note that the launch is Friday\"\nresume: keeper\n  prompt: \"When is the launch?\"\n",
    )
    .expect("program");
    let (url, seen) = provider(vec![
        ok("Noted."),
        ok("- The launch is on Friday."),
        ok("Friday."),
        ok("- The launch is on Friday.\n- Asked once."),
    ]);
    let (code, _, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 4);
    // After its answer the agent is asked for its new memory ...
    let update = seen[1].body["messages"].as_array().expect("messages");
    assert!(update
        .last()
        .and_then(|m| m["content"].as_str())
        .is_some_and(|c| c.contains("update your memory")));
    // ... which its next session is given.
    let resumed = seen[2].body["messages"][1]["content"]
        .as_str()
        .expect("task");
    assert!(
        resumed.contains("## Your memory\n\n- The launch is on Friday."),
        "{resumed}"
    );
    let memory =
        std::fs::read_to_string(only_run(&dir).join("agents/keeper/memory.md")).expect("memory.md");
    assert_eq!(memory, "- The launch is on Friday.\n- Asked once.");
}

#[test]
fn a_tool_call_written_as_json_text_is_taken_as_the_call_it_means() {
    let dir = scratch("text-calls");
    std::fs::write(
        dir.join("prog.prose"),
        "output r = session \"Save a note saying hello\"\n",
    )
    .expect("program");
    // A small model without native tool calls: a call of a real tool as JSON text, then its
    // answer.
    let (url, seen) = provider(vec![
        ok("{\"name\": \"write_file\", \"arguments\": {\"path\": \"note.txt\", \"content\": \"hello\"}}"),
        ok("The note is saved."),
    ]);
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: The note is saved.\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("note.txt")).expect("note"),
        "hello"
    );
    let seen = seen.lock().expect("seen");
    let told = seen[1].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .expect("the result");
    // Told in text, with the task and what to do next last (a model without tool calling
    // answers what it read last).
    assert!(
        told["content"]
            .as_str()
            .is_some_and(|c| c.contains("returned")
                && c.contains("Your task: Save a note saying hello\n\n")
                && c.ends_with("when all are done, reply with your answer.")),
        "{told}"
    );
}

/// Where the server decodes under a JSON schema (llama.cpp's answers `/props`), each turn
/// is asked as one step under a schema, without native tools: the system prompt names the
/// tools and the files the agent may read, a step calling a tool runs it and its result
/// comes back as text with the task last, and the answer step ends the session. With
/// `--structured-turns off` the same server is offered the tools natively.
#[test]
fn turns_at_a_server_that_decodes_under_a_schema_are_one_step_each() {
    let dir = scratch("structured");
    std::fs::write(
        dir.join("prog.prose"),
        "agent w:\n  model: sonnet\n  permissions:\n    read: [\"**\"]\n    write: [\"**\"]\n\noutput r = session: w\n  prompt: \"Add up numbers.txt into total.txt\"\n",
    )
    .expect("program");
    std::fs::write(dir.join("numbers.txt"), "12\n38\n").expect("numbers");
    let (url, seen) = support::provider::llama_provider(vec![
        ok("{\"tool\": \"read_file\", \"arguments\": {\"path\": \"numbers.txt\"}}"),
        ok("{\"tool\": \"write_file\", \"arguments\": {\"path\": \"total.txt\", \"content\": \"50\"}}"),
        // An answer that reads like a call stays the answer: the schema's answer step.
        ok("{\"answer\": \"{\\\"name\\\": \\\"write_file\\\"} done: 50\"}"),
    ]);
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"])
            .args(["--structured-turns", "auto"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: {\"name\": \"write_file\"} done: 50\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("total.txt")).expect("total"),
        "50"
    );
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 3);
    let first = &seen[0].body;
    assert!(first.get("tools").is_none(), "{first}");
    assert_eq!(
        first["response_format"]["json_schema"]["name"],
        "prose_step"
    );
    let system = first["messages"][0]["content"].as_str().expect("system");
    assert!(
        system.contains("- read_file {\"path\": string}:"),
        "{system}"
    );
    assert!(
        system.contains("Files in the working directory: numbers.txt, prog.prose."),
        "{system}"
    );
    let told = seen[1].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .expect("the result");
    let told = told["content"].as_str().expect("text");
    assert!(told.contains("The tool `read_file` returned:\n"), "{told}");
    assert!(
        told.contains("Your task: Add up numbers.txt into total.txt"),
        "{told}"
    );
    drop(seen);

    // Off, the default even at such a server: the tools offered natively, no schema.
    let (url, seen) = support::provider::llama_provider(vec![ok("Nothing to do.")]);
    let (code, _, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    let seen = seen.lock().expect("seen");
    assert!(seen[0].body["tools"].is_array());
    assert!(seen[0].body.get("response_format").is_none());
    assert!(seen[0].body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with(WITH_TOOLS)));
}

/// A structured session whose model looks at the same file again, nothing having changed,
/// has the tools that only look withdrawn (the next step's schema admits only the tools
/// that act, and the answer) and is told so with its task last; it then acts. A second
/// loop that goes nowhere asks for a plain answer, as for any session.
#[test]
fn a_structured_session_that_keeps_looking_is_left_only_the_tools_that_act() {
    let dir = scratch("structured-narrow");
    std::fs::write(
        dir.join("prog.prose"),
        "agent w:\n  model: sonnet\n  permissions:\n    read: [\"**\"]\n    write: [\"**\"]\n\noutput r = session: w\n  prompt: \"Put the largest of values.txt into max.txt\"\n",
    )
    .expect("program");
    std::fs::write(dir.join("values.txt"), "4\n91\n").expect("values");
    let read = "{\"tool\": \"read_file\", \"arguments\": {\"path\": \"values.txt\"}}";
    let (url, seen) = support::provider::llama_provider(vec![
        ok(read),
        ok(read),
        ok("{\"tool\": \"write_file\", \"arguments\": {\"path\": \"max.txt\", \"content\": \"91\"}}"),
        ok("{\"answer\": \"91\"}"),
    ]);
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"])
            .args(["--structured-turns", "auto"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: 91\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("max.txt")).expect("max"),
        "91"
    );
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 4);
    let steps = |i: usize| -> Vec<String> {
        seen[i].body["response_format"]["json_schema"]["schema"]["anyOf"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| match s["properties"]["tool"]["const"].as_str() {
                Some(tool) => tool.to_string(),
                None => "answer".to_string(),
            })
            .collect()
    };
    assert!(
        steps(1).contains(&"read_file".to_string()),
        "{:?}",
        steps(1)
    );
    let narrowed = steps(2);
    assert!(!narrowed.contains(&"read_file".to_string()), "{narrowed:?}");
    assert!(!narrowed.contains(&"grep".to_string()), "{narrowed:?}");
    assert!(narrowed.contains(&"write_file".to_string()), "{narrowed:?}");
    assert!(narrowed.contains(&"answer".to_string()), "{narrowed:?}");
    let told = seen[2].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .expect("the narrowing");
    assert!(told.starts_with("You have looked enough"), "{told}");
    assert!(
        told.ends_with("Your task: Put the largest of values.txt into max.txt"),
        "{told}"
    );
    let system = seen[2].body["messages"][0]["content"]
        .as_str()
        .expect("system");
    assert!(!system.contains("- read_file "), "{system}");
    assert!(system.contains("- write_file "), "{system}");
}

/// A model that answers while a file its task asks for is missing is told so, once; it
/// writes the file through a native tool call, then answers. A model that still does not
/// write has its answer taken: one reminder, never a loop.
#[test]
fn an_answer_with_the_tasks_file_unwritten_gets_one_reminder() {
    let dir = scratch("promised");
    std::fs::write(
        dir.join("prog.prose"),
        "output r = session \"Write a two-line summary of the plan to summary.md\"\n",
    )
    .expect("program");
    let (url, seen) = provider(vec![
        ok("Done: the summary is written."),
        tool_calls(
            "",
            &[(
                "w1",
                "write_file",
                json!({"path": "summary.md", "content": "Plan.\nDone."}),
            )],
        ),
        ok("The summary is in summary.md."),
    ]);
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: The summary is in summary.md.\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("summary.md")).expect("summary"),
        "Plan.\nDone."
    );
    let reminder = {
        let seen = seen.lock().expect("seen");
        assert_eq!(seen.len(), 3);
        seen[1].body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .expect("the reminder")["content"]
            .clone()
    };
    assert_eq!(
        reminder,
        "`summary.md` does not exist yet, and the task asks for it. Write it now with a write_file call (path and content), then reply with your answer."
    );
    // Reminded once, a model that still answers without writing has its answer taken.
    let dir = scratch("promised-once");
    std::fs::write(
        dir.join("prog.prose"),
        "output r = session \"Save the plan as plan.md\"\n",
    )
    .expect("program");
    let (url, seen) = provider(vec![ok("Saved."), ok("Saved, really.")]);
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: Saved, really.\n");
    assert_eq!(seen.lock().expect("seen").len(), 2);
}

#[test]
fn json_naming_a_tool_not_on_offer_is_no_call_and_a_plain_answer_is_asked_once() {
    let dir = scratch("text-not-calls");
    std::fs::write(
        dir.join("prog.prose"),
        "output r = session \"Write a greeting\"\n",
    )
    .expect("program");
    // The README's hello program on a 1.5B model answered like this. It is no call (and no
    // loop of refusals up to the turn limit): the model is asked once, without tools, and
    // whatever it says then is the answer.
    let greeting =
        "{\"name\": \"greet\", \"arguments\": {\"message\": \"Hello, welcome to OpenProse!\"}}";
    let (url, seen) = provider(vec![ok(greeting), ok(greeting)]);
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, format!("r: {greeting}\n"));
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 2);
    assert!(seen[0].body.get("tools").is_some());
    assert!(
        seen[1].body.get("tools").is_none(),
        "the second offers none"
    );
}

#[test]
fn a_native_call_of_a_made_up_tool_is_corrected_once_then_a_plain_answer_is_asked() {
    let dir = scratch("made-up");
    std::fs::write(
        dir.join("prog.prose"),
        "output r = session \"Write a two-line poem\"\n",
    )
    .expect("program");
    let greet = || {
        tool_calls(
            "",
            &[("g1", "greet_first_openprose", json!({"message": "Welcome"}))],
        )
    };
    let (url, seen) = provider(vec![greet(), greet(), ok("Roses are red,\nprose is too.")]);
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--trace", "json"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: Roses are red,\nprose is too.\n");
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 3, "one correction, then a plain answer");
    let corrected = seen[1].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .expect("the correction");
    assert!(
        corrected["content"]
            .as_str()
            .is_some_and(|c| c.contains("unknown tool `greet_first_openprose`")),
        "{corrected}"
    );
    // The plain answer is asked of a fresh conversation that offers no tools.
    let plain = &seen[2].body;
    assert!(plain.get("tools").is_none(), "{plain}");
    let messages = plain["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1, "{plain}");
    assert!(
        messages[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("without tools")
                && c.ends_with("Your task: Write a two-line poem\n")),
        "{plain}"
    );
    assert!(
        err.contains("\"event\":\"nudge\"") && err.contains("a tool it does not have"),
        "{err}"
    );
}

#[test]
fn a_loop_still_calling_tools_after_the_plain_ask_fails_retryably_saying_what_it_did() {
    let dir = scratch("still-stuck");
    std::fs::write(
        dir.join("prog.prose"),
        "let r = try:\n  session \"Read the notes\"\n    retry: 1\ncatch as e:\n  e.message\noutput r = r\n",
    )
    .expect("program");
    let read = || tool_calls("", &[("r1", "read_file", json!({"path": "missing.md"}))]);
    let (url, seen) = provider((0..6).map(|_| read()).collect());
    let (code, out, err) = support::output(
        vm().current_dir(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args([
                "--base-url",
                &url,
                "--trace",
                "json",
                "--backoff-unit-ms",
                "1",
            ]),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("kept calling tools (`read_file`) after it was asked to answer without them"),
        "{out}"
    );
    // Each attempt: the call, the same failing call again (stuck), the plain ask; the
    // session's retry made a second attempt. Never the 40-turn budget.
    assert_eq!(seen.lock().expect("seen").len(), 6);
    assert!(err.contains("\"event\":\"retry\""), "{err}");
}

#[test]
fn which_tools_a_session_is_offered_follows_its_agent_the_flags_and_prose_toml() {
    let dir = scratch("offered");
    std::fs::write(
        dir.join("prog.prose"),
        concat!(
            "agent poet:\n  tools: none\n",
            "agent reader:\n  tools: [read_file, grep]\n",
            "agent sealed:\n  permissions:\n    read: []\n    write: []\n",
            "agent free:\n  prompt: \"You help.\"\n",
            "session: poet\n  prompt: \"a\"\n",
            "session: reader\n  prompt: \"b\"\n",
            "session: sealed\n  prompt: \"c\"\n",
            "session: free\n  prompt: \"d\"\n",
        ),
    )
    .expect("program");
    let offered = |extra: &[&str]| -> Vec<Vec<String>> {
        let (url, seen) = provider((0..4).map(|_| ok("fine")).collect());
        let (code, _, err) = support::output(
            vm().current_dir(&dir)
                .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
                .args(["--base-url", &url, "--trace", "quiet"])
                .args(extra),
        );
        assert_eq!(code, 0, "{err}");
        let seen = seen.lock().expect("seen");
        seen.iter()
            .map(|s| {
                s.body["tools"]
                    .as_array()
                    .map(|t| {
                        t.iter()
                            .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect()
    };
    let all = ["read_file", "write_file", "edit_file", "list_files", "grep"];
    let by_default = offered(&[]);
    assert_eq!(by_default[0], Vec::<String>::new(), "tools: none");
    assert_eq!(by_default[1], ["read_file", "grep"], "tools: [names]");
    assert_eq!(
        by_default[2],
        Vec::<String>::new(),
        "permissions that allow nothing"
    );
    assert_eq!(by_default[3], all, "the language's default");
    // `--tools none` turns them off where the agent does not say; `tools:` still wins.
    let none = offered(&["--tools", "none"]);
    assert_eq!(none[1], ["read_file", "grep"]);
    assert_eq!(none[3], Vec::<String>::new());
    std::fs::write(dir.join("prose.toml"), "[tools]\ndefault = \"none\"\n").expect("toml");
    assert_eq!(offered(&[])[3], Vec::<String>::new(), "[tools] default");
    assert_eq!(
        offered(&["--tools", "all"])[3],
        all,
        "the flag wins over the file"
    );
    std::fs::write(dir.join("prose.toml"), "[tools]\ndefault = \"some\"\n").expect("toml");
    let (code, _, err) = support::output(vm().current_dir(&dir).args(["run", "prog.prose"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("want `all` or `none`"), "{err}");
}
