//! `prosec cost`: the bounds it prints for the shipped examples, its JSON form, its price
//! settings, and its refusal of programs with errors.

use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the compiler crate sits inside the workspace")
        .join("examples")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("prosec-cost-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Runs `prosec cost` with `args` (no user `prose.toml`); returns the exit code, stdout
/// and stderr.
fn cost(args: &[&str]) -> (i32, String, String) {
    let home = scratch("home");
    let out = Command::new(env!("CARGO_BIN_EXE_prosec"))
        .arg("cost")
        .args(args)
        .env("XDG_CONFIG_HOME", &home)
        .output()
        .expect("run prosec");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn example(name: &str) -> String {
    examples().join(name).display().to_string()
}

#[test]
fn a_fan_out_over_an_input_list_is_a_symbolic_count() {
    let (code, out, err) = cost(&[&example("newsletter.prose")]);
    assert_eq!(code, 0, "{err}");
    // The filter asks once per link; pmap and map once per kept link (none to all of
    // them); `map | map:` once per section the model lists.
    assert!(
        out.contains("sessions: 3 + len(links) + len(map) to 3 + 4*len(links) + len(map)\n"),
        "{out}"
    );
    assert!(
        out.contains("newsletter.prose:19: `| filter`: len(links) time(s)"),
        "{out}"
    );
    assert!(
        out.contains("newsletter.prose:26: `| pmap`: 0 to len(links) time(s)"),
        "{out}"
    );
    // Every session names no model: the anthropic driver's default, at 2,000 in (1,500 of
    // them the cached prefix) and 1,000 out: $0.0015 + $0.015, and the prefix at $0.00045
    // read or $0.005625 written: $0.01695 to $0.022125 a request.
    assert!(
        out.contains("cost: $0.0508 + $0.0169*len(links) + $0.0169*len(map) to $0.0664 + $0.0885*len(links) + $0.0221*len(map)\n  priced: claude-sonnet-4-5 at $3/$15 per Mtok (cached: $0.3 read, $3.75 written)\n  assumed per request: 2,000 tokens in (1,500 of them a prefix the provider caches: read from its cache in the least, written to it in the most), 1,000 out"),
        "{out}"
    );
    // Without caching, $0.006 + $0.015 = $0.021 a request, least and most.
    let (code, out, err) = cost(&[&example("newsletter.prose"), "--tokens-cached", "0"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("cost: $0.0630 + $0.0210*len(links) + $0.0210*len(map) to $0.0630 + $0.0840*len(links) + $0.0210*len(map)\n  priced: claude-sonnet-4-5 at $3/$15 per Mtok\n  assumed per request: 2,000 tokens in, 1,000 out"),
        "{out}"
    );
    assert!(out.contains("symbols are counts known when the program runs: len(links), len(map)"));
}

#[test]
fn a_loop_without_max_is_unbounded_with_its_line() {
    let (code, out, err) = cost(&[&example("bug-hunt.prose"), "--tokens-cached", "0"]);
    assert_eq!(code, 0, "{err}");
    // The checker's warning for the same loop, on stderr.
    assert!(err.contains("W108"), "{err}");
    assert!(
        out.contains("sessions: 11 + len(findings) + len(suspects) + soak-count to unbounded\n"),
        "{out}"
    );
    assert!(
        out.contains("bug-hunt.prose:59: `loop while **the release branch still has flaky…`: unbounded (no `max:`)"),
        "{out}"
    );
    assert!(
        out.contains("bug-hunt.prose:32: `loop until **the suite passes in three consecut…`: 0 to 5 time(s), each 1 session(s), 1 judgment(s)"),
        "{out}"
    );
    assert!(
        out.contains("cost: $0.2730 + $0.0210*len(findings) + $0.0210*len(suspects) + $0.0210*soak-count to unbounded\n"),
        "{out}"
    );
}

#[test]
fn models_are_priced_per_agent() {
    let (code, out, _) = cost(&[
        &example("research-brief.prose"),
        "--tokens-in",
        "1000000",
        "--tokens-out",
        "0",
        "--tokens-cached",
        "0",
    ]);
    assert_eq!(code, 0);
    // Two sessions on opus, three on sonnet (the default), retries 2 and 3 in the most.
    assert!(out.contains("sessions: 5 to 10\n"), "{out}");
    assert!(out.contains("claude-opus-4-1 at $15/$75 per Mtok"), "{out}");
    assert!(out.contains("cost: $39.00 to $54.00\n"), "{out}");
}

#[test]
fn the_json_form_has_terms_notes_and_assumptions() {
    let (code, out, err) = cost(&[&example("bug-hunt.prose"), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(doc["sessions"]["unbounded"], true);
    assert_eq!(doc["sessions"]["max"], serde_json::Value::Null);
    assert_eq!(doc["sessions"]["min"][0]["coefficient"], 11.0);
    assert_eq!(doc["sessions"]["min"][0]["symbols"], serde_json::json!([]));
    assert_eq!(doc["judgments"]["text"], "2 to unbounded");
    assert_eq!(doc["assumptions"]["tokens_in_per_request"], 2000);
    assert_eq!(doc["assumptions"]["tokens_cached_per_request"], 1500);
    assert_eq!(doc["assumptions"]["prompt_cache"], "5m");
    assert_eq!(doc["assumptions"]["default_model"], "claude-sonnet-4-5");
    assert_eq!(doc["models"][0]["price"]["input"], 3.0);
    assert_eq!(doc["models"][0]["price"]["cache_read"], 0.3);
    assert_eq!(doc["models"][0]["price"]["cache_write"], 3.75);
    assert!(doc["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .any(|n| n["line"] == 59
            && n["message"]
                .as_str()
                .is_some_and(|m| m.contains("unbounded"))));
    assert_eq!(doc["diagnostics"][0]["code"], "W108");
    assert_eq!(
        doc["symbols"],
        serde_json::json!(["len(findings)", "len(suspects)", "soak-count"])
    );
}

#[test]
fn prices_and_models_come_from_prose_toml() {
    let dir = scratch("toml");
    std::fs::write(
        dir.join("p.prose"),
        "agent writer:\n  model: opus\n  prompt: \"You write.\"\nsession: writer\n  prompt: \"Write\"\nsession \"Check\"\n",
    )
    .expect("write");
    // Found beside the program, as prosevm finds it; other keys are the VM's.
    std::fs::write(
        dir.join("prose.toml"),
        "driver = \"anthropic\"\nmax_cost = 1.0\nmax_output_tokens = 4096\nmodel = \"my-model\"\n[models]\nopus = \"big\"\n[prices.big]\ninput = 1.0\noutput = 1.0\n",
    )
    .expect("write");
    let p = dir.join("p.prose");
    let (code, out, err) = cost(&[
        p.to_str().expect("utf-8"),
        "--tokens-in",
        "500000",
        "--tokens-out",
        "500000",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("cost: $1.00\n  priced: big at $1/$1 per Mtok (cached: $1 read, $1 written), my-model (no price: not counted)\n  assumed per request: 500,000 tokens in (1,500 of them a prefix the provider caches: read from its cache in the least, written to it in the most), 500,000 out"),
        "{out}"
    );
    assert!(
        out.contains("a reply may use up to 4,096 tokens out"),
        "{out}"
    );
    // --config names another file; --model the default model.
    let other = dir.join("other.toml");
    // With `prompt_cache = "off"`, the anthropic driver's input is all plain.
    std::fs::write(
        &other,
        "prompt_cache = \"off\"\n[prices.cheap]\ninput = 0.5\noutput = 0.5\n",
    )
    .expect("write");
    let (code, out, _) = cost(&[
        p.to_str().expect("utf-8"),
        "--config",
        other.to_str().expect("utf-8"),
        "--model",
        "cheap",
        "--tokens-in",
        "1000000",
        "--tokens-out",
        "0",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("cheap at $0.5/$0.5 per Mtok, claude-opus-4-1 at $15/$75 per Mtok"),
        "{out}"
    );
    assert!(out.contains("cost: $15.50\n"), "{out}");
    // A broken file is a usage error.
    std::fs::write(&other, "[prices.cheap]\ninput = \"free\"\n").expect("write");
    let (code, _, err) = cost(&[
        p.to_str().expect("utf-8"),
        "--config",
        other.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("other.toml"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_program_with_errors_is_reported_as_check_reports_it() {
    let dir = scratch("errors");
    let p = dir.join("bad.prose");
    std::fs::write(&p, "session: reviewr\n  prompt: \"Review\"\n").expect("write");
    let (code, out, err) = cost(&[p.to_str().expect("utf-8")]);
    assert_eq!(code, 1);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("error[E007]: undefined agent `reviewr`"),
        "{err}"
    );
    assert!(err.contains("checked 1 file(s): 1 error(s)"), "{err}");
    let (code, out, _) = cost(&[p.to_str().expect("utf-8"), "--format", "json"]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(doc["diagnostics"][0]["code"], "E007");
    let (code, _, err) = cost(&[dir.join("missing.prose").to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
