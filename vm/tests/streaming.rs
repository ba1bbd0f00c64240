//! Streamed answers, end to end: the `openai` and `anthropic` drivers against a fake provider
//! on 127.0.0.1 that streams as each API does (text deltas, tool calls in pieces, usage at
//! the end), and against streams that go wrong: a model stuck repeating itself, an event
//! that is not JSON, a stream cut off mid-answer, one that stalls, and one that goes on after
//! its end.

use crate::support;

use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use support::provider::{runaway, stream, streamed, streaming_provider};

const KEY: &str = "sk-stream-secret-77";

/// Runs `source` with `driver` against the fake provider at `url` (ending in `/v1`), with
/// the JSON trace; returns exit code, stdout, stderr.
fn run(dir: &Path, driver: &str, source: &str, url: &str, extra: &[&str]) -> (i32, String, String) {
    std::fs::write(dir.join("prog.prose"), source).expect("program");
    let url = match driver {
        "anthropic" => url.trim_end_matches("/v1"),
        _ => url,
    };
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
            .args(["run", "prog.prose", "--driver", driver, "--model", "m"])
            .args([
                "--trace",
                "json",
                "--base-url",
                url,
                "--backoff-unit-ms",
                "1",
            ])
            .args(extra),
    )
}

/// The JSON trace's events.
fn events(err: &str) -> Vec<Value> {
    err.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The text the `delta` events of requests whose id starts with `id` streamed, with every
/// restart honoured.
fn streamed_text(events: &[Value], id: &str) -> String {
    let mut text = String::new();
    for e in events.iter().filter(|e| e["event"] == "delta") {
        if e["id"].as_str().is_some_and(|i| i.starts_with(id)) {
            if e["restart"] == true {
                text.clear();
            }
            text.push_str(e["text"].as_str().unwrap_or_default());
        }
    }
    text
}

/// The run's directory under `dir`.
fn only_run(dir: &Path) -> std::path::PathBuf {
    let state = dir.join(".prose");
    let id = support::run_ids(&state).pop().expect("a run");
    state.join("runs").join(id)
}

const DRIVERS: [&str; 2] = ["openai", "anthropic"];

/// Waits (up to a minute: the server notices a hang-up at once, but the machine may be
/// loaded) until the provider has ended `n` streams, saying how many events each was
/// written. The test's assertions then say what is wrong if it has not.
fn wait_until_sent(sent: &std::sync::Mutex<Vec<usize>>, n: usize) {
    let noticed = std::time::Instant::now();
    while sent.lock().expect("sent").len() < n && noticed.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn every_request_streams_and_the_outputs_are_exactly_the_streamed_text() {
    for driver in DRIVERS {
        let dir = support::scratch(&format!("stream-ok-{driver}"));
        let (url, seen, _) = streaming_provider(vec![
            streamed(&["Roses are red,", "\nprose ", "runs too."], &[], (40, 9)),
            streamed(&["Second ", "answer"], &[], (55, 2)),
        ]);
        let (code, out, err) = run(
            &dir,
            driver,
            "let a = session \"Write a poem\"\noutput b = session \"Answer\"\n  context: a\n",
            &url,
            &[],
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "b: Second answer\n", "{driver}");
        let seen = seen.lock().expect("seen");
        assert_eq!(seen.len(), 2);
        for s in seen.iter() {
            assert_eq!(s.body["stream"], true, "{driver}: {}", s.body);
        }
        if driver == "openai" {
            assert_eq!(
                seen[0].body["stream_options"],
                json!({"include_usage": true})
            );
        }
        // The first answer, as the second request carries it in its context.
        let context = seen[1].body["messages"].to_string();
        assert!(
            context.contains("Roses are red,\\nprose runs too."),
            "{context}"
        );
        // Live, as delta events; the journal has the finished answers only.
        let ev = events(&err);
        assert_eq!(streamed_text(&ev, "0:0"), "Roses are red,\nprose runs too.");
        assert_eq!(streamed_text(&ev, "0:1"), "Second answer");
        let journal = std::fs::read_to_string(only_run(&dir).join("journal.log")).expect("journal");
        assert_eq!(journal.lines().count(), 2, "{journal}");
        assert!(
            journal.contains("Roses are red,\\nprose runs too."),
            "{journal}"
        );
        // usage.jsonl: the provider's tokens and the time to the first token, per request.
        let usage = std::fs::read_to_string(only_run(&dir).join("usage.jsonl")).expect("usage");
        let lines: Vec<Value> = usage
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(lines.len(), 2, "{usage}");
        assert_eq!(lines[0]["output_tokens"], 9, "{usage}");
        assert_eq!(lines[1]["input_tokens"], 55, "{usage}");
        for l in &lines {
            let first = l["first_token_ms"].as_u64().expect("first token");
            assert!(first <= l["ms"].as_u64().expect("ms"), "{usage}");
        }
        // The summary's model line says it too.
        let turns: Vec<&Value> = ev.iter().filter(|e| e["event"] == "turn").collect();
        assert!(turns.iter().all(|t| t["first_token_ms"].is_u64()), "{err}");
    }
}

#[test]
fn tool_calls_streamed_in_pieces_are_called() {
    for driver in DRIVERS {
        let dir = support::scratch(&format!("stream-tools-{driver}"));
        let (url, seen, _) = streaming_provider(vec![
            streamed(
                &["Saving it."],
                &[(
                    "c1",
                    "write_file",
                    json!({"path": "note.txt", "content": "hello there"}),
                )],
                (30, 12),
            ),
            streamed(&["Saved."], &[], (60, 2)),
        ]);
        let (code, out, err) = run(
            &dir,
            driver,
            "output r = session \"Save a note\"\n",
            &url,
            &[],
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "r: Saved.\n");
        assert_eq!(
            std::fs::read_to_string(dir.join("note.txt")).expect("note"),
            "hello there"
        );
        let seen = seen.lock().expect("seen");
        let result = seen[1].body["messages"].to_string();
        assert!(
            result.contains("c1"),
            "{driver}: the call's id goes back: {result}"
        );
    }
}

#[test]
fn a_server_that_answers_with_one_json_body_still_works() {
    let dir = support::scratch("stream-whole");
    let (url, _, _) = streaming_provider(vec![support::provider::ok("whole answer")]);
    let (code, out, err) = run(&dir, "openai", "output r = session \"Go\"\n", &url, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: whole answer\n");
    assert_eq!(streamed_text(&events(&err), "0:0"), "whole answer");
}

#[test]
fn an_answer_repeating_one_sentence_is_hung_up_on_and_the_run_names_the_repetition() {
    for driver in DRIVERS {
        let dir = support::scratch(&format!("stream-runaway-{driver}"));
        let sentence = "The battery market keeps growing every year. ";
        // Far more than the detector needs, 2 ms apart, and then the stream never ends:
        // only hanging up ends it. After 99 events, no more come until the client hangs up:
        // one that hangs up having had no more than that is told from one that needs more
        // however slowly the machine lets it read.
        let (url, seen, sent) = streaming_provider(vec![
            runaway(
                "Here is my analysis.\n\n",
                sentence,
                4000,
                Duration::from_millis(2),
            )
            .held_after(99),
            runaway("Briefly: ", sentence, 4000, Duration::from_millis(2)).held_after(99),
        ]);
        let (code, _, err) = run(
            &dir,
            driver,
            "output r = session \"Analyze the battery market\"\n",
            &url,
            &["--idle-timeout", "60"],
        );
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("kept repeating itself")
                && err.contains("The battery market keeps growing"),
            "{driver}: {err}"
        );
        // Hung up on each time soon after the loop began (512 bytes of it are enough), not
        // after the 4,000 sentences the model would have gone on with. The server notices a
        // hang-up at its next write, which may come after prosevm has exited.
        wait_until_sent(&sent, 2);
        let sent = sent.lock().expect("sent");
        assert_eq!(
            sent.len(),
            2,
            "{driver}: two streams, each hung up on: {sent:?}"
        );
        assert!(sent.iter().all(|n| *n < 100), "{driver}: {sent:?}");
        // The second ask carries the first answer cut after one copy, and a nudge.
        let seen = seen.lock().expect("seen");
        let retry = seen[1].body["messages"].to_string();
        assert!(retry.contains("began repeating itself"), "{retry}");
        assert_eq!(
            retry.matches("keeps growing every year").count(),
            1,
            "{retry}"
        );
    }
}

#[test]
fn answers_gone_astray_are_hung_up_on_at_once() {
    // What small models do with tools on offer: write the chat template's tool list back,
    // one declaration after another, or open a call of a tool they made up and fill in its
    // arguments without end. Each stream would go on for 400 pieces and never finish.
    let declaration = "{\"type\": \"function\", \"function\": {\"name\": \"write_file\", \"description\": \"Create or overwrite a file.\"}}\n";
    let cases = [
        ("<tools>\n", declaration, "tool declarations back"),
        (
            "```json\n{\n  \"name\": \"readme_generator\",\n  \"arguments\": {\n",
            "    \"field\": {\"type\": \"string\", \"description\": \"A field.\"},\n",
            "a call of `readme_generator`, a tool it does not have",
        ),
    ];
    for driver in DRIVERS {
        for (n, (opening, piece, why)) in cases.iter().enumerate() {
            let dir = support::scratch(&format!("stream-astray-{driver}-{n}"));
            let (url, seen, sent) = streaming_provider(vec![
                // No more than 9 events until the client hangs up.
                runaway(opening, piece, 400, Duration::from_millis(2)).held_after(9),
                streamed(&["Hello, ", "new friend."], &[], (12, 4)),
            ]);
            let (code, out, err) = run(
                &dir,
                driver,
                "output r = session \"Write a two-line poem\"\n",
                &url,
                &[],
            );
            assert_eq!(code, 0, "{driver}: {err}");
            assert!(out.contains("Hello, new friend."), "{driver}: {out}");
            let evs = events(&err);
            assert!(
                evs.iter()
                    .any(|e| e["event"] == "nudge"
                        && e["why"].as_str().is_some_and(|w| w.contains(why))),
                "{driver}: {err}"
            );
            wait_until_sent(&sent, 1);
            // Hung up in the first pieces, not after 400 of them (nor after the 512 bytes
            // a runaway needs).
            let first = sent.lock().expect("sent")[0];
            assert!(first < 10, "{driver} {n}: {first} events written");
            // The plain ask that follows has no tools and none of what went astray.
            let seen = seen.lock().expect("seen");
            let plain = seen[1].body.to_string();
            assert!(!plain.contains("<tools>") && !plain.contains("readme_generator"));
            assert!(seen[1].body["tools"].is_null(), "{driver}: {plain}");
        }
    }
}

/// Good events up to the middle of an answer, in `driver`'s shape.
fn half_answer(driver: &str) -> Vec<String> {
    match driver {
        "anthropic" => vec![
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n".into(),
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".into(),
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"half an ans\"}}\n\n".into(),
        ],
        _ => vec!["data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half an ans\"}}]}\n\n".into()],
    }
}

#[test]
fn broken_streams_are_retryable_failures_and_never_half_answers() {
    for driver in DRIVERS {
        let good = || streamed(&["a whole answer"], &[], (5, 3));
        let after_end = |d: &str| {
            let both = streamed(&["done"], &[], (5, 1)).stream.expect("a stream");
            let mut s = if d == "anthropic" {
                both.anthropic
            } else {
                both.openai
            };
            s.push(match d {
                "anthropic" => "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" more\"}}\n\n".into(),
                _ => "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" more\"}}]}\n\n".into(),
            });
            s
        };
        let mut malformed = half_answer(driver);
        malformed.push("data: {not json\n\n".into());
        let cases: Vec<(&str, support::provider::Canned, &str)> = vec![
            (
                "malformed",
                stream(malformed.clone(), malformed, Duration::ZERO, false),
                "not JSON",
            ),
            (
                "cut off",
                stream(
                    half_answer(driver),
                    half_answer(driver),
                    Duration::ZERO,
                    false,
                ),
                "stopped before the answer was complete",
            ),
            (
                "stalled",
                stream(
                    half_answer(driver),
                    half_answer(driver),
                    Duration::ZERO,
                    true,
                ),
                "stalled",
            ),
            (
                "after its end",
                stream(
                    after_end("openai"),
                    after_end("anthropic"),
                    Duration::ZERO,
                    false,
                ),
                "went on after its end",
            ),
        ];
        for (what, broken, says) in cases {
            // Once: the turn is tried again and the good answer stands.
            let dir = support::scratch(&format!(
                "stream-broken-{driver}-{}",
                what.replace(' ', "-")
            ));
            // Alone: the run fails, saying what went wrong.
            let (url, _, _) = streaming_provider(vec![broken.clone()]);
            let (code, _, err) = run(
                &support::scratch(&format!(
                    "stream-broken-once-{driver}-{}",
                    what.replace(' ', "-")
                )),
                driver,
                "output r = session \"Go\"\n",
                &url,
                &["--idle-timeout", "1", "--http-retries", "0"],
            );
            assert_eq!(code, 1, "{driver} {what}: {err}");
            assert!(err.contains(says), "{driver} {what}: {err}");
            let (url, _, _) = streaming_provider(vec![broken, good()]);
            let (code, out, err) = run(
                &dir,
                driver,
                "output r = session \"Go\"\n",
                &url,
                &["--idle-timeout", "1", "--http-retries", "1"],
            );
            assert_eq!(code, 0, "{driver} {what}: {err}");
            assert_eq!(out, "r: a whole answer\n", "{driver} {what}");
            let ev = events(&err);
            assert_eq!(
                streamed_text(&ev, "0:0"),
                "a whole answer",
                "{driver} {what}: {err}"
            );
            let journal =
                std::fs::read_to_string(only_run(&dir).join("journal.log")).expect("journal");
            assert!(
                !journal.contains("half an ans"),
                "{driver} {what}: {journal}"
            );
        }
    }
    // Always broken: the run fails, saying why, with no half answer kept.
    let dir = support::scratch("stream-broken-always");
    let cut = || stream(half_answer("openai"), vec![], Duration::ZERO, false);
    let (url, _, _) = streaming_provider(vec![cut(), cut()]);
    let (code, out, err) = run(
        &dir,
        "openai",
        "output r = session \"Go\"\n",
        &url,
        &["--http-retries", "1"],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, "");
    assert!(
        err.contains(
            "stopped before the answer was complete (after 11 bytes of text) (after 2 attempts)"
        ),
        "{err}"
    );
    let journal = std::fs::read_to_string(only_run(&dir).join("journal.log")).expect("journal");
    assert!(!journal.contains("half an ans"), "{journal}");
}

/// A stream that never stalls but goes on past `--request-timeout` is stopped there: the
/// limit is on the whole turn, not only on the first byte. It is a retryable failure, and no
/// part of the long answer is kept.
#[test]
fn a_stream_that_keeps_going_past_the_request_timeout_is_stopped_there() {
    for driver in DRIVERS {
        // Forty different words a tenth of a second apart: four seconds, never idle for one,
        // and nothing a runaway check would cut.
        let words: Vec<String> = (0..40).map(|i| format!("word{i} ")).collect();
        let pieces: Vec<&str> = words.iter().map(String::as_str).collect();
        let long = || {
            let both = streamed(&pieces, &[], (5, 40)).stream.expect("a stream");
            stream(
                both.openai,
                both.anthropic,
                Duration::from_millis(100),
                false,
            )
        };
        let limits = ["--request-timeout", "1", "--idle-timeout", "3"];
        let (url, _, _) = streaming_provider(vec![long()]);
        let dir = support::scratch(&format!("stream-turn-limit-{driver}"));
        let (code, out, err) = run(
            &dir,
            driver,
            "output r = session \"Go\"\n",
            &url,
            &[&limits[..], &["--http-retries", "0"]].concat(),
        );
        assert_eq!(code, 1, "{driver}: {err}");
        assert_eq!(out, "");
        assert!(err.contains("did not answer within 1 s"), "{driver}: {err}");
        let journal = std::fs::read_to_string(only_run(&dir).join("journal.log")).expect("journal");
        assert!(!journal.contains("word3"), "{driver}: {journal}");
        // Retried, the next answer stands.
        let (url, _, _) = streaming_provider(vec![long(), streamed(&["short"], &[], (5, 1))]);
        let dir = support::scratch(&format!("stream-turn-limit-retried-{driver}"));
        let (code, out, err) = run(
            &dir,
            driver,
            "output r = session \"Go\"\n",
            &url,
            &[&limits[..], &["--http-retries", "1"]].concat(),
        );
        assert_eq!(code, 0, "{driver}: {err}");
        assert_eq!(out, "r: short\n");
    }
}

#[test]
fn a_recorded_tape_replays_the_run_without_a_provider_and_refuses_what_it_lacks() {
    for driver in DRIVERS {
        let dir = support::scratch(&format!("tape-{driver}"));
        let tape = dir.join("run.tape");
        let program =
            "let a = session \"Write a poem\"\noutput b = session \"Judge it\"\n  context: a\n";
        let (url, _, _) = streaming_provider(vec![
            support::provider::status(503, "Retry-After: 0\r\n", "busy"),
            streamed(&["Roses", " are red."], &[], (20, 4)),
            streamed(&["Fine poem."], &[], (30, 3)),
        ]);
        let record = format!("--record={}", tape.display());
        let (code, out, err) = run(&dir, driver, program, &url, &[&record]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "b: Fine poem.\n");
        let text = std::fs::read_to_string(&tape).expect("tape");
        assert_eq!(
            text.lines().count(),
            4,
            "a header and three exchanges: {text}"
        );
        assert!(!text.contains(KEY), "no key on the tape");
        assert!(text.contains("\"reply\":\"refused\""), "{text}");

        // No provider at all: the tape answers, the 503 included, through the same assembly.
        let replay = format!("--replay={}", tape.display());
        let (code, out, err) = run(&dir, driver, program, "http://127.0.0.1:9/v1", &[&replay]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "b: Fine poem.\n");
        assert_eq!(
            streamed_text(&events(&err), "0:0"),
            "Roses are red.",
            "replayed answers stream too"
        );
        // The driver comes from the tape when none is named.
        let mut cmd = support::prosevm();
        let (code, out, err) = support::output(
            cmd.current_dir(&dir)
                .env_remove("OPENAI_API_KEY")
                .env_remove("ANTHROPIC_API_KEY")
                .args(["run", "prog.prose", "--model", "m", "--trace", "quiet"])
                .args(["--backoff-unit-ms", "1", &replay]),
        );
        assert_eq!((code, out.as_str()), (0, "b: Fine poem.\n"), "{err}");

        // An edited program asks something the tape does not hold.
        let edited = program.replace("Judge it", "Judge it harshly");
        let (code, _, err) = run(&dir, driver, &edited, "http://127.0.0.1:9/v1", &[&replay]);
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("holds no reply to this request") && err.contains("differs at .messages["),
            "{driver}: {err}"
        );
    }
}
