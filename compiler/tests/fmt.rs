//! `prosec fmt` over every program in the repository: a fixed point after one pass, the
//! same compiled program apart from line numbers, and the command line's `--check`.

use prosec::compile::{Compilation, Options};
use prosec::fmt::{format, FmtError, FmtOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_path_buf()
}

fn prose_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for e in entries {
        if e.is_dir() {
            if e.file_name()
                .is_some_and(|n| n == "target" || n == "node_modules")
            {
                continue;
            }
            prose_files(&e, out);
        } else if e.extension().is_some_and(|x| x == "prose") {
            out.push(e);
        }
    }
}

/// Every `.prose` file of the repository (examples, test corpora, benches).
fn corpus() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for d in ["examples", "compiler", "benches", "editors", "vm", "tests"] {
        let dir = repo().join(d);
        if dir.is_dir() {
            prose_files(&dir, &mut files);
        }
    }
    files
}

/// The compiled program as JSON with every source line and column taken out (and each
/// module's copy of its source text), or `None` when it has errors.
fn compiled_without_lines(path: &Path, text: &str) -> Option<serde_json::Value> {
    let mut c = Compilation::new(Options::default());
    let root = c.add_source(path, text);
    if c.error_count() > 0 {
        return None;
    }
    let (artifact, _) = prosec::codegen::build(&c, root);
    let mut json = serde_json::to_value(&artifact).expect("artifact as JSON");
    strip_positions(&mut json);
    for m in json["modules"].as_array_mut().expect("modules") {
        m.as_object_mut().expect("module").remove("source");
    }
    Some(json)
}

fn strip_positions(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            map.remove("line");
            map.remove("col");
            map.values_mut().for_each(strip_positions);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_positions),
        _ => {}
    }
}

#[test]
fn every_program_reaches_a_fixed_point_and_compiles_the_same() {
    let files = corpus();
    assert!(files.len() > 150, "found only {} programs", files.len());
    let options = FmtOptions::default();
    let (mut formatted, mut compared, mut refused) = (0, 0, Vec::new());
    for path in &files {
        let text = std::fs::read_to_string(path).expect("read");
        let once = match format(&text, &options) {
            Ok(t) => t,
            Err(FmtError::Syntax(d)) => {
                // Only programs that do not parse are refused, and `check` says why.
                assert!(d.iter().all(|d| d.is_error()));
                refused.push(path.clone());
                continue;
            }
            Err(e) => panic!("{}: {e}", path.display()),
        };
        formatted += 1;
        let twice = format(&once, &options).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(once, twice, "{}: not a fixed point", path.display());
        let wide = format(&text, &FmtOptions { indent_width: 4 })
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            format(&wide, &options).ok().as_ref(),
            Some(&once),
            "{}",
            path.display()
        );
        if let Some(before) = compiled_without_lines(path, &text) {
            let after = compiled_without_lines(path, &once)
                .unwrap_or_else(|| panic!("{}: has errors once formatted", path.display()));
            assert!(
                before == after,
                "{}: compiles differently once formatted",
                path.display()
            );
            compared += 1;
        }
    }
    assert!(formatted > 150, "formatted only {formatted}");
    assert!(compared > 100, "compared only {compared}");
    // The spec's fragments with `...` placeholders are the only programs that do not parse.
    assert!(refused.len() <= 10, "refused {refused:?}");
    for path in &refused {
        let text = std::fs::read_to_string(path).expect("read");
        assert!(text.contains("..."), "{} refused", path.display());
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("prosec-fmt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn prosec(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_prosec"))
        .args(args)
        .output()
        .expect("run prosec");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_shows_a_diff_and_fails_then_fmt_rewrites() {
    let dir = scratch("check");
    let file = dir.join("a.prose");
    std::fs::write(&file, "agent w:\n    model:opus\nsession: w\n").expect("write");
    let path = file.to_str().expect("utf-8");
    let (code, out, err) = prosec(&["fmt", "--check", path]);
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("-    model:opus\n+  model: opus\n"), "{out}");
    assert!(err.contains("1 of 1 file(s) would be reformatted"), "{err}");
    let (code, _, err) = prosec(&["fmt", dir.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "agent w:\n  model: opus\nsession: w\n"
    );
    let (code, out, _) = prosec(&["fmt", "--check", path]);
    assert_eq!((code, out.as_str()), (0, ""));
}

#[test]
fn indent_width_comes_from_prose_toml() {
    let dir = scratch("toml");
    std::fs::write(dir.join("prose.toml"), "[fmt]\nindent-width = 4\n").expect("toml");
    let file = dir.join("a.prose");
    std::fs::write(&file, "if true:\n  session \"x\"\n").expect("write");
    let (code, _, err) = prosec(&["fmt", file.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "if true:\n    session \"x\"\n"
    );
    std::fs::write(dir.join("prose.toml"), "[fmt]\nindent-width = 0\n").expect("toml");
    let (code, _, err) = prosec(&["fmt", file.to_str().expect("utf-8")]);
    assert_eq!(code, 2);
    assert!(
        err.contains("indent-width must be between 1 and 8"),
        "{err}"
    );
}

#[test]
fn a_file_that_does_not_parse_is_left_alone_with_its_errors() {
    let dir = scratch("broken");
    let file = dir.join("a.prose");
    std::fs::write(&file, "agent :\n  model: opus\n").expect("write");
    let (code, _, err) = prosec(&["fmt", file.to_str().expect("utf-8")]);
    assert_eq!(
        code, 1,
        "a program that does not parse fails as `check` does"
    );
    assert!(err.contains("error[E"), "{err}");
    assert!(err.contains("not formatted"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "agent :\n  model: opus\n"
    );
}
