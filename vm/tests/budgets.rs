//! Budgets are hard limits: before a request is sent its worst case must fit in what is
//! left, or the run pauses (status `paused`, exit 3), resumable with a larger budget; costs
//! are counted per reply from a price table and kept in the journal and the run record.

use crate::support;

use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::provider::{provider, Canned};

fn vm(dir: &Path) -> Command {
    let mut cmd = support::prosevm();
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

/// The runs under `dir`'s `.prose/runs` (none if it is missing).
fn runs_in(dir: &Path) -> usize {
    std::fs::read_dir(dir.join(".prose/runs"))
        .map(|d| {
            d.flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn a_budget_a_driver_cannot_keep_is_refused_before_anything_runs() {
    let dir = support::scratch("budget-uncounted");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    let asked = dir.join("asked");
    let command = format!("touch {}; echo hi", asked.display());
    // The mock, a command and a stdio host report nothing that can be counted.
    for (driver, budget) in [
        (&["--driver", "mock"][..], &["--max-tokens", "100"][..]),
        (
            &["--driver", "command", "--command", &command],
            &["--max-cost", "1"],
        ),
        (
            &["--driver", "stdio"],
            &["--max-tokens", "100", "--max-cost", "1"],
        ),
    ] {
        let (code, _, err) = support::output(
            vm(&dir)
                .args(["run", "prog.prose", "--trace", "quiet"])
                .args(driver)
                .args(budget),
        );
        assert_eq!(code, 2, "{driver:?}: {err}");
        assert!(
            err.contains(&format!(
                "the {} driver does not report what its answers use, so a budget",
                driver[1]
            )),
            "{err}"
        );
        assert!(err.contains(budget[0]), "{err}");
    }
    // So is a budget from prose.toml.
    std::fs::write(dir.join("prose.toml"), "max_tokens = 100\n").expect("toml");
    let (code, _, err) = support::output(
        vm(&dir)
            .args([
                "run",
                "prog.prose",
                "--driver",
                "command",
                "--command",
                &command,
            ])
            .args(["--trace", "quiet"]),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--max-tokens, here or in prose.toml"), "{err}");
    std::fs::remove_file(dir.join("prose.toml")).expect("toml");
    // Nothing ran and nothing was written.
    assert!(!asked.exists(), "the command was run");
    assert_eq!(runs_in(&dir), 0);
    // `submit` refuses it before reaching the store.
    let mut c = prosec::compile::Compilation::new(Default::default());
    let root = c.add_source(Path::new("prog.prose"), PROGRAM);
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).expect("compiles");
    std::fs::write(dir.join("prog.pbc"), bytes).expect("artifact");
    let (code, _, err) = support::output(
        vm(&dir)
            .args([
                "submit",
                "prog.pbc",
                "--driver",
                "mock",
                "--max-tokens",
                "9",
            ])
            .args(["--store", "postgres://nobody@127.0.0.1:1/none"]),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the mock driver does not report"), "{err}");
}

#[test]
fn a_cost_budget_needs_a_price_for_every_model() {
    let dir = support::scratch("budget-unpriced");
    std::fs::write(
        dir.join("prog.prose"),
        "let a = session \"First\"\n  model: \"priced\"\noutput b = session \"Second\"\n",
    )
    .expect("program");
    std::fs::write(
        dir.join("prose.toml"),
        "[prices.priced]\ninput = 1.0\noutput = 1.0\n",
    )
    .expect("toml");
    let (url, seen) = provider(vec![answer("one", 10, 3), answer("two", 10, 3)]);
    let (code, _, err) = support::output(
        vm(&dir)
            .args([
                "run",
                "prog.prose",
                "--driver",
                "openai",
                "--model",
                "unpriced",
            ])
            .args(["--base-url", &url, "--max-cost", "1", "--trace", "quiet"]),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--max-cost cannot be kept: no price is known for the model(s) unpriced"),
        "{err}"
    );
    assert!(seen.lock().expect("seen").is_empty());
    assert_eq!(runs_in(&dir), 0);
    // Tokens are counted whatever the prices.
    let (code, out, err) = support::output(
        vm(&dir)
            .args([
                "run",
                "prog.prose",
                "--driver",
                "openai",
                "--model",
                "unpriced",
            ])
            .args([
                "--base-url",
                &url,
                "--max-tokens",
                "100000",
                "--trace",
                "quiet",
            ]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "b: two\n");
}

#[test]
fn a_run_with_a_budget_is_not_resumed_with_a_driver_that_cannot_keep_it() {
    let dir = support::scratch("budget-resume");
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    std::fs::write(dir.join("prose.toml"), "max_output_tokens = 100\n").expect("toml");
    // Paused at its budget after the first answer.
    let (url, _) = provider(vec![answer("one", 4_900, 100)]);
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
    let before = record(&dir);
    let id = before["id"].as_str().expect("id").to_string();
    let (code, _, err) = support::output(
        vm(&dir)
            .args([
                "resume",
                &id,
                "--driver",
                "command",
                "--command",
                "echo two",
            ])
            .args(["--trace", "quiet"]),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("run {id}: the command driver does not report")),
        "{err}"
    );
    assert_eq!(record(&dir), before, "the run was touched");
}
