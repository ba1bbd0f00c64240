//! Budgets are hard limits: before a request is sent its worst case must fit in what is
//! left, or the run pauses (status `paused`, exit 3), resumable with a larger budget; costs
//! are counted per reply from a price table and kept in the journal and the run record.

mod support;

use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::provider::{provider, Canned};

fn vm(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_prosevm"));
    cmd.current_dir(dir)
        .env("OPENAI_API_KEY", "k")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null());
    cmd
}

/// An answer that reports `tokens_in` and `tokens_out`.
fn answer(text: &str, tokens_in: u64, tokens_out: u64) -> Canned {
    Canned {
        status: 200,
        headers: "",
        body: json!({
            "choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out}
        })
        .to_string(),
        delay: Duration::ZERO,
        stream: None,
    }
}

fn record(dir: &Path) -> serde_json::Value {
    let run = std::fs::read_dir(dir.join(".prose/runs"))
        .expect("runs")
        .flatten()
        .find(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .expect("a run");
    serde_json::from_str(&std::fs::read_to_string(run.path().join("run.json")).expect("record"))
        .expect("json")
}

const PROGRAM: &str = "let a = session \"First\"\noutput b = session \"Second\"\n";

#[test]
fn a_run_pauses_before_a_request_that_might_go_over_and_resumes_with_more() {
    let dir = support::scratch("budget-tokens");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    std::fs::write(dir.join("prose.toml"), "max_output_tokens = 100\n").expect("toml");
    // The first answer uses 5,000 tokens: the second request's worst case no longer fits.
    let (url, seen) = provider(vec![answer("one", 4_900, 100), answer("two", 10, 5)]);
    let (code, _, err) = support::output(
        vm(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args([
                "--base-url",
                &url,
                "--max-tokens",
                "5200",
                "--trace",
                "quiet",
            ]),
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("paused at its budget"), "{err}");
    assert!(err.contains("prosevm resume"), "{err}");
    assert_eq!(
        seen.lock().expect("seen").len(),
        1,
        "the second request was not sent"
    );
    let r = record(&dir);
    assert_eq!(r["status"], "paused");
    assert_eq!(r["usage"]["input_tokens"], 4_900);
    // Resumed with a larger budget: the first answer is kept, the second asked.
    let id = r["id"].as_str().expect("id").to_string();
    let (code, out, err) = support::output(
        vm(&dir)
            .args(["resume", &id, "--max-tokens", "20000", "--trace", "quiet"])
            .args(["--driver", "openai", "--model", "m", "--base-url", &url]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "b: two\n");
    assert_eq!(seen.lock().expect("seen").len(), 2);
    let r = record(&dir);
    assert_eq!(r["status"], "finished");
    assert_eq!(r["options"]["max_tokens"], 20000);
    assert_eq!(r["usage"]["input_tokens"], 4_910);
}

#[test]
fn a_budget_too_small_for_the_first_request_sends_nothing() {
    let dir = support::scratch("budget-cost");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    std::fs::write(
        dir.join("prose.toml"),
        "max_output_tokens = 1000\n[prices.m]\ninput = 100.0\noutput = 100.0\n",
    )
    .expect("toml");
    // 1,000 output tokens at $100 a million: the worst case is over $0.10.
    let (url, seen) = provider(vec![answer("one", 10, 3), answer("two", 10, 3)]);
    let (code, _, err) = support::output(
        vm(&dir)
            .args(["run", "prog.prose", "--driver", "openai", "--model", "m"])
            .args(["--base-url", &url, "--max-cost", "0.05", "--trace", "quiet"]),
    );
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("may cost up to $0.") && err.contains("of the $0.0500 allowed"),
        "{err}"
    );
    assert!(seen.lock().expect("seen").is_empty());
    assert_eq!(record(&dir)["status"], "paused");
    // Enough budget: every reply is priced, in the trace and the record.
    let (code, _, err) = support::output(
        vm(&dir)
            .args([
                "resume",
                record(&dir)["id"].as_str().expect("id"),
                "--max-cost",
                "1",
            ])
            .args([
                "--driver",
                "openai",
                "--model",
                "m",
                "--base-url",
                &url,
                "--trace",
                "json",
            ]),
    );
    assert_eq!(code, 0, "{err}");
    let costs: Vec<f64> = err
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "usage")
        .filter_map(|e| e["cost"].as_f64())
        .collect();
    assert_eq!(costs.len(), 2, "{err}");
    assert!((costs[0] - 0.0013).abs() < 1e-9, "{costs:?}");
    let total = record(&dir)["usage"]["cost"].as_f64().expect("cost");
    assert!((total - 0.0026).abs() < 1e-9, "{total}");
}
