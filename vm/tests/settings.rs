//! Settings: `prose.toml` is found upward from the program's directory and in the user's
//! config directory (the project's wins); temperature and max_output_tokens per model and per
//! agent are sent; a bad base URL, a missing key or a model the provider does not offer is
//! an error before the run starts.

use crate::support;

use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use support::provider::{ok, provider, provider_offering};

fn vm(dir: &Path, home: &Path) -> Command {
    let mut cmd = support::prosevm();
    for var in ["OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY"] {
        cmd.env_remove(var);
    }
    cmd.current_dir(dir)
        .env("XDG_CONFIG_HOME", home)
        .stdin(Stdio::null());
    cmd
}

#[test]
fn prose_toml_is_found_above_the_program_and_over_the_users() {
    let root = support::scratch("settings-upward");
    let home = root.join("home");
    std::fs::create_dir_all(home.join("prose")).expect("home");
    let project = root.join("project");
    std::fs::create_dir_all(project.join("flows/deep")).expect("dirs");
    std::fs::write(
        project.join("flows/deep/prog.prose"),
        "output r = session \"Say hi\"\n",
    )
    .expect("program");
    // The user's file chooses the command driver and a command; the project's file, found
    // two directories above the program, replaces the command.
    std::fs::write(
        home.join("prose/prose.toml"),
        "driver = \"command\"\ncommand = \"echo from-user\"\n",
    )
    .expect("user file");
    std::fs::write(
        project.join("prose.toml"),
        "command = \"echo from-project\"\n",
    )
    .expect("project file");
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("cwd");
    let (code, out, err) = support::output(
        vm(&elsewhere, &home)
            .arg("run")
            .arg(project.join("flows/deep/prog.prose"))
            .args(["--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: from-project\n");
    std::fs::remove_file(project.join("prose.toml")).expect("rm");
    let (code, out, err) = support::output(
        vm(&elsewhere, &home)
            .arg("run")
            .arg(project.join("flows/deep/prog.prose"))
            .args(["--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "r: from-user\n");
}

#[test]
fn temperature_and_max_tokens_are_sent_per_model_and_per_agent() {
    let dir = support::scratch("settings-sampling");
    std::fs::write(
        dir.join("prose.toml"),
        "temperature = 0.2\nmax_output_tokens = 500\n[model_options.big]\nmax_output_tokens = 4000\n[agents.poet]\ntemperature = 1.1\n",
    )
    .expect("toml");
    std::fs::write(
        dir.join("prog.prose"),
        "agent poet:\n  model: \"big\"\nsession: poet\n  prompt: \"A poem\"\nsession \"A fact\"\n",
    )
    .expect("program");
    let (url, seen) = provider(vec![ok("poem"), ok("fact")]);
    let (code, _, err) = support::output(
        vm(&dir, &dir)
            .env("OPENAI_API_KEY", "k")
            .args([
                "run",
                "prog.prose",
                "--driver",
                "openai",
                "--model",
                "small",
            ])
            .args(["--base-url", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    let seen = seen.lock().expect("seen");
    assert_eq!(seen[0].body["model"], "big");
    assert_eq!(seen[0].body["temperature"], json!(1.1));
    assert_eq!(seen[0].body["max_tokens"], json!(4000));
    assert_eq!(seen[1].body["model"], "small");
    assert_eq!(seen[1].body["temperature"], json!(0.2));
    assert_eq!(seen[1].body["max_tokens"], json!(500));
}

#[test]
fn unusable_settings_are_errors_before_the_run_starts() {
    let dir = support::scratch("settings-early");
    std::fs::write(
        dir.join("prog.prose"),
        "agent a:\n  model: opus\nsession: a\n  prompt: \"x\"\n",
    )
    .expect("program");
    let runs = dir.join(".prose/runs");
    // A model the provider does not offer.
    let (url, seen) = provider_offering(vec![ok("never")], &["local-7b"]);
    let (code, _, err) = support::output(
        vm(&dir, &dir)
            .env("OPENAI_API_KEY", "k")
            .args(["run", "prog.prose", "--driver", "openai"])
            .args(["--base-url", &url, "--model-map", "opus=grand-model"]),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("does not offer the model(s) grand-model"),
        "{err}"
    );
    assert!(err.contains("it offers: local-7b"), "{err}");
    assert!(seen.lock().expect("seen").is_empty());
    assert!(!runs.exists(), "no run was started");
    // A base URL that is not one.
    let (code, _, err) = support::output(vm(&dir, &dir).env("OPENAI_API_KEY", "k").args([
        "run",
        "prog.prose",
        "--driver",
        "openai",
        "--base-url",
        "localhost:8080",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("base URL"), "{err}");
    // The OpenAI API without a key.
    let (code, _, err) =
        support::output(vm(&dir, &dir).args(["run", "prog.prose", "--driver", "openai"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs OPENAI_API_KEY"), "{err}");
    assert!(!runs.exists(), "no run was started");
}

#[test]
fn diagnostics_are_coloured_only_on_a_terminal_or_when_asked() {
    let dir = support::scratch("settings-color");
    std::fs::write(dir.join("bad.prose"), "sesion \"x\"\n").expect("program");
    let run = |extra: &[&str]| {
        let out = vm(&dir, &dir)
            .args(extra)
            .args(["run", "bad.prose"])
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1));
        out.stderr.contains(&0x1b)
    };
    assert!(!run(&[]), "colour went to a pipe");
    assert!(run(&["--color", "always"]));
    assert!(!run(&["--color", "never"]));
}
