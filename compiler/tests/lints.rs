//! Lint levels: the defaults, `--strict`, `--allow`/`--warn`/`--deny`, the `[lints]` table
//! of the nearest `prose.toml`, and `# prose: allow(...)` comments.

use prosec::compile::{Compilation, Options};
use prosec::diagnostics::{Code, Severity};
use prosec::lints::Level;
use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lints-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `(code, severity, line)` of the diagnostics of `file`, checked with `options`.
fn check(file: &Path, options: Options) -> Vec<(Code, Severity, u32)> {
    let mut c = Compilation::new(options);
    c.add_file(file).expect("readable");
    c.diagnostics
        .iter()
        .map(|d| {
            let line = c.sources.get(d.file).line_col(d.span.start as usize).line;
            (d.code, d.severity, line)
        })
        .collect()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
    std::fs::write(&path, text).expect("write");
    path
}

/// Placeholder text (E140), a mid-program input (E022), a parameter named like a program
/// variable (W104) and a conditional loop without max (W108).
const NOISY: &str = "session \"Fill {placeholder}\"\ninput later: \"Asked now\"\nlet topic = \"x\"\nblock b(topic):\n  session \"On {topic}\"\nloop until **the work is done**:\n  session \"Work\"\n";

use Code::*;
use Severity::*;

#[test]
fn defaults_report_only_warnings_worth_acting_on() {
    let dir = scratch("defaults");
    let f = write(&dir, "p.prose", NOISY);
    assert_eq!(check(&f, Options::default()), [(W108, Warning, 6)]);
    // `--strict`: the reference's rules; W104 stays silent (it is not a relaxed rule).
    let strict = Options {
        strict: true,
        ..Options::default()
    };
    assert_eq!(
        check(&f, strict),
        [(E140, Error, 1), (E022, Error, 2), (W108, Warning, 6)]
    );
}

#[test]
fn command_line_levels_apply_in_order() {
    let dir = scratch("flags");
    let f = write(&dir, "p.prose", NOISY);
    let options = Options {
        lints: vec![
            (E140, Level::Deny),
            (W104, Level::Warn),
            (W108, Level::Deny),
            (W108, Level::Allow),
        ],
        ..Options::default()
    };
    assert_eq!(check(&f, options), [(E140, Error, 1), (W104, Warning, 4)]);
}

#[test]
fn the_nearest_prose_toml_sets_levels_and_flags_override_it() {
    let dir = scratch("config");
    write(
        &dir,
        "prose.toml",
        "driver = \"mock\"\n[lints]\nW108 = \"allow\"\nE140 = \"warn\"\n",
    );
    // Found from a subdirectory, like Cargo.toml.
    let f = write(&dir, "flows/deep/p.prose", NOISY);
    assert_eq!(check(&f, Options::default()), [(E140, Warning, 1)]);
    let options = Options {
        lints: vec![(E140, Level::Allow)],
        ..Options::default()
    };
    assert_eq!(check(&f, options), []);
    // A program outside the project keeps the defaults.
    let outside = scratch("config-outside");
    let g = write(&outside, "p.prose", NOISY);
    assert_eq!(check(&g, Options::default()), [(W108, Warning, 6)]);
}

/// The E147s of checking a program under a `prose.toml` of `text`: (line, column) in it.
fn settings_problems(name: &str, text: &str) -> (Vec<(u32, u32)>, Vec<String>) {
    let dir = scratch(name);
    write(&dir, "prose.toml", text);
    let f = write(&dir, "p.prose", NOISY);
    let mut c = Compilation::new(Options::default());
    c.add_file(&f).expect("readable");
    assert!(c.error_count() > 0, "E147 is an error");
    c.diagnostics
        .iter()
        .filter(|d| d.code == E147)
        .map(|d| {
            let file = c.sources.get(d.file);
            assert!(file.path.ends_with("prose.toml"), "{}", file.path);
            let at = file.line_col(d.span.start as usize);
            ((at.line, at.column), d.message.clone())
        })
        .unzip()
}

#[test]
fn a_bad_lint_setting_is_located_in_prose_toml() {
    // Entries that name no lint: each is reported, and ignored.
    let (at, _) = settings_problems(
        "config-bad",
        "[lints]\nE999 = \"allow\"\nE007 = \"allow\"\nW104 = \"warn\"\n",
    );
    assert_eq!(at, [(2, 1), (3, 1)]);
    // A level the schema does not know: the file cannot be read.
    let (at, why) = settings_problems("config-bad-level", "[lints]\nW108 = \"off\"\n");
    assert_eq!(at, [(2, 8)]);
    assert!(why[0].contains("allow"), "{why:?}");
    // So is a misspelt key anywhere in the file: prosec reads it with prosevm's schema.
    let (at, why) = settings_problems(
        "config-bad-key",
        "drivr = \"mock\"\n[lints]\nW108 = \"deny\"\n",
    );
    assert_eq!(at, [(1, 1)]);
    assert!(why[0].contains("drivr"), "{why:?}");
}

/// Runs `prosec check` on `file` with `home` as the user's config directory; returns its exit
/// code and stderr.
fn check_as(home: &Path, file: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_prosec"))
        .arg("check")
        .arg(file)
        .env("XDG_CONFIG_HOME", home)
        .output()
        .expect("run prosec");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_users_lints_apply_and_the_projects_override_them() {
    let root = scratch("user-lints");
    let home = root.join("home");
    let user = write(&home, "prose/prose.toml", "[lints]\nW108 = \"allow\"\n");
    // No project file: the user's file alone allows W108.
    let lone = write(&root, "lone/p.prose", NOISY);
    let (code, err) = check_as(&home, &lone);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 error(s), 0 warning(s)"), "{err}");
    // Without the user's file, W108 warns.
    let (code, err) = check_as(&root.join("nobody"), &lone);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 error(s), 1 warning(s)"), "{err}");
    // A project that sets other codes keeps the user's W108, and adds its own.
    write(&root, "other/prose.toml", "[lints]\nE140 = \"warn\"\n");
    let other = write(&root, "other/p.prose", NOISY);
    let (code, err) = check_as(&home, &other);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 error(s), 1 warning(s)"), "{err}");
    assert!(err.contains("E140"), "{err}");
    // A project that sets W108 wins over the user's file, whatever case it writes it in.
    write(&root, "strict/prose.toml", "[lints]\nw108 = \"deny\"\n");
    let strict = write(&root, "strict/p.prose", NOISY);
    let (code, err) = check_as(&home, &strict);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("1 error(s), 0 warning(s)"), "{err}");
    assert!(err.contains("W108"), "{err}");
    // A bad entry in the user's file is reported there, once for all the projects checked.
    std::fs::write(&user, "[lints]\nW108 = \"allow\"\nE999 = \"deny\"\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_prosec"))
        .args(["check", "--format", "json"])
        .args([&lone, &other, &strict])
        .env("XDG_CONFIG_HOME", &home)
        .output()
        .expect("run prosec");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let text = doc.to_string();
    assert_eq!(text.matches("\"E147\"").count(), 1, "{text}");
    assert!(text.contains("home/prose/prose.toml"), "{text}");
}

#[test]
fn an_allow_comment_silences_one_statement_whole() {
    let dir = scratch("inline");
    let src = "# prose: allow(E140)\nsession \"\"\"\n  Fill {a} and\n  {b}\n\"\"\"\n  context: \"{c}\"\nsession \"Then {d}\"   # prose: allow(E140, W109)\nif **ok**:\n  session \"{e}\"\nsession \"{f}\"\n";
    let f = write(&dir, "p.prose", src);
    let every = Options {
        lints: vec![(E140, Level::Warn)],
        ..Options::default()
    };
    // Lines 2-6 (the whole session) and line 7 are silenced; the `if` and line 10 are not.
    assert_eq!(
        check(&f, every),
        [(W109, Warning, 8), (E140, Warning, 9), (E140, Warning, 10)]
    );
}

#[test]
fn an_allow_comment_before_a_compound_statement_covers_its_body() {
    let dir = scratch("inline-compound");
    let src = "# prose: allow(E140, W108)\nloop until **the work is done**:\n  session \"{x}\"\n  session \"{y}\"\nsession \"{z}\"\n";
    let f = write(&dir, "p.prose", src);
    let every = Options {
        lints: vec![(E140, Level::Warn)],
        ..Options::default()
    };
    assert_eq!(check(&f, every), [(E140, Warning, 5)]);
}

#[test]
fn comments_that_cannot_be_read_are_reported_and_errors_stay() {
    let dir = scratch("inline-bad");
    let src = "# prose: allow(E007)\nsession: nobody\n# prose: allow(E140\nsession \"x\"\n";
    let f = write(&dir, "p.prose", src);
    assert_eq!(
        check(&f, Options::default()),
        [(W120, Warning, 1), (E007, Error, 2), (W120, Warning, 3)]
    );
}

/// Runs the `prosec` binary; returns its exit code and stderr.
fn prosec(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_prosec"))
        .args(args)
        .output()
        .expect("run prosec");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_command_line_flags() {
    let dir = scratch("cli");
    let f = write(&dir, "p.prose", NOISY);
    let f = f.to_str().expect("utf-8 path");
    let (code, err) = prosec(&["check", f]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 error(s), 1 warning(s)"), "{err}");
    // Later flags win; a comma-separated list works.
    let (code, err) = prosec(&["check", "--deny", "W108,E140", "--allow", "E140", f]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("1 error(s), 0 warning(s)"), "{err}");
    let (code, err) = prosec(&["check", "--allow", "E999", f]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--allow E999: no such diagnostic code"),
        "{err}"
    );
    let (code, err) = prosec(&["check", "--warn", "E007", f]);
    assert_eq!(code, 2);
    assert!(err.contains("not a lint"), "{err}");
}

#[test]
fn computed_permission_patterns_warn_unless_a_fixed_directory_bounds_them() {
    let dir = scratch("computed-permissions");
    let f = write(
        &dir,
        "p.prose",
        "let dir = session \"Pick a directory\"\nconst root = \"ops/logs\"\n\
         agent bounded:\n  permissions:\n    write: [\"out/{dir}/\", \"./reports/{dir}\", \"*.md\", root, \"{root}/x\"]\n    read: [\"{placeholder}\"]\n\
         agent open:\n  permissions:\n    read: [\"{dir}\"]\n    write: [\"./{dir}/x\", \"*/{dir}\", dir]\n    execute: [\"{dir}.sh\"]\n\
         session: bounded\n  prompt: \"Go\"\nsession: open\n  prompt: \"Go\"\n",
    );
    let warned: Vec<u32> = check(&f, Options::default())
        .into_iter()
        .filter(|(code, _, _)| *code == W121)
        .map(|(_, severity, line)| {
            assert_eq!(severity, Warning);
            line
        })
        .collect();
    // Line 9 (`read`), line 10 three times (`write`), line 11 (`execute`); none for the
    // bounded agent, nor for a name that is no variable or a constant's fixed text.
    assert_eq!(warned, [9, 10, 10, 10, 11]);
}
