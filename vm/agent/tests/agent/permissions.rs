//! Every way out of the sandbox is refused with a reason; bash, network, prompts, user
//! allowances and execute patterns decide as documented.

use std::fs;
use std::os::unix::fs::symlink;

use prose_agent::confine::Kind;
use prose_agent::people::NoPrompter;
use prose_agent::permissions::{Action, Policy, Sandbox, UserAllow};
use prose_agent::protected::Protected;
use prose_machine::protocol::{Capability, PromptAnswer};
use serde_json::json;

use super::{call, err, ok, rules, sandbox, sandbox_in, Scripted};
use crate::support::{confinements, scratch};

/// A working directory `work` beside a directory `outside` holding `secret.txt`.
fn world(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let root = scratch(name);
    let work = root.join("work");
    let outside = root.join("outside");
    fs::create_dir_all(&work).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.txt"), "top secret\n").unwrap();
    (work, outside)
}

#[tokio::test]
async fn dot_dot_is_refused_for_every_tool() {
    let (work, outside) = world("agent-dotdot");
    fs::create_dir(work.join("sub")).unwrap();
    let sb = sandbox(&work, &[], UserAllow::default());
    let read = call(&sb, "read_file", json!({"path": "../outside/secret.txt"})).await;
    assert!(
        err(&read).contains("`..` is not allowed"),
        "{}",
        read.output.content
    );
    assert!(!read.output.content.contains("top secret"));
    let sneaky = call(
        &sb,
        "read_file",
        json!({"path": "sub/../../outside/secret.txt"}),
    )
    .await;
    assert!(err(&sneaky).contains("`..` is not allowed"));
    let write = call(
        &sb,
        "write_file",
        json!({"path": "../outside/new.txt", "content": "x"}),
    )
    .await;
    assert!(err(&write).contains("permission denied: writing `../outside/new.txt`"));
    assert!(!outside.join("new.txt").exists());
    let edit = call(
        &sb,
        "edit_file",
        json!({"path": "../outside/secret.txt", "old_string": "top", "new_string": "no"}),
    )
    .await;
    err(&edit);
    assert_eq!(
        fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "top secret\n"
    );
    let grep = call(&sb, "grep", json!({"pattern": "secret", "path": ".."})).await;
    assert!(err(&grep).contains("`..` is not allowed"));
    assert_eq!(read.decisions.len(), 1);
    assert!(!read.decisions[0].allowed);
    assert_eq!(read.decisions[0].action, Action::Read);
}

#[tokio::test]
async fn absolute_paths_only_inside_the_working_directory() {
    let (work, outside) = world("agent-absolute");
    fs::write(work.join("mine.txt"), "mine\n").unwrap();
    let sb = sandbox(&work, &[], UserAllow::default());
    let secret = outside.join("secret.txt");
    let r = call(&sb, "read_file", json!({"path": secret.to_str().unwrap()})).await;
    assert!(err(&r).contains("is an absolute path outside the working directory"));
    let r = call(&sb, "read_file", json!({"path": "/etc/passwd"})).await;
    err(&r);
    let target = outside.join("planted.txt");
    let r = call(
        &sb,
        "write_file",
        json!({"path": target.to_str().unwrap(), "content": "x"}),
    )
    .await;
    err(&r);
    assert!(!target.exists());
    let inside = work.join("mine.txt");
    let r = call(&sb, "read_file", json!({"path": inside.to_str().unwrap()})).await;
    assert!(ok(&r).contains("mine"));
}

#[tokio::test]
async fn symlinks_leading_out_are_refused_for_reading_and_writing() {
    let (work, outside) = world("agent-symlink");
    symlink(outside.join("secret.txt"), work.join("link.txt")).unwrap();
    symlink(&outside, work.join("linkdir")).unwrap();
    symlink(outside.join("not-yet.txt"), work.join("dangling.txt")).unwrap();
    fs::write(work.join("real.txt"), "real\n").unwrap();
    symlink(work.join("real.txt"), work.join("inner-link.txt")).unwrap();
    let sb = sandbox(&work, &[], UserAllow::default());

    let r = call(&sb, "read_file", json!({"path": "link.txt"})).await;
    assert!(err(&r).contains("leads outside the working directory through a symbolic link"));
    assert!(!r.output.content.contains("top secret"));
    let r = call(&sb, "read_file", json!({"path": "linkdir/secret.txt"})).await;
    err(&r);
    let r = call(
        &sb,
        "write_file",
        json!({"path": "link.txt", "content": "owned"}),
    )
    .await;
    err(&r);
    assert_eq!(
        fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "top secret\n"
    );
    let r = call(
        &sb,
        "write_file",
        json!({"path": "linkdir/new.txt", "content": "owned"}),
    )
    .await;
    assert!(err(&r).contains("symbolic link"), "{}", r.output.content);
    assert!(
        !outside.join("new.txt").exists(),
        "nothing created through the linked directory"
    );
    let r = call(
        &sb,
        "write_file",
        json!({"path": "linkdir/deeper/new.txt", "content": "x"}),
    )
    .await;
    err(&r);
    assert!(!outside.join("deeper").exists());
    let r = call(
        &sb,
        "write_file",
        json!({"path": "dangling.txt", "content": "owned"}),
    )
    .await;
    err(&r);
    assert!(
        !outside.join("not-yet.txt").exists(),
        "a dangling link is not written through"
    );
    let r = call(
        &sb,
        "edit_file",
        json!({"path": "link.txt", "old_string": "top", "new_string": "no"}),
    )
    .await;
    err(&r);

    let listed = call(&sb, "list_files", json!({"pattern": "**"})).await;
    let listed: Vec<&str> = ok(&listed).lines().collect();
    assert_eq!(
        listed,
        ["inner-link.txt", "real.txt"],
        "links leading out are not listed"
    );
    let grep = call(&sb, "grep", json!({"pattern": "secret"})).await;
    assert_eq!(ok(&grep), "No matches for `secret`.");

    let r = call(&sb, "read_file", json!({"path": "inner-link.txt"})).await;
    assert!(ok(&r).contains("real"), "a link staying inside is fine");
}

#[tokio::test]
async fn prose_state_is_never_readable_or_writable() {
    let (work, _) = world("agent-state");
    fs::create_dir_all(work.join(".prose/runs/r1")).unwrap();
    fs::write(work.join(".prose/runs/r1/journal.log"), "answers\n").unwrap();
    symlink(work.join(".prose"), work.join("state")).unwrap();
    let sb = sandbox(
        &work,
        &[("read", &["**"]), ("write", &["**"])],
        UserAllow::default(),
    );
    for path in [
        ".prose/runs/r1/journal.log".to_string(),
        "./.prose/runs/r1/journal.log".to_string(),
        "state/runs/r1/journal.log".to_string(),
        work.join(".prose/runs/r1/journal.log")
            .to_string_lossy()
            .into_owned(),
    ] {
        let r = call(&sb, "read_file", json!({"path": path})).await;
        assert!(
            err(&r).contains("`.prose/` holds the VM's run state"),
            "{path}: {}",
            r.output.content
        );
        let r = call(
            &sb,
            "write_file",
            json!({"path": path, "content": "forged"}),
        )
        .await;
        err(&r);
    }
    let r = call(
        &sb,
        "write_file",
        json!({"path": ".prose/skills/x/SKILL.md", "content": "x"}),
    )
    .await;
    err(&r);
    assert_eq!(
        fs::read_to_string(work.join(".prose/runs/r1/journal.log")).unwrap(),
        "answers\n"
    );
    assert!(!work.join(".prose/skills").exists());
}

#[tokio::test]
async fn protected_places_are_refused_whatever_the_policy_says() {
    let (work, _) = world("agent-protected");
    fs::create_dir_all(work.join("state/runs/r1")).unwrap();
    fs::write(work.join("state/runs/r1/journal.log"), "answers\n").unwrap();
    fs::write(work.join("prog.prose"), "session \"x\"\n").unwrap();
    fs::write(work.join("prose.toml"), "max_turns = 3\n").unwrap();
    fs::create_dir_all(work.join(".git")).unwrap();
    symlink(work.join("state"), work.join("alias")).unwrap();
    let protected = Protected::new()
        .state_dir(&work.join("state"))
        .program_file(&work.join("prog.prose"));
    let sb = Sandbox::builder(&work)
        .policy(Policy::from_rules(&rules(&[("read", &["**"]), ("write", &["**"])])).unwrap())
        .protect(protected)
        .build()
        .unwrap();
    for path in ["state/runs/r1/journal.log", "alias/runs/r1/journal.log"] {
        let r = call(&sb, "read_file", json!({"path": path})).await;
        assert!(
            err(&r).contains("state directory"),
            "{path}: {}",
            r.output.content
        );
        let r = call(
            &sb,
            "write_file",
            json!({"path": path, "content": "forged"}),
        )
        .await;
        assert!(
            err(&r).contains("state directory"),
            "{path}: {}",
            r.output.content
        );
    }
    for (path, why) in [
        ("prose.toml", "later runs"),
        ("deep/prose.toml", "later runs"),
        (".git/config", "git"),
        ("nested/.git/hooks/post-checkout", "git"),
        ("prog.prose", "program's own files"),
    ] {
        let r = call(&sb, "write_file", json!({"path": path, "content": "x"})).await;
        assert!(err(&r).contains(why), "{path}: {}", r.output.content);
    }
    assert!(!work.join("deep").exists() && !work.join("nested").exists());
    assert_eq!(
        fs::read_to_string(work.join("prose.toml")).unwrap(),
        "max_turns = 3\n"
    );
    ok(&call(&sb, "read_file", json!({"path": "prose.toml"})).await);
    ok(&call(&sb, "read_file", json!({"path": "prog.prose"})).await);
    let grep = call(&sb, "grep", json!({"pattern": "answers"})).await;
    assert_eq!(ok(&grep), "No matches for `answers`.");
    assert_eq!(
        fs::read_to_string(work.join("state/runs/r1/journal.log")).unwrap(),
        "answers\n"
    );
}

#[tokio::test]
async fn write_globs_bound_writes_and_name_the_rule() {
    let (work, _) = world("agent-globs");
    let sb = sandbox(
        &work,
        &[("read", &["*.md", "*.txt"]), ("write", &["output/"])],
        UserAllow::default(),
    );
    let r = call(
        &sb,
        "write_file",
        json!({"path": "output/report.md", "content": "# ok"}),
    )
    .await;
    ok(&r);
    assert!(r.decisions[0].reason.contains("write rule \"output/\""));
    assert_eq!(
        fs::read_to_string(work.join("output/report.md")).unwrap(),
        "# ok"
    );
    let r = call(
        &sb,
        "write_file",
        json!({"path": "src/main.rs", "content": "fn main() {}"}),
    )
    .await;
    let msg = err(&r);
    assert!(
        msg.contains("matches none of the agent's write patterns [\"output/\"]"),
        "{msg}"
    );
    assert!(!work.join("src").exists());
    assert!(!r.decisions[0].allowed);
    let r = call(
        &sb,
        "write_file",
        json!({"path": "notes/output/x.md", "content": "x"}),
    )
    .await;
    err(&r);
    let r = call(&sb, "read_file", json!({"path": "output/report.md"})).await;
    ok(&r);
    fs::write(work.join("run.sh"), "echo\n").unwrap();
    let r = call(&sb, "read_file", json!({"path": "run.sh"})).await;
    assert!(err(&r).contains("read patterns [\"*.md\", \"*.txt\"]"));
}

#[tokio::test]
async fn bash_and_network_are_off_by_default_and_user_allowances_turn_them_on() {
    let (work, _) = world("agent-defaults");
    // Commands write below the top of the working directory, where they can under either
    // confinement (under Landlock nothing is made at the top).
    fs::create_dir(work.join("out")).unwrap();
    let sb = sandbox(&work, &[], UserAllow::default());
    let r = call(&sb, "bash", json!({"command": "touch out/made-it"})).await;
    let msg = err(&r);
    assert!(msg.contains("bash is off by default"), "{msg}");
    assert!(msg.contains("--allow bash"));
    assert!(!work.join("out/made-it").exists());
    assert_eq!(r.decisions[0].action, Action::Bash);
    let r = call(&sb, "web_fetch", json!({"url": "http://127.0.0.1:9/"})).await;
    assert!(err(&r).contains("network is off by default"));
    assert_eq!(r.decisions[0].action, Action::Network);

    let user = UserAllow {
        bash: true,
        network: false,
        ..Default::default()
    };
    let sb = sandbox(&work, &[], user);
    let r = call(&sb, "bash", json!({"command": "touch out/made-it"})).await;
    ok(&r);
    assert!(work.join("out/made-it").exists());
    assert!(r.decisions[0].reason.contains("the user allowed bash"));

    let sb = sandbox(
        &work,
        &[("bash", &["deny"])],
        UserAllow {
            bash: true,
            network: true,
            ..Default::default()
        },
    );
    let r = call(&sb, "bash", json!({"command": "touch out/denied"})).await;
    assert!(err(&r).contains("`bash: deny` in the agent's permissions"));
    assert!(
        !work.join("out/denied").exists(),
        "an explicit deny beats the user's allowance"
    );
    let sb = sandbox(
        &work,
        &[("network", &["deny"])],
        UserAllow {
            bash: true,
            network: true,
            ..Default::default()
        },
    );
    let r = call(&sb, "web_fetch", json!({"url": "http://127.0.0.1:9/"})).await;
    assert!(err(&r).contains("`network: deny`"));
}

#[tokio::test]
async fn prompt_with_no_one_to_ask_is_refused_unless_the_user_allowed_it() {
    let (work, _) = world("agent-prompt-none");
    fs::create_dir(work.join("out")).unwrap();
    let policy = Policy::from_rules(&rules(&[("bash", &["prompt"])])).unwrap();
    let sb = Sandbox::builder(&work)
        .policy(policy.clone())
        .prompter(std::sync::Arc::new(NoPrompter))
        .build()
        .unwrap();
    let r = call(&sb, "bash", json!({"command": "touch out/asked"})).await;
    assert!(err(&r).contains("there is no one to ask"));
    assert!(!work.join("out/asked").exists());

    let never = Scripted::new(|_| panic!("must not be asked"));
    let sb = Sandbox::builder(&work)
        .policy(policy)
        .user(UserAllow {
            bash: true,
            network: false,
            ..Default::default()
        })
        .prompter(never.clone())
        .build()
        .unwrap();
    let r = call(&sb, "bash", json!({"command": "touch out/allowed"})).await;
    ok(&r);
    assert!(work.join("out/allowed").exists());
    assert_eq!(
        never.count(),
        0,
        "the user's allowance answers prompt without asking"
    );
}

#[tokio::test]
async fn prompt_answers_yes_no_and_always_remembered_for_the_session() {
    let (work, _) = world("agent-prompt");
    fs::create_dir(work.join("out")).unwrap();
    let policy =
        Policy::from_rules(&rules(&[("bash", &["prompt"]), ("network", &["prompt"])])).unwrap();
    let always = Scripted::new(|q| match q.capability {
        Capability::Bash => Some(PromptAnswer::Always),
        Capability::Network => Some(PromptAnswer::No),
    });
    let sb = Sandbox::builder(&work)
        .policy(policy.clone())
        .agent("builder")
        .prompter(always.clone())
        .build()
        .unwrap();
    let r = call(&sb, "bash", json!({"command": "touch out/one"})).await;
    ok(&r);
    assert!(r.decisions[0].reason.contains("a person said always"));
    let r = call(&sb, "bash", json!({"command": "touch out/two"})).await;
    ok(&r);
    assert!(r.decisions[0]
        .reason
        .contains("answered \"always\" earlier"));
    assert!(work.join("out/one").exists() && work.join("out/two").exists());
    assert_eq!(always.count(), 1, "always is remembered");
    {
        let asked = always.asked.lock().unwrap();
        assert_eq!(asked[0].agent.as_deref(), Some("builder"));
        assert_eq!(asked[0].detail, "touch out/one");
        assert!(asked[0]
            .text()
            .contains("Agent `builder` wants to run a shell command"));
    }
    let r = call(&sb, "web_fetch", json!({"url": "http://127.0.0.1:9/"})).await;
    assert!(err(&r).contains("`network: prompt`, and a person said no"));
    assert_eq!(always.count(), 2, "always holds for bash only");

    // A new session asks again.
    let sb2 = Sandbox::builder(&work)
        .policy(policy.clone())
        .prompter(always.clone())
        .build()
        .unwrap();
    ok(&call(&sb2, "bash", json!({"command": "true"})).await);
    assert_eq!(always.count(), 3);

    let yes = Scripted::new(|_| Some(PromptAnswer::Yes));
    let sb = Sandbox::builder(&work)
        .policy(policy)
        .prompter(yes.clone())
        .build()
        .unwrap();
    ok(&call(&sb, "bash", json!({"command": "true"})).await);
    ok(&call(&sb, "bash", json!({"command": "true"})).await);
    assert_eq!(yes.count(), 2, "yes is for one call");
}

/// Under each confinement: a file an `execute` pattern grants runs in the sandbox, and
/// nothing else does.
#[tokio::test]
async fn execute_patterns_run_matching_files_without_bash() {
    for kind in confinements() {
        let (work, _) = world(&format!("agent-execute-{}", kind.name()));
        fs::create_dir(work.join("scripts")).unwrap();
        fs::create_dir(work.join("out")).unwrap();
        let script = work.join("scripts/hello.sh");
        fs::write(&script, "#!/bin/sh\necho hello \"$1\" > out/greeted.txt\n").unwrap();
        fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        fs::write(work.join("other.sh"), "#!/bin/sh\ntouch out/other-ran\n").unwrap();
        fs::set_permissions(
            work.join("other.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let sb = sandbox_in(
            &work,
            &[("execute", &["scripts/*.sh"]), ("bash", &["deny"])],
            UserAllow::default(),
            kind,
        );
        let r = call(&sb, "bash", json!({"command": "./scripts/hello.sh world"})).await;
        ok(&r);
        assert!(r.decisions[0]
            .reason
            .contains("execute rule \"scripts/*.sh\""));
        assert_eq!(
            fs::read_to_string(work.join("out/greeted.txt")).unwrap(),
            "hello world\n",
            "{kind:?}"
        );

        let r = call(
            &sb,
            "bash",
            json!({"command": "./scripts/hello.sh x; touch out/pwned"}),
        )
        .await;
        let msg = err(&r);
        assert!(
            msg.contains("`bash: deny`") && msg.contains("metacharacter ';'"),
            "{msg}"
        );
        assert!(!work.join("out/pwned").exists());
        let r = call(&sb, "bash", json!({"command": "sh scripts/hello.sh"})).await;
        assert!(err(&r).contains("not written as a path"));
        let r = call(&sb, "bash", json!({"command": "./other.sh"})).await;
        assert!(err(&r).contains("matches none of them"));
        assert!(!work.join("out/other-ran").exists());
        let r = call(&sb, "bash", json!({"command": "./scripts/../other.sh"})).await;
        err(&r);
        assert!(!work.join("out/other-ran").exists());
    }
}

#[tokio::test]
async fn a_bad_policy_is_an_error_naming_the_kind() {
    let err = Policy::from_rules(&rules(&[("read", &["*.md"]), ("delete", &["*"])])).unwrap_err();
    assert!(err.to_string().contains("unknown permission kind `delete`"));
    let err = Policy::from_rules(&rules(&[("network", &["maybe"])])).unwrap_err();
    assert!(err
        .to_string()
        .contains("`network` takes one of allow, deny, prompt; got `maybe`"));
    assert!(Sandbox::builder("/no/such/dir/anywhere").build().is_err());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    /// Whatever path a model makes up, a path the sandbox hands out is inside the working
    /// directory (and not in `.prose/`) or inside a skill's directory, and nothing panics.
    #[test]
    fn checked_paths_never_leave_the_sandbox(
        parts in proptest::collection::vec(
            proptest::sample::select(vec![
                "..", ".", "", "a", "b.md", "link", "linkdir", "dangling", ".prose", "runs",
                "skill", "escape", "new", "é", "a\\b", "*", "/", "//",
            ]),
            0..6,
        ),
        absolute in proptest::prelude::any::<bool>(),
        via_skill in proptest::prelude::any::<bool>(),
    ) {
        let fx = fixture();
        let mut path = if via_skill {
            fx.skill_dir.to_string_lossy().into_owned()
        } else if absolute {
            fx.work.to_string_lossy().into_owned()
        } else {
            String::new()
        };
        for p in &parts {
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(p);
        }
        let results = [
            fx.sandbox.check_read(&path),
            fx.sandbox.check_write(&path),
            fx.sandbox.check_search(&path),
        ];
        for checked in results.into_iter().flatten() {
            let p = checked.path();
            let inside = p.starts_with(&fx.work) && !p.starts_with(fx.work.join(".prose"));
            let in_skill = p.starts_with(&fx.skill_dir);
            proptest::prop_assert!(inside || in_skill, "{path:?} gave {}", p.display());
            proptest::prop_assert!(!p.components().any(|c| c == std::path::Component::ParentDir));
        }
        if let Ok(checked) = fx.sandbox.check_write(&path) {
            proptest::prop_assert!(!checked.path().starts_with(&fx.skill_dir), "skills are read-only");
        }
    }
}

struct Fixture {
    work: std::path::PathBuf,
    skill_dir: std::path::PathBuf,
    sandbox: Sandbox,
}

/// A working directory with links in and out, a `.prose/`, and a skill outside it; made once.
fn fixture() -> &'static Fixture {
    static FIXTURE: std::sync::OnceLock<Fixture> = std::sync::OnceLock::new();
    FIXTURE.get_or_init(|| {
        let (work, outside) = world("agent-proptest");
        fs::create_dir_all(work.join(".prose/runs")).unwrap();
        fs::create_dir_all(work.join("a")).unwrap();
        fs::write(work.join("b.md"), "b").unwrap();
        symlink(outside.join("secret.txt"), work.join("link")).unwrap();
        symlink(&outside, work.join("linkdir")).unwrap();
        symlink(outside.join("nothing"), work.join("dangling")).unwrap();
        let skill_dir = outside.join("skill");
        fs::create_dir_all(&skill_dir).unwrap();
        fs::write(
            skill_dir.join("SKILL.md"),
            "---\nname: skill\ndescription: d\n---\n",
        )
        .unwrap();
        symlink(outside.join("secret.txt"), skill_dir.join("escape")).unwrap();
        let skill = prose_agent::skills::SkillSearch::new(&outside, outside.join(".prose"))
            .with_user_dir(None)
            .find("skill")
            .unwrap();
        let sandbox = Sandbox::builder(&work).skill(&skill).build().unwrap();
        Fixture {
            work: work.canonicalize().unwrap(),
            skill_dir: skill.dir.clone(),
            sandbox,
        }
    })
}

/// Escape 7 of the attack sweep, first half: a hard link inside the working directory to a
/// file outside is the same file under another name, so path checks cannot see it.
/// The second name is given by a command, under each confinement.
#[tokio::test]
async fn hard_links_to_files_the_session_did_not_create_are_refused() {
    for kind in confinements() {
        hard_links_under(kind).await;
    }
}

async fn hard_links_under(kind: Kind) {
    let (work, outside) = world(&format!("agent-hardlink-{}", kind.name()));
    fs::hard_link(outside.join("secret.txt"), work.join("planted.txt")).unwrap();
    fs::create_dir(work.join("d")).unwrap();
    let sb = sandbox_in(&work, &[("bash", &["allow"])], UserAllow::default(), kind);
    let r = call(&sb, "read_file", json!({"path": "planted.txt"})).await;
    assert!(err(&r).contains("hard links"), "{}", r.output.content);
    assert!(!r.output.content.contains("top secret"));
    let r = call(
        &sb,
        "write_file",
        json!({"path": "planted.txt", "content": "owned"}),
    )
    .await;
    assert!(err(&r).contains("hard links"), "{}", r.output.content);
    let r = call(
        &sb,
        "edit_file",
        json!({"path": "planted.txt", "old_string": "top", "new_string": "owned"}),
    )
    .await;
    assert!(err(&r).contains("hard links"), "{}", r.output.content);
    let r = call(&sb, "grep", json!({"pattern": "secret"})).await;
    assert_eq!(ok(&r), "No matches for `secret`.");
    let r = call(
        &sb,
        "grep",
        json!({"pattern": "secret", "path": "planted.txt"}),
    )
    .await;
    assert!(err(&r).contains("hard links"), "{}", r.output.content);
    assert_eq!(
        fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "top secret\n"
    );
    // A file this session made keeps working under a second name it gave it.
    ok(&call(
        &sb,
        "write_file",
        json!({"path": "d/mine.txt", "content": "mine\n"}),
    )
    .await);
    ok(&call(&sb, "bash", json!({"command": "ln d/mine.txt d/alias.txt"})).await);
    // A command cannot give one outside a second name inside: bubblewrap's mounts and
    // Landlock's rules each refuse a link from a place the command may only read.
    let r = call(
        &sb,
        "bash",
        json!({"command": format!("ln {} d/stolen.txt", outside.join("secret.txt").display())}),
    )
    .await;
    err(&r);
    assert!(!work.join("d/stolen.txt").exists(), "{kind:?}");
    let r = call(&sb, "read_file", json!({"path": "d/alias.txt"})).await;
    assert!(ok(&r).contains("mine"));
    ok(&call(
        &sb,
        "write_file",
        json!({"path": "d/alias.txt", "content": "still mine\n"}),
    )
    .await);
    assert_eq!(
        fs::read_to_string(work.join("d/mine.txt")).unwrap(),
        "still mine\n"
    );
    // Another session did not make it.
    let other = sandbox(&work, &[], UserAllow::default());
    let r = call(&other, "read_file", json!({"path": "d/alias.txt"})).await;
    assert!(err(&r).contains("hard links"), "{}", r.output.content);
}

/// Escape 7, second half: a loop swapping a directory for a symbolic link to the outside
/// while `write_file` and `read_file` are called. Whatever the timing, nothing outside is
/// written or read.
#[tokio::test]
async fn a_link_swapped_in_between_check_and_use_leads_nowhere() {
    let (work, outside) = world("agent-swap");
    fs::create_dir(work.join("d")).unwrap();
    fs::write(work.join("d/secret.txt"), "inside\n").unwrap();
    symlink(&outside, work.join("alt")).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // `d` is always there, a directory or a link to the outside in turn: the two names are
    // exchanged atomically (renameat2 with RENAME_EXCHANGE).
    let swapper = {
        let (work, stop) = (work.clone(), stop.clone());
        std::thread::spawn(move || {
            use std::os::unix::ffi::OsStrExt;
            let c =
                |p: std::path::PathBuf| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
            let (d, alt) = (c(work.join("d")), c(work.join("alt")));
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // SAFETY: two valid C strings naming paths; renameat2 has no other
                // preconditions.
                let done = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        d.as_ptr(),
                        libc::AT_FDCWD,
                        alt.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                assert_eq!(done, 0, "{}", std::io::Error::last_os_error());
                swaps += 1;
            }
            swaps
        })
    };
    let sb = sandbox(&work, &[], UserAllow::default());
    let mut written = 0;
    let mut read_inside = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
    while std::time::Instant::now() < deadline {
        let w = call(
            &sb,
            "write_file",
            json!({"path": "d/planted.txt", "content": "planted\n"}),
        )
        .await;
        written += usize::from(!w.output.is_error);
        let r = call(&sb, "read_file", json!({"path": "d/secret.txt"})).await;
        assert!(
            !r.output.content.contains("top secret"),
            "read outside through a swapped link: {}",
            r.output.content
        );
        read_inside += usize::from(r.output.content.contains("inside"));
        assert!(
            !outside.join("planted.txt").exists(),
            "wrote outside through a swapped link"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 100, "the swapper ran {swaps} times");
    assert!(
        written + read_inside > 0,
        "some calls landed while `d` was the real directory"
    );
}
