//! The `prosec` command line: `build` then `dis` of what it wrote, and the errors a first
//! use hits (an empty directory, a file that is not an artifact).

use std::path::PathBuf;
use std::process::Command;

/// A fresh scratch directory for test `name`.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("prosec-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Runs `prosec` with `args`: exit code, stdout, stderr.
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
fn dis_lists_what_build_wrote() {
    let dir = scratch("dis");
    let src = dir.join("hello.prose");
    std::fs::write(
        &src,
        "input name: \"Who\"\nsession \"Say hello to {name}\"\n",
    )
    .expect("write");
    let pbc = dir.join("hello.pbc");
    let (code, _, err) = prosec(&[
        "build",
        src.to_str().expect("utf-8"),
        "-o",
        pbc.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = prosec(&["dis", pbc.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("session \"Say hello to {name}\""), "{out}");
    assert!(
        out.contains(&format!(
            "format    {}",
            bytecode_spec::artifact::FORMAT_VERSION
        )),
        "{out}"
    );
    // A source file is not an artifact: a clear error, not a panic.
    let (code, _, err) = prosec(&["dis", src.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("hello.prose"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn checking_a_directory_without_programs_is_an_error() {
    let dir = scratch("empty");
    let (code, _, err) = prosec(&["check", dir.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no .prose files under"), "{err}");
}

#[test]
fn check_explain_prints_a_codes_page() {
    let (code, out, _) = prosec(&["check", "--explain", "e007"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("### E007: undefined agent"), "{out}");
    assert!(out.contains("```prose"), "{out}");
    let (code, _, err) = prosec(&["check", "--explain", "E999"]);
    assert_eq!(code, 2);
    assert!(err.contains("`E999` is not a diagnostic code"), "{err}");
}

#[test]
fn output_into_a_reader_that_stops_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("pipe");
    // A program far larger than a pipe's buffer, laid out badly, so `--check` writes a
    // long diff.
    let line = "let   x =   session \"Say hello\"   \n";
    let src = dir.join("big.prose");
    std::fs::write(&src, line.repeat(20_000)).expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_prosec"))
        .args(["fmt", "--check", src.to_str().expect("utf-8")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run prosec");
    // The reader goes away before reading anything, as `| head -0` does.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}
