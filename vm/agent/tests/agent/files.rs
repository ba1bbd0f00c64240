//! read_file, write_file, edit_file, list_files and grep on a scratch directory.

use std::fs;

use prose_agent::permissions::UserAllow;
use serde_json::json;

use super::{call, err, ok, sandbox};
use crate::support::scratch;

#[tokio::test]
async fn write_file_creates_parents_and_replaces() {
    let dir = scratch("agent-write");
    let sb = sandbox(&dir, &[], UserAllow::default());
    let r = call(
        &sb,
        "write_file",
        json!({"path": "out/deep/notes.md", "content": "one\ntwo\n"}),
    )
    .await;
    assert!(
        ok(&r).contains("Created `out/deep/notes.md`"),
        "{}",
        r.output.content
    );
    assert_eq!(
        fs::read_to_string(dir.join("out/deep/notes.md")).unwrap(),
        "one\ntwo\n"
    );
    let r = call(
        &sb,
        "write_file",
        json!({"path": "./out/deep/notes.md", "content": "three"}),
    )
    .await;
    assert!(ok(&r).starts_with("Replaced"));
    assert_eq!(
        fs::read_to_string(dir.join("out/deep/notes.md")).unwrap(),
        "three"
    );
    assert_eq!(r.decisions.len(), 1);
    assert!(r.decisions[0].allowed);
    assert!(
        r.decisions[0].reason.contains("default"),
        "{:?}",
        r.decisions
    );
    let r = call(&sb, "write_file", json!({"path": "out", "content": "x"})).await;
    assert!(err(&r).contains("is a directory"));
}

#[tokio::test]
async fn read_file_numbers_lines_and_pages_with_offset_and_limit() {
    let dir = scratch("agent-read");
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    fs::write(dir.join("ten.txt"), &text).unwrap();
    let sb = sandbox(&dir, &[], UserAllow::default());

    let all = call(&sb, "read_file", json!({"path": "ten.txt"})).await;
    assert!(ok(&all).starts_with("     1\tline 1\n     2\tline 2\n"));
    assert!(ok(&all).ends_with("    10\tline 10\n"));

    let part = call(
        &sb,
        "read_file",
        json!({"path": "ten.txt", "offset": 4, "limit": 3}),
    )
    .await;
    assert_eq!(
        ok(&part),
        "     4\tline 4\n     5\tline 5\n     6\tline 6\n\n(more lines follow; continue with offset=7)"
    );
    let tail = call(&sb, "read_file", json!({"path": "ten.txt", "offset": 9})).await;
    assert_eq!(ok(&tail), "     9\tline 9\n    10\tline 10\n");

    let past = call(&sb, "read_file", json!({"path": "ten.txt", "offset": 11})).await;
    assert!(err(&past).contains("has 10 lines; offset 11 is past its end"));
    let zero = call(&sb, "read_file", json!({"path": "ten.txt", "limit": 0})).await;
    assert!(err(&zero).contains("`limit` must be at least 1"));

    fs::write(dir.join("long.txt"), "x".repeat(5000)).unwrap();
    let long = call(&sb, "read_file", json!({"path": "long.txt"})).await;
    assert!(ok(&long).contains("… [line cut]"));
    assert!(long.output.content.len() < 2100);

    fs::write(dir.join("blob.bin"), [0u8, 1, 2, 3]).unwrap();
    let bin = call(&sb, "read_file", json!({"path": "blob.bin"})).await;
    assert!(err(&bin).contains("binary file"));
    fs::write(dir.join("empty.txt"), "").unwrap();
    let empty = call(&sb, "read_file", json!({"path": "empty.txt"})).await;
    assert_eq!(ok(&empty), "`empty.txt` is empty.");
    let missing = call(&sb, "read_file", json!({"path": "nope.txt"})).await;
    assert!(err(&missing).contains("`nope.txt` does not exist"));
    fs::create_dir(dir.join("sub")).unwrap();
    let directory = call(&sb, "read_file", json!({"path": "sub"})).await;
    assert!(err(&directory).contains("is a directory"));
}

#[tokio::test]
async fn edit_file_replaces_unique_text_or_explains() {
    let dir = scratch("agent-edit");
    let path = dir.join("main.py");
    fs::write(&path, "def f():\n    return 1\n\ndef g():\n    return 1\n").unwrap();
    let sb = sandbox(&dir, &[], UserAllow::default());
    ok(&call(&sb, "read_file", json!({"path": "main.py"})).await);

    let twice = call(
        &sb,
        "edit_file",
        json!({"path": "main.py", "old_string": "return 1", "new_string": "return 2"}),
    )
    .await;
    assert!(err(&twice).contains("occurs 2 times"));
    assert!(
        fs::read_to_string(&path)
            .unwrap()
            .contains("return 1\n\ndef g"),
        "unchanged"
    );

    let unique = call(
        &sb,
        "edit_file",
        json!({"path": "main.py", "old_string": "def g():\n    return 1", "new_string": "def g():\n    return 3"}),
    )
    .await;
    assert!(ok(&unique).contains("Replaced 1 occurrence in `main.py` (at line 4)"));
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "def f():\n    return 1\n\ndef g():\n    return 3\n"
    );

    let all = call(
        &sb,
        "edit_file",
        json!({"path": "main.py", "old_string": "return", "new_string": "yield", "replace_all": true}),
    )
    .await;
    assert!(ok(&all).contains("Replaced 2 occurrences"));
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "def f():\n    yield 1\n\ndef g():\n    yield 3\n"
    );

    let missing = call(
        &sb,
        "edit_file",
        json!({"path": "main.py", "old_string": "     1\tdef f", "new_string": "x"}),
    )
    .await;
    assert!(err(&missing).contains("was not found"));
    let empty = call(
        &sb,
        "edit_file",
        json!({"path": "main.py", "old_string": "", "new_string": "x"}),
    )
    .await;
    assert!(err(&empty).contains("`old_string` is empty"));
    let same = call(
        &sb,
        "edit_file",
        json!({"path": "main.py", "old_string": "f", "new_string": "f"}),
    )
    .await;
    assert!(err(&same).contains("the same"));
    let nofile = call(
        &sb,
        "edit_file",
        json!({"path": "gone.py", "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert!(err(&nofile).contains("does not exist"));
}

/// A model that never looked at a file writes what it guesses the file holds: an existing,
/// non-empty file is overwritten or edited only once the session has read it (or created
/// it), and the refusal says what to do.
#[tokio::test]
async fn an_existing_file_is_changed_only_after_the_session_has_read_it() {
    let dir = scratch("agent-grounded");
    fs::write(dir.join("numbers.txt"), "12\n7\n").unwrap();
    fs::write(dir.join("empty.txt"), "").unwrap();
    let sb = sandbox(&dir, &[], UserAllow::default());

    let blind = call(
        &sb,
        "write_file",
        json!({"path": "numbers.txt", "content": "19"}),
    )
    .await;
    assert!(
        err(&blind).contains(
            "`numbers.txt` already exists and you have not read it: read it with read_file first"
        ),
        "{blind:?}"
    );
    let blind_edit = call(
        &sb,
        "edit_file",
        json!({"path": "numbers.txt", "old_string": "12", "new_string": "13"}),
    )
    .await;
    assert!(err(&blind_edit).contains("you have not read it"));
    assert_eq!(
        fs::read_to_string(dir.join("numbers.txt")).unwrap(),
        "12\n7\n"
    );

    // Nothing to guess in an empty file, and a file the session created is its own.
    ok(&call(
        &sb,
        "write_file",
        json!({"path": "empty.txt", "content": "a"}),
    )
    .await);
    ok(&call(
        &sb,
        "write_file",
        json!({"path": "new.txt", "content": "1"}),
    )
    .await);
    ok(&call(
        &sb,
        "write_file",
        json!({"path": "new.txt", "content": "2"}),
    )
    .await);
    assert_eq!(fs::read_to_string(dir.join("new.txt")).unwrap(), "2");

    // A read of part of the file is a read.
    ok(&call(&sb, "read_file", json!({"path": "numbers.txt", "limit": 1})).await);
    ok(&call(
        &sb,
        "edit_file",
        json!({"path": "numbers.txt", "old_string": "12", "new_string": "13"}),
    )
    .await);
    ok(&call(
        &sb,
        "write_file",
        json!({"path": "numbers.txt", "content": "20"}),
    )
    .await);
    assert_eq!(fs::read_to_string(dir.join("numbers.txt")).unwrap(), "20");

    // Another session has read nothing.
    let other = sandbox(&dir, &[], UserAllow::default());
    let again = call(
        &other,
        "write_file",
        json!({"path": "numbers.txt", "content": "0"}),
    )
    .await;
    assert!(err(&again).contains("you have not read it"));
}

#[tokio::test]
async fn list_files_globs_sorted_and_only_readable_files() {
    let dir = scratch("agent-list");
    for f in [
        "b.md",
        "a.md",
        "src/main.rs",
        "src/lib/util.rs",
        "docs/guide.md",
        "target/x.rs",
        ".prose/runs/r/journal.log",
    ] {
        let p = dir.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "x").unwrap();
    }
    fs::write(dir.join(".gitignore"), "target/\n").unwrap();
    let sb = sandbox(&dir, &[], UserAllow::default());

    let md = call(&sb, "list_files", json!({"pattern": "*.md"})).await;
    assert_eq!(ok(&md), "a.md\nb.md");
    let all_md = call(&sb, "list_files", json!({"pattern": "**/*.md"})).await;
    assert_eq!(ok(&all_md), "a.md\nb.md\ndocs/guide.md");
    let rs = call(&sb, "list_files", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(
        ok(&rs),
        "src/lib/util.rs\nsrc/main.rs",
        "ignored target/ is left out"
    );
    let src = call(&sb, "list_files", json!({"pattern": "src"})).await;
    assert_eq!(
        ok(&src),
        "src/lib/util.rs\nsrc/main.rs",
        "a directory lists its tree"
    );
    let everything = call(&sb, "list_files", json!({"pattern": "**"})).await;
    assert!(
        !ok(&everything).contains("journal.log"),
        ".prose is never listed"
    );
    assert!(everything.output.content.contains(".gitignore"));
    let none = call(&sb, "list_files", json!({"pattern": "*.py"})).await;
    assert_eq!(ok(&none), "No files match `*.py`.");
    let up = call(&sb, "list_files", json!({"pattern": "../*"})).await;
    assert!(err(&up).contains("`..` is not allowed"));

    let only_md = sandbox(&dir, &[("read", &["*.md"])], UserAllow::default());
    let listed = call(&only_md, "list_files", json!({"pattern": "**"})).await;
    assert_eq!(
        ok(&listed),
        "a.md\nb.md\ndocs/guide.md",
        "unreadable files are not shown"
    );
}

#[tokio::test]
async fn grep_finds_lines_with_path_and_number() {
    let dir = scratch("agent-grep");
    fs::create_dir_all(dir.join("src")).unwrap();
    fs::create_dir_all(dir.join(".prose")).unwrap();
    fs::write(dir.join("src/a.rs"), "fn main() {\n    todo_later()\n}\n").unwrap();
    fs::write(dir.join("src/b.py"), "# TODO later\nx = 1\n").unwrap();
    fs::write(dir.join("notes.md"), "todo: write docs\n").unwrap();
    fs::write(dir.join(".prose/secret.md"), "todo: hidden\n").unwrap();
    fs::write(dir.join("data.bin"), b"todo\0\x01\x02").unwrap();
    let sb = sandbox(&dir, &[], UserAllow::default());

    let r = call(&sb, "grep", json!({"pattern": "(?i)todo"})).await;
    assert_eq!(
        ok(&r),
        "notes.md:1:todo: write docs\nsrc/a.rs:2:    todo_later()\nsrc/b.py:1:# TODO later"
    );
    let r = call(&sb, "grep", json!({"pattern": "todo", "glob": "*.rs"})).await;
    assert_eq!(ok(&r), "src/a.rs:2:    todo_later()");
    let r = call(&sb, "grep", json!({"pattern": "x = \\d", "path": "src"})).await;
    assert_eq!(ok(&r), "src/b.py:2:x = 1");
    let r = call(&sb, "grep", json!({"pattern": "write", "path": "notes.md"})).await;
    assert_eq!(ok(&r), "notes.md:1:todo: write docs");
    let r = call(&sb, "grep", json!({"pattern": "nothing here"})).await;
    assert_eq!(ok(&r), "No matches for `nothing here`.");
    let r = call(&sb, "grep", json!({"pattern": "(unclosed"})).await;
    assert!(err(&r).contains("bad regular expression"));
    let r = call(&sb, "grep", json!({"pattern": "todo", "path": ".prose"})).await;
    assert!(err(&r).contains(".prose/"));

    let only_md = sandbox(&dir, &[("read", &["*.md"])], UserAllow::default());
    let r = call(&only_md, "grep", json!({"pattern": "(?i)todo"})).await;
    assert_eq!(
        ok(&r),
        "notes.md:1:todo: write docs",
        "unreadable files are not searched"
    );
    let r = call(
        &only_md,
        "grep",
        json!({"pattern": "x", "path": "src/b.py"}),
    )
    .await;
    assert!(err(&r).contains("matches none of the agent's read patterns"));
}

#[tokio::test]
async fn grep_stops_at_its_cap() {
    let dir = scratch("agent-grep-cap");
    let text: String = (0..1200).map(|i| format!("match {i}\n")).collect();
    fs::write(dir.join("many.txt"), text).unwrap();
    let sb = sandbox(&dir, &[], UserAllow::default());
    let r = call(&sb, "grep", json!({"pattern": "match"})).await;
    let out = ok(&r);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("many.txt:")).count(),
        500
    );
    assert!(out.contains("(stopped after 500 matching lines"));
}

#[tokio::test]
async fn bad_arguments_and_unknown_tools_are_tool_errors() {
    let dir = scratch("agent-args");
    let sb = sandbox(&dir, &[], UserAllow::default());
    let r = call(&sb, "read_file", json!({"file_path": "a.txt"})).await;
    assert!(
        err(&r).contains("invalid arguments for `read_file`"),
        "{}",
        r.output.content
    );
    assert!(r.output.content.contains("file_path"));
    let r = call(&sb, "write_file", json!({"path": "a.txt"})).await;
    assert!(err(&r).contains("missing field `content`"));
    let r = call(&sb, "bash", json!({"command": 42})).await;
    assert!(err(&r).contains("invalid arguments for `bash`"));
    let r = call(&sb, "grep", serde_json::Value::Null).await;
    assert!(err(&r).contains("missing field `pattern`"));
    let r = call(&sb, "delete_everything", json!({})).await;
    assert!(err(&r).contains("unknown tool `delete_everything`"));
    assert!(r.output.content.contains("read_file"));
}

#[tokio::test]
async fn pipes_and_devices_are_refused_instead_of_blocking() {
    let dir = scratch("agent-fifo");
    let fifo = dir.join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let sb = sandbox(&dir, &[], UserAllow::default());
    let within = |f| tokio::time::timeout(std::time::Duration::from_secs(10), f);
    let r = within(call(&sb, "read_file", json!({"path": "pipe"})))
        .await
        .expect("no hang");
    assert!(err(&r).contains("is not a regular file"));
    let r = within(call(
        &sb,
        "write_file",
        json!({"path": "pipe", "content": "x"}),
    ))
    .await
    .expect("no hang");
    assert!(err(&r).contains("is not a regular file"));
    let r = within(call(
        &sb,
        "edit_file",
        json!({"path": "pipe", "old_string": "a", "new_string": "b"}),
    ))
    .await
    .expect("no hang");
    assert!(err(&r).contains("is not a regular file"));
    let r = within(call(&sb, "grep", json!({"pattern": "a", "path": "pipe"})))
        .await
        .expect("no hang");
    assert!(err(&r).contains("is not a regular file"));
    let r = within(call(&sb, "grep", json!({"pattern": "a"})))
        .await
        .expect("no hang");
    assert_eq!(ok(&r), "No matches for `a`.");
}
