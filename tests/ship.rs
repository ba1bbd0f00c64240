//! A shipped workflow, from `prosec build --sign` to `prosevm exec --trust` on another
//! machine's terms, offline: the published programs that import skills are built with their
//! sources reachable (a repository through git's `insteadOf`, a package from a loopback npm
//! registry, a local directory), copied elsewhere, every source and cache removed, and run
//! as another user (`nobody`, when the tests run as root) with a home and cache of their
//! own; each skill's instructions reach the model.
//! Then trust: an unsigned, foreign-signed or altered artifact never runs, and nothing is
//! written for it, whether it is run, resumed (its run's copy altered, or the program
//! edited under it), submitted or claimed by a worker of the Postgres store; and skills no
//! place has: a warning under the mock (the examples that import skills, run as a new user
//! would), a located error otherwise. Local skills are found beside the file importing
//! them, from whatever directory the program is run.

#[path = "../compiler/tests/ship/support.rs"]
#[allow(dead_code)]
mod ship_support;

#[path = "../vm/tests/support/provider.rs"]
#[allow(dead_code)]
mod provider;

#[path = "support/mod.rs"]
mod support;

use serde_json::Value;
use ship_support::{integrity, skill_md, tarball, Run, Server, World, NOTES, TONE};
use std::path::{Path, PathBuf};

const WEB_SEARCH: &str = "Search the web before answering; cite every source.";
const SUMMARIZER: &str = "Summarize in five bullet points at most.";
const FILE_READER: &str = "Read files with read_file and quote them exactly.";
const CODE_ANALYZER: &str = "Look for injection, unchecked input and secrets in code.";

fn published(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../compiler/tests/ship/published")
            .join(name),
    )
    .expect("fixture")
}

/// Makes a key pair `name` in `dir` (no password, for an unattended build).
fn keygen(w: &World, dir: &Path, name: &str) -> PathBuf {
    w.prosec(dir, &["keygen", name, "--without-password"]).ok();
    dir.join(format!("{name}.pub"))
}

/// Someone else's machine: another user (`nobody`, through `setpriv`, when the tests run as
/// root, as on CI; elsewhere the same user), with a home and a cache of their own, nothing
/// fetched before.
struct Elsewhere {
    dir: PathBuf,
    home: PathBuf,
    cache: PathBuf,
    /// Whether commands run as `nobody`.
    other_user: bool,
}

/// The user and group ids of `nobody`.
const NOBODY: u32 = 65534;

impl Elsewhere {
    fn new(w: &World) -> Elsewhere {
        // SAFETY: geteuid has no preconditions.
        let other_user = unsafe { libc::geteuid() } == 0;
        let there = Elsewhere {
            dir: w.dir("elsewhere/run"),
            home: w.dir("elsewhere/home"),
            cache: w.dir("elsewhere/cache"),
            other_user,
        };
        if other_user {
            for d in [&there.dir, &there.home, &there.cache] {
                std::os::unix::fs::chown(d, Some(NOBODY), Some(NOBODY)).expect("chown");
            }
        }
        there
    }

    /// `prosevm ARGS` run here, as that user, against the fake provider at `url`.
    fn prosevm(&self, w: &World, url: &str, args: &[&str]) -> Run {
        let mut cmd = w.command("prosevm", &self.dir);
        if self.other_user {
            let mut as_nobody = std::process::Command::new("setpriv");
            as_nobody
                .args([
                    format!("--reuid={NOBODY}"),
                    format!("--regid={NOBODY}"),
                    "--clear-groups".into(),
                ])
                .arg(cmd.get_program())
                .current_dir(&self.dir);
            for (k, v) in cmd.get_envs() {
                match v {
                    Some(v) => as_nobody.env(k, v),
                    None => as_nobody.env_remove(k),
                };
            }
            cmd = as_nobody;
        }
        let out = cmd
            .args(args)
            .env("HOME", &self.home)
            .env("XDG_CACHE_HOME", &self.cache)
            .env("OPENAI_API_KEY", "sk-test")
            .env("OPENAI_BASE_URL", url)
            .env_remove("OPENAI_MODEL")
            .env_remove("PROSE_TRUST")
            .env_remove("PROSE_STORE")
            .output()
            .expect("run prosevm");
        Run(out)
    }
}

/// The system prompts the provider received.
fn system_prompts(seen: &[provider::Seen]) -> Vec<String> {
    seen.iter()
        .filter_map(|s| {
            s.body["messages"]
                .as_array()?
                .iter()
                .find(|m| m["role"] == "system")
                .and_then(|m| m["content"].as_str())
                .map(str::to_string)
        })
        .collect()
}

/// The one run's `run.json` under `dir/.prose/runs/`.
fn run_record(dir: &Path) -> Value {
    let runs: Vec<_> = std::fs::read_dir(dir.join(".prose/runs"))
        .expect("runs")
        .flatten()
        .collect();
    assert_eq!(runs.len(), 1, "one run");
    let text = std::fs::read_to_string(runs[0].path().join("run.json")).expect("run.json");
    serde_json::from_str(&text).expect("json")
}

/// Removes every source the build read, and the builder's cache.
fn sources_gone(w: &World, project: &Path) {
    for gone in [
        &w.github,
        &w.cache,
        &w.root.join("work"),
        &project.to_path_buf(),
    ] {
        std::fs::remove_dir_all(gone).expect("remove a source");
    }
}

#[test]
fn the_published_skills_example_runs_elsewhere_with_every_skill_reaching_the_model() {
    let w = World::new("vm-published-11");
    w.commit(
        "anthropic",
        "skills",
        &[
            (
                "skills/web-search/SKILL.md",
                &skill_md("web-search", WEB_SEARCH),
            ),
            (
                "skills/web-search/scripts/search.sh",
                "#!/bin/sh\necho \"$1\"\n",
            ),
        ],
        None,
    );
    let npm = Server::start();
    let tgz = tarball(&[
        (
            "package.json",
            "{\"name\":\"@example/summarizer\",\"version\":\"1.0.0\"}",
        ),
        ("SKILL.md", &skill_md("summarizer", SUMMARIZER)),
    ]);
    npm.publish("", "@example/summarizer", &[("1.0.0", tgz)], |_, t| {
        integrity(t)
    });
    let mut w = w;
    w.env.push(("npm_config_registry".into(), npm.url.clone()));
    let project = w.dir("project");
    std::fs::write(
        project.join("main.prose"),
        published("11-skills-and-imports.prose"),
    )
    .unwrap();
    let local = project.join("local-skills/file-reader");
    std::fs::create_dir_all(&local).unwrap();
    std::fs::write(local.join("SKILL.md"), skill_md("file-reader", FILE_READER)).unwrap();
    let keys = w.dir("keys");
    let public = keygen(&w, &keys, "release");
    let secret = keys.join("release.key");
    w.prosec(
        &project,
        &["build", "main.prose", "--sign", secret.to_str().unwrap()],
    )
    .ok();

    let there = Elsewhere::new(&w);
    std::fs::copy(project.join("main.pbc"), there.dir.join("app.pbc")).unwrap();
    std::fs::copy(&public, there.dir.join("release.pub")).unwrap();
    sources_gone(&w, &project);
    npm.clear();

    let (url, seen) = provider::provider(vec![
        provider::ok("Storage is getting cheaper."),
        provider::ok("A summary."),
    ]);
    let info = there.prosevm(
        &w,
        &url,
        &[
            "info",
            "app.pbc",
            "--format",
            "json",
            "--trust",
            "release.pub",
        ],
    );
    info.ok();
    let info: Value = serde_json::from_str(&info.stdout()).expect("json");
    assert_eq!(info["signature"]["verdict"], "trusted", "{info}");
    let bundled: Vec<&str> = info["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(bundled, ["web-search", "summarizer", "file-reader"]);

    let run = there.prosevm(
        &w,
        &url,
        &[
            "exec",
            "app.pbc",
            "--driver",
            "openai",
            "--trust",
            "release.pub",
            "--no-input",
        ],
    );
    run.ok();
    let seen = seen.lock().unwrap();
    let systems = system_prompts(&seen);
    assert_eq!(systems.len(), 2, "one request per session");
    assert!(systems[0].contains(WEB_SEARCH) && systems[0].contains(SUMMARIZER));
    assert!(systems[1].contains(FILE_READER) && systems[1].contains(SUMMARIZER));
    assert!(
        !systems[0].contains(FILE_READER),
        "only the agent's own skills"
    );
    if there.other_user {
        use std::os::unix::fs::MetadataExt;
        let made_by = |p: &Path| std::fs::metadata(p).expect("made").uid();
        assert_eq!(
            made_by(&there.dir.join(".prose")),
            NOBODY,
            "the run is nobody's"
        );
    }
    // The skills were unpacked into that user's cache, and the run names each.
    assert!(systems[0].contains(&there.cache.display().to_string()));
    let record = run_record(&there.dir);
    let used: Vec<(&str, &str)> = record["skills"]
        .as_array()
        .expect("skills recorded")
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["origin"].as_str().unwrap()))
        .collect();
    assert_eq!(used.len(), 3, "{used:?}");
    assert!(used
        .iter()
        .any(|(n, o)| *n == "web-search" && o.starts_with("github:anthropic/skills")));
    assert!(record["skills"][0]["sha256"]
        .as_str()
        .is_some_and(|h| h.len() == 64));
}

#[test]
fn the_published_permissions_example_runs_elsewhere_with_its_skill() {
    let w = World::new("vm-published-12");
    w.commit(
        "anthropic",
        "code-tools",
        &[(
            "code-analyzer/SKILL.md",
            &skill_md("code-analyzer", CODE_ANALYZER),
        )],
        None,
    );
    let project = w.dir("project");
    std::fs::write(
        project.join("secure.prose"),
        published("12-secure-agent-permissions.prose"),
    )
    .unwrap();
    w.prosec(&project, &["build", "secure.prose", "-o", "secure.pbc"])
        .ok();
    let there = Elsewhere::new(&w);
    std::fs::copy(project.join("secure.pbc"), there.dir.join("secure.pbc")).unwrap();
    sources_gone(&w, &project);
    let (url, seen) = provider::provider(vec![
        provider::ok("No injection found."),
        provider::ok("Docs updated."),
    ]);
    there
        .prosevm(
            &w,
            &url,
            &["exec", "secure.pbc", "--driver", "openai", "--no-input"],
        )
        .ok();
    let systems = system_prompts(&seen.lock().unwrap());
    assert!(systems[0].contains(CODE_ANALYZER), "{systems:?}");
    assert!(
        !systems[1].contains(CODE_ANALYZER),
        "the doc writer has no skill"
    );
}

/// The artifact's bytes with one byte of its signed body changed (the source hash, in the
/// header).
fn altered(bytes: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[30] ^= 0x20;
    b
}

/// Builds `source` in `dir` three ways: `unsigned.pbc`, `signed.pbc` (by key `release`,
/// whose public key is returned) and `foreign.pbc` (by key `other`).
fn signed_three_ways(w: &World, dir: &Path, source: &str) -> PathBuf {
    std::fs::write(dir.join("hello.prose"), source).unwrap();
    let public = keygen(w, dir, "release");
    keygen(w, dir, "other");
    w.prosec(dir, &["build", "hello.prose", "-o", "unsigned.pbc"])
        .ok();
    for (out, key) in [("signed.pbc", "release.key"), ("foreign.pbc", "other.key")] {
        w.prosec(dir, &["build", "hello.prose", "-o", out, "--sign", key])
            .ok();
    }
    public
}

#[test]
fn an_untrusted_artifact_never_runs_and_nothing_is_written_for_it() {
    let w = World::new("vm-trust");
    let dir = w.dir("p");
    let public = signed_three_ways(
        &w,
        &dir,
        "session \"Say hello\"\noutput greeting = \"hi\"\n",
    );
    let signed = std::fs::read(dir.join("signed.pbc")).unwrap();
    std::fs::write(dir.join("altered.pbc"), altered(&signed)).unwrap();
    // A whole other program under the signed one's signature: a valid artifact, not signed.
    std::fs::write(
        dir.join("other.prose"),
        "session \"Delete everything\"\noutput greeting = \"bye\"\n",
    )
    .unwrap();
    w.prosec(&dir, &["build", "other.prose", "-o", "other.pbc"])
        .ok();
    let (_, signature) = bytecode_spec::artifact::split_signature(&signed).expect("framed");
    let forged = bytecode_spec::artifact::with_signature(
        &std::fs::read(dir.join("other.pbc")).unwrap(),
        signature.expect("signed"),
    )
    .expect("framed");
    std::fs::write(dir.join("forged.pbc"), forged).unwrap();
    let trust = public.to_str().unwrap();

    let refused = |args: &[&str], env: &[(&str, &str)], why: &str| {
        let run_dir = w.dir(&format!("runs/{}", args.join("-").replace(['/', '.'], "_")));
        let mut cmd = w.command("prosevm", &run_dir);
        cmd.args(args).env_remove("PROSE_TRUST");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = Run(cmd.output().expect("runs"));
        assert_eq!(out.code(), 2, "{args:?} must be refused:\n{}", out.stderr());
        assert!(out.stderr().contains(why), "{args:?}:\n{}", out.stderr());
        assert!(out.stderr().contains("refused to run"), "{}", out.stderr());
        assert!(
            !run_dir.join(".prose").exists(),
            "nothing is written for a refused artifact"
        );
    };
    let file = |name: &str| dir.join(name).to_str().unwrap().to_string();
    refused(
        &["exec", &file("unsigned.pbc"), "--trust", trust],
        &[],
        "not signed",
    );
    refused(
        &["exec", &file("foreign.pbc"), "--trust", trust],
        &[],
        "which is not trusted",
    );
    refused(
        &["exec", &file("altered.pbc"), "--trust", trust],
        &[],
        "altered",
    );
    refused(
        &["exec", &file("forged.pbc"), "--trust", trust],
        &[],
        "altered",
    );
    // The trusted keys may also come from PROSE_TRUST or prose.toml's [trust].
    refused(
        &["exec", &file("unsigned.pbc")],
        &[("PROSE_TRUST", trust)],
        "not signed",
    );
    let configured = w.dir("configured");
    std::fs::write(
        configured.join("prose.toml"),
        format!("[trust]\nkeys = [\"{trust}\"]\n"),
    )
    .unwrap();
    let config = configured.join("prose.toml");
    refused(
        &[
            "exec",
            &file("unsigned.pbc"),
            "--config",
            config.to_str().unwrap(),
        ],
        &[],
        "not signed",
    );
    // A program compiled from source carries no signature either.
    refused(
        &["run", &file("hello.prose"), "--trust", trust],
        &[],
        "not signed",
    );

    // The signed one runs, and says who signed it.
    let ok_dir = w.dir("ok");
    let out = Run(w
        .command("prosevm", &ok_dir)
        .args(["exec", &file("signed.pbc"), "--trust", trust])
        .output()
        .expect("runs"));
    out.ok();
    assert!(out.stdout().contains("greeting: hi"), "{}", out.stdout());

    // `info --trust` gives exec's verdict, worded alike in text and JSON, with exec's exit
    // status: a damaged signature block is `altered`, not `unsigned`; a flipped byte is
    // `altered`, not a corrupt artifact.
    let unsigned = std::fs::read(dir.join("unsigned.pbc")).unwrap();
    std::fs::write(
        dir.join("damaged.pbc"),
        bytecode_spec::artifact::with_signature(&unsigned, "untrusted comment: x\nnot base64\n")
            .expect("framed"),
    )
    .unwrap();
    refused(
        &["exec", &file("damaged.pbc"), "--trust", trust],
        &[],
        "signature is damaged",
    );
    let info = |name: &str, json: bool| {
        let mut args = vec![
            "info".to_string(),
            file(name),
            "--trust".into(),
            trust.into(),
        ];
        if json {
            args.extend(["--format".into(), "json".into()]);
        }
        prosevm(
            &w,
            &ok_dir,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    };
    for (name, verdict) in [
        ("signed.pbc", "trusted"),
        ("unsigned.pbc", "unsigned"),
        ("foreign.pbc", "foreign"),
        ("altered.pbc", "altered"),
        ("forged.pbc", "altered"),
        ("damaged.pbc", "altered"),
    ] {
        let exit = if verdict == "trusted" { 0 } else { 2 };
        let text = info(name, false);
        assert_eq!(
            text.code(),
            exit,
            "{name}: {}{}",
            text.stdout(),
            text.stderr()
        );
        let json = info(name, true);
        assert_eq!(json.code(), exit, "{name}: {}", json.stdout());
        let doc: Value = serde_json::from_str(&json.stdout()).expect("json");
        if verdict == "altered" && name == "altered.pbc" {
            // The bytes no longer load: the refusal alone, as exec gives it.
            assert!(
                doc["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("altered"),
                "{doc}"
            );
            assert!(text.stderr().contains("altered"), "{}", text.stderr());
            continue;
        }
        assert_eq!(doc["signature"]["verdict"], verdict, "{name}: {doc}");
        let line = text
            .stdout()
            .lines()
            .find(|l| l.starts_with("signature "))
            .map(str::to_string)
            .unwrap_or_default();
        assert!(
            line.starts_with(&format!("signature {verdict}: ")),
            "{name}: {line}"
        );
        if exit == 2 {
            assert_eq!(doc["error"]["exit"], 2, "{name}: {doc}");
            assert!(text.stderr().contains("not trusted"), "{}", text.stderr());
        }
    }
}

/// Keys made by the real `minisign` (Debian's package) sign artifacts, unencrypted (`-W`)
/// ones included, and keys `prosec keygen` makes sign and verify with `minisign`: the formats
/// are minisign's both ways. Required on CI; skipped elsewhere when minisign is missing.
#[test]
fn minisign_keys_sign_artifacts_and_prosec_keys_work_in_minisign() {
    if std::process::Command::new("minisign")
        .arg("-v")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "minisign is needed on CI (Debian's package `minisign`)"
        );
        eprintln!("minisign not found: skipped");
        return;
    }
    let w = World::new("minisign");
    let dir = w.dir("p");
    std::fs::write(
        dir.join("w.prose"),
        "output greeting = session \"Say hi\"\n",
    )
    .unwrap();
    let minisign = |args: &[&str]| {
        let out = std::process::Command::new("minisign")
            .args(args)
            .current_dir(&dir)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("minisign runs");
        assert!(
            out.status.success(),
            "minisign {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    minisign(&["-G", "-W", "-p", "m.pub", "-s", "m.key"]);
    w.prosec(
        &dir,
        &["build", "w.prose", "-o", "m.pbc", "--sign", "m.key"],
    )
    .ok();
    let ran = prosevm(&w, &dir, &["exec", "m.pbc", "--trust", "m.pub"]);
    ran.ok();
    assert!(ran.stdout().contains("greeting:"), "{}", ran.stdout());
    // The other way: a key of `prosec keygen` signs and verifies a file with minisign.
    keygen(&w, &dir, "p");
    std::fs::write(dir.join("notes.txt"), "shipped").unwrap();
    minisign(&["-S", "-s", "p.key", "-m", "notes.txt"]);
    minisign(&["-V", "-p", "p.pub", "-m", "notes.txt"]);
}

#[test]
fn a_skill_no_place_has_is_a_warning_under_the_mock_and_a_located_error_otherwise() {
    let w = World::new("vm-missing-skill");
    let dir = w.dir("p");
    // Imported from a repository that cannot be reached (nothing is served for it).
    std::fs::write(
        dir.join("brief.prose"),
        "import \"web-search\" from \"github:nobody/nothing\"\n\nagent finder:\n  model: sonnet\n  skills: [\"web-search\"]\n\nlet found = session: finder\n  prompt: \"Find it\"\noutput found = found\n",
    )
    .unwrap();
    let out = Run(w
        .command("prosevm", &dir)
        .args(["run", "brief.prose"])
        .output()
        .expect("runs"));
    out.ok();
    let err = out.stderr();
    assert!(
        err.contains("warning: skill `web-search` not found") && err.contains("mock driver"),
        "{err}"
    );

    // Named but never imported, and installed nowhere: under a real driver, E219 at the
    // session that names it, with what to do, before anything is written.
    std::fs::write(
        dir.join("plain.prose"),
        "agent finder:\n  model: sonnet\n  skills: [\"web-search\"]\n\nlet found = session: finder\n  prompt: \"Find it\"\noutput found = found\n",
    )
    .unwrap();
    w.prosec(&dir, &["build", "plain.prose"]).ok();
    let run_dir = w.dir("elsewhere");
    let out = Run(w
        .command("prosevm", &run_dir)
        .args([
            "exec",
            dir.join("plain.pbc").to_str().unwrap(),
            "--driver",
            "command",
            "--command",
            "echo found",
        ])
        .output()
        .expect("runs"));
    assert_eq!(out.code(), 2, "{}", out.stderr());
    let err = out.stderr();
    assert!(
        err.contains("plain.prose:5: [E219] skill `web-search` not found"),
        "{err}"
    );
    assert!(err.contains("let found = session: finder"), "{err}");
    assert!(err.contains("help: import it"), "{err}");
    assert!(!run_dir.join(".prose").exists());
}

/// `cmd` run to its end, or `None` (and killed) when it takes longer than `limit`.
fn within(mut cmd: std::process::Command, limit: std::time::Duration) -> Option<Run> {
    use std::process::Stdio;
    let started = std::time::Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Some(Run(child.wait_with_output().expect("output")))
}

/// A `--trust` key that does not end (a device, a FIFO no one writes) or is far longer than
/// any key is refused at once by `info` and by `exec`, with an error naming the file and
/// what it is, rather than read until memory runs out or waited on for ever.
#[cfg(unix)]
#[test]
fn a_trust_key_that_does_not_end_is_refused_at_once() {
    let w = World::new("vm-trust-endless");
    let dir = w.dir("p");
    std::fs::write(dir.join("hello.prose"), "session \"Say hello\"\n").unwrap();
    w.prosec(&dir, &["build", "hello.prose"]).ok();
    let fifo = dir.join("key.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let long = dir.join("long.pub");
    std::fs::write(&long, "a".repeat(1 << 20)).unwrap();
    let limit = bytecode_spec::signature::MAX_KEY_FILE;
    for (key, what) in [
        (
            "/dev/zero",
            "is a character device, not a regular file".to_string(),
        ),
        (
            fifo.to_str().unwrap(),
            "is a FIFO, not a regular file".to_string(),
        ),
        (
            long.to_str().unwrap(),
            format!("is larger than {limit} bytes"),
        ),
    ] {
        for command in ["info", "exec"] {
            let mut cmd = w.command("prosevm", &dir);
            cmd.args([command, "hello.pbc", "--trust", key])
                .env_remove("PROSE_TRUST");
            let out = within(cmd, std::time::Duration::from_secs(30))
                .unwrap_or_else(|| panic!("`prosevm {command} --trust {key}` did not end"));
            assert_ne!(out.code(), 0, "{command} {key}: {}", out.stderr());
            assert!(
                out.stderr().contains(&format!("{key} {what}")),
                "{command} {key}:\n{}",
                out.stderr()
            );
        }
    }
}

/// `prosevm ARGS` in `cwd`, in world `w`, trusting nothing from the environment.
fn prosevm(w: &World, cwd: &Path, args: &[&str]) -> Run {
    Run(w
        .command("prosevm", cwd)
        .args(args)
        .env_remove("PROSE_TRUST")
        .output()
        .expect("runs"))
}

/// Asserts `out` is a refusal under `--trust` for reason `why`: exit status 2, and an error
/// saying so.
fn assert_refused(out: &Run, why: &str) {
    assert_eq!(out.code(), 2, "must be refused:\n{}", out.stderr());
    assert!(
        out.stderr().contains("refused to run") && out.stderr().contains(why),
        "expected a refusal for `{why}`:\n{}",
        out.stderr()
    );
}

/// The one run under `cwd`: its directory's `run.json`, and its journal (empty if none).
fn the_run(cwd: &Path) -> (Value, String) {
    let record = run_record(cwd);
    let id = record["id"].as_str().expect("id").to_string();
    let journal = std::fs::read_to_string(cwd.join(".prose/runs").join(id).join("journal.log"))
        .unwrap_or_default();
    (record, journal)
}

#[test]
fn resume_refuses_an_untrusted_run_an_altered_copy_and_an_edited_program() {
    let w = World::new("vm-trust-resume");
    let dir = w.dir("p");
    let public = signed_three_ways(&w, &dir, "output greeting = session \"Say hello\"\n");
    std::fs::write(
        dir.join("other.prose"),
        "output greeting = session \"Delete everything\"\n",
    )
    .unwrap();
    w.prosec(&dir, &["build", "other.prose", "-o", "other.pbc"])
        .ok();
    let trust = public.to_str().unwrap();
    // A run of artifact `name` (copied to its own directory as prog.pbc) that failed at its
    // one request: resumable.
    let failed_run = |case: &str, name: &str, trusted: bool| -> PathBuf {
        let cwd = w.dir(&format!("runs/{case}"));
        std::fs::copy(dir.join(name), cwd.join("prog.pbc")).unwrap();
        let mut args = vec![
            "exec",
            "prog.pbc",
            "--driver",
            "command",
            "--command",
            "exit 3",
            "--backoff-unit-ms",
            "1",
        ];
        if trusted {
            args.extend(["--trust", trust]);
        }
        let out = prosevm(&w, &cwd, &args);
        assert_eq!(
            out.code(),
            1,
            "{case}: the run must fail:\n{}",
            out.stderr()
        );
        assert_eq!(the_run(&cwd).0["status"], "failed");
        cwd
    };
    // A resume whose driver leaves a mark if it is ever asked anything.
    let resume = |cwd: &Path, extra: &[&str]| {
        let mark = cwd.join("asked");
        let command = format!("touch {}; echo hello", mark.display());
        let mut args = vec![
            "resume",
            "--driver",
            "command",
            "--command",
            command.as_str(),
            "--trust",
            trust,
        ];
        args.extend(extra);
        (prosevm(&w, cwd, &args), mark)
    };
    let refused = |cwd: &Path, extra: &[&str], why: &str| {
        let before = the_run(cwd);
        let (out, mark) = resume(cwd, extra);
        assert_refused(&out, why);
        assert!(!mark.exists(), "the driver was asked:\n{}", out.stderr());
        assert_eq!(the_run(cwd), before, "the refused resume changed the run");
    };

    // Started without trust, resumed under it: the run's artifact is checked.
    refused(
        &failed_run("unsigned", "unsigned.pbc", false),
        &[],
        "not signed",
    );
    refused(
        &failed_run("foreign", "foreign.pbc", false),
        &[],
        "which is not trusted",
    );
    // The store's copy of a signed artifact, altered after the run started.
    let cwd = failed_run("altered", "signed.pbc", true);
    let id = the_run(&cwd).0["id"].as_str().unwrap().to_string();
    let copy = cwd.join(".prose/runs").join(&id).join("artifact.pbc");
    std::fs::write(&copy, altered(&std::fs::read(&copy).unwrap())).unwrap();
    refused(&cwd, &[], "altered");
    // The program replaced by an unsigned one: resumed as an edit (--force), it is the new
    // program that would run, and it is not signed.
    let cwd = failed_run("edited", "signed.pbc", true);
    std::fs::copy(dir.join("other.pbc"), cwd.join("prog.pbc")).unwrap();
    refused(&cwd, &["--force"], "not signed");

    // The same resume of a signed run goes on, and asks the driver.
    let cwd = failed_run("signed", "signed.pbc", true);
    let (out, mark) = resume(&cwd, &[]);
    out.ok();
    assert!(mark.exists());
    assert!(out.stdout().contains("greeting: hello"), "{}", out.stdout());
}

#[test]
fn submit_and_a_worker_refuse_untrusted_artifacts() {
    let Some(url) = support::pg::database("ship_trust") else {
        return;
    };
    let w = World::new("vm-trust-queue");
    let dir = w.dir("p");
    let public = signed_three_ways(&w, &dir, "output greeting = session \"Say hello\"\n");
    let trust = public.to_str().unwrap();
    let asked = dir.join("asked.log");
    let command = format!(
        "echo \"$PROSE_REQUEST_ID\" >> {}; echo hello",
        asked.display()
    );
    let submit = |name: &str, extra: &[&str]| {
        let file = dir.join(name);
        let mut args = vec![
            "submit",
            file.to_str().unwrap(),
            "--store",
            url.as_str(),
            "--driver",
            "command",
            "--command",
            command.as_str(),
        ];
        args.extend(extra);
        prosevm(&w, &dir, &args)
    };
    let listed = || {
        let out = prosevm(&w, &dir, &["runs", "--json", "--store", &url]);
        out.ok();
        serde_json::from_str::<Vec<Value>>(&out.stdout()).expect("json")
    };

    // Submit checks before anything reaches the store.
    assert_refused(&submit("unsigned.pbc", &["--trust", trust]), "not signed");
    assert_refused(
        &submit("foreign.pbc", &["--trust", trust]),
        "which is not trusted",
    );
    assert_eq!(listed(), Vec::<Value>::new(), "a refused run was queued");
    // A key that cannot be read is no trust at all.
    let out = submit("signed.pbc", &["--trust", "missing.pub"]);
    assert_eq!(out.code(), 2, "{}", out.stderr());
    assert!(out.stderr().contains("missing.pub"), "{}", out.stderr());

    // Queued by a submitter that trusts nothing; the worker trusts one key.
    let mut ids = std::collections::BTreeMap::new();
    for name in ["unsigned.pbc", "foreign.pbc", "signed.pbc"] {
        let out = submit(name, &[]);
        out.ok();
        ids.insert(out.stdout().trim().to_string(), name);
    }
    let worker = prosevm(
        &w,
        &dir,
        &[
            "worker",
            "--store",
            &url,
            "--exit-when-idle",
            "--poll-ms",
            "50",
            "--trust",
            trust,
        ],
    );
    worker.ok();
    let said = worker.stderr();
    let runs = listed();
    assert_eq!(runs.len(), 3, "{runs:?}");
    for run in &runs {
        let id = run["id"].as_str().unwrap();
        let name = ids[id];
        let (status, why) = match name {
            "signed.pbc" => ("finished", None),
            "unsigned.pbc" => ("failed", Some("not signed")),
            _ => ("failed", Some("which is not trusted")),
        };
        assert_eq!(run["status"], status, "{name}: {run}");
        if let Some(why) = why {
            let error = run["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("refused to run") && error.contains(why),
                "{name}: {run}"
            );
            assert!(
                said.contains(&format!("[worker] run {id} failed: refused to run")),
                "{said}"
            );
            assert_eq!(run["answered"], 0, "{name}: {run}");
        }
    }
    // Only the signed run's one request reached the driver.
    let asked = std::fs::read_to_string(&asked).unwrap_or_default();
    assert_eq!(asked.lines().count(), 1, "{asked}");
}

#[test]
fn the_examples_that_import_skills_run_under_the_mock_for_a_new_user() {
    let mut w = World::new("vm-examples");
    // Nothing is installed or cached for this user, and no source could be reached: the
    // repository is not behind the world's `insteadOf`, the registry serves nothing.
    let npm = Server::start();
    w.env.push(("npm_config_registry".into(), npm.url.clone()));
    let checkout = w.dir("checkout");
    let examples = checkout.join("examples");
    std::fs::create_dir_all(&examples).unwrap();
    for name in ["research-brief.prose", "code-review.prose"] {
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../examples")
                .join(name),
            examples.join(name),
        )
        .unwrap();
    }
    for (name, skill, outputs) in [
        (
            "research-brief",
            "web-search",
            &["brief", "bibliography"][..],
        ),
        ("code-review", "lint-explainer", &["review"][..]),
    ] {
        let file = format!("examples/{name}.prose");
        let out = Run(w
            .command("prosevm", &checkout)
            .args(["run", &file, "--mock-inputs"])
            .env_remove("PROSE_TRUST")
            .env_remove("PROSE_STORE")
            .output()
            .expect("runs"));
        out.ok();
        let err = out.stderr();
        assert!(
            err.contains(&format!("warning: skill `{skill}` not found"))
                && err.contains("mock driver"),
            "{name}:\n{err}"
        );
        let stdout = out.stdout();
        for o in outputs {
            assert!(
                stdout.lines().any(|l| l.starts_with(&format!("{o}: "))),
                "{name}: no output `{o}`:\n{stdout}"
            );
        }
    }
    assert!(
        npm.paths().is_empty(),
        "a dry run asked the registry: {:?}",
        npm.paths()
    );
    assert!(!examples.join("prose.lock").exists());
}

#[test]
fn a_program_run_from_elsewhere_finds_each_local_skill_beside_the_file_importing_it() {
    let w = World::new("vm-relative");
    let (_, cwd) = ship_support::relative_layout(&w);
    let (url, seen) = provider::provider(vec![provider::ok("Polished."), provider::ok("Written.")]);
    let out = Run(w
        .command("prosevm", &cwd)
        .args(["run", "../../a/project/main.prose", "--driver", "openai"])
        .args(["--base-url", &url, "--no-input"])
        .env("OPENAI_API_KEY", "sk-test")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_MODEL")
        .env_remove("PROSE_TRUST")
        .env_remove("PROSE_STORE")
        .output()
        .expect("runs"));
    out.ok();
    assert!(out.stdout().contains("r: Written."), "{}", out.stdout());
    let systems = system_prompts(&seen.lock().unwrap());
    assert_eq!(systems.len(), 2, "{systems:?}");
    // The module's session first (the call), then the program's.
    assert!(
        systems[0].contains(TONE) && !systems[0].contains(NOTES),
        "{systems:?}"
    );
    assert!(
        systems[1].contains(NOTES) && !systems[1].contains(TONE),
        "{systems:?}"
    );
    assert!(!systems.iter().any(|s| s.contains("WRONG")), "{systems:?}");
}
