//! The `openai` and `anthropic` drivers against a fake provider this test serves on
//! 127.0.0.1: the happy path, 429 then success, 500 until retries run out, malformed JSON, a
//! response slower than the timeout, a yes/no answer that needs the re-ask, and a key that
//! must not leak.

use crate::support;

use prose_agent::workshop::WITH_TOOLS;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::provider::{ok, provider, status, Canned};

const KEY: &str = "sk-test-secret-4242";

fn scratch(name: &str) -> PathBuf {
    support::scratch(&format!("openai-{name}"))
}

/// Runs `source` with the OpenAI driver against `url`; returns exit code, stdout, stderr.
fn run(dir: &Path, source: &str, url: &str, extra: &[&str]) -> (i32, String, String) {
    run_with(
        dir,
        "openai",
        source,
        url,
        &[&["--model", "m1"], extra].concat(),
    )
}

/// The drivers the shared scenarios run against.
const DRIVERS: [&str; 2] = ["openai", "anthropic"];

/// Runs `source` with `driver` against the fake provider at `url` (which ends in `/v1`).
fn run_for(
    driver: &str,
    dir: &Path,
    source: &str,
    url: &str,
    extra: &[&str],
) -> (i32, String, String) {
    match driver {
        "anthropic" => run_with(dir, driver, source, url.trim_end_matches("/v1"), extra),
        _ => run(dir, source, url, extra),
    }
}

/// Runs `source` with `driver` against `url`, with both providers' keys in the environment.
fn run_with(
    dir: &Path,
    driver: &str,
    source: &str,
    url: &str,
    extra: &[&str],
) -> (i32, String, String) {
    run_traced(dir, driver, source, url, "json", extra)
}

/// Runs `source` like [`run_with`], the trace in `trace`.
fn run_traced(
    dir: &Path,
    driver: &str,
    source: &str,
    url: &str,
    trace: &str,
    extra: &[&str],
) -> (i32, String, String) {
    std::fs::write(dir.join("prog.prose"), source).expect("program");
    let mut cmd = support::prosevm();
    for var in [
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
    ] {
        cmd.env_remove(var);
    }
    support::output(
        cmd.current_dir(dir)
            .env("OPENAI_API_KEY", KEY)
            .env("ANTHROPIC_API_KEY", KEY)
            .args(["run", "prog.prose", "--driver", driver, "--trace", trace])
            .args(["--base-url", url, "--backoff-unit-ms", "1"])
            .args(extra),
    )
}

/// The names of the tools a request body offers, each found at `pointer` in its entry.
fn tool_names(body: &Value, pointer: &str) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t.pointer(pointer)?.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Every file under `dir`, as text.
fn all_files(dir: &Path) -> String {
    let mut text = String::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                text.push_str(&all_files(&p));
            } else {
                text.push_str(&String::from_utf8_lossy(
                    &std::fs::read(&p).unwrap_or_default(),
                ));
            }
        }
    }
    text
}

#[test]
fn sessions_go_to_chat_completions_with_the_agent_as_system() {
    let dir = scratch("happy");
    let (url, seen) = provider(vec![ok("hello there")]);
    let (code, out, err) = run(
        &dir,
        "agent w:\n  model: sonnet\n  prompt: \"You write\"\noutput r = session: w\n  prompt: \"Say hi\"\n",
        &url,
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: hello there\n");
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert!(seen[0]
        .headers
        .contains(&("authorization".into(), format!("Bearer {KEY}"))));
    assert_eq!(seen[0].body["model"], "m1");
    // The openai driver's reply limit when nothing sets one (a local model's runaway costs
    // minutes, not the 8,192 tokens a server may allow), streamed with usage.
    assert_eq!(seen[0].body["max_tokens"], 2048);
    assert_eq!(seen[0].body["stream"], true);
    assert_eq!(seen[0].body["stream_options"]["include_usage"], true);
    assert_eq!(
        seen[0].body["messages"],
        json!([
            {"role": "system", "content": format!("{WITH_TOOLS}\n\nYou write")},
            {"role": "user", "content": "Say hi"}
        ])
    );
    // The session is an agent loop: the tools its agent may use are offered (no bash and no
    // network for an agent without permissions, unless the user allows them).
    assert_eq!(
        tool_names(&seen[0].body, "/function/name"),
        ["read_file", "write_file", "edit_file", "list_files", "grep"]
    );
    assert!(!err.contains(KEY));
    assert!(!all_files(&dir.join(".prose")).contains(KEY));
    // Tokens and latency, in the trace and in the run directory.
    let usage: Value = err
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "usage")
        .unwrap_or_else(|| panic!("no usage event: {err}"));
    assert_eq!(usage["id"], "0:0");
    assert_eq!(usage["input_tokens"], 10);
    assert_eq!(usage["output_tokens"], 3);
    assert!(usage["ms"].is_u64());
    let runs = dir.join(".prose/runs");
    let run = std::fs::read_dir(&runs)
        .expect("runs")
        .flatten()
        .next()
        .expect("a run")
        .path();
    let recorded: Value = serde_json::from_str(
        std::fs::read_to_string(run.join("usage.jsonl"))
            .expect("usage.jsonl")
            .trim(),
    )
    .expect("one JSON line");
    assert_eq!(recorded["id"], "0:0");
    assert_eq!(recorded["input_tokens"], 10);
    assert_eq!(recorded["output_tokens"], 3);
}

#[test]
fn refusals_shrink_the_window_and_use_up_no_retries() {
    for driver in DRIVERS {
        let dir = scratch(&format!("refused-{driver}"));
        // Anthropic's overloaded answer and OpenAI's rate limit, each with the wait asked
        // for in milliseconds.
        let busy = match driver {
            "anthropic" => status(
                529,
                "retry-after-ms: 5\r\n",
                "{\"type\": \"overloaded_error\"}",
            ),
            _ => status(429, "retry-after-ms: 5\r\n", "{\"error\": {}}"),
        };
        let (url, seen) = provider(vec![busy.clone(), busy.clone(), busy, ok("at last")]);
        // No HTTP retries, and a session that may not retry: the refusals must use none.
        // The narrated trace ends with the summary.
        let url = match driver {
            "anthropic" => url.trim_end_matches("/v1").to_string(),
            _ => url,
        };
        let (code, out, err) = run_traced(
            &dir,
            driver,
            "output r = session \"Go\"\n",
            &url,
            "narrate",
            &["--http-retries", "0"],
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "r: at last\n");
        assert_eq!(seen.lock().expect("seen").len(), 4);
        assert!(err.contains(", 0 retries,"), "{err}");
        // Each refusal came after the cut before it: 64, then 51, 40 and 32.
        assert!(
            err.contains(": window 32 (lowest 32), 3 of 4 requests refused"),
            "{err}"
        );

        // A quota used up is no rate limit: it fails at once.
        let (url, seen) = provider(vec![status(
            429,
            "retry-after: 0\r\n",
            "{\"error\": {\"code\": \"insufficient_quota\"}}",
        )]);
        let (code, _, err) = run_for(driver, &dir, "output r = session \"Go\"\n", &url, &[]);
        assert_eq!(code, 1, "{err}");
        assert_eq!(seen.lock().expect("seen").len(), 1, "{err}");
    }
}

#[test]
fn a_rate_limit_is_waited_out_and_server_errors_retried_until_they_run_out() {
    for driver in DRIVERS {
        let dir = scratch(&format!("retry-{driver}"));
        let (url, seen) = provider(vec![status(429, "Retry-After: 0\r\n", "{}"), ok("at last")]);
        let (code, out, err) = run_for(driver, &dir, "output r = session \"Go\"\n", &url, &[]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "r: at last\n");
        assert_eq!(seen.lock().expect("seen").len(), 2);

        // The provider echoes the key in its error body: it must not reach the user.
        let (url, seen) = provider(vec![]);
        let (code, _, err) = run_for(
            driver,
            &dir,
            "output r = session \"Go\"\n",
            &url,
            &["--http-retries", "2"],
        );
        assert_eq!(code, 1);
        assert_eq!(seen.lock().expect("seen").len(), 3);
        assert!(
            err.contains(
                "the provider answered 500 Internal Server Error: no more answers (after 3 attempts)"
            ),
            "{err}"
        );
        let (url, _) = provider(vec![status(500, "", "bad key {auth}")]);
        let (code, _, err) = run_for(
            driver,
            &dir,
            "output r = session \"Go\"\n",
            &url,
            &["--http-retries", "0"],
        );
        assert_eq!(code, 1);
        assert!(
            err.contains("bad key ") && err.contains("[redacted]"),
            "{err}"
        );
        assert!(!err.contains(KEY), "{err}");
        assert!(!all_files(&dir.join(".prose")).contains(KEY));
    }
}

#[test]
fn malformed_and_slow_responses_are_clear_errors() {
    for driver in DRIVERS {
        let dir = scratch(&format!("bad-{driver}"));
        let (url, _) = provider(vec![status(200, "", "this is not json")]);
        let (code, _, err) = run_for(driver, &dir, "output r = session \"Go\"\n", &url, &[]);
        assert_eq!(code, 1);
        assert!(err.contains("the provider's response is not JSON"), "{err}");

        let (url, _) = provider(vec![status(200, "", "{\"choices\": []}")]);
        let (code, _, err) = run_for(driver, &dir, "output r = session \"Go\"\n", &url, &[]);
        assert_eq!(code, 1);
        let path = if driver == "openai" {
            "choices[0].message.content"
        } else {
            "content[0].text"
        };
        assert!(err.contains(&format!("has no {path}")), "{err}");

        let mut slow = ok("too late");
        slow.delay = Duration::from_secs(3);
        let (url, _) = provider(vec![slow]);
        let (code, _, err) = run_for(
            driver,
            &dir,
            "output r = session \"Go\"\n",
            &url,
            &["--request-timeout", "0.5", "--http-retries", "0"],
        );
        assert_eq!(code, 1);
        assert!(
            err.contains("the provider did not answer within 0.5 s"),
            "{err}"
        );
    }
}

#[test]
fn a_vague_verdict_is_asked_again_once() {
    for driver in DRIVERS {
        let dir = scratch(&format!("reask-{driver}"));
        let (url, seen) = provider(vec![ok("Perhaps"), ok("Yes, it is ready"), ok("went")]);
        let (code, out, err) = run_for(
            driver,
            &dir,
            "if **the plan is ready**:\n  output r = session \"Go\"\n",
            &url,
            &[],
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "r: went\n");
        let seen = seen.lock().expect("seen");
        assert_eq!(seen.len(), 3);
        let second = seen[1].body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .expect("turns")["content"]
            .as_str()
            .expect("user turn");
        assert!(
            second.starts_with("Is this true: the plan is ready\n"),
            "{second}"
        );
        assert!(
            second.contains(
                "You replied: Perhaps\nThat reply cannot be read as a yes or no. Start your reply with yes or no."
            ),
            "{second}"
        );
        // The condition's two exchanges are counted together.
        let judged = err
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["event"] == "usage" && e["id"] == "0:0")
            .unwrap_or_else(|| panic!("no usage for the condition: {err}"));
        assert_eq!(judged["input_tokens"], 20);
        assert_eq!(judged["output_tokens"], 6);

        let (url, _) = provider(vec![ok("Perhaps"), ok("Hard to say")]);
        let (code, _, err) = run_for(
            driver,
            &dir,
            "if **the plan is ready**:\n  output r = session \"Go\"\n",
            &url,
            &[],
        );
        assert_eq!(code, 1);
        // With `--trace json` the error is an event.
        assert!(
            err.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|e| e["event"] == "error"
                    && e["message"].as_str().is_some_and(|m| m.contains(
                        "the model's reply is not a yes or no, even when asked again: \"Hard to say\""
                    ))),
            "{err}"
        );
    }
}

fn anthropic_ok(text: &str) -> Canned {
    Canned {
        status: 200,
        headers: "",
        body: json!({"content": [{"type": "text", "text": text}],
                     "usage": {"input_tokens": 12, "output_tokens": 4}})
        .to_string(),
        delay: Duration::ZERO,
        stream: None,
    }
}

#[test]
fn anthropic_sessions_use_the_messages_api_and_the_model_map() {
    let dir = scratch("anthropic");
    let (url, seen) = provider(vec![
        status(529, "", "{\"type\": \"overloaded_error\"}"),
        anthropic_ok("brief reply"),
        anthropic_ok("second"),
    ]);
    let (code, out, err) = run_with(
        &dir,
        "anthropic",
        "agent quick:\n  model: haiku\n  prompt: \"Be brief\"\nlet a = session: quick\n  prompt: \"Summarise\"\noutput r = session \"Again\"\n  model: opus\n  context: a\n",
        url.trim_end_matches("/v1"),
        &["--model-map", "opus=my-opus"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: second\n");
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 3, "the overloaded answer is retried");
    assert_eq!(seen[1].path, "/v1/messages");
    assert!(seen[1].headers.contains(&("x-api-key".into(), KEY.into())));
    assert!(seen[1]
        .headers
        .contains(&("anthropic-version".into(), "2023-06-01".into())));
    assert_eq!(seen[1].body["model"], "claude-haiku-4-5");
    assert_eq!(seen[1].body["max_tokens"], 4096);
    // The prefix of tools and system prompt is marked for the provider's cache, and so is
    // the newest message of the agent loop's conversation (5 minutes, the default).
    let mark = json!({"type": "ephemeral"});
    assert_eq!(
        seen[1].body["system"],
        json!([{"type": "text", "text": format!("{WITH_TOOLS}\n\nBe brief"), "cache_control": mark}])
    );
    assert_eq!(
        seen[1].body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Summarise", "cache_control": mark}]}])
    );
    assert_eq!(
        tool_names(&seen[1].body, "/name"),
        ["read_file", "write_file", "edit_file", "list_files", "grep"]
    );
    assert_eq!(seen[2].body["model"], "my-opus");
    assert_eq!(
        seen[2].body["messages"][0]["content"][0]["text"],
        "Again\n\n## Context\n\n### a\n\nbrief reply\n\n## Your task\n\nAgain\n"
    );
    assert!(!err.contains(KEY));
    assert!(!all_files(&dir.join(".prose")).contains(KEY));
}

#[test]
fn anthropic_needs_a_key_and_model_maps_are_checked() {
    let dir = scratch("anthropic-usage");
    std::fs::write(dir.join("prog.prose"), "session \"x\"\n").expect("program");
    let out = support::prosevm()
        .current_dir(&dir)
        .env_remove("ANTHROPIC_API_KEY")
        .args(["run", "prog.prose", "--driver", "anthropic"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs ANTHROPIC_API_KEY"));
    let (code, _, err) = run(
        &dir,
        "session \"x\"\n",
        "http://127.0.0.1:9",
        &["--model-map", "gpt=x"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("want sonnet=ID, opus=ID or haiku=ID"), "{err}");
}

#[test]
fn each_step_inherits_the_previous_ones_result_on_both_drivers() {
    for driver in DRIVERS {
        let dir = scratch(&format!("inherit-{driver}"));
        let answer = |t: &str| match driver {
            "anthropic" => anthropic_ok(t),
            _ => ok(t),
        };
        let (url, seen) = provider(vec![
            answer("a first draft"),
            answer("a better draft"),
            answer("fresh"),
        ]);
        let (code, out, err) = run_for(
            driver,
            &dir,
            "let draft = session \"Write a draft\"\nsession \"Improve it\" -> session \"Start over\"\n  context: []\n",
            &url,
            &[],
        );
        assert_eq!(code, 0, "{driver}: {err}");
        assert_eq!(out, "", "{driver}");
        let seen = seen.lock().expect("seen");
        let user = |i: usize| -> String {
            let messages = seen[i].body["messages"].as_array().expect("messages");
            let last = &messages.last().expect("a user turn")["content"];
            // Plain text, or (marked for Anthropic's cache) one text block.
            last.as_str()
                .or(last[0]["text"].as_str())
                .expect("text")
                .to_string()
        };
        assert_eq!(user(0), "Write a draft", "{driver}");
        // The next statement sees the draft, labelled with its name, the task after it too.
        assert_eq!(
            user(1),
            "Improve it\n\n## Context\n\n### draft\n\na first draft\n\n## Your task\n\nImprove it\n",
            "{driver}"
        );
        // `context: []` starts fresh although a step precedes it.
        assert_eq!(user(2), "Start over", "{driver}");
    }
}

/// The id of the only run under `dir`'s `.prose/runs`.
fn only_run(dir: &Path) -> String {
    let ids = support::run_ids(&dir.join(".prose"));
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].clone()
}

/// Runs `prosevm resume` in `dir` with `args`, no provider settings in the environment
/// (the run's record must supply them) and the key only.
fn resume_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let mut cmd = support::prosevm();
    for var in [
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
    ] {
        cmd.env_remove(var);
    }
    support::output(
        cmd.current_dir(dir)
            .env("OPENAI_API_KEY", KEY)
            .arg("resume")
            .args(args),
    )
}

#[test]
fn a_resumed_run_keeps_its_driver_unless_told_otherwise() {
    let dir = scratch("resume-driver");
    let program = "let a = session \"One\"\noutput r = session \"Two after {a}\"\n";
    // The second session fails for good: the run fails after the first answer.
    let (url, seen) = provider(vec![ok("first"), status(500, "", "{}")]);
    let (code, _, err) = run(&dir, program, &url, &["--http-retries", "0"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(seen.lock().expect("seen").len(), 2);
    let id = only_run(&dir);
    // Resuming without driver flags goes back to the same provider and model (the record
    // has them, not the key), asking only the failed request.
    drop(seen);
    let (code, out, err) = {
        // The same port is gone with its provider; the record's URL must be the one used, so
        // serve a new provider and point the record at it as an operator moving it would.
        let (url2, seen2) = provider(vec![ok("second")]);
        let record_path = dir.join(".prose/runs").join(&id).join("run.json");
        let record = std::fs::read_to_string(&record_path).expect("run.json");
        assert!(record.contains(&url), "{record}");
        assert!(!record.contains(KEY), "{record}");
        std::fs::write(&record_path, record.replace(&url, &url2)).expect("rewrite");
        let r = resume_in(&dir, &[&id]);
        let seen2 = seen2.lock().expect("seen");
        assert_eq!(
            seen2.len(),
            1,
            "only the failed request is asked again: {}",
            r.2
        );
        assert_eq!(seen2[0].body["model"], "m1");
        r
    };
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: second\n");
    assert!(!err.contains("warning"), "{err}");
}

#[test]
fn a_driver_given_to_resume_replaces_the_recorded_one_with_a_warning() {
    let dir = scratch("resume-override");
    let (url, _seen) = provider(vec![ok("first"), status(500, "", "{}")]);
    let (code, _, err) = run(
        &dir,
        "let a = session \"One\"\noutput r = session \"Two\"\n",
        &url,
        &["--http-retries", "0"],
    );
    assert_eq!(code, 1, "{err}");
    let id = only_run(&dir);
    let (code, out, err) = resume_in(&dir, &[&id, "--driver", "mock"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: [mock] Two\n");
    assert!(
        err.contains("started with the openai driver; continuing with the mock driver (")
            && err.contains("as asked (recorded)"),
        "{err}"
    );
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(".prose/runs").join(&id).join("run.json"))
            .expect("run.json"),
    )
    .expect("json");
    assert_eq!(record["driver"]["kind"], "mock", "{record}");
}

#[test]
fn a_provider_table_in_prose_toml_maps_aliases_for_that_driver_only() {
    for (driver, sent) in [("anthropic", "anthropic-opus"), ("openai", "shared-opus")] {
        let dir = scratch(&format!("aliases-{driver}"));
        std::fs::write(
            dir.join("prose.toml"),
            "[models]\nopus = \"shared-opus\"\n[models.anthropic]\nopus = \"anthropic-opus\"\n",
        )
        .expect("prose.toml");
        let answer = match driver {
            "anthropic" => anthropic_ok("done"),
            _ => ok("done"),
        };
        let (url, seen) = provider(vec![answer]);
        let (code, _, err) = run_for(driver, &dir, "session \"Plan\"\n  model: opus\n", &url, &[]);
        assert_eq!(code, 0, "{driver}: {err}");
        assert_eq!(
            seen.lock().expect("seen")[0].body["model"],
            sent,
            "{driver}"
        );
    }
}
