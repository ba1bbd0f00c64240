//! Paying for a prompt once: requests put what changes least first, in the same bytes every
//! time; the `anthropic` driver marks the prefixes for the provider's cache; the tokens
//! either provider read from or wrote to its cache are recorded apart and priced at their
//! own rates. Against a fake provider on loopback that bills caching as the real APIs do
//! ([`support::billing`]).

use crate::support;

use prose_runtime::observe::grouped;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use support::billing::{echo, last_user_line, Answerer, Billed, Cache, Fake, Say};

/// Runs `prosevm run prog.prose` in `dir` with `driver` against `fake`, the trace in JSON;
/// returns exit code, stdout and stderr.
fn run(dir: &Path, driver: &str, fake: &Fake, extra: &[&str]) -> (i32, String, String) {
    run_traced(dir, driver, fake, "json", extra)
}

/// [`run`] with the trace in `trace`.
fn run_traced(
    dir: &Path,
    driver: &str,
    fake: &Fake,
    trace: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let url = match driver {
        "anthropic" => fake.anthropic_url(),
        _ => fake.url.clone(),
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
            .env("OPENAI_API_KEY", "sk-test")
            .env("ANTHROPIC_API_KEY", "sk-ant-test")
            .args(["run", "prog.prose", "--driver", driver, "--base-url", &url])
            .args(["--trace", trace, "--no-progress", "--no-input"])
            .args(["--backoff-unit-ms", "1"])
            .args(extra),
    )
}

/// The directory of the one run under `dir`.
fn the_run(dir: &Path) -> PathBuf {
    let ids = support::run_ids(&dir.join(".prose"));
    assert_eq!(ids.len(), 1, "{ids:?}");
    dir.join(".prose/runs").join(&ids[0])
}

/// The usage `run.json` records for the one run under `dir`.
fn recorded_usage(dir: &Path) -> Value {
    let text = std::fs::read_to_string(the_run(dir).join("run.json")).expect("run.json");
    let record: Value = serde_json::from_str(&text).expect("json");
    record["usage"].clone()
}

/// `body` without the marks for the provider's cache, and with every text block that is
/// alone in its content written as plain text again: what the request says, whatever
/// marks it carries.
fn unmarked(body: &Value) -> Value {
    match body {
        Value::Object(o) => {
            let mut out = serde_json::Map::new();
            for (k, v) in o {
                if k == "cache_control" {
                    continue;
                }
                out.insert(k.clone(), unmarked(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let items: Vec<Value> = items.iter().map(unmarked).collect();
            match &items[..] {
                [one] if one["type"] == "text" && one.as_object().is_some_and(|o| o.len() == 2) => {
                    one["text"].clone()
                }
                _ => Value::Array(items),
            }
        }
        other => other.clone(),
    }
}

/// An agent whose prompt is about 2,400 tokens (at four bytes a token), and four sessions
/// of it, one after another.
fn four_sessions() -> String {
    let prompt = "Keep every answer short, plain and correct. ".repeat(220);
    assert!(
        (2_350..2_500).contains(&(prompt.len() / 4)),
        "{}",
        prompt.len() / 4
    );
    format!(
        "agent writer:\n  model: sonnet\n  prompt: \"{prompt}\"\nlet a = session: writer\n  prompt: \"Write about rivers\"\nlet b = session: writer\n  prompt: \"Write about hills\"\n  context: []\nlet c = session: writer\n  prompt: \"Write about seas\"\n  context: []\noutput d = session: writer\n  prompt: \"Write about skies\"\n  context: []\n"
    )
}

#[test]
fn the_fake_bills_caching_as_the_providers_do() {
    let marked = |text: &str| json!([{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]);
    let mut c = Cache::default();
    let system = "s".repeat(8000); // 2,000 tokens
    let body = |user: &str| {
        json!({"model": "claude-sonnet-4-5", "system": marked(&system),
            "messages": [{"role": "user", "content": user}]})
    };
    // The system prompt's block is written; the task after it ("user:one", two tokens)
    // is plain input.
    let first = c.anthropic(&body("one"), true).expect("billed");
    assert!(first.written > 2000, "{first:?}");
    assert_eq!((first.read, first.total), (0, first.written + 2));
    let second = c.anthropic(&body("two"), true).expect("billed");
    assert_eq!((second.read, second.written), (first.written, 0));
    // Too short to cache: nothing read or written; Haiku needs 4,096 tokens.
    let short = json!({"model": "m", "system": marked("brief"), "messages": []});
    let s = c.anthropic(&short, true).expect("billed");
    assert_eq!((s.read, s.written), (0, 0));
    let haiku = json!({"model": "claude-haiku-4-5", "system": marked(&system), "messages": []});
    assert_eq!(c.anthropic(&haiku, true).expect("billed").written, 0);
    // Five marks, or a mark the API does not know, are refused.
    let many: Vec<Value> = (0..5).map(|i| marked(&format!("{i}"))[0].clone()).collect();
    assert!(c.anthropic(&json!({"system": many}), true).is_err());
    let odd =
        json!({"system": [{"type": "text", "text": "x", "cache_control": {"type": "forever"}}]});
    assert!(c.anthropic(&odd, true).is_err());
    // Caching off: never read or written.
    let off = c.anthropic(&body("two"), false).expect("billed");
    assert_eq!((off.read, off.written), (0, 0));
    // OpenAI: a shared prefix of 1,024 tokens or more is read, in steps of 128.
    let body = |user: &str| {
        json!({"model": "m", "messages": [
            {"role": "system", "content": "x".repeat(6000)}, {"role": "user", "content": user}]})
    };
    assert_eq!(c.openai(&body("one"), true).read, 0);
    let second = c.openai(&body("two"), true);
    assert!(
        second.read >= 1024 && (second.read - 1024) % 128 == 0 && second.read <= second.total,
        "{second:?}"
    );
    assert_eq!(c.openai(&body("three"), false).read, 0);
}

/// The usage each request was billed, as `(plain input, read, written)` in Anthropic's
/// fields.
fn anthropic_bills(billed: &[Billed]) -> Vec<(u64, u64, u64)> {
    billed
        .iter()
        .map(|b| {
            let u = &b.usage;
            (
                u["input_tokens"].as_u64().unwrap_or(0),
                u["cache_read_input_tokens"].as_u64().unwrap_or(0),
                u["cache_creation_input_tokens"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn four_sessions_of_one_agent_read_its_prefix_from_anthropics_cache_at_most_six_tenths_the_cost() {
    let dir = support::scratch("caching-anthropic");
    std::fs::write(dir.join("prog.prose"), four_sessions()).expect("program");
    let fake = Fake::new(echo(), true);
    let (code, out, err) = run(&dir, "anthropic", &fake, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "d: Done: Write about skies\n");
    let billed = fake.billed();
    assert_eq!(billed.len(), 4, "one turn per session");
    assert!(billed.iter().all(|b| b.refused.is_none()), "{billed:?}");
    let bills = anthropic_bills(&billed);
    // The first request writes the prefix (tools, system prompt, task); from the second on
    // the agent's prefix is read from the cache and only the new task is written.
    assert_eq!(bills[0].1, 0, "{bills:?}");
    assert!(bills[0].2 >= 2_400, "{bills:?}");
    for b in &bills[1..] {
        assert!(b.1 >= 2_400, "read from the cache: {bills:?}");
        assert!(b.2 < 50, "only the new task is written: {bills:?}");
    }
    // What the trace and usage.jsonl say is what the provider reported.
    let usage_lines: Vec<Value> = std::fs::read_to_string(the_run(&dir).join("usage.jsonl"))
        .expect("usage.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(usage_lines.len(), 4);
    let read: u64 = bills.iter().map(|b| b.1).sum();
    let written: u64 = bills.iter().map(|b| b.2).sum();
    let sum = |field: &str| -> u64 {
        usage_lines
            .iter()
            .map(|l| l[field].as_u64().unwrap_or(0))
            .sum()
    };
    assert_eq!(sum("cache_read_tokens"), read);
    assert_eq!(sum("cache_write_tokens"), written);
    let events: Vec<Value> = err
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "turn")
        .collect();
    assert_eq!(events.len(), 4, "{err}");
    assert_eq!(events[1]["cache_read_tokens"], bills[1].1);
    let cached = recorded_usage(&dir);
    assert_eq!(cached["cache_read_tokens"], read);
    // The report shows them too.
    let (code, page, err) = support::output(
        support::prosevm()
            .current_dir(&dir)
            .args(["report", &support::run_ids(&dir.join(".prose"))[0]]),
    );
    assert_eq!(code, 0, "{err}");
    for (figure, n) in [
        ("read from the cache", read),
        ("written to the cache", written),
    ] {
        assert!(
            page.contains(&format!("<dt>{figure}</dt><dd>{}</dd>", grouped(n))),
            "{figure}"
        );
    }

    // The same run without caching: no marks, everything billed as plain input.
    let plain_dir = support::scratch("caching-anthropic-off");
    std::fs::write(plain_dir.join("prog.prose"), four_sessions()).expect("program");
    std::fs::write(plain_dir.join("prose.toml"), "prompt_cache = \"off\"\n").expect("toml");
    let uncached_fake = Fake::new(echo(), true);
    let (code, out2, err) = run(&plain_dir, "anthropic", &uncached_fake, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out2, out);
    let plain = uncached_fake.billed();
    assert!(plain
        .iter()
        .all(|b| !b.body.to_string().contains("cache_control")));
    assert!(anthropic_bills(&plain).iter().all(|b| b.1 == 0 && b.2 == 0));
    let uncached = recorded_usage(&plain_dir);
    let (with, without) = (
        cached["cost"].as_f64().expect("priced"),
        uncached["cost"].as_f64().expect("priced"),
    );
    let ratio = with / without;
    eprintln!("anthropic: ${with:.6} with caching, ${without:.6} without: {ratio:.3}x");
    assert!(ratio <= 0.6, "{ratio}");
    // Each part at its own rate (Sonnet: $3 in, $0.30 read, $3.75 written, $15 out).
    let out_tokens: u64 = billed
        .iter()
        .map(|b| b.usage["output_tokens"].as_u64().unwrap_or(0))
        .sum();
    let plain_in: u64 = bills.iter().map(|b| b.0).sum();
    let expected = (plain_in as f64 * 3.0
        + read as f64 * 0.30
        + written as f64 * 3.75
        + out_tokens as f64 * 15.0)
        / 1e6;
    assert!((with - expected).abs() < 1e-9, "{with} != {expected}");
    // The narration and the summary say what the cache did: run again, every request is
    // read whole from the cache the first run filled.
    let (_, _, narrated) = run_traced(&dir, "anthropic", &fake, "narrate", &[]);
    let total = billed[0].usage["input_tokens"].as_u64().unwrap_or(0) + bills[0].2;
    assert!(
        narrated.contains(&format!(" tokens in ({total} read from the cache), ")),
        "{narrated}"
    );
    assert!(
        narrated.contains(&format!("({} from the cache) / ", grouped(4 * total))),
        "{narrated}"
    );
}

#[test]
fn an_hours_marks_say_so_and_their_writes_cost_twice_the_input() {
    let dir = support::scratch("caching-anthropic-1h");
    std::fs::write(dir.join("prog.prose"), four_sessions()).expect("program");
    std::fs::write(dir.join("prose.toml"), "prompt_cache = \"1h\"\n").expect("toml");
    let fake = Fake::new(echo(), true);
    let (code, _, err) = run(&dir, "anthropic", &fake, &[]);
    assert_eq!(code, 0, "{err}");
    let billed = fake.billed();
    assert_eq!(
        billed[0].body["system"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    let bills = anthropic_bills(&billed);
    let out_tokens: u64 = billed
        .iter()
        .map(|b| b.usage["output_tokens"].as_u64().unwrap_or(0))
        .sum();
    let sum = |i: usize| -> u64 { bills.iter().map(|b| [b.0, b.1, b.2][i]).sum() };
    let expected = (sum(0) as f64 * 3.0
        + sum(1) as f64 * 0.30
        + sum(2) as f64 * 6.0
        + out_tokens as f64 * 15.0)
        / 1e6;
    let cost = recorded_usage(&dir)["cost"].as_f64().expect("priced");
    assert!((cost - expected).abs() < 1e-9, "{cost} != {expected}");
}

#[test]
fn openais_cached_tokens_are_recorded_and_priced_at_most_eight_tenths_the_cost() {
    let mut costs = Vec::new();
    for caching in [true, false] {
        let dir = support::scratch(&format!("caching-openai-{caching}"));
        std::fs::write(dir.join("prog.prose"), four_sessions()).expect("program");
        let fake = Fake::new(echo(), caching);
        let (code, out, err) = run(&dir, "openai", &fake, &["--model", "gpt-4o-mini"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "d: Done: Write about skies\n");
        let billed = fake.billed();
        assert_eq!(billed.len(), 4);
        let field = |b: &Billed, f: &str| b.usage.pointer(f).and_then(Value::as_u64).unwrap_or(0);
        let cached: u64 = billed
            .iter()
            .map(|b| field(b, "/prompt_tokens_details/cached_tokens"))
            .sum();
        let prompt: u64 = billed.iter().map(|b| field(b, "/prompt_tokens")).sum();
        let out_tokens: u64 = billed.iter().map(|b| field(b, "/completion_tokens")).sum();
        if caching {
            assert_eq!(field(&billed[0], "/prompt_tokens_details/cached_tokens"), 0);
            for b in &billed[1..] {
                assert!(
                    field(b, "/prompt_tokens_details/cached_tokens") >= 2_400,
                    "{b:?}"
                );
            }
        } else {
            assert_eq!(cached, 0);
        }
        // Recorded apart from plain input, and priced at gpt-4o-mini's rates ($0.15 in,
        // $0.075 cached, $0.60 out).
        let usage = recorded_usage(&dir);
        assert_eq!(usage["input_tokens"], prompt - cached);
        assert_eq!(usage["cache_read_tokens"].as_u64().unwrap_or(0), cached);
        let expected =
            ((prompt - cached) as f64 * 0.15 + cached as f64 * 0.075 + out_tokens as f64 * 0.60)
                / 1e6;
        let cost = usage["cost"].as_f64().expect("priced");
        assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
        costs.push(cost);
        // The openai driver's requests carry no marks.
        assert!(billed
            .iter()
            .all(|b| !b.body.to_string().contains("cache_control")));
    }
    let ratio = costs[0] / costs[1];
    eprintln!(
        "openai: ${:.6} with caching, ${:.6} without: {ratio:.3}x",
        costs[0], costs[1]
    );
    assert!(ratio <= 0.8, "{ratio}");
}

/// A session that lists the files, then answers; its agent's prompt is long enough (some
/// 1,300 tokens) for its prefix to be cached.
fn looking() -> String {
    let prompt = "Look around before you answer, and answer from what you saw. ".repeat(85);
    format!("agent looker:\n  prompt: \"{prompt}\"\noutput r = session: looker\n  prompt: \"What is here?\"\n")
}

/// Lists the files on the first request of each run, then answers.
fn list_then_answer() -> Answerer {
    Box::new(|body, _| {
        let turns = body["messages"].as_array().map_or(0, Vec::len);
        if turns <= 2 {
            Say::Calls(vec![("list_files".into(), json!({"path": "."}))])
        } else {
            Say::Text(format!("Seen: {}", last_user_line(body).len()))
        }
    })
}

#[test]
fn each_turn_of_an_agent_loop_is_the_previous_request_plus_its_new_messages() {
    for driver in ["openai", "anthropic"] {
        let mut first_requests = Vec::new();
        for attempt in 0..2 {
            let dir = support::scratch(&format!("caching-prefix-{driver}-{attempt}"));
            std::fs::write(dir.join("prog.prose"), looking()).expect("program");
            std::fs::write(dir.join("notes.md"), "# Notes\n").expect("file");
            let fake = Fake::new(list_then_answer(), true);
            let (code, _, err) = run(&dir, driver, &fake, &[]);
            assert_eq!(code, 0, "{driver}: {err}");
            let billed = fake.billed();
            assert_eq!(billed.len(), 2, "{driver}: a tool call, then the answer");
            let (one, two) = (unmarked(&billed[0].body), unmarked(&billed[1].body));
            // Everything but the conversation is the same, byte for byte ...
            for key in [
                "model",
                "tools",
                "system",
                "max_tokens",
                "stream",
                "temperature",
            ] {
                assert_eq!(one.get(key), two.get(key), "{driver}: {key}");
            }
            // ... and the conversation is the first's plus the new messages.
            let (m1, m2) = (
                one["messages"].as_array().expect("messages"),
                two["messages"].as_array().expect("messages"),
            );
            assert!(m2.len() > m1.len(), "{driver}");
            assert_eq!(m1[..], m2[..m1.len()], "{driver}");
            // So the second turn reads all of the first's request from the cache.
            match driver {
                "anthropic" => {
                    let bills = anthropic_bills(&billed);
                    let first_total = bills[0].0 + bills[0].1 + bills[0].2;
                    assert_eq!(bills[1].1, first_total, "{bills:?}");
                    let marks = billed[1].body.to_string().matches("cache_control").count();
                    assert!(marks <= 4, "{marks}");
                }
                _ => {
                    let prompt = billed[0].usage["prompt_tokens"].as_u64().expect("tokens");
                    let cached = billed[1].usage["prompt_tokens_details"]["cached_tokens"]
                        .as_u64()
                        .expect("cached");
                    assert!(prompt >= 1024, "{prompt}");
                    assert!(prompt - cached < 128, "{prompt} {cached}");
                }
            }
            first_requests.push(billed[0].body.clone());
        }
        // Two runs send the same first request: no ids, times or counters in it.
        assert_eq!(first_requests[0], first_requests[1], "{driver}");
    }
}
